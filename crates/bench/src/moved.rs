//! The bytes-moved columns every bench table shares ([`BytesMoved`], issue 28 point 3):
//! the same eight figures, in the same order and units, as the `run` summary and the
//! `schedule` header print.

use offload_sched::lower::BytesMoved;
use offload_sched::model::human_bytes;

/// The header cells (without the outer `|`).
pub(crate) const BYTES_COLUMNS: &str =
    "H2D | D2H | peer | elided H2D | D2H dropped | D2H deferred | evicted | prefetched";

/// The separator cells matching [`BYTES_COLUMNS`] (without the outer `|`).
pub(crate) const BYTES_RULE: &str = "---|---|---|---|---|---|---|---";

/// The cells of `m` (without the outer `|`), in [`human_bytes`] units.
pub(crate) fn bytes_cells(m: &BytesMoved) -> String {
    [
        m.h2d,
        m.d2h,
        m.peer,
        m.elided_h2d,
        m.d2h_dropped,
        m.d2h_deferred,
        m.evicted,
        m.prefetched,
    ]
    .map(human_bytes)
    .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cell_per_column() {
        let m = BytesMoved {
            h2d: 768 << 10,
            d2h: 256 << 10,
            elided_h2d: 11 << 20,
            ..BytesMoved::default()
        };
        assert_eq!(
            bytes_cells(&m),
            "768 KiB | 256 KiB | 0 B | 11 MiB | 0 B | 0 B | 0 B | 0 B"
        );
        assert_eq!(
            BYTES_COLUMNS.split(" | ").count(),
            BYTES_RULE.split('|').count()
        );
    }
}
