//! offload-sched: an embedded dataflow / task-graph scheduler with offload nodes.
//!
//! A [`model::Program`] of OpenMP-style target regions is lowered ([`lower::lower`]) into
//! an [`lower::OpGraph`] of Alloc, H2D, Kernel, D2H, Free and host ops; the scheduler
//! ([`schedule::schedule`]) colours each region onto one stream and inserts only the
//! synchronization the data dependencies need; the verifier ([`verify::verify`]) proves
//! the schedule right (and, under `minimal`, minimal); the executor runs it on a plugin.
//!
//! Pipeline (one direction): `Program → lower → OpGraph → assign → sync → Schedule →
//! verify → exec (plugin)`. [`Plan`] runs these stages in one place and holds their
//! results (program, op graph, verified schedule, proof); it is what an application, the
//! command line (crates/cli) and the benchmark (crates/bench) use. [`Error`] joins the
//! stages' errors. Host kernels live in `runtime`, shared by the host plugin, the
//! executor and the reference interpreter; `graph` holds the graph algorithms.

pub mod dot;
pub mod error;
pub mod estimate;
pub mod exec;
pub mod file;
pub(crate) mod graph;
pub mod import;
pub mod lower;
pub mod model;
pub mod plan;
pub mod plugin;
pub mod reference;
pub mod replay;
pub(crate) mod runtime;
pub mod schedule;
pub mod session;
pub(crate) mod suggest;
pub mod timeline;
pub mod verify;

pub use error::Error;
pub use model::{Buf, Program, ProgramBuilder};
pub use plan::Plan;
pub use session::{Bindings, PinnedBuf, Session, Submitted};

/// The design notes the crate is built to: the pipeline, the terms, the mapping-table
/// rules (after OpenMP 5.x and libomptarget), dependencies, synchronization, the plugin
/// contract and the targets. Code docs cite its sections by name.
#[doc = include_str!("../docs/DESIGN.md")]
pub mod design {}

/// The README's code blocks compile and run as doc-tests (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
