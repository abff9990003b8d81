//! The schedule text: deterministic, one block per stream, then the host, then a summary.
//!
//! ```text
//! schedule "saxpy" policy=minimal streams=1 (pool 4 per device)
//! s0 (device 0):
//!   #0 alloc  x[0:1024] 4 KiB   region "saxpy"
//!   ...
//!   record e0
//!   wait e1
//! host:
//!   wait s0 (after #5)
//!   #6 end
//!   wait e2 (after #9)      (a host wait on an event: recorded after #9)
//! s1 (device 1):
//!   #12 peer  x[0:256] 1 KiB from d0   (a peer copy from device 0, on device 1's stream)
//! summary: 7 ops, 1 stream, 0 events, 1 host wait
//! ```

use super::{Schedule, Step, StreamId};
use crate::lower::{OpGraph, OpId, OpKind};
use crate::model::escape_controls;
use crate::model::{human_bytes, Section};
use std::collections::BTreeMap;
use std::fmt::{self, Write};

#[derive(Clone, Debug, PartialEq)]
enum Detail {
    None,
    Section(Section),
    /// A peer copy: the section and the device it is copied from.
    Peer(Section, u32),
    Kernel(u32),
}

#[derive(Clone, Debug, PartialEq)]
struct OpLine {
    kind: &'static str,
    detail: Detail,
    bytes: u64,
    region: u32,
}

/// What `Display` needs of the graph, copied compactly (about 48 bytes per op).
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct OpText {
    lines: Vec<OpLine>,
    buffer_names: Vec<String>,
    region_names: Vec<String>,
    kernel_names: Vec<String>,
    pool: u32,
}

impl OpText {
    /// Copies the descriptions of every op. `O(V log K)` for `K` distinct kernel names.
    pub(crate) fn new(graph: &OpGraph, pool: u32) -> OpText {
        let mut kernels: BTreeMap<&str, u32> = BTreeMap::new();
        let mut kernel_names = Vec::new();
        let lines = graph
            .op_ids()
            .map(|id| {
                let op = graph.op(id);
                let detail = match &op.kind {
                    OpKind::Alloc { alloc } | OpKind::Free { alloc } => {
                        Detail::Section(graph.allocs[alloc.index()].section)
                    }
                    OpKind::H2D { section, .. } | OpKind::D2H { section, .. } => {
                        Detail::Section(*section)
                    }
                    OpKind::PeerCopy { src, section, .. } => {
                        Detail::Peer(*section, graph.allocs[src.index()].device)
                    }
                    OpKind::Kernel(k) | OpKind::HostTask { call: Some(k), .. } => {
                        let next = kernels.len() as u32;
                        let i = *kernels.entry(k.kernel.as_str()).or_insert_with(|| {
                            kernel_names.push(escape_controls(&k.kernel).into_owned());
                            next
                        });
                        Detail::Kernel(i)
                    }
                    _ => Detail::None,
                };
                OpLine {
                    kind: op.kind.name(),
                    detail,
                    bytes: graph.op_bytes(id),
                    region: op.region.0,
                }
            })
            .collect();
        OpText {
            lines,
            buffer_names: graph
                .buffers
                .iter()
                .map(|b| escape_controls(&b.name).into_owned())
                .collect(),
            region_names: graph.regions.iter().map(|r| r.name.clone()).collect(),
            kernel_names,
            pool,
        }
    }

    fn describe(&self, op: OpId) -> String {
        let l = &self.lines[op.index()];
        let mut s = format!("{:<6} {:<8}", op.to_string(), l.kind);
        match &l.detail {
            Detail::Section(sec) => {
                let _ = write!(
                    s,
                    " {}[{}:{}] {}",
                    self.buffer_names[sec.buf.index()],
                    sec.lo,
                    sec.len,
                    human_bytes(l.bytes)
                );
            }
            Detail::Peer(sec, from) => {
                let _ = write!(
                    s,
                    " {}[{}:{}] {} from d{from}",
                    self.buffer_names[sec.buf.index()],
                    sec.lo,
                    sec.len,
                    human_bytes(l.bytes)
                );
            }
            Detail::Kernel(k) => {
                let _ = write!(s, " {}", self.kernel_names[*k as usize]);
            }
            Detail::None => {}
        }
        format!(
            "{s:<40} region \"{}\"",
            self.region_names[l.region as usize]
        )
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.text;
        let ns = self.streams.len();
        let mut blocks: Vec<Vec<String>> = vec![Vec::new(); ns];
        let mut host: Vec<String> = Vec::new();
        let mut last_on: Vec<Option<OpId>> = vec![None; ns];
        // The op each event was last recorded after (for host waits on it).
        let mut recorded_after: Vec<Option<OpId>> = vec![None; self.events as usize];
        for step in &self.steps {
            match *step {
                Step::Op(op) => match self.op_stream[op.index()] {
                    Some(s) => {
                        blocks[s.index()].push(t.describe(op));
                        last_on[s.index()] = Some(op);
                    }
                    None => host.push(t.describe(op)),
                },
                Step::Record { event, stream } => {
                    blocks[stream.index()].push(format!("record {event}"));
                    if let Some(r) = recorded_after.get_mut(event.index()) {
                        *r = last_on[stream.index()];
                    }
                }
                Step::Wait { event, stream } => {
                    blocks[stream.index()].push(format!("wait {event}"));
                }
                Step::HostWait { stream } => {
                    let after = match last_on[stream.index()] {
                        Some(op) => format!(" (after {op})"),
                        None => String::new(),
                    };
                    host.push(format!("wait {stream}{after}"));
                }
                Step::HostWaitEvent { event } => {
                    let after = match recorded_after.get(event.index()).copied().flatten() {
                        Some(op) => format!(" (after {op})"),
                        None => String::new(),
                    };
                    host.push(format!("wait {event}{after}"));
                }
                Step::HostWaitDevice { device } => {
                    host.push(format!("wait device {device} (all streams)"));
                }
            }
        }
        let used = self.used_streams();
        writeln!(
            f,
            "schedule \"{}\" policy={} streams={} (pool {} per device)",
            t_name(self),
            self.policy,
            used,
            t.pool
        )?;
        for (i, lines) in blocks.iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            writeln!(
                f,
                "{} (device {}):",
                StreamId(i as u32),
                self.streams[i].device
            )?;
            for l in lines {
                writeln!(f, "  {l}")?;
            }
        }
        if !host.is_empty() {
            writeln!(f, "host:")?;
            for l in &host {
                writeln!(f, "  {l}")?;
            }
        }
        let hw = self.host_waits().count();
        writeln!(
            f,
            "summary: {} ops, {} stream{}, {} event{}, {} host wait{}",
            self.op_count(),
            used,
            plural(used),
            self.events,
            plural(self.events as usize),
            hw,
            plural(hw)
        )
    }
}

fn t_name(s: &Schedule) -> std::borrow::Cow<'_, str> {
    escape_controls(&s.name)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
