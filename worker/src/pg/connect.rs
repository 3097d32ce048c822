//! Connecting to the target PostgreSQL.

use crate::pg::tls::{RustlsConnect, Verify};
use std::fmt;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::{Client, NoTls};

/// libpq `sslmode` values the worker supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

#[derive(Clone)]
pub struct PgTarget {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
    pub ssl_mode: SslMode,
    /// PEM file with extra trusted CA certificates (verify-ca / verify-full).
    pub ssl_root_cert: Option<String>,
}

// The password never reaches logs or error messages.
impl fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("ssl_mode", &self.ssl_mode)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PgConnectError {
    #[error("connecting to PostgreSQL at {host}:{port} (database {database}, user {user}): {source}")]
    Connect {
        host: String,
        port: u16,
        database: String,
        user: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(transparent)]
    Tls(#[from] crate::pg::tls::TlsSetupError),
}

impl PgTarget {
    /// Parses the tokio-postgres key=value form (`host=... port=... user=... dbname=...`).
    pub fn from_conn_str(s: &str) -> Result<Self, tokio_postgres::Error> {
        let cfg: tokio_postgres::Config = s.parse()?;
        let host = match cfg.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".into(),
        };
        Ok(PgTarget {
            host,
            port: cfg.get_ports().first().copied().unwrap_or(5432),
            database: cfg.get_dbname().unwrap_or("postgres").to_string(),
            user: cfg.get_user().unwrap_or("postgres").to_string(),
            password: cfg
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default(),
            ssl_mode: match cfg.get_ssl_mode() {
                PgSslMode::Disable => SslMode::Disable,
                PgSslMode::Require => SslMode::Require,
                _ => SslMode::Prefer,
            },
            ssl_root_cert: None,
        })
    }

    pub async fn connect(&self) -> Result<Client, PgConnectError> {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&self.host)
            .port(self.port)
            .dbname(&self.database)
            .user(&self.user);
        if !self.password.is_empty() {
            cfg.password(&self.password);
        }
        cfg.application_name("mssql-pg-worker");
        let err = |source| PgConnectError::Connect {
            host: self.host.clone(),
            port: self.port,
            database: self.database.clone(),
            user: self.user.clone(),
            source,
        };
        let (verify, mode) = match self.ssl_mode {
            SslMode::Disable => (None, PgSslMode::Disable),
            SslMode::Prefer => (Some(Verify::None), PgSslMode::Prefer),
            SslMode::Require => (Some(Verify::None), PgSslMode::Require),
            SslMode::VerifyCa => (Some(Verify::Ca), PgSslMode::Require),
            SslMode::VerifyFull => (Some(Verify::Full), PgSslMode::Require),
        };
        cfg.ssl_mode(mode);
        let client = match verify {
            None => {
                let (client, conn) = cfg.connect(NoTls).await.map_err(err)?;
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::warn!(error = %e, "PostgreSQL connection ended with an error");
                    }
                });
                client
            }
            Some(v) => {
                let tls = RustlsConnect::new(v, self.ssl_root_cert.as_deref())?;
                let (client, conn) = cfg.connect(tls).await.map_err(err)?;
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::warn!(error = %e, "PostgreSQL connection ended with an error");
                    }
                });
                client
            }
        };
        Ok(client)
    }
}
