//! Typed views of memory for Rust code the executor and the plugins call: host closures
//! ([`HostCtx`], from [`ProgramBuilder::host_fn`](crate::model::ProgramBuilder::host_fn))
//! and kernels written in Rust ([`KernelArgs`], from
//! [`KernelSig::rust`](crate::model::KernelSig::rust)).
//!
//! Both hand out `&[T]` and `&mut [T]` into memory the runtime owns (host buffers, device
//! blocks of the host plugin, the reference interpreter's copies). What makes that sound:
//!
//! 1. **Only declared memory.** A [`HostCtx`] views only the sections its task declared
//!    (`reads`, `writes`); a [`KernelArgs`] only its buffer arguments. Every view is
//!    checked to lie inside its buffer (checked arithmetic) and to be aligned for `T`.
//! 2. **The right type.** A view of `T` is given only of memory holding `T`
//!    ([`crate::model::Elem`] is sealed to plain numbers, for which every bit pattern is
//!    a value, so memory written by a plugin or a C kernel is always a valid `T`).
//! 3. **No aliasing `&mut`.** Each view taken during one call is recorded (its byte
//!    range, and whether it is mutable) and kept until the call ends: the view's lifetime
//!    is tied to the borrow of the context, and the context outlives every view, so a
//!    recorded view may still be alive. A new view overlapping a recorded one is refused
//!    ([`ViewError::Overlap`]) unless both are shared. So safe code can never hold two
//!    overlapping views of which one is `&mut`, in any order of calls. Byte ranges (not
//!    buffer ids) are compared, so two arguments naming the same memory (`add(x, x, z)`)
//!    are caught too.
//! 4. **No one else touches it meanwhile.** The runtime calls the code only where the
//!    schedule has made the host (or the kernel's stream) the sole user of the declared
//!    memory: for a host task, the host waits that the verifier proves precede it; for a
//!    kernel, the stream order and events of its region. That is the contract of the
//!    constructors (`unsafe`, crate-private), the same one the executor's own copies rely
//!    on. A schedule that broke it would be a data race, as it is for the C kernels; none
//!    reaches execution through a safe function: a [`crate::Plan`] runs only the schedule
//!    its verifier proved, and [`crate::exec::execute`] proves any schedule it is handed
//!    with [`crate::verify::check_order`] (every pair of ops touching the same bytes,
//!    recomputed from the ops, ordered), whatever the graph's edges say.
//! 5. **Views cannot escape.** The code gets `&mut HostCtx<'_>` / `&mut KernelArgs<'_>`
//!    for the call only; views borrow it, and the closure itself is `'static`, so nothing
//!    it keeps can hold a view after the call. Neither context is `Sync` (the record is a
//!    `RefCell`), so other threads get views only as slices handed to them within the
//!    call (scoped threads, rayon), which the borrow checker bounds by the call too.
//!
//! Views are never given back within a call (a slice cannot say when it is dropped), so a
//! second `write` of the same section in one call is an error: take each view once and
//! pass it around.

use crate::model::{Buf, BufferId, Elem, ElemType, ProgramTag};
use std::any::Any;
use std::cell::RefCell;
use thiserror::Error;

/// The error a host closure or a Rust kernel returns: any error, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a view of memory was refused (a [`HostCtx`] or [`KernelArgs`] call). Refusals
/// are errors, never undefined behaviour; returned with `?` from a host closure they stop
/// the run as [`HostFnError::View`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The buffer is not among the task's declared sections (of the access asked for:
    /// `written` for [`HostCtx::write`], `read or written` for [`HostCtx::read`]).
    #[error("buffer `{buffer}` is not declared {access} by this task")]
    Undeclared {
        buffer: String,
        access: &'static str,
    },
    /// The memory holds elements of `holds`; a view of `asked` was asked for.
    #[error("{what} holds {holds} elements, not {asked}")]
    WrongType {
        what: String,
        holds: ElemType,
        asked: ElemType,
    },
    /// The view asked for overlaps one already taken in this call, and one of the two is
    /// mutable.
    #[error("{asked} overlaps {held}, already viewed {} in this call", if *.held_mutable { "mutably" } else { "shared" })]
    Overlap {
        asked: String,
        held: String,
        held_mutable: bool,
    },
    /// The buffer has several different declared sections; [`HostCtx::read_at`] /
    /// [`HostCtx::write_at`] pick one part.
    #[error("buffer `{buffer}` has several declared sections ({sections}): ask for a part with read_at / write_at")]
    Ambiguous { buffer: String, sections: String },
    /// The part asked for is not inside one declared section (or not inside its buffer).
    #[error("{asked} is not inside a section declared {access}")]
    OutOfRange { asked: String, access: &'static str },
    /// A typed handle of another program.
    #[error("a buffer handle of another program (id {id}) was used")]
    ForeignHandle { id: u32 },
    /// A buffer id the program does not have.
    #[error("buffer id {id} does not exist")]
    UnknownBuffer { id: u32 },
    /// The memory is not there or not aligned for the element type (a runtime bug; never
    /// for memory the plugins allocate).
    #[error("{what}: {message}")]
    BadMemory { what: String, message: String },
    /// A kernel parameter index past the signature.
    #[error("kernel \"{kernel}\" has {count} parameter(s); parameter {index} asked for")]
    NoParam {
        kernel: String,
        index: usize,
        count: usize,
    },
    /// A kernel parameter of another kind than asked for (a scalar as a buffer, an `in`
    /// buffer as an output, ...).
    #[error("{what} is `{kind}`, not {asked}")]
    ParamKind {
        what: String,
        kind: String,
        asked: &'static str,
    },
}

/// Why a host closure stopped the run (in [`crate::exec::ExecError::HostFn`], which names
/// the task).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HostFnError {
    /// The closure returned a refused view (a [`ViewError`], usually through `?`).
    #[error("{0}")]
    View(ViewError),
    /// The closure returned an error of its own (downcast `source` to get it back).
    #[error("the closure returned an error: {0}")]
    Failed(#[source] BoxError),
    /// The closure panicked (the panic was caught; its message).
    #[error("the closure panicked: {0}")]
    Panicked(String),
}

/// The message of a caught panic's payload, consuming it: the payload is dropped under
/// `catch_unwind` too, since a payload whose `Drop` panics would otherwise start a second
/// panic outside every guard (std's runtime does the same when it prints a payload). A
/// payload that panics on drop is leaked, as is the second payload.
pub(crate) fn panic_text(payload: Box<dyn Any + Send>) -> String {
    let text = panic_message(&*payload);
    if let Err(again) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)))
    {
        std::mem::forget(again);
    }
    text
}

/// The message of a caught panic's payload (`&str` or `String`, else a placeholder).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a payload that is not a string)".to_string()
    }
}

/// The views taken during one call: byte ranges and mutability (point 3 of the module
/// docs), each with the key that names it (a parameter index, a section); the names are
/// written only for an error, not for every view of every call.
struct Loans<K>(RefCell<LoanList<K>>);

/// Views a call records without allocating: a kernel taking this many buffer views or
/// fewer (a Task Bench task takes 3) costs no `malloc`/`free` per call (~200
/// instructions of a ~1 200-instruction task call on the host plugin, issue 30).
const INLINE_LOANS: usize = 4;

/// The recorded views: the first [`INLINE_LOANS`] inline (`inline[..n]` set), the rest on
/// the heap.
struct LoanList<K> {
    n: usize,
    inline: [Option<Loan<K>>; INLINE_LOANS],
    more: Vec<Loan<K>>,
}

impl<K> LoanList<K> {
    fn iter(&self) -> impl Iterator<Item = &Loan<K>> {
        self.inline[..self.n]
            .iter()
            .flatten()
            .chain(self.more.iter())
    }

    fn push(&mut self, loan: Loan<K>) {
        match self.inline.get_mut(self.n) {
            Some(slot) => {
                *slot = Some(loan);
                self.n += 1;
            }
            None => self.more.push(loan),
        }
    }
}

impl<K> Default for Loans<K> {
    fn default() -> Self {
        Loans(RefCell::new(LoanList {
            n: 0,
            inline: [const { None }; INLINE_LOANS],
            more: Vec::new(),
        }))
    }
}

struct Loan<K> {
    start: usize,
    end: usize,
    mutable: bool,
    key: K,
}

impl<K> Loans<K> {
    /// Records a view of `bytes` bytes at `start` named by `key`, or refuses it if it
    /// overlaps a recorded one and either is mutable, naming both by `name`. Empty views
    /// overlap nothing and are not recorded.
    ///
    /// Complexity: `O(v)` for `v` views recorded so far.
    fn take(
        &self,
        start: usize,
        bytes: usize,
        mutable: bool,
        key: K,
        name: &dyn Fn(&K) -> String,
    ) -> Result<(), ViewError> {
        if bytes == 0 {
            return Ok(());
        }
        let end = start
            .checked_add(bytes)
            .ok_or_else(|| ViewError::BadMemory {
                what: name(&key),
                message: "address range wraps".into(),
            })?;
        // No user code runs while this borrow is held.
        let mut loans = self.0.borrow_mut();
        if let Some(h) = loans
            .iter()
            .find(|h| h.start < end && start < h.end && (mutable || h.mutable))
        {
            return Err(ViewError::Overlap {
                asked: name(&key),
                held: name(&h.key),
                held_mutable: h.mutable,
            });
        }
        loans.push(Loan {
            start,
            end,
            mutable,
            key,
        });
        Ok(())
    }
}

/// Checks `ptr` can hold `len` elements of `T` (non-null unless empty, aligned, byte size
/// in `isize`), and returns the byte count.
fn check_memory<T>(ptr: *mut u8, len: u64, what: &dyn Fn() -> String) -> Result<usize, ViewError> {
    let bad = |message: &str| ViewError::BadMemory {
        what: what(),
        message: message.to_string(),
    };
    let bytes = usize::try_from(len)
        .ok()
        .and_then(|n| n.checked_mul(std::mem::size_of::<T>()))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| bad("too large"))?;
    if bytes == 0 {
        return Ok(0);
    }
    if ptr.is_null() {
        return Err(bad("no memory"));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(bad("memory not aligned for its element type"));
    }
    Ok(bytes)
}

/// # Safety
/// `check_memory::<T>(ptr, len)` returned `Ok`; `ptr` is valid for reads of `len`
/// elements of `T` for `'v`, and nothing writes them during `'v`.
unsafe fn shared<'v, T: Elem>(ptr: *mut u8, len: u64) -> &'v [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: non-null, aligned, in bounds, initialised (every bit pattern of an `Elem`
    // is a value), and not written during 'v: the caller's contract.
    unsafe { std::slice::from_raw_parts(ptr as *const T, len as usize) }
}

/// # Safety
/// As [`shared`], and nothing else reads or writes the elements during `'v`.
unsafe fn exclusive<'v, T: Elem>(ptr: *mut u8, len: u64) -> &'v mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: as in `shared`, plus exclusivity: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(ptr as *mut T, len as usize) }
}

/// A buffer as a host closure names it: a typed handle [`Buf<T>`] (checked to be of the
/// task's program), or an untyped [`BufferId`] with the type given at the call
/// (`ctx.read::<f32>(id)`, checked against the buffer's).
pub trait HostBuf<T: Elem>: Copy {
    /// The buffer's id.
    fn buffer_id(self) -> BufferId;
    /// The program the handle belongs to (`None`: an untyped id).
    fn program(self) -> Option<ProgramTag>;
}

impl<T: Elem> HostBuf<T> for Buf<T> {
    fn buffer_id(self) -> BufferId {
        self.id()
    }
    fn program(self) -> Option<ProgramTag> {
        Some(self.tag())
    }
}

impl<T: Elem> HostBuf<T> for BufferId {
    fn buffer_id(self) -> BufferId {
        self
    }
    fn program(self) -> Option<ProgramTag> {
        None
    }
}

mod host_ctx;
mod kernel_args;

pub use host_ctx::HostCtx;
pub use kernel_args::KernelArgs;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Buffer, KernelSig, ParamKind, Scalar, Section};
    use crate::model::{Init, KernelSource, Param};
    use crate::runtime::ffi::RawArg;

    fn buffers() -> Vec<Buffer> {
        let b = |name: &str, ty| Buffer {
            name: name.into(),
            ty,
            len: 8,
            init: Init::Zeros,
        };
        vec![
            b("x", ElemType::F32),
            b("y", ElemType::F32),
            b("n", ElemType::I32),
        ]
    }

    #[test]
    fn host_views_are_checked_and_never_alias_mutably() {
        let bufs = buffers();
        let mut x = [1.0f32; 8];
        let mut y = [2.0f32; 8];
        let mut n = [3i32; 8];
        let bases = [
            x.as_mut_ptr() as *mut u8,
            y.as_mut_ptr() as *mut u8,
            n.as_mut_ptr() as *mut u8,
        ];
        let (xi, yi, ni) = (BufferId(0), BufferId(1), BufferId(2));
        let reads = [Section::new(xi, 2, 4), Section::new(ni, 0, 8)];
        let writes = [Section::new(yi, 0, 8), Section::new(ni, 0, 4)];
        // SAFETY: the arrays outlive the context and nothing else touches them.
        let ctx = unsafe {
            HostCtx::new("t", &bufs, None, &reads, &writes, |b| {
                Some(bases[b.index()])
            })
        };
        assert_eq!(ctx.read::<f32>(xi).unwrap(), &[1.0; 4]);
        // Two shared views of one section are fine.
        assert_eq!(ctx.read::<f32>(xi).unwrap().len(), 4);
        let w = ctx.write::<f32>(yi).unwrap();
        w[0] = 5.0;
        // A second view of y while `w` may live: refused, shared or mutable.
        let e = ctx.read::<f32>(yi).unwrap_err();
        assert_eq!(
            e.to_string(),
            "y[0:8] overlaps y[0:8], already viewed mutably in this call"
        );
        assert!(matches!(
            ctx.write::<f32>(yi),
            Err(ViewError::Overlap { .. })
        ));
        // x is declared read only.
        assert_eq!(
            ctx.write::<f32>(xi).unwrap_err(),
            ViewError::Undeclared {
                buffer: "x".into(),
                access: "written"
            }
        );
        // Wrong type.
        assert_eq!(
            ctx.read::<i64>(xi).unwrap_err().to_string(),
            "buffer `x` holds f32 elements, not i64"
        );
        // n: read n[0:8] and written n[0:4] — two different sections.
        assert!(matches!(
            ctx.read::<i32>(ni),
            Err(ViewError::Ambiguous { .. })
        ));
        let tail = ctx.read_at::<i32>(ni, 4, 4).unwrap();
        let head = ctx.write_at::<i32>(ni, 0, 4).unwrap();
        head[0] = 7;
        assert_eq!(tail, &[3; 4]);
        // The written head overlaps a shared view of all of n.
        assert!(matches!(
            ctx.read_at::<i32>(ni, 0, 8),
            Err(ViewError::Overlap { .. })
        ));
        assert!(matches!(
            ctx.write_at::<i32>(ni, 2, 4),
            Err(ViewError::OutOfRange { .. })
        ));
        assert!(matches!(
            ctx.read_at::<i32>(ni, u64::MAX, 2),
            Err(ViewError::OutOfRange { .. })
        ));
        assert!(matches!(
            ctx.read::<f32>(BufferId(9)),
            Err(ViewError::UnknownBuffer { id: 9 })
        ));
        // Empty views never conflict.
        assert!(ctx.write_at::<i32>(ni, 0, 0).unwrap().is_empty());
        drop(ctx);
        assert_eq!((y[0], n[0]), (5.0, 7));
    }

    #[test]
    fn typed_handles_of_another_program_are_refused() {
        let bufs = buffers();
        let mut x = [0.0f32; 8];
        let ours = ProgramTag::fresh();
        let reads = [Section::new(BufferId(0), 0, 8)];
        let p = x.as_mut_ptr() as *mut u8;
        // SAFETY: `x` outlives the context; nothing else touches it.
        let ctx = unsafe { HostCtx::new("t", &bufs, Some(ours), &reads, &[], |_| Some(p)) };
        let theirs: Buf<f32> = Buf::new(BufferId(0), 8, ProgramTag::fresh());
        assert_eq!(
            ctx.read(theirs).unwrap_err(),
            ViewError::ForeignHandle { id: 0 }
        );
        let mine: Buf<f32> = Buf::new(BufferId(0), 8, ours);
        assert_eq!(ctx.read(mine).unwrap().len(), 8);
    }

    #[test]
    fn kernel_args_check_kinds_types_and_aliasing() {
        let sig = KernelSig {
            name: "k".into(),
            params: vec![
                Param {
                    name: "x".into(),
                    kind: ParamKind::parse("in f32*").unwrap(),
                },
                Param {
                    name: "z".into(),
                    kind: ParamKind::parse("out f32*").unwrap(),
                },
                Param {
                    name: "a".into(),
                    kind: ParamKind::parse("f32").unwrap(),
                },
            ],
            source: KernelSource::Builtin,
        };
        let mut m = [1.0f32; 4];
        let p = m.as_mut_ptr() as *mut u8;
        let buf = |ptr| RawArg::Buffer {
            ptr,
            len: 4,
            ty: ElemType::F32,
        };
        // x and z name the same memory.
        let raw = [buf(p), buf(p), RawArg::Scalar(Scalar::F32(2.0))];
        // SAFETY: `m` outlives the arguments; nothing else touches it.
        let args = unsafe { KernelArgs::new(&sig, ElemType::F32, &raw) };
        assert_eq!(args.scalar::<f32>(2), Ok(2.0));
        assert!(matches!(
            args.scalar::<f64>(2),
            Err(ViewError::WrongType { .. })
        ));
        assert!(matches!(
            args.scalar::<f32>(0),
            Err(ViewError::ParamKind { .. })
        ));
        assert_eq!(
            args.output::<f32>(0).unwrap_err().to_string(),
            "parameter 0 (`x`) of kernel \"k\" is `in f32*`, not an `out` or `inout` buffer"
        );
        assert!(matches!(
            args.input::<i32>(0),
            Err(ViewError::WrongType { .. })
        ));
        assert!(matches!(
            args.input::<f32>(7),
            Err(ViewError::NoParam { .. })
        ));
        let x = args.input::<f32>(0).unwrap();
        assert!(matches!(
            args.output::<f32>(1),
            Err(ViewError::Overlap { .. })
        ));
        assert_eq!(x, &[1.0; 4]);
        assert_eq!(args.len_of(1), Ok(4));
    }

    #[test]
    fn loans_past_the_inline_ones_are_checked_as_the_first() {
        // Six disjoint shared views of 8 bytes (four inline, two on the heap), then a
        // mutable one overlapping each in turn is refused naming the view it meets, and
        // one overlapping none is recorded.
        let loans: Loans<usize> = Loans::default();
        let name = |k: &usize| format!("view {k}");
        for k in 0..6 {
            assert_eq!(loans.take(100 + 8 * k, 8, false, k, &name), Ok(()));
        }
        for k in 0..6 {
            let e = loans.take(104 + 8 * k, 2, true, 10 + k, &name).unwrap_err();
            assert_eq!(
                e,
                ViewError::Overlap {
                    asked: format!("view {}", 10 + k),
                    held: format!("view {k}"),
                    held_mutable: false,
                }
            );
        }
        assert_eq!(loans.take(148, 8, true, 20, &name), Ok(()));
        assert_eq!(loans.0.borrow().iter().count(), 7);
        let e = loans.take(150, 1, false, 21, &name).unwrap_err();
        assert!(
            matches!(
                e,
                ViewError::Overlap {
                    held_mutable: true,
                    ..
                }
            ),
            "{e}"
        );
    }
}
