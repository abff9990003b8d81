//! [`KernelArgs`]: the arguments of a kernel written in Rust (see the parent module for
//! why its views are sound).

use super::{check_memory, exclusive, shared, Loans, ViewError};
use crate::model::{Elem, ElemType, KernelSig, ParamKind, Scalar};
use crate::runtime::ffi::RawArg;
use std::any::Any;

/// The arguments of one call of a kernel written in Rust
/// ([`KernelSig::rust`](crate::model::KernelSig::rust)), in signature order: typed views
/// of its buffer arguments and its scalars. On the host plugin buffers are the device
/// copies; in a host task (`host_kernel`) the host buffers.
///
/// - [`KernelArgs::input`]: buffer parameter `i` (any access) as `&[T]`.
/// - [`KernelArgs::output`]: buffer parameter `i` declared `out` or `inout` as
///   `&mut [T]`.
/// - [`KernelArgs::scalar`]: scalar parameter `i`.
///
/// Refused, with a [`ViewError`]: an index past the signature, a parameter of the other
/// kind, a type other than the argument's, `output` of an `in` parameter, and a view
/// overlapping one already taken in this call where either is mutable (two arguments may
/// name the same memory: `add(x, x, z)`). The signature was checked against the arguments
/// before the call (count, kinds, types), so a body that follows its own registration
/// only meets the last kind.
pub struct KernelArgs<'a> {
    sig: &'a KernelSig,
    ty: ElemType,
    args: &'a [RawArg],
    /// Keyed by parameter index.
    loans: Loans<usize>,
}

impl<'a> KernelArgs<'a> {
    /// The arguments `args` of kernel `sig` instantiated for element type `ty`.
    ///
    /// # Safety
    /// `args` were checked against `sig` ([`crate::runtime::ffi::HostKernel::check`]);
    /// for `'a` every buffer argument's pointer is valid for reads and writes of its
    /// `len` elements of its type, and no one else writes that memory, nor reads memory
    /// of an `out` or `inout` argument (the schedule's ordering of the kernel).
    pub(crate) unsafe fn new(sig: &'a KernelSig, ty: ElemType, args: &'a [RawArg]) -> Self {
        KernelArgs {
            sig,
            ty,
            args,
            loans: Loans::default(),
        }
    }

    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.sig.name
    }

    /// The kernel's element type `T` for this call (what generic parameters take).
    pub fn ty(&self) -> ElemType {
        self.ty
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// Whether the kernel takes no arguments.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// The length in elements of buffer argument `i`.
    pub fn len_of(&self, i: usize) -> Result<u64, ViewError> {
        match self.arg(i)? {
            RawArg::Buffer { len, .. } => Ok(*len),
            RawArg::Scalar(_) => Err(self.kind_error(i, "a buffer")),
        }
    }

    /// Buffer argument `i` as a shared slice.
    pub fn input<T: Elem>(&self, i: usize) -> Result<&[T], ViewError> {
        let (ptr, len) = self.view::<T>(i, false)?;
        // SAFETY: checked and recorded as shared by `view`; the constructor's contract
        // covers other users of the memory.
        Ok(unsafe { shared(ptr, len) })
    }

    /// Buffer argument `i` (declared `out` or `inout`) as a mutable slice.
    #[allow(clippy::mut_from_ref)]
    pub fn output<T: Elem>(&self, i: usize) -> Result<&mut [T], ViewError> {
        let (ptr, len) = self.view::<T>(i, true)?;
        // SAFETY: checked and recorded as mutable by `view`: no overlapping view exists
        // or will be handed out during this call.
        Ok(unsafe { exclusive(ptr, len) })
    }

    /// Scalar argument `i`.
    pub fn scalar<T: Elem>(&self, i: usize) -> Result<T, ViewError> {
        let s = match self.arg(i)? {
            RawArg::Scalar(s) => *s,
            RawArg::Buffer { .. } => return Err(self.kind_error(i, "a scalar")),
        };
        let v: Option<T> = match s {
            Scalar::F32(v) => (&v as &dyn Any).downcast_ref().copied(),
            Scalar::F64(v) => (&v as &dyn Any).downcast_ref().copied(),
            Scalar::I32(v) => (&v as &dyn Any).downcast_ref().copied(),
            Scalar::I64(v) => (&v as &dyn Any).downcast_ref().copied(),
            Scalar::U8(v) => (&v as &dyn Any).downcast_ref().copied(),
        };
        v.ok_or_else(|| ViewError::WrongType {
            what: self.param_name(i),
            holds: s.ty(),
            asked: T::TYPE,
        })
    }

    fn arg(&self, i: usize) -> Result<&RawArg, ViewError> {
        self.args.get(i).ok_or_else(|| ViewError::NoParam {
            kernel: self.sig.name.clone(),
            index: i,
            count: self.args.len(),
        })
    }

    /// `parameter 1 (`y`) of kernel "scale"`.
    fn param_name(&self, i: usize) -> String {
        let name = self.sig.params.get(i).map_or("?", |p| p.name.as_str());
        format!("parameter {i} (`{name}`) of kernel \"{}\"", self.sig.name)
    }

    fn kind_error(&self, i: usize, asked: &'static str) -> ViewError {
        ViewError::ParamKind {
            what: self.param_name(i),
            kind: self
                .sig
                .params
                .get(i)
                .map_or_else(|| "?".to_string(), |p| p.kind.to_string()),
            asked,
        }
    }

    fn view<T: Elem>(&self, i: usize, write: bool) -> Result<(*mut u8, u64), ViewError> {
        let RawArg::Buffer { ptr, len, ty } = *self.arg(i)? else {
            return Err(self.kind_error(i, "a buffer"));
        };
        if write {
            let writes = match self.sig.params.get(i).map(|p| &p.kind) {
                Some(ParamKind::Buffer { access, .. }) => access.writes(),
                _ => false,
            };
            if !writes {
                return Err(self.kind_error(i, "an `out` or `inout` buffer"));
            }
        }
        if ty != T::TYPE {
            return Err(ViewError::WrongType {
                what: self.param_name(i),
                holds: ty,
                asked: T::TYPE,
            });
        }
        let what = || self.param_name(i);
        let bytes = check_memory::<T>(ptr, len, &what)?;
        self.loans
            .take(ptr as usize, bytes, write, i, &|&k| self.param_name(k))?;
        Ok((ptr, len))
    }
}
