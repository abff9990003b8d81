//! Kernel signatures: the built-in kernel library, user kernels declared in a graph file,
//! and kernels registered from Rust ([`super::KernelBuilder`]).
//!
//! A signature says, per parameter, whether it is a buffer (with the access the kernel
//! makes: `in`, `out`, `inout`) or a scalar. Buffer accesses are what the lowering uses for
//! the kernel's device reads and writes, so they must be honest.
//!
//! Element types may be generic: a parameter with `ty: None` takes the kernel's element
//! type `T`, fixed by the first buffer argument; all generic buffers of one launch must
//! share it, and generic scalars are converted to it.
//!
//! A call's arguments are checked against the signature once, here
//! ([`KernelSig::check_args`], [`KernelSig::check_scalar_values`]): the graph-file loader
//! and the lowering turn the [`CallError`] into their own located errors.

use super::program::Arg;
use super::types::{Buffer, BufferId, ElemType, Section};
use std::fmt;

/// How a kernel touches a buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    In,
    Out,
    InOut,
}

impl Access {
    pub fn reads(self) -> bool {
        matches!(self, Access::In | Access::InOut)
    }
    pub fn writes(self) -> bool {
        matches!(self, Access::Out | Access::InOut)
    }
    pub fn name(self) -> &'static str {
        match self {
            Access::In => "in",
            Access::Out => "out",
            Access::InOut => "inout",
        }
    }
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A buffer section; `ty: None` means the kernel's generic element type.
    Buffer {
        ty: Option<ElemType>,
        access: Access,
    },
    /// A scalar passed by value; `ty: None` means the kernel's generic element type.
    Scalar { ty: Option<ElemType> },
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = |t: &Option<ElemType>| t.map(|t| t.name()).unwrap_or("T");
        match self {
            ParamKind::Buffer { ty, access } => write!(f, "{} {}*", access.name(), t(ty)),
            ParamKind::Scalar { ty } => f.write_str(t(ty)),
        }
    }
}

impl ParamKind {
    /// Parses `"in f32*"`, `"inout T*"`, `"out i32*"`, `"f64"`, `"T"`.
    pub fn parse(s: &str) -> Option<ParamKind> {
        let s = s.trim();
        let ty = |t: &str| -> Option<Option<ElemType>> {
            if t == "T" {
                Some(None)
            } else {
                ElemType::parse(t).map(Some)
            }
        };
        if let Some(rest) = s.strip_suffix('*') {
            let mut it = rest.split_whitespace();
            let access = match it.next()? {
                "in" => Access::In,
                "out" => Access::Out,
                "inout" => Access::InOut,
                _ => return None,
            };
            let t = ty(it.next()?)?;
            if it.next().is_some() {
                return None;
            }
            Some(ParamKind::Buffer { ty: t, access })
        } else {
            Some(ParamKind::Scalar { ty: ty(s)? })
        }
    }
}

/// A named parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// Where a kernel's code comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSource {
    /// The built-in library (host: Rust `extern "C"` functions; CUDA: NVRTC-compiled C).
    Builtin,
    /// A user kernel: an `extern "C"` symbol in a host shared library and/or a CUDA
    /// kernel in a `.cu` or `.ptx` file. Paths are as written in the graph file,
    /// relative to that file's folder.
    User {
        /// Host shared library (`.so`) holding `symbol`.
        library: Option<String>,
        /// CUDA C (`.cu`) or PTX (`.ptx`) file holding `symbol` as an `extern "C"`
        /// `__global__` function.
        cuda: Option<String>,
        /// The exported symbol name (defaults to the kernel name).
        symbol: String,
    },
    /// A kernel registered from Rust ([`KernelSig::rust`], [`KernelSig::cuda_source`],
    /// [`KernelSig::ptx`]): host code as a Rust function and/or CUDA code as text. Graph
    /// files cannot hold it: [`crate::file::to_toml`] writes its signature only.
    Embedded {
        /// Host code (host plugin, host tasks, the reference interpreter).
        host: Option<super::RustKernel>,
        /// CUDA code (the CUDA plugin).
        cuda: Option<super::CudaCode>,
        /// The CUDA function's name (`symbol_T` is tried first); the kernel's name unless
        /// given.
        symbol: String,
        /// How long a call takes, for the stream assignment's estimates
        /// (the lowering's `lower::cost`); `None`: estimated by the bytes it touches.
        cost: Option<CostHint>,
    },
}

/// A kernel's own estimate of its duration, for the colouring (`lower::cost`):
/// the launch latency plus `ns_per_unit` ns per unit of the scalar argument `param`
/// (an index into the signature; e.g. Task Bench's `iterations`). Only ratios between
/// ops matter; a call whose argument there is not a non-negative number is estimated by
/// its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CostHint {
    pub param: usize,
    pub ns_per_unit: u64,
}

/// A kernel signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSig {
    pub name: String,
    pub params: Vec<Param>,
    pub source: KernelSource,
}

impl KernelSig {
    pub(super) fn builtin(name: &str, params: &[(&str, &str)]) -> KernelSig {
        KernelSig {
            name: name.to_string(),
            params: params
                .iter()
                .map(|(n, k)| Param {
                    name: n.to_string(),
                    kind: ParamKind::parse(k).expect("built-in signature parses"),
                })
                .collect(),
            source: KernelSource::Builtin,
        }
    }
}

/// What is wrong with a kernel call's arguments: the first problem, in argument order
/// (see [`KernelSig::check_args`]). `arg` and `param` index the arguments and the
/// signature's parameters (0-based; they are the same index once the count matches).
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// The call gives `got` arguments for `want` parameters.
    Count { want: usize, got: usize },
    /// A buffer parameter given a number.
    NumberForBuffer { arg: usize, value: f64 },
    /// A scalar parameter given a buffer section.
    BufferForScalar { arg: usize, section: Section },
    /// A buffer argument (of `buffer`) whose element type `found` is not the parameter's
    /// `want`: the parameter's own type, or, for a generic parameter, the `T` that an
    /// earlier argument of buffer `t_from` fixed.
    ElemType {
        arg: usize,
        buffer: BufferId,
        want: ElemType,
        found: ElemType,
        t_from: Option<BufferId>,
    },
    /// A number given for an integer scalar (`i32`, `i64`, `u8`, or `T` fixed to one)
    /// that is not a value of that type: fractional or out of range.
    NotAValue {
        arg: usize,
        ty: ElemType,
        value: f64,
    },
}

impl CallError {
    /// The argument the error is about; `None` for [`CallError::Count`].
    pub fn arg(&self) -> Option<usize> {
        match self {
            CallError::Count { .. } => None,
            CallError::NumberForBuffer { arg, .. }
            | CallError::BufferForScalar { arg, .. }
            | CallError::ElemType { arg, .. }
            | CallError::NotAValue { arg, .. } => Some(*arg),
        }
    }
}

impl KernelSig {
    /// The parameters as a graph file writes them, comma-separated:
    /// `a: T, x: in T*, y: inout T*`.
    pub fn param_list(&self) -> String {
        self.params
            .iter()
            .map(|p| format!("{}: {}", p.name, p.kind))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Checks a call's arguments against the signature: their count, a buffer section for
    /// each buffer parameter and a number for each scalar, and each buffer's element type
    /// (a concrete parameter type, or the generic `T`: fixed by the first buffer argument
    /// of a generic parameter, then shared by every generic buffer argument).
    ///
    /// Arguments: `args`, the call's arguments in order; `buffers`, the program's buffers.
    /// A section whose buffer is not in `buffers` is not checked here and fixes no `T`:
    /// the caller reports it (the lowering's bounds check does).
    ///
    /// Returns: `T`, or `None` when no buffer argument of a generic parameter fixes it
    /// (generic scalars then have no type from the call).
    ///
    /// Errors: the first problem in argument order ([`CallError::Count`] before any);
    /// never [`CallError::NotAValue`] (see [`KernelSig::check_scalar_values`]).
    ///
    /// Complexity: `O(P)` for `P` parameters.
    pub fn check_args(
        &self,
        args: &[Arg],
        buffers: &[Buffer],
    ) -> Result<Option<ElemType>, CallError> {
        if args.len() != self.params.len() {
            return Err(CallError::Count {
                want: self.params.len(),
                got: args.len(),
            });
        }
        // T and the buffer that fixed it.
        let mut generic: Option<(ElemType, BufferId)> = None;
        for (i, (p, a)) in self.params.iter().zip(args).enumerate() {
            match (&p.kind, a) {
                (ParamKind::Buffer { ty, .. }, Arg::Buffer(s)) => {
                    let Some(b) = buffers.get(s.buf.index()) else {
                        continue;
                    };
                    let (want, t_from) = match (ty, generic) {
                        (Some(t), _) => (*t, None),
                        (None, Some((t, from))) => (t, Some(from)),
                        (None, None) => {
                            generic = Some((b.ty, s.buf));
                            continue;
                        }
                    };
                    if b.ty != want {
                        return Err(CallError::ElemType {
                            arg: i,
                            buffer: s.buf,
                            want,
                            found: b.ty,
                            t_from,
                        });
                    }
                }
                (ParamKind::Buffer { .. }, Arg::Number(v)) => {
                    return Err(CallError::NumberForBuffer { arg: i, value: *v })
                }
                (ParamKind::Scalar { .. }, Arg::Buffer(s)) => {
                    return Err(CallError::BufferForScalar {
                        arg: i,
                        section: *s,
                    })
                }
                (ParamKind::Scalar { .. }, Arg::Number(_)) => {}
            }
        }
        Ok(generic.map(|(t, _)| t))
    }

    /// Checks that each number given for an integer scalar parameter is a value of its
    /// type: an integer in range (`i32`, `i64`, `u8`; a generic scalar takes `generic`,
    /// the `T` [`KernelSig::check_args`] returned). Floating-point parameters take any
    /// number. The graph-file loader applies it; a program built in Rust converts numbers
    /// with `as` ([`crate::model::Scalar::of`]).
    ///
    /// Errors: [`CallError::NotAValue`] for the first such number.
    ///
    /// Complexity: `O(P)` for `P` parameters.
    pub fn check_scalar_values(
        &self,
        args: &[Arg],
        generic: Option<ElemType>,
    ) -> Result<(), CallError> {
        for (i, (p, a)) in self.params.iter().zip(args).enumerate() {
            let (ParamKind::Scalar { ty }, Arg::Number(v)) = (&p.kind, a) else {
                continue;
            };
            let Some(ty) = ty.or(generic) else {
                continue;
            };
            let range = match ty {
                ElemType::I32 => (i32::MIN as f64, i32::MAX as f64),
                ElemType::I64 => (-9.223_372_036_854_776e18, 9.223_372_036_854_776e18),
                ElemType::U8 => (0.0, 255.0),
                ElemType::F32 | ElemType::F64 => continue,
            };
            if v.fract() != 0.0 || !(range.0..=range.1).contains(v) {
                return Err(CallError::NotAValue {
                    arg: i,
                    ty,
                    value: *v,
                });
            }
        }
        Ok(())
    }
}

/// The longest wait of the built-in `spin`, in µs (one hour): lowering rejects longer,
/// negative or non-finite ones, and both plugins cap at it (`builtins.cu` too).
pub const SPIN_MAX_US: f64 = 3.6e9;

/// The built-in kernel library. Host ABI of each: every buffer parameter is passed as
/// `(T* ptr, int64_t len_elements)`, every scalar by value (see `runtime::kernels`).
///
/// | kernel | effect |
/// |---|---|
/// | `saxpy(a, x, y)` | `y[i] = a*x[i] + y[i]` |
/// | `scale(a, x)` | `x[i] = a*x[i]` |
/// | `add(x, y, z)` | `z[i] = x[i] + y[i]` |
/// | `triad(a, x, y, z)` | `z[i] = x[i] + a*y[i]` |
/// | `copy(src, dst)` | `dst[i] = src[i]` |
/// | `fill(buf, v)` | `buf[i] = v` |
/// | `increment(buf)` | `buf[i] += 1` |
/// | `add_scalar(buf, v)` | `buf[i] += v` |
/// | `jacobi5(nx, ny, src, dst)` | 5-point average of the interior of an `nx × ny` grid, boundary copied |
/// | `matmul_block(n, a, b, c)` | `c += a·b` for `n × n` row-major blocks |
/// | `reduce_sum(x, out)` | `out[0] = Σ x[i]` |
/// | `spin(us)` | busy-waits `us` microseconds, 0 to [`SPIN_MAX_US`] |
/// | `gemm`, `syrk`, `trsm`, `potrf`, `getrf` | library tile kernels (BLAS / LAPACK, column-major tiles): see [`super::library`] |
///
/// Loops run over the shortest buffer argument's length (`min` of the section lengths).
/// The library kernels do not take the host ABI above: a plugin runs them with its
/// vendor library, if it lists them ([`crate::plugin::PluginInfo::library_kernels`]).
pub fn builtin_kernels() -> Vec<KernelSig> {
    let mut v = vec![
        KernelSig::builtin("saxpy", &[("a", "T"), ("x", "in T*"), ("y", "inout T*")]),
        KernelSig::builtin("scale", &[("a", "T"), ("x", "inout T*")]),
        KernelSig::builtin("add", &[("x", "in T*"), ("y", "in T*"), ("z", "out T*")]),
        KernelSig::builtin(
            "triad",
            &[("a", "T"), ("x", "in T*"), ("y", "in T*"), ("z", "out T*")],
        ),
        KernelSig::builtin("copy", &[("src", "in T*"), ("dst", "out T*")]),
        KernelSig::builtin("fill", &[("buf", "out T*"), ("v", "T")]),
        KernelSig::builtin("increment", &[("buf", "inout T*")]),
        KernelSig::builtin("add_scalar", &[("buf", "inout T*"), ("v", "T")]),
        KernelSig::builtin(
            "jacobi5",
            &[
                ("nx", "i64"),
                ("ny", "i64"),
                ("src", "in T*"),
                ("dst", "out T*"),
            ],
        ),
        KernelSig::builtin(
            "matmul_block",
            &[
                ("n", "i64"),
                ("a", "in T*"),
                ("b", "in T*"),
                ("c", "inout T*"),
            ],
        ),
        KernelSig::builtin("reduce_sum", &[("x", "in T*"), ("out", "out T*")]),
        KernelSig::builtin("spin", &[("us", "f64")]),
    ];
    v.extend(super::library::LibraryKernel::ALL.iter().map(|k| k.sig()));
    v
}

/// How many elements, from the start of each `out`/`inout` buffer argument, a call of
/// built-in kernel `name` is sure to write, given its scalar arguments in order and its
/// buffer arguments' lengths in elements in order. The host kernels
/// (`runtime::kernels`) and the CUDA ones (`builtins.cu`) write exactly these:
/// element-wise kernels the shortest buffer's length, `jacobi5` `rows · nx` with
/// `rows = min(ny, shortest / nx)`, `matmul_block` `n²` when every block holds it,
/// `reduce_sum` `out[0]`; the library kernels 0 (their written tile is `inout`, and
/// `potrf` and `syrk` write one triangle only). `None` for a name that is not built in: a user kernel may
/// leave any part of an `out` argument unwritten. The lowering uses it to decide which
/// device storage is read before written ([`crate::lower::DeviceAlloc::zero`]).
pub fn builtin_write_extent(name: &str, scalars: &[f64], lens: &[u64]) -> Option<u64> {
    let shortest = lens.iter().copied().min().unwrap_or(0);
    let int = |i: usize| scalars.get(i).copied().unwrap_or(0.0);
    Some(match name {
        "saxpy" | "scale" | "add" | "triad" | "copy" | "fill" | "increment" | "add_scalar" => {
            shortest
        }
        "jacobi5" => {
            let (nx, ny) = (int(0), int(1));
            // NaN and values below 1 write nothing.
            if nx.is_nan() || ny.is_nan() || nx < 1.0 || ny < 1.0 {
                return Some(0);
            }
            let (nx, ny) = (nx as u64, ny as u64);
            ny.min(shortest / nx).saturating_mul(nx)
        }
        "matmul_block" => {
            let n = int(0);
            if n.is_nan() || n < 1.0 {
                return Some(0);
            }
            let nn = (n as u64).saturating_mul(n as u64);
            if nn <= shortest {
                nn
            } else {
                0
            }
        }
        "reduce_sum" => u64::from(lens.get(1).is_some_and(|&l| l >= 1)),
        "spin" | "gemm" | "syrk" | "trsm" | "potrf" | "getrf" => 0,
        _ => return None,
    })
}

/// Checks the size arguments of a call of built-in kernel `name` (signature order,
/// already checked against the signature) against its buffer sections' lengths, so
/// that the call computes all it says instead of the clamped part
/// ([`builtin_write_extent`]): `jacobi5(nx, ny, src, dst)` needs `nx ≥ 1`, `ny ≥ 1` and
/// `nx·ny ≤` the length of `src` and of `dst` (elements); `matmul_block(n, a, b, c)`
/// needs `n ≥ 1` and `n² ≤` each block's length; `reduce_sum(x, out)` needs `out` to
/// hold one element. Other built-ins loop over their shortest buffer and take no size.
///
/// Errors: the message after "kernel `name`", naming the parameters and lengths, e.g.
/// ``grid `nx`×`ny` = 33×32 needs 1056 elements, but `src` (x[0:1024]) has 1024``.
pub fn check_builtin_sizes(name: &str, args: &[Arg], buffers: &[Buffer]) -> Result<(), String> {
    let sig = match builtin_kernel_ref(name) {
        Some(s) => s,
        None => return Ok(()),
    };
    let num = |i: usize| match args.get(i) {
        Some(Arg::Number(v)) => *v,
        _ => f64::NAN,
    };
    let section = |i: usize| match args.get(i) {
        Some(Arg::Buffer(s)) => Some(*s),
        _ => None,
    };
    let count = |i: usize| -> Result<u64, String> {
        let v = num(i);
        if v.is_finite() && v >= 1.0 && v.fract() == 0.0 {
            Ok(v as u64)
        } else {
            Err(format!(
                "parameter `{}` is {}: it must be a whole number of at least 1",
                sig.params[i].name,
                super::Num(v)
            ))
        }
    };
    let fits = |need: u64, what: &str, bufs: std::ops::Range<usize>| -> Result<(), String> {
        for i in bufs {
            let Some(s) = section(i) else { continue };
            if s.len < need {
                return Err(format!(
                    "{what} needs {need} element{}, but `{}` ({}) has {}",
                    if need == 1 { "" } else { "s" },
                    sig.params[i].name,
                    s.display(buffers),
                    s.len
                ));
            }
        }
        Ok(())
    };
    match name {
        "jacobi5" => {
            let (nx, ny) = (count(0)?, count(1)?);
            let what = format!("grid `nx`×`ny` = {nx}×{ny}");
            fits(nx.saturating_mul(ny), &what, 2..4)
        }
        "matmul_block" => {
            let n = count(0)?;
            fits(
                n.saturating_mul(n),
                &format!("block `n`×`n` = {n}×{n}"),
                1..4,
            )
        }
        "reduce_sum" => fits(1, "the sum", 1..2),
        _ => Ok(()),
    }
}

/// Looks up a built-in kernel by name.
pub fn builtin_kernel(name: &str) -> Option<KernelSig> {
    builtin_kernel_ref(name).cloned()
}

/// Finds kernel `name`: a user declaration in `user` first, then the built-in library
/// (a user kernel may shadow a built-in of the same name).
pub fn find_kernel<'a>(user: &'a [KernelSig], name: &str) -> Option<&'a KernelSig> {
    user.iter()
        .find(|k| k.name == name)
        .or_else(|| builtin_kernel_ref(name))
}

/// The names of the kernels a program declaring `user` kernels can call: its own, then
/// the built-ins it does not shadow (for "did you mean" and candidate lists).
pub fn kernel_names(user: &[KernelSig]) -> Vec<String> {
    let mut names: Vec<String> = user.iter().map(|k| k.name.clone()).collect();
    for b in builtin_kernels() {
        if !names.contains(&b.name) {
            names.push(b.name);
        }
    }
    names
}

/// The help line of an unknown kernel `name` in a program declaring `user` kernels:
/// ``did you mean `saxpy`? (kernels: …)``, listing [`kernel_names`] (a long list cut to
/// the closest few, see `crate::suggest::candidates`).
pub fn unknown_kernel_help(name: &str, user: &[KernelSig]) -> String {
    let names = kernel_names(user);
    crate::suggest::help_for(name, "kernels", names.iter().map(String::as_str))
}

/// Looks up a built-in kernel by name without copying it (the library is built once per
/// process).
pub fn builtin_kernel_ref(name: &str) -> Option<&'static KernelSig> {
    static LIBRARY: std::sync::OnceLock<Vec<KernelSig>> = std::sync::OnceLock::new();
    LIBRARY
        .get_or_init(builtin_kernels)
        .iter()
        .find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_kinds_parse_and_print() {
        for s in ["in f32*", "inout T*", "out i64*", "f64", "T"] {
            let k = ParamKind::parse(s).unwrap();
            assert_eq!(k.to_string(), s);
        }
        assert_eq!(ParamKind::parse("sideways f32*"), None);
        assert_eq!(ParamKind::parse("f16"), None);
    }

    #[test]
    fn write_extents_of_the_builtins() {
        let ext = builtin_write_extent;
        assert_eq!(ext("copy", &[], &[4, 64]), Some(4)); // the shortest buffer
        assert_eq!(ext("fill", &[7.0], &[64]), Some(64));
        assert_eq!(ext("reduce_sum", &[], &[100, 8]), Some(1)); // out[0]
        assert_eq!(ext("reduce_sum", &[], &[100, 0]), Some(0));
        assert_eq!(ext("jacobi5", &[10.0, 10.0], &[100, 100]), Some(100));
        assert_eq!(ext("jacobi5", &[10.0, 10.0], &[100, 55]), Some(50)); // 5 whole rows
        assert_eq!(ext("jacobi5", &[0.0, 10.0], &[100, 100]), Some(0));
        assert_eq!(ext("matmul_block", &[4.0], &[16, 16, 16]), Some(16));
        assert_eq!(ext("matmul_block", &[5.0], &[16, 16, 16]), Some(0)); // does not fit
        assert_eq!(ext("matmul_block", &[f64::NAN], &[16, 16, 16]), Some(0));
        assert_eq!(ext("spin", &[10.0], &[]), Some(0));
        assert_eq!(ext("my_kernel", &[], &[8]), None);
    }

    #[test]
    fn builtin_sizes_must_fit_their_buffers() {
        let bufs = vec![
            Buffer {
                name: "x".into(),
                ty: ElemType::F32,
                len: 1024,
                init: super::super::Init::Zeros,
            },
            Buffer {
                name: "o".into(),
                ty: ElemType::F32,
                len: 1,
                init: super::super::Init::Zeros,
            },
        ];
        let x = |lo: u64, len: u64| Arg::Buffer(Section::new(BufferId(0), lo, len));
        let n = Arg::Number;
        let check = |k: &str, a: &[Arg]| check_builtin_sizes(k, a, &bufs);
        assert_eq!(
            check("jacobi5", &[n(32.0), n(32.0), x(0, 1024), x(0, 1024)]),
            Ok(())
        );
        assert_eq!(
            check("jacobi5", &[n(33.0), n(32.0), x(0, 1024), x(0, 1024)]).unwrap_err(),
            "grid `nx`×`ny` = 33×32 needs 1056 elements, but `src` (x[0:1024]) has 1024"
        );
        assert_eq!(
            check("jacobi5", &[n(4.0), n(4.0), x(0, 16), x(0, 15)]).unwrap_err(),
            "grid `nx`×`ny` = 4×4 needs 16 elements, but `dst` (x[0:15]) has 15"
        );
        assert_eq!(
            check("jacobi5", &[n(-4.0), n(0.0), x(0, 16), x(0, 16)]).unwrap_err(),
            "parameter `nx` is -4: it must be a whole number of at least 1"
        );
        assert!(check("jacobi5", &[n(4.0), n(f64::NAN), x(0, 16), x(0, 16)]).is_err());
        assert_eq!(
            check(
                "matmul_block",
                &[n(32.0), x(0, 1024), x(0, 1024), x(0, 1024)]
            ),
            Ok(())
        );
        assert_eq!(
            check("matmul_block", &[n(4.0), x(0, 16), x(0, 16), x(0, 9)]).unwrap_err(),
            "block `n`×`n` = 4×4 needs 16 elements, but `c` (x[0:9]) has 9"
        );
        let o = |len: u64| Arg::Buffer(Section::new(BufferId(1), 0, len));
        assert_eq!(check("reduce_sum", &[x(0, 4), o(1)]), Ok(()));
        assert_eq!(
            check("reduce_sum", &[x(0, 4), o(0)]).unwrap_err(),
            "the sum needs 1 element, but `out` (o[0:0]) has 0"
        );
        // Element-wise kernels and unknown names take no size.
        assert_eq!(check("saxpy", &[n(2.0), x(0, 4), x(0, 9)]), Ok(()));
        assert_eq!(check("mine", &[n(1e9)]), Ok(()));
    }

    #[test]
    fn calls_are_checked_in_argument_order() {
        use super::super::types::Init;
        let buf = |name: &str, ty| Buffer {
            name: name.into(),
            ty,
            len: 8,
            init: Init::Zeros,
        };
        let buffers = [buf("x", ElemType::F32), buf("n", ElemType::I32)];
        let (x, n) = (BufferId(0), BufferId(1));
        let sec = |b| Arg::Buffer(Section::new(b, 0, 8));
        let saxpy = builtin_kernel("saxpy").unwrap();
        // T comes from the first generic buffer.
        let ok = saxpy.check_args(&[Arg::Number(2.0), sec(x), sec(x)], &buffers);
        assert_eq!(ok, Ok(Some(ElemType::F32)));
        assert_eq!(
            saxpy.check_args(&[Arg::Number(2.0), sec(x)], &buffers),
            Err(CallError::Count { want: 3, got: 2 })
        );
        assert_eq!(
            saxpy.check_args(&[Arg::Number(2.0), sec(x), sec(n)], &buffers),
            Err(CallError::ElemType {
                arg: 2,
                buffer: n,
                want: ElemType::F32,
                found: ElemType::I32,
                t_from: Some(x),
            })
        );
        // The first problem wins.
        assert_eq!(
            saxpy
                .check_args(&[sec(x), Arg::Number(1.0), sec(n)], &buffers)
                .map_err(|e| e.arg()),
            Err(Some(0))
        );
        // A buffer of another program is left to the caller.
        let foreign = Arg::Buffer(Section::new(BufferId(9), 0, 1));
        assert_eq!(
            saxpy.check_args(&[Arg::Number(2.0), foreign, sec(n)], &buffers),
            Ok(Some(ElemType::I32))
        );
        // Integer scalars must be values of their type.
        let fill = builtin_kernel("fill").unwrap();
        let args = [sec(n), Arg::Number(2.5)];
        let t = fill.check_args(&args, &buffers).unwrap();
        assert_eq!(
            fill.check_scalar_values(&args, t),
            Err(CallError::NotAValue {
                arg: 1,
                ty: ElemType::I32,
                value: 2.5
            })
        );
        let args = [sec(x), Arg::Number(2.5)];
        let t = fill.check_args(&args, &buffers).unwrap();
        assert_eq!(fill.check_scalar_values(&args, t), Ok(()));
    }

    #[test]
    fn builtin_library_is_complete() {
        let names: Vec<_> = builtin_kernels().into_iter().map(|k| k.name).collect();
        assert_eq!(
            names,
            [
                "saxpy",
                "scale",
                "add",
                "triad",
                "copy",
                "fill",
                "increment",
                "add_scalar",
                "jacobi5",
                "matmul_block",
                "reduce_sum",
                "spin",
                "gemm",
                "syrk",
                "trsm",
                "potrf",
                "getrf"
            ]
        );
        let saxpy = builtin_kernel("saxpy").unwrap();
        assert_eq!(
            saxpy.params[2].kind,
            ParamKind::Buffer {
                ty: None,
                access: Access::InOut
            }
        );
    }
}
