//! Host memory a run needs ([`MemoryNeed`]), against what the machine has
//! ([`available`]): a run that cannot fit is refused with the figures before anything is
//! allocated or issued ([`check`]), instead of being killed by the kernel's OOM killer
//! half-way.
//!
//! # What a run holds in host memory
//!
//! - **buffers**: every host buffer, allocated through the plugin (`alloc_host`) at
//!   setup and freed at teardown: the sum of the buffers' bytes.
//! - **device**: device memory, where the plugin keeps it in host RAM (the host plugin:
//!   [`PluginInfo::device_memory`](crate::plugin::PluginInfo::device_memory) is
//!   [`DeviceMemory::HostRam`](crate::plugin::DeviceMemory::HostRam)).
//!   An upper bound on the device memory live at once, from the schedule
//!   ([`device_bytes`]): an allocation counts from its `Alloc` step until the first host
//!   wait of the issuing thread after its `Free` that covers the free's stream (a
//!   `HostWait` on it, or a `HostWaitDevice` of its device; a host lane's waits do not
//!   hold the issuing thread back, see [`Schedule::wait_owners`]), or until the end (at
//!   the `End` op, also the waits of its lane before it count); each at its size class
//!   ([`crate::plugin::size_class`], at most 25% over: the capacity of a block the host
//!   plugin's free lists can reuse). This bounds threaded issue too: a device step is
//!   issued only after every host step of the issuing thread before it has completed.
//! - **device cache**: freed device blocks the plugin keeps on its free lists for reuse,
//!   where device memory is host RAM ([`device_cache_bytes`]): per device, at most the
//!   plugin's cap ([`PluginInfo::device_cache_bytes`](crate::plugin::PluginInfo::device_cache_bytes); the host plugin's
//!   [`HostPluginOptions::device_cache_bytes`](crate::plugin::host::HostPluginOptions::device_cache_bytes),
//!   default 1 GiB) and at most the size classes of the allocations the graph makes on
//!   that device that fit under the cap (a block is cached only when it is freed). Kept
//!   to the end of the run (a session keeps it between runs).
//! - **snapshot**: the [`Report`](crate::exec::Report)'s copy of every buffer, taken at the
//!   `End` op, when only `device_at_snapshot` of the device memory can still be live
//!   (usually none: the frees before `End` have been waited for).
//! - **reference**: what the reference interpreter adds at the peak, when it runs too
//!   (`run --check`): see [`MemoryNeed::with_reference`] and [`reference_bytes`].
//! - **held**: results a caller keeps while the run runs (an earlier run's report).
//!
//! The peak is `buffers + max(device, device_at_snapshot + snapshot) + device_cache +
//! reference + held` ([`MemoryNeed::total`]). Small allocations (the op graph, the schedule, per-op
//! bookkeeping, one 512 KiB initialisation chunk) are not counted. A CUDA plugin's device
//! memory is GPU memory, not counted here (its allocation failures are errors of the run).
//!
//! # What the machine has
//!
//! [`available`] with [`MemoryLimit::Machine`] (the default) takes, in order:
//! 1. the environment variable [`ENV`] (`OFFLOAD_SCHED_MEMORY_LIMIT`): a size in bytes
//!    (`8589934592`, or with a binary unit: `512MiB`, `8GiB`; `K M G T` mean the same),
//!    or `none` to run unchecked;
//! 2. on Linux, the smaller of `MemAvailable` in `/proc/meminfo` and, under a cgroup
//!    memory limit (v2 `memory.max`, v1 `memory.limit_in_bytes` and the
//!    `hierarchical_memory_limit` of the ancestors), the limit less the cgroup's working
//!    set (usage less its inactive file cache, which the kernel reclaims first: the
//!    figure container runtimes report);
//! 3. elsewhere nothing: the run is not checked (set the variable for a check).
//!
//! Runs needing less than [`PROBE_BYTES`] are not checked against the machine (reading
//! `/proc` would cost more than such a run's setup; a machine that cannot give that much
//! fails the allocation itself, an error). A limit given ([`MemoryLimit::Bytes`], or the
//! variable) is applied to every run.

use crate::lower::{OpGraph, OpKind};
use crate::model::human_bytes;
use crate::plugin::{size_class, PluginInfo};
use crate::schedule::{Schedule, Step};
use std::fmt;

/// Why [`check`] or [`available`] refused. The executor reports these as
/// [`crate::exec::ExecError::OutOfMemory`] and [`crate::exec::ExecError::MemoryLimit`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// `need` is more than `available`.
    #[error("not enough host memory: needed {need}; {available}; nothing was run")]
    OutOfMemory {
        need: MemoryNeed,
        available: Available,
    },
    /// [`ENV`] is set to something that is not a size.
    #[error("{ENV}={value:?} is not a size in bytes (e.g. 8589934592, 512MiB, 8GiB) or `none`")]
    BadLimit { value: String },
}

/// The environment variable that overrides the machine's available memory (see the
/// module docs): a size, or `none`.
pub const ENV: &str = "OFFLOAD_SCHED_MEMORY_LIMIT";

/// Runs needing less than this (64 MiB) are not checked against the machine.
pub const PROBE_BYTES: u64 = 64 << 20;

/// Where the available memory of a check comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MemoryLimit {
    /// [`ENV`] if set, else what the machine has (see the module docs).
    #[default]
    Machine,
    /// This many bytes, whatever the machine has (tests, a budget of the embedding
    /// application).
    Bytes(u64),
    /// No check.
    Unchecked,
}

/// The figure a check compares against, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Available {
    pub bytes: u64,
    pub source: Source,
}

/// Where an [`Available`] figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// [`MemoryLimit::Bytes`].
    Given,
    /// The [`ENV`] variable.
    Env,
    /// `MemAvailable` in `/proc/meminfo`.
    MemAvailable,
    /// A cgroup's memory limit less its working set.
    Cgroup,
}

impl fmt::Display for Available {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match self.source {
            Source::Given => "the limit given",
            Source::Env => ENV,
            Source::MemAvailable => "MemAvailable in /proc/meminfo",
            Source::Cgroup => "the cgroup's memory limit less its usage",
        };
        write!(f, "{} available ({from})", human_bytes(self.bytes))
    }
}

/// Host bytes a run needs, by part (see the module docs). All figures in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Every host buffer.
    pub buffers: u64,
    /// Device memory kept in host RAM by the plugin, live at once (an upper bound).
    pub device: u64,
    /// Of that, what can still be live when the snapshot is taken.
    pub device_at_snapshot: u64,
    /// Freed device blocks the plugin keeps for reuse, in host RAM (an upper bound,
    /// [`device_cache_bytes`]).
    pub device_cache: u64,
    /// The report's copy of every buffer.
    pub snapshot: u64,
    /// What the reference interpreter adds at the peak.
    pub reference: u64,
    /// Results the caller holds meanwhile.
    pub held: u64,
}

impl MemoryNeed {
    /// The peak: `buffers + max(device, device_at_snapshot + snapshot) + device_cache +
    /// reference + held` (saturating).
    pub fn total(&self) -> u64 {
        let end = self.device_at_snapshot.saturating_add(self.snapshot);
        self.buffers
            .saturating_add(self.device.max(end))
            .saturating_add(self.device_cache)
            .saturating_add(self.reference)
            .saturating_add(self.held)
    }

    /// This run preceded by the reference interpreter, whose result is held while the
    /// run runs (`run --check`): the peak is the larger of the reference's own peak
    /// (`reference_peak`) and its result (`reference_result`) plus this run, so the
    /// reference adds `max(reference_result, reference_peak − self.total())`.
    pub fn with_reference(mut self, reference_peak: u64, reference_result: u64) -> MemoryNeed {
        let run = self.total();
        self.reference = reference_result.max(reference_peak.saturating_sub(run));
        self
    }

    /// What the reference interpreter alone needs ([`reference_bytes`]'s peak).
    pub fn reference_only(reference_peak: u64) -> MemoryNeed {
        MemoryNeed {
            reference: reference_peak,
            ..MemoryNeed::default()
        }
    }
}

/// `48 GiB at its peak (buffers 16 GiB, device memory emulated on the host 16 GiB,
/// result snapshot 16 GiB (taken when 0 B of device memory is live), ...)`: the total and
/// every part that is not zero.
impl fmt::Display for MemoryNeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The snapshot is taken after most device memory is freed: say how much is left.
        let when = match self.device > 0 {
            true => format!(
                " (taken when {} of device memory is live)",
                human_bytes(self.device_at_snapshot)
            ),
            false => String::new(),
        };
        let parts: Vec<String> = [
            ("buffers", self.buffers, ""),
            ("device memory emulated on the host", self.device, ""),
            ("result snapshot", self.snapshot, when.as_str()),
            ("freed device blocks kept for reuse", self.device_cache, ""),
            ("reference interpreter", self.reference, ""),
            ("results held", self.held, ""),
        ]
        .into_iter()
        .filter(|&(_, bytes, _)| bytes > 0)
        .map(|(what, bytes, note)| format!("{what} {}{note}", human_bytes(bytes)))
        .collect();
        write!(f, "{}", human_bytes(self.total()))?;
        if !parts.is_empty() {
            write!(f, " at its peak ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// Device figures of running `sched` on a plugin whose device memory is host RAM:
/// `(peak, live at the End op)`, both upper bounds (the rule of the module docs).
///
/// Complexity: `O(steps + streams)`.
pub fn device_bytes(graph: &OpGraph, sched: &Schedule) -> (u64, u64) {
    let mut live = 0u64;
    let mut peak = 0u64;
    let mut at_end = 0u64;
    // Per stream: bytes freed on it that no host wait of the issuing thread has covered
    // yet, and of those, what a host wait of the `End` op's lane has covered (the lane
    // runs its waits before `End`, but the issuing thread does not wait for them).
    let mut pending = vec![0u64; sched.streams.len()];
    let mut end_covered = vec![0u64; sched.streams.len()];
    let owners = sched.wait_owners();
    let end_lane = graph
        .op_ids()
        .find(|&o| matches!(graph.op(o).kind, OpKind::End))
        .and_then(|o| sched.op_lane.get(o.index()).copied());
    let covered =
        |k: usize, s: usize, live: &mut u64, pending: &mut [u64], end: &mut [u64]| match owners
            .get(k)
            .copied()
            .flatten()
        {
            None => {
                *live = live.saturating_sub(pending[s]);
                pending[s] = 0;
                end[s] = 0;
            }
            Some(lane) if Some(lane.0) == end_lane => end[s] = pending[s],
            Some(_) => {}
        };
    for (k, step) in sched.steps.iter().enumerate() {
        match *step {
            Step::Op(op) => match graph.op(op).kind {
                OpKind::Alloc { alloc } => {
                    let bytes = graph.allocs.get(alloc.index()).map_or(0, |a| a.bytes);
                    live = live.saturating_add(size_class(bytes));
                    peak = peak.max(live);
                }
                OpKind::Free { alloc } => {
                    let bytes = graph.allocs.get(alloc.index()).map_or(0, |a| a.bytes);
                    match sched.op_stream.get(op.index()).copied().flatten() {
                        Some(s) if s.index() < pending.len() => {
                            pending[s.index()] =
                                pending[s.index()].saturating_add(size_class(bytes))
                        }
                        // Not on a stream: never waited for, live to the end.
                        _ => {}
                    }
                }
                OpKind::End => {
                    let done: u64 = end_covered.iter().fold(0u64, |t, b| t.saturating_add(*b));
                    at_end = live.saturating_sub(done);
                }
                _ => {}
            },
            Step::HostWait { stream } => {
                if stream.index() < pending.len() {
                    covered(k, stream.index(), &mut live, &mut pending, &mut end_covered);
                }
            }
            Step::HostWaitDevice { device } => {
                for (s, info) in sched.streams.iter().enumerate() {
                    if info.device == device {
                        covered(k, s, &mut live, &mut pending, &mut end_covered);
                    }
                }
            }
            // A wait on an event covers its stream only up to the record: frees stay
            // counted (an upper bound); an await of a host op teaches nothing counted
            // here.
            Step::Record { .. }
            | Step::Wait { .. }
            | Step::HostWaitEvent { .. }
            | Step::HostAwait { .. } => {}
        }
    }
    (peak, at_end)
}

/// What [`execute`](crate::exec::execute) of `sched` on a plugin that says `info` holds
/// in host memory (no reference, nothing held): device memory and the plugin's device
/// cache count where its device memory is host RAM
/// ([`DeviceMemory::is_host_ram`](crate::plugin::DeviceMemory::is_host_ram)).
///
/// Complexity: `O(steps + streams + buffers + allocations)`.
pub fn run_need(graph: &OpGraph, sched: &Schedule, info: &PluginInfo) -> MemoryNeed {
    let on_host = info.device_memory.is_host_ram();
    let device = match on_host {
        true => device_bytes(graph, sched),
        false => (0, 0),
    };
    let mut need = need_of_run(buffer_bytes(graph), device);
    if on_host {
        need.device_cache = device_cache_bytes(graph, info.device_cache_bytes);
    }
    need
}

/// An upper bound on the bytes of freed device blocks a plugin keeps on its free lists
/// while it runs `graph`, with at most `cap` bytes per device (0: no cache): per device,
/// the smaller of `cap` and the sum of the size classes ([`size_class`]) of the graph's
/// allocations on that device whose class is at most `cap` (a larger block is never
/// cached; a block is cached only when it is freed, once per allocation). Saturating.
///
/// Complexity: `O(allocations)`, `O(devices)` memory.
pub fn device_cache_bytes(graph: &OpGraph, cap: u64) -> u64 {
    if cap == 0 {
        return 0;
    }
    let mut per_device: Vec<u64> = Vec::new();
    for a in &graph.allocs {
        let class = size_class(a.bytes);
        if class > cap {
            continue;
        }
        let d = a.device as usize;
        if per_device.len() <= d {
            per_device.resize(d + 1, 0);
        }
        per_device[d] = per_device[d].saturating_add(class);
    }
    per_device
        .into_iter()
        .fold(0u64, |t, b| t.saturating_add(b.min(cap)))
}

/// A run's need from its parts: `buffers` host bytes (and a snapshot of them) and
/// `(device, device_at_snapshot)` from [`device_bytes`] (zeros when device memory is
/// not host RAM). `O(1)`.
pub fn need_of_run(buffers: u64, (device, device_at_snapshot): (u64, u64)) -> MemoryNeed {
    MemoryNeed {
        buffers,
        device,
        device_at_snapshot,
        snapshot: buffers,
        ..MemoryNeed::default()
    }
}

/// The bytes of every buffer of `graph` (saturating).
pub fn buffer_bytes(graph: &OpGraph) -> u64 {
    graph.buffers.iter().fold(0u64, |t, b| {
        t.saturating_add(b.len.saturating_mul(b.ty.size_bytes()))
    })
}

/// The reference interpreter's host memory on `graph`: `(peak, result)`. It holds every
/// host buffer (which becomes its result, moved), the device allocations live in op id
/// order (each freed at its `Free`), and a copy of the buffers only where an op after
/// `End` writes host memory (a graph built by hand; lowered graphs end with `End`).
///
/// Complexity: `O(ops + buffers)`.
pub fn reference_bytes(graph: &OpGraph) -> (u64, u64) {
    let host = buffer_bytes(graph);
    let last_host_write = last_host_write(graph);
    let (mut live, mut peak, mut copy) = (0u64, 0u64, 0u64);
    for (i, op) in graph.ops.iter().enumerate() {
        match op.kind {
            OpKind::Alloc { alloc } => {
                live = live.saturating_add(graph.allocs.get(alloc.index()).map_or(0, |a| a.bytes));
            }
            OpKind::Free { alloc } => {
                live = live.saturating_sub(graph.allocs.get(alloc.index()).map_or(0, |a| a.bytes));
            }
            OpKind::End => copy = if last_host_write > Some(i) { host } else { 0 },
            _ => {}
        }
        peak = peak.max(live.saturating_add(copy));
    }
    (host.saturating_add(peak), host)
}

/// The index of the last op that writes host memory (a D2H or a host task), if any.
pub(crate) fn last_host_write(graph: &OpGraph) -> Option<usize> {
    graph
        .ops
        .iter()
        .rposition(|op| matches!(op.kind, OpKind::D2H { .. } | OpKind::HostTask { .. }))
}

/// Refuses `need` if it is more than `limit` allows (see the module docs for where the
/// figure comes from); reads the environment and, for a need of at least
/// [`PROBE_BYTES`], `/proc`.
///
/// Errors: [`MemoryError::OutOfMemory`] with both figures; [`MemoryError::BadLimit`]
/// when [`ENV`] is set to something that is not a size.
pub fn check(need: &MemoryNeed, limit: &MemoryLimit) -> Result<(), MemoryError> {
    let total = need.total();
    let Some(available) = available_for(total, limit)? else {
        return Ok(());
    };
    if total > available.bytes {
        return Err(MemoryError::OutOfMemory {
            need: *need,
            available,
        });
    }
    Ok(())
}

/// The figure `limit` gives (`None`: no check), probing the machine only for a need of
/// at least [`PROBE_BYTES`].
/// What `limit` allows for a need of `need` bytes: as [`available`], but `None` (not
/// checked) under [`MemoryLimit::Machine`] when `need` is under [`PROBE_BYTES`] and no
/// [`ENV`] is set.
pub(crate) fn available_for(
    need: u64,
    limit: &MemoryLimit,
) -> Result<Option<Available>, MemoryError> {
    match limit {
        MemoryLimit::Unchecked => Ok(None),
        MemoryLimit::Bytes(bytes) => Ok(Some(Available {
            bytes: *bytes,
            source: Source::Given,
        })),
        MemoryLimit::Machine => match env_limit()? {
            Some(limit) => Ok(limit),
            None if need < PROBE_BYTES => Ok(None),
            None => Ok(machine_available()),
        },
    }
}

/// What `limit` allows now: `None` when nothing is checked (unchecked, [`ENV`] set to
/// `none`, or a system this module cannot read).
///
/// Errors: [`MemoryError::BadLimit`] when [`ENV`] is not a size.
pub fn available(limit: &MemoryLimit) -> Result<Option<Available>, MemoryError> {
    available_for(u64::MAX, limit)
}

/// [`ENV`]: `None` when unset (or empty), `Some(None)` for `none`, else the size.
fn env_limit() -> Result<Option<Option<Available>>, MemoryError> {
    let Some(value) = std::env::var_os(ENV) else {
        return Ok(None);
    };
    let value = value.to_string_lossy();
    match parse_limit(&value) {
        Some(None) if value.trim().is_empty() => Ok(None),
        Some(limit) => Ok(Some(limit.map(|bytes| Available {
            bytes,
            source: Source::Env,
        }))),
        None => Err(MemoryError::BadLimit {
            value: value.into_owned(),
        }),
    }
}

/// A size in bytes as the command line takes it: `123`, `512KiB`, `8 GiB`, `8G`, `4KB`,
/// `1.5MiB`. Units are case-insensitive: binary (IEC) `k`/`KiB` = 2^10 … `t`/`TiB` = 2^40,
/// `p`/`PiB` = 2^50, `e`/`EiB` = 2^60, decimal (SI) `kB`/`KB` = 1000, `MB` = 10^6, `GB` =
/// 10^9, `TB` = 10^12, `PB` = 10^15, `EB` = 10^18; at most `u64::MAX` bytes (so `16EiB`
/// is too large). A value with a
/// unit may have a fraction if it gives a whole number of bytes (`1.5KiB` = 1536, not
/// `1.5B` or `0.1KiB`).
///
/// Errors: a message naming the text and why: not a size, 0, a fraction that is not a
/// whole number of bytes, or a size that overflows `u64` bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let shown = crate::model::escape_controls(text);
    match parse_size(text) {
        Ok(Some(n)) if n > 0 => Ok(n),
        Err(SizeError::Overflow(bytes)) => Err(format!(
            "`{shown}` is too large: {}over the largest size, {} bytes (2^64 − 1 bytes, 1 byte \
             under 16 EiB)",
            bytes.map_or(String::new(), |b| format!("{b} bytes is ")),
            u64::MAX
        )),
        Err(SizeError::Fraction) => Err(format!(
            "`{shown}` is not a whole number of bytes (a fraction needs a unit it fills, e.g. 1.5KiB)"
        )),
        _ => Err(format!(
            "`{shown}` is not a size in bytes above 0 (e.g. 1073741824, 512KiB, 256MiB, 16GiB, 4KB)"
        )),
    }
}

/// `none` (or empty) → `Some(None)`; a size as [`parse_bytes`] takes it →
/// `Some(Some(bytes))`; anything else → `None`.
fn parse_limit(text: &str) -> Option<Option<u64>> {
    parse_size(text).ok()
}

/// Why a text is not a size.
#[derive(Debug, PartialEq)]
enum SizeError {
    NotSize,
    Fraction,
    /// Over `u64::MAX` bytes: the whole part × the unit when it is known.
    Overflow(Option<u128>),
}

/// The size of `text` (see [`parse_bytes`]), `Ok(None)` for `none` or empty.
fn parse_size(text: &str) -> Result<Option<u64>, SizeError> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let end = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || (number.contains('.') && frac.is_empty()) {
        return Err(SizeError::NotSize);
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SizeError::NotSize);
    }
    let unit: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "p" | "pib" => 1 << 50,
        "e" | "eib" => 1 << 60,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        "eb" => 1_000_000_000_000_000_000,
        _ => return Err(SizeError::NotSize),
    };
    // Digits beyond u64 overflow in any unit (leading zeros aside).
    let (whole, frac) = (whole.trim_start_matches('0'), frac.trim_end_matches('0'));
    if whole.len() > 20 {
        return Err(SizeError::Overflow(None));
    }
    let whole: u128 = whole.parse().unwrap_or(0);
    if whole * unit > u64::MAX as u128 {
        return Err(SizeError::Overflow(Some(whole * unit)));
    }
    // (whole + frac / scale) × unit, exact; a fraction of over 20 digits is no whole
    // number of bytes of any unit here (at most 2^60).
    let scale = 10u128
        .checked_pow(frac.len() as u32)
        .filter(|_| frac.len() <= 20);
    let scale = scale.ok_or(SizeError::Fraction)?;
    let frac: u128 = frac.parse().unwrap_or(0);
    let scaled = (whole.checked_mul(scale))
        .and_then(|w| (w + frac).checked_mul(unit))
        .ok_or(SizeError::Fraction)?;
    if scaled % scale != 0 {
        return Err(SizeError::Fraction);
    }
    u64::try_from(scaled / scale)
        .map(Some)
        .map_err(|_| SizeError::Overflow(Some(scaled / scale)))
}

/// What this machine (and its cgroup) can give now (see the module docs); `None` where
/// it cannot be read.
pub fn machine_available() -> Option<Available> {
    #[cfg(target_os = "linux")]
    {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
        let mem = meminfo
            .as_deref()
            .and_then(mem_available)
            .map(|bytes| Available {
                bytes,
                source: Source::MemAvailable,
            });
        let cgroup = cgroup_available().map(|bytes| Available {
            bytes,
            source: Source::Cgroup,
        });
        match (mem, cgroup) {
            (Some(m), Some(c)) => Some(if c.bytes < m.bytes { c } else { m }),
            (m, c) => m.or(c),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// `MemAvailable` of `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        _ => None,
    }
}

/// The value of `key` in a `memory.stat` text (`key value` lines).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A cgroup memory limit less the group's working set, for this process's cgroup (v2,
/// then v1); `None` without a limit.
#[cfg(target_os = "linux")]
fn cgroup_available() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let num = |p: &str| read(p).and_then(|s| s.trim().parse::<u64>().ok());
    for line in groups.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        // A namespaced container sees its own group at the mount's root.
        let dirs = |mount: &str| {
            let own = format!("{mount}{}", path.trim_end_matches('/'));
            [own, mount.to_string()]
        };
        if controllers.is_empty() {
            // v2: memory.max ("max" without a limit), memory.current, memory.stat.
            for dir in dirs("/sys/fs/cgroup") {
                let Some(max) = read(&format!("{dir}/memory.max")) else {
                    continue;
                };
                let limit: u64 = max.trim().parse().ok()?;
                let usage = num(&format!("{dir}/memory.current"))?;
                let inactive = read(&format!("{dir}/memory.stat"))
                    .and_then(|s| stat_value(&s, "inactive_file"))
                    .unwrap_or(0);
                return Some(limit.saturating_sub(usage.saturating_sub(inactive)));
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            for dir in dirs("/sys/fs/cgroup/memory") {
                let Some(own) = num(&format!("{dir}/memory.limit_in_bytes")) else {
                    continue;
                };
                let stat = read(&format!("{dir}/memory.stat")).unwrap_or_default();
                let limit =
                    stat_value(&stat, "hierarchical_memory_limit").map_or(own, |h| h.min(own));
                // v1 reports "no limit" as a page-rounded i64::MAX.
                if limit >= (1 << 62) {
                    return None;
                }
                let usage = num(&format!("{dir}/memory.usage_in_bytes"))?;
                let inactive = stat_value(&stat, "total_inactive_file").unwrap_or(0);
                return Some(limit.saturating_sub(usage.saturating_sub(inactive)));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!(parse_limit("none"), Some(None));
        assert_eq!(parse_limit(" NONE "), Some(None));
        assert_eq!(parse_limit(""), Some(None));
        assert_eq!(parse_limit("4096"), Some(Some(4096)));
        assert_eq!(parse_limit("512MiB"), Some(Some(512 << 20)));
        assert_eq!(parse_limit("8 GiB"), Some(Some(8 << 30)));
        assert_eq!(parse_limit("8g"), Some(Some(8 << 30)));
        assert_eq!(parse_limit("1T"), Some(Some(1 << 40)));
        assert_eq!(parse_limit("12kb"), Some(Some(12_000)));
        assert_eq!(parse_limit("-1"), None);
        assert_eq!(parse_limit("1.5GiB"), Some(Some(3 << 29)));
        assert_eq!(parse_limit("1.5"), None, "not a whole number of bytes");
        assert_eq!(parse_limit("1."), None);
        assert_eq!(parse_limit(".5KiB"), None);
        assert_eq!(parse_limit("99999999999999999999"), None);
        assert_eq!(parse_limit("17179869184TiB"), None, "overflows");
    }

    #[test]
    fn meminfo_and_memory_stat_parse() {
        let m = "MemTotal:       24684084 kB\nMemFree:         6536324 kB\nMemAvailable:   23321724 kB\n";
        assert_eq!(mem_available(m), Some(23321724 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        let s = "cache 11878400\ninactive_file 73728\ntotal_inactive_file 14860644352\n";
        assert_eq!(stat_value(s, "inactive_file"), Some(73728));
        assert_eq!(stat_value(s, "total_inactive_file"), Some(14860644352));
        assert_eq!(stat_value(s, "rss"), None);
    }

    #[test]
    fn the_machine_is_read_where_it_can_be() {
        let a = machine_available();
        if cfg!(target_os = "linux") {
            let a = a.expect("/proc/meminfo is readable on Linux");
            assert!(a.bytes > 0, "{a:?}");
        }
    }

    #[test]
    fn the_total_counts_the_snapshot_only_beyond_the_device_memory() {
        let need = MemoryNeed {
            buffers: 8 << 30,
            device: 8 << 30,
            device_at_snapshot: 0,
            snapshot: 8 << 30,
            ..MemoryNeed::default()
        };
        assert_eq!(need.total(), 16 << 30);
        let live = MemoryNeed {
            device_at_snapshot: 2 << 30,
            ..need
        };
        assert_eq!(live.total(), 18 << 30);
        // The reference before the run: its result is held meanwhile.
        assert_eq!(need.with_reference(16 << 30, 8 << 30).total(), 24 << 30);
        assert_eq!(need.with_reference(40 << 30, 8 << 30).total(), 40 << 30);
        assert_eq!(
            need.to_string(),
            "16 GiB at its peak (buffers 8 GiB, device memory emulated on the host 8 GiB, \
             result snapshot 8 GiB (taken when 0 B of device memory is live))"
        );
        assert_eq!(
            MemoryNeed::reference_only(3 << 20).to_string(),
            "3 MiB at its peak (reference interpreter 3 MiB)"
        );
    }

    #[test]
    fn a_need_over_the_limit_is_refused_with_both_figures() {
        let need = MemoryNeed {
            buffers: 3 << 20,
            snapshot: 3 << 20,
            ..MemoryNeed::default()
        };
        assert!(check(&need, &MemoryLimit::Bytes(6 << 20)).is_ok());
        assert!(check(&need, &MemoryLimit::Unchecked).is_ok());
        let e = check(&need, &MemoryLimit::Bytes(5 << 20)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not enough host memory: needed 6 MiB at its peak (buffers 3 MiB, result \
             snapshot 3 MiB); 5 MiB available (the limit given); nothing was run"
        );
    }
}
