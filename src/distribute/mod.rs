//! Beyond one host: the same program over several ranks (StarPU-MPI's model).
//!
//! Every rank builds or loads the same [`Program`](crate::Program) and the same
//! [`Distribution`] (data owners: per buffer, per section, 2-D block-cyclic for tiles;
//! explicit placement of constructs), and splits it identically ([`split`]): each rank
//! runs the constructs that write data it owns (owner computes), and every cross-rank
//! dependency becomes a send host task on the producer's rank and a receive host task on
//! the consumer's, with an [`Envelope`] `(from, to, seq)` that never collides nor runs
//! out (proof in [`transfer`]). Received data stays valid on its rank until overwritten.
//! Data constructs (`target data`, `enter` / `exit data`, `update`) run on every rank,
//! so every rank's device data environment has the same present sections; the split
//! tracks which ranks' devices hold each present element's current value and stages it
//! between ranks through the host copies when a region elsewhere reads it (see
//! [`split`]'s "Device data environments").
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
mod presence;
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
    /// Refused: a `taskgraph` (OpenMP 6.0 §14.3) records its regions on its first
    /// execution and replays them as one graph, which the split would cut between
    /// ranks (each rank would record and replay a different graph).
    #[error("{kind} \"{name}\": a distributed program takes no taskgraph (not yet distributed: a taskgraph records its regions once and replays them as one graph, which the split would cut between ranks; write its body out `repeat` times instead)")]
    Unsupported {
        kind: &'static str,
        name: String,
        span: Option<crate::model::Span>,
    },
    /// A data construct on another device than 0 (or `device = auto`), or a target
    /// region placed by the lowering (`device = auto`) while data is entered: the split
    /// tracks device 0's data environment, the same on every rank.
    #[error("construct \"{name}\": a distributed program keeps its device data environment on device 0 (a data construct on another device or `auto`, or a region of `device = auto` while data is entered, is not distributed)")]
    DataDevice {
        name: String,
        span: Option<crate::model::Span>,
    },
    /// No rank holds the current value `construct` reads (never expected: the split
    /// keeps a host value that a device value passing through a host copy would
    /// overwrite; reported rather than run wrong).
    #[error("construct \"{construct}\" reads {section}, but no rank holds its current value")]
    Lost { section: String, construct: String },
    #[error("construct \"{name}\" has the name of a task the split adds (a send, a receive or a staging copy)")]
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
