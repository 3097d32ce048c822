//! One copy task PostgreSQL -> SQL Server: binary COPY TO read and encoded as TDS bulk rows,
//! each chunk bulk-loaded with its checkpoint in one SQL Server transaction.

use crate::conn_pool::{Pools, TdsConn};

use super::{PgToMssqlEngine, PgToMssqlError, ms_batch};
use crate::mssql::bulk::{BulkCtx, row_encoder, write_chunks};
use crate::mssql::checkpoint as mscp;
use crate::mssql::ddl;
use crate::options::Mode;
use crate::pg::connect::with_kept_connection_io;
use crate::pg::read::read_task;
use crate::pipeline::{CHANNEL_DEPTH, Resume, Start, TaskReport, run_task};
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::pg_to_mssql::PgToMssqlTablePlan;
use crate::retry::AttemptState;
use crate::schema::mssql_to_pg_types::quote_mssql;
use crate::timeouts::stalled;
use tokio::sync::mpsc;

/// Copies one task of run `run` (see [`crate::plan::mssql_to_pg::Plan::run`]), resuming after its checkpoint
/// when there is one, and again from the checkpoint after a transient fault (see
/// [`crate::pipeline::CopyOptions::retry`]). The task is claimed first ([`crate::fence`]): once
/// another worker claims it, this one's next commit fails.
pub async fn copy_task(
    engine: &PgToMssqlEngine,
    run: i64,
    t: &PgToMssqlTablePlan,
    task: &TaskPlan,
    pools: &Pools,
) -> Result<TaskReport, PgToMssqlError> {
    if let Some(stopped) = crate::shutdown::stopped_at_boundary() {
        return Err(PgToMssqlError::Stopped(stopped));
    }
    let state = AttemptState::default();
    run_task(
        &engine.copy.retry,
        &task.name,
        t.source.qualified(),
        &state,
        || copy_attempt(engine, run, t, task, pools, &state),
        PgToMssqlError::is_transient,
    )
    .await
    .map_err(|mut f| {
        f.report.taken_over = f.cause.taken_over();
        PgToMssqlError::Failed(Box::new(f))
    })
}

/// One attempt of [`copy_task`]. Its connections come from `pools` and go back there only when
/// it succeeds; an error drops them (closing a connection rolls back its open transaction).
async fn copy_attempt(
    engine: &PgToMssqlEngine,
    run: i64,
    t: &PgToMssqlTablePlan,
    task: &TaskPlan,
    pools: &Pools,
    state: &AttemptState,
) -> Result<TaskReport, PgToMssqlError> {
    let migration = &engine.options.migration;
    let TdsConn {
        client: mut ms,
        watch: ms_watch,
    } = pools.mssql(&engine.target).await?;
    let fence = state
        .claimed(|| mscp::claim(&mut ms, migration, &task.name, run))
        .await?;
    let cp = mscp::load(&mut ms, migration, &task.name)
        .await?
        .unwrap_or_default();
    let resume = match Resume::from_checkpoint(cp, t.key.is_some(), task, t.source.qualified(), state) {
        Start::Done(report) => {
            pools.give_back_mssql(TdsConn {
                client: ms,
                watch: ms_watch,
            });
            return Ok(report);
        }
        Start::From(resume) => resume,
    };
    let (after, committed_rows) = (resume.after.clone(), resume.committed_rows);

    // Its I/O is polled by this task together with the reader and writer below.
    let mut pg = pools.pg_undriven(&engine.source).await?;

    let identity = engine.options.schema.identity;
    let upsert = engine.copy.mode == Mode::Upsert;
    let (load_table, merge_sql) = if upsert {
        let stage = ddl::stage_name(t, &task.name);
        ms_batch(&mut ms, "staging table", &ddl::create_stage(t, &stage)).await?;
        let merge = ddl::upsert_merge(t, &stage, identity);
        (stage, merge)
    } else {
        (ddl::qualified(t), None)
    };
    let columns: Vec<String> = t
        .columns
        .iter()
        .filter(|c| c.computed.is_none())
        .map(|c| quote_mssql(&c.target_name))
        .collect();
    let ctx = BulkCtx {
        migration,
        task: &task.name,
        fence,
        table: &load_table,
        columns: &columns,
        keep_identity: !upsert && identity && t.columns.iter().any(|c| c.identity),
        committed_rows,
        committed_digest: resume.committed_digest,
        fail_after_chunks: engine.copy.fail_after_chunks,
        merge_sql: merge_sql.as_deref(),
        committed: Some(state.committed()),
    };
    // Rows are encoded for the bulk load by the reader, away from the connection.
    let encoder = row_encoder(&mut ms, &ctx).await?;
    let (tx, rx) = mpsc::channel(CHANNEL_DEPTH);
    let reader = read_task(
        &pg.client,
        t,
        task,
        after.as_deref(),
        engine.copy.chunk,
        engine.options.checksum_by_task(),
        &encoder,
        tx,
    );
    let writer = async {
        let (mut ms, mut rx) = (ms, rx);
        let written = write_chunks(&mut ms, &mut rx, &ctx, &encoder).await;
        // Closing the receiver stops a reader that is still producing; a failed chunk's
        // transaction is rolled back by closing its connection, which only a success keeps.
        drop(rx);
        written.map(|stats| (stats, ms))
    };
    // The PostgreSQL connection's I/O, the reader and the writer are polled by this one tokio
    // task, not spawned apart: the reader does nearly all the CPU work (decoding COPY rows,
    // encoding bulk rows) while the other two mostly wait on sockets, so separate tasks bought
    // no parallelism but cross-thread wake-ups, 15% of the worker's CPU on a 2-core machine
    // shared with both databases (bench/RESULTS.md, third set of 2026-11-25). Tasks still run
    // side by side on the runtime's threads.
    let (read, written) = with_kept_connection_io(async { tokio::join!(reader, writer) }, &mut pg.io).await;
    // A connection that stalled explains the error its client saw (a closed connection).
    if (read.is_err() || written.is_err())
        && let Some(s) = stalled(&t.source.qualified(), [&pg.watch, &ms_watch])
    {
        return Err(PgToMssqlError::Stalled(s));
    }
    // A reader error explains a writer that saw the channel close; report it first.
    read?;
    let (stats, mut ms) = written?;
    if upsert {
        // The staging table is per task; it is empty after the last chunk. A connection that
        // cannot drop it is not kept.
        if ms_batch(
            &mut ms,
            "staging table",
            &format!("DROP TABLE IF EXISTS {load_table}"),
        )
        .await
        .is_err()
        {
            pools.give_back_pg(pg).await;
            return Ok(resume.finish(stats));
        }
    }
    pools.give_back_mssql(TdsConn {
        client: ms,
        watch: ms_watch,
    });
    pools.give_back_pg(pg).await;
    Ok(resume.finish(stats))
}
