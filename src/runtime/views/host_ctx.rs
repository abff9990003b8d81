//! [`HostCtx`]: what a host closure may touch (see the parent module for why its views
//! are sound).

use super::{check_memory, exclusive, shared, HostBuf, Loans, ViewError};
use crate::model::{Buffer, BufferId, Elem, ProgramTag, Section};
use std::marker::PhantomData;

/// One declared section of a host task with the host address of its buffer's start.
struct Declared {
    section: Section,
    write: bool,
    base: Option<*mut u8>,
}

/// What a host closure ([`ProgramBuilder::host_fn`](crate::model::ProgramBuilder::host_fn))
/// may touch: typed views of exactly the sections its task declared, for the length of
/// one call.
///
/// - [`HostCtx::read`] / [`HostCtx::write`]: the declared section of a buffer as `&[T]` /
///   `&mut [T]` (element 0 is the section's first element). `read` takes sections
///   declared in `reads` or `writes`; `write` only those in `writes`.
/// - [`HostCtx::read_at`] / [`HostCtx::write_at`]: elements `lo..lo + len` of the buffer
///   (buffer indices), inside one declared section; for a buffer declared in several
///   parts.
///
/// Refused, with a [`ViewError`]: a buffer the task did not declare (or did not declare
/// written, for `write`), a type other than the buffer's, a handle of another program, a
/// view overlapping one already taken in this call where either is mutable (so each
/// section is written through one `&mut` per call). See the module docs for why the views
/// are sound.
pub struct HostCtx<'a> {
    task: &'a str,
    buffers: &'a [Buffer],
    /// The program of the closure's builder (typed handles must be of it).
    program: Option<ProgramTag>,
    declared: Vec<Declared>,
    loans: Loans<Section>,
    run_failed: Option<&'a std::sync::atomic::AtomicBool>,
    _memory: PhantomData<&'a mut [u8]>,
}

impl<'a> HostCtx<'a> {
    /// A context for task `task` of a program with `buffers`, declaring `reads` and
    /// `writes`; `base(b)` is the host address of buffer `b`'s element 0 (`None`: not
    /// allocated, so not viewable).
    ///
    /// # Safety
    /// For `'a`: for every declared section whose buffer has a base, the buffer's
    /// `bytes()` bytes from it are live, initialised memory; no one else writes any
    /// declared section, and no one else reads a section declared in `writes` (module
    /// docs, point 4).
    pub(crate) unsafe fn new(
        task: &'a str,
        buffers: &'a [Buffer],
        program: Option<ProgramTag>,
        reads: &[Section],
        writes: &[Section],
        base: impl Fn(BufferId) -> Option<*mut u8>,
    ) -> HostCtx<'a> {
        let declared = reads
            .iter()
            .map(|s| (s, false))
            .chain(writes.iter().map(|s| (s, true)))
            .map(|(s, write)| Declared {
                section: *s,
                write,
                base: base(s.buf),
            })
            .collect();
        HostCtx {
            task,
            buffers,
            program,
            declared,
            loans: Loans::default(),
            run_failed: None,
            _memory: PhantomData,
        }
    }

    /// The context with `flag` as the run's failure flag ([`HostCtx::run_failed`]).
    pub(crate) fn with_run_failed(mut self, flag: &'a std::sync::atomic::AtomicBool) -> Self {
        self.run_failed = Some(flag);
        self
    }

    /// Whether the run this task is part of has already failed elsewhere (another host
    /// lane or the issuing thread recorded an error; serial issue with host lanes, the
    /// issue of distributed ranks). A task that waits for something outside the run (a
    /// message) can poll it and stop: the run ends with the first error, and nothing
    /// reads what this task would have written. Always `false` outside a run (the
    /// reference interpreter) and under the other issue modes.
    pub fn run_failed(&self) -> bool {
        self.run_failed
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// The task's name.
    pub fn task(&self) -> &str {
        self.task
    }

    /// The declared section of `buf` (in `reads` or `writes`) as a shared slice.
    ///
    /// Errors: see the type's docs; [`ViewError::Ambiguous`] when the buffer has several
    /// different declared sections.
    pub fn read<T: Elem>(&self, buf: impl HostBuf<T>) -> Result<&[T], ViewError> {
        let (ptr, len) = self.view::<T>(buf, None, false)?;
        // SAFETY: `view` checked the range against the declaration, the buffer and the
        // memory, and recorded it as shared: no `&mut` overlapping it exists or will be
        // handed out during this call; the constructor's contract covers other users.
        Ok(unsafe { shared(ptr, len) })
    }

    /// The section of `buf` declared in `writes` as a mutable slice.
    ///
    /// Errors: see the type's docs.
    // A `RefCell`-like API: exclusivity is checked at run time by the loan record.
    #[allow(clippy::mut_from_ref)]
    pub fn write<T: Elem>(&self, buf: impl HostBuf<T>) -> Result<&mut [T], ViewError> {
        let (ptr, len) = self.view::<T>(buf, None, true)?;
        // SAFETY: as in `read`, recorded as mutable: no other view overlapping it exists
        // or will be handed out during this call.
        Ok(unsafe { exclusive(ptr, len) })
    }

    /// Elements `lo..lo + len` of `buf` (buffer indices), inside one section declared in
    /// `reads` or `writes`, as a shared slice.
    pub fn read_at<T: Elem>(
        &self,
        buf: impl HostBuf<T>,
        lo: u64,
        len: u64,
    ) -> Result<&[T], ViewError> {
        let (ptr, len) = self.view::<T>(buf, Some((lo, len)), false)?;
        // SAFETY: as in `read`.
        Ok(unsafe { shared(ptr, len) })
    }

    /// Elements `lo..lo + len` of `buf` (buffer indices), inside one section declared in
    /// `writes`, as a mutable slice.
    #[allow(clippy::mut_from_ref)]
    pub fn write_at<T: Elem>(
        &self,
        buf: impl HostBuf<T>,
        lo: u64,
        len: u64,
    ) -> Result<&mut [T], ViewError> {
        let (ptr, len) = self.view::<T>(buf, Some((lo, len)), true)?;
        // SAFETY: as in `write`.
        Ok(unsafe { exclusive(ptr, len) })
    }

    /// Resolves a view: handle, type, declaration, bounds, memory; records the loan.
    /// Returns the address of the view's first element and its length in elements.
    fn view<T: Elem>(
        &self,
        buf: impl HostBuf<T>,
        part: Option<(u64, u64)>,
        write: bool,
    ) -> Result<(*mut u8, u64), ViewError> {
        let id = buf.buffer_id();
        if let (Some(theirs), Some(ours)) = (buf.program(), self.program) {
            if !theirs.same(ours) {
                return Err(ViewError::ForeignHandle { id: id.0 });
            }
        }
        let b = self
            .buffers
            .get(id.index())
            .ok_or(ViewError::UnknownBuffer { id: id.0 })?;
        if b.ty != T::TYPE {
            return Err(ViewError::WrongType {
                what: format!("buffer `{}`", b.name),
                holds: b.ty,
                asked: T::TYPE,
            });
        }
        let access = if write { "written" } else { "read or written" };
        let candidates: Vec<&Declared> = self
            .declared
            .iter()
            .filter(|d| d.section.buf == id && (d.write || !write))
            .collect();
        if candidates.is_empty() {
            return Err(ViewError::Undeclared {
                buffer: b.name.clone(),
                access,
            });
        }
        let name = |s: &Section| s.display(self.buffers).to_string();
        let (decl, section) = match part {
            None => {
                let first = candidates[0];
                if candidates
                    .iter()
                    .any(|d| (d.section.lo, d.section.len) != (first.section.lo, first.section.len))
                {
                    let mut names: Vec<String> =
                        candidates.iter().map(|d| name(&d.section)).collect();
                    names.dedup();
                    return Err(ViewError::Ambiguous {
                        buffer: b.name.clone(),
                        sections: names.join(", "),
                    });
                }
                (first, first.section)
            }
            Some((lo, len)) => {
                let asked = Section::new(id, lo, len);
                let inside = |d: &&&Declared| {
                    lo.checked_add(len).is_some_and(|end| {
                        d.section.lo <= lo
                            && d.section
                                .lo
                                .checked_add(d.section.len)
                                .is_some_and(|e| end <= e)
                    })
                };
                let d = candidates
                    .iter()
                    .find(inside)
                    .ok_or_else(|| ViewError::OutOfRange {
                        asked: name(&asked),
                        access,
                    })?;
                (*d, asked)
            }
        };
        let what = || name(&section);
        if section
            .lo
            .checked_add(section.len)
            .is_none_or(|end| end > b.len)
        {
            return Err(ViewError::OutOfRange {
                asked: what(),
                access,
            });
        }
        let base = decl.base.ok_or_else(|| ViewError::BadMemory {
            what: what(),
            message: "the buffer is not allocated".into(),
        })?;
        // In bounds of the buffer's allocation (checked just above).
        let ptr = base.wrapping_add((section.lo * b.ty.size_bytes()) as usize);
        let bytes = check_memory::<T>(ptr, section.len, &what)?;
        self.loans
            .take(ptr as usize, bytes, write, section, &name)?;
        Ok((ptr, section.len))
    }
}
