//! Beyond one host: the same program over several ranks (StarPU-MPI's model).
//!
//! Every rank builds or loads the same [`Program`](crate::Program) and the same
//! [`Distribution`] (data owners: per buffer, per section, 2-D block-cyclic for tiles;
//! explicit placement of constructs), and splits it identically ([`split`]): each rank
//! runs the constructs that write data it owns (owner computes), and every cross-rank
//! dependency becomes a send host task on the producer's rank and a receive host task on
//! the consumer's, with an [`Envelope`] `(from, to, seq)` that never collides nor runs
//! out (proof in [`transfer`]). Received data stays valid on its rank until overwritten.
//!
//! [`DistPlan::new`] compiles every rank's program into a [`Plan`](crate::Plan) (lowered,
//! scheduled, verified as any plan) and then verifies all ranks together
//! ([`verify_ranks`]) before anything is issued: every send matched by exactly one
//! receive (peer, tag, bytes, section), the global graph (every rank's op graph plus the
//! send → receive edges) acyclic, and no rank blocked forever on a receive under the
//! executor's in-order streams and host lanes with sends that never block (one progress
//! thread).
//!
//! Ranks exchange bytes through a [`Transport`]: [`ChannelTransport`] runs every rank as a
//! thread of one process ([`run_in_process`]), for tests and for trying a distribution
//! without MPI.
//!
//! Every rank holds host buffers of the program's full size (a rank reads and writes only
//! the parts it needs); device copies are per rank as in one process. On the CUDA plugin
//! sends and receives read and write host memory, so GPU data goes through the host
//! copies, which the session pins.

pub mod file;
mod link;
#[cfg(feature = "mpi")]
pub mod mpi;
mod owner;
mod reorder;
mod run;
mod split;
pub mod transfer;
mod transport;
mod validity;
pub mod verify;

pub use link::Link;
pub use owner::{Distribution, MAX_RANKS};
pub use run::{run_in_process, run_in_process_with, DistPlan, DistRun, RankRun, RankSession};
pub use split::{split, DistProgram, RankProgram};
pub use transfer::{Envelope, Transfer};
pub use transport::{ChannelTransport, Transport, TransportError};
pub use verify::{verify_ranks, RankView, TransferOp, Violation};

/// `1 rank (rank 0)` or `N ranks (ranks 0 to N-1)`: the ranks of a run, for error messages.
pub(crate) fn ranks_phrase(ranks: u32) -> String {
    match ranks {
        1 => "1 rank (rank 0)".to_string(),
        n => format!("{n} ranks (ranks 0 to {})", n.saturating_sub(1)),
    }
}

/// Why a program cannot be distributed, compiled over ranks, or run over them.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("a run takes 1 to {max} ranks, not {ranks}", max = MAX_RANKS)]
    Ranks { ranks: u32 },
    #[error("rank {rank} for {what} is out of range: the run has {}", ranks_phrase(*.ranks))]
    Rank { rank: u32, ranks: u32, what: String },
    #[error("a {p}×{q} rank grid does not cover {ranks} ranks")]
    Grid { p: u32, q: u32, ranks: u32 },
    #[error("buffer id {id} is not of this program")]
    Buffer { id: u32 },
    #[error("construct \"{name}\" is placed on a rank but the program has no target region or host task of that name")]
    Placed { name: String },
    /// `span`: where the construct is written, for programs read from a file.
    /// Refused because the split's validity model is of host data: a device data
    /// environment that outlives one region (OpenMP 5.2 §13.5-§13.9: `target data`,
    /// `target enter data` / `exit data`, `target update`) keeps device copies whose
    /// validity across ranks the split does not track, and a `taskgraph` replays a
    /// recorded region sequence the split would cut between ranks.
    #[error("{kind} \"{name}\": a distributed program takes target regions, host tasks and taskwaits only (not yet distributed: the device copies of target data, enter/exit data and update outlive a region, and a taskgraph replays its regions, while the split tracks only which rank holds valid host data; map the data on each target region instead)")]
    Unsupported {
        kind: &'static str,
        name: String,
        span: Option<crate::model::Span>,
    },
    #[error("construct \"{name}\" has the name of a send or receive task")]
    Name { name: String },
    #[error("rank {rank}: {source}")]
    Plan {
        rank: u32,
        #[source]
        source: Box<crate::Error>,
    },
    #[error("the ranks' schedules fail the cross-rank check:\n{}", list(.0))]
    Verify(Vec<Violation>),
    #[error("rank {rank} failed: {message}")]
    Run { rank: u32, message: String },
}

fn list(v: &[Violation]) -> String {
    v.iter()
        .map(|v| format!("  {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}
