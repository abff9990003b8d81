//! Task Bench's dependence patterns, transcribed from its `core/core.cc`
//! (StanfordLegion/task-bench, commit bf4ad19): `TaskGraph::offset_at_timestep`,
//! `width_at_timestep`, `max_dependence_sets`, `dependence_set_at_timestep`,
//! `dependencies` and `reverse_dependencies` (inclusive intervals of points), its
//! `random_uniform` (SipHash-2-4 of the seed words, `core_random.c`) and the well-formedness
//! check of `App::check`. Arithmetic is in `i64`, as Task Bench's `long`.

use super::TaskBenchPattern;

/// The graph parameters the pattern functions read (Task Bench's `task_graph_t`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Graph {
    pub pattern: TaskBenchPattern,
    pub graph_index: i64,
    pub steps: i64,
    pub width: i64,
    pub radix: i64,
    pub period: i64,
    pub fraction: f64,
}

/// An inclusive interval of points `(first, last)`, as Task Bench's `std::pair<long, long>`.
pub(super) type Interval = (i64, i64);

impl Graph {
    /// `offset_at_timestep`: the first point of timestep `t` (0 before the first).
    pub fn offset_at(&self, t: i64) -> i64 {
        if t < 0 {
            return 0;
        }
        match self.pattern {
            TaskBenchPattern::Dom => (t + self.width - self.steps).max(0),
            _ => 0,
        }
    }

    /// `width_at_timestep`: the number of points of timestep `t` (0 before the first).
    pub fn width_at(&self, t: i64) -> i64 {
        if t < 0 {
            return 0;
        }
        match self.pattern {
            TaskBenchPattern::Dom => self.width.min((t + 1).min(self.steps - t)),
            TaskBenchPattern::Tree => self.width.min(1i64 << t.min(62)),
            _ => self.width,
        }
    }

    /// `max_dependence_sets`: fft `⌈log2 width⌉`, spread and random_nearest `period`, 1
    /// otherwise.
    pub fn max_dsets(&self) -> i64 {
        match self.pattern {
            TaskBenchPattern::Fft => (self.width as f64).log2().ceil() as i64,
            TaskBenchPattern::Spread | TaskBenchPattern::RandomNearest => self.period,
            _ => 1,
        }
    }

    /// `dependence_set_at_timestep`.
    pub fn dset_at(&self, t: i64) -> i64 {
        match self.pattern {
            TaskBenchPattern::Fft => (t + self.max_dsets() - 1) % self.max_dsets(),
            TaskBenchPattern::Spread | TaskBenchPattern::RandomNearest => t % self.max_dsets(),
            _ => 0,
        }
    }

    /// `TaskGraph::dependencies(dset, point)`: the points of the previous timestep that
    /// `point` reads, before clipping to that timestep's points.
    pub fn dependencies(&self, dset: i64, point: i64) -> Vec<Interval> {
        let w = self.width;
        let one = |p: i64| vec![(p, p)];
        match self.pattern {
            TaskBenchPattern::Trivial => vec![],
            TaskBenchPattern::NoComm => one(point),
            TaskBenchPattern::Stencil1d => vec![((point - 1).max(0), (point + 1).min(w - 1))],
            TaskBenchPattern::Stencil1dPeriodic => self.periodic(point),
            TaskBenchPattern::Dom => vec![((point - 1).max(0), point)],
            TaskBenchPattern::Tree => one(point / 2),
            TaskBenchPattern::Fft => self.fft(dset, point),
            TaskBenchPattern::AllToAll => vec![(0, w - 1)],
            TaskBenchPattern::Nearest if self.radix > 0 => vec![(
                (point - self.radix / 2).max(0),
                (point + (self.radix - 1) / 2).min(w - 1),
            )],
            TaskBenchPattern::Nearest => vec![],
            TaskBenchPattern::Spread => (0..self.radix)
                .map(|i| {
                    let d = (point + i * w / self.radix + if i > 0 { dset } else { 0 }) % w;
                    (d, d)
                })
                .collect(),
            TaskBenchPattern::RandomNearest => {
                let first = (point - self.radix / 2).max(0);
                let last = (point + (self.radix - 1) / 2).min(w - 1);
                self.random_runs((first, last), point, |i| {
                    [self.graph_index, self.radix, dset, i, point]
                })
            }
        }
    }

    /// `TaskGraph::reverse_dependencies(dset, point)`: the points of the next timestep
    /// (of dependence set `dset`) that read `point`, before clipping.
    pub fn reverse_dependencies(&self, dset: i64, point: i64) -> Vec<Interval> {
        let w = self.width;
        match self.pattern {
            TaskBenchPattern::Dom => vec![(point, (point + 1).min(w - 1))],
            TaskBenchPattern::Tree => {
                let (c1, c2) = (point * 2, point * 2 + 1);
                if c2 < w {
                    vec![(c1, c2)]
                } else if c1 < w {
                    vec![(c1, c1)]
                } else {
                    vec![]
                }
            }
            TaskBenchPattern::Nearest if self.radix > 0 => vec![(
                (point - (self.radix - 1) / 2).max(0),
                (point + self.radix / 2).min(w - 1),
            )],
            TaskBenchPattern::Spread => (0..self.radix)
                .map(|i| {
                    let d = (point - i * w / self.radix - if i > 0 { dset } else { 0 }) % w;
                    let d = if d < 0 { d + w } else { d };
                    (d, d)
                })
                .collect(),
            TaskBenchPattern::RandomNearest => {
                let first = (point - (self.radix - 1) / 2).max(0);
                let last = (point + self.radix / 2).min(w - 1);
                self.random_runs((first, last), point, |i| {
                    [self.graph_index, self.radix, dset, point, i]
                })
            }
            // Symmetric patterns: the same intervals as `dependencies`.
            _ => self.dependencies(dset, point),
        }
    }

    fn periodic(&self, point: i64) -> Vec<Interval> {
        let w = self.width;
        let mut v = vec![((point - 1).max(0), (point + 1).min(w - 1))];
        if point - 1 < 0 {
            v.push((w - 1, w - 1));
        }
        if point + 1 >= w {
            v.push((0, 0));
        }
        v
    }

    fn fft(&self, dset: i64, point: i64) -> Vec<Interval> {
        let (d1, d2) = (point - (1i64 << dset), point + (1i64 << dset));
        let mut v = Vec::with_capacity(3);
        if d1 >= 0 {
            v.push((d1, d1));
        }
        v.push((point, point));
        if d2 < self.width {
            v.push((d2, d2));
        }
        v
    }

    /// random_nearest's runs over `first..=last`: point `i` is included when
    /// `random_uniform(seed(i)) < fraction_connected`, or it is `point` itself (radix > 0),
    /// as both of Task Bench's loops do.
    fn random_runs(
        &self,
        (first, last): Interval,
        point: i64,
        seed: impl Fn(i64) -> [i64; 5],
    ) -> Vec<Interval> {
        let mut runs = Vec::new();
        let mut start: Option<i64> = None;
        for i in first..=last {
            let include =
                random_uniform(&seed(i)) < self.fraction || (self.radix > 0 && i == point);
            match (include, start) {
                (true, None) => start = Some(i),
                (false, Some(a)) => {
                    runs.push((a, i - 1));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(a) = start {
            runs.push((a, last));
        }
        runs
    }

    /// Task Bench's `App::check`: per dependence set, no point depends on a point twice,
    /// and every reverse dependence mirrors a dependence.
    ///
    /// Errors: the first violation, e.g. `point 0 depends on point 1 twice (dependence
    /// set 0)`.
    pub fn check(&self) -> Result<(), String> {
        for dset in 0..self.max_dsets() {
            let mut deps = vec![Vec::new(); self.width as usize];
            for point in 0..self.width {
                let mut seen = std::collections::BTreeSet::new();
                for (a, b) in self.dependencies(dset, point) {
                    for d in a..=b {
                        if !seen.insert(d) {
                            return Err(format!(
                                "point {point} depends on point {d} twice (dependence set {dset})"
                            ));
                        }
                    }
                }
                deps[point as usize] = seen.into_iter().collect::<Vec<_>>();
            }
            for point in 0..self.width {
                for (a, b) in self.reverse_dependencies(dset, point) {
                    for r in a..=b {
                        let ok = (0..self.width).contains(&r)
                            && deps[r as usize].binary_search(&point).is_ok();
                        if !ok {
                            return Err(format!(
                                "point {point}'s reverse dependence {r} does not depend on it (dependence set {dset})"
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Task Bench's `random_uniform` over the seed words: SipHash-2-4 (key bytes 1, 2, …, 15,
/// 0) of their little-endian bytes, times 2⁻⁶⁴, in `[0, 1)`.
pub(super) fn random_uniform(words: &[i64]) -> f64 {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let key: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0];
    let k0 = u64::from_le_bytes(key[..8].try_into().expect("8 bytes"));
    let k1 = u64::from_le_bytes(key[8..].try_into().expect("8 bytes"));
    // std's `SipHasher` is SipHash-2-4, the reference implementation Task Bench vendors
    // (`core/siphash.c`); deprecated only in favour of hashers of other round counts.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
    std::hash::Hasher::write(&mut h, &bytes);
    std::hash::Hasher::finish(&h) as f64 * (-64f64).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SipHash-2-4's reference test vector (Aumasson & Bernstein, `vectors.h`): key bytes
    /// 0..15, the empty message → bytes 31 0e 0e dd 47 db 6f 72. Checks the hasher Task
    /// Bench's `random_uniform` needs, not its key.
    #[test]
    fn siphash_matches_the_reference_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        #[allow(deprecated)]
        let h = std::hash::SipHasher::new_with_keys(k0, k1);
        let want = u64::from_le_bytes([0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72]);
        assert_eq!(std::hash::Hasher::finish(&h), want);
    }

    #[test]
    fn random_uniform_is_in_the_unit_interval_and_deterministic() {
        let a = random_uniform(&[0, 3, 0, 1, 2]);
        assert_eq!(a, random_uniform(&[0, 3, 0, 1, 2]));
        assert!((0.0..1.0).contains(&a));
        assert_ne!(a, random_uniform(&[0, 3, 0, 2, 1]));
    }
}
