//! offload-sched: an embedded dataflow / task-graph scheduler with offload nodes.
//!
//! A [`Program`] of OpenMP-style target regions is lowered ([`lower::lower`]) into an
//! [`lower::OpGraph`] of Alloc, H2D, Kernel, D2H, Free and host ops; the scheduler
//! ([`schedule::schedule`]) colours each region onto one stream and inserts only the
//! synchronization the data dependencies need; the verifier ([`verify::verify`]) proves
//! the schedule right (and, under `minimal`, minimal); the executor ([`exec`]) runs it on
//! a plugin ([`plugin`]: the host plugin always, CUDA with the `cuda` feature).
//!
//! # Quick start
//!
//! In `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! offload-sched = { path = "../offload-sched" } # a checkout of this repository
//! # with the CUDA plugin (loads the driver at run time; runs without one, saying so):
//! # offload-sched = { path = "../offload-sched", features = ["cuda"] }
//! ```
//!
//! The host plugin calls its kernels through libffi, linked from the system
//! (`libffi-dev` on Debian). Then: build a program, compile it once into a [`Plan`]
//! (lowered, scheduled, verified), and run it many times in a [`Session`] with your own
//! memory bound to the program's typed buffers:
//!
//! ```
//! use offload_sched::plugin::host::{HostPlugin, HostPluginOptions};
//! use offload_sched::model::MapType;
//! use offload_sched::schedule::ScheduleOptions;
//! use offload_sched::{Bindings, Plan, ProgramBuilder, Session};
//!
//! // y = 2·x + y on 1024 floats: one target region, x copied in, y in and out.
//! let mut p = ProgramBuilder::new("saxpy");
//! let x = p.buf::<f32>("x", 1024);
//! let y = p.buf::<f32>("y", 1024);
//! p.target("saxpy", "saxpy").num(2.0).arg(x).arg(y)
//!     .map(MapType::To, x).map(MapType::ToFrom, y);
//! let plan = Plan::new(p.build(), &ScheduleOptions::default())?; // lower, schedule, verify
//! println!("{}", plan.schedule()); // the stream assignment and every sync, as text
//!
//! let plugin = HostPlugin::new(HostPluginOptions::default());
//! let mut session = Session::new(&plan, &plugin)?;
//! let xs: Vec<f32> = (0..1024).map(|i| i as f32).collect();
//! let mut ys = vec![1.0f32; 1024];
//! session.run(Bindings::new().input(x, &xs).output(y, &mut ys))?;
//! assert_eq!(ys[3], 7.0);
//! # Ok::<(), offload_sched::Error>(())
//! ```
//!
//! Graph files (TOML, with every error located at file:line:column) load with
//! [`Plan::from_file`]; [`Plan::to_dot`] draws the streams as Graphviz DOT. A session
//! that owns its plan and plugin (for an application struct) is [`Session::shared`].
//!
//! # Layout
//!
//! Pipeline (one direction): `Program → lower → OpGraph → assign → sync → Schedule →
//! verify → exec (plugin)`, one module per stage. [`Plan`] runs these stages in one place
//! and holds their results (program, op graph, verified schedule, proof); it is what an
//! application, the command line and the benchmark use. Beside the executor, each in a
//! room of its own: [`reference`](mod@reference) (the sequential reference interpreter and the result
//! check), [`timeline`] (overlap figures and the Chrome trace of a run) and [`estimate`]
//! (the host memory a run needs). [`Error`] joins the stages' errors. The rules the
//! crate implements (OpenMP mapping semantics, synchronization, the plugin contract) are
//! in [`design`].

pub mod distribute;
pub mod dot;
pub mod error;
pub mod estimate;
pub mod exec;
pub mod file;
pub mod graph;
pub mod import;
pub mod lower;
pub mod model;
pub mod plan;
mod plan_cap;
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
