//! The matrices of `bench linalg` in plugin host memory ([`PinnedBuf`]: page-locked on
//! CUDA, `cuMemHostAlloc`), made once per (algorithm, n, precision) and bound to every
//! run of every row of it: the tiled programs of each tile size and policy, the
//! copies-alone program and the one-tile (library routine) program share their
//! buffers' initial contents (a buffer's contents depend only on its name, type, length
//! and [`Init`], not on the tile size: the programs keep the matrix in tile layout and
//! generate it in index order).
//!
//! Why: at n = 32768 (f64) the matrix is 8.6 GB. Generated from its seed it costs seconds
//! of one host core; bound as application memory (`&mut [T]`) the CUDA plugin stages it
//! through its own pinned block each run (one host `memcpy` each way). Here it is
//! generated once; a buffer the program only reads is bound in place
//! ([`Bindings::pinned_input`]); a buffer the program writes back (the factor `A`, the
//! product `C`) gets a work copy, bound in place ([`Bindings::pinned_output`]) and
//! restored from the initial contents before each run by a host copy on every core
//! (outside the timed figure, which starts at the run's first issued op). The devices
//! get the matrices by the program's own H2D copies from page-locked memory, at the
//! copy engines' rate.
//!
//! The plugin cannot generate the matrices on the device: the programs' buffers are
//! host arrays whose initial contents the executor writes on the host
//! ([`offload_sched::exec::init_bytes`]).

use offload_sched::exec::init_bytes;
use offload_sched::lower::OpKind;
use offload_sched::model::{Buffer, ElemType, Init};
use offload_sched::plugin::Plugin;
use offload_sched::{Bindings, PinnedBuf, Plan, Session};
use std::time::Instant;

/// Page-locked memory of one buffer, typed.
enum Pinned<'p> {
    F32(PinnedBuf<'p, f32>),
    F64(PinnedBuf<'p, f64>),
}

impl Pinned<'_> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Pinned::F32(p) => as_bytes_mut(p),
            Pinned::F64(p) => as_bytes_mut(p),
        }
    }

    fn values(&self) -> Vec<f64> {
        match self {
            Pinned::F32(p) => p.iter().map(|&v| v as f64).collect(),
            Pinned::F64(p) => p.to_vec(),
        }
    }
}

fn as_bytes_mut<T: offload_sched::model::Elem>(v: &mut [T]) -> &mut [u8] {
    let bytes = std::mem::size_of_val(v);
    // SAFETY: `T` is f32 or f64 (plain data, every byte pattern valid); the slice is
    // exclusively borrowed for the returned lifetime.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, bytes) }
}

/// One buffer's contents: the initial ones and, for a buffer a program writes on the
/// host, a work copy (made on first need).
struct Entry<'p> {
    name: String,
    ty: ElemType,
    len: u64,
    init: Init,
    initial: Pinned<'p>,
    work: Option<Pinned<'p>>,
}

impl Entry<'_> {
    fn is(&self, b: &Buffer) -> bool {
        self.name == b.name && self.ty == b.ty && self.len == b.len && self.init == b.init
    }
}

/// The buffers of one (algorithm, n, precision), made on first use (module docs).
pub(super) struct Inputs<'p> {
    /// Makes the pinned buffers (a session of the one-tile program: it never runs).
    maker: Session<'p>,
    entries: Vec<Entry<'p>>,
    threads: usize,
    /// Seconds spent generating initial contents so far.
    pub made_s: f64,
    /// Bytes of plugin host memory held.
    pub held_bytes: u64,
}

/// The buffers of `plan` its runs write on the host (a D2H lands in them, or a host task
/// writes them), by index.
fn written(plan: &Plan) -> Vec<bool> {
    let g = plan.graph();
    let mut w = vec![false; g.buffers.len()];
    for op in &g.ops {
        match &op.kind {
            OpKind::D2H { section, .. } => w[section.buf.index()] = true,
            OpKind::HostTask { writes, .. } => writes.iter().for_each(|s| w[s.buf.index()] = true),
            _ => {}
        }
    }
    w
}

/// `dst ← src` split over `threads` scoped threads (chunks of at least 1 MiB).
fn par_copy(dst: &mut [u8], src: &[u8], threads: usize) {
    let chunk = src.len().div_ceil(threads.max(1)).max(1 << 20);
    std::thread::scope(|s| {
        for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
            s.spawn(move || d.copy_from_slice(c));
        }
    });
}

impl<'p> Inputs<'p> {
    /// None made yet; `anchor` is any plan of the call (its session only allocates),
    /// `threads` the host cores the restore copies use.
    pub(super) fn new(
        anchor: &'p Plan,
        plugin: &'p dyn Plugin,
        threads: usize,
    ) -> Result<Inputs<'p>, String> {
        Ok(Inputs {
            maker: Session::new(anchor, plugin).map_err(|e| e.render())?,
            entries: Vec::new(),
            threads,
            made_s: 0.0,
            held_bytes: 0,
        })
    }

    fn alloc(&mut self, ty: ElemType, len: u64) -> Result<Pinned<'p>, String> {
        let n = usize::try_from(len).map_err(|_| format!("{len} elements do not fit"))?;
        let p = match ty {
            ElemType::F32 => Pinned::F32(self.maker.pinned::<f32>(n).map_err(|e| e.render())?),
            ElemType::F64 => Pinned::F64(self.maker.pinned::<f64>(n).map_err(|e| e.render())?),
            other => {
                return Err(format!(
                    "bench linalg binds f32 and f64 buffers only, not {other}"
                ))
            }
        };
        self.held_bytes += len * ty.size_bytes();
        Ok(p)
    }

    /// The entry of `b`, made (allocated and generated) if missing.
    fn entry(&mut self, b: &Buffer) -> Result<usize, String> {
        if let Some(i) = self.entries.iter().position(|e| e.is(b)) {
            return Ok(i);
        }
        let t0 = Instant::now();
        let mut initial = self.alloc(b.ty, b.len)?;
        let bytes = initial.bytes_mut();
        let mut at = 0;
        init_bytes(b, |chunk| {
            bytes[at..at + chunk.len()].copy_from_slice(chunk);
            at += chunk.len();
        });
        self.made_s += t0.elapsed().as_secs_f64();
        self.entries.push(Entry {
            name: b.name.clone(),
            ty: b.ty,
            len: b.len,
            init: b.init.clone(),
            initial,
            work: None,
        });
        Ok(self.entries.len() - 1)
    }

    /// Makes every buffer of `plan` (and a work copy of each it writes) and, with
    /// `restore`, copies the initial contents into the work copies. Returns the seconds
    /// the restore took.
    pub(super) fn prepare(&mut self, plan: &Plan, restore: bool) -> Result<f64, String> {
        let w = written(plan);
        let mut restore_s = 0.0;
        for (b, &writes) in plan.program().buffers.iter().zip(&w) {
            let i = self.entry(b)?;
            if !writes {
                continue;
            }
            if self.entries[i].work.is_none() {
                let work = self.alloc(b.ty, b.len)?;
                self.entries[i].work = Some(work);
            }
            if restore {
                let t0 = Instant::now();
                let threads = self.threads;
                let e = &mut self.entries[i];
                let src: &[u8] = match &e.initial {
                    Pinned::F32(p) => bytes_of(p),
                    Pinned::F64(p) => bytes_of(p),
                };
                let dst = e.work.as_mut().expect("made above").bytes_mut();
                par_copy(dst, src, threads);
                restore_s += t0.elapsed().as_secs_f64();
            }
        }
        Ok(restore_s)
    }

    /// Bindings of every buffer of `plan` (made by [`Inputs::prepare`]): the initial
    /// contents in place for a buffer it only reads, the work copy for one it writes.
    ///
    /// Errors: a buffer not prepared, or of another type than its handle.
    pub(super) fn bindings(&mut self, plan: &Plan) -> Result<Bindings<'_>, String> {
        let w = written(plan);
        let e = |e: offload_sched::Error| e.render();
        let mut bind = Bindings::new();
        let bufs = &plan.program().buffers;
        let mut bound = 0;
        for entry in self.entries.iter_mut() {
            let Some(k) = bufs.iter().position(|b| entry.is(b)) else {
                continue;
            };
            let name = entry.name.as_str();
            bind = match (w[k], &entry.initial, entry.work.as_mut()) {
                (false, Pinned::F32(p), _) => {
                    bind.pinned_input(plan.buffer::<f32>(name).map_err(e)?, p)
                }
                (false, Pinned::F64(p), _) => {
                    bind.pinned_input(plan.buffer::<f64>(name).map_err(e)?, p)
                }
                (true, _, Some(Pinned::F32(p))) => {
                    bind.pinned_output(plan.buffer::<f32>(name).map_err(e)?, p)
                }
                (true, _, Some(Pinned::F64(p))) => {
                    bind.pinned_output(plan.buffer::<f64>(name).map_err(e)?, p)
                }
                (true, _, None) => {
                    return Err(format!("buffer {name}: no work copy (not prepared)"))
                }
            };
            bound += 1;
        }
        if bound != bufs.len() {
            return Err(format!(
                "{}: {} of its {} buffers prepared",
                plan.graph().name,
                bound,
                bufs.len()
            ));
        }
        Ok(bind)
    }

    /// The initial contents of buffer `name` (as f64), if made.
    pub(super) fn initial(&self, name: &str) -> Option<Vec<f64>> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.initial.values())
    }

    /// The work copy of buffer `name` (as f64): the last run's result, if any.
    pub(super) fn result(&self, name: &str) -> Option<Vec<f64>> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.work.as_ref())
            .map(Pinned::values)
    }
}

fn bytes_of<T: offload_sched::model::Elem>(v: &[T]) -> &[u8] {
    // SAFETY: plain data (f32 / f64), borrowed for the returned lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}
