//! [`Bindings`]: the application memory one run of a plan uses for some of its buffers.

use super::pinned::PinnedBuf;
use crate::model::{Buf, BufferId, Elem, ElemType, ProgramTag};
use crate::plugin::HostPtr;
use std::marker::PhantomData;

/// Application memory for some buffers of one run, by typed handle: inputs as `&[T]`,
/// outputs as `&mut [T]` (or [`PinnedBuf`]s). The borrows last as long as the bindings
/// and the run that uses them ([`crate::Session::run`] returns, or the
/// [`crate::Submitted`] handle is waited on), so the host cannot touch bound memory
/// while the run is in flight.
///
/// Checked when the run starts, before anything is issued (an error names the buffer):
/// the handle is of the session's program, the slice holds exactly the buffer's length,
/// a buffer is bound at most once, a [`PinnedBuf`] is of the session's plugin, and an
/// input (`&[T]`) is not a buffer the program writes on the host (a `map(from)` copy back or a host task's write lands there).
///
/// An output is read too: the run starts from the slice's contents, like an in-out
/// buffer (a section nothing writes keeps them). Unbound buffers start from their
/// declared initial contents, as in graph files.
///
/// ```
/// use offload_sched::model::{MapType, ProgramBuilder};
/// use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
/// use offload_sched::schedule::ScheduleOptions;
/// use offload_sched::{Bindings, Plan, Session};
///
/// let mut p = ProgramBuilder::new("saxpy");
/// let x = p.buf::<f32>("x", 4);
/// let y = p.buf::<f32>("y", 4);
/// p.target("saxpy", "saxpy").num(2.0).arg(x).arg(y)
///     .map(MapType::To, x).map(MapType::ToFrom, y);
/// let plan = Plan::new(p.build(), &ScheduleOptions::default())?;
/// let plugin = HostPlugin::new(HostPluginOptions::default());
/// let mut session = Session::new(&plan, &plugin)?;
/// let xs = [1.0f32, 2.0, 3.0, 4.0];
/// let mut ys = [1.0f32; 4];
/// session.run(Bindings::new().input(x, &xs).output(y, &mut ys))?;
/// assert_eq!(ys, [3.0, 5.0, 7.0, 9.0]); // y = 2·x + y
/// # Ok::<(), offload_sched::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct Bindings<'a> {
    pub(super) entries: Vec<Entry>,
    _borrows: PhantomData<&'a mut [u8]>,
}

/// One bound buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) id: BufferId,
    pub(super) tag: ProgramTag,
    pub(super) ty: ElemType,
    /// Length of the bound memory in elements.
    pub(super) len: u64,
    pub(super) memory: Memory,
    pub(super) writable: bool,
}

/// Where the bound memory is.
#[derive(Clone, Copy, Debug)]
pub(super) enum Memory {
    /// Application memory.
    App(*mut u8),
    /// Plugin host memory ([`PinnedBuf`]) and the identity of the plugin that made it.
    Plugin(HostPtr, usize),
}

impl<'a> Bindings<'a> {
    /// No buffer bound.
    pub fn new() -> Bindings<'a> {
        Bindings::default()
    }

    fn push<T: Elem>(mut self, buf: Buf<T>, len: usize, memory: Memory, writable: bool) -> Self {
        self.entries.push(Entry {
            id: buf.id(),
            tag: buf.tag(),
            ty: T::TYPE,
            len: len as u64,
            memory,
            writable,
        });
        self
    }

    /// Binds `data` as the contents of `buf` for the run; the run only reads it.
    pub fn input<T: Elem>(self, buf: Buf<T>, data: &'a [T]) -> Self {
        let ptr = data.as_ptr() as *mut u8;
        self.push(buf, data.len(), Memory::App(ptr), false)
    }

    /// Binds `data` as `buf` for the run: the run starts from its contents and leaves
    /// the buffer's final contents there.
    pub fn output<T: Elem>(self, buf: Buf<T>, data: &'a mut [T]) -> Self {
        let ptr = data.as_mut_ptr() as *mut u8;
        self.push(buf, data.len(), Memory::App(ptr), true)
    }

    /// [`Bindings::input`] from page-locked plugin memory: copies use it in place.
    pub fn pinned_input<T: Elem>(self, buf: Buf<T>, data: &'a PinnedBuf<'_, T>) -> Self {
        let ptr = data.host_ptr();
        self.push(
            buf,
            data.len(),
            Memory::Plugin(ptr, data.plugin_id()),
            false,
        )
    }

    /// [`Bindings::output`] to page-locked plugin memory: copies use it in place.
    pub fn pinned_output<T: Elem>(self, buf: Buf<T>, data: &'a mut PinnedBuf<'_, T>) -> Self {
        let ptr = data.host_ptr();
        self.push(buf, data.len(), Memory::Plugin(ptr, data.plugin_id()), true)
    }

    /// Number of buffers bound.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no buffer is bound.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
