//! The host memory that lowering, scheduling and verifying a program will take, bounded
//! from the program before anything is lowered, so that a short graph file (a taskgraph
//! with `repeat = 2500000`) is refused with the figures instead of aborting on an
//! allocation half-way (issue 25 point 6).
//!
//! The bound is ops × [`BYTES_PER_OP`]: every construct, unrolled, lowers to at most
//! `1 + 4 × maps` ops (per map item an alloc, an H2D, a D2H and a free; one kernel,
//! host task, taskwait or data-construct marker), and each op costs the op graph
//! (op, edges, names), the schedule (steps, streams, events) and the verifier's and
//! executor's per-op state. [`BYTES_PER_OP`] is measured with a counting allocator
//! (`tests/lower_memory.rs`, which checks the bound): lowering, scheduling, verifying and
//! running a taskgraph of one region repeated thousands of times peaked at 510-650 B per
//! bounded op with two maps and up to 793 B with six (the per-op policy the most; heap
//! bytes, 2026-12-02); in resident memory, 80 000 repeats of the two-map region peaked
//! at 322 MiB in `schedule`, 255 MiB in `dot` and 363 MiB in `run --policy per-op`.

use super::LowerError;
use crate::estimate::{self, Available, MemoryLimit};
use crate::model::{human_bytes, Construct, Program};

/// Host bytes one op (as bounded by [`op_bound`]) takes through lowering, scheduling,
/// verification and a run's bookkeeping (see the module docs for the measurement).
pub const BYTES_PER_OP: u64 = 1024;

/// At most how many ops `body` lowers to, taskgraphs unrolled (saturating).
pub fn op_bound(body: &[Construct]) -> u64 {
    body.iter()
        .map(|c| {
            let maps = |n: usize| 1 + 4 * n as u64;
            match c {
                Construct::Target(r) => maps(r.maps.len()),
                Construct::TargetData(d) => maps(d.maps.len()).saturating_add(op_bound(&d.body)),
                Construct::Taskgraph(t) => op_bound(&t.body).saturating_mul(u64::from(t.repeat)),
                Construct::EnterData(d) | Construct::ExitData(d) | Construct::Update(d) => {
                    maps(d.maps.len())
                }
                Construct::Taskwait { .. } => 1,
                Construct::HostTask(h) => 1 + (h.reads.len() + h.writes.len()) as u64,
            }
        })
        .fold(0, u64::saturating_add)
}

/// Host bytes lowering and scheduling `p` takes at most: [`op_bound`] × [`BYTES_PER_OP`].
pub fn graph_bytes(p: &Program) -> u64 {
    op_bound(&p.body).saturating_mul(BYTES_PER_OP)
}

/// Refuses `p` when [`graph_bytes`] is over what `limit` allows ([`estimate::available`]:
/// the machine's available memory, `OFFLOAD_SCHED_MEMORY_LIMIT`, or a given figure);
/// small programs (under [`estimate::PROBE_BYTES`]) are not checked against the machine.
/// The error names the taskgraph that contributes most (located in its graph file), or
/// the program. Call after the unrolled size is checked.
pub(super) fn check_graph_memory(p: &Program, limit: &MemoryLimit) -> Result<(), LowerError> {
    let ops = op_bound(&p.body);
    let need = ops.saturating_mul(BYTES_PER_OP);
    let available = match estimate::available_for(need, limit) {
        Ok(Some(a)) if need > a.bytes => a,
        Ok(_) => return Ok(()),
        Err(e) => {
            return Err(LowerError::Program {
                program: p.name.clone(),
                detail: e.to_string(),
            })
        }
    };
    let detail = refusal(ops, need, &available);
    Err(match biggest_taskgraph(&p.body) {
        Some(t) if op_bound(&t.body).saturating_mul(u64::from(t.repeat)) * 2 > ops => {
            LowerError::Taskgraph {
                name: t.name.clone(),
                detail: format!("repeat = {}: {detail}", t.repeat),
                span: t.span,
            }
        }
        _ => LowerError::Program {
            program: p.name.clone(),
            detail,
        },
    })
}

fn refusal(ops: u64, need: u64, available: &Available) -> String {
    format!(
        "lowering needs about {} of host memory for the op graph and its schedule (at most \
         {ops} ops at {BYTES_PER_OP} B each); {available}; nothing was lowered",
        human_bytes(need)
    )
}

/// The taskgraph (at any depth) whose unrolled ops are the most.
fn biggest_taskgraph(body: &[Construct]) -> Option<&crate::model::Taskgraph> {
    let mut best: Option<(&crate::model::Taskgraph, u64)> = None;
    let mut stack = vec![body];
    while let Some(b) = stack.pop() {
        for c in b {
            match c {
                Construct::Taskgraph(t) => {
                    let n = op_bound(&t.body).saturating_mul(u64::from(t.repeat));
                    if best.is_none_or(|(_, m)| n > m) {
                        best = Some((t, n));
                    }
                }
                Construct::TargetData(d) => stack.push(&d.body),
                _ => {}
            }
        }
    }
    best.map(|(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MapType, ProgramBuilder};

    #[test]
    fn the_bound_counts_maps_and_unrolls_taskgraphs() {
        let mut p = ProgramBuilder::new("p");
        let a = p.buf::<f32>("a", 16);
        let b = p.buf::<f32>("b", 16);
        p.taskgraph("t", 1000, |p| {
            p.target("r", "saxpy")
                .num(2.0)
                .arg(a)
                .arg(b)
                .map(MapType::To, a)
                .map(MapType::ToFrom, b);
        });
        p.taskwait();
        let p = p.build();
        // 1000 × (1 + 4 × 2) + 1.
        assert_eq!(op_bound(&p.body), 9001);
        assert_eq!(graph_bytes(&p), 9001 * BYTES_PER_OP);
        assert!(check_graph_memory(&p, &MemoryLimit::Bytes(1 << 30)).is_ok());
        let e = check_graph_memory(&p, &MemoryLimit::Bytes(1 << 20)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "taskgraph \"t\": repeat = 1000: lowering needs about 8.8 MiB of host memory for \
             the op graph and its schedule (at most 9001 ops at 1024 B each); 1 MiB available \
             (the limit given); nothing was lowered"
        );
    }
}
