//! Emitting one construct's ops: allocs, H2D copies, peer copies, the kernel, D2H copies
//! and frees, each with its dependency edges from the tracker (`deps`), in that order.
//!
//! Peer copies (programs of several devices only, see `latest`): before an op reads
//! allocation `a` on device d (an H2D's target when the host copy is stale, a kernel's
//! read or partial write, a D2H's source), every part of the read whose latest contents
//! are in an allocation `b` of another device is copied `b → a` first
//! ([`OpKind::PeerCopy`], on d's stream). An H2D whose whole section is newer on another
//! device becomes peer copies only. A peer copy reads `b` and writes `a` in the tracker,
//! so it is ordered like any other op (RAW/WAR/WAW per allocation), and `b`'s `Free`
//! follows it.

use super::builder::{ConstructOps, DeviceAccess, Lowerer};
use super::deps::Space;
use super::{AllocId, KernelCall, OpId, OpKind, RegionId};
use crate::model::Section;

impl Lowerer<'_> {
    /// Emits a plan's ops with a kernel between the copies. `first` preds go on the
    /// region's first op. Returns the op ids (the region's range).
    pub(super) fn emit(
        &mut self,
        region: RegionId,
        device: u32,
        plan: &ConstructOps,
        kernel: Option<(KernelCall, Vec<DeviceAccess>)>,
        mut first: Vec<OpId>,
    ) -> Vec<OpId> {
        let multi = self.devices > 1;
        let mut ids = Vec::new();
        if self.elide.on() {
            let accesses = kernel.as_ref().map(|k| &k.1[..]);
            self.elide_prepass(region, device, plan, accesses, &mut first, &mut ids);
        }
        for &a in &plan.allocs {
            let room = self.make_room(a, region, &mut ids);
            let s = self.storage(a);
            let mut p = std::mem::take(&mut first);
            p.extend(room);
            let id = OpId(self.g.ops.len() as u32);
            self.deps
                .write(Space::Alloc(a), s.buf.index(), s.lo, s.len, id, &mut p);
            ids.push(self.push(OpKind::Alloc { alloc: a }, region, device, p));
        }
        for &(a, s) in &plan.elided_h2d {
            self.record_elided_h2d(region, a, s);
        }
        let mut h2ds = Vec::new();
        for &(a, s) in &plan.h2d {
            let stale = if multi {
                self.latest.stale(&s, a)
            } else {
                Vec::new()
            };
            let from_peers: u64 = stale.iter().map(|(p, _)| p.len).sum();
            if from_peers < s.len {
                let mut p = std::mem::take(&mut first);
                let id = OpId(self.g.ops.len() as u32);
                self.deps
                    .read(Space::Host, s.buf.index(), s.lo, s.len, id, &mut p);
                self.deps
                    .write(Space::Alloc(a), s.buf.index(), s.lo, s.len, id, &mut p);
                self.written[a.index()].add(s.lo, s.end());
                let op = self.push(
                    OpKind::H2D {
                        alloc: a,
                        section: s,
                    },
                    region,
                    device,
                    p,
                );
                self.latest.host_copied_into(&s, a);
                self.copied_in(a, &s);
                h2ds.push(op);
                ids.push(op);
            }
            for (part, src) in stale {
                let op = self.peer_copy(region, device, src, a, part, &mut first);
                h2ds.push(op);
                ids.push(op);
            }
        }
        let mut kernel_op = None;
        if let Some((call, accesses)) = kernel {
            if multi {
                // What the kernel reads, or may leave unwritten of what it writes, must
                // be the latest contents.
                for &(a, s, acc, _, written) in &accesses {
                    let need = if acc.reads() {
                        s
                    } else if acc.writes() && written < s.len {
                        Section::new(s.buf, s.lo + written, s.len - written)
                    } else {
                        continue;
                    };
                    for (part, src) in self.latest.stale(&need, a) {
                        let op = self.peer_copy(region, device, src, a, part, &mut first);
                        h2ds.push(op);
                        ids.push(op);
                    }
                }
            }
            let mut p = h2ds.clone();
            p.append(&mut first);
            let id = OpId(self.g.ops.len() as u32);
            for &(a, s, acc, real, _) in &accesses {
                let (b, lo, len) = (s.buf.index(), s.lo, s.len);
                if acc.reads() {
                    self.deps.read(Space::Alloc(a), b, lo, len, id, &mut p);
                    // Warned once per construct: a taskgraph's later executions
                    // (`iteration` >= 1) repeat the first one's reads.
                    if real
                        && self.read_storage(a, &s)
                        && self.iteration == 0
                        && !self.kernel_wrote[a.index()]
                    {
                        let r = &self.g.regions[region.index()];
                        super::warning::undefined_device_read(
                            &self.p.buffers,
                            (&r.name, r.span),
                            &call.kernel,
                            &s,
                            &mut self.g.warnings,
                        );
                    }
                }
                if acc.writes() {
                    self.deps.write(Space::Alloc(a), b, lo, len, id, &mut p);
                }
            }
            // Writes count after every read of the launch (an `inout` reads first), and
            // only as far as the kernel is sure to write.
            for &(a, s, acc, _, written) in &accesses {
                self.written[a.index()].add(s.lo, s.lo + written);
                if acc.writes() {
                    self.kernel_wrote[a.index()] = true;
                    self.latest.device_wrote(&s, a);
                    self.device_wrote(a);
                }
            }
            let op = self.push(OpKind::Kernel(call), region, device, p);
            kernel_op = Some(op);
            ids.push(op);
        }
        let keep = self.to_keep(plan);
        for &(a, s) in &plan.d2h {
            if keep.contains(&a) {
                self.defer_d2h(region, a, s);
                continue;
            }
            let mut p: Vec<OpId> = kernel_op.into_iter().collect();
            if multi {
                for (part, src) in self.latest.stale(&s, a) {
                    let op = self.peer_copy(region, device, src, a, part, &mut first);
                    ids.push(op);
                    p.push(op);
                }
            }
            p.append(&mut first);
            let id = OpId(self.g.ops.len() as u32);
            self.deps
                .read(Space::Alloc(a), s.buf.index(), s.lo, s.len, id, &mut p);
            self.read_storage(a, &s);
            self.deps
                .write(Space::Host, s.buf.index(), s.lo, s.len, id, &mut p);
            self.latest.host_latest(&s);
            ids.push(self.push(
                OpKind::D2H {
                    alloc: a,
                    section: s,
                },
                region,
                device,
                p,
            ));
            self.copied_out(a, &s);
        }
        for &a in &plan.frees {
            match keep.contains(&a) {
                true => self.keep(a, region, device, &mut first, &mut ids),
                false => self.release(a, region, device, &mut first, &mut ids),
            }
        }
        ids
    }

    /// Emits a peer copy of `part` from `src` (another device) into `dst` (on `device`)
    /// and records that `dst` holds the latest contents of `part`. Takes `first` as
    /// extra predecessors (the construct's, when this is its first op).
    fn peer_copy(
        &mut self,
        region: RegionId,
        device: u32,
        src: AllocId,
        dst: AllocId,
        part: Section,
        first: &mut Vec<OpId>,
    ) -> OpId {
        let mut p = std::mem::take(first);
        let id = OpId(self.g.ops.len() as u32);
        let (b, lo, len) = (part.buf.index(), part.lo, part.len);
        self.deps.read(Space::Alloc(src), b, lo, len, id, &mut p);
        self.deps.write(Space::Alloc(dst), b, lo, len, id, &mut p);
        self.read_storage(src, &part);
        self.written[dst.index()].add(part.lo, part.end());
        self.latest.also_in(&part, dst);
        self.push(
            OpKind::PeerCopy {
                src,
                dst,
                section: part,
            },
            region,
            device,
            p,
        )
    }
}
