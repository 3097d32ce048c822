//! Connecting to the target PostgreSQL.

use crate::pg::tls::Verify;
use crate::timeouts::{Guarded, StallWatch, Timeouts};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use tokio::net::TcpStream;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::tls::MakeTlsConnect;
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
pub struct PgEndpoint {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
    pub ssl_mode: SslMode,
    /// PEM file with extra trusted CA certificates (verify-ca / verify-full).
    pub ssl_root_cert: Option<String>,
    pub timeouts: Timeouts,
}

// The password never reaches logs or error messages.
impl fmt::Debug for PgEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgEndpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("ssl_mode", &self.ssl_mode)
            .field("timeouts", &self.timeouts)
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
    #[error("connecting to PostgreSQL at {host}:{port}: {source}")]
    Tcp {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] crate::pg::tls::TlsSetupError),
    #[error("setting the session's lock_timeout on PostgreSQL at {host}:{port}: {source}")]
    Session {
        host: String,
        port: u16,
        #[source]
        source: tokio_postgres::Error,
    },
}

impl PgEndpoint {
    /// Parses the tokio-postgres key=value form (`host=... port=... user=... dbname=...`).
    pub fn from_conn_str(s: &str) -> Result<Self, tokio_postgres::Error> {
        let cfg: tokio_postgres::Config = s.parse()?;
        let host = match cfg.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            _ => "127.0.0.1".into(),
        };
        Ok(PgEndpoint {
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
            timeouts: Timeouts::default(),
        })
    }

    /// A connection for statements outside a copy's data stream (DDL, finalize, verification):
    /// a lock another session holds is waited for at most the lock limit (`lock_timeout`), then
    /// the statement fails with 55P03, which [`crate::retry::is_transient`] counts as transient.
    /// A `SET` rather than the `options` startup parameter, which connection poolers refuse.
    pub async fn connect(&self) -> Result<Client, PgConnectError> {
        let (client, io) = self.connect_undriven().await?;
        tokio::spawn(io);
        client
            .batch_execute(&format!("SET lock_timeout = {}", self.timeouts.lock_millis()))
            .await
            .map_err(|source| PgConnectError::Session {
                host: self.host.clone(),
                port: self.port,
                source,
            })?;
        Ok(client)
    }

    /// Like [`connect`](Self::connect), but the connection's I/O is left to the caller, to be
    /// polled with [`with_connection_io`] on the task that uses the client.
    pub async fn connect_undriven(&self) -> Result<(Client, ConnectionIo), PgConnectError> {
        self.open(None, "mssql-pg-worker").await
    }

    /// A connection for a copy task: it fails once it makes no progress for the stall limit
    /// (see [`crate::timeouts`]).
    pub async fn connect_watched(&self) -> Result<(Client, StallWatch), PgConnectError> {
        let (client, io, watch) = self.connect_undriven_watched().await?;
        tokio::spawn(io);
        Ok((client, watch))
    }

    /// [`connect_watched`](Self::connect_watched) with the I/O left to the caller.
    pub async fn connect_undriven_watched(
        &self,
    ) -> Result<(Client, ConnectionIo, StallWatch), PgConnectError> {
        let tag = crate::timeouts::session_tag();
        let watch = StallWatch::new(
            format!("PostgreSQL at {}:{}", self.host, self.port),
            self.timeouts.stall,
        )
        .with_probe(self.probe(tag.clone()));
        let (client, io) = self.open(Some(watch.clone()), &tag).await?;
        Ok((client, io, watch))
    }

    /// Whether the server still works for the session named `tag`: `pg_stat_activity` shows the
    /// sessions of the same role, a statement running or waiting for a lock as `active`; one
    /// waiting for the client (`ClientRead`/`ClientWrite`) or idle is not working for the worker.
    fn probe(&self, tag: String) -> crate::timeouts::Probe {
        let endpoint = self.clone();
        std::sync::Arc::new(move || {
            let (endpoint, tag) = (endpoint.clone(), tag.clone());
            Box::pin(async move {
                use crate::timeouts::Liveness;
                let client = match endpoint.connect().await {
                    Ok(c) => c,
                    Err(e) => return Liveness::Unknown(crate::error_text::error_text(&e)),
                };
                let row = client
                    .query_opt(
                        "SELECT state, wait_event_type FROM pg_stat_activity WHERE application_name = $1",
                        &[&tag],
                    )
                    .await;
                match row {
                    Err(e) => Liveness::Unknown(crate::error_text::error_text(&e)),
                    Ok(None) => Liveness::Gone,
                    Ok(Some(r)) => {
                        let state: Option<String> = r.get(0);
                        let waits: Option<String> = r.get(1);
                        if state.as_deref() == Some("active") && waits.as_deref() != Some("Client") {
                            Liveness::Working
                        } else {
                            Liveness::Gone
                        }
                    }
                }
            })
        })
    }

    /// Opens a connection whose `application_name` is `app`.
    async fn open(
        &self,
        watch: Option<StallWatch>,
        app: &str,
    ) -> Result<(Client, ConnectionIo), PgConnectError> {
        let limit = self.timeouts.connect;
        tokio::time::timeout(limit, self.open_unbounded(watch, app))
            .await
            .map_err(|_| PgConnectError::Tcp {
                host: self.host.clone(),
                port: self.port,
                source: crate::timeouts::connect_timed_out(limit),
            })?
    }

    /// The socket is opened here rather than by tokio-postgres so that it can carry the stall
    /// watch; keepalives and the user timeout are set on it (tokio-postgres's own `keepalives*`
    /// and `connect_timeout` settings apply only to sockets it opens, and its timeout would not
    /// cover a server that accepts and never answers the startup message).
    async fn open_unbounded(
        &self,
        watch: Option<StallWatch>,
        app: &str,
    ) -> Result<(Client, ConnectionIo), PgConnectError> {
        let tcp = crate::timeouts::connect_tcp(&self.host, self.port, &self.timeouts)
            .await
            .map_err(|source| PgConnectError::Tcp {
                host: self.host.clone(),
                port: self.port,
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let stream = Guarded::new(tcp, watch);
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&self.host)
            .port(self.port)
            .dbname(&self.database)
            .user(&self.user);
        if !self.password.is_empty() {
            cfg.password(&self.password);
        }
        cfg.application_name(app);
        let err = |source| PgConnectError::Connect {
            host: self.host.clone(),
            port: self.port,
            database: self.database.clone(),
            user: self.user.clone(),
            source,
        };
        let verify = self.tls_verify();
        cfg.ssl_mode(match self.ssl_mode {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
        Ok(match verify {
            None => {
                let (client, conn) = cfg.connect_raw(stream, NoTls).await.map_err(err)?;
                (client, connection_io(conn))
            }
            Some(v) => {
                let mut tls = crate::pg::tls::connector(v, self.ssl_root_cert.as_deref())?;
                let Ok(tls) = MakeTlsConnect::<Guarded<TcpStream>>::make_tls_connect(&mut tls, &self.host);
                let (client, conn) = cfg.connect_raw(stream, tls).await.map_err(err)?;
                (client, connection_io(conn))
            }
        })
    }
}

impl PgEndpoint {
    /// How the server's certificate is checked; `None`: no TLS (`sslMode: disable`).
    pub fn tls_verify(&self) -> Option<Verify> {
        match self.ssl_mode {
            SslMode::Disable => None,
            SslMode::Prefer => Some(Verify::None),
            // As libpq: `require` with a root CA given validates the chain (verify-ca).
            SslMode::Require if self.ssl_root_cert.is_some() => Some(Verify::Ca),
            SslMode::Require => Some(Verify::None),
            SslMode::VerifyCa => Some(Verify::Ca),
            SslMode::VerifyFull => Some(Verify::Full),
        }
    }

    /// `sslMode: prefer` that ended in plaintext, said once per process in the log and returned
    /// as a plan warning naming `side` (`target.postgres`): prefer falls back silently in libpq.
    pub async fn plaintext_warning(&self, client: &Client, side: &str) -> Option<String> {
        if self.ssl_mode != SslMode::Prefer {
            return None;
        }
        let ssl: bool = client
            .query_one(
                "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
                &[],
            )
            .await
            .ok()?
            .get(0);
        if ssl {
            return None;
        }
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                host = %self.host,
                "{side}: sslMode prefer, but the server offered no TLS: the connection is not encrypted"
            );
        });
        Some(format!(
            "{side}.sslMode: prefer, but {}:{} offered no TLS, so the connection is not encrypted \
             (say sslMode: disable to accept that, or require / verify-full to insist on TLS)",
            self.host, self.port
        ))
    }
}

/// The future that reads and writes a connection's socket (tokio-postgres's `Connection`); the
/// client's requests make progress only while it is polled.
pub type ConnectionIo = Pin<Box<dyn Future<Output = ()> + Send>>;

fn connection_io(
    conn: impl Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
) -> ConnectionIo {
    Box::pin(async move {
        if let Err(e) = conn.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended with an error");
        }
    })
}

/// Runs `work` while polling `io` on the same task, until `work` completes. Spawned apart, the
/// connection's messages are handed from one runtime thread to another on every socket read;
/// here they are decoded by the thread that consumes them. A connection that ends first is not
/// polled again (its client's requests then fail inside `work`).
pub async fn with_connection_io<F: Future>(work: F, io: ConnectionIo) -> F::Output {
    with_kept_connection_io(work, &mut Some(io)).await
}

/// [`with_connection_io`] for a connection kept after `work` (for the next copy task): `io` is
/// `None` afterwards if the connection ended.
pub async fn with_kept_connection_io<F: Future>(work: F, io: &mut Option<ConnectionIo>) -> F::Output {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        // The socket first, so that `work` sees what it delivered in the same poll.
        if let Some(running) = io.as_mut()
            && running.as_mut().poll(cx).is_ready()
        {
            *io = None;
        }
        work.as_mut().poll(cx)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    #[tokio::test]
    async fn work_gets_what_the_io_delivers_and_its_result_is_returned() {
        // The "connection" delivers a message only while it is polled, as tokio-postgres's does.
        let (deliver, delivered) = oneshot::channel::<u32>();
        let (close, closed) = oneshot::channel::<()>();
        let io: ConnectionIo = Box::pin(async move {
            tokio::task::yield_now().await;
            let _ = deliver.send(42);
            let _ = closed.await;
        });
        let out = with_connection_io(async { delivered.await.map(|v| v + 1) }, io).await;
        assert_eq!(out, Ok(43));
        drop(close);
    }

    #[tokio::test]
    async fn a_connection_that_ends_first_is_not_polled_again() {
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        let io: ConnectionIo = Box::pin(async move {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let out = with_connection_io(
            async {
                for _ in 0..5 {
                    tokio::task::yield_now().await;
                }
                "done"
            },
            io,
        )
        .await;
        assert_eq!(out, "done");
        assert_eq!(polls.load(Ordering::SeqCst), 1);
    }
}
