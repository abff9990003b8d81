//! Library tile kernels: `gemm`, `syrk`, `trsm`, `potrf`, `getrf` (f32 and f64), the BLAS
//! level-3 and LAPACK routines tiled dense linear algebra is made of (StarPU's
//! `cholesky_implicit`, Chameleon, DPLASMA). They are built-in kernels
//! ([`super::KernelSource::Builtin`]) that a plugin runs with a vendor library: the host
//! plugin (and the reference interpreter) with the system BLAS/LAPACK (OpenBLAS),
//! the CUDA plugin with cuBLAS/cuSOLVER. A plugin lists the ones it runs in
//! [`crate::plugin::PluginInfo::library_kernels`]; the executor refuses a program that
//! calls one its plugin lacks, before anything runs, naming the region and the kernel.
//!
//! # Storage
//!
//! Every tile is **column-major** with a leading dimension, as in BLAS and LAPACK: element
//! `(i, j)` of an `rows × cols` matrix stored with leading dimension `ld` is element
//! `i + j·ld` of its buffer section (`ld ≥ max(1, rows)`). A section must hold at least
//! `ld·(cols − 1) + rows` elements (0 for an empty matrix); dimensions and leading
//! dimensions are at most `i32::MAX` (the CBLAS / cuBLAS `int`).
//!
//! # Signatures
//!
//! `T` is `f32` or `f64` (fixed by the tiles); `flag`s are `i32` codes (below);
//! dimensions and leading dimensions are `i64` element counts.
//!
//! | kernel | parameters | effect (BLAS / LAPACK routine) |
//! |---|---|---|
//! | `gemm` | `transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc` | `C ← α·op(A)·op(B) + β·C`, `C` m×n, `op(A)` m×k, `op(B)` k×n (`?gemm`) |
//! | `syrk` | `uplo, trans, n, k, alpha, a, lda, beta, c, ldc` | `C ← α·A·Aᵀ + β·C` (`trans = N`, `A` n×k) or `α·Aᵀ·A + β·C` (`T`, `A` k×n), only the `uplo` triangle of the n×n `C` (`?syrk`) |
//! | `trsm` | `side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb` | `B ← α·op(A)⁻¹·B` (`left`) or `α·B·op(A)⁻¹` (`right`), `B` m×n, `A` triangular m×m or n×n (`?trsm`) |
//! | `potrf` | `uplo, n, a, lda` | Cholesky factor of the symmetric positive definite n×n `A` in its `uplo` triangle: `A = L·Lᵀ` (`L`) or `Uᵀ·U` (`U`); the other triangle is not touched (`?potrf`) |
//! | `getrf` | `m, n, a, lda` | LU factorization **without pivoting** of the m×n `A`: `A = L·U`, `L` unit lower triangular (its strict lower part stored below the diagonal), `U` upper triangular (on and above it), as LAPACK `?getrf` stores them with `IPIV(i) = i` (LAPACK has no non-pivoting `?getrf`: the host runs a recursive LU of BLAS calls, CUDA `cusolverDn<t>getrf` with `devIpiv = NULL`) |
//!
//! `a` and `b` are `in` tiles; `c` (`gemm`, `syrk`), `b` (`trsm`) and `a` (`potrf`, `getrf`) are
//! `inout`. The written tile may not overlap another tile of the same call (BLAS leaves
//! aliasing undefined): the lowering refuses it.
//!
//! # Flags
//!
//! | flag | graph file | Rust | `i32` code (the LAPACK character) |
//! |---|---|---|---|
//! | transpose | `"N"`, `"T"` | [`Trans::N`], [`Trans::T`] | `'N'` 78, `'T'` 84 |
//! | triangle | `"L"`, `"U"` | [`Uplo::Lower`], [`Uplo::Upper`] | `'L'` 76, `'U'` 85 |
//! | side | `"left"`, `"right"` | [`Side::Left`], [`Side::Right`] | `'L'` 76, `'R'` 82 |
//! | diagonal | `"N"` (non-unit), `"U"` (unit) | [`Diag::NonUnit`], [`Diag::Unit`] | `'N'` 78, `'U'` 85 |
//!
//! A graph file writes flags as those strings (`args = ["L", 64, "A_0_0", 64]`); a program
//! built in Rust passes the typed values ([`super::RegionBuilder::flag`], or a whole
//! [`LibraryCall`] with [`super::ProgramBuilder::library`]).
//!
//! # Errors
//!
//! Shapes, leading dimensions, flags and element types are checked at lowering
//! ([`check_call`]), as a [`crate::lower::LowerError::BadArguments`] naming the region and
//! the graph file's line and column. A `potrf` whose matrix is not positive definite fails
//! when it runs, with LAPACK's `info` (`k > 0`: the leading minor of order `k` is not
//! positive definite; [`potrf_failure`] words it); a `getrf` whose pivot `U(k, k)` is
//! zero or not finite fails with `info = k` (1-based, LAPACK `?getrf`'s convention;
//! [`getrf_failure`]). The reference interpreter and host
//! tasks report it naming the region ([`crate::exec::ExecError::HostKernel`]); on a plugin
//! stream it is the launch's asynchronous failure (contract rule 5 of [`crate::plugin`]),
//! reported by the next host wait naming the kernel and the stream.

mod call;
mod check;
mod overlap;

pub use call::{CallArg, LibraryCall};
pub use check::{check_call, check_call_at, check_shapes, decode, ShapeError};
pub use overlap::{aliased_tile, tiles_overlap, TilePlace};

use super::kernels::KernelSig;
use super::types::ElemType;
use std::fmt;

/// `op(X)`: `X` or `Xᵀ` (BLAS `TRANS`). `C` (conjugate transpose) is `T` for real
/// tiles and not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trans {
    /// `op(X) = X` (`'N'`).
    N,
    /// `op(X) = Xᵀ` (`'T'`).
    T,
}

/// Which triangle of a symmetric or triangular tile is referenced (BLAS `UPLO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Uplo {
    /// The upper triangle (`'U'`).
    Upper,
    /// The lower triangle (`'L'`).
    Lower,
}

/// On which side of `B` the triangular matrix stands in `trsm` (BLAS `SIDE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `op(A)·X = α·B` (`'L'`).
    Left,
    /// `X·op(A) = α·B` (`'R'`).
    Right,
}

/// Whether a triangular tile has a unit diagonal (BLAS `DIAG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Diag {
    /// The diagonal is read (`'N'`).
    NonUnit,
    /// The diagonal is taken as ones and not read (`'U'`).
    Unit,
}

/// The kind of a flag parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlagKind {
    Trans,
    Uplo,
    Side,
    Diag,
}

/// One flag value of any kind (what [`super::RegionBuilder::flag`] takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flag {
    Trans(Trans),
    Uplo(Uplo),
    Side(Side),
    Diag(Diag),
}

impl From<Trans> for Flag {
    fn from(v: Trans) -> Flag {
        Flag::Trans(v)
    }
}
impl From<Uplo> for Flag {
    fn from(v: Uplo) -> Flag {
        Flag::Uplo(v)
    }
}
impl From<Side> for Flag {
    fn from(v: Side) -> Flag {
        Flag::Side(v)
    }
}
impl From<Diag> for Flag {
    fn from(v: Diag) -> Flag {
        Flag::Diag(v)
    }
}

impl Flag {
    /// The `i32` code a kernel argument carries: the LAPACK character (`'N'` = 78, ...).
    pub fn code(self) -> i32 {
        (match self {
            Flag::Trans(Trans::N) | Flag::Diag(Diag::NonUnit) => b'N',
            Flag::Trans(Trans::T) => b'T',
            Flag::Uplo(Uplo::Upper) | Flag::Diag(Diag::Unit) => b'U',
            Flag::Uplo(Uplo::Lower) | Flag::Side(Side::Left) => b'L',
            Flag::Side(Side::Right) => b'R',
        }) as i32
    }

    /// The flag's kind.
    pub fn kind(self) -> FlagKind {
        match self {
            Flag::Trans(_) => FlagKind::Trans,
            Flag::Uplo(_) => FlagKind::Uplo,
            Flag::Side(_) => FlagKind::Side,
            Flag::Diag(_) => FlagKind::Diag,
        }
    }

    /// The name a graph file writes: `N`, `T`, `L`, `U`, `left`, `right`.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Trans(Trans::N) | Flag::Diag(Diag::NonUnit) => "N",
            Flag::Trans(Trans::T) => "T",
            Flag::Uplo(Uplo::Upper) | Flag::Diag(Diag::Unit) => "U",
            Flag::Uplo(Uplo::Lower) => "L",
            Flag::Side(Side::Left) => "left",
            Flag::Side(Side::Right) => "right",
        }
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FlagKind {
    /// The values of this kind.
    pub fn values(self) -> &'static [Flag] {
        match self {
            FlagKind::Trans => &[Flag::Trans(Trans::N), Flag::Trans(Trans::T)],
            FlagKind::Uplo => &[Flag::Uplo(Uplo::Lower), Flag::Uplo(Uplo::Upper)],
            FlagKind::Side => &[Flag::Side(Side::Left), Flag::Side(Side::Right)],
            FlagKind::Diag => &[Flag::Diag(Diag::NonUnit), Flag::Diag(Diag::Unit)],
        }
    }

    /// The value a graph file's string names (exact spelling, see the module docs).
    pub fn parse(self, s: &str) -> Option<Flag> {
        self.values().iter().copied().find(|f| f.name() == s)
    }

    /// The value of an `i32` code ([`Flag::code`]); `None` for a code of no value of this
    /// kind (a number that is no integer included).
    pub fn of_code(self, code: f64) -> Option<Flag> {
        self.values()
            .iter()
            .copied()
            .find(|f| f64::from(f.code()) == code)
    }

    /// The choices as a message lists them: `"N" or "T"`.
    pub fn choices(self) -> String {
        let v = self.values();
        format!("\"{}\" or \"{}\"", v[0].name(), v[1].name())
    }

    /// What the flag says: `transpose`, `triangle`, `side`, `diagonal`.
    pub fn what(self) -> &'static str {
        match self {
            FlagKind::Trans => "transpose",
            FlagKind::Uplo => "triangle",
            FlagKind::Side => "side",
            FlagKind::Diag => "diagonal",
        }
    }
}

/// A library tile kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LibraryKernel {
    Gemm,
    Syrk,
    Trsm,
    Potrf,
    Getrf,
}

/// How a parameter of a library kernel is used: a flag of a kind, a dimension, a leading
/// dimension (of the tile at signature index `tile`), a coefficient, or a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Flag(FlagKind),
    Dim,
    Ld,
    Coef,
    Tile,
}

impl LibraryKernel {
    /// Every library kernel.
    pub const ALL: [LibraryKernel; 5] = [
        LibraryKernel::Gemm,
        LibraryKernel::Syrk,
        LibraryKernel::Trsm,
        LibraryKernel::Potrf,
        LibraryKernel::Getrf,
    ];

    /// The kernel's name in programs: `gemm`, `syrk`, `trsm`, `potrf`, `getrf`.
    pub fn name(self) -> &'static str {
        match self {
            LibraryKernel::Gemm => "gemm",
            LibraryKernel::Syrk => "syrk",
            LibraryKernel::Trsm => "trsm",
            LibraryKernel::Potrf => "potrf",
            LibraryKernel::Getrf => "getrf",
        }
    }

    /// The library kernel named `name`, if any.
    pub fn from_name(name: &str) -> Option<LibraryKernel> {
        LibraryKernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The library kernel `sig` runs: a built-in of a library kernel's name (a user
    /// kernel of that name shadows it and is not one).
    pub fn of(sig: &KernelSig) -> Option<LibraryKernel> {
        match sig.source {
            super::KernelSource::Builtin => LibraryKernel::from_name(&sig.name),
            _ => None,
        }
    }

    /// The names of every library kernel, for [`crate::plugin::PluginInfo::library_kernels`].
    pub fn all_names() -> std::collections::BTreeSet<String> {
        LibraryKernel::ALL
            .iter()
            .map(|k| k.name().to_string())
            .collect()
    }

    /// Parameter names and roles, in signature order.
    fn params(self) -> &'static [(&'static str, Role)] {
        use Role::*;
        match self {
            LibraryKernel::Gemm => &[
                ("transa", Flag(FlagKind::Trans)),
                ("transb", Flag(FlagKind::Trans)),
                ("m", Dim),
                ("n", Dim),
                ("k", Dim),
                ("alpha", Coef),
                ("a", Tile),
                ("lda", Ld),
                ("b", Tile),
                ("ldb", Ld),
                ("beta", Coef),
                ("c", Tile),
                ("ldc", Ld),
            ],
            LibraryKernel::Syrk => &[
                ("uplo", Flag(FlagKind::Uplo)),
                ("trans", Flag(FlagKind::Trans)),
                ("n", Dim),
                ("k", Dim),
                ("alpha", Coef),
                ("a", Tile),
                ("lda", Ld),
                ("beta", Coef),
                ("c", Tile),
                ("ldc", Ld),
            ],
            LibraryKernel::Trsm => &[
                ("side", Flag(FlagKind::Side)),
                ("uplo", Flag(FlagKind::Uplo)),
                ("transa", Flag(FlagKind::Trans)),
                ("diag", Flag(FlagKind::Diag)),
                ("m", Dim),
                ("n", Dim),
                ("alpha", Coef),
                ("a", Tile),
                ("lda", Ld),
                ("b", Tile),
                ("ldb", Ld),
            ],
            LibraryKernel::Potrf => &[
                ("uplo", Flag(FlagKind::Uplo)),
                ("n", Dim),
                ("a", Tile),
                ("lda", Ld),
            ],
            LibraryKernel::Getrf => &[("m", Dim), ("n", Dim), ("a", Tile), ("lda", Ld)],
        }
    }

    /// The index (among the tiles) of the tile the kernel writes.
    fn written_tile(self) -> usize {
        match self {
            LibraryKernel::Gemm => 2,
            LibraryKernel::Syrk | LibraryKernel::Trsm => 1,
            LibraryKernel::Potrf | LibraryKernel::Getrf => 0,
        }
    }

    /// The kernel's signature (see the module docs' table).
    pub fn sig(self) -> KernelSig {
        let written = self.written_tile();
        let mut tile = 0;
        let params: Vec<(&str, &str)> = self
            .params()
            .iter()
            .map(|&(n, role)| {
                let kind = match role {
                    Role::Flag(_) => "i32",
                    Role::Dim | Role::Ld => "i64",
                    Role::Coef => "T",
                    Role::Tile => {
                        tile += 1;
                        if tile - 1 == written {
                            "inout T*"
                        } else {
                            "in T*"
                        }
                    }
                };
                (n, kind)
            })
            .collect();
        KernelSig::builtin(self.name(), &params)
    }

    /// The flag kind of parameter `i` (signature index), if it is a flag: graph files
    /// write those as strings ([`FlagKind::parse`]).
    pub fn flag_param(self, i: usize) -> Option<FlagKind> {
        match self.params().get(i)?.1 {
            Role::Flag(k) => Some(k),
            _ => None,
        }
    }

    /// Floating-point operations of one call with these [`TileArgs`] (the LAPACK
    /// Working Note 41 counts: `gemm` `2mnk`, `syrk` `k·n·(n+1)`, `trsm` `m·n·m` (left) or
    /// `m·n·n` (right), `potrf` `n³/3 + n²/2 + n/6`, `getrf` `m·k² − k³/3 − k²/2 + 5k/6`
    /// with `k = min(m, n)` and `m` read as `max(m, n)`: `2n³/3 − n²/2 + 5n/6` when square).
    pub fn flops(self, t: &TileArgs) -> f64 {
        let (m, n, k) = (t.m as f64, t.n as f64, t.k as f64);
        match self {
            LibraryKernel::Gemm => 2.0 * m * n * k,
            LibraryKernel::Syrk => k * n * (n + 1.0),
            LibraryKernel::Trsm => match t.side {
                Side::Left => m * n * m,
                Side::Right => m * n * n,
            },
            LibraryKernel::Potrf => n * n * n / 3.0 + n * n / 2.0 + n / 6.0,
            LibraryKernel::Getrf => {
                let (big, k) = (m.max(n), m.min(n));
                big * k * k - k * k * k / 3.0 - k * k / 2.0 + 5.0 * k / 6.0
            }
        }
    }
}

impl fmt::Display for LibraryKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `names` comma-separated, or `none` (for messages about
/// [`crate::plugin::PluginInfo::library_kernels`]).
pub fn list_names(names: &std::collections::BTreeSet<String>) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// The scalar arguments of a library kernel call, decoded ([`decode`]); flags a call does
/// not have keep their defaults (`N`, `Lower`, `Left`, `NonUnit`), absent dimensions 0 and
/// coefficients 1. `m, n, k` follow BLAS (`syrk`: `n`, `k`; `trsm`: `m`, `n`; `potrf`:
/// `n`; `getrf`: `m`, `n`); `ld` holds the leading dimensions of the tiles in signature order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileArgs {
    pub kernel: LibraryKernel,
    pub trans_a: Trans,
    pub trans_b: Trans,
    pub uplo: Uplo,
    pub side: Side,
    pub diag: Diag,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub alpha: f64,
    pub beta: f64,
    /// Leading dimensions of the tiles (`a`, `b`, `c` in signature order; unused ones 0).
    pub ld: [i64; 3],
}

impl TileArgs {
    /// `(rows, cols)` of tile `t` (index among the call's tiles) as stored.
    pub fn tile_shape(&self, t: usize) -> (i64, i64) {
        let (m, n, k) = (self.m, self.n, self.k);
        let op = |tr: Trans, r: i64, c: i64| if tr == Trans::N { (r, c) } else { (c, r) };
        match (self.kernel, t) {
            (LibraryKernel::Gemm, 0) => op(self.trans_a, m, k),
            (LibraryKernel::Gemm, 1) => op(self.trans_b, k, n),
            (LibraryKernel::Gemm, _) => (m, n),
            (LibraryKernel::Syrk, 0) => op(self.trans_a, n, k),
            (LibraryKernel::Syrk, _) => (n, n),
            (LibraryKernel::Trsm, 0) => match self.side {
                Side::Left => (m, m),
                Side::Right => (n, n),
            },
            (LibraryKernel::Trsm, _) => (m, n),
            (LibraryKernel::Potrf, _) => (n, n),
            (LibraryKernel::Getrf, _) => (m, n),
        }
    }

    /// The elements a tile of `rows × cols` with leading dimension `ld` spans from its
    /// first: `ld·(cols − 1) + rows`, 0 when empty.
    pub fn footprint(rows: i64, cols: i64, ld: i64) -> u64 {
        if rows <= 0 || cols <= 0 {
            0
        } else {
            (ld as u64) * (cols as u64 - 1) + rows as u64
        }
    }

    /// How many tiles the call has.
    pub fn tiles(&self) -> usize {
        match self.kernel {
            LibraryKernel::Gemm => 3,
            LibraryKernel::Syrk | LibraryKernel::Trsm => 2,
            LibraryKernel::Potrf | LibraryKernel::Getrf => 1,
        }
    }

    /// The index (among the tiles) of the tile the call writes.
    pub fn written_tile(&self) -> usize {
        self.kernel.written_tile()
    }
}

impl TileArgs {
    /// ` (transa = T)` where tile `i`'s shape depends on a flag, else empty.
    fn describe_op(&self, i: usize) -> String {
        match (self.kernel, i) {
            (LibraryKernel::Gemm, 0) => format!(" (transa = {})", Flag::Trans(self.trans_a)),
            (LibraryKernel::Gemm, 1) => format!(" (transb = {})", Flag::Trans(self.trans_b)),
            (LibraryKernel::Syrk, 0) => format!(" (trans = {})", Flag::Trans(self.trans_a)),
            (LibraryKernel::Trsm, 0) => format!(" (side = {})", Flag::Side(self.side)),
            _ => String::new(),
        }
    }
}

/// The message of a `potrf` whose matrix is not positive definite: LAPACK `?potrf`
/// returned `info > 0`, the leading minor of order `info` is not positive definite and
/// the factorization could not be completed (LAPACK `?potrf` documentation). `prefix`
/// is `s` or `d`.
pub fn potrf_failure(ty: ElemType, info: i32) -> String {
    let p = if ty == ElemType::F32 { 's' } else { 'd' };
    format!(
        "{p}potrf: the matrix is not positive definite (LAPACK info = {info}: the leading minor of order {info} is not positive definite)"
    )
}

/// The message of a `potrf` that returned `info = 0` with a NaN at diagonal element
/// `index` (0-based) of the factor: OpenBLAS does not test for NaN, reference LAPACK
/// `?potrf` does (`AJJ.LE.ZERO .OR. DISNAN(AJJ)`) and returns `info = index + 1`; a NaN
/// anywhere in the referenced triangle reaches the diagonal.
pub fn potrf_nan_failure(ty: ElemType, index: u64) -> String {
    let p = if ty == ElemType::F32 { 's' } else { 'd' };
    format!(
        "{p}potrf: the matrix is not positive definite (NaN on the diagonal of the factor at index {index}; reference LAPACK returns info = {})",
        index + 1
    )
}

/// The message of a `getrf` (no pivoting) that met a zero pivot: `U(info, info)` is
/// exactly zero (1-based), LAPACK `?getrf`'s `info > 0` (there the factorization is
/// completed and `U` is singular; without pivoting the elimination cannot go on past it:
/// the matrix is singular or needs row interchanges). `ty` picks the `s`/`d` prefix.
pub fn getrf_failure(ty: ElemType, info: i32) -> String {
    let p = if ty == ElemType::F32 { 's' } else { 'd' };
    format!(
        "{p}getrf (no pivoting): zero pivot U({info},{info}) (LAPACK info = {info}): the matrix is singular or needs pivoting"
    )
}

/// The message of a `getrf` (no pivoting) whose pivot `U(info, info)` (1-based) is not
/// finite (NaN or infinite: a non-finite input element or an overflow reached it), named
/// with LAPACK's `info` convention; LAPACK itself does not test for it.
pub fn getrf_nonfinite_failure(ty: ElemType, info: i32) -> String {
    let p = if ty == ElemType::F32 { 's' } else { 'd' };
    format!(
        "{p}getrf (no pivoting): non-finite pivot U({info},{info}) (info = {info}, LAPACK's numbering): the matrix has a NaN or infinite element, or overflowed"
    )
}

#[cfg(test)]
mod tests;
