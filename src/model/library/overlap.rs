//! Whether two column-major tiles of one call share an element (BLAS leaves a written
//! argument that aliases another undefined). Tile `(offset, rows, cols, ld)` holds the
//! elements `offset + r + c·ld` for `r < rows`, `c < cols` (module docs of
//! [`super`], BLAS storage), so two tiles whose address ranges overlap may still be
//! disjoint: LAPACK's blocked `?potrf` calls `?trsm` with `A(0:nb, 0:nb)` and
//! `A(nb:n, 0:nb)` of one array.

use super::TileArgs;

/// A column-major tile's place in its buffer, in elements: the first element's
/// `offset`, `rows × cols`, leading dimension `ld` (`ld ≥ rows` for the exact test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TilePlace {
    pub offset: u64,
    pub rows: u64,
    pub cols: u64,
    pub ld: u64,
}

impl TilePlace {
    /// The elements from the first to one past the last: `ld·(cols − 1) + rows`, 0 when
    /// empty ([`TileArgs::footprint`]).
    fn span(&self) -> u64 {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            self.ld
                .saturating_mul(self.cols - 1)
                .saturating_add(self.rows)
        }
    }

    /// `(row, col)` of the first element, when the tile's rows do not wrap into the next
    /// column (`row + rows ≤ ld`).
    fn start_cell(&self) -> Option<(u64, u64)> {
        if self.ld == 0 {
            return None;
        }
        let (row, col) = (self.offset % self.ld, self.offset / self.ld);
        (row + self.rows <= self.ld).then_some((row, col))
    }
}

/// True if tiles `a` and `b` of one buffer share an element. Exact when both have the
/// same leading dimension and neither wraps (its start row plus its rows fit in `ld`):
/// then they share an element iff their row intervals and their column intervals both
/// intersect. Otherwise conservative: true when their spans
/// `[offset, offset + ld·(cols − 1) + rows)` intersect. An empty tile overlaps nothing.
pub fn tiles_overlap(a: TilePlace, b: TilePlace) -> bool {
    let (sa, sb) = (a.span(), b.span());
    if sa == 0 || sb == 0 {
        return false;
    }
    let ranges_meet =
        a.offset < b.offset.saturating_add(sb) && b.offset < a.offset.saturating_add(sa);
    if !ranges_meet {
        return false;
    }
    if a.ld != b.ld {
        return true;
    }
    match (a.start_cell(), b.start_cell()) {
        (Some((ra, ca)), Some((rb, cb))) => {
            let meet = |x: u64, lx: u64, y: u64, ly: u64| x < y + ly && y < x + lx;
            meet(ra, a.rows, rb, b.rows) && meet(ca, a.cols, cb, b.cols)
        }
        _ => true,
    }
}

/// The index of the first tile of call `t` that shares an element with the written
/// tile ([`TileArgs::written_tile`]), none if there is none. `starts[i]` is tile `i`'s
/// first element as `(space, address)`: tiles of different spaces (buffers) never
/// overlap; `size` is an element's width in the addresses' unit (the element size in
/// bytes for pointers, 1 for element offsets). Two addresses whose distance is not a
/// multiple of `size` are compared by their spans' address ranges.
pub fn aliased_tile(t: &TileArgs, starts: &[(u64, u64)], size: u64) -> Option<usize> {
    let w = t.written_tile();
    let place = |i: usize, offset: u64| {
        let (rows, cols) = t.tile_shape(i);
        TilePlace {
            offset,
            rows: rows.max(0) as u64,
            cols: cols.max(0) as u64,
            ld: t.ld[i].max(0) as u64,
        }
    };
    let (ws, wa) = starts[w];
    (0..starts.len()).find(|&i| {
        let (s, a) = starts[i];
        if i == w || s != ws {
            return false;
        }
        let base = a.min(wa);
        let (da, dw) = (a - base, wa - base);
        if size > 0 && da % size == 0 && dw % size == 0 {
            tiles_overlap(place(i, da / size), place(w, dw / size))
        } else {
            // Misaligned: byte ranges of the spans.
            let bytes = |p: TilePlace, at: u64| {
                (at, at.saturating_add(p.span().saturating_mul(size.max(1))))
            };
            let (x, y) = (bytes(place(i, 0), da), bytes(place(w, 0), dw));
            x.0 < x.1 && y.0 < y.1 && x.0 < y.1 && y.0 < x.1
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(offset: u64, rows: u64, cols: u64, ld: u64) -> TilePlace {
        TilePlace {
            offset,
            rows,
            cols,
            ld,
        }
    }

    #[test]
    fn disjoint_row_blocks_of_one_matrix_do_not_overlap() {
        // 8×8, ld 8: A(0:4, 0:4) at 0 and A(4:8, 0:4) at 4 (ranges [0,28) and [4,32)).
        assert!(!tiles_overlap(p(0, 4, 4, 8), p(4, 4, 4, 8)));
        assert!(!tiles_overlap(p(4, 4, 4, 8), p(0, 4, 4, 8)));
        // A(4:8, 0:4) and A(0:4, 4:8) (offset 32): columns differ.
        assert!(!tiles_overlap(p(4, 4, 4, 8), p(32, 4, 4, 8)));
        // Tiles that only touch at a corner's neighbour: A(0:3, 0:3) and A(3:6, 3:6).
        assert!(!tiles_overlap(p(0, 3, 3, 8), p(27, 3, 3, 8)));
    }

    #[test]
    fn sharing_an_element_overlaps() {
        // A(2:6, 0:4) and A(4:8, 2:6) share A(4:6, 2:4).
        assert!(tiles_overlap(p(2, 4, 4, 8), p(20, 4, 4, 8)));
        // The same tile.
        assert!(tiles_overlap(p(4, 4, 4, 8), p(4, 4, 4, 8)));
        // A contiguous vector over a tile's column.
        assert!(tiles_overlap(p(9, 1, 1, 8), p(8, 4, 4, 8)));
    }

    #[test]
    fn different_ld_or_wrapping_tiles_are_conservative() {
        // Different leading dimensions, ranges [0,28) and [4,...): counted as overlapping.
        assert!(tiles_overlap(p(0, 4, 4, 8), p(4, 4, 4, 9)));
        // Start row 6 + 4 rows > ld 8: wraps, range check.
        assert!(tiles_overlap(p(0, 4, 4, 8), p(6, 4, 1, 8)));
        // Disjoint ranges never overlap, whatever the lds.
        assert!(!tiles_overlap(p(0, 4, 4, 8), p(28, 4, 4, 9)));
        // Empty tiles overlap nothing.
        assert!(!tiles_overlap(p(0, 0, 4, 8), p(0, 4, 4, 8)));
    }
}
