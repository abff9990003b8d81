//! Code registered from Rust, for the embedded API: host steps as closures ([`HostFn`],
//! made by [`ProgramBuilder::host_fn`](super::ProgramBuilder::host_fn)) and kernels
//! ([`KernelBuilder`], from [`KernelSig::rust`], [`KernelSig::cuda_source`],
//! [`KernelSig::ptx`]): a Rust function for the host plugin, CUDA C or PTX text for the
//! CUDA plugin (compiled by NVRTC), or both.
//!
//! Both live in the program model and travel with it, through lowering into the op graph
//! and into a [`crate::Plan`]. They are shared, not copied: cloning a program clones
//! `Arc`s, and two programs compare equal only when they hold the very same closures
//! (`PartialEq` by pointer; `Debug` prints `<closure>`). Graph files cannot hold them:
//! [`crate::file::to_toml`] writes a host closure's task as a plain host task (its
//! sections) and a registered kernel as its signature without code.

use super::kernels::{Access, KernelSig, KernelSource, Param, ParamKind};
use super::typed::{Elem, ProgramTag};
use crate::runtime::views::{panic_text, BoxError, HostCtx, HostFnError, KernelArgs, ViewError};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};

/// The body of a host step: called with views of the task's declared sections.
type HostBody = dyn FnMut(&mut HostCtx<'_>) -> Result<(), BoxError> + Send;

/// A host step's closure ([`ProgramBuilder::host_fn`](super::ProgramBuilder::host_fn)),
/// shareable between clones of a program and between threads.
///
/// Concurrency contract: calls are serialized by a mutex (the closure is `FnMut`); a run
/// calls it once per run of its task, from the executor's host thread, and the reference
/// interpreter once per reference run. A closure that panicked is still called by later
/// runs (the mutex's poison is cleared): its state is whatever the panic left. A closure
/// that runs (or takes the reference of) a plan holding itself deadlocks.
#[derive(Clone)]
pub struct HostFn {
    body: Arc<Mutex<Box<HostBody>>>,
    program: ProgramTag,
}

impl HostFn {
    /// Wraps `f` as a host step of the program tagged `program` (typed handles the
    /// closure uses must be of it).
    pub fn new<F>(program: ProgramTag, f: F) -> HostFn
    where
        F: FnMut(&mut HostCtx<'_>) -> Result<(), BoxError> + Send + 'static,
    {
        HostFn {
            body: Arc::new(Mutex::new(Box::new(f))),
            program,
        }
    }

    /// The program the closure was built for.
    pub fn program(&self) -> ProgramTag {
        self.program
    }

    /// Calls the closure with `ctx`, catching a panic.
    ///
    /// Errors: [`HostFnError::View`] when it returns a [`ViewError`] (through `?`),
    /// [`HostFnError::Failed`] for any other error, [`HostFnError::Panicked`].
    pub(crate) fn call(&self, ctx: &mut HostCtx<'_>) -> Result<(), HostFnError> {
        let mut f = self.body.lock().unwrap_or_else(PoisonError::into_inner);
        match catch_unwind(AssertUnwindSafe(|| (*f)(ctx))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(match e.downcast::<ViewError>() {
                Ok(v) => HostFnError::View(*v),
                Err(e) => HostFnError::Failed(e),
            }),
            Err(payload) => Err(HostFnError::Panicked(panic_text(payload))),
        }
    }
}

impl fmt::Debug for HostFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<closure>")
    }
}

impl PartialEq for HostFn {
    /// The same closure (not an equal one: closures cannot be compared).
    fn eq(&self, other: &HostFn) -> bool {
        Arc::ptr_eq(&self.body, &other.body)
    }
}

/// The body of a kernel written in Rust.
type KernelBody = dyn Fn(&mut KernelArgs<'_>) -> Result<(), BoxError> + Send + Sync;

/// A kernel's host code as a Rust function ([`KernelBuilder::body`]). Called by the host
/// plugin's stream workers (device copies), the executor (host tasks) and the reference
/// interpreter, possibly from several threads at once (it is `Fn + Sync`).
#[derive(Clone)]
pub struct RustKernel(Arc<KernelBody>);

impl RustKernel {
    /// Calls the body with `args`, catching a panic; errors are messages (the plugin
    /// reports them as strings).
    pub(crate) fn call(&self, args: &mut KernelArgs<'_>) -> Result<(), RustKernelError> {
        match catch_unwind(AssertUnwindSafe(|| (self.0)(args))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(RustKernelError::Failed(e.to_string())),
            Err(payload) => Err(RustKernelError::Panicked(panic_text(payload))),
        }
    }
}

/// How a Rust kernel's call failed.
pub(crate) enum RustKernelError {
    Failed(String),
    Panicked(String),
}

impl fmt::Debug for RustKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<closure>")
    }
}

impl PartialEq for RustKernel {
    /// The same function (not an equal one).
    fn eq(&self, other: &RustKernel) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RustKernel {}

/// CUDA code given as text: CUDA C for NVRTC, or PTX. The kernel is the `extern "C"`
/// `__global__` function `symbol_T` (e.g. `scale_f32`) or `symbol`, as for `cuda` files.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum CudaCode {
    /// CUDA C source, compiled by NVRTC for the device's architecture (once per process,
    /// source and architecture).
    Source(Arc<str>),
    /// PTX text, loaded by the driver.
    Ptx(Arc<str>),
}

impl CudaCode {
    /// The text.
    pub fn text(&self) -> &Arc<str> {
        match self {
            CudaCode::Source(s) | CudaCode::Ptx(s) => s,
        }
    }
}

impl fmt::Debug for CudaCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaCode::Source(s) => write!(f, "CudaCode::Source(<{} bytes>)", s.len()),
            CudaCode::Ptx(s) => write!(f, "CudaCode::Ptx(<{} bytes>)", s.len()),
        }
    }
}

/// Builds the signature and code of a kernel registered from Rust; finish with
/// [`KernelBuilder::body`] (with a Rust function for the host) or
/// [`KernelBuilder::build`] (CUDA code only). Register the result with
/// [`ProgramBuilder::kernel`](super::ProgramBuilder::kernel).
///
/// Parameters are added in order and named `arg0`, `arg1`, ... unless
/// [`KernelBuilder::named`]; their kinds are what the lowering checks calls against
/// ([`KernelSig::check_args`]) and what the kernel's reads and writes are taken from, so
/// they must be honest.
///
/// A kernel and a host step from Rust, run on the host plugin:
///
/// ```
/// use offload_sched::model::{KernelArgs, KernelSig, MapType, ProgramBuilder};
/// use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
/// use offload_sched::schedule::ScheduleOptions;
/// use offload_sched::Plan;
///
/// // y[i] = a * x[i], as a Rust function: no shared library, no signature string.
/// let scale = KernelSig::rust("scale_into")
///     .reads::<f32>()
///     .writes::<f32>()
///     .scalar::<f32>()
///     .body(|args: &mut KernelArgs| {
///         let x = args.input::<f32>(0)?;
///         let y = args.output::<f32>(1)?;
///         let a = args.scalar::<f32>(2)?;
///         for (y, x) in y.iter_mut().zip(x) {
///             *y = a * x;
///         }
///         Ok(())
///     });
///
/// let mut p = ProgramBuilder::new("embedded");
/// p.kernel(scale);
/// let x = p.buf_init::<f32>("x", 4, offload_sched::model::Init::Iota);
/// let y = p.buf::<f32>("y", 4);
/// let total = p.buf::<f32>("total", 1);
/// p.target("scale", "scale_into")
///     .arg(x).arg(y).num(3.0)
///     .map(MapType::To, x)
///     .map(MapType::From, y);
/// // A host step: a closure with typed views of exactly what it declared.
/// p.host_fn("sum", &[y.into()], &[total.into()], move |ctx| {
///     let s: f32 = ctx.read(y)?.iter().sum();
///     ctx.write(total)?[0] = s;
///     Ok(())
/// });
/// let plan = Plan::new(p.build(), &ScheduleOptions::default()).unwrap();
/// let report = plan.run(&HostPlugin::new(HostPluginOptions::default())).unwrap();
/// assert_eq!(report.buffers.as_f32("y").unwrap(), [0.0, 3.0, 6.0, 9.0]);
/// assert_eq!(report.buffers.as_f32("total").unwrap(), [18.0]);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a kernel builder does nothing until `body` or `build` makes the signature"]
pub struct KernelBuilder {
    name: String,
    params: Vec<Param>,
    cuda: Option<CudaCode>,
    symbol: Option<String>,
    cost: Option<super::kernels::CostHint>,
}

impl KernelSig {
    /// A kernel whose host code is a Rust function (given to [`KernelBuilder::body`]).
    /// On the CUDA plugin it needs CUDA code too ([`KernelBuilder::cuda_source`]). See
    /// [`KernelBuilder`] for an example.
    pub fn rust(name: &str) -> KernelBuilder {
        KernelBuilder {
            name: name.to_string(),
            params: Vec::new(),
            cuda: None,
            symbol: None,
            cost: None,
        }
    }

    /// A kernel whose CUDA code is the CUDA C `src`, compiled by NVRTC in the CUDA plugin
    /// (once per process, source and architecture). On the host plugin it needs a Rust
    /// body too ([`KernelBuilder::body`]).
    pub fn cuda_source(name: &str, src: impl Into<String>) -> KernelBuilder {
        KernelSig::rust(name).cuda_source(src)
    }

    /// A kernel whose CUDA code is the PTX text `ptx`.
    pub fn ptx(name: &str, ptx: impl Into<String>) -> KernelBuilder {
        KernelSig::rust(name).ptx(ptx)
    }
}

impl KernelBuilder {
    fn push(mut self, kind: ParamKind) -> Self {
        let name = format!("arg{}", self.params.len());
        self.params.push(Param { name, kind });
        self
    }

    fn buffer<T: Elem>(self, access: Access) -> Self {
        self.push(ParamKind::Buffer {
            ty: Some(T::TYPE),
            access,
        })
    }

    /// A buffer parameter the kernel reads: `in T*`.
    pub fn reads<T: Elem>(self) -> Self {
        self.buffer::<T>(Access::In)
    }

    /// A buffer parameter the kernel writes: `out T*`.
    pub fn writes<T: Elem>(self) -> Self {
        self.buffer::<T>(Access::Out)
    }

    /// A buffer parameter the kernel reads and writes: `inout T*`.
    pub fn reads_writes<T: Elem>(self) -> Self {
        self.buffer::<T>(Access::InOut)
    }

    /// A scalar parameter of type `T`.
    pub fn scalar<T: Elem>(self) -> Self {
        self.push(ParamKind::Scalar { ty: Some(T::TYPE) })
    }

    /// A parameter of any kind, e.g. a generic one (`ty: None`: the kernel's element type,
    /// fixed per call by its first generic buffer; the body reads it from
    /// [`KernelArgs::ty`]).
    pub fn param(self, kind: ParamKind) -> Self {
        self.push(kind)
    }

    /// Names the last parameter added (in messages and graph files); nothing if none.
    pub fn named(mut self, name: &str) -> Self {
        if let Some(p) = self.params.last_mut() {
            p.name = name.to_string();
        }
        self
    }

    /// Declares the last parameter added (a scalar) as the measure of the kernel's
    /// work: a call is estimated at the launch latency plus `ns_per_unit` ns per unit of
    /// that argument ([`super::CostHint`]), so the stream assignment weighs long calls as
    /// long (the default estimate counts bytes only). Nothing if no parameter was added.
    pub fn cost_per_unit(mut self, ns_per_unit: u64) -> Self {
        if let Some(param) = self.params.len().checked_sub(1) {
            self.cost = Some(super::kernels::CostHint { param, ns_per_unit });
        }
        self
    }

    /// The CUDA function's name when it is not the kernel's (`symbol_T` is tried first).
    pub fn symbol(mut self, symbol: &str) -> Self {
        self.symbol = Some(symbol.to_string());
        self
    }

    /// Adds CUDA C code (NVRTC), replacing any CUDA code given before.
    pub fn cuda_source(mut self, src: impl Into<String>) -> Self {
        self.cuda = Some(CudaCode::Source(Arc::from(src.into())));
        self
    }

    /// Adds PTX code, replacing any CUDA code given before.
    pub fn ptx(mut self, ptx: impl Into<String>) -> Self {
        self.cuda = Some(CudaCode::Ptx(Arc::from(ptx.into())));
        self
    }

    /// Finishes the signature with `f` as the kernel's host code.
    ///
    /// `f` gets the call's arguments in signature order ([`KernelArgs`]: typed views of
    /// the buffers, the scalars); an `Err` or a panic fails the launch with a message
    /// naming the kernel (the run then stops with that error). It may run on several
    /// threads at once (different streams), so it is `Fn + Sync`.
    pub fn body<F>(self, f: F) -> KernelSig
    where
        F: Fn(&mut KernelArgs<'_>) -> Result<(), BoxError> + Send + Sync + 'static,
    {
        self.finish(Some(RustKernel(Arc::new(f))))
    }

    /// Finishes the signature without host code (CUDA code only).
    pub fn build(self) -> KernelSig {
        self.finish(None)
    }

    fn finish(self, host: Option<RustKernel>) -> KernelSig {
        let symbol = self.symbol.unwrap_or_else(|| self.name.clone());
        KernelSig {
            name: self.name,
            params: self.params,
            source: KernelSource::Embedded {
                host,
                cuda: self.cuda,
                symbol,
                cost: self.cost,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ElemType, Program};

    #[test]
    fn the_builder_makes_the_signature_it_describes() {
        let k = KernelSig::cuda_source("k", "src")
            .scalar::<f64>()
            .named("a")
            .reads::<u8>()
            .reads_writes::<i64>()
            .named("y")
            .param(ParamKind::Buffer {
                ty: None,
                access: Access::Out,
            })
            .symbol("k_entry")
            .body(|_: &mut KernelArgs| Ok(()));
        assert_eq!(
            k.param_list(),
            "a: f64, arg1: in u8*, y: inout i64*, arg3: out T*"
        );
        let KernelSource::Embedded {
            host, cuda, symbol, ..
        } = &k.source
        else {
            panic!("{k:?}");
        };
        assert!(host.is_some());
        assert_eq!(cuda, &Some(CudaCode::Source(Arc::from("src"))));
        assert_eq!(symbol, "k_entry");
        assert_eq!(
            format!("{:?}", k.source),
            "Embedded { host: Some(<closure>), cuda: Some(CudaCode::Source(<3 bytes>)), symbol: \"k_entry\", cost: None }"
        );
        // Equal only to itself (and its clones): closures cannot be compared.
        assert_eq!(k, k.clone());
        let other = KernelSig::rust("k").body(|_: &mut KernelArgs| Ok(()));
        let again = KernelSig::rust("k").body(|_: &mut KernelArgs| Ok(()));
        assert_ne!(other, again);
        let ptx = KernelSig::ptx("p", ".version 8.0").build();
        assert_eq!(
            ptx.source,
            KernelSource::Embedded {
                host: None,
                cuda: Some(CudaCode::Ptx(Arc::from(".version 8.0"))),
                symbol: "p".into(),
                cost: None,
            }
        );
        assert_eq!(ElemType::U8, <u8 as Elem>::TYPE);
    }

    #[test]
    fn host_fns_compare_by_identity_and_report_errors_and_panics() {
        let tag = ProgramTag::fresh();
        let ok = HostFn::new(tag, |_| Ok(()));
        assert_eq!(ok, ok.clone());
        assert_ne!(ok, HostFn::new(tag, |_| Ok(())));
        assert_eq!(format!("{ok:?}"), "<closure>");
        assert!(ok.program().same(tag));
        let call = |f: &HostFn| {
            // SAFETY: no sections are declared, so no memory is viewed.
            let mut ctx = unsafe { HostCtx::new("t", &[], Some(tag), &[], &[], |_| None) };
            f.call(&mut ctx)
        };
        assert!(call(&ok).is_ok());
        let failing = HostFn::new(tag, |_| Err("no".into()));
        assert!(matches!(call(&failing), Err(HostFnError::Failed(e)) if e.to_string() == "no"));
        let refused = HostFn::new(tag, |ctx| {
            ctx.read::<f32>(crate::model::BufferId(3))?;
            Ok(())
        });
        assert!(matches!(
            call(&refused),
            Err(HostFnError::View(ViewError::UnknownBuffer { id: 3 }))
        ));
        let n = std::sync::atomic::AtomicUsize::new(0);
        let n = Arc::new(n);
        let counter = n.clone();
        let panics = HostFn::new(tag, move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            panic!("at {}", 42)
        });
        for _ in 0..2 {
            // Called again after a panic: the poisoned lock is taken over.
            assert!(matches!(call(&panics), Err(HostFnError::Panicked(m)) if m == "at 42"));
        }
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn programs_and_op_graphs_with_closures_stay_clone_send_sync() {
        fn shareable<T: Clone + Send + Sync>() {}
        shareable::<Program>();
        shareable::<crate::lower::OpGraph>();
        shareable::<crate::Plan>();
        shareable::<HostFn>();
        shareable::<KernelSig>();
    }
}
