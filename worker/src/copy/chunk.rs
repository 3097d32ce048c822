//! Where a copy task's rows are cut into chunks: each chunk is committed with its checkpoint in
//! one target transaction, so a resumed copy writes at most one chunk again.

use serde::Serialize;

/// A chunk ends when its rows' encoded data (binary COPY towards PostgreSQL, TDS bulk rows
/// towards SQL Server) reaches `bytes` or it holds `rows` rows, whichever comes first; at least
/// one row either way. Bytes rather than rows by default: what a commit costs the target, what
/// a crash costs again and what a chunk weighs on the wire all follow the bytes, and the same row
/// count is 30 bytes a row on a narrow table and kilobytes on a wide one (bench/RESULTS.md,
/// issue 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkLimit {
    pub rows: u64,
    pub bytes: u64,
}

impl ChunkLimit {
    /// The default byte budget (`spec.chunkBytes` absent), with no row cap.
    pub const DEFAULT_BYTES: u64 = mssql_pg_crds::migration::DEFAULT_CHUNK_BYTES_VALUE;

    /// One chunk for the whole task: tables without a key to resume after.
    pub const UNBOUNDED: ChunkLimit = ChunkLimit {
        rows: u64::MAX,
        bytes: u64::MAX,
    };

    /// `rows` rows at most, the default byte budget still applying.
    pub fn rows(rows: u64) -> Self {
        ChunkLimit {
            rows: rows.max(1),
            ..Self::default()
        }
    }

    /// `bytes` of encoded rows at most, without a row cap.
    pub fn bytes(bytes: u64) -> Self {
        ChunkLimit {
            rows: u64::MAX,
            bytes: bytes.max(1),
        }
    }

    /// Whether a chunk of `rows` rows and `bytes` encoded bytes is complete.
    pub fn reached(&self, rows: u64, bytes: u64) -> bool {
        rows >= self.rows || bytes >= self.bytes
    }
}

impl Default for ChunkLimit {
    fn default() -> Self {
        ChunkLimit::bytes(Self::DEFAULT_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkLimit;

    #[test]
    fn whichever_comes_first() {
        let l = ChunkLimit { rows: 10, bytes: 100 };
        assert!(!l.reached(9, 99));
        assert!(l.reached(10, 1));
        assert!(l.reached(1, 100));
        assert!(!ChunkLimit::UNBOUNDED.reached(u64::MAX - 1, u64::MAX - 1));
        assert!(ChunkLimit::rows(0).reached(1, 0));
        assert_eq!(ChunkLimit::default().bytes, 64 << 20);
        assert_eq!(ChunkLimit::default().rows, u64::MAX);
    }
}
