//! Verification computed the same way on both sides: every row in its PostgreSQL binary form (the
//! source through our encoder, the target by PostgreSQL's own send functions) is hashed with one
//! fixed function ([`RowHasher`], [`pg_row_hash`]) and the hashes are summed, so order does not
//! matter and a lost, duplicated or altered row changes the result. The source side is computed
//! by the copy as it reads the rows and stored with each chunk's checkpoint (or read again, for a
//! task copied without one). PostgreSQL's side is its rows as its binary COPY sends them, hashed
//! by the worker as they arrive: summing the same hash in SQL ([`pg_row_hash`], which gives the
//! same digest) costs the server about three times the CPU.

use crate::copy_binary::RowEncoder;
use crate::mapping::quote_pg;
use crate::mssql::connect::TdsClient;
use crate::mssql::read::{ReadError, count_rows, hash_rows};
use crate::pg::ddl::qualified;
use crate::pg::read::PgReadError;
use crate::plan::{TablePlan, TaskPlan};
pub use crate::row_hash::{RowHasher, pg_oid, pg_row_hash};
use crate::source_mark::SourceMark;
use serde::Serialize;
use tokio_postgres::Client;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Target(#[from] PgReadError),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Digest {
    pub rows: i64,
    /// Sum of the per-row hashes ([`RowHasher`]), wrapping.
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

    /// Counts one row with hash `hash` (from [`RowHasher::hash`] or [`pg_row_hash`]).
    pub fn add(&mut self, hash: u64) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(hash);
        if let Some(hashes) = &mut self.hashes {
            hashes.push(hash);
        }
    }

    /// Adds another part of the same table (another task's key range).
    pub fn merge(&mut self, other: Digest) {
        self.rows += other.rows;
        self.sum = self.sum.wrapping_add(other.sum);
        match (&mut self.hashes, other.hashes) {
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (mine, _) => *mine = None,
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

/// `col > lower AND col <= upper` for a task's key range (both SQL dialects), `None` for a
/// whole table. The last range also takes NULL keys, so the ranges cover every row.
pub fn range_condition(key: Option<&str>, task: Option<&TaskPlan>) -> Option<String> {
    let (key, task) = (key?, task?);
    let mut conds = Vec::new();
    if let Some(lo) = task.lower {
        conds.push(format!("{key} > {lo}"));
    }
    match task.upper {
        Some(hi) => conds.push(format!("{key} <= {hi}")),
        None if !conds.is_empty() => {
            let last = conds.pop().unwrap_or_default();
            conds.push(format!("({last} OR {key} IS NULL)"));
        }
        None => {}
    }
    (!conds.is_empty()).then(|| conds.join(" AND "))
}

/// The digest of `SELECT exprs FROM from [WHERE filter]`: PostgreSQL sends the rows in binary
/// COPY form (its send functions: the values as it returns them) and the worker hashes each one
/// with `hasher` (the expressions' type OIDs) as it arrives; to `keep` them for an upsert, every
/// row's hash is kept. The same digest as summing [`pg_row_hash`] in SQL, at a third of the
/// server's CPU.
pub async fn pg_digest(
    pg: &Client,
    exprs: &[String],
    mut hasher: RowHasher,
    from: &str,
    filter: Option<&str>,
    keep: bool,
) -> Result<Digest, PgReadError> {
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let query = format!("SELECT {} FROM {from}{filter}", exprs.join(", "));
    let mut digest = Digest::keeping_rows(keep);
    crate::pg::read::hash_rows(pg, from, &query, &mut hasher, |h| digest.add(h)).await?;
    Ok(digest)
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

/// Row counts of one part (a copy task's key range, or the whole table) on both sides.
pub async fn count_part(
    mssql: &mut TdsClient,
    pg: &Client,
    t: &TablePlan,
    task: Option<&TaskPlan>,
) -> Result<(Digest, Digest), VerifyError> {
    let key = t.int_key().map(|k| quote_pg(&t.columns[k].target_name));
    let filter = range_condition(key.as_deref(), task)
        .map(|f| format!(" WHERE {f}"))
        .unwrap_or_default();
    let target = async {
        pg.query_one(&format!("SELECT count(*) FROM {}{filter}", qualified(t)), &[])
            .await
            .map(|r| r.get::<_, i64>(0))
            .map_err(|source| PgReadError::Copy {
                table: qualified(t),
                source,
            })
    };
    let source_filter = range_condition(source_key(t).as_deref(), task);
    let (source_rows, target_rows) = tokio::join!(count_rows(mssql, t, source_filter.as_deref()), target);
    let rows = |rows| Digest {
        rows,
        ..Digest::default()
    };
    Ok((rows(source_rows?), rows(target_rows?)))
}

/// Counts and checksums one part of a table (a copy task's key range, or the whole table) on
/// both sides. The target side is the rows as PostgreSQL sends them, hashed as they arrive
/// ([`pg_digest`]).
///
/// `stored` is the source digest the copy computed over the copied columns as it read them: it
/// stands for the source when SQL Server says nobody wrote the table since the copy started
/// (its write counters equal the mark the task carries, [`crate::mssql::write_counters`]) and
/// the range still holds as many rows; the range is counted while the target is read. Else, and
/// without a stored digest, the source is read again (every column, generated ones too: SQL
/// Server's computed values against PostgreSQL's, which checks the translated expression on
/// every row).
pub async fn checksum_part(
    mssql: &mut TdsClient,
    pg: &Client,
    t: &TablePlan,
    task: Option<&TaskPlan>,
    stored: Option<Digest>,
    upsert: bool,
) -> Result<(Digest, Digest), VerifyError> {
    let key = t.int_key().map(|k| quote_pg(&t.columns[k].target_name));
    let filter = range_condition(key.as_deref(), task);
    let copied = stored.is_some();
    let columns: Vec<&crate::mapping::ColumnMapping> = if copied {
        t.columns.iter().collect()
    } else {
        t.all_columns().collect()
    };
    let exprs: Vec<String> = columns.iter().map(|c| pg_cast(c)).collect();
    let hasher = RowHasher::for_types(columns.iter().map(|c| c.pg_type));
    let table = qualified(t);
    let target = async {
        pg_digest(pg, &exprs, hasher, &table, filter.as_deref(), upsert)
            .await
            .map_err(VerifyError::from)
    };
    let Some(stored) = stored else {
        let (source, target) = tokio::join!(source_digest(mssql, t, task, upsert), target);
        return Ok((source?, target?));
    };
    let (unchanged, target) = tokio::join!(source_unchanged(mssql, t, task, &stored), target);
    let target = target?;
    if unchanged? {
        return Ok((stored, target));
    }
    Ok((source_digest(mssql, t, task, upsert).await?, target))
}

/// Whether the source part still holds what the copy read: SQL Server's write counters of the
/// table equal the task's mark, and the range counts the stored digest's rows.
async fn source_unchanged(
    mssql: &mut TdsClient,
    t: &TablePlan,
    task: Option<&TaskPlan>,
    stored: &Digest,
) -> Result<bool, VerifyError> {
    let name = t.source.qualified();
    let quoted = format!(
        "{}.{}",
        crate::mapping::quote_mssql(&t.source.schema),
        crate::mapping::quote_mssql(&t.source.name)
    );
    let now = crate::mssql::write_counters::table_writes(mssql, Some(&quoted))
        .await
        .map_err(|source| ReadError::Query {
            table: name.clone(),
            source,
        })?
        .and_then(|w| w.get(&(t.source.schema.clone(), t.source.name.clone())).copied());
    let mark = task.and_then(|k| k.source_mark);
    let part = task.map_or("(whole table)", |k| k.name.as_str());
    let written = match (mark, now) {
        (Some(SourceMark::LeafWrites(then)), Some(now)) if now == then => false,
        (Some(SourceMark::LeafWrites(then)), Some(now)) => {
            tracing::info!(table = %name, task = part, then, now, "verify: the source was written since the copy started; reading it again");
            true
        }
        _ => {
            tracing::info!(table = %name, task = part, "verify: no write counters to compare; reading the source again");
            true
        }
    };
    if written {
        return Ok(false);
    }
    let rows = count_rows(
        mssql,
        t,
        range_condition(source_key(t).as_deref(), task).as_deref(),
    )
    .await?;
    if rows != stored.rows {
        tracing::info!(table = %name, task = part, copied = stored.rows, now = rows, "verify: the source range's row count moved since the copy; reading it again");
    }
    Ok(rows == stored.rows)
}

/// A target column cast to the planned type without its length or precision (which would cut
/// values): the bytes are PostgreSQL's encoding of the values it stores, so a column created by
/// hand with another type (a `real` holding an `integer`'s bytes, a `date` for a `timestamp`)
/// gives other bytes than the source's values.
fn pg_cast(c: &crate::mapping::ColumnMapping) -> String {
    format!("CAST({} AS {})", quote_pg(&c.target_name), c.pg_type.base_name())
}

/// The source rows of the part read again through our encoder and hashed.
async fn source_digest(
    mssql: &mut TdsClient,
    t: &TablePlan,
    task: Option<&TaskPlan>,
    keep: bool,
) -> Result<Digest, VerifyError> {
    let table = t.source.qualified();
    let cols = t
        .all_columns()
        .map(crate::mapping::select_expr)
        .collect::<Vec<_>>()
        .join(", ");
    let filter = range_condition(source_key(t).as_deref(), task)
        .map(|f| format!(" WHERE {f}"))
        .unwrap_or_default();
    let sql = format!(
        "SELECT {cols} FROM {}.{}{filter}",
        crate::mapping::quote_mssql(&t.source.schema),
        crate::mapping::quote_mssql(&t.source.name)
    );
    let encoder = RowEncoder::new(t.all_columns().map(|c| c.pg_type).collect());
    let mut hasher = RowHasher::for_types(t.all_columns().map(|c| c.pg_type));
    let mut digest = Digest::keeping_rows(keep);
    hash_rows(mssql, &table, sql, &encoder, &mut hasher, |h| digest.add(h)).await?;
    Ok(digest)
}

/// The source's integer key column, quoted for T-SQL, that task ranges cut.
fn source_key(t: &TablePlan) -> Option<String> {
    t.int_key()
        .map(|k| crate::mapping::quote_mssql(&t.columns[k].source.name))
}
