//! Data owners and explicit placement: who holds each buffer's bytes (StarPU-MPI's
//! `starpu_mpi_data_register(handle, tag, rank)`), and which constructs are placed on a
//! rank by hand.

use super::DistError;
use crate::model::{BufferId, Program, Section, Tiling};
use std::collections::BTreeMap;

/// Largest number of ranks a [`Distribution`] takes (validity sets are 64-bit masks).
pub const MAX_RANKS: u32 = 64;

/// The owner rank of every element of every buffer, and the constructs placed on a rank
/// explicitly.
///
/// Defaults: buffer `i` (program order) is owned wholly by rank `i mod ranks`. An owner is
/// set per buffer ([`Distribution::own_buffer`]) or per section ([`Distribution::own`]:
/// a tile, a row block), later calls overriding earlier ones on the elements they cover.
/// [`Distribution::block_cyclic`] gives the tiles of a tiled program
/// ([`crate::model::tiled`]) their 2-D block-cyclic owners, ScaLAPACK's and StarPU-MPI's
/// `mpi_cholesky` distribution.
///
/// Owner computes: a region runs on the rank owning the first section it writes (the
/// first `from`/`tofrom` map of a target region, the first `writes` section of a host
/// task), unless placed with [`Distribution::place`]; a construct that writes nothing runs
/// on the owner of the first section it reads, else on rank 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distribution {
    ranks: u32,
    /// Per buffer: owner of the elements from each key up to the next key.
    owners: BTreeMap<u32, BTreeMap<u64, u32>>,
    /// Construct name → rank.
    placed: BTreeMap<String, u32>,
    /// Each rank's body in program order instead of readiness order.
    program_order: bool,
}

impl Distribution {
    /// The default distribution over `ranks` ranks (see the type's docs).
    ///
    /// Errors: [`DistError::Ranks`] when `ranks` is 0 or above [`MAX_RANKS`].
    pub fn new(ranks: u32) -> Result<Distribution, DistError> {
        if ranks == 0 || ranks > MAX_RANKS {
            return Err(DistError::Ranks { ranks });
        }
        Ok(Distribution {
            ranks,
            owners: BTreeMap::new(),
            placed: BTreeMap::new(),
            program_order: false,
        })
    }

    /// Keeps each rank's body in program order (`true`) instead of the default
    /// readiness order (see [`super::split`]; for comparing the two).
    pub fn set_program_order(&mut self, on: bool) {
        self.program_order = on;
    }

    /// Whether each rank's body stays in program order ([`Self::set_program_order`]).
    pub fn program_order(&self) -> bool {
        self.program_order
    }

    /// Number of ranks.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// Rank `rank` owns every element of `section` (elements, as in OpenMP sections).
    ///
    /// Errors: [`DistError::Rank`] when `rank ≥ ranks`.
    pub fn own(&mut self, section: Section, rank: u32) -> Result<&mut Self, DistError> {
        self.check_rank(rank, &format!("section of buffer {}", section.buf.0))?;
        if section.len == 0 {
            return Ok(self);
        }
        let map = self.owners.entry(section.buf.0).or_default();
        let hi = section.lo + section.len;
        // The owner just past the section keeps its elements.
        let after = map
            .range(..=hi)
            .next_back()
            .map(|(_, r)| *r)
            .unwrap_or(u32::MAX);
        let keys: Vec<u64> = map.range(section.lo..=hi).map(|(k, _)| *k).collect();
        for k in keys {
            map.remove(&k);
        }
        map.insert(section.lo, rank);
        map.insert(hi, after);
        Ok(self)
    }

    /// Rank `rank` owns the whole buffer `buf` of `program`.
    ///
    /// Errors: [`DistError::Rank`]; [`DistError::Buffer`] for an id not of `program`.
    pub fn own_buffer(
        &mut self,
        program: &Program,
        buf: BufferId,
        rank: u32,
    ) -> Result<&mut Self, DistError> {
        let b = program
            .buffers
            .get(buf.index())
            .ok_or(DistError::Buffer { id: buf.0 })?;
        // Named here, where the program is at hand ([`Distribution::own`] has only the id).
        self.check_rank(rank, &format!("buffer `{}`", b.name))?;
        self.own(Section::new(buf, 0, b.len), rank)
    }

    /// The tiles of buffer `buf` laid out as `tiling` ([`Tiling::tile_section`]) owned
    /// 2-D block-cyclically over a `p × q` rank grid: tile `(i, j)` (row `i`, column
    /// `j`) on rank `(i mod p)·q + (j mod q)` (ScaLAPACK's layout; StarPU-MPI
    /// `mpi_cholesky`'s with `-dblocky p -dblockx q`). [`Distribution::grid`] gives
    /// the default `p × q` for a rank count.
    ///
    /// Errors: [`DistError::Grid`] when `p·q ≠ ranks`.
    pub fn block_cyclic(
        &mut self,
        tiling: &Tiling,
        buf: BufferId,
        p: u32,
        q: u32,
    ) -> Result<&mut Self, DistError> {
        if p == 0 || q == 0 || p * q != self.ranks {
            return Err(DistError::Grid {
                p,
                q,
                ranks: self.ranks,
            });
        }
        let nt = tiling.tiles();
        for j in 0..nt {
            for i in 0..nt {
                let r = (i % p as u64) as u32 * q + (j % q as u64) as u32;
                self.own(tiling.tile_section(buf, i, j), r)?;
            }
        }
        Ok(self)
    }

    /// The default `p × q` grid of [`Distribution::block_cyclic`] over `ranks` ranks:
    /// `p` the largest divisor of `ranks` not above `√ranks`, `q = ranks / p` (1 × 1,
    /// 1 × 2, 1 × 3, 2 × 2, 2 × 3, 2 × 4, 3 × 3, …; a prime count is `1 × ranks`).
    /// This is StarPU-MPI `mpi_cholesky`'s own default (1.3,
    /// `mpi/examples/matrix_decomposition/mpi_cholesky_params.c`: `dblocky` the largest
    /// factor not above `√nodes`, `dblockx = nodes / dblocky`, rank
    /// `(col mod dblockx) + (row mod dblocky)·dblockx`), so `p` rows by `q ≥ p` columns.
    /// Columns cyclic over the ranks balance a lower-triangular factorization: the
    /// tiled Cholesky's work (owner computes, `potrf` b³/3, `trsm` and `syrk` b³, `gemm`
    /// 2b³ per tile) on 1 × 2 is 50.0% / 50.0% at 8 × 8 and 10 × 10 tiles, on 2 × 1
    /// (rows cyclic) 40.6% / 59.4% and 42.5% / 57.5%, which caps 2 ranks at 84% and
    /// 87% of twice one rank.
    ///
    /// `ranks` = 0 gives `(0, 0)`, which [`Distribution::block_cyclic`] refuses.
    pub fn grid(ranks: u32) -> (u32, u32) {
        let mut p = (ranks as f64).sqrt() as u32;
        // `sqrt` of a perfect square may round below it.
        while (p + 1) * (p + 1) <= ranks {
            p += 1;
        }
        while p > 1 && !ranks.is_multiple_of(p) {
            p -= 1;
        }
        match ranks {
            0 => (0, 0),
            _ => (p, ranks / p),
        }
    }

    /// Places the construct named `name` (a target region or host task) on `rank`,
    /// whatever it writes.
    ///
    /// Errors: [`DistError::Rank`].
    pub fn place(&mut self, name: &str, rank: u32) -> Result<&mut Self, DistError> {
        self.check_rank(rank, &format!("construct \"{name}\""))?;
        self.placed.insert(name.to_string(), rank);
        Ok(self)
    }

    /// The rank a construct named `name` is placed on, if placed explicitly.
    pub fn placed(&self, name: &str) -> Option<u32> {
        self.placed.get(name).copied()
    }

    /// Names placed explicitly, in name order.
    pub fn placed_names(&self) -> impl Iterator<Item = &str> {
        self.placed.keys().map(String::as_str)
    }

    /// The owner of element `at` of buffer `buf`.
    pub fn owner_at(&self, buf: BufferId, at: u64) -> u32 {
        let default = buf.0 % self.ranks;
        match self.owners.get(&buf.0) {
            None => default,
            Some(map) => match map.range(..=at).next_back() {
                Some((_, r)) if *r != u32::MAX => *r,
                _ => default,
            },
        }
    }

    /// The owner of a section: the owner of its first element.
    pub fn owner(&self, s: &Section) -> u32 {
        self.owner_at(s.buf, s.lo)
    }

    fn check_rank(&self, rank: u32, what: &str) -> Result<(), DistError> {
        if rank >= self.ranks {
            return Err(DistError::Rank {
                rank,
                ranks: self.ranks,
                what: what.to_string(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DataStyle, ElemType, MatrixInit};

    #[test]
    fn default_owner_is_buffer_index_mod_ranks() {
        let d = Distribution::new(3).unwrap();
        assert_eq!(d.owner_at(BufferId(0), 5), 0);
        assert_eq!(d.owner_at(BufferId(4), 0), 1);
    }

    #[test]
    fn section_owner_overrides_only_its_elements() {
        let mut d = Distribution::new(4).unwrap();
        d.own(Section::new(BufferId(0), 0, 100), 2).unwrap();
        d.own(Section::new(BufferId(0), 10, 10), 3).unwrap();
        let at = |i| d.owner_at(BufferId(0), i);
        assert_eq!(
            [at(0), at(9), at(10), at(19), at(20), at(99), at(100)],
            [2, 2, 3, 3, 2, 2, 0]
        );
    }

    #[test]
    fn block_cyclic_tiles_follow_the_grid() {
        let t = Tiling {
            n: 8,
            tile: 2,
            ty: ElemType::F64,
            style: DataStyle::Mapped,
            init: MatrixInit::Given,
        };
        let mut d = Distribution::new(4).unwrap();
        d.block_cyclic(&t, BufferId(0), 2, 2).unwrap();
        let o = |i, j| d.owner(&t.tile_section(BufferId(0), i, j));
        assert_eq!(
            [o(0, 0), o(1, 0), o(0, 1), o(1, 1), o(2, 3), o(3, 2)],
            [0, 2, 1, 3, 1, 2]
        );
        assert!(matches!(
            d.block_cyclic(&t, BufferId(0), 3, 1),
            Err(DistError::Grid {
                p: 3,
                q: 1,
                ranks: 4
            })
        ));
    }

    #[test]
    fn the_default_grid_is_starpu_mpis_rows_by_at_least_as_many_columns() {
        let g: Vec<(u32, u32)> = (0..=9)
            .chain([12, 16, 64])
            .map(Distribution::grid)
            .collect();
        assert_eq!(
            g,
            [
                (0, 0),
                (1, 1),
                (1, 2),
                (1, 3),
                (2, 2),
                (1, 5),
                (2, 3),
                (1, 7),
                (2, 4),
                (3, 3),
                (3, 4),
                (4, 4),
                (8, 8)
            ]
        );
        for r in 1..=MAX_RANKS {
            let (p, q) = Distribution::grid(r);
            assert!(p * q == r && p <= q, "{r} ranks: {p} × {q}");
        }
    }

    #[test]
    fn bad_ranks_are_refused() {
        assert!(matches!(
            Distribution::new(0),
            Err(DistError::Ranks { ranks: 0 })
        ));
        let mut d = Distribution::new(2).unwrap();
        let e = d.place("potrf_0", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rank 2 for construct \"potrf_0\" is out of range: the run has 2 ranks (ranks 0 to 1)"
        );
    }

    #[test]
    fn own_buffer_names_the_buffer_of_a_rank_out_of_range() {
        let mut p = crate::model::ProgramBuilder::new("p");
        let x = p.buffer("x", ElemType::F32, 8, crate::model::Init::Zeros);
        let program = p.build();
        let mut d = Distribution::new(2).unwrap();
        let e = d.own_buffer(&program, x, 5).unwrap_err().to_string();
        assert_eq!(
            e,
            "rank 5 for buffer `x` is out of range: the run has 2 ranks (ranks 0 to 1)"
        );
    }
}
