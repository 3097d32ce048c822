//! `bench`: generate the StackOverflow2010-shaped dataset and load it into PostgreSQL and/or
//! SQL Server, printing rows/s per table.

use std::collections::VecDeque;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bench::load::TableReport;
use bench::load::mssql::{self, MssqlTarget};
use bench::load::pg::{self, Naming, PgOptions};
use bench::stackoverflow::{Dataset, Table, Value};
use clap::{Parser, Subcommand};

mod harness;

#[derive(Parser)]
#[command(about = "StackOverflow2010-shaped data generator and loaders")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone, Copy)]
struct DataArgs {
    /// 1.0 = the full 19.3M rows; lookup tables keep their real size at every scale.
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Create the tables and load the generated rows into PostgreSQL and/or SQL Server.
    Load {
        #[command(flatten)]
        data: DataArgs,
        /// Only these tables (comma separated), default all nine.
        #[arg(long, value_delimiter = ',')]
        tables: Vec<Table>,
        /// Also add the foreign keys (between the loaded tables) after loading.
        #[arg(long)]
        foreign_keys: bool,
        /// Tables loaded at once, each over its own connection.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// SQL Server as HOST:PORT; credentials from MSSQL_USER / MSSQL_PASSWORD.
        #[arg(long)]
        mssql: Option<String>,
        #[arg(long, default_value = "StackOverflow2010")]
        mssql_database: String,
        /// Connect without TLS (EncryptionLevel::NotSupported).
        #[arg(long)]
        mssql_no_tls: bool,
        /// Accept any server certificate.
        #[arg(long)]
        mssql_trust_cert: bool,
        /// Run `CREATE DATABASE` from master first when the database does not exist.
        #[arg(long)]
        mssql_create_database: bool,
        /// Rows per INSERT BULK statement.
        #[arg(long, default_value_t = 100_000)]
        mssql_batch_rows: u64,
        /// PostgreSQL connection string (key=value or URL); password from PGPASSWORD if absent.
        #[arg(long)]
        pg: Option<String>,
        #[arg(long, default_value = "public")]
        pg_schema: String,
        #[arg(long, value_enum, default_value_t = Naming::Exact)]
        pg_naming: Naming,
    },
    /// Generate every table without loading it and print the generator's own rows/s.
    Generate {
        #[command(flatten)]
        data: DataArgs,
    },
    /// The benchmark: load the source, run the release worker in each direction and mode, measure
    /// the limits on the same rows, sweep packet size / chunkRows / parallelism, write Markdown
    /// and a PNG chart.
    Harness(harness::HarnessArgs),
    /// Issue 3's shapes: a mixed-type or a narrow table of --rows rows through the worker, beside
    /// PostgreSQL's own COPY FROM binary file of the same rows.
    Shapes(harness::shapes::ShapesArgs),
    /// Microsoft's AdventureWorks sample, loaded into the test server by its install script and
    /// migrated whole (every schema) both ways by the release worker, --runs times each.
    AdventureWorks(harness::adventure_works::AdventureWorksArgs),
    /// `verify: checksum` against `verify: none` in both directions, runs alternating, on the
    /// StackOverflow-shaped tables (--scale) or a shape (--shape, --rows): the ratio issue 18 bounds.
    VerifyCost(harness::verify_cost::VerifyCostArgs),
    /// The online mode (issue 30), both directions, on the StackOverflow shape's Votes table: the
    /// highest write rate whose lag stays bounded, lag median and p99 at a steady rate, the
    /// streaming process's peak memory with one huge source transaction, the cutover's downtime.
    Online(harness::online::OnlineArgs),
    /// The online mode (issue 30) on Microsoft's AdventureWorks sample: streamed whole to
    /// PostgreSQL under a steady writer and cut over, then back into a fresh SQL Server the same
    /// way: lag and the cutover's downtime with 71 tables.
    OnlineAdventureWorks(harness::online_aw::OnlineAwArgs),
    /// Issue 30: a `pgoutput` slot read by the slot SQL functions (peek + advance, as the worker)
    /// and by the streaming replication protocol (pgwire-replication), --runs times each: changes/s
    /// decoded, the reader's peak RSS and CPU, the PostgreSQL backend's CPU.
    PgDecode(harness::pg_decode::PgDecodeArgs),
    /// One read of `pg-decode` in a process of its own (started by `pg-decode`).
    #[command(hide = true)]
    PgDecodeRead(harness::pg_decode::PgDecodeReadArgs),
    /// Print the row count of every table at a scale.
    Counts {
        #[command(flatten)]
        data: DataArgs,
    },
    /// Print the first rows of a table, tab separated (for a look at the data).
    Sample {
        #[command(flatten)]
        data: DataArgs,
        #[arg(long)]
        table: Table,
        #[arg(long, default_value_t = 5)]
        limit: u64,
    },
}

#[tokio::main]
async fn main() -> Result<()> {
    let command = std::env::args()
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
        .collect::<Vec<_>>()
        .join(" ");
    match Cli::parse().command {
        Command::Harness(args) => harness::run(args, command).await?,
        Command::Shapes(args) => harness::shapes::run(args, command).await?,
        Command::AdventureWorks(args) => harness::adventure_works::run(args, command).await?,
        Command::VerifyCost(args) => harness::verify_cost::run(args, command).await?,
        Command::Online(args) => harness::online::run(args, command).await?,
        Command::OnlineAdventureWorks(args) => harness::online_aw::run(args, command).await?,
        Command::PgDecode(args) => harness::pg_decode::run(args, command).await?,
        Command::PgDecodeRead(args) => harness::pg_decode::read(args).await?,
        Command::Counts { data } => {
            let ds = Dataset::new(data.scale, data.seed);
            for t in Table::ALL {
                println!("{:<10} {:>12}", t.name(), ds.rows_of(t));
            }
            println!("{:<10} {:>12}", "total", ds.total_rows());
        }
        Command::Generate { data } => {
            let ds = Dataset::new(data.scale, data.seed);
            let started = Instant::now();
            for table in Table::ALL {
                let t0 = Instant::now();
                let mut buf = bytes::BytesMut::new();
                let mut rows = 0;
                for row in ds.rows(table) {
                    bench::load::pg_binary::write_row(&mut buf, &row);
                    rows += 1;
                    if buf.len() > 1 << 20 {
                        buf.clear();
                    }
                }
                let elapsed = t0.elapsed();
                print_report("gen", &TableReport { table, rows, elapsed });
            }
            print_total("gen", ds.total_rows(), started);
        }
        Command::Sample { data, table, limit } => {
            let ds = Dataset::new(data.scale, data.seed);
            let names: Vec<&str> = table.columns().iter().map(|c| c.name).collect();
            println!("{}", names.join("\t"));
            for row in ds.rows(table).take(limit as usize) {
                let cells: Vec<String> = row.iter().map(show).collect();
                println!("{}", cells.join("\t"));
            }
        }
        Command::Load {
            data,
            tables,
            foreign_keys,
            jobs,
            mssql,
            mssql_database,
            mssql_no_tls,
            mssql_trust_cert,
            mssql_create_database,
            mssql_batch_rows,
            pg,
            pg_schema,
            pg_naming,
        } => {
            if mssql.is_none() && pg.is_none() {
                bail!("nothing to load into: give --pg and/or --mssql");
            }
            let ds = Dataset::new(data.scale, data.seed);
            let tables = if tables.is_empty() {
                Table::ALL.to_vec()
            } else {
                tables
            };
            println!(
                "dataset: scale {} seed {}: {} rows in {} tables",
                data.scale,
                data.seed,
                tables.iter().map(|t| ds.rows_of(*t)).sum::<u64>(),
                tables.len()
            );
            if let Some(conn) = pg {
                let opts = PgOptions {
                    schema: pg_schema,
                    naming: pg_naming,
                };
                load_pg(&conn, &ds, &tables, &opts, jobs, foreign_keys).await?;
            }
            if let Some(addr) = mssql {
                let target = mssql_target(&addr, mssql_database, mssql_no_tls, mssql_trust_cert)?;
                if mssql_create_database {
                    target.create_database().await?;
                }
                load_mssql(&target, &ds, &tables, jobs, mssql_batch_rows, foreign_keys).await?;
            }
        }
    }
    Ok(())
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => "NULL".to_owned(),
        Value::Int(i) => i.to_string(),
        Value::Text(s) => {
            let mut s: String = s.chars().take(60).collect::<String>().replace(['\n', '\t'], " ");
            s.push_str(if s.len() < 60 { "" } else { "…" });
            s
        }
        Value::DateTime(dt) => dt.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
    }
}

fn mssql_target(addr: &str, database: String, no_tls: bool, trust_cert: bool) -> Result<MssqlTarget> {
    let (host, port) = addr.rsplit_once(':').context("--mssql must be HOST:PORT")?;
    let port = u16::from_str(port).with_context(|| format!("--mssql port {port:?}"))?;
    let user = std::env::var("MSSQL_USER").context("MSSQL_USER is not set")?;
    let password = std::env::var("MSSQL_PASSWORD").context("MSSQL_PASSWORD is not set")?;
    Ok(MssqlTarget {
        host: host.to_owned(),
        port,
        database,
        user,
        password,
        no_tls,
        trust_cert,
    })
}

async fn pg_connect(conn: &str) -> Result<tokio_postgres::Client> {
    let mut config = tokio_postgres::Config::from_str(conn).context("parsing the --pg connection string")?;
    if config.get_password().is_none()
        && let Ok(password) = std::env::var("PGPASSWORD")
    {
        config.password(password);
    }
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("PostgreSQL connection: {e}");
        }
    });
    Ok(client)
}

fn print_report(target: &str, r: &TableReport) {
    println!(
        "{target:<6} {:<10} {:>10} rows {:>8.2} s {:>10.0} rows/s",
        r.table.name(),
        r.rows,
        r.elapsed.as_secs_f64(),
        r.rows_per_second()
    );
}

fn print_total(target: &str, rows: u64, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { rows as f64 / secs } else { 0.0 };
    println!(
        "{target:<6} {:<10} {rows:>10} rows {secs:>8.2} s {rate:>10.0} rows/s",
        "TOTAL"
    );
}

type Queue = Arc<Mutex<VecDeque<Table>>>;

fn next_table(queue: &Queue) -> Option<Table> {
    queue.lock().ok()?.pop_front()
}

async fn load_pg(
    conn: &str,
    ds: &Dataset,
    tables: &[Table],
    opts: &PgOptions,
    jobs: usize,
    foreign_keys: bool,
) -> Result<()> {
    let started = Instant::now();
    let queue: Queue = Arc::new(Mutex::new(tables.iter().copied().collect()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..jobs.max(1) {
        let client = pg_connect(conn).await?;
        let (queue, ds, opts) = (queue.clone(), *ds, opts.clone());
        workers.spawn(async move {
            let mut rows = 0;
            while let Some(table) = next_table(&queue) {
                let report = pg::load_table(&client, &ds, table, &opts).await?;
                print_report("pg", &report);
                rows += report.rows;
            }
            anyhow::Ok(rows)
        });
    }
    let mut rows = 0;
    while let Some(done) = workers.join_next().await {
        rows += done.context("PostgreSQL load task")??;
    }
    print_total("pg", rows, started);
    if foreign_keys {
        let client = pg_connect(conn).await?;
        let fk_started = Instant::now();
        pg::add_foreign_keys(&client, tables, opts).await?;
        println!(
            "pg     foreign keys added in {:.2} s",
            fk_started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

async fn load_mssql(
    target: &MssqlTarget,
    ds: &Dataset,
    tables: &[Table],
    jobs: usize,
    batch_rows: u64,
    foreign_keys: bool,
) -> Result<()> {
    let started = Instant::now();
    {
        let mut client = target.connect().await?;
        for sql in mssql::drop_foreign_keys_sql() {
            mssql_exec(&mut client, &sql).await?;
        }
    }
    let queue: Queue = Arc::new(Mutex::new(tables.iter().copied().collect()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..jobs.max(1) {
        let mut client = target.connect().await?;
        let (queue, ds) = (queue.clone(), *ds);
        workers.spawn(async move {
            let mut rows = 0;
            while let Some(table) = next_table(&queue) {
                let report = mssql::load_table(&mut client, &ds, table, batch_rows).await?;
                print_report("mssql", &report);
                rows += report.rows;
            }
            anyhow::Ok(rows)
        });
    }
    let mut rows = 0;
    while let Some(done) = workers.join_next().await {
        rows += done.context("SQL Server load task")??;
    }
    print_total("mssql", rows, started);
    if foreign_keys {
        let mut client = target.connect().await?;
        let fk_started = Instant::now();
        for sql in mssql::foreign_keys_sql(tables) {
            mssql_exec(&mut client, &sql).await?;
        }
        println!(
            "mssql  foreign keys added in {:.2} s",
            fk_started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

async fn mssql_exec(client: &mut mssql::MssqlClient, sql: &str) -> Result<()> {
    client
        .simple_query(sql)
        .await
        .with_context(|| format!("SQL Server: {sql}"))?
        .into_results()
        .await
        .with_context(|| format!("SQL Server: {sql}"))?;
    Ok(())
}
