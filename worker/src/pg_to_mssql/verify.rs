//! One verify part PostgreSQL -> SQL Server: counts, or the checksum of both sides (PostgreSQL's
//! from the copy's stored digest or read again, SQL Server's read back and hashed).

use crate::copy::binary::RowEncoder;

use super::{PgToMssqlError, pg_table, scalar_i64};
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl;
use crate::mssql::read::hash_rows;
use crate::options::VerifyMode;
use crate::pg::read::{SESSION_SETTINGS, VerifyColumns, verify_columns};
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::pg_to_mssql::PgToMssqlTablePlan;
use crate::plan::source_mark::SourceMark;
use crate::schema::mssql_to_pg_types::{quote_mssql, quote_pg};
use crate::schema::pg_to_mssql_types::{Decode, PgToMssqlColumn};
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
    if upsert {
        // Both sides whole, in the key's order when it is integers.
        let key: Option<Vec<usize>> = t.key.clone().filter(|k| {
            k.iter()
                .all(|&i| matches!(t.columns[i].decode, Decode::Int2 | Decode::Int4 | Decode::Int8))
        });
        let order = |name: fn(&PgToMssqlColumn) -> String| {
            key.as_ref().map(|k| {
                k.iter()
                    .map(|&i| name(&t.columns[i]))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        };
        let source_order = order(|c| quote_pg(&c.source.name));
        let target_oids = oids.clone();
        let target_order = order(|c| quote_mssql(&c.target_name));
        let compared = crate::verify::upsert_part(
            &table,
            key.clone(),
            |mut sink| async {
                let order = source_order.as_deref().filter(|_| sink.ordered());
                let hasher = RowHasher::new(oids.clone());
                crate::verify::pg_rows(pg, &exprs, hasher, &from, None, order, &mut sink)
                    .await
                    .map_err(|e| verr(e.to_string()))?;
                Ok::<_, PgToMssqlError>(sink)
            },
            |mut sink| async move {
                let order = target_order.as_deref().filter(|_| sink.ordered());
                mssql_rows(ms, t, None, order, target_oids, &mut sink).await?;
                Ok(sink)
            },
        )
        .await?;
        return compared.map_err(verr);
    }
    let reread = || async {
        crate::verify::pg_digest(
            pg,
            &exprs,
            RowHasher::new(oids.clone()),
            &from,
            pg_filter.as_deref(),
        )
        .await
        .map_err(|e| verr(e.to_string()))
    };
    let target = mssql_digest(ms, t, ms_filter.as_deref(), oids.clone());
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
) -> Result<Digest, PgToMssqlError> {
    let mut digest = Digest::default();
    mssql_rows(ms, t, filter, None, oids, &mut digest).await?;
    Ok(digest)
}

/// [`mssql_digest`]'s rows into `sink`, `ORDER BY order` when given.
async fn mssql_rows(
    ms: &mut TdsClient,
    t: &PgToMssqlTablePlan,
    filter: Option<&str>,
    order: Option<&str>,
    oids: Vec<u32>,
    sink: &mut impl crate::copy::row_hash::RowSink,
) -> Result<(), PgToMssqlError> {
    let table = t.source.qualified();
    let cols = t
        .columns
        .iter()
        .map(|c| c.ms_select.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let filter = filter.map(|f| format!(" WHERE {f}")).unwrap_or_default();
    let order = order.map(|o| format!(" ORDER BY {o}")).unwrap_or_default();
    let sql = format!("SELECT {cols} FROM {}{filter}{order}", ddl::qualified(t));
    let encoder = RowEncoder::new(t.columns.iter().map(|c| c.canonical).collect());
    let mut hasher = RowHasher::new(oids);
    hash_rows(ms, &table, sql, &encoder, &mut hasher, sink)
        .await
        .map_err(|e| PgToMssqlError::Verify {
            table: table.clone(),
            message: crate::error_text::error_text(&e),
        })
}
