//! `tds-testserver`: runs the test server until SIGTERM/SIGINT.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tds_testserver::{ServerConfig, TestServer, TlsFiles};

#[derive(Parser, Debug)]
#[command(about = "A TDS 7.4 server backed by SQLite that stands in for SQL Server")]
struct Args {
    #[arg(long, default_value = "127.0.0.1:1433")]
    listen: SocketAddr,
    #[arg(long, default_value = "sa")]
    user: String,
    #[arg(long, env = "TDS_TESTSERVER_PASSWORD", hide_env_values = true)]
    password: String,
    #[arg(long, default_value = "master")]
    database: String,
    #[arg(long, default_value_t = 32767, value_parser = clap::value_parser!(u32).range(512..=32767))]
    max_packet_size: u32,
    /// Directory for the SQLite database file (default: a temporary directory in /dev/shm,
    /// removed on exit; those of killed servers are removed by the next server to start). Use
    /// a disk directory for loads larger than memory. The catalog is held in memory, so the
    /// data lives only as long as the process: every start begins with an empty database, and
    /// files an earlier run left there are removed.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The directory `BULK INSERT ... FROM 'file'` may read (files below it only); without it
    /// such statements fail with error 4861, as on a server that cannot open the file.
    #[arg(long)]
    bulk_insert_dir: Option<PathBuf>,
    /// A PEM certificate chain to offer TLS with, as SQL Server with a certificate and "Force
    /// Encryption" off: clients asking for encryption get it, others get their login packet
    /// encrypted. Without it the server cannot encrypt (PRELOGIN answers NOT_SUP).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Encrypt every session, as SQL Server with "Force Encryption" on.
    #[arg(long, requires = "tls_cert")]
    force_encryption: bool,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    let config = ServerConfig {
        listen: args.listen,
        user: args.user,
        password: args.password,
        database: args.database,
        max_packet_size: args.max_packet_size,
        data_dir: args.data_dir,
        bulk_insert_dir: args.bulk_insert_dir,
        tls: args
            .tls_cert
            .zip(args.tls_key)
            .map(|(cert, key)| TlsFiles { cert, key }),
        force_encryption: args.force_encryption,
    };
    let mut server = TestServer::start(config).context("starting the server")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "tds-testserver listening on {}", server.addr()).context("writing to stdout")?;
        out.flush().context("flushing stdout")?;
    }
    if let Some(signal) = signals.forever().next() {
        tracing::info!(signal, "stopping");
    }
    server.stop();
    // Sessions still closing hold the engine, so it would not be dropped before the exit.
    server.engine().remove_temporary_files();
    Ok(())
}
