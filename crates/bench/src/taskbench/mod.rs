//! `bench taskbench`: Task Bench (Slaughter et al., SC20; StanfordLegion/task-bench) —
//! METG(50%) of Task Bench's dependency patterns through offload-sched, beside Task
//! Bench's own MPI, OpenMP and StarPU implementations (issue 30).
//!
//! Modules: `metg` (efficiency per granularity and METG from a recorded sweep, as Task
//! Bench's `chart_metg.py`).

pub mod metg;
