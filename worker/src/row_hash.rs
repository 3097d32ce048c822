//! The row hash both sides of `verify: checksum` compute: in the worker over binary COPY rows
//! (during the copy, or re-reading the source) and in PostgreSQL over its own rows in SQL. A leaf:
//! the readers that hash as they encode import it, and so does the verify step above them.

use crate::mapping::PgType;

/// The hash of one row, fixed and specified so that PostgreSQL computes the same one in SQL
/// ([`pg_row_hash`]) and a digest stored in a checkpoint survives a worker upgrade: the first 8
/// bytes (big-endian) of the SHA-256 of the row in PostgreSQL's `record_send` form (i32 column
/// count, then per column its type OID, i32 length or -1 for NULL, and the type's send bytes).
/// The send bytes are the binary COPY field bytes, so a COPY row is rehashed without decoding.
#[derive(Debug, Clone)]
pub struct RowHasher {
    oids: Vec<u32>,
    scratch: Vec<u8>,
}

impl RowHasher {
    /// For rows whose columns have these type OIDs (the types of the expressions PostgreSQL's
    /// side hashes: `record_send` writes them).
    pub fn new(oids: Vec<u32>) -> Self {
        RowHasher {
            oids,
            scratch: Vec::with_capacity(1024),
        }
    }

    /// For rows encoded as these types, hashed on PostgreSQL's side cast to their base types.
    pub fn for_types(types: impl Iterator<Item = PgType>) -> Self {
        RowHasher::new(types.map(pg_oid).collect())
    }

    /// The hash of one binary COPY row (i16 field count, then per field i32 length, -1 for NULL,
    /// and the bytes), as our encoder writes it and PostgreSQL's `COPY TO (FORMAT binary)` sends it.
    /// A malformed row hashes to something no well-formed row does in practice (never a panic).
    pub fn hash(&mut self, row: &[u8]) -> u64 {
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&(self.oids.len() as i32).to_be_bytes());
        let mut at = 2usize;
        for oid in &self.oids {
            s.extend_from_slice(&oid.to_be_bytes());
            let len = row
                .get(at..at + 4)
                .map_or(-1, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let end = (at + 4 + len.max(0) as usize).min(row.len());
            s.extend_from_slice(row.get(at..end).unwrap_or_default());
            at = end;
        }
        hash_bytes(s)
    }
}

fn hash_bytes(b: &[u8]) -> u64 {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(b);
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

/// The built-in OID of a mapped type's base type (fixed in PostgreSQL's catalog across versions).
pub fn pg_oid(t: PgType) -> u32 {
    match t {
        PgType::Bool => 16,
        PgType::Int2 => 21,
        PgType::Int4 => 23,
        PgType::Int8 => 20,
        PgType::Numeric { .. } => 1700,
        PgType::Float4 => 700,
        PgType::Float8 => 701,
        PgType::Date => 1082,
        PgType::Time { .. } => 1083,
        PgType::Timestamp { .. } => 1114,
        PgType::Timestamptz { .. } => 1184,
        PgType::Uuid => 2950,
        PgType::Varchar { .. } => 1043,
        PgType::Char { .. } => 1042,
        PgType::Text => 25,
        PgType::Bytea => 17,
        PgType::Xml => 142,
    }
}

/// The SQL expression of [`RowHasher::hash`] over a row of `exprs` (signed: summed as numeric
/// and taken modulo 2^64 on our side).
pub fn pg_row_hash(exprs: &[String]) -> String {
    format!(
        "('x' || encode(substr(sha256(record_send(ROW({}))), 1, 8), 'hex'))::bit(64)::bigint",
        exprs.join(", ")
    )
}
