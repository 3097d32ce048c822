//! Connecting to SQL Server with tiberius.

use crate::mssql::packet_tap::PacketTap;
use crate::timeouts::{Guarded, StallWatch, Timeouts};
use serde::Serialize;
use std::fmt;
use std::sync::atomic::Ordering;
use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

/// The byte stream under a [`TdsClient`].
pub type TdsStream = PacketTap<Compat<Guarded<TcpStream>>>;
pub type TdsClient = Client<TdsStream>;

/// The largest TDS packet; the server may grant less.
pub const REQUESTED_PACKET_SIZE: u32 = 32767;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum Encryption {
    /// No TLS at all (the test server, or servers configured without it).
    NotSupported,
    /// TLS for the login only.
    Off,
    /// TLS for everything.
    #[default]
    Required,
}

#[derive(Clone)]
pub struct MssqlEndpoint {
    pub host: String,
    pub port: u16,
    pub database: String,
    pub user: String,
    pub password: String,
    pub encryption: Encryption,
    pub trust_server_certificate: bool,
    /// PEM file of CA certificates trusted, besides the system's roots, to have signed the
    /// server's certificate (the endpoint's `caSecret`); ignored with `trust_server_certificate`.
    pub ca_file: Option<String>,
    pub packet_size: u32,
    pub timeouts: Timeouts,
}

// The password never reaches logs or error messages.
impl fmt::Debug for MssqlEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MssqlEndpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("encryption", &self.encryption)
            .field("trust_server_certificate", &self.trust_server_certificate)
            .field("ca_file", &self.ca_file)
            .field("packet_size", &self.packet_size)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting to SQL Server at {addr}: {source}")]
    Tcp {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("logging in to SQL Server at {addr} (database {database}, user {user}): {source}")]
    Login {
        addr: String,
        database: String,
        user: String,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("setting the session's LOCK_TIMEOUT on SQL Server at {addr}: {source}")]
    Session {
        addr: String,
        #[source]
        source: tiberius::error::Error,
    },
}

impl MssqlEndpoint {
    /// The login of a connection whose `program_name` is `app`.
    fn config(&self, app: &str) -> Config {
        let mut config = Config::new();
        config.host(&self.host);
        config.port(self.port);
        config.database(&self.database);
        config.authentication(AuthMethod::sql_server(&self.user, &self.password));
        config.packet_size(self.packet_size);
        config.application_name(app);
        // tiberius drops a connection whose next reply part takes over 30 s by default; building
        // a primary key or index on a large table (and the first rows of a large ordered read)
        // legitimately take longer. A connection the server closes still fails at once.
        config.command_timeout(None);
        config.encryption(match self.encryption {
            Encryption::NotSupported => EncryptionLevel::NotSupported,
            Encryption::Off => EncryptionLevel::Off,
            Encryption::Required => EncryptionLevel::Required,
        });
        // tiberius panics when both are set; the spec validation refuses the pair.
        if self.trust_server_certificate {
            config.trust_cert();
        } else if let Some(ca) = &self.ca_file {
            config.trust_cert_ca(ca);
        }
        config
    }

    pub async fn connect(&self) -> Result<TdsClient, ConnectError> {
        Ok(self.connect_reporting_packet_size().await?.0)
    }

    /// Connects and reports the packet size the login response granted (`None` when the login
    /// response was encrypted; see [`negotiated_packet_size`]). Like every connection outside a
    /// copy's data stream (DDL, finalize, verification), it waits for a lock another session holds
    /// at most the lock limit (`SET LOCK_TIMEOUT`), then the statement fails with error 1222,
    /// which [`crate::retry::is_transient`] counts as transient.
    pub async fn connect_reporting_packet_size(&self) -> Result<(TdsClient, Option<u32>), ConnectError> {
        let (mut client, size) = self.open(None, "mssql-pg-worker").await?;
        // A batch, not an RPC: a SET inside sp_executesql ends with it.
        let set = async {
            client
                .simple_query(format!("SET LOCK_TIMEOUT {}", self.timeouts.lock_millis()))
                .await?
                .into_results()
                .await
        };
        set.await.map_err(|source| ConnectError::Session {
            addr: format!("{}:{}", self.host, self.port),
            source,
        })?;
        Ok((client, size))
    }

    /// A connection for a copy task: it fails once it makes no progress for the stall limit
    /// (see [`crate::timeouts`]).
    pub async fn connect_watched(&self) -> Result<(TdsClient, StallWatch), ConnectError> {
        let tag = crate::timeouts::session_tag();
        let watch = StallWatch::new(
            format!("SQL Server at {}:{}", self.host, self.port),
            self.timeouts.stall,
        )
        .with_probe(self.probe(tag.clone()));
        let (client, _) = self.open(Some(watch.clone()), &tag).await?;
        Ok((client, watch))
    }

    /// Whether the server still has the session named `tag` (its `program_name`): the worker waits
    /// for that session's reply, so a session the server still has is working on the statement (or
    /// waiting for a lock). `sys.dm_exec_sessions` shows other sessions only with VIEW SERVER STATE:
    /// a login that sees no session but its own cannot tell.
    fn probe(&self, tag: String) -> crate::timeouts::Probe {
        let endpoint = self.clone();
        std::sync::Arc::new(move || {
            let (endpoint, tag) = (endpoint.clone(), tag.clone());
            Box::pin(async move {
                use crate::timeouts::Liveness;
                let mut client = match endpoint.connect().await {
                    Ok(c) => c,
                    Err(e) => return Liveness::Unknown(crate::error_text::error_text(&e)),
                };
                let names = async {
                    client
                        .simple_query("SELECT program_name FROM sys.dm_exec_sessions")
                        .await?
                        .into_first_result()
                        .await
                };
                match names.await {
                    Err(e) => Liveness::Unknown(crate::error_text::error_text(&e)),
                    Ok(rows) => {
                        let names: Vec<Option<&str>> = rows.iter().map(|r| r.get::<&str, _>(0)).collect();
                        if names.contains(&Some(tag.as_str())) {
                            Liveness::Working
                        } else if names.len() <= 1 {
                            Liveness::Unknown(
                                "the worker's login sees no session but its own (grant it VIEW SERVER STATE)"
                                    .into(),
                            )
                        } else {
                            Liveness::Gone
                        }
                    }
                }
            })
        })
    }

    async fn open(
        &self,
        watch: Option<StallWatch>,
        app: &str,
    ) -> Result<(TdsClient, Option<u32>), ConnectError> {
        let addr = format!("{}:{}", self.host, self.port);
        let limit = self.timeouts.connect;
        tokio::time::timeout(limit, async {
            let tcp = crate::timeouts::connect_tcp(&self.host, self.port, &self.timeouts)
                .await
                .map_err(|source| ConnectError::Tcp {
                    addr: addr.clone(),
                    source,
                })?;
            // Rows stream in many small packets; Nagle would only add latency.
            let _ = tcp.set_nodelay(true);
            let (tap, granted) = PacketTap::new(Guarded::new(tcp, watch).compat_write());
            let client =
                Client::connect(self.config(app), tap)
                    .await
                    .map_err(|source| ConnectError::Login {
                        addr: addr.clone(),
                        database: self.database.clone(),
                        user: self.user.clone(),
                        source,
                    })?;
            let size = granted.load(Ordering::Relaxed);
            Ok((client, (size > 0).then_some(size)))
        })
        .await
        .map_err(|_| ConnectError::Tcp {
            addr: addr.clone(),
            source: crate::timeouts::connect_timed_out(limit),
        })?
    }
}

/// The packet size from sys.dm_exec_connections, for when the login response was encrypted
/// (needs VIEW SERVER STATE on some servers; then this is `None`).
pub async fn negotiated_packet_size(client: &mut TdsClient) -> Option<i32> {
    let row = client
        .simple_query("SELECT net_packet_size FROM sys.dm_exec_connections WHERE session_id = @@SPID")
        .await
        .ok()?
        .into_row()
        .await
        .ok()??;
    row.try_get::<i32, _>(0).ok().flatten()
}
