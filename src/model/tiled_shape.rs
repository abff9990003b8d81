//! The shape of a tiled program ([`Tiling`]) and why one is refused ([`TilingError`]):
//! the checks every builder of [`super::tiled`] and [`super::tiled_lu`] makes before it
//! builds anything.

use super::limits::MAX_BUFFER_BYTES;
use super::tiled::{DataStyle, MatrixInit};
use super::types::{BufferId, ElemType, Section};

/// The shape of a tiled program: an `n × n` matrix of `tile × tile` tiles of `ty`
/// (f32 or f64), moved in `style`, starting as `init`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiling {
    pub n: u64,
    pub tile: u64,
    pub ty: ElemType,
    pub style: DataStyle,
    pub init: MatrixInit,
}

/// Why a [`Tiling`] is refused ([`Tiling::new`], [`Tiling::validate`], the `try_`
/// builders). `Display` names the value and the rule; `n` and `tile` are in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TilingError {
    /// `n` or `tile` is 0.
    #[error("tiling n {n} tile {tile}: n and tile must both be positive")]
    Zero { n: u64, tile: u64 },
    /// The element type has no BLAS/LAPACK tile kernels (the `s` and `d` routines).
    #[error("tiling element type {ty}: tiled programs take f32 or f64 (the BLAS/LAPACK s and d kernels), not {ty}")]
    ElemType { ty: ElemType },
    /// `tile` does not divide `n`: the tile layout has `n / tile` whole tiles per
    /// dimension.
    #[error(
        "tiling n {n} tile {tile}: n must be a multiple of tile (whole tiles only: {n} = {} × {tile} + {})",
        n / tile,
        n % tile
    )]
    NotMultiple { n: u64, tile: u64 },
    /// `tile` is over `i32::MAX`: a tile kernel's order and leading dimension are BLAS
    /// `int`s.
    #[error("tiling tile {tile}: over the BLAS int range (a tile's order and leading dimension are C int, at most 2147483647)")]
    TileOverBlasInt { tile: u64 },
    /// The `n × n` matrix is over one buffer's limit
    /// ([`crate::model::limits::MAX_BUFFER_BYTES`], 64 GiB); `bytes` is `None` when
    /// `n² × element size` overflows `u64`.
    #[error(
        "tiling n {n}: the n × n matrix of {ty} is {}, over the 64 GiB limit for one buffer",
        match bytes { Some(b) => format!("{n}² × {} bytes = {b} bytes", ty.size_bytes()), None => format!("{n}² × {} bytes, more than 2^64 bytes", ty.size_bytes()) }
    )]
    MatrixTooLarge {
        n: u64,
        ty: ElemType,
        bytes: Option<u64>,
    },
}

impl Tiling {
    /// Tiles per dimension, `n / tile`.
    pub fn tiles(&self) -> u64 {
        self.n / self.tile
    }

    /// Tile `(i, j)` of buffer `buf` in tile layout (see [`super::tiled`]'s module docs).
    pub fn tile_section(&self, buf: BufferId, i: u64, j: u64) -> Section {
        let t2 = self.tile * self.tile;
        Section::new(buf, (i + j * self.tiles()) * t2, t2)
    }

    /// A checked tiling: `Ok` exactly when [`Tiling::validate`] accepts it, so an embedder
    /// passing its own `n` and `tile` gets an [`Err`] naming the value and the rule instead
    /// of a panic in the builders (which also have `try_` forms: [`try_tiled_cholesky`](super::tiled::try_tiled_cholesky),
    /// [`try_tiled_gemm`](super::tiled::try_tiled_gemm), [`super::tiled_lu::try_tiled_lu`]).
    ///
    /// `n` and `tile` are in elements (matrix order and tile order).
    ///
    /// Errors: [`TilingError`], the first rule broken in the order of its variants.
    pub fn new(
        n: u64,
        tile: u64,
        ty: ElemType,
        style: DataStyle,
        init: MatrixInit,
    ) -> Result<Tiling, TilingError> {
        let t = Tiling {
            n,
            tile,
            ty,
            style,
            init,
        };
        t.validate().map(|()| t)
    }

    /// Whether the tiled builders take this tiling (the fields are public, so a `Tiling`
    /// written as a struct literal is checked here): `n` and `tile` positive, `ty` f32 or
    /// f64, `tile` divides `n`, `tile` fits the BLAS `int`, the `n × n` matrix fits one
    /// buffer ([`crate::model::limits::MAX_BUFFER_BYTES`]). The builders without `try_`
    /// panic with this message.
    ///
    /// Errors: the first rule broken, e.g. `tiling n 4096 tile 500: n must be a multiple
    /// of tile …` ([`TilingError`]).
    pub fn validate(&self) -> Result<(), TilingError> {
        let (n, tile, ty) = (self.n, self.tile, self.ty);
        if tile == 0 || n == 0 {
            return Err(TilingError::Zero { n, tile });
        }
        if !matches!(ty, ElemType::F32 | ElemType::F64) {
            return Err(TilingError::ElemType { ty });
        }
        if !n.is_multiple_of(tile) {
            return Err(TilingError::NotMultiple { n, tile });
        }
        if tile > i32::MAX as u64 {
            return Err(TilingError::TileOverBlasInt { tile });
        }
        let bytes = n
            .checked_mul(n)
            .and_then(|e| e.checked_mul(ty.size_bytes()));
        if bytes.is_none_or(|b| b > MAX_BUFFER_BYTES) {
            return Err(TilingError::MatrixTooLarge { n, ty, bytes });
        }
        Ok(())
    }

    pub(super) fn suffix(&self) -> String {
        format!(
            "{}_n{}_t{}_{}",
            if self.ty == ElemType::F32 { "s" } else { "d" },
            self.n,
            self.tile,
            self.style.name()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tiled::*;

    #[test]
    fn every_refused_tiling_names_its_value_and_rule() {
        let t = |n, tile, ty| Tiling::new(n, tile, ty, DataStyle::Entered, MatrixInit::Given);
        let msg = |n, tile, ty| t(n, tile, ty).unwrap_err().to_string();
        assert_eq!(t(4096, 512, ElemType::F32).unwrap().tiles(), 8);
        assert_eq!(
            msg(4096, 500, ElemType::F32),
            "tiling n 4096 tile 500: n must be a multiple of tile (whole tiles only: \
             4096 = 8 × 500 + 96)"
        );
        assert_eq!(
            msg(4, 8, ElemType::F32),
            "tiling n 4 tile 8: n must be a multiple of tile (whole tiles only: 4 = 0 × 8 + 4)"
        );
        assert_eq!(
            msg(0, 4, ElemType::F64),
            "tiling n 0 tile 4: n and tile must both be positive"
        );
        assert_eq!(
            msg(8, 0, ElemType::F64),
            "tiling n 8 tile 0: n and tile must both be positive"
        );
        assert_eq!(
            msg(8, 4, ElemType::I32),
            "tiling element type i32: tiled programs take f32 or f64 (the BLAS/LAPACK s and \
             d kernels), not i32"
        );
        let big = 1u64 << 31;
        assert_eq!(
            t(big, big, ElemType::F32).unwrap_err(),
            TilingError::TileOverBlasInt { tile: big }
        );
        assert_eq!(
            msg(big, big, ElemType::F32),
            "tiling tile 2147483648: over the BLAS int range (a tile's order and leading \
             dimension are C int, at most 2147483647)"
        );
        // 92 682² × 8 bytes is just over 64 GiB; 92 681² × 8 just under.
        assert!(t(92_681, 1, ElemType::F64).is_ok());
        assert_eq!(
            msg(92_682, 2, ElemType::F64),
            "tiling n 92682: the n × n matrix of f64 is 92682² × 8 bytes = 68719624992 bytes, \
             over the 64 GiB limit for one buffer"
        );
        assert_eq!(
            msg(1 << 32, 1 << 16, ElemType::F32),
            "tiling n 4294967296: the n × n matrix of f32 is 4294967296² × 4 bytes, more than \
             2^64 bytes, over the 64 GiB limit for one buffer"
        );
        // A struct literal is checked by validate, with the same error.
        let literal = Tiling {
            n: 10,
            tile: 3,
            ty: ElemType::F64,
            style: DataStyle::Mapped,
            init: MatrixInit::Random(1),
        };
        assert_eq!(
            literal.validate(),
            Err(TilingError::NotMultiple { n: 10, tile: 3 })
        );
    }

    #[test]
    fn the_try_builders_refuse_what_the_panicking_ones_panic_on() {
        let bad = Tiling {
            n: 10,
            tile: 3,
            ty: ElemType::F64,
            style: DataStyle::Mapped,
            init: MatrixInit::Random(1),
        };
        let error = TilingError::NotMultiple { n: 10, tile: 3 };
        let want = Err(error);
        assert_eq!(try_tiled_cholesky(&bad).map(|p| p.name), want);
        assert_eq!(try_tiled_cholesky_lookahead(&bad, 1).map(|p| p.name), want);
        assert_eq!(
            try_tiled_cholesky_priority(&bad, 1, 1).map(|p| p.name),
            want
        );
        assert_eq!(try_tiled_gemm(&bad).map(|p| p.name), want);
        let panic = std::panic::catch_unwind(|| tiled_gemm(&bad)).unwrap_err();
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some(error.to_string().as_str())
        );
        let good = Tiling { n: 9, ..bad };
        assert_eq!(
            try_tiled_cholesky(&good).map(|p| p.name),
            Ok("cholesky_d_n9_t3_mapped".to_string())
        );
    }
}
