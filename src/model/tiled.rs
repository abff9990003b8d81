//! Tiled dense linear algebra as programs of library tile kernels ([`super::library`]):
//! right-looking tiled Cholesky (StarPU's `cholesky_implicit`, PLASMA/Chameleon's
//! `pdpotrf`) and tiled GEMM, built by [`tiled_cholesky`] and [`tiled_gemm`], and tiled
//! LU without pivoting ([`super::tiled_lu`](mod@super::tiled_lu)); the scaled residuals that check their
//! results are [`super::residual`].
//!
//! # Tile layout
//!
//! An `n × n` matrix of `nt = n / tile` tiles per dimension is one buffer of `n²`
//! elements in **tile layout** (PLASMA / Chameleon's): tile `(i, j)` (block row `i`,
//! block column `j`) is the contiguous section `[(i + j·nt)·tile², +tile²)`, column-major
//! inside with leading dimension `tile`. Each tile is its own section, so dependences and
//! mappings are per tile (a column-major matrix with leading dimension `n` would make every
//! tile a strided range overlapping its neighbours). [`to_tile_layout`] and
//! [`from_tile_layout`] convert from and to a column-major matrix.
//!
//! # Data styles
//!
//! - [`DataStyle::Entered`]: `target enter data map(to: A)` once, every region's tiles
//!   `map(present, to: …)` / `map(present, tofrom: …)` (no copies), `target exit data
//!   map(from: A)` after the `taskwait`: the matrix stays on the device throughout.
//! - [`DataStyle::Mapped`]: each region maps its own tiles, `map(to:)` for the tiles it
//!   reads and `map(tofrom:)` for the one it writes, as an OpenMP user writes one task per
//!   tile; the lowering's data-movement rules decide which copies happen.
//!
//! Every kernel region is `nowait` with `depend(in: …)` on the tiles it reads and
//! `depend(inout: …)` on the one it writes, then one `taskwait`.
//!
//! # The matrix
//!
//! [`MatrixInit::Random`]: the buffers start uniform in `[0, 1)` (`Init::Random`); for
//! Cholesky the program then adds `n` to the diagonal of every diagonal tile (one `gemm`
//! region `shift_k` per diagonal tile, on the diagonal seen as a `1 × tile` matrix with
//! leading dimension `tile + 1`, times a vector of ones), so the symmetric matrix its
//! lower triangle defines is strictly diagonally dominant with a positive diagonal, hence
//! positive definite (and for LU the whole matrix is strictly diagonally dominant by rows
//! and columns, so its LU factorization without pivoting exists and is stable: Golub &
//! Van Loan, *Matrix Computations*, §3.4.10). [`MatrixInit::Given`]: zeros, for an application that binds its own
//! matrix (no shift regions). Only the lower triangle (tiles `i ≥ j`, and the lower
//! triangle of diagonal tiles) is read by the Cholesky factorization and written with
//! `L`; the rest is left as it was.

use super::builder::ProgramBuilder;
use super::library::{Diag, LibraryCall, Side, Trans, Uplo};
use super::program::{DependType, MapItem, MapType, Program};
pub use super::tiled_shape::{Tiling, TilingError};
use super::types::{Init, Section};
use super::Sel;

/// How a tiled program moves its matrix (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataStyle {
    /// `enter data` once, regions `present`, `exit data` at the end.
    Entered,
    /// Per-region `map(to:)` / `map(tofrom:)` of the region's tiles.
    Mapped,
}

impl DataStyle {
    /// `entered` or `mapped` (program names, the bench's option).
    pub fn name(self) -> &'static str {
        match self {
            DataStyle::Entered => "entered",
            DataStyle::Mapped => "mapped",
        }
    }
}

/// The initial matrix of a tiled program (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixInit {
    /// Random tiles from this seed (Cholesky: made positive definite by the program).
    Random(u64),
    /// Zeros: the application binds its own data.
    Given,
}

/// Adds one kernel region with its tile maps (per the data style) and dependences:
/// `reads` are `in`, `writes` is `inout`.
pub(super) struct Emitter<'a> {
    p: &'a mut ProgramBuilder,
    style: DataStyle,
    /// Look-ahead depth of [`Emitter::task`] (0: the written order).
    lookahead: u64,
    /// Factorization tasks not emitted yet, with their order key `(step, phase)`.
    pending: Vec<Queued>,
    /// `priority(n)` of the panel tasks ([`tiled_cholesky_priority`]; 0: none).
    panel_priority: u32,
}

/// A queued factorization task: order key, region name, call, tiles read, tile written,
/// `priority(n)`.
type Queued = ((u64, u8), String, LibraryCall, Vec<Section>, Section, u32);

/// A task's place in a factorization's program order with look-ahead depth `d`
/// ([`tiled_cholesky_lookahead`]): the panel tasks of step `k` at `(k, 0)`; the update of
/// tile `(i, j)` at step `k` right after them, `(k, 2)`, when `d = 0` or it feeds one of
/// the next `d` panels (`min(i, j) ≤ k + d`), else deferred to just after the panel of
/// step `k + 1`, `(k + 1, 1)`.
fn order_key(lookahead: u64, k: u64, update: Option<(u64, u64)>) -> (u64, u8) {
    match update {
        None => (k, 0),
        Some((i, j)) if lookahead == 0 || i.min(j) <= k + lookahead => (k, 2),
        Some(_) => (k + 1, 1),
    }
}

impl Emitter<'_> {
    /// Queues a region of factorization step `k`: a panel task (`update` `None`) or the
    /// update of tile `update = (i, j)`; [`factorization`] emits the queue in look-ahead
    /// order ([`order_key`]; stable, so ties keep the order queued).
    pub(super) fn task(
        &mut self,
        (k, update): (u64, Option<(u64, u64)>),
        name: &str,
        call: LibraryCall,
        reads: &[Section],
        writes: Section,
    ) {
        let key = order_key(self.lookahead, k, update);
        // The panel: step k's panel tasks and, with look-ahead, the updates of the
        // tiles the next panel factors (row or column k + 1).
        let panel = match update {
            None => true,
            Some((i, j)) => self.lookahead > 0 && i.min(j) == k + 1,
        };
        let priority = if panel { self.panel_priority } else { 0 };
        self.pending.push((
            key,
            name.to_string(),
            call,
            reads.to_vec(),
            writes,
            priority,
        ));
    }

    fn flush(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_by_key(|t| t.0);
        for (_, name, call, reads, writes, priority) in pending {
            self.region_with(&name, call, &reads, writes, priority);
        }
    }

    pub(super) fn region(
        &mut self,
        name: &str,
        call: LibraryCall,
        reads: &[Section],
        writes: Section,
    ) {
        self.region_with(name, call, reads, writes, 0);
    }

    /// [`Emitter::region`] with OpenMP `priority(n)` (`n = 0`: no clause).
    fn region_with(
        &mut self,
        name: &str,
        call: LibraryCall,
        reads: &[Section],
        writes: Section,
        priority: u32,
    ) {
        let style = self.style;
        let mut r = self.p.library(name, call).nowait().priority(priority);
        for &s in reads {
            r = r.depend(DependType::In, s);
        }
        r = r.depend(DependType::InOut, writes);
        let item = |t: MapType, s: Section| match style {
            DataStyle::Entered => MapItem::new(t, s).present(),
            DataStyle::Mapped => MapItem::new(t, s),
        };
        for &s in reads {
            r = r.map_item(item(MapType::To, s));
        }
        drop(r.map_item(item(MapType::ToFrom, writes)));
    }
}

/// Right-looking tiled Cholesky `A = L·Lᵀ` (lower), as StarPU's `cholesky_implicit`
/// (`examples/cholesky/cholesky_implicit.c`) and PLASMA's `pdpotrf` order the tasks:
///
/// ```text
/// for k in 0..nt:
///   potrf_k:      potrf(L, A[k][k])                                   A_kk = L_kk·L_kkᵀ
///   for i in k+1..nt:
///     trsm_i_k:   trsm(right, L, T, N, 1, A[k][k], A[i][k])           A_ik ← A_ik·L_kk⁻ᵀ
///   for i in k+1..nt:
///     syrk_i_k:   syrk(L, N, -1, A[i][k], 1, A[i][i])                 A_ii −= A_ik·A_ikᵀ
///     for j in k+1..i:
///       gemm_i_j_k: gemm(N, T, -1, A[i][k], A[j][k], 1, A[i][j])      A_ij −= A_ik·A_jkᵀ
/// taskwait
/// ```
///
/// One buffer `A` (`n²` elements of `t.ty`, tile layout); with [`MatrixInit::Random`]
/// also `ones` (`tile` elements, 1) and the `shift_k` regions before the factorization
/// (module docs). Regions: `nt` potrf, `nt(nt−1)/2` trsm and syrk, `nt(nt−1)(nt−2)/6`
/// gemm. Program name `cholesky_{s|d}_n{n}_t{tile}_{style}`. Flops: [`cholesky_flops`].
///
/// Panics if [`Tiling::validate`] refuses `t` (`tile` 0 or not dividing `n`, `ty` not
/// f32/f64, `tile` over `i32::MAX`, the matrix over 64 GiB), with its message;
/// [`try_tiled_cholesky`] returns it instead.
pub fn tiled_cholesky(t: &Tiling) -> Program {
    or_panic(try_tiled_cholesky(t))
}

/// [`tiled_cholesky`], or the [`TilingError`] that [`Tiling::validate`] gives for `t`
/// (nothing is built).
pub fn try_tiled_cholesky(t: &Tiling) -> Result<Program, TilingError> {
    try_tiled_cholesky_lookahead(t, 0)
}

/// The builders' documented panic: the [`TilingError`]'s message.
fn or_panic(p: Result<Program, TilingError>) -> Program {
    p.unwrap_or_else(|e| panic!("{e}"))
}

/// [`tiled_cholesky`] with the regions written in **look-ahead order** of depth
/// `lookahead` (0: the order above): the updates of step `k` that feed the next
/// `lookahead` panels (tiles `(i, j)` with `j ≤ k + lookahead`) right after panel `k`,
/// the other updates of step `k` after the panel (potrf and trsm) of step `k + 1`, as
/// right-looking factorizations with look-ahead order their work (PLASMA, MAGMA). Every
/// tile is read and written in the same order, so the dependences (and the task DAG)
/// are the same; only the program order changes, which is the order the schedule places
/// regions on streams and issues them in (`schedule::assign`): panel `k + 1` is issued
/// ahead of step `k`'s remaining updates instead of behind them. Program name
/// `cholesky_..._la{lookahead}` when `lookahead > 0`.
///
/// Panics as [`tiled_cholesky`]; [`try_tiled_cholesky_lookahead`] returns the error.
pub fn tiled_cholesky_lookahead(t: &Tiling, lookahead: u64) -> Program {
    or_panic(try_tiled_cholesky_lookahead(t, lookahead))
}

/// [`tiled_cholesky_lookahead`], or the [`TilingError`] for `t` (nothing is built).
pub fn try_tiled_cholesky_lookahead(t: &Tiling, lookahead: u64) -> Result<Program, TilingError> {
    try_tiled_cholesky_priority(t, lookahead, 0)
}

/// [`tiled_cholesky_lookahead`] with OpenMP `priority(panel_priority)` (OpenMP 5.2
/// §12.4, a hint) on the *panel*: every `potrf_k` and `trsm_i_k` and, with
/// `lookahead > 0`, the updates of step `k` that feed panel `k + 1` (the `syrk` and
/// `gemm` of tiles in row or column `k + 1`). With `panel_priority > 0` the schedule
/// puts those regions on each device's high-priority stream (`schedule/priority.rs`;
/// CUDA: the greatest stream priority, as MAGMA, SLATE and PaRSEC run the panel), so a
/// GPU full of updates does not starve the critical path. `panel_priority = 0` is
/// [`tiled_cholesky_lookahead`] itself. The task DAG and the results are the same;
/// program name `..._prio{panel_priority}` added when it is not 0.
///
/// Panics as [`tiled_cholesky`]; [`try_tiled_cholesky_priority`] returns the error.
pub fn tiled_cholesky_priority(t: &Tiling, lookahead: u64, panel_priority: u32) -> Program {
    or_panic(try_tiled_cholesky_priority(t, lookahead, panel_priority))
}

/// [`tiled_cholesky_priority`], or the [`TilingError`] for `t` (nothing is built).
pub fn try_tiled_cholesky_priority(
    t: &Tiling,
    lookahead: u64,
    panel_priority: u32,
) -> Result<Program, TilingError> {
    factorization(t, ("cholesky", lookahead, panel_priority), |e, tile| {
        let (nt, b) = (t.tiles(), t.tile);
        for k in 0..nt {
            let potrf = LibraryCall::Potrf {
                uplo: Uplo::Lower,
                n: b,
                a: Sel::Part(tile(k, k)),
                lda: b,
            };
            e.task((k, None), &format!("potrf_{k}"), potrf, &[], tile(k, k));
            for i in k + 1..nt {
                let trsm = LibraryCall::Trsm {
                    side: Side::Right,
                    uplo: Uplo::Lower,
                    transa: Trans::T,
                    diag: Diag::NonUnit,
                    m: b,
                    n: b,
                    alpha: 1.0,
                    a: Sel::Part(tile(k, k)),
                    lda: b,
                    b: Sel::Part(tile(i, k)),
                    ldb: b,
                };
                let name = format!("trsm_{i}_{k}");
                e.task((k, None), &name, trsm, &[tile(k, k)], tile(i, k));
            }
            for i in k + 1..nt {
                let syrk = LibraryCall::Syrk {
                    uplo: Uplo::Lower,
                    trans: Trans::N,
                    n: b,
                    k: b,
                    alpha: -1.0,
                    a: Sel::Part(tile(i, k)),
                    lda: b,
                    beta: 1.0,
                    c: Sel::Part(tile(i, i)),
                    ldc: b,
                };
                let name = format!("syrk_{i}_{k}");
                e.task((k, Some((i, i))), &name, syrk, &[tile(i, k)], tile(i, i));
                for j in k + 1..i {
                    let gemm =
                        square_gemm(b, Trans::N, Trans::T, -1.0, tile(i, k), tile(j, k), 1.0);
                    e.task(
                        (k, Some((i, j))),
                        &format!("gemm_{i}_{j}_{k}"),
                        gemm(tile(i, j)),
                        &[tile(i, k), tile(j, k)],
                        tile(i, j),
                    );
                }
            }
        }
    })
}

/// A factorization program named `{name}_{suffix}` (`_la{lookahead}` added when
/// `lookahead > 0`, `_prio{n}` when `panel_priority > 0`: [`Emitter::task`] gives the
/// panel tasks `priority(panel_priority)`) on one matrix `A` (module docs): the buffers, the `enter data`
/// (entered style), the `shift_k` regions (random matrices), then the tasks `body` queues
/// (given the emitter and the tile sections `tile(i, j)`) in look-ahead order
/// ([`Emitter::task`]), `taskwait`, the `exit data`; the [`TilingError`] of `t` before
/// anything is built.
pub(super) fn factorization(
    t: &Tiling,
    (name, lookahead, panel_priority): (&str, u64, u32),
    body: impl FnOnce(&mut Emitter<'_>, &dyn Fn(u64, u64) -> Section),
) -> Result<Program, TilingError> {
    t.validate()?;
    let (nt, b) = (t.tiles(), t.tile);
    let la = match lookahead {
        0 => String::new(),
        d => format!("_la{d}"),
    };
    let prio = match panel_priority {
        0 => String::new(),
        n => format!("_prio{n}"),
    };
    let mut p = ProgramBuilder::new(&format!("{name}_{}{la}{prio}", t.suffix()));
    let a = p.buffer("A", t.ty, t.n * t.n, init_of(t.init, 0));
    let ones =
        matches!(t.init, MatrixInit::Random(_)).then(|| p.buffer("ones", t.ty, b, Init::Fill(1.0)));
    let mut enter = vec![MapItem::new(MapType::To, Section::new(a, 0, t.n * t.n))];
    if let Some(o) = ones {
        enter.push(MapItem::new(MapType::To, Section::new(o, 0, b)));
    }
    if t.style == DataStyle::Entered {
        drop(p.enter_data("enter_A", enter.clone()));
    }
    let tile = |i, j| t.tile_section(a, i, j);
    let mut e = Emitter {
        p: &mut p,
        style: t.style,
        lookahead,
        pending: Vec::new(),
        panel_priority,
    };
    if let Some(o) = ones {
        let (one, all) = (Section::new(o, 0, 1), Section::new(o, 0, b));
        for k in 0..nt {
            // The diagonal of tile (k, k): a 1×b matrix with leading dimension b + 1.
            let call = LibraryCall::Gemm {
                transa: Trans::N,
                transb: Trans::N,
                m: 1,
                n: b,
                k: 1,
                alpha: t.n as f64,
                a: Sel::Part(one),
                lda: 1,
                b: Sel::Part(all),
                ldb: 1,
                beta: 1.0,
                c: Sel::Part(tile(k, k)),
                ldc: b + 1,
            };
            e.region(&format!("shift_{k}"), call, &[all], tile(k, k));
        }
    }
    body(&mut e, &tile);
    e.flush();
    p.taskwait();
    if t.style == DataStyle::Entered {
        let mut exit = vec![MapItem::new(MapType::From, Section::new(a, 0, t.n * t.n))];
        if let Some(o) = ones {
            exit.push(MapItem::new(MapType::Release, Section::new(o, 0, b)));
        }
        drop(p.exit_data("exit_A", exit));
    }
    Ok(p.build())
}

/// Tiled `C ← A·B + C` (`C` starts as zeros with [`MatrixInit::Random`], so `C = A·B`):
/// for every tile `(i, j)` of `C`, `nt` regions `gemm_i_j_k` (`k` in order, a chain on
/// `C_ij`): `gemm(N, N, 1, A[i][k], B[k][j], 1, C[i][j])`, then `taskwait`; the `nt²`
/// chains are independent. Buffers `A`, `B`, `C` (`n²` each, tile layout; `A` random
/// from the seed, `B` from seed + 1). Program name `gemm_{s|d}_n{n}_t{tile}_{style}`.
/// Flops: `2n³`.
///
/// Panics as [`tiled_cholesky`]; [`try_tiled_gemm`] returns the error.
pub fn tiled_gemm(t: &Tiling) -> Program {
    or_panic(try_tiled_gemm(t))
}

/// [`tiled_gemm`], or the [`TilingError`] for `t` (nothing is built).
pub fn try_tiled_gemm(t: &Tiling) -> Result<Program, TilingError> {
    t.validate()?;
    let nt = t.tiles();
    let mut p = ProgramBuilder::new(&format!("gemm_{}", t.suffix()));
    let nn = t.n * t.n;
    let a = p.buffer("A", t.ty, nn, init_of(t.init, 0));
    let b = p.buffer("B", t.ty, nn, init_of(t.init, 1));
    let c = p.buffer("C", t.ty, nn, Init::Zeros);
    if t.style == DataStyle::Entered {
        let whole = |m, buf| MapItem::new(m, Section::new(buf, 0, nn));
        drop(p.enter_data(
            "enter",
            vec![
                whole(MapType::To, a),
                whole(MapType::To, b),
                whole(MapType::To, c),
            ],
        ));
    }
    let mut e = Emitter {
        p: &mut p,
        style: t.style,
        lookahead: 0,
        pending: Vec::new(),
        panel_priority: 0,
    };
    for i in 0..nt {
        for j in 0..nt {
            let cij = t.tile_section(c, i, j);
            for k in 0..nt {
                let (aik, bkj) = (t.tile_section(a, i, k), t.tile_section(b, k, j));
                let call = square_gemm(t.tile, Trans::N, Trans::N, 1.0, aik, bkj, 1.0)(cij);
                e.region(&format!("gemm_{i}_{j}_{k}"), call, &[aik, bkj], cij);
            }
        }
    }
    p.taskwait();
    if t.style == DataStyle::Entered {
        let sec = |buf| Section::new(buf, 0, nn);
        drop(p.exit_data(
            "exit",
            vec![
                MapItem::new(MapType::Release, sec(a)),
                MapItem::new(MapType::Release, sec(b)),
                MapItem::new(MapType::From, sec(c)),
            ],
        ));
    }
    Ok(p.build())
}

/// `C ← α·op(A)·op(B) + β·C` on `b × b` tiles (every leading dimension `b`).
pub(super) fn square_gemm(
    b: u64,
    transa: Trans,
    transb: Trans,
    alpha: f64,
    a: Section,
    bt: Section,
    beta: f64,
) -> impl Fn(Section) -> LibraryCall {
    move |c| LibraryCall::Gemm {
        transa,
        transb,
        m: b,
        n: b,
        k: b,
        alpha,
        a: Sel::Part(a),
        lda: b,
        b: Sel::Part(bt),
        ldb: b,
        beta,
        c: Sel::Part(c),
        ldc: b,
    }
}

fn init_of(init: MatrixInit, offset: u64) -> Init {
    match init {
        MatrixInit::Random(seed) => Init::Random(seed.wrapping_add(offset)),
        MatrixInit::Given => Init::Zeros,
    }
}

/// The flops credited to a Cholesky factorization of order `n`: `n³/3` (the count
/// StarPU's `cholesky_implicit` and LAPACK's benchmarks report GFLOP/s by).
pub fn cholesky_flops(n: u64) -> f64 {
    let n = n as f64;
    n * n * n / 3.0
}

/// The flops of an `n × n` GEMM: `2n³`.
pub fn gemm_flops(n: u64) -> f64 {
    2.0 * (n as f64).powi(3)
}

/// A column-major `n × n` matrix (`a[i + j·n]`) in tile layout of `tile × tile` tiles
/// (module docs). Panics if `a.len() != n²` or `tile` does not divide `n`.
pub fn to_tile_layout<T: Copy>(a: &[T], n: usize, tile: usize) -> Vec<T> {
    assert!(a.len() == n * n && tile > 0 && n.is_multiple_of(tile));
    let nt = n / tile;
    let mut out = Vec::with_capacity(n * n);
    for tj in 0..nt {
        for ti in 0..nt {
            for c in 0..tile {
                let col = tj * tile + c;
                let start = col * n + ti * tile;
                out.extend_from_slice(&a[start..start + tile]);
            }
        }
    }
    out
}

/// The column-major `n × n` matrix of a tile-layout one (inverse of [`to_tile_layout`]).
/// Panics as [`to_tile_layout`].
pub fn from_tile_layout<T: Copy + Default>(t: &[T], n: usize, tile: usize) -> Vec<T> {
    assert!(t.len() == n * n && tile > 0 && n.is_multiple_of(tile));
    let nt = n / tile;
    let mut out = vec![T::default(); n * n];
    let mut src = t.chunks_exact(tile);
    for tj in 0..nt {
        for ti in 0..nt {
            for c in 0..tile {
                let col = tj * tile + c;
                let start = col * n + ti * tile;
                out[start..start + tile].copy_from_slice(src.next().expect("n² elements"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BufferId, ElemType};

    #[test]
    fn tile_layout_keeps_each_tile_contiguous_and_round_trips() {
        // 4×4 column-major, a(i, j) = 10·i + j, tiles of 2: tile (1, 0) holds rows 2-3 of
        // columns 0-1, column by column.
        let a: Vec<u32> = (0..16).map(|k| 10 * (k % 4) + k / 4).collect();
        let t = to_tile_layout(&a, 4, 2);
        assert_eq!(&t[0..4], &[0, 10, 1, 11]);
        assert_eq!(&t[4..8], &[20, 30, 21, 31]);
        assert_eq!(&t[8..12], &[2, 12, 3, 13]);
        assert_eq!(from_tile_layout(&t, 4, 2), a);
        let tiling = Tiling {
            n: 4,
            tile: 2,
            ty: ElemType::F64,
            style: DataStyle::Mapped,
            init: MatrixInit::Given,
        };
        assert_eq!(
            tiling.tile_section(BufferId(0), 1, 0),
            Section::new(BufferId(0), 4, 4)
        );
        assert_eq!(
            tiling.tile_section(BufferId(0), 0, 1),
            Section::new(BufferId(0), 8, 4)
        );
    }

    #[test]
    fn flop_counts() {
        assert_eq!(cholesky_flops(3), 9.0);
        assert_eq!(gemm_flops(2), 16.0);
    }
}
