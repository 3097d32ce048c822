//! `mssql-pg-operator selftest`: what the chart's `helm test` pod runs. It answers the two questions a user
//! has after an install, from inside the cluster: does the operator answer (`/readyz` of its Service), and does
//! the API server serve the CRDs. The image is distroless (no shell, no curl), so the binary does it itself.

use std::time::Duration;

use mssql_pg_crds::names::{GROUP, VERSION};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Resources the API server must serve under `mssqlpg.dev/v1alpha1`.
pub const SERVED: [&str; 2] = ["migrations", "migrationtasks"];

/// Why a selftest check failed.
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("{0} is not an http://host:port/path URL")]
    Url(String),
    #[error("GET {url}: {message}")]
    Http { url: String, message: String },
    #[error("{GROUP}/{VERSION} discovery: {0}")]
    Discovery(#[source] kube::Error),
    #[error("{GROUP}/{VERSION} does not serve {0} (CRDs not installed or not established)")]
    NotServed(String),
}

/// GET `url` (plain http: the operator's Service) until it answers 200 or `attempts` run out, one second apart.
pub async fn check_ready(url: &str, attempts: u32) -> Result<String, SelftestError> {
    let (host, port, path) = split_url(url)?;
    let mut last = String::new();
    for attempt in 0..attempts.max(1) {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        match tokio::time::timeout(Duration::from_secs(5), get(&host, port, &path)).await {
            Ok(Ok((200, body))) => return Ok(body),
            Ok(Ok((code, body))) => last = format!("status {code}: {}", body.trim()),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "no answer within 5 s".to_string(),
        }
    }
    Err(SelftestError::Http {
        url: url.to_string(),
        message: last,
    })
}

/// The CRDs' resources as the API server's discovery lists them (any authenticated account may read it).
pub async fn check_served(client: &kube::Client) -> Result<(), SelftestError> {
    let list = client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
        .map_err(SelftestError::Discovery)?;
    for want in SERVED {
        if !list.resources.iter().any(|r| r.name == want) {
            return Err(SelftestError::NotServed(want.to_string()));
        }
    }
    Ok(())
}

fn split_url(url: &str) -> Result<(String, u16, String), SelftestError> {
    let bad = || SelftestError::Url(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port, path.to_string()))
}

async fn get(host: &str, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.take(64 * 1024).read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP response"))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    Ok((code, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_host_port_and_path() {
        let parts = split_url("http://op-metrics.ns.svc:8080/readyz").unwrap();
        assert_eq!(
            parts,
            ("op-metrics.ns.svc".to_string(), 8080, "/readyz".to_string())
        );
        assert_eq!(
            split_url("http://h").unwrap(),
            ("h".to_string(), 80, "/".to_string())
        );
        assert!(split_url("https://h/readyz").is_err());
        assert!(split_url("http://h:port/").is_err());
        assert!(split_url("http://:80/").is_err());
    }

    #[tokio::test]
    async fn ready_answers_200_and_anything_else_is_reported() {
        use tokio::net::TcpListener;
        async fn serve_once(listener: &TcpListener, answer: &'static str) {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(answer.as_bytes()).await.unwrap();
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/readyz", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            serve_once(&listener, "HTTP/1.1 503 Service Unavailable\r\n\r\nnot ready").await;
            serve_once(&listener, "HTTP/1.1 200 OK\r\n\r\nok").await;
            listener
        });
        assert_eq!(check_ready(&url, 3).await.unwrap(), "ok");
        let listener = server.await.unwrap();
        let server = tokio::spawn(async move {
            serve_once(&listener, "HTTP/1.1 503 Service Unavailable\r\n\r\nnot ready").await;
        });
        let err = check_ready(&url, 1).await.unwrap_err().to_string();
        assert!(err.contains("status 503: not ready"), "{err}");
        server.await.unwrap();
    }
}
