//! Kernel calls in the lowering: arguments checked against the kernel's signature and
//! resolved to device allocations (or host sections for host tasks), the default launch
//! shape, what a built-in kernel is sure to write, and the shapes of library tile kernel
//! calls ([`crate::model::library::check_call`]).

use super::builder::Lowerer;
use super::mapping::Lookup;
use super::{KernelArg, KernelCall, LowerError};
use crate::model::{
    Access, Arg, CallError, ElemType, KernelSig, LaunchShape, ParamKind, Scalar, Section, Span,
};

/// Threads per team when a region gives no launch shape.
const DEFAULT_THREADS: u32 = 256;

impl Lowerer<'_> {
    /// Checks a kernel's arguments against its signature ([`KernelSig::check_args`]) and
    /// resolves them. The arguments are taken in turn: each buffer argument's bounds (and,
    /// on a device, its mapping) are checked before the signature's verdict on it, so the
    /// first wrong argument decides which error is reported.
    pub(super) fn kernel_call(
        &self,
        region: &str,
        kernel: &str,
        args: &[Arg],
        launch: Option<LaunchShape>,
        device: Option<u32>,
        span: Option<Span>,
    ) -> Result<(KernelCall, Vec<(Section, Access)>), LowerError> {
        let sig = self
            .p
            .kernel_ref(kernel)
            .ok_or_else(|| LowerError::UnknownKernel {
                region: region.to_string(),
                kernel: kernel.to_string(),
                span,
                known: crate::model::kernel_names(&self.p.kernels),
            })?;
        let bad = |e: &CallError| LowerError::BadArguments {
            region: region.to_string(),
            kernel: kernel.to_string(),
            detail: self.call_error_text(sig, e),
            span,
        };
        // The generic element type T (F32 when no argument fixes it), and the first
        // wrong argument.
        let (t, wrong) = match sig.check_args(args, &self.p.buffers) {
            Ok(t) => (t.unwrap_or(ElemType::F32), None),
            Err(e) => match e.arg() {
                None => return Err(bad(&e)),
                Some(i) => (ElemType::F32, Some((i, e))),
            },
        };
        let mut out = Vec::with_capacity(sig.params.len());
        let mut accesses = Vec::with_capacity(sig.params.len());
        let mut max_len = 1u64;
        for (i, (param, arg)) in sig.params.iter().zip(args).enumerate() {
            let buffer = match (&param.kind, arg) {
                (ParamKind::Buffer { access, .. }, Arg::Buffer(s)) => {
                    self.check_section(region, s, span)?;
                    Some((s, *access))
                }
                _ => None,
            };
            if let Some((_, e)) = wrong.as_ref().filter(|(at, _)| *at == i) {
                return Err(bad(e));
            }
            match (buffer, &param.kind, arg) {
                (Some((s, access)), _, _) => {
                    max_len = max_len.max(s.len);
                    accesses.push((*s, access));
                    out.push(match device {
                        Some(d) => self.device_arg(region, s, access, d, span)?,
                        None => KernelArg::Host {
                            section: *s,
                            access,
                        },
                    });
                }
                (None, ParamKind::Scalar { ty }, Arg::Number(v)) => {
                    out.push(KernelArg::Scalar(Scalar::of(ty.unwrap_or(t), *v)));
                }
                // A buffer parameter given a number or a scalar given a section: reported
                // above, as the checker's first wrong argument.
                (None, _, _) => {}
            }
        }
        // The built-in `spin` busy-waits its argument in µs (capped at an hour by both
        // plugins): a non-finite, negative or longer wait is a mistake in the program.
        if matches!(sig.source, crate::model::KernelSource::Builtin) && sig.name == "spin" {
            let max = crate::model::SPIN_MAX_US;
            if let Some(Arg::Number(us)) = args.first() {
                if !(us.is_finite() && (0.0..=max).contains(us)) {
                    return Err(LowerError::BadArguments {
                        region: region.to_string(),
                        kernel: kernel.to_string(),
                        detail: format!(
                            "takes a duration in µs from 0 to {max:e} (one hour), got {}",
                            crate::model::Num(*us)
                        ),
                        span,
                    });
                }
            }
        }
        // Built-ins with size arguments: the sizes fit the buffers (model::kernels).
        if matches!(sig.source, crate::model::KernelSource::Builtin) {
            crate::model::check_builtin_sizes(&sig.name, args, &self.p.buffers).map_err(
                |detail| LowerError::BadArguments {
                    region: region.to_string(),
                    kernel: kernel.to_string(),
                    detail,
                    span,
                },
            )?;
        }
        // Library tile kernels: flags, dimensions, leading dimensions against the tiles'
        // sections, f32/f64 tiles, no aliasing of the written tile (model::library).
        if let Some(lib) = crate::model::LibraryKernel::of(sig) {
            crate::model::library::check_call(lib, args, t).map_err(|detail| {
                LowerError::BadArguments {
                    region: region.to_string(),
                    kernel: kernel.to_string(),
                    detail,
                    span,
                }
            })?;
        }
        let launch = launch.unwrap_or(LaunchShape {
            teams: max_len
                .div_ceil(DEFAULT_THREADS as u64)
                .clamp(1, u32::MAX as u64) as u32,
            threads: DEFAULT_THREADS,
        });
        Ok((
            KernelCall {
                kernel: kernel.to_string(),
                ty: t,
                args: out,
                launch,
            },
            accesses,
        ))
    }

    /// The text after "kernel `name`" of a [`CallError`] in a call of `sig`.
    fn call_error_text(&self, sig: &KernelSig, e: &CallError) -> String {
        let param = |i: usize| &sig.params[i];
        match e {
            CallError::Count { want, got } => {
                format!("takes {want} argument(s) ({}), got {got}", sig.param_list())
            }
            CallError::ElemType {
                arg,
                buffer,
                want,
                found,
                ..
            } => format!(
                "parameter `{}` wants {want} elements, buffer `{}` holds {found}",
                param(*arg).name,
                self.p.buffer(*buffer).name
            ),
            CallError::NumberForBuffer { arg, value } => format!(
                "parameter `{}` is a buffer ({}), got the number {}",
                param(*arg).name,
                param(*arg).kind,
                crate::model::Num(*value)
            ),
            CallError::BufferForScalar { arg, section } => format!(
                "parameter `{}` is a scalar ({}), got the section {}",
                param(*arg).name,
                param(*arg).kind,
                self.name(section)
            ),
            // Not checked by the lowering: a number converts with `as` (`Scalar::of`).
            CallError::NotAValue { arg, ty, value } => format!(
                "parameter `{}` takes {ty} values, got {}",
                param(*arg).name,
                crate::model::Num(*value)
            ),
        }
    }

    /// A buffer argument resolved to the device allocation that holds section `s` on
    /// device `d` (an empty section needs none).
    fn device_arg(
        &self,
        region: &str,
        s: &Section,
        access: Access,
        d: u32,
        span: Option<Span>,
    ) -> Result<KernelArg, LowerError> {
        let e = match self.tables[d as usize].lookup(s) {
            Lookup::Inside(e) => e,
            Lookup::Absent if s.len == 0 => {
                return Ok(KernelArg::Empty {
                    ty: self.p.buffer(s.buf).ty,
                    access,
                })
            }
            Lookup::Absent => {
                return Err(LowerError::NotPresent {
                    region: region.to_string(),
                    section: self.name(s),
                    device: d,
                    span,
                })
            }
            Lookup::Extends(e) => {
                return Err(LowerError::ExplicitExtension {
                    region: region.to_string(),
                    section: self.name(s),
                    mapped: self.name(&e.section),
                    span,
                })
            }
            Lookup::Spans(v) => return Err(self.spans(region, s, span, &v)),
        };
        Ok(KernelArg::Device {
            alloc: e.alloc,
            offset: s.lo - e.section.lo,
            len: s.len,
            access,
        })
    }

    /// What a call of `kernel` with `args` is sure to write of each written buffer
    /// argument, in elements from its start: a built-in's extent, 0 for a user kernel.
    pub(super) fn write_extent(&self, kernel: &str, args: &[Arg]) -> u64 {
        let builtin = self
            .p
            .kernel_ref(kernel)
            .is_some_and(|k| matches!(k.source, crate::model::KernelSource::Builtin));
        if !builtin {
            return 0;
        }
        let (scalars, buffers) = Arg::split(args);
        let lens: Vec<u64> = buffers.iter().map(|s| s.len).collect();
        crate::model::builtin_write_extent(kernel, &scalars, &lens).unwrap_or(0)
    }
}
