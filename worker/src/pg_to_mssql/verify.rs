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
use crate::verify::{Digest, RowHasher};
use tokio_postgres::Client;

/// Counts (and checksums) one part of a table (a copy task's key range, or the whole table) on
/// both sides. `stored` is the source digest the copy computed as it read the rows (see
/// [`crate::pg::read::read_task`]); without it PostgreSQL's rows are read again and hashed
/// ([`crate::verify::pg_digest`], over [`verify_columns`]). SQL Server's rows are read and hashed
/// here, with the type OIDs of PostgreSQL's expressions so that both sides hash the same bytes.
/// The two sides run at once.
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
    if mode == VerifyMode::Count {
        let s: i64 = pg
            .query_one(&format!("SELECT count(*) FROM {}", pg_table(&t.source)), &[])
            .await
            .map_err(|e| verr(e.to_string()))?
            .get(0);
        let tgt = scalar_i64(ms, &format!("SELECT COUNT_BIG(*) FROM {}", ddl::qualified(t)))
            .await?
            .unwrap_or(0);
        let rows = |rows| Digest {
            rows,
            ..Digest::default()
        };
        return Ok((rows(s), rows(tgt)));
    }
    pg.batch_execute(SESSION_SETTINGS)
        .await
        .map_err(|e| verr(e.to_string()))?;
    let VerifyColumns { exprs, oids } = verify_columns(pg, t).await.map_err(|e| verr(e.to_string()))?;
    let from = pg_table(&t.source);
    let key = t.int_key();
    let pg_filter =
        crate::verify::range_condition(key.map(|k| quote_pg(&t.columns[k].source.name)).as_deref(), task);
    let ms_filter = crate::verify::range_condition(
        key.map(|k| quote_mssql(&t.columns[k].target_name)).as_deref(),
        task,
    );
    let source_hasher = RowHasher::new(oids.clone());
    let source = async {
        match stored {
            Some(d) => Ok(d),
            None => crate::verify::pg_digest(pg, &exprs, source_hasher, &from, pg_filter.as_deref(), upsert)
                .await
                .map_err(|e| verr(e.to_string())),
        }
    };
    let target = mssql_digest(ms, t, ms_filter.as_deref(), oids, upsert);
    let (source, target) = tokio::join!(source, target);
    Ok((source?, target?))
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
