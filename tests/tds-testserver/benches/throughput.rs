//! Throughput of the test server with a tiberius client in the same process (release build):
//! a 10-column mixed-type table streamed out (as `Row`s, and decoded in place as the worker reads),
//! and bulk-loaded in. Twice: with the scripted
//! backend (the wire layer alone) and with the real engine (wire + SQLite); with the engine also
//! over TLS (encryption Required, the CA trusted), for what TLS costs.
//!
//! `cargo bench -p tds-testserver --bench throughput` (BENCH_ROWS overrides the 1,000,000 rows).
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::expect::expected_column_data;
use common::scripted::{mixed_columns, mixed_row};
use common::{TdsClient, connect};
use futures_util::TryStreamExt;
use tds_testserver::certs::TestCerts;
use tds_testserver::{ServerConfig, TestServer};
use tiberius::{EncryptionLevel, TokenRow};
use tokio_util::compat::TokioAsyncWriteCompatExt;

/// CPU seconds this process (client and server) has used, user + system: steadier than rates
/// on a machine shared with other work.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) are space-separated; utime and
    // stime are the 14th and 15th fields, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// Runs `pass`, returning its rows/s and the CPU seconds it took.
async fn timed<F: std::future::Future<Output = f64>>(pass: F) -> (f64, f64) {
    let before = cpu_seconds();
    let rate = pass.await;
    (rate, cpu_seconds() - before)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn stream_out(c: &mut TdsClient, sql: &str, n: u64) -> f64 {
    let start = Instant::now();
    let mut stream = c.simple_query(sql).await.unwrap().into_row_stream();
    let mut count = 0u64;
    let mut checksum = 0i64;
    while let Some(row) = stream.try_next().await.unwrap() {
        checksum += i64::from(row.get::<i32, _>(0).unwrap());
        count += 1;
    }
    assert_eq!(count, n);
    assert_eq!(checksum, (0..n as i64).sum::<i64>());
    n as f64 / start.elapsed().as_secs_f64()
}

async fn bulk_in(c: &mut TdsClient, table: &str, n: u64) -> f64 {
    let cols = mixed_columns();
    let start = Instant::now();
    let mut req = c.bulk_insert(table).await.unwrap();
    for i in 0..n {
        let mut row = TokenRow::with_capacity(cols.len());
        for (col, v) in cols.iter().zip(mixed_row(i)) {
            row.push(expected_column_data(col.ty, &v));
        }
        req.send(row).await.unwrap();
    }
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[n]);
    n as f64 / start.elapsed().as_secs_f64()
}

/// Streamed out the way the worker reads (tiberius `Query::query_raw`, the vendored patch): rows
/// decoded in place, text written as UTF-8 into one reused buffer, no `Row` or `String` per value.
async fn stream_out_in_place(c: &mut TdsClient, sql: &str, n: u64) -> f64 {
    let start = Instant::now();
    let mut rows = tiberius::Query::new(sql).query_raw(c).await.unwrap();
    let (mut count, mut checksum, mut text_bytes) = (0u64, 0i64, 0usize);
    let mut utf8 = Vec::with_capacity(1024);
    while let Some(row) = rows.next_row().await.unwrap() {
        for i in 0..row.len() {
            match row.value(i) {
                Some(tiberius::RawValue::Data(tiberius::ColumnData::I32(Some(v)))) if i == 0 => {
                    checksum += i64::from(v);
                }
                Some(tiberius::RawValue::Text(t)) => {
                    utf8.clear();
                    t.write_utf8(&mut utf8).unwrap();
                    text_bytes += utf8.len();
                }
                _ => {}
            }
        }
        count += 1;
    }
    assert_eq!(count, n);
    assert_eq!(checksum, (0..n as i64).sum::<i64>());
    assert!(text_bytes > 0);
    n as f64 / start.elapsed().as_secs_f64()
}

/// The server alone: a raw TDS client that logs in with 32767-byte packets and reads the
/// reply without decoding it (only the final DONE's row count), so no client-side decoding
/// is in the measurement.
fn raw_out(addr: std::net::SocketAddr, sql: &str, n: u64) -> f64 {
    use std::io::Read;
    let mut c = common::raw::RawClient::connect(addr);
    c.stream.set_nodelay(true).unwrap();
    c.send(0x12, &[0xFF]);
    c.read_message().unwrap();
    c.send(0x10, &common::raw::login7("sa", common::PASSWORD, "", 32767));
    c.read_message().unwrap();
    let mut payload = common::raw::all_headers();
    payload.extend(common::utf16(sql));
    let start = Instant::now();
    c.send(0x01, &payload);
    let mut buf = vec![0u8; 32767];
    let mut tail = Vec::new();
    loop {
        let mut h = [0u8; 8];
        c.stream.read_exact(&mut h).unwrap();
        let len = usize::from(u16::from_be_bytes([h[2], h[3]])) - 8;
        c.stream.read_exact(&mut buf[..len]).unwrap();
        if h[1] & 1 != 0 {
            tail.extend_from_slice(&buf[..len]);
            break;
        }
        tail.clear();
        tail.extend_from_slice(&buf[len.saturating_sub(13)..len]);
    }
    let elapsed = start.elapsed().as_secs_f64();
    // The reply ends with DONE: token, status u16, curcmd u16, row count u64.
    let done = &tail[tail.len() - 13..];
    assert_eq!(done[0], 0xFD);
    assert_eq!(u64::from_le_bytes(done[5..13].try_into().unwrap()), n);
    n as f64 / elapsed
}

/// The server's encoder alone: rows generated up front, encoded and split into 32 KiB packets
/// written to a sink (no client, no engine).
fn encode_only(n: u64) -> f64 {
    use tds_testserver::wire::{packet::PacketWriter, tokens};
    let rows: Vec<_> = (0..n.min(100_000)).map(mixed_row).collect();
    let mut w = PacketWriter::new(std::io::sink(), 32767, 1);
    let start = Instant::now();
    let types = tokens::colmetadata(w.buf(), &mixed_columns(), false);
    for i in 0..n {
        tokens::row(w.buf(), &types, &rows[(i % rows.len() as u64) as usize]).unwrap();
        w.flush_full().unwrap();
    }
    w.finish().unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let n: u64 = std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // BENCH_ENGINE_ONLY=1 skips the wire-only passes (for profiling the engine under callgrind).
    let engine_only = std::env::var("BENCH_ENGINE_ONLY").is_ok_and(|v| v == "1");
    if !engine_only {
        wire_only(n).await;
    }
    engine(n).await;
}

async fn wire_only(n: u64) {
    println!("encoder alone: {:.0} rows/s", encode_only(n));

    let (server, _) = common::scripted_server(32767);
    let raw = raw_out(server.addr(), &format!("ROWS {n}"), n);
    println!("wire only (scripted backend), raw client (no decoding): out {raw:.0} rows/s");
    let mut c = connect(server.addr()).await;
    let out = stream_out(&mut c, &format!("ROWS {n}"), n).await;
    let inn = bulk_in(&mut c, "[dbo].[mixed]", n).await;
    println!(
        "wire only (scripted backend): out {out:.0} rows/s, bulk in {inn:.0} rows/s, peak RSS {:.0} MiB",
        peak_rss_mib()
    );
}

/// A client with the whole session encrypted, validating the server's certificate.
async fn connect_tls(addr: std::net::SocketAddr, certs: &TestCerts) -> TdsClient {
    let mut config = common::client_config(addr, common::PASSWORD, Some(32767));
    config.encryption(EncryptionLevel::Required);
    config.trust_cert_ca(certs.ca().display());
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    tiberius::Client::connect(config, tcp.compat_write())
        .await
        .unwrap()
}

async fn create_mixed(c: &mut TdsClient, table: &str) {
    c.simple_query(format!(
        "CREATE TABLE {table} (id int NOT NULL PRIMARY KEY, name nvarchar(50) NOT NULL, amount decimal(18,2) NULL, \
         created datetime2(7) NULL, flag bit NOT NULL, qty bigint NULL, price float NULL, code varchar(10) NULL, \
         guid uniqueidentifier NULL, note nvarchar(200) NULL)"
    ))
    .await
    .unwrap()
    .into_results()
    .await
    .unwrap();
}

async fn engine(n: u64) {
    // With a certificate the server still serves clients that do not ask for encryption in the clear.
    let certs = TestCerts::generate("throughput bench CA").unwrap();
    let server = TestServer::start(ServerConfig {
        tls: Some(certs.server()),
        ..common::config(32767)
    })
    .unwrap();
    let mut c = connect(server.addr()).await;
    create_mixed(&mut c, "dbo.mixed").await;
    let (inn, inn_cpu) = timed(bulk_in(&mut c, "[dbo].[mixed]", n)).await;
    let out = stream_out(&mut c, "SELECT * FROM dbo.mixed ORDER BY id", n).await;
    let (in_place, in_place_cpu) = timed(stream_out_in_place(
        &mut c,
        "SELECT * FROM dbo.mixed ORDER BY id",
        n,
    ))
    .await;
    let raw = raw_out(server.addr(), "SELECT * FROM dbo.mixed ORDER BY id", n);
    println!("with the engine (SQLite), raw client (no decoding): out {raw:.0} rows/s");
    println!(
        "with the engine (SQLite), tiberius query_raw (the worker's reader): out {in_place:.0} rows/s \
         ({in_place_cpu:.2} CPU s), bulk in {inn_cpu:.2} CPU s"
    );
    println!(
        "with the engine (SQLite):     out {out:.0} rows/s, bulk in {inn:.0} rows/s, peak RSS {:.0} MiB",
        peak_rss_mib()
    );

    let mut t = connect_tls(server.addr(), &certs).await;
    create_mixed(&mut t, "dbo.mixed_tls").await;
    let (inn_tls, inn_tls_cpu) = timed(bulk_in(&mut t, "[dbo].[mixed_tls]", n)).await;
    let (in_place_tls, in_place_tls_cpu) = timed(stream_out_in_place(
        &mut t,
        "SELECT * FROM dbo.mixed_tls ORDER BY id",
        n,
    ))
    .await;
    println!(
        "with the engine over TLS 1.2 (Required): query_raw out {in_place_tls:.0} rows/s ({in_place_tls_cpu:.2} CPU s), \
         bulk in {inn_tls:.0} rows/s ({inn_tls_cpu:.2} CPU s)"
    );
}
