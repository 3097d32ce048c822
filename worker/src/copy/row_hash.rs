//! The row hash both sides of `verify: checksum` compute: in the worker over binary COPY rows
//! (during the copy, or re-reading the source) and in PostgreSQL over its own rows in SQL. A leaf:
//! the readers that hash as they encode import it, and so does the verify step above them.

use crate::schema::mssql_to_pg_types::PgType;

/// The hash of one row, fixed and specified so that PostgreSQL computes the same one in SQL
/// ([`pg_row_hash`]) and a digest stored in a checkpoint survives a worker upgrade: the first 8
/// bytes (big-endian) of the SHA-256 of the row in PostgreSQL's `record_send` form (i32 column
/// count, then per column its type OID, i32 length or -1 for NULL, and the type's send bytes).
/// The send bytes are the binary COPY field bytes, so a COPY row is rehashed without decoding.
#[derive(Debug, Clone)]
pub struct RowHasher {
    oids: Vec<u32>,
    /// Per column, for [`RowHasher::hash_fields`]: the scale a numeric value is hashed at.
    numeric_scales: Vec<Option<u16>>,
    scratch: Vec<u8>,
}

impl RowHasher {
    /// For rows whose columns have these type OIDs (the types of the expressions PostgreSQL's
    /// side hashes: `record_send` writes them).
    pub fn new(oids: Vec<u32>) -> Self {
        RowHasher {
            oids,
            numeric_scales: Vec::new(),
            scratch: Vec::with_capacity(1024),
        }
    }

    /// [`RowHasher::hash_fields`] hashes the numeric value of a column with `Some(s)` as
    /// PostgreSQL's cast to `numeric(p,s)` sends it. A value with at most `s` fractional digits
    /// keeps its digits, weight and sign through that cast; only its display scale (`dscale`,
    /// bytes 6..8 of numeric's binary form) becomes `s`. So a copy reading `x` (or `money::numeric`)
    /// hashes what the verify's `x::numeric(p,s)` gives without a cast in the copy's query.
    pub fn with_numeric_scales(mut self, scales: Vec<Option<u16>>) -> Self {
        self.numeric_scales = scales;
        self
    }

    /// For rows encoded as these types, hashed on PostgreSQL's side cast to their base types.
    pub fn for_types(types: impl Iterator<Item = PgType>) -> Self {
        RowHasher::new(types.map(pg_oid).collect())
    }

    /// The number of columns a row has.
    pub fn columns(&self) -> usize {
        self.oids.len()
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

    /// The hash of one row given as its fields (`None` for NULL), each a binary COPY field's
    /// bytes: what [`RowHasher::hash`] gives for the row these fields make, after the numeric
    /// scale fix-up of [`RowHasher::with_numeric_scales`]. Fields past the hasher's columns are
    /// ignored; missing ones hash as NULL.
    pub fn hash_fields(&mut self, fields: &[Option<&[u8]>]) -> u64 {
        let s = &mut self.scratch;
        s.clear();
        s.extend_from_slice(&(self.oids.len() as i32).to_be_bytes());
        for (i, oid) in self.oids.iter().enumerate() {
            s.extend_from_slice(&oid.to_be_bytes());
            match fields.get(i).copied().flatten() {
                None => s.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    s.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    let at = s.len();
                    s.extend_from_slice(b);
                    if let Some(Some(scale)) = self.numeric_scales.get(i)
                        && b.len() >= 8
                    {
                        s[at + 6..at + 8].copy_from_slice(&scale.to_be_bytes());
                    }
                }
            }
        }
        hash_bytes(s)
    }
}

/// One row's fields as a reader that hashes rows has them: already split (PostgreSQL's binary
/// COPY, as [`crate::pg::read::CopyParser`] splits it), or a whole binary COPY row (our encoder's).
#[derive(Debug, Clone, Copy)]
pub enum RowFields<'a> {
    Split(&'a [Option<&'a [u8]>]),
    Row(&'a [u8]),
}

impl<'a> RowFields<'a> {
    /// Field `i`'s bytes, `None` for NULL or a field the row does not have.
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        match *self {
            RowFields::Split(fields) => fields.get(i).copied().flatten(),
            RowFields::Row(row) => {
                let mut at = 2usize;
                for k in 0..=i {
                    let len = i32::from_be_bytes(row.get(at..at + 4)?.try_into().ok()?);
                    at += 4;
                    if k == i {
                        return if len < 0 {
                            None
                        } else {
                            row.get(at..at + len as usize)
                        };
                    }
                    at += len.max(0) as usize;
                }
                None
            }
        }
    }
}

/// Where a reader that hashes rows puts each one: a digest summing them, or a stream handing
/// them on ([`crate::copy::upsert_match`]).
pub trait RowSink: Send {
    /// One row: its hash and its fields.
    fn row(&mut self, hash: u64, fields: RowFields<'_>);

    /// Called between the reads of a stream: a sink handing rows on waits here for room, which
    /// holds the reader (and the database's stream behind it) back.
    fn pause(&mut self) -> impl Future<Output = ()> + Send {
        async {}
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

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_row(fields: &[Option<&[u8]>]) -> Vec<u8> {
        let mut row = (fields.len() as i16).to_be_bytes().to_vec();
        for f in fields {
            match f {
                Some(b) => {
                    row.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    row.extend_from_slice(b);
                }
                None => row.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        row
    }

    #[test]
    fn fields_hash_as_the_copy_row_they_make() {
        let oids = vec![23, 25, 17, 1700];
        let rows: [[Option<&[u8]>; 4]; 3] = [
            [
                Some(&[0, 0, 0, 7]),
                Some(b"seven"),
                None,
                Some(&[0, 1, 0, 0, 0, 0, 0, 2, 0, 7]),
            ],
            [None, None, None, None],
            [
                Some(&[0, 0, 0, 0]),
                Some(b""),
                Some(&[]),
                Some(&[0, 0, 0, 0, 0, 0, 0, 0]),
            ],
        ];
        let mut h = RowHasher::new(oids.clone());
        for fields in rows {
            assert_eq!(h.hash_fields(&fields), h.hash(&copy_row(&fields)), "{fields:?}");
        }
    }

    #[test]
    fn numeric_scale_fix_up_rewrites_only_the_display_scale() {
        // 7 at dscale 0, hashed as numeric(10,2) sends it: dscale 2, same digit.
        let read: &[u8] = &[0, 1, 0, 0, 0, 0, 0, 0, 0, 7];
        let cast: &[u8] = &[0, 1, 0, 0, 0, 0, 0, 2, 0, 7];
        let mut fixed = RowHasher::new(vec![23, 1700]).with_numeric_scales(vec![None, Some(2)]);
        let mut plain = RowHasher::new(vec![23, 1700]);
        let int: &[u8] = &[0, 0, 0, 1];
        assert_eq!(
            fixed.hash_fields(&[Some(int), Some(read)]),
            plain.hash_fields(&[Some(int), Some(cast)])
        );
        assert_ne!(
            plain.hash_fields(&[Some(int), Some(read)]),
            plain.hash_fields(&[Some(int), Some(cast)])
        );
        // NULL stays NULL.
        assert_eq!(
            fixed.hash_fields(&[Some(int), None]),
            plain.hash_fields(&[Some(int), None])
        );
    }
}
