//! The one kubelet API the control plane calls that matters for humans: container logs, so `kubectl logs`
//! (and `kubectl logs -f`) work. The API server proxies `pods/log` to
//! `https://<node InternalIP>:<daemonEndpoints.kubeletEndpoint.Port>/containerLogs/<ns>/<pod>/<container>`.
//! Without `--kubelet-certificate-authority` it does not verify this server's certificate and presents no
//! client certificate, so the endpoint is unauthenticated: acceptable on loopback for tests only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::AgentConfig;

/// How often a followed log is polled for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(300);

pub async fn serve(
    cfg: Arc<AgentConfig>,
    listener: TcpListener,
    cert: &Path,
    key: &Path,
) -> anyhow::Result<()> {
    let certs = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let tls = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("building the kubelet TLS config")?;
    let listener = TlsListener {
        tcp: listener,
        acceptor: TlsAcceptor::from(Arc::new(tls)),
    };
    let app = Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .with_state(cfg);
    axum::serve(listener, app)
        .await
        .context("serving the kubelet API")
}

struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.tcp.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet API accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            // The handshake runs inline: one client (the API server) at a time is plenty for tests.
            match tokio::time::timeout(Duration::from_secs(10), self.acceptor.accept(stream)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(e)) => tracing::debug!(error = %e, "kubelet API TLS handshake failed"),
                Err(_) => tracing::debug!("kubelet API TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogQuery {
    follow: Option<bool>,
    tail_lines: Option<usize>,
    limit_bytes: Option<usize>,
}

async fn container_logs(
    State(cfg): State<Arc<AgentConfig>>,
    UrlPath((namespace, pod, container)): UrlPath<(String, String, String)>,
    Query(query): Query<LogQuery>,
) -> Response {
    let Some(dir) = newest_pod_dir(&cfg.work_dir.join("pods"), &format!("{namespace}_{pod}_")) else {
        return (
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{pod} has not run on this node\n"),
        )
            .into_response();
    };
    let log = dir.join(format!("{container}.log"));
    let text = match tokio::fs::read(&log).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                StatusCode::NOT_FOUND,
                format!("container {container} of {namespace}/{pod}: {e}\n"),
            )
                .into_response();
        }
    };
    let mut head = select_tail(&text, query.tail_lines);
    if let Some(limit) = query.limit_bytes {
        head.truncate(limit);
    }
    if query.follow != Some(true) {
        return head.into_response();
    }
    // Following: send what exists, then whatever the process appends while it runs.
    let uid = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit('_').next())
        .unwrap_or_default()
        .to_string();
    let pgid_file = cfg.work_dir.join("pgids").join(format!("{uid}_{container}"));
    let offset = text.len() as u64;
    let stream = futures_util::stream::unfold(
        (Some(head), log, pgid_file, offset, false),
        |(first, log, pgid_file, mut offset, finished)| async move {
            if let Some(first) = first {
                return Some((
                    Ok::<_, std::io::Error>(first),
                    (None, log, pgid_file, offset, finished),
                ));
            }
            if finished {
                return None;
            }
            loop {
                let running = pgid_file.exists();
                let chunk = read_from(&log, offset).await;
                if !chunk.is_empty() {
                    offset += chunk.len() as u64;
                    return Some((Ok(chunk), (None, log, pgid_file, offset, !running)));
                }
                if !running {
                    return None;
                }
                tokio::time::sleep(FOLLOW_POLL).await;
            }
        },
    );
    Body::from_stream(stream).into_response()
}

async fn read_from(path: &Path, offset: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Ok(mut file) = tokio::fs::File::open(path).await
        && file.seek(std::io::SeekFrom::Start(offset)).await.is_ok()
    {
        let _ = file.read_to_end(&mut buf).await;
    }
    buf
}

/// The pod directory for `prefix` (`<ns>_<pod>_`) most recently written: a pod recreated under the same
/// name (a new uid) shadows its predecessor, as in the kubelet.
fn newest_pod_dir(pods: &Path, prefix: &str) -> Option<PathBuf> {
    std::fs::read_dir(pods)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
        .filter_map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((modified, e.path()))
        })
        .max_by_key(|(modified, _)| *modified)
        .map(|(_, path)| path)
}

fn select_tail(text: &[u8], tail_lines: Option<usize>) -> Vec<u8> {
    let Some(n) = tail_lines else { return text.to_vec() };
    if n == 0 {
        return Vec::new();
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut newlines = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            newlines += 1;
            if newlines == n {
                return text[i + 1..].to_vec();
            }
        }
    }
    text.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines_with_their_newlines() {
        assert_eq!(select_tail(b"a\nb\nc\n", Some(2)), b"b\nc\n");
        assert_eq!(select_tail(b"a\nb\nc", Some(1)), b"c");
        assert_eq!(select_tail(b"a\nb\n", Some(5)), b"a\nb\n");
        assert_eq!(select_tail(b"a\nb\n", Some(0)), b"");
        assert_eq!(select_tail(b"a\nb\n", None), b"a\nb\n");
    }
}
