//! Launch marshalling of the CUDA plugin, without the driver (so it is tested without a
//! GPU): launch arguments checked against the kernel's declared signature, then laid out
//! as the C parameters `cuLaunchKernel` takes.
//!
//! ABI: the host plugin's. Each buffer is `(T*, int64 length in elements)`, each scalar is
//! passed by value. Every C parameter gets one 8-byte *slot* holding its value in its low
//! bytes (little-endian), so the driver's `void*` parameter array points at the slots in
//! order. A launch keeps up to [`INLINE_SLOTS`] slots on the stack (every built-in needs
//! fewer), so marshalling allocates nothing.

use crate::model::{ElemType, KernelSig, LaunchShape, ParamKind, Scalar};
use crate::plugin::LaunchArg;

/// Slots a launch keeps on the stack; more go to the heap.
pub(super) const INLINE_SLOTS: usize = 16;

/// Checks launch arguments against the declared signature (the host plugin's rule: count,
/// buffer vs scalar, element types; generic `T` is the kernel's type `ty`).
///
/// Errors: the first mismatch, naming the parameter.
pub(super) fn check_signature(
    sig: &KernelSig,
    ty: ElemType,
    args: &[LaunchArg],
) -> Result<(), String> {
    if args.len() != sig.params.len() {
        return Err(format!(
            "{} arguments given, the signature declares {}",
            args.len(),
            sig.params.len()
        ));
    }
    for (p, a) in sig.params.iter().zip(args) {
        match (&p.kind, a) {
            (ParamKind::Buffer { ty: want, .. }, LaunchArg::Buffer { ty: got, .. }) => {
                if want.unwrap_or(ty) != *got {
                    return Err(format!(
                        "parameter \"{}\" is declared {}, given a {got} buffer",
                        p.name, p.kind
                    ));
                }
            }
            (ParamKind::Scalar { ty: want }, LaunchArg::Scalar(s)) => {
                let want = want.unwrap_or(ty);
                if want != s.ty() {
                    return Err(format!(
                        "parameter \"{}\" is declared {want}, given a {} scalar",
                        p.name,
                        s.ty()
                    ));
                }
            }
            (ParamKind::Buffer { .. }, LaunchArg::Scalar(s)) => {
                return Err(format!(
                    "parameter \"{}\" is declared {}, given a {} scalar",
                    p.name,
                    p.kind,
                    s.ty()
                ))
            }
            (ParamKind::Scalar { .. }, LaunchArg::Buffer { ty, .. }) => {
                return Err(format!(
                    "parameter \"{}\" is declared {}, given a {ty} buffer",
                    p.name, p.kind
                ))
            }
        }
    }
    Ok(())
}

/// The slots a launch with `args` needs at most: 2 per argument.
pub(super) fn max_slots(args: &[LaunchArg]) -> usize {
    args.len() * 2
}

/// Writes the slots of `args` into `slots` in order (a buffer: its address `ptr +
/// offset`, then its length in elements, capped at `i64::MAX`; a scalar: its bits,
/// zero-extended) and returns how many were written. `valid(addr, bytes)` checks each
/// buffer's device range before it is written, except a zero-length argument without
/// storage (address 0, `KernelArg::Empty`); its error stops the marshalling.
///
/// Panics if `slots` is shorter than [`max_slots`]. Complexity: O(arguments) plus the
/// checks.
pub(super) fn fill_slots<E>(
    args: &[LaunchArg],
    slots: &mut [u64],
    mut valid: impl FnMut(u64, u64) -> Result<(), E>,
) -> Result<usize, E> {
    let mut used = 0;
    for a in args {
        match *a {
            LaunchArg::Buffer {
                ptr,
                offset,
                len,
                ty,
                ..
            } => {
                let addr = ptr.0.wrapping_add(offset);
                let bytes = len.saturating_mul(ty.size_bytes());
                if !(addr == 0 && bytes == 0) {
                    valid(addr, bytes)?;
                }
                slots[used] = addr;
                slots[used + 1] = len.min(i64::MAX as u64);
                used += 2;
            }
            LaunchArg::Scalar(s) => {
                slots[used] = match s {
                    Scalar::F32(v) => v.to_bits() as u64,
                    Scalar::F64(v) => v.to_bits(),
                    Scalar::I32(v) => v as u32 as u64,
                    Scalar::I64(v) => v as u64,
                    Scalar::U8(v) => v as u64,
                };
                used += 1;
            }
        }
    }
    Ok(used)
}

/// The grid of a launch: `(teams, threads per team)`, each at least 1, threads at most
/// 1024 (the CUDA limit per block) and teams at most `i32::MAX`.
pub(super) fn grid(shape: LaunchShape) -> (u32, u32) {
    (
        shape.teams.clamp(1, i32::MAX as u32),
        shape.threads.clamp(1, 1024),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{builtin_kernel, Access};
    use crate::plugin::DevicePtr;

    fn buf(ptr: u64, offset: u64, len: u64, ty: ElemType) -> LaunchArg {
        LaunchArg::Buffer {
            ptr: DevicePtr(ptr),
            offset,
            len,
            ty,
            access: Access::In,
        }
    }

    #[test]
    fn saxpy_arguments_are_a_scalar_then_two_address_length_pairs() {
        let args = [
            LaunchArg::Scalar(Scalar::F32(2.0)),
            buf(0x1000, 16, 4, ElemType::F32),
            buf(0x2000, 0, 4, ElemType::F32),
        ];
        let saxpy = builtin_kernel("saxpy").unwrap();
        assert_eq!(check_signature(&saxpy, ElemType::F32, &args), Ok(()));
        let mut slots = [0u64; INLINE_SLOTS];
        let mut checked = Vec::new();
        let used = fill_slots::<()>(&args, &mut slots, |a, b| {
            checked.push((a, b));
            Ok(())
        });
        assert_eq!(used, Ok(5));
        assert!(5 <= max_slots(&args));
        assert_eq!(slots[..5], [2.0f32.to_bits() as u64, 0x1010, 4, 0x2000, 4]);
        assert_eq!(checked, vec![(0x1010, 16), (0x2000, 16)]);
    }

    #[test]
    fn scalars_are_zero_extended_and_empty_buffers_are_not_checked() {
        let args = [
            LaunchArg::Scalar(Scalar::I32(-1)),
            LaunchArg::Scalar(Scalar::F64(1.5)),
            LaunchArg::Scalar(Scalar::U8(7)),
            buf(0, 0, 0, ElemType::F64),
        ];
        let mut slots = [0u64; INLINE_SLOTS];
        let used = fill_slots::<()>(&args, &mut slots, |_, _| Err(()));
        assert_eq!(used, Ok(5));
        assert_eq!(slots[..5], [0xffff_ffff, 1.5f64.to_bits(), 7, 0, 0]);
        let bad = [buf(0x10, 0, 1, ElemType::U8)];
        assert_eq!(
            fill_slots(&bad, &mut slots, |a, b| Err((a, b))),
            Err((0x10, 1))
        );
    }

    #[test]
    fn signature_mismatches_name_the_parameter() {
        let saxpy = builtin_kernel("saxpy").unwrap();
        let s = LaunchArg::Scalar(Scalar::F32(1.0));
        let b = buf(0x1000, 0, 1, ElemType::F32);
        assert!(check_signature(&saxpy, ElemType::F32, &[s, b])
            .unwrap_err()
            .contains("2 arguments given"));
        let e = check_signature(&saxpy, ElemType::F64, &[s, b, b]).unwrap_err();
        assert!(e.contains("parameter \"a\""), "{e}");
        let e = check_signature(&saxpy, ElemType::F32, &[s, s, b]).unwrap_err();
        assert!(e.contains("parameter \"x\"") && e.contains("scalar"), "{e}");
    }

    #[test]
    fn the_grid_is_clamped_to_what_the_driver_takes() {
        let g = |teams, threads| grid(LaunchShape { teams, threads });
        assert_eq!(g(0, 0), (1, 1));
        assert_eq!(g(7, 4096), (7, 1024));
        assert_eq!(g(u32::MAX, 256), (i32::MAX as u32, 256));
    }
}
