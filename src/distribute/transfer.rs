//! Cross-rank transfers: the envelope of each message and what it carries.
//!
//! # Envelopes never collide and never run out
//!
//! Every transfer of a run is one message from rank `from` to rank `to` with the
//! sequence number `seq`: the number of transfers from `from` to `to` before it in
//! program order ([`super::split`] numbers them as it emits them, the same on every
//! rank, as every rank splits the same program). `(from, to, seq)` is unique by
//! construction, and `seq` is a `u64`: a program would need 2⁶⁴ transfers between one
//! pair of ranks to wrap it.
//!
//! MPI's tag is an `int` bounded by `MPI_TAG_UB`, at least 32767 on every MPI (MPI 4.0
//! §3.2.3). The MPI transport (`distribute::mpi`, feature `mpi`) sends message `seq` of
//! a pair with tag `seq mod 32768` on data communicator `seq / 32768` (duplicates of
//! `MPI_COMM_WORLD`, made collectively before the first message from the plan's largest
//! `seq`): MPI matches on (communicator, source, tag), so two messages of one pair match
//! the same receive only if their `seq` are equal, and no tag exceeds 32767 whatever
//! the MPI. The verifier ([`super::verify`]) checks the uniqueness anyway: every
//! `(from, to, seq)` is sent exactly once and received exactly once.

use crate::model::{Buffer, Section};
use std::fmt;

/// Where a message goes and how it is matched: sender rank, receiver rank, and the
/// per-pair sequence number (the tag; see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Envelope {
    pub from: u32,
    pub to: u32,
    pub seq: u64,
}

impl fmt::Display for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}→r{} tag {}", self.from, self.to, self.seq)
    }
}

/// One cross-rank transfer: the host bytes of `section` move from `envelope.from` (where
/// they are valid) to `envelope.to` (which reads them next).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub envelope: Envelope,
    pub section: Section,
    /// Size in bytes (`section.len` × element size).
    pub bytes: u64,
    /// Name of the send host task on the sender's program.
    pub send: String,
    /// Name of the receive host task on the receiver's program.
    pub recv: String,
    /// The construct that reads the data on the receiver (`end` for the final gather).
    pub consumer: String,
}

impl Transfer {
    /// A transfer of `section` of `buffers` in `envelope`; names its send and receive
    /// tasks after the envelope (`send r0→r1 #3`, `recv r0→r1 #3`).
    pub fn new(envelope: Envelope, section: Section, buffers: &[Buffer], consumer: &str) -> Self {
        let bytes = section.len * buffers[section.buf.index()].ty.size_bytes();
        let id = format!("r{}→r{} #{}", envelope.from, envelope.to, envelope.seq);
        Transfer {
            envelope,
            section,
            bytes,
            send: format!("send {id}"),
            recv: format!("recv {id}"),
            consumer: consumer.to_string(),
        }
    }
}
