//! The lowering's checks of a library kernel call: flags and dimensions decoded
//! ([`decode`]), leading dimensions and section lengths against the tiles' shapes
//! ([`check_shapes`]), no aliasing of the written tile ([`check_call`]). Each error is
//! the message after "kernel `name`"; the `_at` forms also say which argument it is
//! about ([`ShapeError`]).

use super::{aliased_tile, Diag, Flag, LibraryKernel, Role, Side, TileArgs, Trans, Uplo};
use crate::model::ElemType;
use crate::model::Arg;
use std::fmt;

/// A library call refused by [`check_call_at`]: `message` is the text after "kernel
/// `name`" (as [`check_call`] returns it), `arg` the argument it is about, by index in
/// signature order (the parameter it names: a flag, a dimension, a leading dimension, a
/// tile), `None` when it is about the call as a whole (a count, the element type).
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeError {
    pub arg: Option<usize>,
    pub message: String,
}

impl ShapeError {
    /// About parameter `name` of `kernel`.
    fn at(kernel: LibraryKernel, name: &str, message: String) -> ShapeError {
        let arg = kernel.params().iter().position(|(n, _)| *n == name);
        ShapeError { arg, message }
    }

    /// About the call as a whole.
    fn call(message: String) -> ShapeError {
        ShapeError { arg: None, message }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Decodes the scalar arguments `scalars` (the call's numbers in signature order, tiles
/// left out) of `kernel`: flags from their codes, dimensions as integers.
///
/// Errors: the message after "kernel `name`" naming the first bad parameter: a count
/// that does not match, a flag code of no value (`parameter `transa` takes "N" or "T"`),
/// a dimension or leading dimension that is negative, fractional or over `i32::MAX`.
pub fn decode(kernel: LibraryKernel, scalars: &[f64]) -> Result<TileArgs, String> {
    decode_at(kernel, scalars).map_err(|e| e.message)
}

/// [`decode`], the error with the argument it is about.
fn decode_at(kernel: LibraryKernel, scalars: &[f64]) -> Result<TileArgs, ShapeError> {
    let mut t = TileArgs {
        kernel,
        trans_a: Trans::N,
        trans_b: Trans::N,
        uplo: Uplo::Lower,
        side: Side::Left,
        diag: Diag::NonUnit,
        m: 0,
        n: 0,
        k: 0,
        alpha: 1.0,
        beta: 1.0,
        ld: [0; 3],
    };
    let roles: Vec<_> = kernel
        .params()
        .iter()
        .filter(|(_, r)| *r != Role::Tile)
        .collect();
    if roles.len() != scalars.len() {
        return Err(ShapeError::call(format!(
            "takes {} scalar arguments, got {}",
            roles.len(),
            scalars.len()
        )));
    }
    let (mut trans_seen, mut ld_seen, mut coef_seen) = (0, 0, 0);
    for (&&(name, role), &v) in roles.iter().zip(scalars) {
        match role {
            Role::Flag(kind) => {
                let f = kind.of_code(v).ok_or_else(|| {
                    ShapeError::at(
                        kernel,
                        name,
                        format!(
                            "parameter `{name}` ({}) takes {}, got the code {}",
                            kind.what(),
                            kind.choices(),
                            crate::model::Num(v)
                        ),
                    )
                })?;
                match f {
                    Flag::Trans(x) => {
                        if trans_seen == 0 {
                            t.trans_a = x;
                        } else {
                            t.trans_b = x;
                        }
                        trans_seen += 1;
                    }
                    Flag::Uplo(x) => t.uplo = x,
                    Flag::Side(x) => t.side = x,
                    Flag::Diag(x) => t.diag = x,
                }
            }
            Role::Dim | Role::Ld => {
                if !(v.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&v)) {
                    return Err(ShapeError::at(
                        kernel,
                        name,
                        format!(
                            "parameter `{name}` takes an integer from 0 to {} (BLAS `int`), got {}",
                            i32::MAX,
                            crate::model::Num(v)
                        ),
                    ));
                }
                let v = v as i64;
                match (role, name) {
                    (Role::Dim, "m") => t.m = v,
                    (Role::Dim, "n") => t.n = v,
                    (Role::Dim, _) => t.k = v,
                    _ => {
                        t.ld[ld_seen] = v;
                        ld_seen += 1;
                    }
                }
            }
            Role::Coef => {
                if coef_seen == 0 {
                    t.alpha = v;
                } else {
                    t.beta = v;
                }
                coef_seen += 1;
            }
            Role::Tile => unreachable!("tiles were filtered out"),
        }
    }
    Ok(t)
}

/// Checks a decoded call against its tiles' section lengths `lens` (elements, in
/// signature order) and element type `ty`: `T` is `f32` or `f64`; every leading
/// dimension is at least `max(1, rows)` of its tile (BLAS `LDA ≥ max(1, M)` rules); every
/// section holds the tile's footprint ([`TileArgs::footprint`]).
///
/// Errors: the message after "kernel `name`", e.g. ``tile `a` (transa = N) is 64×32 with
/// lda 64: it needs 2048 elements, the section has 1024``.
pub fn check_shapes(t: &TileArgs, ty: ElemType, lens: &[u64]) -> Result<(), String> {
    check_shapes_at(t, ty, lens).map_err(|e| e.message)
}

/// [`check_shapes`], the error with the argument it is about.
fn check_shapes_at(t: &TileArgs, ty: ElemType, lens: &[u64]) -> Result<(), ShapeError> {
    if !matches!(ty, ElemType::F32 | ElemType::F64) {
        return Err(ShapeError::call(format!(
            "takes f32 or f64 tiles, got {ty}"
        )));
    }
    if lens.len() != t.tiles() {
        return Err(ShapeError::call(format!(
            "takes {} tiles, got {}",
            t.tiles(),
            lens.len()
        )));
    }
    let names: Vec<(&str, &str)> = t
        .kernel
        .params()
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| *r == Role::Tile)
        .map(|(i, (n, _))| (*n, t.kernel.params()[i + 1].0))
        .collect();
    for (i, &len) in lens.iter().enumerate() {
        let (rows, cols) = t.tile_shape(i);
        let (name, ld_name) = names[i];
        let ld = t.ld[i];
        if ld < rows.max(1) {
            return Err(ShapeError::at(
                t.kernel,
                ld_name,
                format!(
                    "`{ld_name}` = {ld} is less than max(1, rows of `{name}`) = {} (BLAS: the leading dimension is at least the number of rows)",
                    rows.max(1)
                ),
            ));
        }
        let need = TileArgs::footprint(rows, cols, ld);
        if len < need {
            return Err(ShapeError::at(
                t.kernel,
                name,
                format!(
                    "tile `{name}`{} is {rows}×{cols} with {ld_name} {ld}: it needs {need} elements, the section has {len}",
                    t.describe_op(i)
                ),
            ));
        }
    }
    Ok(())
}

/// The lowering's check of a call of library kernel `kernel` with `args` (signature
/// order, already checked against the signature: a number per scalar parameter, a
/// section per tile) and element type `ty`: [`decode`], [`check_shapes`], and no written
/// tile sharing an element with another tile of the call ([`tiles_overlap`](super::tiles_overlap); BLAS leaves
/// aliasing undefined).
///
/// Errors: the message after "kernel `name`" (see [`decode`], [`check_shapes`]).
pub fn check_call(kernel: LibraryKernel, args: &[Arg], ty: ElemType) -> Result<TileArgs, String> {
    check_call_at(kernel, args, ty).map_err(|e| e.message)
}

/// [`check_call`], the error with the argument it is about ([`ShapeError::arg`]), so a
/// graph file's loader can point at it.
pub fn check_call_at(
    kernel: LibraryKernel,
    args: &[Arg],
    ty: ElemType,
) -> Result<TileArgs, ShapeError> {
    let (scalars, tiles) = Arg::split(args);
    let t = decode_at(kernel, &scalars)?;
    let lens: Vec<u64> = tiles.iter().map(|s| s.len).collect();
    check_shapes_at(&t, ty, &lens)?;
    let w = t.written_tile();
    let tile_names: Vec<&str> = kernel
        .params()
        .iter()
        .filter(|(_, r)| *r == Role::Tile)
        .map(|(n, _)| *n)
        .collect();
    let starts: Vec<(u64, u64)> = tiles.iter().map(|s| (s.buf.0 as u64, s.lo)).collect();
    if let Some(i) = aliased_tile(&t, &starts, 1) {
        return Err(ShapeError::at(
            kernel,
            tile_names[w],
            format!(
                "writes tile `{}`, which overlaps tile `{}` of the same call (BLAS leaves aliased arguments undefined)",
                tile_names[w], tile_names[i]
            ),
        ));
    }
    Ok(t)
}
