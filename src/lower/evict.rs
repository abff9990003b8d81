//! Which kept copy to evict ([`EvictionPolicy`]; issue 28 point 2): the one whose next
//! use is furthest (Belady's MIN, optimal for a known future: Belady 1966, "A study of
//! replacement algorithms for a virtual-storage computer"), or the least recently used
//! (StarPU's default `lru` replacement of its memory manager, for comparison).
//!
//! The whole program is known when it is lowered, so each kept copy's next use is a
//! position: constructs are numbered in lowering order (a `taskgraph` body once per
//! execution, a `target data` before its body), and a section's uses are the numbers of
//! the constructs that name it with a `to` motion or as an implicitly mapped argument
//! (what `elide`'s future count counts). A copy's next use is taken when it is kept: a
//! construct that named it but did not take it (its section present by then) leaves the
//! copy's position in the past, so it looks sooner than it is; only the choice of victim
//! changes, never a result.
//!
//! Complexity: `O(log k)` per keep, take and eviction for `k` kept copies;
//! `O(c log c)` once for the `c` map items of the program.

use super::AllocId;
use crate::model::{Construct, Section};
use std::collections::{BTreeMap, BTreeSet};

/// Which kept copy the lowering evicts first when the keep limit or the device memory
/// cap needs room ([`super::LowerOptions::eviction`]; the CLI's `--eviction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EvictionPolicy {
    /// Furthest next use first (Belady's MIN; never used again counts as furthest).
    #[default]
    Belady,
    /// Least recently used first (kept longest ago: a kept copy's last use is the
    /// construct that kept it), StarPU's default.
    Lru,
}

impl EvictionPolicy {
    /// `belady` or `lru`.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::Belady => "belady",
            EvictionPolicy::Lru => "lru",
        }
    }

    /// Both policies, in the order reports show them.
    pub const ALL: [EvictionPolicy; 2] = [EvictionPolicy::Belady, EvictionPolicy::Lru];
}

impl std::str::FromStr for EvictionPolicy {
    type Err = String;

    /// `belady` or `lru`; anything else is an error naming the choices.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "belady" => Ok(EvictionPolicy::Belady),
            "lru" => Ok(EvictionPolicy::Lru),
            _ => Err(format!(
                "unknown eviction policy `{}` (expected belady or lru)",
                crate::model::escape_controls(s)
            )),
        }
    }
}

/// The kept copies in eviction order under the chosen policy.
///
/// The order is built only when a victim is first asked for ([`Victims::first`]):
/// without a device memory cap or a keep limit that binds, nothing is ever evicted for
/// room, and keeping a copy costs one vector entry. Each copy's order key is made from
/// what [`Victims::kept`] recorded (the position it was kept at, its stamp), so a
/// late-built order is the one kept up to date from the start.
#[derive(Clone, Debug, Default)]
pub(super) struct Victims {
    policy: EvictionPolicy,
    /// Per section: the positions of its uses, ascending.
    uses: BTreeMap<Section, Vec<u64>>,
    /// The position of the construct being lowered.
    pos: u64,
    /// Per allocation id: `(section, position, stamp)` when it was kept, while it is.
    kept: Vec<Option<(Section, u64, u64)>>,
    /// (order key, alloc): the first is evicted first; `None` until first asked.
    order: Option<BTreeSet<(u64, AllocId)>>,
    stamp: u64,
}

impl Victims {
    /// The positions of `body`'s uses (see the module docs).
    pub(super) fn new(policy: EvictionPolicy, body: &[Construct]) -> Victims {
        let mut v = Victims {
            policy,
            ..Victims::default()
        };
        let mut pos = 0;
        uses(body, &mut pos, &mut v.uses);
        v
    }

    /// The lowering moved on to its next construct (called once per construct, in the
    /// order `uses` numbers them).
    pub(super) fn advance(&mut self) {
        self.pos += 1;
    }

    /// `a`, holding `s`, is kept from now on.
    pub(super) fn kept(&mut self, a: AllocId, s: &Section) {
        self.stamp += 1;
        let i = a.index();
        if i >= self.kept.len() {
            self.kept.resize(i + 1, None);
        }
        let entry = (*s, self.pos, self.stamp);
        self.kept[i] = Some(entry);
        if let Some(order) = &mut self.order {
            order.insert((key(self.policy, &self.uses, &entry), a));
        }
    }

    /// `a` is no longer kept (taken or evicted).
    pub(super) fn unkept(&mut self, a: AllocId) {
        let Some(entry) = self.kept.get_mut(a.index()).and_then(Option::take) else {
            return;
        };
        if let Some(order) = &mut self.order {
            order.remove(&(key(self.policy, &self.uses, &entry), a));
        }
    }

    /// The kept copy to evict first, among those `ok` accepts.
    pub(super) fn first(&mut self, ok: impl Fn(AllocId) -> bool) -> Option<AllocId> {
        let (policy, uses, kept) = (self.policy, &self.uses, &self.kept);
        let order = self.order.get_or_insert_with(|| {
            (kept.iter().enumerate())
                .filter_map(|(i, e)| {
                    e.as_ref()
                        .map(|e| (key(policy, uses, e), AllocId(i as u32)))
                })
                .collect()
        });
        order.iter().map(|&(_, a)| a).find(|&a| ok(a))
    }
}

/// The order key of a copy kept as `(section, position, stamp)` under `policy`, with
/// `uses` the positions of each section's uses.
fn key(
    policy: EvictionPolicy,
    uses: &BTreeMap<Section, Vec<u64>>,
    &(s, pos, stamp): &(Section, u64, u64),
) -> u64 {
    match policy {
        // Furthest first: the set is ascending, so store the complement.
        EvictionPolicy::Belady => u64::MAX - next_use(uses, &s, pos),
        EvictionPolicy::Lru => stamp,
    }
}

/// The position of the next use of `s` after the construct at position `pos`
/// (`u64::MAX`: none).
fn next_use(uses: &BTreeMap<Section, Vec<u64>>, s: &Section, pos: u64) -> u64 {
    let Some(v) = uses.get(s) else {
        return u64::MAX;
    };
    let i = v.partition_point(|&p| p <= pos);
    v.get(i).copied().unwrap_or(u64::MAX)
}

/// Numbers the constructs of `body` from `*pos + 1` in lowering order and records, per
/// section, where it is used with a `to` motion (the uses `elide::future_uses` counts).
fn uses(body: &[Construct], pos: &mut u64, out: &mut BTreeMap<Section, Vec<u64>>) {
    for c in body {
        *pos += 1;
        let at = *pos;
        let mut add = |s: &Section| out.entry(*s).or_default().push(at);
        match c {
            Construct::Target(t) => {
                for m in t.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section);
                }
                for s in t.unmapped_args() {
                    add(&s);
                }
            }
            Construct::EnterData(d) => {
                for m in d.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section);
                }
            }
            Construct::TargetData(d) => {
                for m in d.maps.iter().filter(|m| m.map_type.has_to()) {
                    add(&m.section);
                }
                uses(&d.body, pos, out);
            }
            Construct::Taskgraph(t) => {
                for _ in 0..t.repeat {
                    uses(&t.body, pos, out);
                }
            }
            _ => {}
        }
    }
}
