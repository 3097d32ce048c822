//! The physical limits the worker is compared with, measured on the same rows in the same run:
//! - a tiberius bulk load of pre-built rows into the SQL Server side (generation not timed);
//! - a tiberius client streaming each source table to nowhere;
//! - PostgreSQL's own `COPY ... FROM 'file' (FORMAT binary)` of the rows the worker wrote.

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bench::load::mssql::{self, MssqlClient};
use bench::stackoverflow::{Dataset, Table};
use futures_util::TryStreamExt;
use tiberius::{SqlBulkCopyOption, TokenRow};

/// Rows built in memory before each timed `INSERT BULK`.
const BULK_BATCH_ROWS: u64 = 50_000;

pub async fn exec(client: &mut MssqlClient, sql: &str) -> Result<()> {
    client
        .simple_query(sql)
        .await
        .with_context(|| format!("SQL Server: {sql}"))?
        .into_results()
        .await
        .with_context(|| format!("SQL Server: {sql}"))?;
    Ok(())
}

/// Bulk-loads the rows with these ids (generated ahead of each batch; only the sending is
/// timed) into an existing table. Returns the rows and the time spent sending them.
pub async fn bulk_prebuilt(
    client: &mut MssqlClient,
    ds: &Dataset,
    table: Table,
    ids: RangeInclusive<u64>,
) -> Result<(u64, Duration)> {
    let name = mssql::table_name(table);
    let columns = table.columns();
    let options = SqlBulkCopyOption::KeepIdentity | SqlBulkCopyOption::TableLock;
    let (mut id, last) = (*ids.start(), *ids.end());
    let mut sent = Duration::ZERO;
    let mut total = 0;
    while id <= last {
        let end = (id + BULK_BATCH_ROWS - 1).min(last);
        let rows: Vec<TokenRow<'static>> = (id..=end)
            .map(|i| mssql::token_row(ds.row(table, i), columns))
            .collect();
        let started = Instant::now();
        let mut req = client
            .bulk_insert_with_options(&name, &["*"], options, &[])
            .await
            .with_context(|| format!("INSERT BULK into {table} at id {id}"))?;
        for row in rows {
            req.send(row)
                .await
                .with_context(|| format!("bulk load into {table} at id {id}"))?;
        }
        total += req
            .finalize()
            .await
            .with_context(|| format!("finishing the bulk load into {table} at id {id}"))?
            .total();
        sent += started.elapsed();
        id = end + 1;
    }
    let expected = (last + 1).saturating_sub(*ids.start());
    if total != expected {
        bail!("{table}: bulk load reported {total} rows, expected {expected}");
    }
    Ok((total, sent))
}

/// Creates `table` on the SQL Server side and loads all its rows: the bulk-load limit.
pub async fn load_source_table(
    client: &mut MssqlClient,
    ds: &Dataset,
    table: Table,
) -> Result<(u64, Duration)> {
    exec(client, &mssql::create_table_sql(table)).await?;
    bulk_prebuilt(client, ds, table, 1..=ds.rows_of(table)).await
}

/// `SELECT` every column in key order (what the worker asks for) and drop the rows: the
/// source's streaming limit through tiberius.
pub async fn stream_to_nowhere(
    client: &mut MssqlClient,
    table: &str,
    columns: &[&str],
) -> Result<(u64, Duration)> {
    let cols: Vec<String> = columns.iter().map(|c| mssql::quote(c)).collect();
    let sql = format!(
        "SELECT {} FROM [dbo].{} ORDER BY [Id]",
        cols.join(", "),
        mssql::quote(table)
    );
    let started = Instant::now();
    let mut stream = client
        .simple_query(sql)
        .await
        .with_context(|| format!("streaming {table}"))?
        .into_row_stream();
    let mut rows = 0u64;
    while stream
        .try_next()
        .await
        .with_context(|| format!("streaming {table} after {rows} rows"))?
        .is_some()
    {
        rows += 1;
    }
    Ok((rows, started.elapsed()))
}

fn pg_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// PostgreSQL alone: dumps `schema.table` (the rows the worker wrote) to a binary file with
/// `COPY TO`, then times `COPY FROM` that file (wall and server CPU time) into an empty copy of the table (no keys or
/// indexes, as the worker's tables during the copy phase).
pub async fn pg_copy_from_file(
    pg: &tokio_postgres::Client,
    schema: &str,
    table: &str,
    dir: &Path,
) -> Result<PgCopy> {
    let file = dir.join(format!("bench-limit-{schema}-{table}.bin"));
    let file_lit = format!("'{}'", file.display().to_string().replace('\'', "''"));
    let source = format!("{}.{}", pg_ident(schema), pg_ident(table));
    let limit = format!("{}.{}", pg_ident("bench_limit"), pg_ident(table));
    pg.batch_execute(&format!(
        "COPY {source} TO {file_lit} (FORMAT binary);
         CREATE SCHEMA IF NOT EXISTS \"bench_limit\";
         DROP TABLE IF EXISTS {limit};
         CREATE TABLE {limit} (LIKE {source});
         CHECKPOINT"
    ))
    .await
    .with_context(|| format!("preparing the COPY FROM file limit of {source}"))?;
    // The server process of this session, for the CPU time the COPY costs PostgreSQL.
    let backend: i32 = pg
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .context("pg_backend_pid()")?
        .get(0);
    let backend = u32::try_from(backend).unwrap_or(0);
    let cpu_before = super::worker::cpu_seconds_of(backend);
    let started = Instant::now();
    let rows = pg
        .execute(&format!("COPY {limit} FROM {file_lit} (FORMAT binary)"), &[])
        .await
        .with_context(|| format!("COPY {limit} FROM a file"))?;
    let elapsed = started.elapsed();
    let cpu = match (cpu_before, super::worker::cpu_seconds_of(backend)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    pg.batch_execute(&format!("DROP TABLE {limit}"))
        .await
        .with_context(|| format!("dropping {limit}"))?;
    // The file belongs to the server's user; the directory goes away with a private server.
    let _ = std::fs::remove_file(&file);
    Ok(PgCopy { rows, elapsed, cpu })
}

/// PostgreSQL's own COPY FROM file: rows, wall time and the server process's CPU time.
pub struct PgCopy {
    pub rows: u64,
    pub elapsed: Duration,
    pub cpu: Option<f64>,
}
