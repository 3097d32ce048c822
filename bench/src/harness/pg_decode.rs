//! `bench pg-decode` (issue 30): how fast a `pgoutput` slot is read, and at what cost to the
//! reader and to PostgreSQL, by the two ways a client can read it: the slot SQL functions the
//! worker uses (`pg_logical_slot_peek_binary_changes` in batches, then
//! `pg_replication_slot_advance`, as `capture_pg` does) and the streaming replication protocol
//! (`START_REPLICATION` with standby status updates, through the `pgwire-replication` crate).
//!
//! Both decode every message with the worker's own `pgoutput` decoder down to row changes with
//! their column values as bytes. Each read runs in a child process of its own (this binary's
//! hidden `pg-decode-read`), so its peak RSS and CPU are its own; it reads its server backend's
//! (or walsender's) CPU from `/proc` before it lets the connection go.
//!
//! Workloads, on a Votes-shaped table: `big` one transaction inserting `--rows` rows; `small`
//! `--rows`/10 transactions of 5 updates and 5 inserts; `steady` the same transactions at
//! `--rate` changes/s while the reader reads (one fresh slot per read). For `big` and `small`
//! the workload is written once after a slot per read was created, so every read decodes the
//! same WAL. A transactional logical message written after the workload marks the end.

use super::worker::cpu_seconds_of;
use anyhow::{Context, Result, bail};
use futures_util::TryStreamExt;
use mssql_pg_worker::online::pgoutput::{self, Datum, Message};
use std::process::Stdio;
use std::str::FromStr;
use std::time::{Duration, Instant};
use tokio_postgres::types::ToSql;

const TABLE: &str = "pgdecode_votes";
const PUBLICATION: &str = "pgdecode_pub";
const END_PREFIX: &str = "pgdecode_end";
/// Rows in the table before the slots exist, for the updates of `small` and `steady`.
const PRELOADED: i64 = 100_000;
/// What `capture_pg` sets on its reading connection; the stream gets the same as startup options.
const SESSION: &str = "SET intervalstyle = 'iso_8601'; SET TimeZone = 'UTC'; \
     SET standard_conforming_strings = on; SET extra_float_digits = 3; SET DateStyle = 'ISO, YMD'; \
     SET bytea_output = 'hex'";
const STARTUP_OPTIONS: &str = "-c intervalstyle=iso_8601 -c TimeZone=UTC -c standard_conforming_strings=on \
     -c extra_float_digits=3 -c DateStyle=ISO,YMD -c bytea_output=hex";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    Big,
    Small,
    Steady,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadPath {
    /// `pg_logical_slot_peek_binary_changes` + `pg_replication_slot_advance`, as the worker.
    Sql,
    /// `START_REPLICATION` through pgwire-replication.
    Stream,
}

impl ReadPath {
    fn name(self) -> &'static str {
        match self {
            ReadPath::Sql => "sql",
            ReadPath::Stream => "stream",
        }
    }
}

#[derive(clap::Args)]
pub struct PgDecodeArgs {
    /// PostgreSQL, key=value (a superuser: the stream needs the REPLICATION attribute).
    #[arg(long, env = "MSSQLPG_TEST_PG_URL")]
    pg: String,
    #[arg(long, value_enum, default_value_t = Workload::Big)]
    workload: Workload,
    /// Row changes the workload writes.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// `steady`: changes per second (transactions of 10).
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Ways to read, alternated within each run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ReadPath::Sql, ReadPath::Stream])]
    path: Vec<ReadPath>,
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Rows per peek (the worker passes `maxBatchChanges`, default 10,000).
    #[arg(long, default_value_t = 10_000)]
    peek_rows: i32,
    /// Wait after a peek that drained the slot (the worker's `pollInterval`, default 500ms).
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
}

/// The hidden child: reads one slot to the end marker and prints its figures as one JSON line.
#[derive(clap::Args)]
pub struct PgDecodeReadArgs {
    #[arg(long, env = "MSSQLPG_TEST_PG_URL")]
    pg: String,
    #[arg(long)]
    slot: String,
    #[arg(long, value_enum)]
    path: ReadPath,
    #[arg(long, default_value_t = 10_000)]
    peek_rows: i32,
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
}

#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct ReadFigures {
    changes: u64,
    messages: u64,
    value_bytes: u64,
    seconds: f64,
    reader_cpu: f64,
    backend_cpu: f64,
    peak_rss_kib: u64,
    /// When the reader saw the end marker (wall clock, for the drain of `steady`).
    end_unix_micros: i64,
}

/// What the decoder keeps of a message: counts, and the value bytes touched.
#[derive(Default)]
struct Tally {
    changes: u64,
    messages: u64,
    value_bytes: u64,
    end: bool,
}

impl Tally {
    fn values(&mut self, tuple: &[Datum<'_>]) {
        for d in tuple {
            if let Datum::Text(v) | Datum::Binary(v) = d {
                self.value_bytes += v.len() as u64;
            }
        }
    }

    fn message(&mut self, m: Message<'_>) {
        self.messages += 1;
        match m {
            Message::Insert { new, .. } => {
                self.changes += 1;
                self.values(&new);
            }
            Message::Update { old, new, .. } => {
                self.changes += 1;
                if let Some((_, old)) = old {
                    self.values(&old);
                }
                self.values(&new);
            }
            Message::Delete { old, .. } => {
                self.changes += 1;
                self.values(&old.1);
            }
            Message::Message { prefix, .. } if prefix == END_PREFIX => self.end = true,
            _ => {}
        }
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn unix_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

fn own_cpu() -> f64 {
    cpu_seconds_of(std::process::id()).unwrap_or(0.0)
}

async fn connect(pg: &str) -> Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(pg, tokio_postgres::NoTls)
        .await
        .with_context(|| "connect to PostgreSQL (--pg)")?;
    tokio::spawn(conn);
    Ok(client)
}

pub async fn read(args: PgDecodeReadArgs) -> Result<()> {
    let figures = match args.path {
        ReadPath::Sql => read_sql(&args).await?,
        ReadPath::Stream => read_stream(&args).await?,
    };
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

/// Peek a batch, decode it, advance past its last commit; wait `poll_ms` when a peek drained the
/// slot; until the end marker. The statements are `capture_pg`'s.
async fn read_sql(args: &PgDecodeReadArgs) -> Result<ReadFigures> {
    let client = connect(&args.pg).await?;
    client.batch_execute(SESSION).await?;
    let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
    let pid = pid as u32;
    let (cpu0, backend0, t0) = (own_cpu(), cpu_seconds_of(pid).unwrap_or(0.0), Instant::now());
    let mut tally = Tally::default();
    let mut acked: u64 = 0;
    while !tally.end {
        let params: [&(dyn ToSql + Sync); 3] = [&args.slot, &args.peek_rows, &PUBLICATION];
        let rows = client
            .query_raw(
                "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, $2, 'proto_version', '1', \
                 'publication_names', $3, 'messages', 'true')",
                params,
            )
            .await
            .context("peek")?;
        futures_util::pin_mut!(rows);
        let mut n: i64 = 0;
        let mut last_end = acked;
        while let Some(row) = rows.try_next().await.context("peek")? {
            n += 1;
            let data: &[u8] = row.try_get(0)?;
            let m = pgoutput::decode(data)?;
            if let Message::Commit { end_lsn, .. } = m {
                last_end = end_lsn;
            }
            tally.message(m);
        }
        if last_end > acked {
            let lsn = pgoutput::lsn_text(last_end);
            client
                .execute(
                    "SELECT pg_replication_slot_advance(slot_name, $2::text::pg_lsn) FROM pg_replication_slots \
                     WHERE slot_name = $1 AND confirmed_flush_lsn < $2::text::pg_lsn",
                    &[&args.slot, &lsn],
                )
                .await
                .context("advance")?;
            acked = last_end;
        }
        if !tally.end && n < i64::from(args.peek_rows) {
            tokio::time::sleep(Duration::from_millis(args.poll_ms)).await;
        }
    }
    let end = unix_micros();
    let seconds = t0.elapsed().as_secs_f64();
    let backend_cpu = cpu_seconds_of(pid).unwrap_or(0.0) - backend0;
    Ok(ReadFigures {
        changes: tally.changes,
        messages: tally.messages,
        value_bytes: tally.value_bytes,
        seconds,
        reader_cpu: own_cpu() - cpu0,
        backend_cpu,
        peak_rss_kib: peak_rss_kib(),
        end_unix_micros: end,
    })
}

/// START_REPLICATION; every commit acknowledged as it arrives (status updates every second);
/// until the end marker.
async fn read_stream(args: &PgDecodeReadArgs) -> Result<ReadFigures> {
    use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
    let config = tokio_postgres::Config::from_str(&args.pg).context("--pg")?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => bail!("--pg: a TCP host is needed"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let password = config
        .get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    let cfg = ReplicationConfig::new(
        host,
        config.get_user().unwrap_or("postgres"),
        password,
        config.get_dbname().unwrap_or("postgres"),
        args.slot.clone(),
        PUBLICATION,
    )
    .with_port(port)
    .with_status_interval(Duration::from_secs(1))
    .with_options(STARTUP_OPTIONS)
    .with_application_name("pgdecode");
    let mut client = ReplicationClient::connect_gated(cfg).await?;
    let rows = client.simple_query("SELECT pg_backend_pid()").await?;
    let pid: u32 = rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|b| std::str::from_utf8(&b).ok().and_then(|s| s.parse().ok()))
        .context("walsender pid")?;
    let (cpu0, backend0, t0) = (own_cpu(), cpu_seconds_of(pid).unwrap_or(0.0), Instant::now());
    client.start().await?;
    client.wait_started().await?;
    let mut tally = Tally::default();
    while !tally.end {
        let Some(ev) = client.recv().await? else {
            bail!("the replication stream ended before the end marker");
        };
        match ev {
            ReplicationEvent::XLogData { data, .. } => tally.message(pgoutput::decode(&data)?),
            ReplicationEvent::Begin { .. } => tally.messages += 1,
            ReplicationEvent::Commit { end_lsn, .. } => {
                tally.messages += 1;
                client.update_applied_lsn(Lsn::from_u64(end_lsn.as_u64()));
            }
            ReplicationEvent::Message { prefix, .. } => {
                tally.messages += 1;
                if prefix == END_PREFIX {
                    tally.end = true;
                }
            }
            ReplicationEvent::KeepAlive { .. } | ReplicationEvent::StoppedAt { .. } => {}
        }
    }
    let end = unix_micros();
    let seconds = t0.elapsed().as_secs_f64();
    let backend_cpu = cpu_seconds_of(pid).unwrap_or(0.0) - backend0;
    let reader_cpu = own_cpu() - cpu0;
    client.stop();
    let _ = tokio::time::timeout(Duration::from_secs(5), client.join()).await;
    Ok(ReadFigures {
        changes: tally.changes,
        messages: tally.messages,
        value_bytes: tally.value_bytes,
        seconds,
        reader_cpu,
        backend_cpu,
        peak_rss_kib: peak_rss_kib(),
        end_unix_micros: end,
    })
}

fn slot_name(path: ReadPath, run: usize) -> String {
    format!("pgdecode_{}_{run}", path.name())
}

/// Starts a reader child on `slot`.
fn spawn_reader(args: &PgDecodeArgs, slot: &str, path: ReadPath) -> Result<tokio::process::Child> {
    let exe = std::env::current_exe()?;
    tokio::process::Command::new(exe)
        .args(["pg-decode-read", "--slot", slot, "--path", path.name()])
        .args(["--peek-rows", &args.peek_rows.to_string()])
        .args(["--poll-ms", &args.poll_ms.to_string()])
        .arg("--pg")
        .arg(&args.pg)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("start the reader")
}

async fn reader_figures(child: tokio::process::Child) -> Result<ReadFigures> {
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!("the reader failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().context("the reader printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

async fn setup(client: &tokio_postgres::Client, workload: Workload) -> Result<()> {
    client
        .batch_execute(&format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'pgdecode\\_%';
             DROP PUBLICATION IF EXISTS {PUBLICATION};
             DROP TABLE IF EXISTS {TABLE};
             CREATE TABLE {TABLE} (id bigint PRIMARY KEY, post_id int NOT NULL, vote_type smallint NOT NULL,
                 created timestamp NOT NULL, user_id int, bounty int);
             CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE};
             CREATE OR REPLACE PROCEDURE pgdecode_small(n bigint, rate double precision)
             LANGUAGE plpgsql AS $$
             DECLARE
               next_id bigint := (SELECT coalesce(max(id), 0) FROM {TABLE});
               started timestamptz := clock_timestamp();
               k bigint;
               ahead double precision;
             BEGIN
               FOR i IN 1..n LOOP
                 k := (i * 5) % ({PRELOADED} - 5) + 1;
                 UPDATE {TABLE} SET vote_type = vote_type % 15 + 1, bounty = i::int WHERE id BETWEEN k AND k + 4;
                 INSERT INTO {TABLE} SELECT next_id + g, ((next_id + g) * 7 % 1000000)::int, 2,
                     timestamp '2008-07-31' + (next_id + g) * interval '1 second',
                     CASE WHEN g % 3 = 0 THEN NULL ELSE g::int END, NULL FROM generate_series(1, 5) g;
                 next_id := next_id + 5;
                 COMMIT;
                 IF rate > 0 THEN
                   ahead := i * 10 / rate - extract(epoch FROM clock_timestamp() - started);
                   IF ahead > 0.002 THEN PERFORM pg_sleep(ahead); END IF;
                 END IF;
               END LOOP;
             END $$;"
        ))
        .await
        .context("set up the table, publication and procedure")?;
    if workload != Workload::Big {
        client
            .batch_execute(&format!(
                "{} FROM generate_series(1, {PRELOADED}) g",
                insert_select()
            ))
            .await?;
    }
    client.batch_execute("CHECKPOINT").await?;
    Ok(())
}

fn insert_select() -> String {
    format!(
        "INSERT INTO {TABLE} SELECT g, (g * 7 % 1000000)::int, (g % 15 + 1)::smallint, \
         timestamp '2008-07-31' + g * interval '1 second', CASE WHEN g % 3 = 0 THEN NULL ELSE (g % 100000)::int END, \
         CASE WHEN g % 50 = 0 THEN 50 ELSE NULL END"
    )
}

async fn create_slot(client: &tokio_postgres::Client, slot: &str) -> Result<()> {
    client
        .execute(
            "SELECT pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&slot],
        )
        .await
        .with_context(|| format!("create slot {slot}"))?;
    Ok(())
}

/// Drops a slot once the reader's session let it go (a walsender outlives its client briefly).
async fn drop_slot(client: &tokio_postgres::Client, slot: &str) -> Result<()> {
    for _ in 0..100 {
        let active: bool = client
            .query_one(
                "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                &[&slot],
            )
            .await?
            .get(0);
        if !active {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .execute("SELECT pg_drop_replication_slot($1)", &[&slot])
        .await
        .with_context(|| format!("drop slot {slot}"))?;
    Ok(())
}

async fn write_workload(client: &tokio_postgres::Client, args: &PgDecodeArgs, rate: f64) -> Result<()> {
    match args.workload {
        Workload::Big => {
            client
                .batch_execute(&format!(
                    "{} FROM generate_series(1, {}) g",
                    insert_select(),
                    args.rows
                ))
                .await?
        }
        Workload::Small | Workload::Steady => {
            // A procedure's COMMIT needs the simple query protocol.
            client
                .batch_execute(&format!("CALL pgdecode_small({}, {rate})", args.rows / 10))
                .await?;
        }
    }
    client
        .execute("SELECT pg_logical_emit_message(true, $1, 'end')", &[&END_PREFIX])
        .await?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

pub async fn run(args: PgDecodeArgs, command: String) -> Result<()> {
    let client = connect(&args.pg).await?;
    let version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    setup(&client, args.workload).await?;
    let mut results: Vec<(ReadPath, usize, ReadFigures, Option<f64>)> = Vec::new();
    if args.workload == Workload::Steady {
        for run in 0..args.runs {
            for &path in &args.path {
                let slot = slot_name(path, run);
                create_slot(&client, &slot).await?;
                let child = spawn_reader(&args, &slot, path)?;
                let t0 = Instant::now();
                write_workload(&client, &args, args.rate as f64).await?;
                let written = t0.elapsed();
                let written_at = unix_micros();
                let figures = reader_figures(child).await?;
                let drain = (figures.end_unix_micros - written_at) as f64 / 1e6;
                eprintln!(
                    "run {run} {}: wrote {} changes in {:.1} s; {figures:?}, drained {drain:.2} s after",
                    path.name(),
                    args.rows,
                    written.as_secs_f64()
                );
                drop_slot(&client, &slot).await?;
                results.push((path, run, figures, Some(drain)));
            }
        }
    } else {
        for run in 0..args.runs {
            for &path in &args.path {
                create_slot(&client, &slot_name(path, run)).await?;
            }
        }
        let t0 = Instant::now();
        write_workload(&client, &args, 0.0).await?;
        eprintln!("workload written in {:.1} s", t0.elapsed().as_secs_f64());
        client.batch_execute("CHECKPOINT").await?;
        for run in 0..args.runs {
            for &path in &args.path {
                let slot = slot_name(path, run);
                let figures = reader_figures(spawn_reader(&args, &slot, path)?).await?;
                eprintln!("run {run} {}: {figures:?}", path.name());
                drop_slot(&client, &slot).await?;
                results.push((path, run, figures, None));
            }
        }
    }
    println!(
        "\n`{command}` — PostgreSQL {version}, workload {:?}, {} row changes{}\n",
        args.workload,
        args.rows,
        if args.workload == Workload::Steady {
            format!(" at {}/s", args.rate)
        } else {
            String::new()
        }
    );
    println!(
        "| path | runs | changes | changes/s (median; min-max) | reader CPU s | backend CPU s | reader µs CPU per change | backend µs CPU per change | peak RSS MiB |{}\n|---|---|---|---|---|---|---|---|---|{}",
        if args.workload == Workload::Steady {
            " drain after the writer, s |"
        } else {
            ""
        },
        if args.workload == Workload::Steady {
            "---|"
        } else {
            ""
        }
    );
    for &path in &args.path {
        let of: Vec<&ReadFigures> = results.iter().filter(|r| r.0 == path).map(|r| &r.2).collect();
        let rates: Vec<f64> = of.iter().map(|f| f.changes as f64 / f.seconds).collect();
        let (lo, hi) = (
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        );
        let changes = of.first().map(|f| f.changes).unwrap_or(0);
        let per = |v: f64| v / changes.max(1) as f64 * 1e6;
        let reader = median(of.iter().map(|f| f.reader_cpu).collect());
        let backend = median(of.iter().map(|f| f.backend_cpu).collect());
        let drain = median(
            results
                .iter()
                .filter(|r| r.0 == path)
                .filter_map(|r| r.3)
                .collect(),
        );
        println!(
            "| {} | {} | {} | {:.0} ({:.0}-{:.0}) | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |{}",
            path.name(),
            of.len(),
            changes,
            median(rates.clone()),
            lo,
            hi,
            reader,
            backend,
            per(reader),
            per(backend),
            median(of.iter().map(|f| f.peak_rss_kib as f64 / 1024.0).collect()),
            if args.workload == Workload::Steady {
                format!(" {drain:.2} |")
            } else {
                String::new()
            }
        );
    }
    client
        .batch_execute(&format!(
            "DROP PUBLICATION IF EXISTS {PUBLICATION}; DROP TABLE IF EXISTS {TABLE}; \
             DROP PROCEDURE IF EXISTS pgdecode_small(bigint, double precision)"
        ))
        .await?;
    Ok(())
}
