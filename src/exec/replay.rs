//! Replayed runs ([`crate::replay`]): the first run of a session that replays builds the
//! plan's graphs (arena, node addresses, instantiation, proof) and keeps them in the
//! session's [`Resources`](super::Resources); every run then updates copy nodes whose
//! host memory changed, launches the segments on one stream and runs the host parts.

use super::run_state::Core;
use super::steps::run_host;
use super::{Exec, ExecError, OpTime, LOG};
use crate::lower::OpKind;
use crate::plugin::StreamHandle;
use crate::plugin::{DevicePtr, GraphDesc, GraphHandle, GraphNode, HostPtr, Plugin};
use crate::replay::{self, Execution, Part, ReplayPlan, Segment, Unsupported};
use crate::schedule::Step;
use std::collections::BTreeMap;
use std::time::Instant;

/// Figures of replay in a run's [`super::Report`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayStats {
    /// Graph launches per run (device segments with nodes).
    pub segments: usize,
    /// Nodes launched per run, over all segments.
    pub nodes: usize,
    /// Graphs instantiated (fewer than `segments` when taskgraph executions replay the
    /// graph recorded from their first execution).
    pub graphs: usize,
    /// Nodes over the instantiated graphs.
    pub instantiated_nodes: usize,
    /// Bytes of device memory the plan's arena holds.
    pub arena_bytes: u64,
    /// Time this run spent building, instantiating and proving graphs, µs (0 when it
    /// reused those of an earlier run).
    pub instantiate_us: f64,
    /// Copy nodes pointed at new host memory by this run.
    pub updated: usize,
    /// Graphs instantiated again by this run because an update could not be applied.
    pub reinstantiated: usize,
}

/// One instantiated segment.
struct Graph {
    handle: GraphHandle,
    desc: GraphDesc,
    /// Copy nodes: (node, buffer index, byte offset into the buffer's host memory).
    copies: Vec<(u32, usize, u64)>,
}

/// A session's replay state: built, or why the plan is issued to streams.
pub(crate) enum Replayed {
    Ready(Box<Ready>),
    Fallback(Unsupported),
}

pub(crate) struct Ready {
    plan: ReplayPlan,
    /// The stream graphs launch on, and arena blocks are allocated on.
    stream: StreamHandle,
    blocks: Vec<DevicePtr>,
    /// The instantiated graphs.
    graphs: Vec<Graph>,
    /// Per device segment, in order, the graph it launches (`None`: a segment without
    /// nodes). Executions of a taskgraph after the first launch the graph of the first
    /// where their nodes are the same.
    uses: Vec<Option<usize>>,
    /// Instantiation time of the first run, µs.
    built_us: f64,
    /// The region of the plan's last op (names the arena in messages).
    last_region: String,
    /// A run with these graphs failed: a graph may be half rebound (an update applied
    /// and its re-instantiation failed), so the next run releases them and builds anew.
    broken: bool,
}

impl Ready {
    /// Destroys the graphs and frees the arena (every stream synchronized by the caller).
    /// Every call is made; the first error is returned.
    pub(crate) fn release(
        &mut self,
        plugin: &dyn Plugin,
    ) -> Result<(), (String, crate::plugin::PluginError)> {
        let mut first = None;
        self.uses.clear();
        for g in self.graphs.drain(..) {
            if let Err(e) = plugin.graph_destroy(g.handle) {
                first.get_or_insert((format!("destroy {}", g.handle), e));
            }
        }
        for b in self.blocks.drain(..) {
            if let Err(e) = plugin.free(self.stream, b) {
                first.get_or_insert((
                    format!(
                        "free a replay arena block (plan ending in region \"{}\")",
                        self.last_region
                    ),
                    e,
                ));
            }
        }
        if let Err(e) = plugin.synchronize(self.stream) {
            first.get_or_insert((
                format!(
                    "synchronize after freeing the replay arena (plan ending in region \"{}\")",
                    self.last_region
                ),
                e,
            ));
        }
        first.map_or(Ok(()), Err)
    }
}

/// The node of schedule op `op` with its addresses, and for a copy its (buffer, byte
/// offset) on the host.
fn resolve(
    core: &Core,
    blocks: &[DevicePtr],
    plan: &ReplayPlan,
    op: crate::lower::OpId,
) -> Result<(GraphNode, Option<(usize, u64)>), ExecError> {
    let graph = core.graph;
    let dev = |alloc: crate::lower::AllocId| {
        plan.arena
            .block_of(alloc)
            .map(|b| blocks[b as usize])
            .ok_or_else(|| {
                core.invalid(
                    op,
                    format!("device allocation {} has no arena block", alloc.0),
                )
            })
    };
    let copy = |alloc: crate::lower::AllocId, section: &crate::model::Section| {
        let (d, h, bytes) = core.copy_range_at(op, alloc, section, dev(alloc)?)?;
        let off = section.lo * graph.buffers[section.buf.index()].ty.size_bytes();
        Ok::<_, ExecError>((d, h, bytes, (section.buf.index(), off)))
    };
    Ok(match &graph.op(op).kind {
        OpKind::H2D { alloc, section } => {
            let (dst, src, bytes, at) = copy(*alloc, section)?;
            (GraphNode::Submit { dst, src, bytes }, Some(at))
        }
        OpKind::D2H { alloc, section } => {
            let (src, dst, bytes, at) = copy(*alloc, section)?;
            (GraphNode::Retrieve { dst, src, bytes }, Some(at))
        }
        OpKind::Alloc { alloc } => (
            GraphNode::FillZero {
                ptr: dev(*alloc)?,
                bytes: graph.allocs[alloc.index()].bytes,
            },
            None,
        ),
        OpKind::Kernel(call) => {
            let kernel = core.op_kernel[op.index()]
                .ok_or_else(|| core.invalid(op, "kernel not loaded".into()))?;
            let mut args = Vec::with_capacity(call.args.len());
            core.launch_args_at(op, call, &mut args, dev)?;
            (
                GraphNode::Launch {
                    kernel,
                    args,
                    shape: call.launch,
                },
                None,
            )
        }
        _ => return Err(core.invalid(op, "not a graph node".into())),
    })
}

fn step_err(what: String) -> impl FnOnce(crate::plugin::PluginError) -> ExecError {
    move |source| ExecError::Step { what, source }
}

/// `replay graph of steps a..b (ops #x..#y from region "R")`: a segment named by its
/// steps and the user's region of its first node.
fn seg_name(core: &Core, seg: &Segment) -> String {
    let mut s = format!(
        "replay graph of steps {}..{}",
        seg.steps.start, seg.steps.end
    );
    if let (Some(a), Some(b)) = (seg.nodes.first(), seg.nodes.last()) {
        s += &format!(
            " (ops {}..{} from region \"{}\")",
            a.op,
            b.op,
            core.graph.region_of(a.op).name
        );
    }
    s
}

/// The region of the first host op of host steps `steps` (else of the last op), for
/// messages.
fn host_part_region(core: &Core, steps: std::ops::Range<usize>) -> String {
    let op = steps
        .clone()
        .find_map(|i| match core.sched.steps[i] {
            Step::Op(op) => Some(op),
            _ => None,
        })
        .unwrap_or(crate::lower::OpId(core.graph.ops.len() as u32 - 1));
    core.graph.region_of(op).name.clone()
}

/// The region of the graph's last op, for messages.
fn core_last_region(core: &Core) -> String {
    let n = core.graph.ops.len();
    match n {
        0 => "?".into(),
        _ => core
            .graph
            .region_of(crate::lower::OpId(n as u32 - 1))
            .name
            .clone(),
    }
}

/// The region of the first allocation placed in arena block `b`, for messages.
fn block_region(core: &Core, plan: &ReplayPlan, b: usize) -> String {
    let first = plan.arena.place.iter().position(|p| *p == Some(b as u32));
    let op = first.and_then(|a| {
        core.graph
            .ops
            .iter()
            .position(|o| matches!(o.kind, OpKind::Alloc { alloc } if alloc.index() == a))
    });
    match op {
        Some(i) => core
            .graph
            .region_of(crate::lower::OpId(i as u32))
            .name
            .clone(),
        None => "?".into(),
    }
}

/// Instantiates segment `seg` as `desc` and proves the plugin's graph against the
/// schedule. On a failed proof the graph is destroyed.
fn instantiate(
    core: &Core,
    seg: &Segment,
    desc: GraphDesc,
    copies: Vec<(u32, usize, u64)>,
) -> Result<Graph, ExecError> {
    let what = seg_name(core, seg);
    let handle = core
        .plugin
        .graph_instantiate(&desc)
        .map_err(step_err(format!("instantiate {what}")))?;
    let proved = core
        .plugin
        .graph_edges(handle)
        .map_err(step_err(format!("read back the edges of {what}")))
        .and_then(|edges| {
            replay::prove(core.graph, core.sched, seg, &edges).map_err(ExecError::ReplayProof)
        });
    if let Err(e) = proved {
        let _ = core.plugin.graph_destroy(handle);
        return Err(e);
    }
    Ok(Graph {
        handle,
        desc,
        copies,
    })
}

impl Exec<'_> {
    /// Builds the replay state: plan, arena, graphs (instantiated and proved).
    fn build_replay(&mut self) -> Result<Replayed, ExecError> {
        let t0 = Instant::now();
        let core = &self.core;
        let plan = match ReplayPlan::new(core.graph, core.sched) {
            Ok(p) => p,
            Err(u) => return Ok(Replayed::Fallback(u)),
        };
        if !core.info.graphs {
            let name = core.info.name.clone();
            return Ok(Replayed::Fallback(Unsupported::Plugin(name)));
        }
        if let Err(over) = plan.check_cap(core.graph) {
            // Nothing allocated yet; the streams keep the cap.
            return Ok(Replayed::Fallback(Unsupported::OverCap(over)));
        }
        let stream = core.stream(plan.stream);
        let mut ready = Ready {
            stream,
            blocks: Vec::with_capacity(plan.arena.blocks.len()),
            graphs: Vec::new(),
            uses: Vec::new(),
            built_us: 0.0,
            last_region: core_last_region(core),
            broken: false,
            plan: ReplayPlan {
                parts: Vec::new(),
                ..plan.clone()
            },
        };
        let built = (|| {
            for (b, &bytes) in plan.arena.blocks.iter().enumerate() {
                let p = core.plugin.alloc(stream, bytes).map_err(|e| {
                    step_err(format!(
                        "alloc a replay arena block of {bytes} bytes (for region \"{}\")",
                        block_region(core, &plan, b)
                    ))(e)
                })?;
                ready.blocks.push(p);
            }
            // (taskgraph, segment number within an execution) → the graphs recorded for
            // it so far (execution 0's, then those of executions that differed).
            let mut recorded: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
            let mut within: BTreeMap<Execution, u32> = BTreeMap::new();
            for seg in plan.segments() {
                if seg.nodes.is_empty() {
                    ready.uses.push(None);
                    continue;
                }
                let key = seg.execution.map(|e| {
                    let j = within.entry(e).or_insert(0);
                    *j += 1;
                    (e, (e.taskgraph, *j - 1))
                });
                let mut desc = GraphDesc {
                    device: plan.device,
                    nodes: Vec::with_capacity(seg.nodes.len()),
                    edges: seg.edges.clone(),
                };
                let mut copies = Vec::new();
                for (i, n) in seg.nodes.iter().enumerate() {
                    let (node, at) = resolve(core, &ready.blocks, &plan, n.op)?;
                    if let Some((buf, off)) = at {
                        copies.push((i as u32, buf, off));
                    }
                    desc.nodes.push(node);
                }
                if let Some((e, k)) = key {
                    let same = recorded.get(&k).and_then(|gs| {
                        gs.iter().copied().find(|&gi| ready.graphs[gi].desc == desc)
                    });
                    if let Some(gi) = same {
                        ready.uses.push(Some(gi));
                        continue;
                    }
                    if e.index > 0 {
                        tracing::debug!(target: LOG, taskgraph = e.taskgraph, execution = e.index,
                            "taskgraph execution differs from those recorded: recorded too");
                    }
                }
                ready.graphs.push(instantiate(core, seg, desc, copies)?);
                let gi = ready.graphs.len() - 1;
                ready.uses.push(Some(gi));
                if let Some((_, k)) = key {
                    // Few per key: an execution that differs (the first, entering data the
                    // others find present) is followed by executions equal to another.
                    let gs = recorded.entry(k).or_default();
                    if gs.len() < 4 {
                        gs.push(gi);
                    }
                }
            }
            Ok(())
        })();
        match built {
            Ok(()) => {
                ready.plan = plan;
                ready.built_us = t0.elapsed().as_secs_f64() * 1e6;
                tracing::debug!(target: LOG, segments = ready.graphs.len(), nodes = ready.plan.node_count(),
                    us = ready.built_us, "replay graphs instantiated and proved");
                Ok(Replayed::Ready(Box::new(ready)))
            }
            Err(e) => {
                let _ = ready.release(core.plugin);
                Err(e)
            }
        }
    }

    /// A replayed run (see the module docs); stream issue when the plan cannot be
    /// replayed.
    pub(super) fn run_replay(&mut self) -> Result<(), ExecError> {
        let mut fresh = false;
        if let Some(Replayed::Ready(r)) = &mut self.res.replay {
            if r.broken {
                // The failed run's teardown synchronized every stream it used.
                tracing::debug!(target: LOG, "the last replayed run failed: building the graphs anew");
                let released = r.release(self.core.plugin);
                self.res.replay = None;
                released.map_err(|(what, source)| ExecError::Step { what, source })?;
            }
        }
        if self.res.replay.is_none() {
            self.res.replay = Some(self.build_replay()?);
            fresh = true;
        }
        let ready = match self.res.replay.take() {
            Some(Replayed::Ready(r)) => r,
            Some(Replayed::Fallback(u)) => {
                tracing::debug!(target: LOG, reason = %u, "not replayed: issued to streams");
                self.res.replay = Some(Replayed::Fallback(u));
                return self.run_steps();
            }
            None => unreachable!("set above"),
        };
        let mut ready = ready;
        // Graphs are launched from this thread, whatever the issue mode said.
        self.issue = super::IssueMode::Serial;
        self.groups = None;
        self.stream_groups = 1;
        let r = self.launch_parts(&mut ready, fresh);
        ready.broken = r.is_err();
        self.res.replay = Some(Replayed::Ready(ready));
        r
    }

    fn launch_parts(&mut self, ready: &mut Ready, fresh: bool) -> Result<(), ExecError> {
        let mut stats = ReplayStats {
            segments: ready.uses.iter().flatten().count(),
            nodes: ready.plan.node_count(),
            graphs: ready.graphs.len(),
            instantiated_nodes: ready.graphs.iter().map(|g| g.desc.nodes.len()).sum(),
            arena_bytes: ready.plan.arena.bytes(),
            instantiate_us: if fresh { ready.built_us } else { 0.0 },
            ..ReplayStats::default()
        };
        let mut pending = false;
        let mut k = 0;
        let parts = std::mem::take(&mut ready.plan.parts);
        // (part, issue time) of every segment issued: its ops are counted after the run's
        // last wait, so the bookkeeping (per op) never takes a core from the graph's nodes.
        let mut issued: Vec<(usize, f64)> = Vec::with_capacity(parts.len());
        let r = (|| {
            for (pi, part) in parts.iter().enumerate() {
                match part {
                    Part::Device(seg) => {
                        let issue_us = self.core.now_us();
                        let Some(gi) = ready.uses[k] else {
                            issued.push((pi, issue_us));
                            k += 1;
                            continue;
                        };
                        self.rebind(ready, gi, seg, &mut stats)?;
                        let g = &ready.graphs[gi];
                        let issue_us = self.core.now_us();
                        self.core
                            .plugin
                            .graph_launch(g.handle, ready.stream)
                            .map_err(step_err(format!("launch {}", seg_name(&self.core, seg))))?;
                        issued.push((pi, issue_us));
                        pending = true;
                        k += 1;
                    }
                    Part::Host(steps) => {
                        if pending {
                            self.core
                                .plugin
                                .synchronize(ready.stream)
                                .map_err(step_err(format!(
                                "host wait for the replay graphs before step {} (region \"{}\")",
                                steps.start,
                                host_part_region(&self.core, steps.clone())
                            )))?;
                            pending = false;
                        }
                        for i in steps.clone() {
                            match self.core.sched.steps[i] {
                                Step::Op(op) => run_host(
                                    &self.core,
                                    &self.res.host_kernels,
                                    &mut self.host_lane,
                                    &mut self.snapshot,
                                    op,
                                    i,
                                )?,
                                _ => self.host_lane.counts.host_waits += 1,
                            }
                        }
                    }
                }
            }
            if pending {
                self.core
                    .plugin
                    .synchronize(ready.stream)
                    .map_err(step_err(format!(
                        "final synchronize of the replay graphs (last launched: region \"{}\")",
                        core_last_region(&self.core)
                    )))?;
            }
            Ok(())
        })();
        for (pi, issue_us) in issued {
            if let Part::Device(seg) = &parts[pi] {
                self.count_segment(seg, issue_us);
            }
        }
        ready.plan.parts = parts;
        self.replay_stats = Some(stats);
        r
    }

    /// Points graph `k`'s copy nodes (launched for `seg`) at this run's host memory where it moved;
    /// instantiates the segment again when the plugin cannot apply an update.
    fn rebind(
        &mut self,
        ready: &mut Ready,
        k: usize,
        seg: &Segment,
        stats: &mut ReplayStats,
    ) -> Result<(), ExecError> {
        let core = &self.core;
        let g = &mut ready.graphs[k];
        let mut failed = false;
        for &(node, buf, off) in &g.copies {
            let Some(base) = core.host[buf] else { continue };
            let want: HostPtr = base.offset(off);
            let n = &mut g.desc.nodes[node as usize];
            if n.host() == Some(want) {
                continue;
            }
            *n = n.with_host(want);
            stats.updated += 1;
            if !failed {
                if let Err(e) = core.plugin.graph_set_host(g.handle, node, want) {
                    tracing::debug!(target: LOG, error = %e, node, segment = k,
                        "rebinding cannot be applied in place: instantiating the graph again");
                    failed = true;
                }
            }
        }
        if failed {
            let old = g.handle;
            let desc = g.desc.clone();
            let copies = std::mem::take(&mut g.copies);
            let new = instantiate(core, seg, desc, copies)?;
            let _ = core.plugin.graph_destroy(old);
            *g = new;
            stats.reinstantiated += 1;
        }
        Ok(())
    }

    /// Counts segment `seg`'s device ops as issued at `issue_us` (one launch).
    fn count_segment(&mut self, seg: &Segment, issue_us: f64) {
        let core = &self.core;
        for i in seg.steps.clone() {
            let Step::Op(op) = core.sched.steps[i] else {
                continue;
            };
            let Some(s) = core.sched.op_stream[op.index()] else {
                continue;
            };
            let lane = &mut self.lanes[s.index()];
            lane.push_time(
                i,
                OpTime {
                    op,
                    stream: Some(s),
                    device: core.graph.op(op).device,
                    issue_us,
                    start_us: issue_us,
                    end_us: issue_us,
                    timed: false,
                    batch: 0,
                },
            );
            lane.counts.device_ops += 1;
            lane.counts.ops += 1;
            match &core.graph.op(op).kind {
                OpKind::H2D { section, .. } => {
                    lane.bytes_h2d +=
                        section.len * core.graph.buffers[section.buf.index()].ty.size_bytes()
                }
                OpKind::D2H { section, .. } => {
                    lane.bytes_d2h +=
                        section.len * core.graph.buffers[section.buf.index()].ty.size_bytes()
                }
                _ => {}
            }
        }
    }
}
