//! A builder for [`Program`]s in Rust.
//!
//! ```
//! use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
//! use offload_sched::schedule::{schedule, ScheduleOptions};
//!
//! let mut p = ProgramBuilder::new("saxpy");
//! let x = p.buffer("x", ElemType::F32, 1024, Init::Iota);
//! let y = p.buffer("y", ElemType::F32, 1024, Init::Fill(1.0));
//! p.target("saxpy", "saxpy")
//!     .num(2.0).arg(x).arg(y)
//!     .map(MapType::To, x)
//!     .map(MapType::ToFrom, y);
//! let program = p.build();
//!
//! let graph = offload_sched::lower::lower(&program).unwrap();
//! let sched = schedule(&graph, &ScheduleOptions::default());
//! offload_sched::verify::verify(&graph, &sched).unwrap();
//! println!("{sched}");
//! assert_eq!(sched.host_waits().count(), 1);
//! ```

use super::program::*;
use super::typed::{Buf, Elem, ProgramTag, TypedSection};
use super::types::{Buffer, BufferId, ElemType, Init, Section};
use std::cell::RefCell;

/// A buffer or a part of one, as a builder argument: a `BufferId` means the whole buffer.
/// Typed handles ([`Buf`], [`Buf::part`]) keep their program's tag, so the builder can
/// refuse a handle of another program.
#[derive(Clone, Copy, Debug)]
pub enum Sel {
    Whole(BufferId),
    Part(Section),
    /// A whole buffer by typed handle.
    Handle(BufferId, ProgramTag),
    /// A section of a typed handle's buffer.
    HandlePart(TypedSection),
}

impl<T: Elem> From<Buf<T>> for Sel {
    fn from(b: Buf<T>) -> Sel {
        Sel::Handle(b.id(), b.tag())
    }
}

impl From<TypedSection> for Sel {
    fn from(s: TypedSection) -> Sel {
        Sel::HandlePart(s)
    }
}

impl From<BufferId> for Sel {
    fn from(b: BufferId) -> Sel {
        Sel::Whole(b)
    }
}

impl From<Section> for Sel {
    fn from(s: Section) -> Sel {
        Sel::Part(s)
    }
}

/// Builds a [`Program`] construct by construct, in program order.
///
/// Misuse that the types cannot rule out (a handle of another builder, a `BufferId` past
/// the declared buffers) is not a panic: it is recorded, and lowering the program
/// ([`crate::lower::lower`], [`crate::Plan::new`]) fails naming it.
#[derive(Debug, Default)]
pub struct ProgramBuilder {
    program: Program,
    /// Bodies of open `target data` and `taskgraph` constructs (innermost last).
    stack: Vec<Vec<Construct>>,
    /// Misuse found so far (moved into the program by `build`).
    misuse: RefCell<Vec<String>>,
}

impl ProgramBuilder {
    pub fn new(name: &str) -> ProgramBuilder {
        ProgramBuilder {
            program: Program {
                name: name.to_string(),
                devices: 1,
                ..Program::default()
            },
            stack: vec![Vec::new()],
            misuse: RefCell::new(Vec::new()),
        }
    }

    /// Declares a host buffer of `len` elements of `T`, all zero unless bound to
    /// application memory per run; returns its typed handle.
    pub fn buf<T: Elem>(&mut self, name: &str, len: u64) -> Buf<T> {
        self.buf_init(name, len, Init::Zeros)
    }

    /// Declares a host buffer of `len` elements of `T` with initial contents `init`
    /// (used by every run that does not bind the buffer); returns its typed handle.
    pub fn buf_init<T: Elem>(&mut self, name: &str, len: u64, init: Init) -> Buf<T> {
        let id = self.buffer(name, T::TYPE, len, init);
        self.program.tag.remember(&self.program.name, id, name);
        Buf::new(id, len, self.program.tag)
    }

    /// The identity of the program being built (typed handles carry it).
    pub fn tag(&self) -> ProgramTag {
        self.program.tag
    }

    /// Declares a host buffer of `len` elements; returns its id.
    pub fn buffer(&mut self, name: &str, ty: ElemType, len: u64, init: Init) -> BufferId {
        self.program.buffers.push(Buffer {
            name: name.to_string(),
            ty,
            len,
            init,
        });
        BufferId(self.program.buffers.len() as u32 - 1)
    }

    /// Sets the number of devices (default 1).
    pub fn devices(&mut self, n: u32) -> &mut Self {
        self.program.devices = n;
        self
    }

    /// Declares a user kernel.
    pub fn kernel(&mut self, sig: super::kernels::KernelSig) -> &mut Self {
        self.program.kernels.push(sig);
        self
    }

    /// Resolves a selection to a section. A buffer this builder did not declare (an id
    /// past its buffers, or a typed handle of another program) is recorded as misuse
    /// (lowering the program then fails naming it) and resolves to an empty section.
    pub fn sec(&self, s: impl Into<Sel>) -> Section {
        let s = s.into();
        let (id, tag) = match s {
            Sel::Whole(b) => (b, None),
            Sel::Part(p) => (p.buf, None),
            Sel::Handle(b, t) => (b, Some(t)),
            Sel::HandlePart(p) => (p.section.buf, Some(p.tag)),
        };
        if let Some(t) = tag.filter(|t| !t.same(self.program.tag)) {
            let (buffer, why) = super::typed::foreign_handle(t, id, &self.program.name);
            self.misuse.borrow_mut().push(format!(
                "buffer `{buffer}` was used in another program: {why}"
            ));
            return Section::new(id, 0, 0);
        }
        let Some(buffer) = self.program.buffers.get(id.index()) else {
            self.misuse.borrow_mut().push(format!(
                "buffer id {} does not exist (program \"{}\" declares {} buffers)",
                id.0,
                self.program.name,
                self.program.buffers.len()
            ));
            return Section::new(id, 0, 0);
        };
        match s {
            Sel::Whole(b) | Sel::Handle(b, _) => Section::new(b, 0, buffer.len),
            Sel::Part(p) => p,
            Sel::HandlePart(p) => p.section,
        }
    }

    fn push(&mut self, c: Construct) {
        self.stack.last_mut().expect("body stack").push(c);
    }

    /// Starts a target region running `kernel`; finish it by dropping the returned builder.
    pub fn target(&mut self, name: &str, kernel: &str) -> RegionBuilder<'_> {
        RegionBuilder {
            region: Some(TargetRegion {
                name: name.to_string(),
                kernel: kernel.to_string(),
                args: Vec::new(),
                maps: Vec::new(),
                nowait: false,
                depends: Vec::new(),
                device: 0,
                launch: None,
                priority: 0,
                after: Vec::new(),
                span: None,
            }),
            b: self,
        }
    }

    /// Starts a target region calling library tile kernel `call.kernel()` (BLAS / LAPACK
    /// on column-major tiles, [`super::library`]) with `call`'s arguments in signature
    /// order; add its maps, dependences and clauses to the returned builder. Shapes and
    /// leading dimensions are checked when the program is lowered.
    pub fn library(&mut self, name: &str, call: super::LibraryCall) -> RegionBuilder<'_> {
        let mut r = self.target(name, call.kernel().name());
        for a in call.args() {
            r = match a {
                super::library::CallArg::Number(v) => r.num(v),
                super::library::CallArg::Tile(s) => r.arg(s),
            };
        }
        r
    }

    /// `target data map(...)` around the constructs `body` adds.
    pub fn target_data(
        &mut self,
        name: &str,
        maps: Vec<MapItem>,
        body: impl FnOnce(&mut ProgramBuilder),
    ) -> &mut Self {
        self.stack.push(Vec::new());
        body(self);
        let inner = self.stack.pop().expect("target data body");
        self.push(Construct::TargetData(TargetData {
            name: name.to_string(),
            maps,
            device: 0,
            body: inner,
            span: None,
        }));
        self
    }

    /// `taskgraph` around the constructs `body` adds, executed `repeat` times in program
    /// order (OpenMP 6.0 §14.3; semantics and limits on [`Taskgraph`]). The result
    /// equals the body written out `repeat` times; the lowering records each execution's
    /// ops ([`crate::lower::OpGraph::taskgraphs`]) for replay.
    ///
    /// `repeat` = 0 is not a panic: it is recorded as builder misuse and lowering the
    /// program fails naming the taskgraph. `body` runs once, whatever `repeat` is.
    ///
    /// ```
    /// use offload_sched::model::{ElemType, Init, MapType, ProgramBuilder};
    ///
    /// let mut p = ProgramBuilder::new("loop");
    /// let x = p.buffer("x", ElemType::F32, 64, Init::Iota);
    /// let y = p.buffer("y", ElemType::F32, 64, Init::Zeros);
    /// let maps = vec![p.map(MapType::To, x), p.map(MapType::ToFrom, y)];
    /// p.target_data("d", maps, |p| {
    ///     p.taskgraph("tg", 3, |p| {
    ///         p.target("axpy", "saxpy").num(1.0).arg(x).arg(y);
    ///     });
    /// });
    /// let g = offload_sched::lower::lower(&p.build()).unwrap();
    /// assert_eq!(g.taskgraphs[0].iterations.len(), 3);
    /// ```
    pub fn taskgraph(
        &mut self,
        name: &str,
        repeat: u32,
        body: impl FnOnce(&mut ProgramBuilder),
    ) -> &mut Self {
        if repeat == 0 {
            self.misuse.borrow_mut().push(format!(
                "taskgraph \"{name}\" has repeat = 0 (it must execute at least once)"
            ));
        }
        self.stack.push(Vec::new());
        body(self);
        let inner = self.stack.pop().expect("taskgraph body");
        self.push(Construct::Taskgraph(Taskgraph {
            name: name.to_string(),
            repeat,
            body: inner,
            span: None,
        }));
        self
    }

    fn data(&mut self, name: &str, maps: Vec<MapItem>) -> DataConstruct {
        let _ = self;
        DataConstruct {
            name: name.to_string(),
            maps,
            nowait: false,
            depends: Vec::new(),
            device: 0,
            after: Vec::new(),
            span: None,
        }
    }

    /// `target enter data map(...)`; returns a builder for nowait/depend.
    pub fn enter_data(&mut self, name: &str, maps: Vec<MapItem>) -> DataBuilder<'_> {
        let d = self.data(name, maps);
        DataBuilder {
            data: Some(d),
            kind: 0,
            b: self,
        }
    }

    /// `target exit data map(...)`.
    pub fn exit_data(&mut self, name: &str, maps: Vec<MapItem>) -> DataBuilder<'_> {
        let d = self.data(name, maps);
        DataBuilder {
            data: Some(d),
            kind: 1,
            b: self,
        }
    }

    /// `target update to(...) from(...)`: items with map type `To` or `From`.
    pub fn update(&mut self, name: &str, motions: Vec<MapItem>) -> DataBuilder<'_> {
        let d = self.data(name, motions);
        DataBuilder {
            data: Some(d),
            kind: 2,
            b: self,
        }
    }

    /// `#pragma omp taskwait` (its region is shown as `taskwait`; see
    /// [`ProgramBuilder::taskwait_named`]).
    pub fn taskwait(&mut self) -> &mut Self {
        self.taskwait_named("")
    }

    /// `#pragma omp taskwait` with a name for its region in schedules, DOT and run
    /// output (`taskwait = "tw"` in a graph file).
    pub fn taskwait_named(&mut self, name: &str) -> &mut Self {
        self.push(Construct::Taskwait {
            name: name.to_string(),
            span: None,
        });
        self
    }

    /// A host step reading and writing host buffers.
    pub fn host_task(&mut self, name: &str, reads: &[Sel], writes: &[Sel]) -> &mut Self {
        let reads = reads.iter().map(|s| self.sec(*s)).collect();
        let writes = writes.iter().map(|s| self.sec(*s)).collect();
        self.push(Construct::HostTask(HostTask {
            name: name.to_string(),
            reads,
            writes,
            kernel: None,
            args: Vec::new(),
            body: None,
            depends: Vec::new(),
            after: Vec::new(),
            lane: None,
            span: None,
        }));
        self
    }

    /// A host step running `kernel` on host memory with `args` (buffer arguments are
    /// read or written as the kernel's signature says).
    pub fn host_kernel(&mut self, name: &str, kernel: &str, args: Vec<Arg>) -> &mut Self {
        self.push(Construct::HostTask(HostTask {
            name: name.to_string(),
            reads: Vec::new(),
            writes: Vec::new(),
            kernel: Some(kernel.to_string()),
            args,
            body: None,
            depends: Vec::new(),
            after: Vec::new(),
            lane: None,
            span: None,
        }));
        self
    }

    /// A map item for `s`.
    pub fn map(&self, t: MapType, s: impl Into<Sel>) -> MapItem {
        MapItem::new(t, self.sec(s))
    }

    /// Finishes the program. Panics if a `target_data` body is still open (cannot happen
    /// through this API).
    pub fn build(mut self) -> Program {
        assert_eq!(self.stack.len(), 1, "unclosed target data");
        self.program.body = self.stack.pop().unwrap_or_default();
        self.program.builder_errors = self.misuse.into_inner();
        self.program
    }

    /// A host step running the Rust closure `f` (compiled once, called on every run).
    ///
    /// `reads` and `writes` declare what it touches, as for [`ProgramBuilder::host_task`]:
    /// the scheduler orders it after the device work that produces what it reads and
    /// before the work that reads what it writes, and waits only for those. `f` gets a
    /// [`HostCtx`](super::HostCtx) with typed views of exactly those sections:
    /// `ctx.read(x)?` (`&[T]`, declared in `reads` or `writes`), `ctx.write(y)?`
    /// (`&mut [T]`, declared in `writes`); element 0 of a view is its section's first
    /// element. An undeclared buffer, another type, a handle of another program, or a view
    /// overlapping a mutable one is a [`ViewError`](super::ViewError), never undefined
    /// behaviour.
    ///
    /// Errors of the run: an `Err` from `f`, or a panic in it (caught), stops the run with
    /// [`ExecError::HostFn`](crate::exec::ExecError::HostFn) naming the task; device
    /// memory is freed as for any failed op. A build with `panic = "abort"` cannot catch
    /// the panic.
    ///
    /// Calls: once per run of the plan, on the executor's host thread, after the host
    /// waits its sections need. The reference interpreter calls it too, on its own copies
    /// of the buffers, so a checked run ([`crate::Plan::reference`] beside a run) calls it
    /// twice: keep the closure's effects to its views (or tolerate the repeat).
    ///
    /// Graph files cannot hold closures: a program written out keeps the task's sections
    /// and loses `f`.
    ///
    /// ```
    /// use offload_sched::model::{Init, ProgramBuilder};
    /// use offload_sched::schedule::ScheduleOptions;
    ///
    /// let mut p = ProgramBuilder::new("host");
    /// let x = p.buf_init::<i64>("x", 4, Init::Iota);
    /// let y = p.buf::<i64>("y", 4);
    /// p.host_fn("double", &[x.into()], &[y.into()], move |ctx| {
    ///     let (x, y) = (ctx.read(x)?, ctx.write(y)?);
    ///     for (y, x) in y.iter_mut().zip(x) {
    ///         *y = 2 * x;
    ///     }
    ///     Ok(())
    /// });
    /// let plan = offload_sched::Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
    /// assert_eq!(plan.reference().unwrap().as_i64("y").unwrap(), [0, 2, 4, 6]);
    /// ```
    pub fn host_fn<F>(&mut self, name: &str, reads: &[Sel], writes: &[Sel], f: F) -> &mut Self
    where
        F: FnMut(&mut super::HostCtx<'_>) -> Result<(), super::BoxError> + Send + 'static,
    {
        let reads = reads.iter().map(|s| self.sec(*s)).collect();
        let writes = writes.iter().map(|s| self.sec(*s)).collect();
        let body = super::HostFn::new(self.program.tag, f);
        self.push(Construct::HostTask(HostTask {
            name: name.to_string(),
            reads,
            writes,
            kernel: None,
            args: Vec::new(),
            body: Some(body),
            depends: Vec::new(),
            after: Vec::new(),
            lane: None,
            span: None,
        }));
        self
    }
}

/// Adds arguments and clauses to a target region; the region is appended when dropped.
pub struct RegionBuilder<'a> {
    region: Option<TargetRegion>,
    b: &'a mut ProgramBuilder,
}

impl RegionBuilder<'_> {
    fn r(&mut self) -> &mut TargetRegion {
        self.region.as_mut().expect("region present until drop")
    }
    /// A buffer argument.
    pub fn arg(mut self, s: impl Into<Sel>) -> Self {
        let s = self.b.sec(s);
        self.r().args.push(Arg::Buffer(s));
        self
    }
    /// A scalar argument (converted to the parameter's type).
    pub fn num(mut self, v: f64) -> Self {
        self.r().args.push(Arg::Number(v));
        self
    }
    /// A flag argument of a library kernel ([`super::Trans`], [`super::Uplo`],
    /// [`super::Side`], [`super::Diag`]), passed as its `i32` code ([`super::Flag::code`]).
    pub fn flag(self, f: impl Into<super::Flag>) -> Self {
        self.num(f64::from(f.into().code()))
    }
    /// `map(t: s)`.
    pub fn map(mut self, t: MapType, s: impl Into<Sel>) -> Self {
        let s = self.b.sec(s);
        self.r().maps.push(MapItem::new(t, s));
        self
    }
    /// A map item with modifiers.
    pub fn map_item(mut self, m: MapItem) -> Self {
        self.r().maps.push(m);
        self
    }
    pub fn nowait(mut self) -> Self {
        self.r().nowait = true;
        self
    }
    pub fn depend(mut self, kind: DependType, s: impl Into<Sel>) -> Self {
        let section = self.b.sec(s);
        self.r().depends.push(Depend {
            kind,
            section,
            span: None,
        });
        self
    }
    pub fn device(mut self, d: u32) -> Self {
        self.r().device = d;
        self
    }
    /// `device = "auto"`: the lowering places the region ([`super::DEVICE_AUTO`]).
    pub fn device_auto(self) -> Self {
        self.device(super::DEVICE_AUTO)
    }
    /// Orders this region after the construct named `name`.
    pub fn after(mut self, name: &str) -> Self {
        self.r().after.push(name.to_string());
        self
    }
    /// `priority(n)` (OpenMP 5.2 §12.4): a hint, higher runs first, default 0. A region
    /// with `n > 0` runs on its device's high-priority stream (CUDA: the greatest
    /// priority of `cuCtxGetStreamPriorityRange`); results never depend on it.
    pub fn priority(mut self, n: u32) -> Self {
        self.r().priority = n;
        self
    }
    pub fn launch(mut self, teams: u32, threads: u32) -> Self {
        self.r().launch = Some(LaunchShape { teams, threads });
        self
    }
}

impl Drop for RegionBuilder<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.region.take() {
            self.b.push(Construct::Target(r));
        }
    }
}

/// Adds `nowait`/`depend`/`device` to an enter/exit/update construct; appended on drop.
pub struct DataBuilder<'a> {
    data: Option<DataConstruct>,
    kind: u8,
    b: &'a mut ProgramBuilder,
}

impl DataBuilder<'_> {
    pub fn nowait(mut self) -> Self {
        if let Some(d) = self.data.as_mut() {
            d.nowait = true;
        }
        self
    }
    pub fn depend(mut self, kind: DependType, s: impl Into<Sel>) -> Self {
        let section = self.b.sec(s);
        if let Some(d) = self.data.as_mut() {
            d.depends.push(Depend {
                kind,
                section,
                span: None,
            });
        }
        self
    }
    pub fn device(mut self, dev: u32) -> Self {
        if let Some(d) = self.data.as_mut() {
            d.device = dev;
        }
        self
    }
    /// `device = "auto"`: the lowering places the construct ([`super::DEVICE_AUTO`]).
    pub fn device_auto(self) -> Self {
        self.device(super::DEVICE_AUTO)
    }
}

impl Drop for DataBuilder<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.data.take() {
            let c = match self.kind {
                0 => Construct::EnterData(d),
                1 => Construct::ExitData(d),
                _ => Construct::Update(d),
            };
            self.b.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_of_another_program_is_refused_by_lowering_not_a_panic() {
        let mut a = ProgramBuilder::new("a");
        let _ = a.buf::<f32>("first", 4);
        let xa = a.buf::<f32>("x", 4);
        let mut b = ProgramBuilder::new("b");
        let _ = b.buf::<f32>("y", 4);
        let _ = b.buf::<f32>("z", 8);
        b.host_task("t", &[xa.into()], &[]);
        b.host_task("u", &[BufferId(9).into()], &[]);
        let p = b.build();
        let e = crate::lower::lower(&p).unwrap_err().to_string();
        assert_eq!(
            e,
            "program \"b\": builder misuse: buffer `x` was used in another program: the \
             handle belongs to program \"a\", not to \"b\" (1 more)"
        );
        assert_eq!(p.builder_errors.len(), 2);
        assert!(p.builder_errors[1].contains("buffer id 9 does not exist"));
    }

    #[test]
    fn typed_handles_select_whole_buffers_and_parts() {
        let mut a = ProgramBuilder::new("a");
        let x = a.buf_init::<f64>("x", 10, Init::Iota);
        assert_eq!(a.sec(x), Section::new(x.id(), 0, 10));
        assert_eq!(a.sec(x.part(2, 3)), Section::new(x.id(), 2, 3));
        assert_eq!(a.build().buffers[0].ty, ElemType::F64);
    }
}
