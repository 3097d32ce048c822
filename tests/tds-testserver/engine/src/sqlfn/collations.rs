//! The collations the rewritten SQL compares with: decimal text numerically (`DEC`), text
//! case-insensitively or -sensitively (`CI`, `CS`), and uniqueidentifiers in SQL Server's
//! byte order (`GUID`).

use crate::convert::{parse_decimal, rescale};
use rusqlite::Connection;
use std::cmp::Ordering;

/// Registers the collations on a connection.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_collation("DEC", dec_compare)?;
    conn.create_collation("CI", ci_compare)?;
    conn.create_collation("CS", cs_compare)?;
    conn.create_collation("GUID", guid_compare)?;
    Ok(())
}

pub fn dec_compare(a: &str, b: &str) -> Ordering {
    match (parse_decimal(a), parse_decimal(b)) {
        (Some((ma, sa)), Some((mb, sb))) => {
            let s = sa.max(sb);
            match (rescale(ma, sa, s), rescale(mb, sb, s)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            }
        }
        _ => a.cmp(b),
    }
}

/// SQL Server's `=` and ORDER BY for (n)(var)char under its default CI_AS collation: case
/// insensitive, and trailing spaces do not count ('a' = 'a  '). SQLite's NOCASE does neither
/// trailing spaces nor non-ASCII case, so this replaces it for string columns.
/// A case-sensitive collation (`_CS_`, `_BIN`, `_BIN2`): trailing blanks still do not count, as
/// SQL Server pads before comparing under every collation.
pub fn cs_compare(a: &str, b: &str) -> Ordering {
    a.trim_end_matches(' ').cmp(b.trim_end_matches(' '))
}

pub fn ci_compare(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.trim_end_matches(' '), b.trim_end_matches(' '));
    if a.is_ascii() && b.is_ascii() {
        let (x, y) = (a.as_bytes(), b.as_bytes());
        for (p, q) in x.iter().zip(y) {
            match p.to_ascii_lowercase().cmp(&q.to_ascii_lowercase()) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        return x.len().cmp(&y.len());
    }
    let fold = |s: &str| s.chars().flat_map(char::to_lowercase).collect::<Vec<char>>();
    fold(a).cmp(&fold(b))
}

/// SQL Server's uniqueidentifier order: byte groups compared from the last (bytes 10-15 of
/// the display form) to the first, the first three groups byte-reversed as they are stored
/// little-endian (SqlGuid's order 10..15, 8, 9, 6, 7, 4, 5, 0..3 on the stored bytes).
/// Keyset pagination over a GUID key depends on matching it exactly.
pub fn guid_compare(a: &str, b: &str) -> Ordering {
    const ORDER: [usize; 16] = [10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0];
    match (crate::convert::parse_guid(a), crate::convert::parse_guid(b)) {
        (Some(x), Some(y)) => ORDER
            .iter()
            .map(|&i| x[i].cmp(&y[i]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal),
        _ => ci_compare(a, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_compare_as_numbers() {
        assert_eq!(dec_compare("10.50", "9.99"), Ordering::Greater);
    }
}
