//! The `tds-testserver` binary: announces its address on stdout, serves logins, and exits 0 on
//! SIGTERM.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

#[tokio::test]
async fn binary_announces_serves_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tds-testserver"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--user",
            "sa",
            "--max-packet-size",
            "8192",
        ])
        .env("TDS_TESTSERVER_PASSWORD", common::PASSWORD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("tds-testserver listening on ")
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(addr.port(), 0);

    // Logins work (whatever the engine supports yet) and bad passwords fail.
    let client = common::connect(addr).await;
    drop(client);
    assert!(common::try_connect(addr, "nope", None).await.is_err());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(common::PASSWORD),
        "the password never reaches the log"
    );
}
