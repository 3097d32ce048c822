//! Faults injected mid-copy, in both directions: a TCP proxy between the worker and a database
//! resets, stalls (stops reading and writing) or blackholes (reads and drops, never answers) a
//! connection once it has carried N bytes, and a real PostgreSQL is restarted mid-copy. Each case
//! ends exact (counts, checksums, no duplicates) after retries from the checkpoint, or, when the
//! fault does not go away, with an error naming the endpoint and the table in bounded time. Every
//! test is itself bounded, so a regression fails instead of hanging CI.
//!
//! Silence that is not a fault is waited for: a statement waiting for a lock another session
//! holds, longer than the stall limit, ends the first attempt without a retry (the server says
//! the session still works on it).
#![allow(clippy::unwrap_used)]

mod common;

use common::{PrivatePg, ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::{EngineError as _, EngineExt as _};
use mssql_pg_worker::error_text::error_text;
use mssql_pg_worker::mssql::connect::MssqlEndpoint;
use mssql_pg_worker::mssql_to_pg::{MssqlToPgEngine as Engine, MssqlToPgError as EngineError};
use mssql_pg_worker::options::{Mode, Options, VerifyMode};
use mssql_pg_worker::pg::connect::PgEndpoint;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use mssql_pg_worker::pipeline::{CopyOptions, TaskReport};
use mssql_pg_worker::retry::RetryPolicy;
use mssql_pg_worker::timeouts::Timeouts;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// No test may take longer (they take seconds; this only keeps a hang from blocking CI).
const BOUND: Duration = Duration::from_secs(180);

const ROWS: i64 = 40_000;

#[derive(Clone, Debug)]
enum Fault {
    /// Both sides get a RST.
    Reset,
    /// Nothing more is read or written; the client's socket stays open (the server's is closed,
    /// as a server would after its own timeout, so it holds no locks).
    Stall,
    /// The client's bytes are read and dropped; nothing ever comes back.
    Blackhole,
    /// Forwarding pauses while the upstream PostgreSQL (data directory given) restarts, then goes
    /// on: the client sees what the server sends on shutdown.
    RestartPostgres(PathBuf),
    /// As `RestartPostgres`, with an immediate shutdown: the server comes back through crash
    /// recovery.
    CrashPostgres(PathBuf),
}

/// A TCP proxy in front of `upstream`: the first `budget` connections that carry more than
/// `after` bytes (both directions) meet `fault`; the rest pass through.
struct Proxy {
    addr: SocketAddr,
    hits: Arc<AtomicU32>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, fault: Fault, after: u64, budget: u32) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let budget = Arc::new(AtomicU32::new(budget));
        let hits = Arc::new(AtomicU32::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (fault, budget, hits) = (fault.clone(), budget.clone(), counted.clone());
                tokio::spawn(async move {
                    let _ = relay(client, upstream, fault, after, budget, hits).await;
                });
            }
        });
        Proxy { addr, hits }
    }

    fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    fault: Fault,
    after: u64,
    budget: Arc<AtomicU32>,
    hits: Arc<AtomicU32>,
) -> std::io::Result<()> {
    let mut up = TcpStream::connect(upstream).await?;
    let (mut a, mut b) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let mut total = 0u64;
    let mut armed = true;
    loop {
        tokio::select! {
            r = client.read(&mut a) => {
                let n = r?;
                if n == 0 { return Ok(()) }
                up.write_all(&a[..n]).await?;
                total += n as u64;
            }
            r = up.read(&mut b) => {
                let n = r?;
                if n == 0 { return Ok(()) }
                client.write_all(&b[..n]).await?;
                total += n as u64;
            }
        }
        if !armed || total < after {
            continue;
        }
        armed = false;
        if budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
            .is_err()
        {
            continue;
        }
        hits.fetch_add(1, Ordering::SeqCst);
        match &fault {
            Fault::Reset => {
                client.set_zero_linger()?;
                up.set_zero_linger()?;
                return Ok(());
            }
            Fault::Stall => {
                drop(up);
                // Held open and silent until the test's runtime ends.
                tokio::time::sleep(BOUND).await;
                return Ok(());
            }
            Fault::Blackhole => {
                drop(up);
                while client.read(&mut a).await? > 0 {}
                return Ok(());
            }
            Fault::RestartPostgres(dir) | Fault::CrashPostgres(dir) => {
                let how = if matches!(fault, Fault::CrashPostgres(_)) {
                    "crash"
                } else {
                    "restart"
                };
                let out = tokio::process::Command::new("bash")
                    .arg(script())
                    .arg(how)
                    .arg(dir)
                    .output()
                    .await?;
                assert!(
                    out.status.success(),
                    "restart: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/postgres.sh")
}

/// Small limits, so that every case takes seconds.
fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        stall: Duration::from_secs(2),
        lock: Duration::from_secs(2),
    }
}

fn retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(2),
    }
}

fn pg_addr(t: &PgEndpoint) -> SocketAddr {
    format!("{}:{}", t.host, t.port).parse().unwrap()
}

fn ms_addr(s: &MssqlEndpoint) -> SocketAddr {
    format!("{}:{}", s.host, s.port).parse().unwrap()
}

/// `dbo.Facts` with `ROWS` rows on the TDS server.
async fn source_table(source: &MssqlEndpoint) {
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Facts (Id int NOT NULL PRIMARY KEY, V nvarchar(40) NOT NULL, N bigint NOT NULL)",
    )
    .await;
    for block in 0..ROWS / 1000 {
        let values = (1..=1000)
            .map(|i| {
                let id = block * 1000 + i;
                format!("({id}, N'value number {id}', {})", id * 7)
            })
            .collect::<Vec<_>>()
            .join(", ");
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.Facts (Id, V, N) VALUES {values}"),
        )
        .await;
    }
}

/// A forward engine (TDS server -> PostgreSQL) with small limits and chunks of 2,000 rows.
fn forward(source: &MssqlEndpoint, target: PgEndpoint, schema: &str, attempts: u32) -> Engine {
    let mut e = tds_engine(source, schema, &format!("test/{schema}"));
    e.source.timeouts = timeouts();
    e.target = PgEndpoint {
        timeouts: timeouts(),
        ..target
    };
    e.options.retry = retry(attempts);
    e.copy = CopyOptions {
        chunk: mssql_pg_worker::copy::chunk::ChunkLimit::rows(2_000),
        retry: retry(attempts),
        ..CopyOptions::default()
    };
    e
}

/// Prepare, copy, finalize, verify; the copy's reports.
async fn run_forward(e: &Engine) -> Result<Vec<TaskReport>, EngineError> {
    let prepared = e.prepare().await?;
    let reports = e.copy_all(&prepared.plan).await?;
    e.finalize(&prepared.plan).await?;
    let v = e.verify(&prepared.plan).await?;
    assert!(v.iter().all(|t| t.ok) && v.len() == 1, "{v:#?}");
    assert_eq!(v[0].source_rows, ROWS);
    Ok(reports)
}

/// Every row once, with its values.
async fn assert_exact_in_pg(pg: &tokio_postgres::Client, schema: &str) {
    let r = pg
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT \"Id\"), sum(\"N\")::bigint, \
                 bool_and(\"V\" = 'value number ' || \"Id\") FROM \"{schema}\".\"Facts\""
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            r.get::<_, i64>(0),
            r.get::<_, i64>(1),
            r.get::<_, i64>(2),
            r.get::<_, bool>(3)
        ),
        (ROWS, ROWS, 7 * ROWS * (ROWS + 1) / 2, true)
    );
}

/// A forward copy whose `side` connection meets `fault` once, mid-copy: retried from the
/// checkpoint, it ends exact on the second attempt.
async fn forward_fault_once(name: &str, fault: Fault, on_source: bool) {
    let (_server, source) = start_tds_server();
    source_table(&source).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, name).await;
    let target = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
    // The copy connection carries ~2 MB; planning and DDL far less than 300 kB.
    let (proxy, e) = if on_source {
        let proxy = Proxy::start(ms_addr(&source), fault, 300_000, 1).await;
        let mut via = source.clone();
        via.port = proxy.addr.port();
        (proxy, forward(&via, target, &schema, 4))
    } else {
        let proxy = Proxy::start(pg_addr(&target), fault, 300_000, 1).await;
        let via = PgEndpoint {
            port: proxy.addr.port(),
            ..target
        };
        (proxy, forward(&source, via, &schema, 4))
    };
    let reports = run_forward(&e).await.unwrap();
    assert_eq!(proxy.hits(), 1, "the fault was injected once");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].attempts, 2, "{reports:#?}");
    assert_eq!(reports[0].rows, ROWS as u64, "{reports:#?}");
    assert_eq!(reports[0].total_rows, ROWS);
    assert_exact_in_pg(&pg, &schema).await;
}

#[tokio::test]
async fn sql_server_source_reset_mid_copy_is_retried_and_exact() {
    tokio::time::timeout(BOUND, forward_fault_once("f_ms_reset", Fault::Reset, true))
        .await
        .unwrap();
}

#[tokio::test]
async fn sql_server_source_stall_mid_copy_is_retried_and_exact() {
    tokio::time::timeout(BOUND, forward_fault_once("f_ms_stall", Fault::Stall, true))
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_target_reset_mid_copy_is_retried_and_exact() {
    tokio::time::timeout(BOUND, forward_fault_once("f_pg_reset", Fault::Reset, false))
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_target_blackhole_mid_copy_is_retried_and_exact() {
    tokio::time::timeout(BOUND, forward_fault_once("f_pg_hole", Fault::Blackhole, false))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_target_that_stays_stalled_fails_naming_it_and_reports_the_committed_rows() {
    tokio::time::timeout(BOUND, async {
        let (_server, source) = start_tds_server();
        source_table(&source).await;
        let pg = common::pg_connect().await;
        let schema = common::fresh_schema(&pg, "f_pg_stall_always").await;
        let target = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
        let proxy = Proxy::start(pg_addr(&target), Fault::Stall, 300_000, u32::MAX).await;
        let via = PgEndpoint {
            port: proxy.addr.port(),
            ..target
        };
        let e = forward(&source, via, &schema, 3);
        let prepared = e.prepare().await.unwrap();
        let err = e.copy_all(&prepared.plan).await.unwrap_err();
        let message = error_text(&err);
        let endpoint = format!("PostgreSQL at 127.0.0.1:{}", proxy.addr.port());
        assert!(message.contains("gave up after 3 attempts"), "{message}");
        assert!(
            message.contains(&format!("no data from {endpoint}"))
                || message.contains(&format!("{endpoint} accepted no data")),
            "{message}"
        );
        assert!(message.contains("while copying dbo.Facts"), "{message}");
        assert_eq!(proxy.hits(), 3);
        // The report counts what is committed, not 0.
        let reports = err.task_reports();
        let committed: i64 = pg
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"Facts\""), &[])
            .await
            .unwrap()
            .get(0);
        assert!(committed > 0 && committed < ROWS, "{committed}");
        assert_eq!(reports.len(), 1, "{reports:#?}");
        assert_eq!(reports[0].total_rows, committed, "{reports:#?}");
        assert_eq!(reports[0].rows, committed as u64);
        assert_eq!(reports[0].attempts, 3);
        assert!(reports[0].error.as_deref().is_some_and(|e| e.contains(&endpoint)));
    })
    .await
    .unwrap();
}

/// A copy waiting three stall limits for a lock on the PostgreSQL target (held by another session
/// on its table) succeeds in its first attempt: the server still runs the statement, so it is no
/// stall (with one attempt allowed, a stall would fail the copy).
#[tokio::test]
async fn a_lock_wait_on_the_postgres_target_longer_than_the_stall_limit_is_waited_for() {
    tokio::time::timeout(BOUND, async {
        let (_server, source) = start_tds_server();
        source_table(&source).await;
        let pg = common::pg_connect().await;
        let schema = common::fresh_schema(&pg, "f_pg_lock_wait").await;
        let target = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
        let e = forward(&source, target, &schema, 1);
        let prepared = e.prepare().await.unwrap();
        let holder = common::pg_connect().await;
        holder
            .batch_execute(&format!("BEGIN; LOCK TABLE \"{schema}\".\"Facts\" IN SHARE MODE"))
            .await
            .unwrap();
        let held = 3 * timeouts().stall;
        let release = tokio::spawn(async move {
            tokio::time::sleep(held).await;
            holder.batch_execute("COMMIT").await.unwrap();
        });
        let started = std::time::Instant::now();
        let reports = e.copy_all(&prepared.plan).await.unwrap();
        release.await.unwrap();
        assert!(started.elapsed() >= held, "the copy waited for the lock");
        assert_eq!(reports[0].attempts, 1, "{reports:#?}");
        assert_exact_in_pg(&pg, &schema).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn postgres_restart_mid_copy_resumes_from_the_checkpoint_exactly() {
    let private = PrivatePg::start();
    tokio::time::timeout(BOUND, async {
        let (_server, source) = start_tds_server();
        source_table(&source).await;
        let target = PgEndpoint::from_conn_str(&private.url).unwrap();
        let proxy = Proxy::start(
            pg_addr(&target),
            Fault::RestartPostgres(PathBuf::from(&private.dir)),
            300_000,
            1,
        )
        .await;
        let via = PgEndpoint {
            port: proxy.addr.port(),
            ..target
        };
        // Connections refused while the server restarts are retried too.
        let e = forward(&source, via, "public", 8);
        let reports = run_forward(&e).await.unwrap();
        assert_eq!(proxy.hits(), 1);
        assert!(reports[0].attempts >= 2, "{reports:#?}");
        assert_eq!(reports[0].rows, ROWS as u64);
        let (pg, conn) = tokio_postgres::connect(&private.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        assert_exact_in_pg(&pg, "public").await;
    })
    .await
    .unwrap();
    drop(private);
}

/// `unlogged: true` and a PostgreSQL crash mid-copy: crash recovery empties the UNLOGGED table
/// while the checkpoints still count its rows. The retry does not resume into it: the copy fails
/// at once (no retry gets past it) naming the table and what to run, and running the plan step
/// again copies it over, exactly. A crash after the copy, before finalize, is caught by finalize
/// before the table is switched to LOGGED.
#[tokio::test]
async fn an_unlogged_table_a_postgres_crash_emptied_is_copied_again_never_resumed_into() {
    let private = PrivatePg::start();
    tokio::time::timeout(BOUND, async {
        let (_server, source) = start_tds_server();
        source_table(&source).await;
        let target = PgEndpoint::from_conn_str(&private.url).unwrap();
        let (pg, conn) = tokio_postgres::connect(&private.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let proxy = Proxy::start(
            pg_addr(&target),
            Fault::CrashPostgres(PathBuf::from(&private.dir)),
            300_000,
            1,
        )
        .await;
        let via = PgEndpoint {
            port: proxy.addr.port(),
            ..target.clone()
        };
        let mut e = forward(&source, via, "public", 8);
        e.options.unlogged = true;
        let prepared = e.prepare().await.unwrap();
        let err = e.copy_all(&prepared.plan).await.unwrap_err();
        assert_eq!(proxy.hits(), 1);
        let text = error_text(&err);
        assert!(err.is_permanent(), "{text}");
        for part in [
            "public.Facts",
            "UNLOGGED",
            "crash recovery",
            "run the plan step again",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
        let again = e.prepare().await.unwrap();
        assert!(!again.resumed, "a resume would skip the lost rows");
        e.copy_all(&again.plan).await.unwrap();
        e.finalize(&again.plan).await.unwrap();
        assert!(e.verify(&again.plan).await.unwrap().iter().all(|v| v.ok));
        drop(pg);
        let (pg, conn) = tokio_postgres::connect(&private.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        assert_exact_in_pg(&pg, "public").await;

        // Copied, then a crash before finalize.
        let mut e = forward(&source, target.clone(), "after_copy", 8);
        e.options.unlogged = true;
        let prepared = e.prepare().await.unwrap();
        e.copy_all(&prepared.plan).await.unwrap();
        drop(pg);
        private.crash();
        let err = e.finalize(&prepared.plan).await.unwrap_err();
        assert!(error_text(&err).contains("after_copy.Facts"), "{err}");
        let again = e.prepare().await.unwrap();
        assert!(!again.resumed);
        e.copy_all(&again.plan).await.unwrap();
        e.finalize(&again.plan).await.unwrap();
        assert!(e.verify(&again.plan).await.unwrap().iter().all(|v| v.ok));
        let (pg, conn) = tokio_postgres::connect(&private.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        assert_exact_in_pg(&pg, "after_copy").await;
    })
    .await
    .unwrap();
    drop(private);
}

/// `facts` with `ROWS` rows in a fresh PostgreSQL schema.
async fn reverse_source_table(pg: &tokio_postgres::Client, name: &str) -> String {
    let schema = common::fresh_schema(pg, name).await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".facts (id bigint PRIMARY KEY, v text NOT NULL, n bigint NOT NULL);
         INSERT INTO \"{schema}\".facts SELECT g, 'value number ' || g, g * 7 FROM generate_series(1, {ROWS}) g;
         ANALYZE \"{schema}\".facts;"
    ))
    .await
    .unwrap();
    schema
}

/// A reverse engine (PostgreSQL -> TDS server) with small limits and chunks of 2,000 rows.
fn reverse(source: PgEndpoint, target: MssqlEndpoint, schema: &str, attempts: u32) -> Arc<PgToMssqlEngine> {
    Arc::new(PgToMssqlEngine {
        source: PgEndpoint {
            timeouts: timeouts(),
            ..source
        },
        target: MssqlEndpoint {
            timeouts: timeouts(),
            ..target
        },
        options: Options {
            migration: format!("test/{schema}"),
            source_schema: schema.into(),
            target_schema: "dbo".into(),
            verify: VerifyMode::Checksum,
            mode: Mode::DropRecreate,
            retry: retry(attempts),
            ..Options::default()
        },
        copy: CopyOptions {
            chunk: mssql_pg_worker::copy::chunk::ChunkLimit::rows(2_000),
            retry: retry(attempts),
            ..CopyOptions::default()
        },
    })
}

#[tokio::test]
async fn reverse_copy_survives_a_postgres_source_reset_and_a_sql_server_target_stall() {
    tokio::time::timeout(BOUND, async {
        let (_server, target) = start_tds_server();
        let pg = common::pg_connect().await;
        let schema = reverse_source_table(&pg, "f_rev").await;
        let source = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
        let pg_proxy = Proxy::start(pg_addr(&source), Fault::Reset, 300_000, 1).await;
        let ms_proxy = Proxy::start(ms_addr(&target), Fault::Stall, 300_000, 1).await;
        let mut ms_via = target.clone();
        ms_via.port = ms_proxy.addr.port();
        let pg_via = PgEndpoint {
            port: pg_proxy.addr.port(),
            ..source
        };
        let e = reverse(pg_via, ms_via, &schema, 5);
        let prepared = e.prepare().await.unwrap();
        let reports = e.copy_all(&prepared.plan).await.unwrap();
        e.finalize(&prepared.plan).await.unwrap();
        let v = e.verify(&prepared.plan).await.unwrap();
        assert!(v.iter().all(|t| t.ok) && v[0].source_rows == ROWS, "{v:#?}");
        assert_eq!((pg_proxy.hits(), ms_proxy.hits()), (1, 1));
        // Both faults may meet the first attempt, or one each the first two.
        assert!(reports[0].attempts >= 2, "{reports:#?}");
        assert_eq!(reports[0].rows, ROWS as u64);
        let mut ms = target.connect().await.unwrap();
        let r = ms
            .simple_query(
                "SELECT COUNT_BIG(*), COUNT_BIG(DISTINCT id), SUM(n), \
                 SUM(CASE WHEN v = CONCAT(N'value number ', id) THEN 1 ELSE 0 END) FROM dbo.facts",
            )
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.get::<i64, _>(0), Some(ROWS));
        assert_eq!(r.get::<i64, _>(1), Some(ROWS));
        assert_eq!(r.get::<i64, _>(2), Some(7 * ROWS * (ROWS + 1) / 2));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_sql_server_target_that_stays_blackholed_fails_naming_it_in_bounded_time() {
    tokio::time::timeout(BOUND, async {
        let (_server, target) = start_tds_server();
        let pg = common::pg_connect().await;
        let schema = reverse_source_table(&pg, "f_rev_hole").await;
        let source = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
        let proxy = Proxy::start(ms_addr(&target), Fault::Blackhole, 300_000, u32::MAX).await;
        let mut via = target.clone();
        via.port = proxy.addr.port();
        let e = reverse(source, via, &schema, 2);
        let prepared = e.prepare().await.unwrap();
        let err = e.copy_all(&prepared.plan).await.unwrap_err();
        let message = error_text(&err);
        let endpoint = format!("SQL Server at 127.0.0.1:{}", proxy.addr.port());
        assert!(message.contains("gave up after 2 attempts with"), "{message}");
        assert!(message.contains(&format!("no data from {endpoint}")), "{message}");
        assert!(
            message.contains(&format!("while copying {schema}.facts")),
            "{message}"
        );
        let reports = err.task_reports();
        let mut ms = target.connect().await.unwrap();
        let committed = common::ms_scalar::<i64>(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.facts")
            .await
            .unwrap();
        assert!(committed > 0 && committed < ROWS, "{committed}");
        assert_eq!(reports.len(), 1, "{reports:#?}");
        assert_eq!(reports[0].total_rows, committed, "{reports:#?}");
        assert_eq!(reports[0].attempts, 2);
    })
    .await
    .unwrap();
}

/// The same towards SQL Server: another session of the test server holds its write lock, so the
/// copy's first write waits three stall limits; the server still has the session, so the first
/// attempt waits and succeeds.
#[tokio::test]
async fn a_lock_wait_on_the_sql_server_target_longer_than_the_stall_limit_is_waited_for() {
    tokio::time::timeout(BOUND, async {
        let (_server, target) = start_tds_server();
        let pg = common::pg_connect().await;
        let schema = reverse_source_table(&pg, "f_rev_lock_wait").await;
        let source = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
        let e = reverse(source, target.clone(), &schema, 1);
        let prepared = e.prepare().await.unwrap();
        let mut holder = target.connect().await.unwrap();
        ms_exec(&mut holder, "CREATE TABLE dbo.held (x int NOT NULL)").await;
        ms_exec(
            &mut holder,
            "BEGIN TRANSACTION; INSERT INTO dbo.held (x) VALUES (1)",
        )
        .await;
        let held = 3 * timeouts().stall;
        let release = tokio::spawn(async move {
            tokio::time::sleep(held).await;
            ms_exec(&mut holder, "COMMIT TRANSACTION").await;
        });
        let started = std::time::Instant::now();
        let reports = e.copy_all(&prepared.plan).await.unwrap();
        release.await.unwrap();
        assert!(started.elapsed() >= held, "the copy waited for the lock");
        assert_eq!(reports[0].attempts, 1, "{reports:#?}");
        let mut ms = target.connect().await.unwrap();
        let rows = common::ms_scalar::<i64>(&mut ms, "SELECT COUNT_BIG(*) FROM dbo.facts").await;
        assert_eq!(rows, Some(ROWS));
    })
    .await
    .unwrap();
}

/// A server that accepts connections and never answers (issue 17, failure 3).
async fn silent_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    addr
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_fails_the_connect_in_bounded_time() {
    tokio::time::timeout(BOUND, async {
        let addr = silent_server().await;
        let short = Timeouts {
            connect: Duration::from_secs(1),
            stall: Duration::from_secs(2),
            lock: Duration::from_secs(2),
        };
        let pg = PgEndpoint {
            port: addr.port(),
            timeouts: short,
            ..PgEndpoint::from_conn_str(&common::pg_url()).unwrap()
        };
        let err = pg.connect().await.err().unwrap();
        let message = error_text(&err);
        assert!(
            message.contains(&format!("PostgreSQL at 127.0.0.1:{}", addr.port())),
            "{message}"
        );
        assert!(
            message.contains("within 1 s (spec.timeouts.connectSeconds)"),
            "{message}"
        );

        let (_server, mut ms) = start_tds_server();
        ms.port = addr.port();
        ms.timeouts = short;
        let err = ms.connect().await.err().unwrap();
        let message = error_text(&err);
        assert!(
            message.contains(&format!("SQL Server at 127.0.0.1:{}", addr.port())),
            "{message}"
        );
        assert!(
            message.contains("within 1 s (spec.timeouts.connectSeconds)"),
            "{message}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn run_against_a_target_that_never_answers_ends_with_a_clear_error() {
    tokio::time::timeout(BOUND, async {
        let (_server, source) = start_tds_server();
        let mut ms = source.connect().await.unwrap();
        ms_exec(&mut ms, "CREATE TABLE dbo.T (Id int NOT NULL PRIMARY KEY)").await;
        let silent = silent_server().await;
        let file = std::env::temp_dir().join(format!("mssqlpg-faults-{}.yaml", std::process::id()));
        std::fs::write(
            &file,
            format!(
                "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: silent-target, namespace: tests}}
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {}, database: {}, schema: dbo, credentialsSecret: s, encryption: NotSupported}}
  target:
    postgres: {{host: 127.0.0.1, port: {}, database: postgres, schema: public, credentialsSecret: t, sslMode: disable}}
  timeouts: {{connectSeconds: 2}}
",
                source.port,
                source.database,
                silent.port()
            ),
        )
        .unwrap();
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
            .args(["run", "-f", file.to_str().unwrap(), "--metrics-addr", "off"])
            .env("SOURCE_USERNAME", &source.user)
            .env("SOURCE_PASSWORD", &source.password)
            .env("TARGET_USERNAME", "postgres")
            .env("RUST_LOG", "warn")
            .output()
            .await
            .unwrap();
        let _ = std::fs::remove_file(&file);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{stdout}");
        assert!(
            stdout.contains(&format!("connecting to PostgreSQL at 127.0.0.1:{}", silent.port())),
            "{stdout}"
        );
        assert!(
            stdout.contains("within 2 s (spec.timeouts.connectSeconds)"),
            "{stdout}"
        );
    })
    .await
    .unwrap();
}

#[test]
fn spec_timeouts_and_retries_reach_both_endpoints_in_both_directions() {
    let creds = || mssql_pg_worker::spec::Credentials {
        source_user: "u".into(),
        source_password: "p".into(),
        target_user: "u".into(),
        target_password: "p".into(),
    };
    let doc = |source: &str, target: &str| -> mssql_pg_crds::Migration {
        serde_norway::from_str(&format!(
            "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: m, namespace: n}}
spec:
  source: {{{source}: {{host: h, port: 1433, database: d, schema: s, credentialsSecret: c}}}}
  target: {{{target}: {{host: h, port: 5432, database: d, schema: s, credentialsSecret: c}}}}
  timeouts: {{connectSeconds: 7, stallSeconds: 9, lockSeconds: 11}}
  retries: {{attempts: 3, backoffSeconds: 2, maxBackoffSeconds: 5}}
"
        ))
        .unwrap()
    };
    let want_t = Timeouts {
        connect: Duration::from_secs(7),
        stall: Duration::from_secs(9),
        lock: Duration::from_secs(11),
    };
    let want_r = RetryPolicy {
        attempts: 3,
        backoff: Duration::from_secs(2),
        max_backoff: Duration::from_secs(5),
    };
    let (ms, pg, o) = mssql_pg_worker::spec::resolve(&doc("mssql", "postgres"), creds()).unwrap();
    assert_eq!((ms.timeouts, pg.timeouts, o.retry), (want_t, want_t, want_r));
    let (pg, ms, o) = mssql_pg_worker::spec::resolve_pg_to_mssql(&doc("postgres", "mssql"), creds()).unwrap();
    assert_eq!((ms.timeouts, pg.timeouts, o.retry), (want_t, want_t, want_r));
}
