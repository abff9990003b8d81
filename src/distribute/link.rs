//! The send and receive host tasks' bodies: they read (write) the host bytes of their
//! section and hand them to (take them from) the rank's [`Transport`], attached to the
//! rank's [`Link`] before a run.

use super::transfer::Transfer;
use super::transport::{Transport, TransportError};
use crate::model::{BoxError, ElemType, HostCtx, HostFn, ProgramTag, Section};
use std::sync::{Arc, Mutex, PoisonError};

/// A rank program's connection to its transport: shared by its send and receive tasks,
/// attached by the runner ([`Link::attach`]) before the rank's plan runs.
#[derive(Default)]
pub struct Link {
    transport: Mutex<Option<Arc<dyn Transport>>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Link")
    }
}

impl Link {
    /// Connects the rank's send and receive tasks to `transport` (replacing any earlier).
    pub fn attach(&self, transport: Arc<dyn Transport>) {
        *self
            .transport
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(transport);
    }

    fn get(&self) -> Result<Arc<dyn Transport>, BoxError> {
        self.transport
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| "the rank program runs without a transport (Link::attach)".into())
    }
}

macro_rules! by_type {
    ($ty:expr, $t:ident => $body:expr) => {
        match $ty {
            ElemType::F32 => {
                type $t = f32;
                $body
            }
            ElemType::F64 => {
                type $t = f64;
                $body
            }
            ElemType::I32 => {
                type $t = i32;
                $body
            }
            ElemType::I64 => {
                type $t = i64;
                $body
            }
            ElemType::U8 => {
                type $t = u8;
                $body
            }
        }
    };
}

/// The host bytes of `s` (elements of type `ty`), native byte order.
fn read_bytes(ctx: &HostCtx<'_>, s: Section, ty: ElemType) -> Result<Vec<u8>, BoxError> {
    if s.len == 0 {
        return Ok(Vec::new()); // an ordering token: no data
    }
    by_type!(ty, T => {
        let v = ctx.read_at::<T>(s.buf, s.lo, s.len)?;
        Ok(v.iter().flat_map(|x| x.to_ne_bytes()).collect())
    })
}

/// Writes `data` (native byte order) into the host elements of `s`.
fn write_bytes(ctx: &HostCtx<'_>, s: Section, ty: ElemType, data: &[u8]) -> Result<(), BoxError> {
    if s.len == 0 {
        return Ok(());
    }
    by_type!(ty, T => {
        let v = ctx.write_at::<T>(s.buf, s.lo, s.len)?;
        const N: usize = std::mem::size_of::<T>();
        for (x, b) in v.iter_mut().zip(data.chunks_exact(N)) {
            *x = T::from_ne_bytes(b.try_into().expect("chunk of N bytes"));
        }
        Ok(())
    })
}

/// The body of `t`'s send task: reads its section and sends it.
pub(crate) fn send_body(tag: ProgramTag, link: Arc<Link>, t: &Transfer, ty: ElemType) -> HostFn {
    let (env, s) = (t.envelope, t.section);
    HostFn::new(tag, move |ctx| {
        let data = read_bytes(ctx, s, ty)?;
        link.get()?.send(env, data)?;
        Ok(())
    })
}

/// The body of `t`'s receive task: receives its section's bytes and writes them. It
/// stops waiting once the rank's run has failed elsewhere ([`HostCtx::run_failed`]: the
/// receives wait on a lane of their own, and the message may be one the failed work
/// would have caused), and then returns without writing: the run ends with the first
/// error, so nothing reads the section, and the caller aborts the other ranks.
pub(crate) fn recv_body(tag: ProgramTag, link: Arc<Link>, t: &Transfer, ty: ElemType) -> HostFn {
    let (env, s, bytes) = (t.envelope, t.section, t.bytes);
    HostFn::new(tag, move |ctx| {
        let stop = || ctx.run_failed();
        match link.get()?.recv(env, bytes, &stop) {
            Ok(data) => write_bytes(ctx, s, ty, &data),
            Err(TransportError::Stopped { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    })
}

/// Host bytes a rank keeps aside while a device value passes through its host copy
/// (see `split/device.rs`, staging): filled by a save task, emptied by its restore task.
pub(crate) type Stash = Arc<Mutex<Vec<u8>>>;

/// The body of a save task: copies the host bytes of `s` into `stash`.
pub(crate) fn save_body(tag: ProgramTag, stash: Stash, s: Section, ty: ElemType) -> HostFn {
    HostFn::new(tag, move |ctx| {
        let data = read_bytes(ctx, s, ty)?;
        *stash.lock().unwrap_or_else(PoisonError::into_inner) = data;
        Ok(())
    })
}

/// The body of a restore task: writes the bytes of `stash` back into the host
/// elements of `s`.
pub(crate) fn restore_body(tag: ProgramTag, stash: Stash, s: Section, ty: ElemType) -> HostFn {
    HostFn::new(tag, move |ctx| {
        let data = std::mem::take(&mut *stash.lock().unwrap_or_else(PoisonError::into_inner));
        write_bytes(ctx, s, ty, &data)
    })
}
