//! The program model: buffers, kernels and a body of OpenMP-style constructs.

use super::kernels::{find_kernel, KernelSig};
use super::types::{Buffer, BufferId, ElemType, Section};
use std::fmt;

/// A byte range in the graph file a value came from (for error carets). Programs built
/// in Rust carry no spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }
}

/// Map types of OpenMP 5.2 §5.8.3 (`map` clause), plus the exit-only `release`/`delete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MapType {
    To,
    From,
    ToFrom,
    Alloc,
    Release,
    Delete,
}

impl MapType {
    pub const ALL: [MapType; 6] = [
        MapType::To,
        MapType::From,
        MapType::ToFrom,
        MapType::Alloc,
        MapType::Release,
        MapType::Delete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MapType::To => "to",
            MapType::From => "from",
            MapType::ToFrom => "tofrom",
            MapType::Alloc => "alloc",
            MapType::Release => "release",
            MapType::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<MapType> {
        MapType::ALL.into_iter().find(|m| m.name() == s)
    }

    /// True if the map copies host → device on entry (`to`, `tofrom`).
    pub fn has_to(self) -> bool {
        matches!(self, MapType::To | MapType::ToFrom)
    }

    /// True if the map copies device → host on exit (`from`, `tofrom`).
    pub fn has_from(self) -> bool {
        matches!(self, MapType::From | MapType::ToFrom)
    }
}

impl fmt::Display for MapType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One map item: `map([always,] [present,] [close,] type: buf[lo:len])`.
#[derive(Clone, Debug, PartialEq)]
pub struct MapItem {
    pub map_type: MapType,
    pub section: Section,
    pub always: bool,
    pub present: bool,
    /// Accepted and ignored (a hint about memory placement).
    pub close: bool,
    pub span: Option<Span>,
}

impl MapItem {
    pub fn new(map_type: MapType, section: Section) -> MapItem {
        MapItem {
            map_type,
            section,
            always: false,
            present: false,
            close: false,
            span: None,
        }
    }
    pub fn always(mut self) -> MapItem {
        self.always = true;
        self
    }
    pub fn present(mut self) -> MapItem {
        self.present = true;
        self
    }
}

/// `depend(in|out|inout: buf[lo:len])` (OpenMP 5.2 §15.9.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DependType {
    In,
    Out,
    InOut,
}

impl DependType {
    pub fn name(self) -> &'static str {
        match self {
            DependType::In => "in",
            DependType::Out => "out",
            DependType::InOut => "inout",
        }
    }
    pub fn parse(s: &str) -> Option<DependType> {
        match s {
            "in" => Some(DependType::In),
            "out" => Some(DependType::Out),
            "inout" => Some(DependType::InOut),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Depend {
    pub kind: DependType,
    pub section: Section,
    pub span: Option<Span>,
}

/// A scalar kernel argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    F32(f32),
    F64(f64),
    I32(i32),
    I64(i64),
    U8(u8),
}

impl Scalar {
    /// Converts a number to a scalar of type `ty` (`as` conversion).
    pub fn of(ty: ElemType, v: f64) -> Scalar {
        match ty {
            ElemType::F32 => Scalar::F32(v as f32),
            ElemType::F64 => Scalar::F64(v),
            ElemType::I32 => Scalar::I32(v as i32),
            ElemType::I64 => Scalar::I64(v as i64),
            ElemType::U8 => Scalar::U8(v as u8),
        }
    }
    pub fn ty(self) -> ElemType {
        match self {
            Scalar::F32(_) => ElemType::F32,
            Scalar::F64(_) => ElemType::F64,
            Scalar::I32(_) => ElemType::I32,
            Scalar::I64(_) => ElemType::I64,
            Scalar::U8(_) => ElemType::U8,
        }
    }
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::F32(v) => v as f64,
            Scalar::F64(v) => v,
            Scalar::I32(v) => v as f64,
            Scalar::I64(v) => v as f64,
            Scalar::U8(v) => v as f64,
        }
    }
}

/// A kernel argument as written: a buffer section, or a number (typed by the signature).
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Buffer(Section),
    Number(f64),
}

impl Arg {
    /// The numbers of `args` and their buffer sections, each in argument order (a
    /// library or built-in call's scalars and tiles).
    pub fn split(args: &[Arg]) -> (Vec<f64>, Vec<Section>) {
        let mut numbers = Vec::new();
        let mut buffers = Vec::new();
        for a in args {
            match a {
                Arg::Number(v) => numbers.push(*v),
                Arg::Buffer(s) => buffers.push(*s),
            }
        }
        (numbers, buffers)
    }
}

/// Launch shape `(teams, threads per team)`; derived from the section length when absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub teams: u32,
    pub threads: u32,
}

/// `#pragma omp target` with one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetRegion {
    pub name: String,
    pub kernel: String,
    pub args: Vec<Arg>,
    pub maps: Vec<MapItem>,
    pub nowait: bool,
    pub depends: Vec<Depend>,
    pub device: u32,
    pub launch: Option<LaunchShape>,
    /// `priority(n)` (OpenMP 5.2 §12.4 "priority Clause", on `task` and `target`; 0
    /// when absent): a hint, higher runs first. The scheduler puts a device region with
    /// `priority > 0` on its device's high-priority stream (`schedule/priority.rs`);
    /// results never depend on it.
    pub priority: u32,
    /// Names of earlier constructs this one must follow (task-graph style ordering, like
    /// a `depend` on a whole construct). Graph files may name later constructs; the
    /// loader reorders and rejects cycles.
    pub after: Vec<String>,
    pub span: Option<Span>,
}

impl TargetRegion {
    /// The buffer arguments no map item of the region contains, in argument order: the
    /// sections OpenMP 5.2 §5.8.9 maps implicitly (`tofrom` when not present; a present
    /// one is used in place). Elision, eviction and the distributed split take them
    /// from here; the lowering (`lower/builder.rs`) applies the same rule while it
    /// checks every argument.
    pub fn unmapped_args(&self) -> impl Iterator<Item = Section> + '_ {
        self.args.iter().filter_map(|a| match a {
            Arg::Buffer(s) if !self.maps.iter().any(|m| m.section.contains(s)) => Some(*s),
            _ => None,
        })
    }
}

/// `target enter data`, `target exit data` or `target update`: maps (or motions) only.
#[derive(Clone, Debug, PartialEq)]
pub struct DataConstruct {
    pub name: String,
    /// For `update`, `map_type` is `To` or `From` (the motion).
    pub maps: Vec<MapItem>,
    pub nowait: bool,
    pub depends: Vec<Depend>,
    pub device: u32,
    /// See [`TargetRegion::after`].
    pub after: Vec<String>,
    pub span: Option<Span>,
}

/// `target data` around a nested body; the mapping is entered before the body and exited
/// after it (OpenMP 5.2 §13.6.1). Synchronous: it takes no `nowait`.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetData {
    pub name: String,
    pub maps: Vec<MapItem>,
    pub device: u32,
    pub body: Vec<Construct>,
    pub span: Option<Span>,
}

/// `taskgraph` (OpenMP 6.0 §14.3) run `repeat` times in a row: the body executes
/// `repeat` times in program order, as the loop around an OpenMP taskgraph would
/// (`for (i = 0; i < repeat; i++) { #pragma omp taskgraph { body } }`). OpenMP records
/// the body's task graph on its first execution and may replay it on later ones; this
/// crate gives the same results as the body written out `repeat` times, and the
/// lowering records where each execution's ops are ([`crate::lower::TaskgraphInfo`]) so
/// that an executor can record the first and replay it for the others. The clauses
/// `graph_id`, `graph_reset`, `if` and `nogroup` are not modelled.
///
/// Rules: `repeat` ≥ 1 (0 is refused by [`crate::lower::lower`]); a taskgraph inside
/// another taskgraph is refused. The body may hold any other construct, `target data`,
/// `taskwait` and host tasks included. The name is the construct's, for messages and
/// `after`; it makes no region of its own. Regions of execution `k` ≥ 1 are shown as
/// `name@k` (`step0@1`; execution 0 keeps the plain name), see [`crate::lower`].
///
/// LLVM's `taskgraph` (libomp's record and replay, `OMP_TASKGRAPH_EXPERIMENTAL`) is
/// host-only so far: it records host tasks, not target regions.
#[derive(Clone, Debug, PartialEq)]
pub struct Taskgraph {
    pub name: String,
    /// How many times the body executes, ≥ 1.
    pub repeat: u32,
    pub body: Vec<Construct>,
    pub span: Option<Span>,
}

/// A named host step that reads and writes host buffers (or only waits, when both
/// lists are empty). `kernel` optionally names a built-in or user kernel the host runs
/// on the host copies, with `args`; `body` optionally is a Rust closure the host calls
/// with views of `reads` and `writes` ([`super::ProgramBuilder::host_fn`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTask {
    pub name: String,
    pub reads: Vec<Section>,
    pub writes: Vec<Section>,
    pub kernel: Option<String>,
    pub args: Vec<Arg>,
    /// The closure of a `host_fn` (run after `kernel`, when both are given). Graph files
    /// cannot hold it.
    pub body: Option<super::HostFn>,
    pub depends: Vec<Depend>,
    /// See [`TargetRegion::after`].
    pub after: Vec<String>,
    /// The host lane ([`crate::schedule::LaneId`] index) the task runs on, taken as the
    /// last lane when the schedule has fewer; `None` (the builder's and graph files'
    /// default): the scheduler's choice. The distributed split pins its receive tasks
    /// to a lane of their own ([`crate::distribute`]), so a receive that waits holds
    /// back no other host task.
    pub lane: Option<u32>,
    pub span: Option<Span>,
}

/// One construct of a program body.
#[derive(Clone, Debug, PartialEq)]
pub enum Construct {
    Target(TargetRegion),
    TargetData(TargetData),
    /// `taskgraph`, executed [`Taskgraph::repeat`] times (OpenMP 6.0 §14.3).
    Taskgraph(Taskgraph),
    EnterData(DataConstruct),
    ExitData(DataConstruct),
    Update(DataConstruct),
    /// `#pragma omp taskwait`: the host waits for every earlier `nowait` construct.
    /// `name` is what the program calls it (`taskwait = "tw"`; may be empty): its region
    /// is shown by that name, `taskwait` when empty.
    Taskwait {
        name: String,
        span: Option<Span>,
    },
    HostTask(HostTask),
}

impl Construct {
    /// The construct's kind as written in graph files.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Construct::Target(_) => "target",
            Construct::TargetData(_) => "target_data",
            Construct::Taskgraph(_) => "taskgraph",
            Construct::EnterData(_) => "enter_data",
            Construct::ExitData(_) => "exit_data",
            Construct::Update(_) => "update",
            Construct::Taskwait { .. } => "taskwait",
            Construct::HostTask(_) => "host",
        }
    }
}

/// The `device` of a construct that the lowering places (`device = "auto"` in graph
/// files, [`super::RegionBuilder::device_auto`]): on the device that already holds most
/// of its data, ties to the least-loaded one (the algorithm and its complexity are in
/// `src/lower/placement.rs`). Any other value is an explicit device, honoured as given.
pub const DEVICE_AUTO: u32 = u32::MAX;

/// A whole program: buffers, user kernels and a body of constructs in program order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub name: String,
    pub buffers: Vec<Buffer>,
    /// User kernels (built-ins need no declaration).
    pub kernels: Vec<KernelSig>,
    pub body: Vec<Construct>,
    /// Number of devices the program addresses (`device` clauses are `< devices`).
    pub devices: u32,
    /// Identity for typed handles ([`super::Buf`]); not part of the program's value.
    pub tag: super::ProgramTag,
    /// Misuse the [`super::ProgramBuilder`] recorded (a handle of another program, an
    /// unknown buffer id); lowering refuses a program that has any.
    pub builder_errors: Vec<String>,
}

impl Program {
    /// Sets the `device` of every device construct (target regions, target data, enter
    /// / exit data, updates, inside target data and taskgraph bodies too) to
    /// [`DEVICE_AUTO`], and the program's device count to `devices` (at least 1): the
    /// same program placed by the lowering over `devices` devices (the CLI's `--device
    /// auto --devices N`). Iterative; `O(constructs)`.
    pub fn place_all_auto(&mut self, devices: u32) {
        self.devices = devices.max(1);
        let mut stack: Vec<&mut Vec<Construct>> = vec![&mut self.body];
        while let Some(body) = stack.pop() {
            for c in body.iter_mut() {
                match c {
                    Construct::Target(t) => t.device = DEVICE_AUTO,
                    Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                        d.device = DEVICE_AUTO
                    }
                    Construct::TargetData(d) => {
                        d.device = DEVICE_AUTO;
                        stack.push(&mut d.body);
                    }
                    Construct::Taskgraph(t) => stack.push(&mut t.body),
                    Construct::Taskwait { .. } | Construct::HostTask(_) => {}
                }
            }
        }
    }

    /// The buffer with this id. Panics if the id is not of this program.
    pub fn buffer(&self, id: BufferId) -> &Buffer {
        &self.buffers[id.index()]
    }

    /// Finds a buffer by name.
    pub fn buffer_id(&self, name: &str) -> Option<BufferId> {
        self.buffers
            .iter()
            .position(|b| b.name == name)
            .map(|i| BufferId(i as u32))
    }

    /// The whole buffer as a section.
    pub fn whole(&self, id: BufferId) -> Section {
        Section::new(id, 0, self.buffer(id).len)
    }

    /// Looks up a kernel: user declarations first, then the built-in library.
    pub fn kernel(&self, name: &str) -> Option<KernelSig> {
        self.kernel_ref(name).cloned()
    }

    /// Like [`Program::kernel`], without copying the signature.
    pub fn kernel_ref(&self, name: &str) -> Option<&KernelSig> {
        find_kernel(&self.kernels, name)
    }

    /// Formats a section with its buffer's name: `y[0:1024]`.
    pub fn section_name(&self, s: &Section) -> String {
        s.display(&self.buffers).to_string()
    }

    /// Number of constructs, counting nested bodies (a taskgraph's body once).
    pub fn construct_count(&self) -> usize {
        fn count(body: &[Construct]) -> usize {
            body.iter()
                .map(|c| match c {
                    Construct::TargetData(d) => 1 + count(&d.body),
                    Construct::Taskgraph(t) => 1 + count(&t.body),
                    _ => 1,
                })
                .sum()
        }
        count(&self.body)
    }
}
