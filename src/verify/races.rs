//! Race freedom from the ops' own accesses, independent of the graph's edges.
//!
//! [`super::verify`] proves the schedule orders every OpGraph edge; that is enough for a
//! graph the lowering made, whose edges are every read-after-write, write-after-read and
//! write-after-write between ops ([design notes](crate::design) "Dependencies"). A graph built or edited by
//! hand may lack edges, and then two ops could touch the same bytes at once: on the host
//! plugin that is two threads holding `&mut [T]` of one device block, undefined behaviour
//! in safe code. So the executor's safe entry point ([`crate::exec::execute`]) also runs
//! this check: it recomputes, from each op's kind alone, what it reads and writes, and
//! proves every conflicting pair ordered by happens-before.
//!
//! Accesses (element ranges, in the buffer's element indices as the lowering's tracker
//! has them):
//! - `Alloc` and `Free` write the whole allocation (every use lies between them);
//! - `H2D` reads its host section and writes it in the allocation; `D2H` the reverse;
//! - a peer copy reads its section of `src` and writes it in `dst`;
//! - a kernel reads and writes its device (or, in a host task, host) arguments as their
//!   [`crate::model::Access`] says;
//! - a host task reads and writes its host sections; `End` reads every host buffer.
//!
//! Ops are fed to the lowering's range tracker in issue order; each conflict it returns
//! (the latest writers, and for a write the readers since) must be complete at the op's
//! start. Checking only those suffices: the latest writer was itself checked against the
//! writers before it, and happens-before is transitive.
//!
//! Allocations are not forgotten at their `Free`, so a use issued after the free must be
//! ordered after it too (the executor refuses such a use anyway).
//!
//! Complexity: `O((V + C) log V)` for `V` ops and `C` conflicts found, plus `O(1)` per
//! conflict for the clock test.

use super::{Verifier, Violation};
use crate::lower::{DepTracker, KernelArg, OpGraph, OpId, OpKind, Space};
use crate::model::{Access, Section};

/// One range an op touches.
struct Touch {
    space: Space,
    buf: usize,
    lo: u64,
    len: u64,
    write: bool,
}

impl Touch {
    fn host(s: &Section, write: bool) -> Touch {
        Touch {
            space: Space::Host,
            buf: s.buf.index(),
            lo: s.lo,
            len: s.len,
            write,
        }
    }
}

/// What `op` reads and writes (see the module docs); reads first, so an op that reads
/// and writes one range conflicts with others only. Allocation ids out of range are
/// skipped (the structural check and the executor's own checks report them).
fn touches(graph: &OpGraph, op: OpId) -> Vec<Touch> {
    let alloc = |a: crate::lower::AllocId, lo: Option<u64>, len: Option<u64>, write| {
        graph.allocs.get(a.index()).map(|al| Touch {
            space: Space::Alloc(a),
            buf: al.section.buf.index(),
            lo: lo.unwrap_or(al.section.lo),
            len: len.unwrap_or(al.section.len),
            write,
        })
    };
    let mut out = Vec::new();
    match &graph.op(op).kind {
        OpKind::Alloc { alloc: a } | OpKind::Free { alloc: a } => {
            out.extend(alloc(*a, None, None, true));
        }
        OpKind::H2D { alloc: a, section } => {
            out.push(Touch::host(section, false));
            out.extend(alloc(*a, Some(section.lo), Some(section.len), true));
        }
        OpKind::D2H { alloc: a, section } => {
            out.extend(alloc(*a, Some(section.lo), Some(section.len), false));
            out.push(Touch::host(section, true));
        }
        OpKind::PeerCopy { src, dst, section } => {
            out.extend(alloc(*src, Some(section.lo), Some(section.len), false));
            out.extend(alloc(*dst, Some(section.lo), Some(section.len), true));
        }
        OpKind::Kernel(call) => args(graph, &call.args, &alloc, &mut out),
        OpKind::HostTask {
            reads,
            writes,
            call,
            ..
        } => {
            out.extend(reads.iter().map(|s| Touch::host(s, false)));
            if let Some(call) = call {
                args(graph, &call.args, &alloc, &mut out);
            }
            out.extend(writes.iter().map(|s| Touch::host(s, true)));
        }
        OpKind::End => {
            out.extend(graph.buffers.iter().enumerate().map(|(b, buf)| Touch {
                space: Space::Host,
                buf: b,
                lo: 0,
                len: buf.len,
                write: false,
            }));
        }
        OpKind::Taskwait => {}
    }
    out.sort_by_key(|t| t.write);
    out
}

/// The ranges of kernel arguments, reads and writes as their access says.
fn args(
    graph: &OpGraph,
    args: &[KernelArg],
    alloc: &impl Fn(crate::lower::AllocId, Option<u64>, Option<u64>, bool) -> Option<Touch>,
    out: &mut Vec<Touch>,
) {
    let mut push = |make: &dyn Fn(bool) -> Option<Touch>, access: Access| {
        if access.reads() {
            out.extend(make(false));
        }
        if access.writes() {
            out.extend(make(true));
        }
    };
    for a in args {
        match a {
            KernelArg::Device {
                alloc: id,
                offset,
                len,
                access,
            } => {
                let base = graph.allocs.get(id.index()).map(|al| al.section.lo);
                let lo = base.map(|b| b.saturating_add(*offset));
                push(&|w| alloc(*id, lo, Some(*len), w), *access);
            }
            KernelArg::Host { section, access } => {
                push(&|w| Some(Touch::host(section, w)), *access);
            }
            KernelArg::Empty { .. } | KernelArg::Scalar(_) => {}
        }
    }
}

/// The race check's state: the range tracker over every resource, fed in issue order.
pub(super) struct Races {
    tracker: DepTracker,
    conflicts: Vec<OpId>,
}

impl Races {
    pub(super) fn new(graph: &OpGraph) -> Races {
        Races {
            tracker: DepTracker::new(graph.buffers.len()),
            conflicts: Vec::new(),
        }
    }
}

impl Verifier<'_> {
    /// Op `id` is being issued with start clock [`Verifier::start`]: records what it
    /// touches and reports every earlier conflicting op that may still run
    /// ([`Violation::Race`]), unless the graph has that edge (then
    /// [`Violation::Unordered`] already names it). `O(t log V + c)` for `t` ranges and
    /// `c` conflicts.
    pub(super) fn check_races(&mut self, id: OpId) {
        let Some(mut races) = self.races.take() else {
            return;
        };
        let graph = self.graph;
        let mut conflicts = std::mem::take(&mut races.conflicts);
        for t in touches(graph, id) {
            let (lo, len) = (t.lo, t.len.min(u64::MAX - t.lo));
            conflicts.clear();
            if t.write {
                races
                    .tracker
                    .write(t.space, t.buf, lo, len, id, &mut conflicts);
            } else {
                races
                    .tracker
                    .read(t.space, t.buf, lo, len, id, &mut conflicts);
            }
            conflicts.sort_unstable();
            conflicts.dedup();
            for &p in &conflicts {
                if self.covers(&self.start, p) || graph.preds(id).contains(&p) {
                    continue;
                }
                let what = match t.space {
                    Space::Alloc(a) => format!("device allocation {}", a.index()),
                    Space::Host | Space::Depend => "host memory".to_string(),
                };
                let name = graph
                    .buffers
                    .get(t.buf)
                    .map(|b| b.name.as_str())
                    .unwrap_or("?");
                self.violations.push(Violation::Race {
                    first: p,
                    second: id,
                    detail: format!(
                        "{} and {} both touch \"{name}\" ({what}), one writing, with no edge \
                         between them, and {} may still run when {} starts",
                        graph.describe(p),
                        graph.describe(id),
                        graph.describe(p),
                        graph.describe(id),
                    ),
                });
            }
        }
        races.conflicts = conflicts;
        self.races = Some(races);
    }
}
