//! A TDS 7.4 server backed by SQLite that stands in for SQL Server.
//!
//! `TestServer::start(config)` listens on a loopback port and serves each connection on its
//! own threads; the SQL lives in `tds-testserver-engine`, this crate speaks the wire protocol.

pub use tds_testserver_engine as engine;

pub mod backend;
pub mod certs;
mod handshake;
mod server;
mod session;
mod sink;
mod tls;
pub mod wire;

pub use server::{ServerError, TestServer};
pub use tls::{TlsError, TlsFiles};

use std::net::SocketAddr;
use std::path::PathBuf;

/// Test server settings (the binary's flags).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    pub user: String,
    pub password: String,
    pub database: String,
    /// The largest TDS packet size granted at login (512..=32767).
    pub max_packet_size: u32,
    /// Where the SQLite file lives; `None`: a temporary directory (in /dev/shm when present).
    /// Either way the data lasts only as long as the server: the catalog is in memory, so a
    /// start with the same directory begins empty (the old files are removed).
    pub data_dir: Option<PathBuf>,
    /// The directory `BULK INSERT ... FROM 'file'` reads from (files below it only); `None`:
    /// server-side bulk loads from files are refused (error 4861).
    pub bulk_insert_dir: Option<PathBuf>,
    /// The certificate and key to offer TLS with; `None`: the server answers PRELOGIN that it
    /// cannot encrypt (NOT_SUP), and a client that requires encryption is turned away.
    pub tls: Option<TlsFiles>,
    /// Encrypt every session (SQL Server's "Force Encryption"): a client asking for the login
    /// only gets full encryption, one that cannot encrypt is turned away. Needs `tls`.
    pub force_encryption: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            user: "sa".into(),
            password: "TestServer-Passw0rd".into(),
            database: "master".into(),
            max_packet_size: 32767,
            data_dir: None,
            bulk_insert_dir: None,
            tls: None,
            force_encryption: false,
        }
    }
}
