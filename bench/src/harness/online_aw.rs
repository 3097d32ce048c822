//! `bench online-adventure-works`: the online mode on a real database. Microsoft's AdventureWorks
//! sample is loaded into the TDS test server by its install script, streamed whole
//! (`schemas: ["*"]`, 71 tables) to a fresh PostgreSQL database while a writer changes three of
//! its tables (an address's text and time, inventory quantities, currency rates inserted and
//! deleted) at a steady rate, and cut over; then that database streams the other way into a
//! fresh SQL Server under the same load and is cut over again. Measures the lag at that rate and
//! the cutover's downtime with 71 tables to drain, finalize and verify.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::adventure_works::{Loaded, loaded_source, sample_dir};
use super::online_run::{
    Conn, Streaming, catch_up, cutover, drain, mib, pct, sample_lags, signal, start_streaming,
};
use super::report::{self, fmt_int};
use super::services::{Postgres, TdsServer};
use super::worker::{Config, Direction, Mode};
use super::{Setup, config};

/// Row changes per writer transaction (two updates, one insert, one delete, one more update).
const CHANGES_PER_TRANSACTION: u64 = 4;
const PG_DATABASE: &str = "aw_online";

#[derive(clap::Args, Clone, Debug)]
pub struct OnlineAwArgs {
    /// The sample's folder (`instawdb.sql` and its data files); default
    /// `../shared/sample-databases/adventure-works-oltp` beside the workspace.
    #[arg(long)]
    pub aw_dir: Option<PathBuf>,
    /// The writer's steady rate, row changes/s.
    #[arg(long, default_value_t = 400)]
    pub rate: u64,
    /// Seconds the writer runs before the cutover is requested.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    #[command(flatten)]
    pub setup: Setup,
}

/// One direction's figures.
struct Leg {
    direction: Direction,
    copy_seconds: f64,
    written: f64,
    applied: f64,
    lags: Vec<f64>,
    /// The applied heartbeats' delays while the writer ran (exact, one a second).
    delays: Vec<f64>,
    /// The backlog of whole-table updates the stopped streaming process found, and the rate it
    /// applied it at.
    backlog: (u64, f64),
    /// Peak RSS of the streaming process from its first streamed batch to the cutover request.
    rss_streaming: u64,
    cutover_wall: f64,
    cutover: serde_json::Value,
}

pub async fn run(args: OnlineAwArgs, command: String) -> Result<()> {
    let started = Instant::now();
    let aw_dir = sample_dir(args.aw_dir.as_deref())?;
    let tools = args.setup.tools("online-aw")?;
    let pg = args.setup.postgres()?;
    let postgres = pg.describe().await?;
    let (source, loaded) = loaded_source(&tools.testserver, &tools.workdir, &aw_dir).await?;
    eprintln!(
        "  {} rows in {} tables, {} batches refused",
        fmt_int(loaded.rows),
        loaded.tables,
        loaded.refused.len()
    );
    let admin = pg.connect().await?;
    for sql in [
        format!("DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)"),
        format!("CREATE DATABASE {PG_DATABASE}"),
    ] {
        admin.batch_execute(&sql).await.with_context(|| sql.clone())?;
    }
    let mut aw_pg = Postgres::external(&pg.url, pg.file_dir.clone())?;
    aw_pg.database = PG_DATABASE.to_owned();
    aw_pg.ssl_mode = pg.ssl_mode.clone();

    let forward = leg(
        &args,
        Direction::MssqlToPg,
        &tools.worker,
        &tools.workdir,
        &source,
        &aw_pg,
    )
    .await?;
    let back = TdsServer::start(
        &tools.testserver,
        "AdventureWorksBack",
        &tools.workdir.join("tds-back.log"),
    )?;
    let reverse = leg(
        &args,
        Direction::PgToMssql,
        &tools.worker,
        &tools.workdir,
        &back,
        &aw_pg,
    )
    .await?;
    drop(aw_pg);
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)"))
        .await
        .context("dropping the benchmark's PostgreSQL database")?;

    let md = markdown(&args, &loaded, &[forward, reverse], &postgres, &command, started);
    println!("{md}");
    if let Some(out) = &args.setup.out {
        report::replace_section(out, "bench online-adventure-works", &md)?;
    }
    Ok(())
}

async fn leg(
    args: &OnlineAwArgs,
    direction: Direction,
    worker: &Path,
    workdir: &Path,
    mssql: &TdsServer,
    pg: &Postgres,
) -> Result<Leg> {
    let mut c: Config = config("online AdventureWorks", direction, Mode::DropRecreate);
    c.pg_schema = "public".into();
    c.source_schemas = vec!["*".into()];
    let name = match direction {
        Direction::MssqlToPg => "bench-online-aw-forward",
        Direction::PgToMssql => "bench-online-aw-back",
    };
    eprintln!("online AdventureWorks {direction}:");
    let Streaming {
        mut run,
        file,
        env,
        copy_seconds,
    } = start_streaming(&c, name, mssql, pg, worker, workdir, Duration::from_secs(1800))?;
    run.sampling.store(true, Ordering::Relaxed);

    let conn = match direction {
        Direction::MssqlToPg => Conn::Mssql(Box::new(mssql.target().connect().await?)),
        Direction::PgToMssql => Conn::Pg(pg.connect().await?),
    };
    let applied_before = run.applied();
    let delays_mark = run.delays_seen();
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(write(conn, direction, args.rate, stop.clone(), written.clone()));
    let begun = Instant::now();
    let lags = sample_lags(&mut run, begun + Duration::from_secs(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut conn = writer.await.context("the writer task")??;
    let elapsed = begun.elapsed().as_secs_f64();
    if run.exited() {
        bail!(
            "the streaming process ended while the writer ran; log: {}",
            run.log.display()
        );
    }
    let written = written.load(Ordering::Relaxed) as f64 / elapsed;
    let applied = run.applied().saturating_sub(applied_before) as f64 / elapsed;
    let delays = run.delays_since(delays_mark);
    eprintln!(
        "  written {written:.0}/s applied {applied:.0}/s lag median {:.2} s p99 {:.2} s, heartbeat delay median {:.2} s p99 {:.2} s",
        pct(&lags, 0.5),
        pct(&lags, 0.99),
        pct(&delays, 0.5),
        pct(&delays, 0.99)
    );
    catch_up(&mut run, Duration::from_secs(600))?;

    // The backlog: whole tables updated, a transaction each, while the process is stopped.
    let before = run.applied();
    signal(&run, "-STOP")?;
    let mut written_backlog = 0;
    let mut failed = None;
    for sql in backlog_sql(direction) {
        match conn.exec(&sql).await {
            Ok(n) => written_backlog += n,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    signal(&run, "-CONT")?;
    if let Some(e) = failed {
        return Err(e);
    }
    let backlog = drain(&mut run, before + written_backlog)?;
    eprintln!(
        "  backlog: {} changes applied at {:.0}/s",
        fmt_int(backlog.0),
        backlog.1
    );
    catch_up(&mut run, Duration::from_secs(600))?;
    let rss_streaming = run.rss_streaming.load(Ordering::Relaxed);
    let (cutover_wall, cutover) = cutover(&mut run, worker, &file, &env)?;
    eprintln!("  cutover: {cutover}");
    Ok(Leg {
        direction,
        copy_seconds,
        written,
        applied,
        lags,
        delays,
        backlog,
        rss_streaming,
        cutover_wall,
        cutover,
    })
}

/// The writer: one transaction of [`CHANGES_PER_TRANSACTION`] changes on a schedule that makes
/// `rate` changes/s, until `stop`; `written` counts the rows its statements changed.
async fn write(
    mut conn: Conn,
    direction: Direction,
    rate: u64,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) -> Result<Conn> {
    let period = Duration::from_secs_f64(CHANGES_PER_TRANSACTION as f64 / rate.max(1) as f64);
    let started = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep_until((started + period.mul_f64(n as f64)).into()).await;
        written.fetch_add(
            conn.exec(&transaction_sql(direction, n)).await?,
            Ordering::Relaxed,
        );
        n += 1;
    }
    Ok(conn)
}

/// The backlog's statements: five tables of about 20,000 rows each (addresses with their
/// geography, customers with a computed column, e-mail addresses under a two-column key, credit
/// cards, sales reasons under a two-column key) updated whole, a transaction each.
fn backlog_sql(direction: Direction) -> Vec<String> {
    let t = |schema: &str, table: &str| match direction {
        Direction::MssqlToPg => format!("[{schema}].[{table}]"),
        Direction::PgToMssql => format!("\"{schema}\".\"{table}\""),
    };
    let modified = match direction {
        Direction::MssqlToPg => "[ModifiedDate]",
        Direction::PgToMssql => "\"ModifiedDate\"",
    };
    [
        ("Person", "Address"),
        ("Sales", "Customer"),
        ("Person", "EmailAddress"),
        ("Sales", "CreditCard"),
        ("Sales", "SalesOrderHeaderSalesReason"),
    ]
    .iter()
    .map(|(schema, table)| {
        format!(
            "UPDATE {} SET {modified} = '2033-03-03 03:03:03'",
            t(schema, table)
        )
    })
    .collect()
}

/// Transaction `n` of the writer, in the source's dialect: an address's second line (non-ASCII
/// text) and time, one product's inventory quantities, a currency rate inserted (identity key,
/// money columns) and the one inserted 20 transactions before deleted.
fn transaction_sql(direction: Direction, n: u64) -> String {
    let (begin, commit, text) = match direction {
        Direction::MssqlToPg => ("BEGIN TRANSACTION", "COMMIT TRANSACTION", "N'"),
        Direction::PgToMssql => ("BEGIN", "COMMIT", "'"),
    };
    let t = |schema: &str, table: &str| match direction {
        Direction::MssqlToPg => format!("[{schema}].[{table}]"),
        Direction::PgToMssql => format!("\"{schema}\".\"{table}\""),
    };
    let q = |c: &str| match direction {
        Direction::MssqlToPg => format!("[{c}]"),
        Direction::PgToMssql => format!("\"{c}\""),
    };
    // One rate a second per transaction, from a year of each direction's own (the rates the
    // first leg left are in the second's source): the currency rates' alternate key is the date
    // and the two currencies.
    let year = match direction {
        Direction::MssqlToPg => 2031,
        Direction::PgToMssql => 2032,
    };
    let at = |n: u64| {
        format!(
            "'{year}-{:02}-{:02} {:02}:{:02}:{:02}'",
            1 + n / (28 * 86_400) % 12,
            1 + n / 86_400 % 28,
            n / 3600 % 24,
            n / 60 % 60,
            n % 60
        )
    };
    let rate = t("Sales", "CurrencyRate");
    let currencies = format!(
        "{} = 'USD' AND {} = 'EUR'",
        q("FromCurrencyCode"),
        q("ToCurrencyCode")
    );
    let delete = match n.checked_sub(20) {
        Some(old) => format!(
            "DELETE FROM {rate} WHERE {} = {} AND {currencies}; ",
            q("CurrencyRateDate"),
            at(old)
        ),
        None => String::new(),
    };
    format!(
        "{begin}; \
         UPDATE {address} SET {line2} = {text}Étage {n} — Zürich', {modified} = {now} WHERE {address_id} = {a}; \
         UPDATE {inventory} SET {quantity} = {quantity} + 1, {modified} = {now} WHERE {product_id} = {p}; \
         INSERT INTO {rate} ({date}, {from}, {to}, {average}, {end_of_day}, {modified}) \
         VALUES ({when}, 'USD', 'EUR', 1.{frac:04}, 1.2345, {now}); \
         {delete}{commit};",
        address = t("Person", "Address"),
        inventory = t("Production", "ProductInventory"),
        line2 = q("AddressLine2"),
        modified = q("ModifiedDate"),
        address_id = q("AddressID"),
        quantity = q("Quantity"),
        product_id = q("ProductID"),
        date = q("CurrencyRateDate"),
        from = q("FromCurrencyCode"),
        to = q("ToCurrencyCode"),
        average = q("AverageRate"),
        end_of_day = q("EndOfDayRate"),
        now = at(n),
        when = at(n),
        a = 1 + (n * 37) % 29_000,
        p = 1 + (n * 13) % 1_000,
        frac = n % 10_000,
    )
}

fn markdown(
    args: &OnlineAwArgs,
    loaded: &Loaded,
    legs: &[Leg],
    postgres: &str,
    command: &str,
    started: Instant,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Online mode (issue 30): AdventureWorks, {} rows in {} tables, streamed both ways\n",
        fmt_int(loaded.rows),
        loaded.tables
    );
    report::provenance(
        &mut md,
        postgres,
        command,
        "wall time",
        started.elapsed().as_secs_f64(),
    );
    let _ = writeln!(
        md,
        "- Method: the install script loads the sample into the TDS test server; `run -f` with `online.enabled` \
         (pollInterval 100ms, heartbeatSeconds 1, maxBatchDelay 200ms, verify checksum, `schemas: [\"*\"]`) copies \
         every table to a fresh PostgreSQL database and streams; one writer connection changes \
         `Person.Address`, `Production.ProductInventory` and `Sales.CurrencyRate` at {} row changes/s \
         (transactions of {CHANGES_PER_TRANSACTION}) for {} s; lag and heartbeat delay as in `bench online`; then, with the streaming process stopped \
         (SIGSTOP), five tables of about 20,000 rows updated whole, a transaction each, and the rate it applies \
         that backlog at once continued; then the cutover. Peak RSS of the streaming process sampled every 100 ms. \
         The PostgreSQL database then streams into a fresh SQL Server under the same writer and is cut over.",
        args.rate, args.seconds
    );
    let _ = writeln!(
        md,
        "\n| direction | copy, s | written, /s | applied, /s | lag median / p99, s | heartbeat delay median / p99, s | downtime, s | drain, s | finalize, s | verify, s (share) | tables verified equal | cutover command, s | backlog: changes, applied /s | peak RSS streaming, MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for l in legs {
        let c = &l.cutover;
        let f = |k: &str| c[k].as_f64().unwrap_or(f64::NAN);
        let tables = c["verification"].as_array().map_or(0, Vec::len);
        let equal = c["verification"]
            .as_array()
            .map_or(0, |v| v.iter().filter(|t| t["ok"] == true).count());
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.0} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2} | {:.2} | {:.2} ({:.0}%) | {equal} of {tables} | {:.2} | {}, {:.0} | {} |",
            l.direction,
            l.copy_seconds,
            l.written,
            l.applied,
            pct(&l.lags, 0.5),
            pct(&l.lags, 0.99),
            pct(&l.delays, 0.5),
            pct(&l.delays, 0.99),
            f("downtime_seconds"),
            f("drain_seconds"),
            f("finalize_seconds"),
            f("verify_seconds"),
            100.0 * f("verify_seconds") / f("downtime_seconds"),
            l.cutover_wall,
            fmt_int(l.backlog.0),
            l.backlog.1,
            mib(l.rss_streaming),
        );
    }
    md
}
