//! Verification computed the same way on both sides: every row is put through the same binary
//! COPY encoding (the source through our encoder, the target as PostgreSQL's own binary COPY TO),
//! each row's bytes are hashed, and the hashes are summed, so order does not matter and a lost,
//! duplicated or altered row changes the result.

use crate::copy_binary::RowEncoder;
use crate::mapping::quote_pg;
use crate::mssql::connect::TdsClient;
use crate::mssql::read::{ReadError, count_rows};
use crate::pg::ddl::qualified;
use crate::plan::{TablePlan, TaskPlan};
use bytes::{Buf, BytesMut};
use futures_util::TryStreamExt;
use serde::Serialize;
use std::hash::{DefaultHasher, Hasher};
use tokio_postgres::Client;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("reading {table} from PostgreSQL: {source}")]
    Target {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("reading {table} from SQL Server: {source}")]
    Source {
        table: String,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("table {table}: a source row could not be encoded: {message}")]
    Encode { table: String, message: String },
    #[error("PostgreSQL's binary COPY output for {0} is malformed")]
    Malformed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Digest {
    pub rows: i64,
    /// Sum of the per-row hashes, wrapping.
    pub sum: u64,
    /// Every row's hash, kept only to verify an upsert (16 bytes a row on both sides together),
    /// where the target may hold rows the source does not.
    #[serde(skip)]
    pub hashes: Option<Vec<u64>>,
}

impl Digest {
    /// A digest that also keeps each row's hash (for [`Digest::upsert_match`]).
    pub fn keeping_rows(keep: bool) -> Self {
        Digest {
            hashes: keep.then(Vec::new),
            ..Digest::default()
        }
    }

    pub fn add(&mut self, row: &[u8]) {
        let mut h = DefaultHasher::new();
        h.write(row);
        let hash = h.finish();
        self.rows += 1;
        self.sum = self.sum.wrapping_add(hash);
        if let Some(hashes) = &mut self.hashes {
            hashes.push(hash);
        }
    }

    /// Same rows, same values (order aside).
    pub fn same_rows(&self, other: &Digest) -> bool {
        self.rows == other.rows && self.sum == other.sum
    }

    /// For an upsert: how many source rows are in the target with equal values, and how many
    /// target rows match no source row. Both digests must keep their rows.
    pub fn upsert_match(&self, target: &Digest) -> Option<(i64, i64)> {
        let (mut s, mut t) = (self.hashes.clone()?, target.hashes.clone()?);
        s.sort_unstable();
        t.sort_unstable();
        let (mut i, mut j, mut matched) = (0, 0, 0i64);
        while i < s.len() && j < t.len() {
            match s[i].cmp(&t[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    matched += 1;
                    i += 1;
                    j += 1;
                }
            }
        }
        Some((matched, target.rows - matched))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TableVerification {
    pub table: String,
    pub source_rows: i64,
    pub target_rows: i64,
    /// Only for checksum verification.
    pub source_checksum: Option<String>,
    pub target_checksum: Option<String>,
    /// `upsert` only: target rows that match no source row (kept by the upsert: not a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_only_rows: Option<i64>,
    pub ok: bool,
}

impl TableVerification {
    /// Compares two digests: equal for a full load; for an upsert, every source row present
    /// and equal in the target (with `count`, at least as many target rows as source rows).
    pub fn compare(table: String, source: &Digest, target: &Digest, checksum: bool, upsert: bool) -> Self {
        let (ok, target_only) = if !upsert {
            (source.same_rows(target), None)
        } else if let Some((matched, extra)) = source.upsert_match(target) {
            (matched == source.rows, Some(extra))
        } else {
            (
                target.rows >= source.rows,
                Some((target.rows - source.rows).max(0)),
            )
        };
        TableVerification {
            table,
            source_rows: source.rows,
            target_rows: target.rows,
            source_checksum: checksum.then(|| format!("{:016x}", source.sum)),
            target_checksum: checksum.then(|| format!("{:016x}", target.sum)),
            target_only_rows: target_only,
            ok,
        }
    }
}

/// Row counts on both sides.
pub async fn count(
    mssql: &mut TdsClient,
    pg: &Client,
    t: &TablePlan,
    upsert: bool,
) -> Result<TableVerification, VerifyError> {
    let whole = TaskPlan {
        name: String::new(),
        table: 0,
        lower: None,
        upper: None,
        estimated_rows: 0,
    };
    let source_rows = count_rows(mssql, t, &whole).await?;
    let row = pg
        .query_one(&format!("SELECT count(*) FROM {}", qualified(t)), &[])
        .await
        .map_err(|source| VerifyError::Target {
            table: qualified(t),
            source,
        })?;
    let target_rows: i64 = row.get(0);
    let rows = |rows| Digest {
        rows,
        ..Digest::default()
    };
    Ok(TableVerification::compare(
        t.source.qualified(),
        &rows(source_rows),
        &rows(target_rows),
        false,
        upsert,
    ))
}

/// Counts and checksums on both sides, each from the values as that database returns them.
pub async fn checksum(
    mssql: &mut TdsClient,
    pg: &Client,
    t: &TablePlan,
    upsert: bool,
) -> Result<TableVerification, VerifyError> {
    let source = source_digest(mssql, t, upsert).await?;
    let target = target_digest(pg, t, upsert).await?;
    Ok(TableVerification::compare(
        t.source.qualified(),
        &source,
        &target,
        true,
        upsert,
    ))
}

async fn source_digest(mssql: &mut TdsClient, t: &TablePlan, keep: bool) -> Result<Digest, VerifyError> {
    let table = t.source.qualified();
    // Generated columns too: SQL Server's computed values against PostgreSQL's, which checks the
    // translated expression on every row.
    let cols = t
        .all_columns()
        .map(crate::mapping::select_expr)
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT {cols} FROM {}.{}",
        crate::mapping::quote_mssql(&t.source.schema),
        crate::mapping::quote_mssql(&t.source.name)
    );
    let encoder = RowEncoder::new(t.all_columns().map(|c| c.pg_type).collect());
    let err = |source| VerifyError::Source {
        table: table.clone(),
        source,
    };
    let mut rows = mssql.simple_query(sql).await.map_err(err)?.into_row_stream();
    let mut digest = Digest::keeping_rows(keep);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Some(row) = rows.try_next().await.map_err(err)? {
        buf.clear();
        encoder
            .encode_row(&mut buf, row.cells().map(|(_, c)| c))
            .map_err(|e| VerifyError::Encode {
                table: table.clone(),
                message: e.to_string(),
            })?;
        digest.add(&buf);
    }
    Ok(digest)
}

/// Length of the complete row at the start of `b`, `Some(0)` for the trailer, `None` if more bytes
/// are needed.
fn row_len(b: &[u8]) -> Option<usize> {
    if b.len() < 2 {
        return None;
    }
    let fields = i16::from_be_bytes([b[0], b[1]]);
    if fields == -1 {
        return Some(0);
    }
    let mut at = 2usize;
    for _ in 0..fields.max(0) {
        let len_bytes = b.get(at..at + 4)?;
        let len = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        at += 4;
        if len > 0 {
            at += len as usize;
        }
    }
    (b.len() >= at).then_some(at)
}

/// PostgreSQL's own binary COPY of the target table, every column cast to the planned type (without
/// its length or precision, which would cut values): the bytes are PostgreSQL's encoding of the
/// values it stores, so a column created by hand with another type (a `real` holding an
/// `integer`'s bytes, a `date` for a `timestamp`) gives other bytes than the source's values.
async fn target_digest(pg: &Client, t: &TablePlan, keep: bool) -> Result<Digest, VerifyError> {
    let table = qualified(t);
    let cols = t
        .all_columns()
        .map(|c| format!("CAST({} AS {})", quote_pg(&c.target_name), c.pg_type.base_name()))
        .collect::<Vec<_>>()
        .join(", ");
    pg_copy_digest(
        pg,
        &format!("COPY (SELECT {cols} FROM {table}) TO STDOUT (FORMAT binary)"),
        &table,
        keep,
    )
    .await
}

/// The digest of a `COPY (...) TO STDOUT (FORMAT binary)` (both directions' PostgreSQL side).
pub async fn pg_copy_digest(
    pg: &Client,
    copy_sql: &str,
    table: &str,
    keep: bool,
) -> Result<Digest, VerifyError> {
    let table = table.to_string();
    let err = |source| VerifyError::Target {
        table: table.clone(),
        source,
    };
    let stream = pg.copy_out(copy_sql).await.map_err(err)?;
    futures_util::pin_mut!(stream);
    let mut buf = BytesMut::new();
    let mut header_done = false;
    let mut digest = Digest::keeping_rows(keep);
    while let Some(chunk) = stream.try_next().await.map_err(err)? {
        buf.extend_from_slice(&chunk);
        if !header_done {
            if buf.len() < 19 {
                continue;
            }
            let ext = u32::from_be_bytes([buf[15], buf[16], buf[17], buf[18]]) as usize;
            if buf.len() < 19 + ext {
                continue;
            }
            buf.advance(19 + ext);
            header_done = true;
        }
        while let Some(n) = row_len(&buf) {
            if n == 0 {
                return Ok(digest);
            }
            digest.add(&buf[..n]);
            buf.advance(n);
        }
    }
    if header_done && buf.is_empty() {
        Ok(digest)
    } else {
        Err(VerifyError::Malformed(table))
    }
}
