//! `bench dag --devices 1,2,4`: the blocked matmul placed over several devices
//! (`device = "auto"` on every region, `src/lower/placement.rs`), run on a plugin with
//! that many devices, checked against the dense reference, and its scaling efficiency
//! `T(1) / (k · T(k))` printed (median wall time of `--reps` runs after `--warmup`).
//!
//! On the host plugin every simulated device shares the machine's cores, so the figure
//! measures the scheduler's overhead and the placement's balance, not GPU speed-up; with
//! `--plugin cuda` the plugin must see at least the largest device count.

use super::dag::DagArgs;
use super::matmul_ref::MatmulReference;
use super::median;
use offload_sched::lower::OpKind;
use offload_sched::model::{blocked_matmul, human_bytes};
use offload_sched::plugin::{open, OpenOptions, Plugin};
use offload_sched::schedule::{ScheduleOptions, SyncPolicy};
use offload_sched::Plan;
use std::fmt::Write;

/// One device count's figures.
struct Row {
    devices: u32,
    /// Regions placed on each device.
    per_device: Vec<usize>,
    peer_copies: usize,
    bytes_peer: u64,
    wall_ms: f64,
    /// Bytes one run's graph moves.
    moved: offload_sched::lower::BytesMoved,
}

/// The plugin for `devices` devices ([`offload_sched::plugin::open`]): the host plugin
/// made with that many, or the named plugin when it has at least that many.
fn plugin_for(name: &str, devices: u32) -> Result<Box<dyn Plugin>, String> {
    let opts = OpenOptions {
        devices,
        ..OpenOptions::default()
    };
    let p = open(name, &opts).map_err(|e| e.to_string())?.plugin;
    let info = p.info();
    if info.devices < devices {
        return Err(format!(
            "--devices {devices}: the {} plugin has {} device(s)",
            info.name, info.devices
        ));
    }
    Ok(p)
}

/// Runs the scaling table (see the module docs). Errors: `--bs` not dividing `--n`, a
/// plugin with too few devices, a failed run or a wrong result.
pub fn run(a: &DagArgs) -> Result<String, String> {
    if !a.n.is_multiple_of(a.bs) {
        return Err(format!("--bs {} must divide --n {}", a.bs, a.n));
    }
    let plugin_name = if a.plugin == "auto" {
        "host"
    } else {
        a.plugin.as_str()
    };
    let mut rows = Vec::new();
    for &devices in &a.devices {
        let mut program = blocked_matmul(a.n, a.bs);
        let reference = MatmulReference::new(&program, a.n, a.bs)?;
        program.place_all_auto(devices);
        let opts = ScheduleOptions {
            policy: SyncPolicy::Minimal,
            streams_per_device: a.streams,
            random_streams: None,
            host_lanes: 1,
        };
        // Without transfer elision at every count: it works on one device only, and the
        // 1-device row is the baseline of the speed-up.
        let plan = Plan::new(program, &opts)
            .and_then(|p| p.relower(&offload_sched::lower::LowerOptions::no_elide()))
            .map_err(|e| e.to_string())?;
        let g = plan.graph();
        let mut per_device = vec![0usize; devices as usize];
        for r in g
            .regions
            .iter()
            .filter(|r| !r.kind.is_host() && !r.ops.is_empty())
        {
            per_device[r.device as usize] += 1;
        }
        let peer_copies = (g.ops.iter())
            .filter(|o| matches!(o.kind, OpKind::PeerCopy { .. }))
            .count();
        let plugin = plugin_for(plugin_name, devices)?;
        let mut walls = Vec::new();
        let mut bytes_peer = 0;
        for i in 0..a.warmup + a.reps as usize {
            let r = plan.run(plugin.as_ref()).map_err(|e| e.render())?;
            reference
                .check(&r.buffers)
                .map_err(|e| format!("{devices} devices: {e}"))?;
            bytes_peer = r.bytes_peer;
            if i >= a.warmup {
                walls.push(r.wall_us / 1000.0);
            }
        }
        rows.push(Row {
            devices,
            per_device,
            peer_copies,
            bytes_peer,
            wall_ms: median(walls),
            moved: plan.graph().bytes_moved(),
        });
    }
    Ok(render(a, plugin_name, &rows))
}

fn render(a: &DagArgs, plugin: &str, rows: &[Row]) -> String {
    let mut out = format!(
        "## blocked matmul over several devices (plugin {plugin}, n={}, bs={}, {} streams per \
         device, median of {} runs)\n\n| devices | regions per device | peer copies | peer bytes \
         | wall ms | speed-up | efficiency |\n|---|---|---|---|---|---|---|\n",
        a.n, a.bs, a.streams, a.reps
    );
    let base = rows.iter().find(|r| r.devices == 1).map(|r| r.wall_ms);
    for r in rows {
        let (speedup, eff) = match base {
            Some(t1) if r.wall_ms > 0.0 => {
                let s = t1 / r.wall_ms;
                (
                    format!("{s:.2}×"),
                    format!("{:.0}%", 100.0 * s / f64::from(r.devices)),
                )
            }
            _ => ("-".into(), "-".into()),
        };
        let spread: Vec<String> = r.per_device.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.3} | {speedup} | {eff} |",
            r.devices,
            spread.join(" / "),
            r.peer_copies,
            human_bytes(r.bytes_peer),
            r.wall_ms
        );
    }
    {
        use crate::moved::{bytes_cells, BYTES_COLUMNS, BYTES_RULE};
        let _ = writeln!(
            out,
            "\nBytes moved per run (lowered with --no-elide at every count: elision works on one device only)\n\n| devices | {BYTES_COLUMNS} |\n|---|{BYTES_RULE}|"
        );
        for r in rows {
            let _ = writeln!(out, "| {} | {} |", r.devices, bytes_cells(&r.moved));
        }
    }
    if base.is_none() {
        out.push_str("\n(no 1-device row: add 1 to --devices for speed-up and efficiency)\n");
    }
    if plugin == "host" {
        out.push_str(
            "\nHost plugin: the simulated devices share this machine's cores, so this is the \
             scheduler's overhead and the placement's balance, not a GPU speed-up.\n",
        );
    }
    out
}
