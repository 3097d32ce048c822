//! One verify part PostgreSQL -> SQL Server: counts, or the checksum of both sides (PostgreSQL's
//! from the copy's stored digest or read again, SQL Server's read back and hashed).

use crate::copy_binary::RowEncoder;

use super::{PgToMssqlError, pg_table, scalar_i64};
use crate::mapping::{quote_mssql, quote_pg};
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl;
use crate::mssql::read::hash_rows;
use crate::options::VerifyMode;
use crate::pg::read::{SESSION_SETTINGS, VerifyColumns, verify_columns};
use crate::plan::TaskPlan;
use crate::plan_pg_to_mssql::PgToMssqlTablePlan;
use crate::source_mark::SourceMark;
use crate::verify::{Digest, RowHasher};
use tokio_postgres::Client;

/// Counts (and checksums) one part of a table (a copy task's key range, or the whole table) on
/// both sides. SQL Server's rows are read and hashed here, with the type OIDs of PostgreSQL's
/// expressions so that both sides hash the same bytes.
///
/// `stored` is the source digest the copy computed as it read the rows (see
/// [`crate::pg::read::read_task`]): it stands for PostgreSQL's side when the range still holds as
/// many rows and none of them was written by a transaction since the copy started (the task's
/// mark, [`crate::pg::row_changes`]), which one scan of the range tells while SQL Server's side
/// is read. Otherwise, and without a stored digest, PostgreSQL's rows are read again and hashed
/// ([`crate::verify::pg_digest`], over [`verify_columns`]).
pub async fn verify_part(
    pg: &Client,
    ms: &mut TdsClient,
    t: &PgToMssqlTablePlan,
    task: Option<&TaskPlan>,
    mode: VerifyMode,
    upsert: bool,
    stored: Option<Digest>,
) -> Result<(Digest, Digest), PgToMssqlError> {
    let table = t.source.qualified();
    let verr = |message: String| PgToMssqlError::Verify {
        table: table.clone(),
        message,
    };
    let from = pg_table(&t.source);
    let key = t.int_key();
    let pg_filter =
        crate::verify::range_condition(key.map(|k| quote_pg(&t.columns[k].source.name)).as_deref(), task);
    let ms_filter = crate::verify::range_condition(
        key.map(|k| quote_mssql(&t.columns[k].target_name)).as_deref(),
        task,
    );
    if mode == VerifyMode::Count {
        let where_ = |f: &Option<String>| f.as_ref().map(|f| format!(" WHERE {f}")).unwrap_or_default();
        let source = async {
            pg.query_one(&format!("SELECT count(*) FROM {from}{}", where_(&pg_filter)), &[])
                .await
                .map(|r| r.get::<_, i64>(0))
                .map_err(|e| verr(e.to_string()))
        };
        let count = format!(
            "SELECT COUNT_BIG(*) FROM {}{}",
            ddl::qualified(t),
            where_(&ms_filter)
        );
        let target = scalar_i64(ms, &count);
        let (s, tgt) = tokio::join!(source, target);
        let rows = |rows| Digest {
            rows,
            ..Digest::default()
        };
        return Ok((rows(s?), rows(tgt?.unwrap_or(0))));
    }
    pg.batch_execute(SESSION_SETTINGS)
        .await
        .map_err(|e| verr(e.to_string()))?;
    let VerifyColumns { exprs, oids } = verify_columns(pg, t).await.map_err(|e| verr(e.to_string()))?;
    let reread = || async {
        crate::verify::pg_digest(
            pg,
            &exprs,
            RowHasher::new(oids.clone()),
            &from,
            pg_filter.as_deref(),
            upsert,
        )
        .await
        .map_err(|e| verr(e.to_string()))
    };
    let target = mssql_digest(ms, t, ms_filter.as_deref(), oids.clone(), upsert);
    let Some(stored) = stored else {
        let (source, target) = tokio::join!(reread(), target);
        return Ok((source?, target?));
    };
    let part = task.map_or("(whole table)", |k| k.name.as_str());
    let unchanged = async {
        let Some(SourceMark::Xmin(mark)) = task.and_then(|k| k.source_mark) else {
            tracing::info!(table = %table, task = part, "verify: no mark of the copy's start; reading the source again");
            return Ok(false);
        };
        let (rows, changed) = crate::pg::row_changes::rows_and_changed(pg, &from, pg_filter.as_deref(), mark)
            .await
            .map_err(|e| verr(e.to_string()))?;
        if rows != stored.rows || changed != 0 {
            tracing::info!(table = %table, task = part, copied = stored.rows, now = rows, changed,
                "verify: the source range changed since the copy started; reading it again");
        }
        Ok::<_, PgToMssqlError>(rows == stored.rows && changed == 0)
    };
    let (unchanged, target) = tokio::join!(unchanged, target);
    let target = target?;
    if unchanged? {
        return Ok((stored, target));
    }
    Ok((reread().await?, target))
}

/// SQL Server rows encoded in the canonical PostgreSQL binary form straight from the raw TDS row
/// stream and hashed (the forward copy's encoder, [`hash_rows`]).
async fn mssql_digest(
    ms: &mut TdsClient,
    t: &PgToMssqlTablePlan,
    filter: Option<&str>,
    oids: Vec<u32>,
    keep: bool,
) -> Result<Digest, PgToMssqlError> {
    let table = t.source.qualified();
    let cols = t
        .columns
        .iter()
        .map(|c| c.ms_select.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let sql = format!("SELECT {cols} FROM {}{filter}", ddl::qualified(t));
    let encoder = RowEncoder::new(t.columns.iter().map(|c| c.canonical).collect());
    let mut hasher = RowHasher::new(oids);
    let mut digest = Digest::keeping_rows(keep);
    hash_rows(ms, &table, sql, &encoder, &mut hasher, |h| digest.add(h))
        .await
        .map_err(|e| PgToMssqlError::Verify {
            table: table.clone(),
            message: crate::error_text::error_text(&e),
        })?;
    Ok(digest)
}
