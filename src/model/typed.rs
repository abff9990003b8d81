//! Typed buffer handles: [`Buf<T>`] names one buffer of one program and carries its
//! element type, so binding application memory to it (`&[T]`, `&mut [T]`) and reading its
//! result are checked by the compiler for the type and at run time for the program.
//!
//! A handle remembers the [`ProgramTag`] of the builder that made it. Using it with
//! another program (a second builder, a plan of another program) is an error naming the
//! buffer, never a silent reference to whichever buffer has the same index there.

use super::types::{BufferId, ElemType, Section};
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// Element types a buffer can hold in Rust: `f32`, `f64`, `i32`, `i64`, `u8` (the
/// graph-file types). Sealed: every bit pattern of each is a valid value, which the
/// executor relies on when it hands plugin memory out as slices.
pub trait Elem: Copy + Send + Sync + fmt::Debug + PartialEq + 'static + sealed::Sealed {
    /// The model's name for the type.
    const TYPE: ElemType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! elem {
    ($($t:ty => $e:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Elem for $t {
            const TYPE: ElemType = ElemType::$e;
        }
    )*};
}
elem!(f32 => F32, f64 => F64, i32 => I32, i64 => I64, u8 => U8);

/// Identity of the program a [`ProgramBuilder`](super::ProgramBuilder) builds (or a graph
/// file loads), so that typed handles cannot be used with another program. Unique per
/// process; copied by `Program::clone` (a clone is the same program).
///
/// Not part of a program's value: two programs with the same content compare equal
/// whatever their tags (a file written and read back equals the program written).
#[derive(Clone, Copy, Debug, Eq)]
pub struct ProgramTag(u64);

impl ProgramTag {
    /// A tag no other program of this process has.
    pub fn fresh() -> ProgramTag {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ProgramTag(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl Default for ProgramTag {
    fn default() -> ProgramTag {
        ProgramTag::fresh()
    }
}

impl PartialEq for ProgramTag {
    /// Always true: the tag is identity, not content (see the type's docs). Compare tags
    /// with [`ProgramTag::same`].
    fn eq(&self, _: &ProgramTag) -> bool {
        true
    }
}

impl ProgramTag {
    /// Whether two tags name the same program.
    pub fn same(self, other: ProgramTag) -> bool {
        self.0 == other.0
    }
}

/// How many programs' buffer names [`ProgramTag::names`] remembers (the most recent), and
/// how many buffers of each: a bound on the memory messages cost, whatever an
/// application builds.
const REMEMBERED_PROGRAMS: usize = 256;
const REMEMBERED_BUFFERS: usize = 1024;

/// Program name and buffer names by tag, for messages about a handle used with another
/// program; the oldest program is forgotten first.
#[derive(Default)]
struct NameLog(std::collections::VecDeque<(u64, String, Vec<String>)>);

impl NameLog {
    const fn new() -> NameLog {
        NameLog(std::collections::VecDeque::new())
    }

    /// `O(1)` for the program remembered last (the one being built, searched from the
    /// back), `O(REMEMBERED_PROGRAMS)` at most.
    fn remember(&mut self, tag: u64, program: &str, id: BufferId, name: &str) {
        let at = self.0.iter().rposition(|(t, ..)| *t == tag);
        let entry = match at {
            Some(i) => &mut self.0[i],
            None => {
                if self.0.len() == REMEMBERED_PROGRAMS {
                    self.0.pop_front();
                }
                self.0.push_back((tag, program.to_string(), Vec::new()));
                self.0.back_mut().expect("just pushed")
            }
        };
        let i = id.index();
        if i < REMEMBERED_BUFFERS {
            if entry.2.len() <= i {
                entry.2.resize(i + 1, String::new());
            }
            entry.2[i] = name.to_string();
        }
    }

    fn names(&self, tag: u64, id: BufferId) -> Option<(String, String)> {
        let (_, program, buffers) = self.0.iter().find(|(t, ..)| *t == tag)?;
        let b = buffers.get(id.index()).filter(|b| !b.is_empty())?;
        Some((program.clone(), b.clone()))
    }
}

static NAMES: std::sync::Mutex<NameLog> = std::sync::Mutex::new(NameLog::new());

impl ProgramTag {
    /// Records that buffer `id` of program `program` (this tag) is named `name`, for
    /// [`ProgramTag::names`]. Called where typed handles are made. `O(REMEMBERED_PROGRAMS)`.
    pub(crate) fn remember(self, program: &str, id: BufferId, name: &str) {
        let mut log = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        log.remember(self.0, program, id, name);
    }

    /// The program's name and buffer `id`'s name, as declared where the handle was made
    /// ([`super::ProgramBuilder::buf`], [`crate::Plan::buffer`]), for messages: `None` once
    /// forgotten (the 256 most recent programs are remembered, their first 1024 buffers).
    pub fn names(self, id: BufferId) -> Option<(String, String)> {
        let log = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        log.names(self.0, id)
    }
}

/// A handle of another program used with program `here`, for messages: the buffer as
/// shown (its name where remembered, else `#N`) and why it is refused, naming the
/// program it belongs to where remembered.
pub(crate) fn foreign_handle(tag: ProgramTag, id: BufferId, here: &str) -> (String, String) {
    match tag.names(id) {
        Some((program, buffer)) if program == here => (
            buffer,
            format!(
                "the handle belongs to another program of the same name \"{here}\" (each \
                 builder, and each plan's lookup, makes handles of its own program)"
            ),
        ),
        Some((program, buffer)) => (
            buffer,
            format!("the handle belongs to program \"{program}\", not to \"{here}\""),
        ),
        None => (
            format!("#{}", id.0),
            format!("the handle belongs to another program, not to \"{here}\""),
        ),
    }
}

/// A typed handle to a buffer of `len` elements of `T` in one program: returned by
/// [`ProgramBuilder::buf`](super::ProgramBuilder::buf), or looked up by name in a plan
/// ([`crate::Plan::buffer`]). `Copy`; usable wherever a [`BufferId`] or a whole-buffer
/// selection is (`arg`, `map`, `depend`, host-task reads and writes).
pub struct Buf<T: Elem> {
    id: BufferId,
    len: u64,
    tag: ProgramTag,
    _t: PhantomData<fn() -> T>,
}

impl<T: Elem> Buf<T> {
    pub(crate) fn new(id: BufferId, len: u64, tag: ProgramTag) -> Buf<T> {
        Buf {
            id,
            len,
            tag,
            _t: PhantomData,
        }
    }

    /// The untyped id (the buffer's index in its program).
    pub fn id(self) -> BufferId {
        self.id
    }

    /// Length in elements.
    pub fn len(self) -> u64 {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The program the handle belongs to.
    pub fn tag(self) -> ProgramTag {
        self.tag
    }

    /// Elements `lo..lo + len` as a selection (an OpenMP array section `b[lo:len]`);
    /// bounds are checked when the program is lowered.
    pub fn part(self, lo: u64, len: u64) -> TypedSection {
        TypedSection {
            section: Section::new(self.id, lo, len),
            tag: self.tag,
        }
    }
}

impl<T: Elem> Clone for Buf<T> {
    fn clone(&self) -> Buf<T> {
        *self
    }
}

impl<T: Elem> Copy for Buf<T> {}

impl<T: Elem> fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buf<{}>({}, len {})", T::TYPE, self.id.0, self.len)
    }
}

impl<T: Elem> PartialEq for Buf<T> {
    fn eq(&self, other: &Buf<T>) -> bool {
        self.id == other.id && self.tag.same(other.tag)
    }
}

impl<T: Elem> Eq for Buf<T> {}

impl<T: Elem> From<Buf<T>> for BufferId {
    fn from(b: Buf<T>) -> BufferId {
        b.id
    }
}

/// A section of a typed buffer, with the program it belongs to ([`Buf::part`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypedSection {
    pub section: Section,
    pub tag: ProgramTag,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_unique_and_not_part_of_equality() {
        let (a, b) = (ProgramTag::fresh(), ProgramTag::fresh());
        assert!(!a.same(b));
        assert!(a.same(a));
        assert_eq!(a, b);
    }

    #[test]
    fn handles_know_their_type_and_program() {
        let t = ProgramTag::fresh();
        let x: Buf<f32> = Buf::new(BufferId(3), 8, t);
        assert_eq!(format!("{x:?}"), "Buf<f32>(3, len 8)");
        assert_eq!(BufferId::from(x), BufferId(3));
        assert_eq!(x.part(2, 4).section, Section::new(BufferId(3), 2, 4));
        let other: Buf<f32> = Buf::new(BufferId(3), 8, ProgramTag::fresh());
        assert_ne!(x, other);
        assert_eq!(<i64 as Elem>::TYPE, ElemType::I64);
    }

    #[test]
    fn handles_of_another_program_are_named_while_remembered() {
        let t = ProgramTag::fresh();
        t.remember("a", BufferId(1), "x");
        assert_eq!(t.names(BufferId(1)), Some(("a".into(), "x".into())));
        assert_eq!(t.names(BufferId(0)), None);
        assert_eq!(
            foreign_handle(t, BufferId(1), "b"),
            (
                "x".into(),
                "the handle belongs to program \"a\", not to \"b\"".into()
            )
        );
        assert!(foreign_handle(t, BufferId(1), "a")
            .1
            .contains("another program of the same name"));
        let u = ProgramTag::fresh();
        assert_eq!(
            foreign_handle(u, BufferId(1), "b"),
            (
                "#1".into(),
                "the handle belongs to another program, not to \"b\"".into()
            )
        );
    }

    #[test]
    fn the_name_log_is_bounded_and_forgets_the_oldest() {
        let mut log = NameLog::new();
        log.remember(1, "a", BufferId(2), "x");
        log.remember(1, "a", BufferId(REMEMBERED_BUFFERS as u32), "far");
        assert_eq!(log.names(1, BufferId(2)), Some(("a".into(), "x".into())));
        assert_eq!(log.names(1, BufferId(REMEMBERED_BUFFERS as u32)), None);
        for t in 2..=REMEMBERED_PROGRAMS as u64 {
            log.remember(t, "other", BufferId(0), "y");
        }
        assert_eq!(log.names(1, BufferId(2)), Some(("a".into(), "x".into())));
        log.remember(9999, "new", BufferId(0), "z");
        assert_eq!(log.0.len(), REMEMBERED_PROGRAMS);
        assert_eq!(log.names(1, BufferId(2)), None);
        assert_eq!(
            log.names(9999, BufferId(0)),
            Some(("new".into(), "z".into()))
        );
    }
}
