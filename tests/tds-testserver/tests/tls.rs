//! TLS as SQL Server does it for TDS 7.x, through tiberius: the PRELOGIN answer for each
//! client setting, full encryption with a trusted CA or trustServerCertificate, encryption of
//! the login packet only, a rejected certificate, and a server without a certificate.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::raw::RawClient;
use common::{PASSWORD, TdsClient, utf16};
use tds_testserver::certs::TestCerts;
use tds_testserver::{ServerConfig, TestServer, TlsFiles};
use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio_util::compat::TokioAsyncWriteCompatExt;

/// Keeps the certificate files alive; `ca` is the path as tiberius takes it.
struct Certs {
    _files: TestCerts,
    ca: String,
    server: TlsFiles,
}

/// `ca_name`: the CA's common name (a client finds the issuer of a certificate by it).
fn certs_from(ca_name: &str) -> Certs {
    let files = TestCerts::generate(ca_name).unwrap();
    Certs {
        ca: files.ca().display().to_string(),
        server: files.server(),
        _files: files,
    }
}

fn certs() -> Certs {
    certs_from("tds-testserver test CA")
}

fn server(tls: Option<TlsFiles>) -> TestServer {
    TestServer::start(ServerConfig {
        password: PASSWORD.into(),
        tls,
        ..ServerConfig::default()
    })
    .unwrap()
}

/// SQL Server with "Force Encryption" on.
fn forcing_server(tls: TlsFiles) -> TestServer {
    TestServer::start(ServerConfig {
        password: PASSWORD.into(),
        tls: Some(tls),
        force_encryption: true,
        ..ServerConfig::default()
    })
    .unwrap()
}

fn client_config(addr: SocketAddr, encryption: EncryptionLevel) -> Config {
    let mut c = Config::new();
    // The name the certificate is checked against.
    c.host("localhost");
    c.port(addr.port());
    c.authentication(AuthMethod::sql_server("sa", PASSWORD));
    c.encryption(encryption);
    c.application_name("tls-test-application");
    c
}

/// Connects through `addr`; bounded so that a handshake that hangs fails the test.
async fn try_connect(addr: SocketAddr, config: Config) -> tiberius::Result<TdsClient> {
    let connect = async {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Client::connect(config, tcp.compat_write()).await
    };
    tokio::time::timeout(Duration::from_secs(60), connect)
        .await
        .expect("the connection neither succeeded nor failed")
}

const MARKER: &str = "plaintext-marker-7f3a";

/// A query whose text and result carry [`MARKER`], so a capture shows whether it was in the clear.
async fn marker_query(client: &mut TdsClient) {
    let row = client
        .simple_query(format!("SELECT '{MARKER}' AS m, 42 AS n"))
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<&str, _>(0), Some(MARKER));
    assert_eq!(row.get::<i32, _>(1), Some(42));
}

/// A TCP proxy for one connection that keeps every byte each way.
struct Capture {
    addr: SocketAddr,
    from_client: Arc<Mutex<Vec<u8>>>,
    from_server: Arc<Mutex<Vec<u8>>>,
}

impl Capture {
    fn start(upstream: SocketAddr) -> Capture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let from_client: Arc<Mutex<Vec<u8>>> = Arc::default();
        let from_server: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (fc, fs) = (Arc::clone(&from_client), Arc::clone(&from_server));
        thread::spawn(move || {
            let (client, _) = listener.accept().unwrap();
            let server = TcpStream::connect(upstream).unwrap();
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || copy(s2, c2, fs));
            copy(client, server, fc);
        });
        Capture {
            addr,
            from_client,
            from_server,
        }
    }

    fn client_sent(&self, needle: &[u8]) -> bool {
        contains(&self.from_client.lock().unwrap(), needle)
    }

    fn server_sent(&self, needle: &[u8]) -> bool {
        contains(&self.from_server.lock().unwrap(), needle)
    }
}

fn copy(mut from: TcpStream, mut to: TcpStream, log: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 16384];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        log.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The ENCRYPTION byte of the server's PRELOGIN answer to a client that sent `client`.
fn prelogin_answer(addr: SocketAddr, client: u8) -> Option<u8> {
    // VERSION, ENCRYPTION, terminator; then their data.
    let mut payload = vec![0x00, 0x00, 0x0B, 0x00, 0x06, 0x01, 0x00, 0x11, 0x00, 0x01, 0xFF];
    payload.extend_from_slice(&[0x10, 0x00, 0x00, 0x00, 0x00, 0x00, client]);
    let mut raw = RawClient::connect(addr);
    raw.send(0x12, &payload);
    let reply = raw.read_message()?;
    let at = usize::from(u16::from_be_bytes([reply[6], reply[7]]));
    assert_eq!(reply[5], 0x01, "the second option is ENCRYPTION");
    reply.get(at).copied()
}

#[test]
fn prelogin_answers_each_client_setting_as_sql_server() {
    let certs = certs();
    let with_cert = server(Some(certs.server.clone()));
    // OFF -> OFF (the login packet encrypted), ON and REQ -> ON, NOT_SUP -> NOT_SUP.
    let answers: Vec<_> = [0, 1, 2, 3]
        .into_iter()
        .map(|c| prelogin_answer(with_cert.addr(), c))
        .collect();
    assert_eq!(answers, [Some(0), Some(1), Some(2), Some(1)]);

    let forcing = forcing_server(certs.server.clone());
    // OFF -> REQ (everything encrypted), ON and REQ -> ON, NOT_SUP -> REQ (and turned away).
    let answers: Vec<_> = [0, 1, 2, 3]
        .into_iter()
        .map(|c| prelogin_answer(forcing.addr(), c))
        .collect();
    assert_eq!(answers, [Some(3), Some(1), Some(3), Some(1)]);

    let without = server(None);
    let answers: Vec<_> = [0, 1, 2, 3]
        .into_iter()
        .map(|c| prelogin_answer(without.addr(), c))
        .collect();
    assert_eq!(answers, [Some(2), Some(2), Some(2), Some(2)]);
}

#[test]
fn a_client_requiring_encryption_is_turned_away_by_a_server_without_certificate() {
    let without = server(None);
    let mut payload = vec![0x00, 0x00, 0x0B, 0x00, 0x06, 0x01, 0x00, 0x11, 0x00, 0x01, 0xFF];
    payload.extend_from_slice(&[0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]);
    let mut raw = RawClient::connect(without.addr());
    raw.send(0x12, &payload);
    assert!(raw.read_message().is_some(), "the PRELOGIN is answered (NOT_SUP)");
    assert!(raw.closed(), "then the server closes the connection");
}

#[tokio::test]
async fn required_with_a_trusted_ca_encrypts_everything() {
    let certs = certs();
    let server = server(Some(certs.server.clone()));
    let capture = Capture::start(server.addr());
    let mut config = client_config(capture.addr, EncryptionLevel::Required);
    config.trust_cert_ca(&certs.ca);
    let mut client = try_connect(capture.addr, config).await.unwrap();
    marker_query(&mut client).await;
    drop(client);
    assert!(
        !capture.client_sent(&utf16("tls-test-application")),
        "LOGIN7 is encrypted"
    );
    assert!(!capture.client_sent(&utf16(MARKER)), "the query is encrypted");
    assert!(!capture.server_sent(MARKER.as_bytes()), "the result is encrypted");
}

#[tokio::test]
async fn required_with_an_untrusted_certificate_fails_clearly() {
    let certs = certs();
    // A CA that signed nothing the server presents.
    let other = certs_from("another CA");
    let server = server(Some(certs.server.clone()));
    let mut config = client_config(server.addr(), EncryptionLevel::Required);
    config.trust_cert_ca(&other.ca);
    let err = try_connect(server.addr(), config).await.err().unwrap();
    let message = err.to_string();
    assert!(
        matches!(err, tiberius::error::Error::Tls(_)),
        "a TLS error, got {err:?}"
    );
    assert!(
        message.contains("certificate was rejected") && message.contains("UnknownIssuer"),
        "the message says the certificate's issuer is unknown: {message}"
    );
    // The server is unharmed.
    let mut config = client_config(server.addr(), EncryptionLevel::Required);
    config.trust_cert_ca(&certs.ca);
    marker_query(&mut try_connect(server.addr(), config).await.unwrap()).await;
}

#[tokio::test]
async fn a_certificate_for_another_name_is_rejected() {
    let certs = certs();
    let server = server(Some(certs.server.clone()));
    let mut config = client_config(server.addr(), EncryptionLevel::Required);
    config.host("db.example.invalid");
    config.trust_cert_ca(&certs.ca);
    let err = try_connect(server.addr(), config).await.err().unwrap();
    assert!(
        err.to_string().contains("certificate was rejected"),
        "the name mismatch is a certificate error: {err}"
    );
}

#[tokio::test]
async fn trust_server_certificate_skips_validation() {
    let certs = certs();
    let server = server(Some(certs.server.clone()));
    let mut config = client_config(server.addr(), EncryptionLevel::Required);
    config.trust_cert();
    marker_query(&mut try_connect(server.addr(), config).await.unwrap()).await;
}

#[tokio::test]
async fn off_with_a_certificate_encrypts_only_the_login_packet() {
    let certs = certs();
    let server = server(Some(certs.server.clone()));
    let capture = Capture::start(server.addr());
    let mut config = client_config(capture.addr, EncryptionLevel::Off);
    config.trust_cert_ca(&certs.ca);
    let mut client = try_connect(capture.addr, config).await.unwrap();
    marker_query(&mut client).await;
    drop(client);
    assert!(
        !capture.client_sent(&utf16("tls-test-application")),
        "LOGIN7 is encrypted"
    );
    assert!(capture.client_sent(&utf16(MARKER)), "the query is in the clear");
    assert!(
        capture.server_sent(MARKER.as_bytes()),
        "the result is in the clear"
    );
}

#[tokio::test]
async fn not_supported_is_plaintext_with_or_without_a_certificate() {
    let certs = certs();
    for tls in [None, Some(certs.server.clone())] {
        let server = server(tls);
        let capture = Capture::start(server.addr());
        let config = client_config(capture.addr, EncryptionLevel::NotSupported);
        marker_query(&mut try_connect(capture.addr, config).await.unwrap()).await;
        assert!(capture.client_sent(&utf16("tls-test-application")));
    }
}

/// tiberius' `Off` means "encrypt the login packet if the server can": against a server
/// without TLS it must not start a handshake (the vendored fix, PATCHES.md 9), and it works.
#[tokio::test]
async fn off_against_a_server_without_certificate_connects_in_the_clear() {
    let server = server(None);
    let capture = Capture::start(server.addr());
    let config = client_config(capture.addr, EncryptionLevel::Off);
    marker_query(&mut try_connect(capture.addr, config).await.unwrap()).await;
    assert!(
        capture.client_sent(&utf16("tls-test-application")),
        "no TLS at all"
    );
}

#[tokio::test]
async fn required_against_a_server_without_certificate_is_an_error() {
    let server = server(None);
    for level in [EncryptionLevel::Required, EncryptionLevel::On] {
        let err = try_connect(server.addr(), client_config(server.addr(), level))
            .await
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("does not allow the requested encryption level"),
            "{level:?}: {err}"
        );
    }
}

#[test]
fn an_unreadable_certificate_is_a_start_error_naming_the_file() {
    let missing = Path::new("/nonexistent/server.crt");
    let err = TestServer::start(ServerConfig {
        tls: Some(TlsFiles {
            cert: missing.into(),
            key: missing.into(),
        }),
        ..ServerConfig::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("/nonexistent/server.crt"), "{err}");
}

/// Many packets each way inside the TLS session: a bulk load in, a large result out, with values
/// that span TLS records (nvarchar(max) up to 5 KB as UTF-16).
#[tokio::test]
async fn bulk_loads_and_large_results_cross_the_tls_session_intact() {
    use futures_util::TryStreamExt;
    use tiberius::{IntoSql, TokenRow};

    let certs = certs();
    let server = server(Some(certs.server.clone()));
    let mut config = client_config(server.addr(), EncryptionLevel::Required);
    config.trust_cert_ca(&certs.ca);
    config.packet_size(32767);
    let mut c = try_connect(server.addr(), config).await.unwrap();
    c.simple_query("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, s nvarchar(max) NULL)")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let value = |i: i32| format!("{i}:{}", "é".repeat(usize::try_from(i % 2500).unwrap()));
    const N: i32 = 2000;
    let mut req = c.bulk_insert("dbo.t").await.unwrap();
    for i in 0..N {
        let mut row = TokenRow::new();
        row.push(i.into_sql());
        row.push(value(i).into_sql());
        req.send(row).await.unwrap();
    }
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[N as u64]);

    let mut stream = c
        .simple_query("SELECT id, s FROM dbo.t ORDER BY id")
        .await
        .unwrap();
    let mut seen = 0;
    while let Some(item) = stream.try_next().await.unwrap() {
        if let Some(row) = item.into_row() {
            let id = row.get::<i32, _>(0).unwrap();
            assert_eq!(id, seen);
            assert_eq!(row.get::<&str, _>(1), Some(value(id).as_str()));
            seen += 1;
        }
    }
    drop(stream);
    assert_eq!(seen, N);
}

#[tokio::test]
async fn a_server_forcing_encryption_encrypts_everything_for_off() {
    let certs = certs();
    let server = forcing_server(certs.server.clone());
    let capture = Capture::start(server.addr());
    let mut config = client_config(capture.addr, EncryptionLevel::Off);
    config.trust_cert_ca(&certs.ca);
    marker_query(&mut try_connect(capture.addr, config).await.unwrap()).await;
    assert!(!capture.client_sent(&utf16(MARKER)), "the query is encrypted");
    assert!(!capture.server_sent(MARKER.as_bytes()), "the result is encrypted");

    let err = try_connect(
        server.addr(),
        client_config(server.addr(), EncryptionLevel::NotSupported),
    )
    .await
    .err()
    .unwrap();
    assert!(
        !matches!(err, tiberius::error::Error::Server(_)),
        "a client that cannot encrypt does not get to log in: {err}"
    );
}

#[test]
fn forcing_encryption_without_a_certificate_is_a_start_error() {
    let err = TestServer::start(ServerConfig {
        force_encryption: true,
        ..ServerConfig::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("needs a certificate"), "{err}");
}
