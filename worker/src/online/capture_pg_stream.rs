//! The replication session [`super::capture_pg::PgCapture`] reads the slot through:
//! `START_REPLICATION SLOT ... LOGICAL` (the `pgwire-replication` crate) from the slot's
//! confirmed position, with the session settings the decoder's text forms rely on. The crate
//! speaks the protocol in plaintext; with TLS it does so through [`Relay`], which holds the
//! worker's own TLS connection to the server (the endpoint's `sslMode` and CA, checked as every
//! other PostgreSQL connection of the worker).

use super::OnlineError;
use crate::pg::connect::PgEndpoint;
use crate::pg::tls_relay::{Relay, RelayError};
use pgwire_replication::{
    Lsn, PgWireError, ReplicationClient, ReplicationConfig, ReplicationEvent, TlsConfig,
};
use std::time::Duration;

/// The settings `capture_pg`'s `SESSION` sets on its connections, as startup options: the
/// walsender writes each value's text form with them.
const OPTIONS: &str = "-c intervalstyle=iso_8601 -c TimeZone=UTC -c standard_conforming_strings=on \
     -c extra_float_digits=3 -c DateStyle=ISO,YMD -c bytea_output=hex";

/// Events buffered between the session's task and the capture: each holds one message (a row
/// image), so this bounds the memory of a stream of wide rows.
const BUFFERED_EVENTS: usize = 256;

/// How long opening waits for the slot while another session still holds it (a previous
/// process's walsender lingers until it notices its client is gone).
const SLOT_RELEASE_WAIT: Duration = Duration::from_secs(60);

/// An open session on the slot.
pub struct SlotStream {
    client: ReplicationClient,
    /// The TLS connection the session goes through; `None` with `sslMode: disable`.
    _relay: Option<Relay>,
}

/// Why a session could not be opened or went away.
#[derive(Debug)]
pub enum StreamFault {
    /// The slot is held by another session (`55006`).
    SlotBusy(PgWireError),
    /// The worker's connection to the server (TCP, TLS) for the session.
    Connect(RelayError),
    Other(PgWireError),
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::SlotBusy(e) | StreamFault::Other(e) => e.fmt(f),
            StreamFault::Connect(e) => e.fmt(f),
        }
    }
}

fn fault(e: PgWireError) -> StreamFault {
    if matches!(&e, PgWireError::Server(m) if m.contains("SQLSTATE 55006")) {
        StreamFault::SlotBusy(e)
    } else {
        StreamFault::Other(e)
    }
}

impl SlotStream {
    /// Opens a session on `slot` from its confirmed position; waits while another session still
    /// holds the slot.
    pub async fn open(endpoint: &PgEndpoint, slot: &str, publication: &str) -> Result<Self, StreamFault> {
        let started = std::time::Instant::now();
        loop {
            // The crate connects in plaintext: directly with `sslMode: disable`, else to the
            // relay's socket (libpq's convention: a host starting with `/` is a socket directory).
            let relay = match endpoint.tls_verify() {
                None => None,
                Some(_) => Some(Relay::open(endpoint).await.map_err(StreamFault::Connect)?),
            };
            let (host, port) = match &relay {
                None => (endpoint.host.clone(), endpoint.port),
                Some(r) => (r.socket_dir().to_string_lossy().into_owned(), r.port()),
            };
            let config = ReplicationConfig::new(
                host,
                endpoint.user.clone(),
                endpoint.password.clone(),
                endpoint.database.clone(),
                slot.to_string(),
                publication.to_string(),
            )
            .with_port(port)
            .with_tls(TlsConfig::disabled())
            .with_options(OPTIONS)
            // The position acknowledged reaches the slot within this of the target's commit.
            .with_status_interval(Duration::from_millis(100))
            // An idle session answers the walsender at least this often, which keeps its
            // keepalives (how far it has read) coming.
            .with_wakeup_interval(Duration::from_secs(1))
            .with_buffer_size(BUFFERED_EVENTS)
            .with_application_name("mssql-pg-worker");
            let mut client = ReplicationClient::connect(config).await.map_err(fault)?;
            match client.wait_started().await.map_err(fault) {
                Ok(()) => {
                    return Ok(SlotStream {
                        client,
                        _relay: relay,
                    });
                }
                Err(StreamFault::SlotBusy(e)) if started.elapsed() < SLOT_RELEASE_WAIT => {
                    tracing::debug!(error = %e, "the replication slot is still held; waiting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The next event; `None` when none came within `wait` (`None` for `wait`: no limit).
    pub async fn next(&mut self, wait: Option<Duration>) -> Result<Option<ReplicationEvent>, StreamFault> {
        let received = match wait {
            Some(wait) => match tokio::time::timeout(wait, self.client.recv()).await {
                Ok(r) => r,
                Err(_) => return Ok(None),
            },
            None => self.client.recv().await,
        };
        match received {
            Ok(Some(event)) => Ok(Some(event)),
            Ok(None) => Err(StreamFault::Other(PgWireError::Protocol(
                "the replication session ended".into(),
            ))),
            Err(e) => Err(fault(e)),
        }
    }

    /// The target holds everything up to `lsn`: reported to the walsender (the slot's
    /// confirmed position follows).
    pub fn acknowledge(&self, lsn: u64) {
        self.client.update_applied_lsn(Lsn::from_u64(lsn));
    }

    /// Ends the session and waits (briefly) for it to close, so that the slot is free.
    pub async fn close(mut self) {
        if let Err(e) = tokio::time::timeout(Duration::from_secs(5), self.client.shutdown()).await {
            tracing::debug!(error = %e, "closing the replication session timed out");
        }
    }
}

/// A fault of the session as the stream's error: the source's message, where it happened.
pub fn fault_error(what: &str, endpoint: &PgEndpoint, slot: &str, e: &StreamFault) -> OnlineError {
    let hint = match e {
        StreamFault::Connect(_) => "",
        StreamFault::SlotBusy(_) | StreamFault::Other(_) => {
            "; the source user needs the REPLICATION attribute and a free walsender (max_wal_senders)"
        }
    };
    OnlineError::Setup(format!(
        "PostgreSQL source at {}:{} ({what}, replication slot {slot}): {e}{hint}",
        endpoint.host, endpoint.port
    ))
}
