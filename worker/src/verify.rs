//! Verification computed the same way on both sides: every row in its PostgreSQL binary form (the
//! source through our encoder, the target by PostgreSQL's own send functions) is hashed with one
//! fixed function ([`RowHasher`], [`pg_row_hash`]) and the hashes are summed, so order does not
//! matter and a lost, duplicated or altered row changes the result. The source side is computed
//! by the copy as it reads the rows and stored with each chunk's checkpoint (or read again, for a
//! task copied without one). PostgreSQL's side is its rows as its binary COPY sends them, hashed
//! by the worker as they arrive: summing the same hash in SQL ([`pg_row_hash`], which gives the
//! same digest) costs the server about three times the CPU.

use crate::copy::binary::RowEncoder;
use crate::copy::row_hash::{RowFields, RowSink};
pub use crate::copy::row_hash::{RowHasher, pg_oid, pg_row_hash};
use crate::copy::upsert_match::{Hashes, KeyedSink, UpsertMatch};
use crate::mssql::connect::TdsClient;
use crate::mssql::read::{ReadError, count_rows, hash_rows};
use crate::pg::ddl::qualified;
use crate::pg::read::PgReadError;
use crate::plan::mssql_to_pg::{TablePlan, TaskPlan};
use crate::plan::source_mark::SourceMark;
use crate::schema::mssql_to_pg_types::quote_pg;
use serde::Serialize;
use tokio_postgres::Client;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Target(#[from] PgReadError),
    #[error("{0}")]
    Upsert(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Digest {
    pub rows: i64,
    /// Sum of the per-row hashes ([`RowHasher`]), wrapping.
    pub sum: u64,
    /// An upsert's target side: its rows equal to a source row ([`crate::copy::upsert_match`]), the
    /// target may hold rows the source does not.
    #[serde(skip)]
    pub matched: Option<i64>,
}

impl Digest {
    /// Counts one row with hash `hash` (from [`RowHasher::hash`] or [`pg_row_hash`]).
    pub fn add(&mut self, hash: u64) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(hash);
    }

    /// Adds another part of the same table (another task's key range).
    pub fn merge(&mut self, other: Digest) {
        self.rows += other.rows;
        self.sum = self.sum.wrapping_add(other.sum);
        self.matched = match (self.matched, other.matched) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }

    /// Same rows, same values (order aside).
    pub fn same_rows(&self, other: &Digest) -> bool {
        self.rows == other.rows && self.sum == other.sum
    }

    /// Both sides of an upsert's comparison.
    pub fn upsert(m: UpsertMatch) -> (Digest, Digest) {
        let side = |s: crate::copy::upsert_match::Sum, matched| Digest {
            rows: s.rows,
            sum: s.sum,
            matched,
        };
        (side(m.source, None), side(m.target, Some(m.matched)))
    }
}

impl RowSink for Digest {
    fn row(&mut self, hash: u64, _: RowFields<'_>) {
        self.add(hash);
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
/// with `hasher` (the expressions' type OIDs) as it arrives. The same digest as summing
/// [`pg_row_hash`] in SQL, at a third of the server's CPU.
pub async fn pg_digest(
    pg: &Client,
    exprs: &[String],
    hasher: RowHasher,
    from: &str,
    filter: Option<&str>,
) -> Result<Digest, PgReadError> {
    let mut digest = Digest::default();
    pg_rows(pg, exprs, hasher, from, filter, None, &mut digest).await?;
    Ok(digest)
}

/// The rows of `SELECT exprs FROM from [WHERE filter] [ORDER BY order]` hashed into `sink`, as
/// [`pg_digest`] reads them.
pub async fn pg_rows(
    pg: &Client,
    exprs: &[String],
    mut hasher: RowHasher,
    from: &str,
    filter: Option<&str>,
    order: Option<&str>,
    sink: &mut impl RowSink,
) -> Result<(), PgReadError> {
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let order = order.map(|o| format!(" ORDER BY {o}")).unwrap_or_default();
    let query = format!("SELECT {} FROM {from}{filter}{order}", exprs.join(", "));
    crate::pg::read::hash_rows(pg, from, &query, &mut hasher, sink).await
}

/// An upsert's rows, compared in flat memory when the key is made of integer columns (at
/// `key`'s field indexes, both sides' rows in the key's order, `ORDER BY` the given lists), else
/// by both sides' hashes held ([`crate::copy::upsert_match`]). `source` and `target` read their side
/// into the sink given them, in key order when asked to.
pub async fn upsert_part<E, FS, FT>(
    table: &str,
    key: Option<Vec<usize>>,
    source: impl FnOnce(UpsertSink) -> FS,
    target: impl FnOnce(UpsertSink) -> FT,
) -> Result<Result<(Digest, Digest), String>, E>
where
    FS: Future<Output = Result<UpsertSink, E>>,
    FT: Future<Output = Result<UpsertSink, E>>,
{
    if let Some(key) = key {
        let m = crate::copy::upsert_match::merge(
            key,
            |sink| async move {
                match source(UpsertSink::Keyed(sink)).await? {
                    UpsertSink::Keyed(sink) => Ok(sink.finish().await),
                    UpsertSink::Hashes(_) => Ok(None),
                }
            },
            |sink| async move {
                match target(UpsertSink::Keyed(sink)).await? {
                    UpsertSink::Keyed(sink) => Ok(sink.finish().await),
                    UpsertSink::Hashes(_) => Ok(None),
                }
            },
        )
        .await?;
        return Ok(m
            .map(Digest::upsert)
            .map_err(|why| format!("table {table}: the upsert's rows could not be compared: {why}")));
    }
    let (s, t) = tokio::join!(
        source(UpsertSink::Hashes(Hashes::default())),
        target(UpsertSink::Hashes(Hashes::default()))
    );
    let (UpsertSink::Hashes(s), UpsertSink::Hashes(t)) = (s?, t?) else {
        return Ok(Err(format!(
            "table {table}: the upsert's rows could not be compared"
        )));
    };
    let sums = (s.sum, t.sum);
    let matched = match tokio::task::spawn_blocking(move || crate::copy::upsert_match::matched(s, t)).await {
        Ok(Ok(matched)) => matched,
        Ok(Err(e)) => {
            return Ok(Err(format!(
                "table {table}: the upsert's rows could not be compared: its row hashes are sorted \
                 in temporary files (TMPDIR, /tmp by default), which failed: {e}"
            )));
        }
        Err(_) => {
            return Ok(Err(format!(
                "table {table}: the upsert's rows could not be compared"
            )));
        }
    };
    Ok(Ok(Digest::upsert(UpsertMatch {
        source: sums.0,
        target: sums.1,
        matched,
    })))
}

/// Where an upsert's reader puts its rows ([`upsert_part`]): in key order to the merge, or all
/// of them held.
pub enum UpsertSink {
    Keyed(KeyedSink),
    Hashes(Hashes),
}

impl UpsertSink {
    /// Whether the reader must send its rows in key order.
    pub fn ordered(&self) -> bool {
        matches!(self, UpsertSink::Keyed(_))
    }
}

impl RowSink for UpsertSink {
    fn row(&mut self, hash: u64, fields: RowFields<'_>) {
        match self {
            UpsertSink::Keyed(k) => k.row(hash, fields),
            UpsertSink::Hashes(h) => h.row(hash, fields),
        }
    }

    async fn pause(&mut self) {
        if let UpsertSink::Keyed(k) = self {
            k.pause().await;
        }
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
        } else if let Some(matched) = target.matched {
            (matched == source.rows, Some(target.rows - matched))
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
    let columns: Vec<&crate::schema::mssql_to_pg_types::ColumnMapping> = if copied {
        t.columns.iter().collect()
    } else {
        t.all_columns().collect()
    };
    let exprs: Vec<String> = columns.iter().map(|c| pg_cast(c)).collect();
    let hasher = RowHasher::for_types(columns.iter().map(|c| c.pg_type));
    let table = qualified(t);
    if upsert {
        // Both sides whole, in the key's order when it is integers.
        let key: Option<Vec<usize>> = t
            .keyset
            .as_ref()
            .filter(|k| k.iter().all(|c| c.kind == crate::plan::mssql_to_pg::KeyKind::Int))
            .map(|k| k.iter().map(|c| c.index).collect());
        let order = |name: fn(&crate::schema::mssql_to_pg_types::ColumnMapping) -> String| {
            key.as_ref().map(|k| {
                k.iter()
                    .map(|&i| name(&t.columns[i]))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        };
        let source_order = order(|c| crate::schema::mssql_to_pg_types::quote_mssql(&c.source.name));
        let target_order = order(|c| quote_pg(&c.target_name));
        let compared = upsert_part(
            &t.source.qualified(),
            key.clone(),
            |mut sink| async move {
                let order = source_order.as_deref().filter(|_| sink.ordered());
                source_rows(mssql, t, None, order, &mut sink).await?;
                Ok::<_, VerifyError>(sink)
            },
            |mut sink| async {
                let order = target_order.as_deref().filter(|_| sink.ordered());
                pg_rows(pg, &exprs, hasher, &table, None, order, &mut sink).await?;
                Ok(sink)
            },
        )
        .await?;
        return compared.map_err(VerifyError::Upsert);
    }
    let target = async {
        pg_digest(pg, &exprs, hasher, &table, filter.as_deref())
            .await
            .map_err(VerifyError::from)
    };
    let Some(stored) = stored else {
        let (source, target) = tokio::join!(source_digest(mssql, t, task), target);
        return Ok((source?, target?));
    };
    let (unchanged, target) = tokio::join!(source_unchanged(mssql, t, task, &stored), target);
    let target = target?;
    if unchanged? {
        return Ok((stored, target));
    }
    Ok((source_digest(mssql, t, task).await?, target))
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
        crate::schema::mssql_to_pg_types::quote_mssql(&t.source.schema),
        crate::schema::mssql_to_pg_types::quote_mssql(&t.source.name)
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
fn pg_cast(c: &crate::schema::mssql_to_pg_types::ColumnMapping) -> String {
    format!("CAST({} AS {})", quote_pg(&c.target_name), c.pg_type.base_name())
}

/// The source rows of the part read again through our encoder and hashed.
async fn source_digest(
    mssql: &mut TdsClient,
    t: &TablePlan,
    task: Option<&TaskPlan>,
) -> Result<Digest, VerifyError> {
    let mut digest = Digest::default();
    source_rows(mssql, t, task, None, &mut digest).await?;
    Ok(digest)
}

/// The source rows of the part (every column, generated ones too) read through our encoder,
/// hashed into `sink`, `ORDER BY order` when given.
async fn source_rows(
    mssql: &mut TdsClient,
    t: &TablePlan,
    task: Option<&TaskPlan>,
    order: Option<&str>,
    sink: &mut impl RowSink,
) -> Result<(), VerifyError> {
    let table = t.source.qualified();
    let cols = t
        .all_columns()
        .map(crate::schema::mssql_to_pg_types::select_expr)
        .collect::<Vec<_>>()
        .join(", ");
    let filter = range_condition(source_key(t).as_deref(), task)
        .map(|f| format!(" WHERE {f}"))
        .unwrap_or_default();
    let order = order.map(|o| format!(" ORDER BY {o}")).unwrap_or_default();
    let sql = format!(
        "SELECT {cols} FROM {}.{}{filter}{order}",
        crate::schema::mssql_to_pg_types::quote_mssql(&t.source.schema),
        crate::schema::mssql_to_pg_types::quote_mssql(&t.source.name)
    );
    let encoder = RowEncoder::new(t.all_columns().map(|c| c.pg_type).collect());
    let mut hasher = RowHasher::for_types(t.all_columns().map(|c| c.pg_type));
    hash_rows(mssql, &table, sql, &encoder, &mut hasher, sink).await?;
    Ok(())
}

/// The source's integer key column, quoted for T-SQL, that task ranges cut.
fn source_key(t: &TablePlan) -> Option<String> {
    t.int_key()
        .map(|k| crate::schema::mssql_to_pg_types::quote_mssql(&t.columns[k].source.name))
}
