//! The databases a harness run talks to: a private PostgreSQL (tests/scripts/postgres.sh) or a
//! given one, and tds-testserver processes standing in for SQL Server. Both are stopped when
//! dropped, so an error anywhere in the harness leaves nothing running.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bench::load::mssql::MssqlTarget;

/// The workspace root (the bench crate's parent directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

pub struct Postgres {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub database: String,
    /// A directory the server can write and read (`COPY ... TO/FROM 'file'`), when known.
    pub file_dir: Option<PathBuf>,
    /// The worker's `sslMode` towards this server (the harness's own connections use none).
    pub ssl_mode: String,
    /// Set when this harness started the server (stopped on drop).
    started_dir: Option<String>,
}

impl Postgres {
    /// Starts a private server with `tests/scripts/postgres.sh start`.
    pub fn start() -> Result<Self> {
        let script = workspace_root().join("tests/scripts/postgres.sh");
        let out = Command::new(&script)
            .arg("start")
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} start failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let var = |name: &str| {
            stdout.lines().find_map(|l| {
                l.strip_prefix(&format!("export {name}="))
                    .map(|v| v.trim_matches('\'').to_owned())
            })
        };
        let dir = var("MSSQLPG_TEST_PG_DIR").context("postgres.sh printed no MSSQLPG_TEST_PG_DIR")?;
        let url = var("MSSQLPG_TEST_PG_URL").context("postgres.sh printed no MSSQLPG_TEST_PG_URL")?;
        let mut pg = Self::external(&url, Some(PathBuf::from(&dir)))?;
        pg.started_dir = Some(dir);
        Ok(pg)
    }

    /// A server started elsewhere. `file_dir` must be a directory the server process can write.
    pub fn external(url: &str, file_dir: Option<PathBuf>) -> Result<Self> {
        let config =
            tokio_postgres::Config::from_str(url).context("parsing the PostgreSQL connection string")?;
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".to_owned(),
        };
        Ok(Postgres {
            url: url.to_owned(),
            host,
            port: config.get_ports().first().copied().unwrap_or(5432),
            user: config.get_user().unwrap_or("postgres").to_owned(),
            database: config.get_dbname().unwrap_or("postgres").to_owned(),
            file_dir,
            ssl_mode: "disable".to_owned(),
            started_dir: None,
        })
    }

    /// The server's postmaster process, when it runs on this machine (its data directory's
    /// `postmaster.pid` readable here).
    pub async fn postmaster_pid(&self) -> Option<u32> {
        let client = self.connect().await.ok()?;
        let dir: String = client
            .query_one(
                "SELECT setting FROM pg_settings WHERE name = 'data_directory'",
                &[],
            )
            .await
            .ok()?
            .get(0);
        let pid_file = std::fs::read_to_string(Path::new(&dir).join("postmaster.pid")).ok()?;
        pid_file.lines().next()?.trim().parse().ok()
    }

    /// The server as the report names it: its version and the settings that move COPY speed,
    /// read from the server itself (the harness may be pointed at any PostgreSQL with `--pg`).
    pub async fn describe(&self) -> Result<String> {
        let row = self
            .connect()
            .await?
            .query_one(
                "SELECT current_setting('server_version'), current_setting('fsync'), \
                 current_setting('shared_buffers')",
                &[],
            )
            .await
            .context("reading the PostgreSQL server's version and settings")?;
        let (version, fsync, buffers): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let whose = if self.started_dir.is_some() {
            "private"
        } else {
            "given"
        };
        Ok(format!(
            "PostgreSQL {version} ({whose} server: fsync {fsync}, shared_buffers {buffers})"
        ))
    }

    /// `CHECKPOINT`: what the reference `COPY FROM` file gets before it is timed, given to every
    /// worker run too. Without it the worker's runs were the ones to create WAL segments (the
    /// checkpoint before the reference recycles the ones the worker filled for it to reuse), and
    /// PostgreSQL's walwriter zero-filled 16 MiB files inside the worker's copy window.
    pub async fn checkpoint(&self) -> Result<()> {
        self.connect()
            .await?
            .batch_execute("CHECKPOINT")
            .await
            .context("CHECKPOINT before a worker run")
    }

    /// A connection to [`Self::database`] (which a caller may have set after parsing the URL).
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        let mut config = tokio_postgres::Config::from_str(&self.url)
            .context("parsing the PostgreSQL connection string")?;
        config.dbname(&self.database);
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connecting to PostgreSQL at {}:{}", self.host, self.port))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("PostgreSQL connection: {e}");
            }
        });
        Ok(client)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(dir) = &self.started_dir {
            let script = workspace_root().join("tests/scripts/postgres.sh");
            let _ = Command::new(script).args(["stop", dir]).status();
        }
    }
}

/// A random-enough password for a server that lives as long as this process.
fn fresh_password() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("Bench-{:x}-{}", nanos, std::process::id())
}

/// A `tds-testserver` child process (in-memory SQLite), stopped on drop.
pub struct TdsServer {
    child: Child,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
}

impl TdsServer {
    pub fn start(binary: &Path, database: &str, log: &Path) -> Result<Self> {
        Self::start_with(binary, database, log, &[])
    }

    /// [`Self::start`] with more command-line arguments (`--bulk-insert-dir DIR`).
    pub fn start_with(binary: &Path, database: &str, log: &Path, args: &[&std::ffi::OsStr]) -> Result<Self> {
        if !binary.exists() {
            bail!(
                "{} not found: build it first (cargo build --release -p tds-testserver)",
                binary.display()
            );
        }
        let password = fresh_password();
        let log_file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--database", database])
            .args(["--max-packet-size", "32767"])
            .args(args)
            .env("TDS_TESTSERVER_PASSWORD", &password)
            // BENCH_TESTSERVER_LOG=debug logs every batch with its time, to see where a run waits.
            .env(
                "RUST_LOG",
                std::env::var("BENCH_TESTSERVER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            bail!("tds-testserver: no stdout");
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading the tds-testserver address")?;
        let port = line
            .trim()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "tds-testserver did not print its address (got {line:?}); see {}",
                log.display()
            );
        };
        Ok(TdsServer {
            child,
            port,
            user: "sa".to_owned(),
            password,
            database: database.to_owned(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn target(&self) -> MssqlTarget {
        MssqlTarget {
            host: "127.0.0.1".to_owned(),
            port: self.port,
            database: self.database.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            no_tls: true,
            trust_cert: false,
        }
    }
}

impl Drop for TdsServer {
    /// SIGTERM first: the server then removes its database from `/dev/shm`, which a SIGKILL
    /// leaves there, in memory, until the next server starts (and slowed PostgreSQL's own
    /// COPY, the reference of every ratio here, when gigabytes of it piled up).
    fn drop(&mut self) {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if terminated {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
