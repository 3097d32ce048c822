//! Helpers for the wire-protocol tests: a scripted backend (so the wire layer is tested
//! whatever the SQL engine supports), tiberius connections, a raw TDS client and a recording
//! TCP proxy.
#![allow(clippy::unwrap_used, dead_code)]

pub mod expect;
pub mod raw;
pub mod scripted;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use tds_testserver::{ServerConfig, TestServer};
use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

pub const PASSWORD: &str = "TestServer-Passw0rd";

pub type TdsClient = Client<Compat<tokio::net::TcpStream>>;

pub fn config(max_packet_size: u32) -> ServerConfig {
    ServerConfig {
        max_packet_size,
        password: PASSWORD.into(),
        ..ServerConfig::default()
    }
}

pub fn client_config(addr: SocketAddr, password: &str, packet_size: Option<u32>) -> Config {
    let mut c = Config::new();
    c.host("127.0.0.1");
    c.port(addr.port());
    c.authentication(AuthMethod::sql_server("sa", password));
    c.encryption(EncryptionLevel::NotSupported);
    if let Some(size) = packet_size {
        c.packet_size(size);
    }
    c
}

pub async fn try_connect(
    addr: SocketAddr,
    password: &str,
    packet_size: Option<u32>,
) -> tiberius::Result<TdsClient> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Client::connect(client_config(addr, password, packet_size), tcp.compat_write()).await
}

pub async fn connect(addr: SocketAddr) -> TdsClient {
    try_connect(addr, PASSWORD, None).await.unwrap()
}

/// A server whose sessions are [`scripted::Scripted`]; the returned state records what they saw.
pub fn scripted_server(max_packet_size: u32) -> (TestServer, Arc<scripted::Shared>) {
    let shared = Arc::new(scripted::Shared::default());
    let engine = tds_testserver::engine::Engine::open(tds_testserver::engine::EngineConfig {
        data_dir: None,
        database: "master".into(),
        bulk_insert_dir: None,
    })
    .unwrap();
    let connector = Arc::new(scripted::ScriptedConnector(Arc::clone(&shared)));
    let server = TestServer::start_with(config(max_packet_size), engine, connector).unwrap();
    (server, shared)
}

/// One recorded packet: (type, status, total length, payload).
pub type Recorded = Arc<Mutex<Vec<(u8, u8, usize, Vec<u8>)>>>;

/// A TCP proxy for one connection that records every packet in both directions.
pub struct Proxy {
    pub addr: SocketAddr,
    pub from_server: Recorded,
    pub from_client: Recorded,
}

fn pump(mut from: TcpStream, mut to: TcpStream, log: Recorded) {
    loop {
        let mut header = [0u8; 8];
        if from.read_exact(&mut header).is_err() {
            break;
        }
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        let mut payload = vec![0u8; len.saturating_sub(8)];
        if from.read_exact(&mut payload).is_err() {
            break;
        }
        log.lock()
            .unwrap()
            .push((header[0], header[1], len, payload.clone()));
        if to
            .write_all(&header)
            .and_then(|_| to.write_all(&payload))
            .is_err()
        {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

impl Proxy {
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let from_server: Recorded = Arc::default();
        let from_client: Recorded = Arc::default();
        let (fs, fc) = (Arc::clone(&from_server), Arc::clone(&from_client));
        thread::spawn(move || {
            let (client, _) = listener.accept().unwrap();
            let server = TcpStream::connect(upstream).unwrap();
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || pump(s2, c2, fs));
            pump(client, server, fc);
        });
        Proxy {
            addr,
            from_server,
            from_client,
        }
    }
}

/// UTF-16LE bytes.
pub fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The server error inside a tiberius error (panics on any other kind).
pub fn server_error(e: tiberius::error::Error) -> tiberius::error::TokenError {
    match e {
        tiberius::error::Error::Server(t) => t,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Runs a batch, discarding its results.
pub async fn run(c: &mut TdsClient, sql: &str) -> Result<(), tiberius::error::Error> {
    c.simple_query(sql).await?.into_results().await.map(|_| ())
}

/// The first column of the first row as an int (`None` for NULL).
pub async fn scalar_i32(c: &mut TdsClient, sql: &str) -> Option<i32> {
    c.simple_query(sql)
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get::<i32, _>(0)
}
