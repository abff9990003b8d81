//! Kernel calls in the lowering: arguments checked against the kernel's signature and
//! resolved to device allocations (or host sections for host tasks), the default launch
//! shape, and what a built-in kernel is sure to write.

use super::builder::Lowerer;
use super::mapping::Lookup;
use super::{KernelArg, KernelCall, LowerError};
use crate::model::{Access, Arg, LaunchShape, ParamKind, Scalar, Section, Span};

/// Threads per team when a region gives no launch shape.
const DEFAULT_THREADS: u32 = 256;

impl Lowerer<'_> {
    /// Checks a kernel's arguments against its signature and resolves them.
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
            .kernel(kernel)
            .ok_or_else(|| LowerError::UnknownKernel {
                region: region.to_string(),
                kernel: kernel.to_string(),
                span,
            })?;
        let bad = |detail: String| LowerError::BadArguments {
            region: region.to_string(),
            kernel: kernel.to_string(),
            detail,
            span,
        };
        if args.len() != sig.params.len() {
            return Err(bad(format!(
                "takes {} argument(s) ({}), got {}",
                sig.params.len(),
                sig.params
                    .iter()
                    .map(|p| format!("{}: {}", p.name, p.kind))
                    .collect::<Vec<_>>()
                    .join(", "),
                args.len()
            )));
        }
        // The generic element type T: the first generic buffer argument's type.
        let mut t = None;
        for (param, arg) in sig.params.iter().zip(args) {
            if let (ParamKind::Buffer { ty: None, .. }, Arg::Buffer(s)) = (&param.kind, arg) {
                // A buffer of another program: the section check below reports it.
                t = self.p.buffers.get(s.buf.index()).map(|b| b.ty);
                break;
            }
        }
        let t = t.unwrap_or(crate::model::ElemType::F32);
        let mut out = Vec::new();
        let mut accesses = Vec::new();
        let mut max_len = 1u64;
        for (param, arg) in sig.params.iter().zip(args) {
            match (&param.kind, arg) {
                (ParamKind::Buffer { ty, access }, Arg::Buffer(s)) => {
                    self.check_section(region, s, span)?;
                    let bt = self.p.buffer(s.buf).ty;
                    let want = ty.unwrap_or(t);
                    if bt != want {
                        return Err(bad(format!(
                            "parameter `{}` wants {want} elements, buffer `{}` holds {bt}",
                            param.name,
                            self.p.buffer(s.buf).name
                        )));
                    }
                    max_len = max_len.max(s.len);
                    accesses.push((*s, *access));
                    match device {
                        Some(d) => {
                            let e = match self.tables[d as usize].lookup(s) {
                                Lookup::Inside(e) => e,
                                Lookup::Absent if s.len == 0 => {
                                    out.push(KernelArg::Empty {
                                        ty: bt,
                                        access: *access,
                                    });
                                    continue;
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
                            out.push(KernelArg::Device {
                                alloc: e.alloc,
                                offset: s.lo - e.section.lo,
                                len: s.len,
                                access: *access,
                            });
                        }
                        None => out.push(KernelArg::Host {
                            section: *s,
                            access: *access,
                        }),
                    }
                }
                (ParamKind::Scalar { ty }, Arg::Number(v)) => {
                    out.push(KernelArg::Scalar(Scalar::of(ty.unwrap_or(t), *v)));
                }
                (ParamKind::Buffer { .. }, Arg::Number(v)) => {
                    return Err(bad(format!(
                        "parameter `{}` is a buffer ({}), got the number {}",
                        param.name,
                        param.kind,
                        crate::model::Num(*v)
                    )))
                }
                (ParamKind::Scalar { .. }, Arg::Buffer(s)) => {
                    return Err(bad(format!(
                        "parameter `{}` is a scalar ({}), got the section {}",
                        param.name,
                        param.kind,
                        self.name(s)
                    )))
                }
            }
        }
        // The built-in `spin` busy-waits its argument in µs (capped at an hour by both
        // plugins): a non-finite, negative or longer wait is a mistake in the program.
        if matches!(sig.source, crate::model::KernelSource::Builtin) && sig.name == "spin" {
            let max = crate::model::SPIN_MAX_US;
            if let Some(Arg::Number(us)) = args.first() {
                if !(us.is_finite() && (0.0..=max).contains(us)) {
                    return Err(bad(format!(
                        "takes a duration in µs from 0 to {max:e} (one hour), got {}",
                        crate::model::Num(*us)
                    )));
                }
            }
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

    /// What a call of `kernel` with `args` is sure to write of each written buffer
    /// argument, in elements from its start: a built-in's extent, 0 for a user kernel.
    pub(super) fn write_extent(&self, kernel: &str, args: &[Arg]) -> u64 {
        let builtin = self
            .p
            .kernel(kernel)
            .is_some_and(|k| matches!(k.source, crate::model::KernelSource::Builtin));
        if !builtin {
            return 0;
        }
        let scalars: Vec<f64> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Number(v) => Some(*v),
                Arg::Buffer(_) => None,
            })
            .collect();
        let lens: Vec<u64> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Buffer(s) => Some(s.len),
                Arg::Number(_) => None,
            })
            .collect();
        crate::model::builtin_write_extent(kernel, &scalars, &lens).unwrap_or(0)
    }
}
