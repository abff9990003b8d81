//! [`TaskBenchSpec`]: a Task Bench graph's parameters, validated.

use super::kernel::MEMORY_SAMPLES;
use super::pattern::Graph;
use std::fmt;
use std::str::FromStr;

/// Task Bench's dependence patterns (`core/core.cc`'s `dtype_by_name`; `random_spread`,
/// which its `dependencies` does not implement, is left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskBenchPattern {
    /// No dependencies.
    Trivial,
    /// `(t, p)` reads `(t − 1, p)`.
    NoComm,
    /// `(t, p)` reads points `p − 1 ..= p + 1` (clipped to the width).
    Stencil1d,
    /// As `Stencil1d`, wrapping around at both ends (width at least 3).
    Stencil1dPeriodic,
    /// A diagonal band: timestep `t` has points `max(0, t + width − steps) ..` of width
    /// `min(width, t + 1, steps − t)`; `(t, p)` reads `p − 1 ..= p`.
    Dom,
    /// A binary tree fanning out: timestep `t` has `min(width, 2ᵗ)` points; `(t, p)`
    /// reads `p / 2`.
    Tree,
    /// Butterflies: `(t, p)` reads `p − 2ᵈ`, `p`, `p + 2ᵈ` (those inside the width),
    /// `d = (t + ⌈log2 width⌉ − 1) mod ⌈log2 width⌉` (width at least 2).
    Fft,
    /// `(t, p)` reads every point.
    AllToAll,
    /// `(t, p)` reads the `radix` points `p − radix/2 ..= p + (radix − 1)/2` (clipped).
    Nearest,
    /// `(t, p)` reads `radix` points spread over the width:
    /// `(p + i·width/radix + (i > 0 ? t mod period : 0)) mod width`, `i < radix`.
    Spread,
    /// `Nearest`'s window, each point other than `p` kept with probability
    /// `fraction_connected` (a hash of graph index, radix, `t mod period` and the points).
    RandomNearest,
}

impl TaskBenchPattern {
    /// Every pattern, in Task Bench's `dependence_type_t` order.
    pub const ALL: [TaskBenchPattern; 11] = [
        TaskBenchPattern::Trivial,
        TaskBenchPattern::NoComm,
        TaskBenchPattern::Stencil1d,
        TaskBenchPattern::Stencil1dPeriodic,
        TaskBenchPattern::Dom,
        TaskBenchPattern::Tree,
        TaskBenchPattern::Fft,
        TaskBenchPattern::AllToAll,
        TaskBenchPattern::Nearest,
        TaskBenchPattern::Spread,
        TaskBenchPattern::RandomNearest,
    ];

    /// Task Bench's name (its `-type` flag): `trivial`, `no_comm`, `stencil_1d`, …
    pub fn name(self) -> &'static str {
        match self {
            TaskBenchPattern::Trivial => "trivial",
            TaskBenchPattern::NoComm => "no_comm",
            TaskBenchPattern::Stencil1d => "stencil_1d",
            TaskBenchPattern::Stencil1dPeriodic => "stencil_1d_periodic",
            TaskBenchPattern::Dom => "dom",
            TaskBenchPattern::Tree => "tree",
            TaskBenchPattern::Fft => "fft",
            TaskBenchPattern::AllToAll => "all_to_all",
            TaskBenchPattern::Nearest => "nearest",
            TaskBenchPattern::Spread => "spread",
            TaskBenchPattern::RandomNearest => "random_nearest",
        }
    }

    /// Whether the pattern has a period (spread and random_nearest: Task Bench's
    /// `needs_period`); the others refuse one.
    pub fn needs_period(self) -> bool {
        matches!(
            self,
            TaskBenchPattern::Spread | TaskBenchPattern::RandomNearest
        )
    }
}

impl fmt::Display for TaskBenchPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TaskBenchPattern {
    type Err = TaskBenchError;

    /// Parses Task Bench's name ([`TaskBenchPattern::name`]).
    ///
    /// Errors: [`TaskBenchError::Spec`] naming the patterns, for any other string.
    fn from_str(s: &str) -> Result<Self, TaskBenchError> {
        TaskBenchPattern::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = TaskBenchPattern::ALL.iter().map(|p| p.name()).collect();
                TaskBenchError::Spec(format!(
                    "unknown Task Bench pattern `{s}` (patterns: {})",
                    names.join(", ")
                ))
            })
    }
}

/// A task's kernel (Task Bench's `-kernel`, `core/core_kernel.cc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskBenchKernel {
    /// `empty`: no work beyond checking inputs and writing the output.
    Empty,
    /// `compute_bound` (`execute_kernel_compute`): `iterations` rounds of
    /// `a = a·a + a` on 64 doubles; 128 flops a round (+ 64 for the final product).
    ComputeBound { iterations: u64 },
    /// `memory_bound` (`execute_kernel_memory`): `iterations` copies of one of
    /// [`MEMORY_SAMPLES`] samples of the task's scratch, first half onto second half
    /// (`scratch_bytes / 16 / 2` bytes each), the sample index advancing with timestep
    /// and iteration.
    MemoryBound { iterations: u64, scratch_bytes: u64 },
}

impl TaskBenchKernel {
    /// Task Bench's name: `empty`, `compute_bound`, `memory_bound`.
    pub fn name(&self) -> &'static str {
        match self {
            TaskBenchKernel::Empty => "empty",
            TaskBenchKernel::ComputeBound { .. } => "compute_bound",
            TaskBenchKernel::MemoryBound { .. } => "memory_bound",
        }
    }

    /// The iteration count (0 for `Empty`).
    pub fn iterations(&self) -> u64 {
        match *self {
            TaskBenchKernel::Empty => 0,
            TaskBenchKernel::ComputeBound { iterations }
            | TaskBenchKernel::MemoryBound { iterations, .. } => iterations,
        }
    }

    /// Scratch bytes per task (0 but for `MemoryBound`).
    pub fn scratch_bytes(&self) -> u64 {
        match *self {
            TaskBenchKernel::MemoryBound { scratch_bytes, .. } => scratch_bytes,
            _ => 0,
        }
    }
}

/// The parameters of a Task Bench graph, unchecked; [`Default`] is Task Bench's
/// `default_graph` (4 steps × width 4, trivial, radix 3, fraction 0.25, empty kernel,
/// 16 output bytes). Validate with [`TaskBenchSpec::new`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskBenchParams {
    /// The dependence pattern (`-type`).
    pub pattern: TaskBenchPattern,
    /// Points per timestep (`-width`, Task Bench's `max_width`), at least 1.
    pub width: usize,
    /// Timesteps (`-steps`), at least 1.
    pub steps: usize,
    /// Dependencies per task of nearest, spread, random_nearest (`-radix`).
    pub radix: usize,
    /// Period of spread and random_nearest (`-period`); `None`: Task Bench's default, 3
    /// for those two patterns, none for the others (which refuse `Some`).
    pub period: Option<usize>,
    /// random_nearest's probability of keeping a dependency (`-fraction`), in `[0, 1]`.
    pub fraction_connected: f64,
    /// Bytes of each task's output (`-output`): a multiple of 16 (whole `(t, p)` pairs of
    /// `i64`), at least 16. Task Bench takes any size of at least 16 and fills whole pairs.
    pub output_bytes: u64,
    /// The kernel (`-kernel`, `-iter`, `-scratch`).
    pub kernel: TaskBenchKernel,
    /// Output fields per point (Task Bench's `-field`, `nb_fields`): task `(t, p)` writes
    /// field `t mod fields`; `None`: one per timestep (Task Bench's default). At least 2
    /// when `steps > 1`, so a task never reads the field it writes.
    pub fields: Option<usize>,
    /// Run each task as a host task on host memory (`host_kernel`), not as a target
    /// region: the host plugin's own lanes, no copies.
    pub host_tasks: bool,
    /// Keep every output field on the device for the whole run (target regions only):
    /// one `target enter data map(to:)` of all fields before the first task and one
    /// `target exit data map(from:)` after the `taskwait`, so each task's maps find
    /// their sections present and copy nothing (OpenMP 5.2 §5.8.3: no copy while the
    /// reference count stays above 0). A task is then its kernel and the events its
    /// inputs need; without it (the default) each task maps its output `from` and its
    /// inputs `to`, moving them through host memory.
    pub entered: bool,
    /// Task Bench's `graph_index` (seeds random_nearest's hash).
    pub graph_index: u64,
}

impl Default for TaskBenchParams {
    fn default() -> Self {
        TaskBenchParams {
            pattern: TaskBenchPattern::Trivial,
            width: 4,
            steps: 4,
            radix: 3,
            period: None,
            fraction_connected: 0.25,
            output_bytes: 16,
            kernel: TaskBenchKernel::Empty,
            fields: None,
            host_tasks: false,
            entered: false,
            graph_index: 0,
        }
    }
}

/// What is wrong with a Task Bench spec or run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskBenchError {
    /// Parameters Task Bench (or this generator) refuses; the message names the
    /// parameter, its value and the rule.
    #[error("Task Bench spec: {0}")]
    Spec(String),
    /// A finished run's output is not what Task Bench's definition says: the message
    /// names the buffer, the task and the element.
    #[error("Task Bench output: {0}")]
    Output(String),
}

/// The largest iteration count: scalars reach kernels through `f64`, exact below 2⁵³.
const MAX_ITERATIONS: u64 = 1 << 53;

/// A validated Task Bench graph ([`TaskBenchSpec::new`]); read-only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskBenchSpec {
    params: TaskBenchParams,
    period: usize,
    fields: usize,
}

impl TaskBenchSpec {
    /// Validates `params` with Task Bench's rules (its flag checks and `App::check`):
    /// `width`, `steps` ≥ 1; `fraction_connected` in `[0, 1]`; a period (> 0) for spread
    /// and random_nearest and none for the others; spread's `1 ≤ radix`,
    /// `period ≤ ⌈width / radix⌉`; fft's `width ≥ 2`; no task depending on a point twice
    /// (so stencil_1d_periodic needs `width ≥ 3`, spread `radix ≤ width`); reverse
    /// dependencies mirroring dependencies. This generator's own: `output_bytes` a
    /// multiple of 16, at least 16; iterations below 2⁵³; memory_bound's `scratch_bytes`
    /// a positive multiple of 256 (each of the 16 samples two halves of whole `i64`
    /// words; Task Bench asserts even sample bytes); `fields` ≥ 2 when `steps > 1`.
    ///
    /// Errors: [`TaskBenchError::Spec`] for the first rule broken, e.g.
    /// `width 0: must be at least 1`.
    ///
    /// Complexity: `O(P · W · D)` for `P` dependence sets, width `W` and `D`
    /// dependencies per task (Task Bench's check, once).
    pub fn new(params: TaskBenchParams) -> Result<TaskBenchSpec, TaskBenchError> {
        let err = |m: String| Err(TaskBenchError::Spec(m));
        let p = &params;
        let pat = p.pattern;
        if p.width == 0 {
            return err("width 0: must be at least 1".into());
        }
        if p.steps == 0 {
            return err("steps 0: must be at least 1".into());
        }
        let big = i32::MAX as usize;
        if p.width > big || p.steps > big || p.radix > big {
            return err(format!(
                "width {}, steps {}, radix {}: each must be below 2³¹",
                p.width, p.steps, p.radix
            ));
        }
        if !(0.0..=1.0).contains(&p.fraction_connected) {
            return err(format!(
                "fraction_connected {}: must be in [0, 1]",
                p.fraction_connected
            ));
        }
        let period = match (pat.needs_period(), p.period) {
            (true, None) => 3,
            (true, Some(0)) => {
                return err(format!("pattern {pat} needs a period of at least 1 (period 0)"))
            }
            (true, Some(n)) => n,
            (false, None) => 0,
            (false, Some(n)) => {
                return err(format!(
                    "pattern {pat} takes no period (period {n}: only spread and random_nearest have one)"
                ))
            }
        };
        if pat == TaskBenchPattern::Spread {
            if p.radix == 0 {
                return err("pattern spread needs radix at least 1 (radix 0)".into());
            }
            let spread = p.width.div_ceil(p.radix);
            if period > spread {
                return err(format!(
                    "pattern spread: period {period} exceeds ⌈width / radix⌉ = ⌈{} / {}⌉ = {spread} (later dependence sets would wrap around)",
                    p.width, p.radix
                ));
            }
        }
        if pat == TaskBenchPattern::Fft && p.width < 2 {
            return err(format!(
                "pattern fft needs width at least 2 (width {}: ⌈log2 width⌉ = 0 dependence sets)",
                p.width
            ));
        }
        if p.output_bytes < 16 || !p.output_bytes.is_multiple_of(16) {
            return err(format!(
                "output_bytes {}: must be a multiple of 16 (whole (timestep, point) pairs of i64), at least 16",
                p.output_bytes
            ));
        }
        let it = p.kernel.iterations();
        if it >= MAX_ITERATIONS {
            return err(format!(
                "kernel {}: iterations {it} must be below 2⁵³",
                p.kernel.name()
            ));
        }
        if let TaskBenchKernel::MemoryBound { scratch_bytes, .. } = p.kernel {
            if scratch_bytes == 0 || !scratch_bytes.is_multiple_of(16 * MEMORY_SAMPLES) {
                return err(format!(
                    "kernel memory_bound: scratch_bytes {scratch_bytes} must be a positive multiple of {} ({MEMORY_SAMPLES} samples whose halves are whole i64 words)",
                    16 * MEMORY_SAMPLES
                ));
            }
        }
        let fields = p.fields.unwrap_or(p.steps).min(p.steps);
        if p.steps > 1 && fields < 2 {
            return err(format!(
                "fields {fields}: at least 2 when steps > 1 (a task must not read the field it writes)"
            ));
        }
        let spec = TaskBenchSpec {
            params,
            period,
            fields,
        };
        spec.graph().check().map_err(|e| {
            TaskBenchError::Spec(format!("pattern {pat} at width {}: {e}", p.width))
        })?;
        Ok(spec)
    }

    /// The parameters as given (`period` and `fields` as given too: see
    /// [`TaskBenchSpec::period`], [`TaskBenchSpec::fields`]).
    pub fn params(&self) -> &TaskBenchParams {
        &self.params
    }
    pub fn pattern(&self) -> TaskBenchPattern {
        self.params.pattern
    }
    pub fn width(&self) -> usize {
        self.params.width
    }
    pub fn steps(&self) -> usize {
        self.params.steps
    }
    pub fn radix(&self) -> usize {
        self.params.radix
    }
    /// The period in use (Task Bench's default resolved; 0 for patterns without one).
    pub fn period(&self) -> usize {
        self.period
    }
    pub fn fraction_connected(&self) -> f64 {
        self.params.fraction_connected
    }
    /// Bytes of each task's output.
    pub fn output_bytes(&self) -> u64 {
        self.params.output_bytes
    }
    pub fn kernel(&self) -> TaskBenchKernel {
        self.params.kernel
    }
    /// Output fields per point in use (`min(fields, steps)`).
    pub fn fields(&self) -> usize {
        self.fields
    }
    pub fn host_tasks(&self) -> bool {
        self.params.host_tasks
    }
    /// Fields entered once for the whole run ([`TaskBenchParams::entered`]); ignored
    /// with host tasks.
    pub fn entered(&self) -> bool {
        self.params.entered
    }

    /// The number of tasks: `Σ_t width_at_timestep(t)`.
    pub fn tasks(&self) -> u64 {
        let g = self.graph();
        (0..self.steps() as i64).map(|t| g.width_at(t) as u64).sum()
    }

    /// Task Bench's `count_flops_per_task` (`core/core.cc`): compute_bound
    /// `2 · 64 · iterations + 64` flops (a multiply and an add per double per round,
    /// then the product of the 64), 0 for the other kernels.
    pub fn flops_per_task(&self) -> u64 {
        match self.kernel() {
            TaskBenchKernel::ComputeBound { iterations } => 2 * 64 * iterations + 64,
            _ => 0,
        }
    }

    /// Task Bench's `count_bytes_per_task`: memory_bound
    /// `scratch_bytes · iterations / 16` bytes (16 samples), 0 for the other kernels.
    pub fn bytes_per_task(&self) -> u64 {
        match self.kernel() {
            TaskBenchKernel::MemoryBound {
                iterations,
                scratch_bytes,
            } => ((scratch_bytes as u128 * iterations as u128) / MEMORY_SAMPLES as u128) as u64,
            _ => 0,
        }
    }

    /// Task Bench's `count_flops`: [`TaskBenchSpec::flops_per_task`] × [`TaskBenchSpec::tasks`]
    /// (as `f64`: large sweeps pass 2⁶⁴).
    pub fn total_flops(&self) -> f64 {
        self.flops_per_task() as f64 * self.tasks() as f64
    }

    /// Task Bench's `count_bytes`: [`TaskBenchSpec::bytes_per_task`] × [`TaskBenchSpec::tasks`].
    pub fn total_bytes(&self) -> f64 {
        self.bytes_per_task() as f64 * self.tasks() as f64
    }

    /// A short name for programs and reports, e.g. `stencil_1d_w4_s8_compute_bound`.
    pub fn name(&self) -> String {
        format!(
            "taskbench_{}_w{}_s{}_{}",
            self.pattern(),
            self.width(),
            self.steps(),
            self.kernel().name()
        )
    }

    pub(super) fn graph(&self) -> Graph {
        Graph {
            pattern: self.params.pattern,
            graph_index: self.params.graph_index as i64,
            steps: self.params.steps as i64,
            width: self.params.width as i64,
            radix: self.params.radix as i64,
            period: self.period as i64,
            fraction: self.params.fraction_connected,
        }
    }
}
