//! TLS for a PostgreSQL connection whose protocol is spoken by code that has no TLS of its own (the
//! online capture's replication session: `pgwire-replication` without its `tls-rustls` feature,
//! which would bring a second rustls crypto provider into every build). The worker opens the
//! connection to the server itself, as every other PostgreSQL connection of the worker (the
//! endpoint's `sslMode`, the roots of its `caSecret`, [`crate::pg::tls`]'s checks, TCP keepalives
//! and user timeout), and hands that code a Unix socket in a directory of its own that relays to
//! it. The socket takes one connection, only from this process, and is removed once it has it.

use crate::pg::connect::{PgEndpoint, SslMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::ServerName;

/// PostgreSQL's SSLRequest: length 8, code 1234 5679.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// How long the relay waits for the one connection it is opened for.
const ACCEPT_WAIT: Duration = Duration::from_secs(30);

/// Bytes buffered each way.
const BUFFER: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("connecting to PostgreSQL at {host}:{port}: {source}")]
    Connect {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("PostgreSQL at {host}:{port} offered no TLS, and sslMode {mode:?} requires it")]
    NoTls { host: String, port: u16, mode: SslMode },
    #[error("PostgreSQL at {host}:{port} answered the TLS request with {answer:?}, not S or N")]
    Answer { host: String, port: u16, answer: char },
    #[error("TLS to PostgreSQL at {host}:{port}: {source}")]
    Handshake {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS to PostgreSQL at {host}:{port}: the host name is not valid for TLS")]
    ServerName { host: String, port: u16 },
    #[error(transparent)]
    Setup(#[from] crate::pg::tls::TlsSetupError),
    #[error("opening the local socket of the replication connection in {dir}: {source}")]
    Socket {
        dir: String,
        #[source]
        source: std::io::Error,
    },
}

/// A connection to the server, relayed through a Unix socket: connect to
/// `{socket_dir}/.s.PGSQL.{port}` (the libpq convention for a host starting with `/`) without TLS.
pub struct Relay {
    dir: PathBuf,
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Relay {
    /// Connects to `endpoint` with its TLS settings (TLS errors come from here, naming the
    /// server), then opens the socket that relays to that connection.
    pub async fn open(endpoint: &PgEndpoint) -> Result<Relay, RelayError> {
        let server = connect(endpoint).await?;
        let dir = socket_dir();
        let socket_error = |source| RelayError::Socket {
            dir: dir.display().to_string(),
            source,
        };
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(socket_error)?;
        }
        let relay_dir = dir.clone();
        let path = dir.join(format!(".s.PGSQL.{}", endpoint.port));
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(socket_error(e));
            }
        };
        let endpoint_name = format!("{}:{}", endpoint.host, endpoint.port);
        let task = tokio::spawn(async move {
            let accepted = tokio::time::timeout(ACCEPT_WAIT, accept_own(&listener)).await;
            drop(listener);
            let _ = std::fs::remove_dir_all(&relay_dir);
            let mut local = match accepted {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, server = %endpoint_name, "the replication relay took no connection");
                    return;
                }
                Err(_) => {
                    tracing::warn!(server = %endpoint_name, "the replication relay took no connection in {ACCEPT_WAIT:?}");
                    return;
                }
            };
            let mut server = server;
            match tokio::io::copy_bidirectional_with_sizes(&mut local, &mut server, BUFFER, BUFFER).await {
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, server = %endpoint_name, "the replication relay ended"),
            }
        });
        Ok(Relay {
            dir,
            port: endpoint.port,
            task,
        })
    }

    /// The directory of the socket: the host to connect to.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// The port part of the socket's name.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory name for one relay's socket (short: a socket path holds at most 107 bytes).
fn socket_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("mssqlpg-repl-{}-{n}", std::process::id()))
}

/// The first connection from this process; connections from any other process are refused.
async fn accept_own(listener: &UnixListener) -> std::io::Result<tokio::net::UnixStream> {
    let me = std::process::id();
    loop {
        let (stream, _) = listener.accept().await?;
        let pid = stream.peer_cred()?.pid();
        if pid.and_then(|p| u32::try_from(p).ok()) == Some(me) {
            return Ok(stream);
        }
        tracing::warn!(peer_pid = ?pid, "the replication relay refused a connection from another process");
    }
}

/// The connection to the server: TCP, the SSLRequest, then TLS as `sslMode` says (`prefer` goes
/// on in plaintext when the server offers no TLS, as libpq does).
async fn connect(endpoint: &PgEndpoint) -> Result<Box<dyn Stream>, RelayError> {
    let host = || endpoint.host.clone();
    let port = endpoint.port;
    let io = |source| RelayError::Connect {
        host: host(),
        port,
        source,
    };
    let mut tcp = crate::timeouts::connect_tcp(&endpoint.host, port, &endpoint.timeouts)
        .await
        .map_err(io)?;
    let _ = tcp.set_nodelay(true);
    let Some(verify) = endpoint.tls_verify() else {
        return Ok(Box::new(tcp));
    };
    let answer = tokio::time::timeout(endpoint.timeouts.connect, async {
        tcp.write_all(&SSL_REQUEST).await?;
        tcp.read_u8().await
    })
    .await
    .map_err(|_| io(crate::timeouts::connect_timed_out(endpoint.timeouts.connect)))?
    .map_err(io)?;
    match answer {
        b'S' => {}
        b'N' if endpoint.ssl_mode == SslMode::Prefer => return Ok(Box::new(tcp)),
        b'N' => {
            return Err(RelayError::NoTls {
                host: host(),
                port,
                mode: endpoint.ssl_mode,
            });
        }
        other => {
            return Err(RelayError::Answer {
                host: host(),
                port,
                answer: char::from(other),
            });
        }
    }
    let config = crate::pg::tls::client_config(verify, endpoint.ssl_root_cert.as_deref())?;
    let name = ServerName::try_from(endpoint.host.clone())
        .map_err(|_| RelayError::ServerName { host: host(), port })?;
    let tls = tokio::time::timeout(
        endpoint.timeouts.connect,
        TlsConnector::from(Arc::new(config)).connect(name, tcp),
    )
    .await
    .map_err(|_| io(crate::timeouts::connect_timed_out(endpoint.timeouts.connect)))?
    .map_err(|source| RelayError::Handshake {
        host: host(),
        port,
        source,
    })?;
    Ok(Box::new(tls))
}
