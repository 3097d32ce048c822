//! Connections kept from one copy task to the next within a process (`run`, `copy_all`, a Job
//! copying several tasks), one per `parallelism` slot and endpoint: opening a PostgreSQL
//! connection costs ~15 ms, a tenth of a small task (bench/history/2026-11-26-wal-equalised.md).
//!
//! A connection comes back only from a task that succeeded: every chunk committed, no open
//! transaction. Any error drops it (closing it rolls back what it had open), so a failed task's
//! session never reaches the next task. PostgreSQL sessions are reset before they are kept;
//! SQL Server sessions carry nothing to reset: the reader only runs SELECTs and the bulk writer
//! passes its options (TABLOCK, KEEP_NULLS, KEEPIDENTITY) with each load rather than setting
//! IDENTITY_INSERT or other session options, and ends every chunk with COMMIT.

use crate::mssql::connect::{ConnectError, MssqlEndpoint, TdsClient};
use crate::pg::connect::{ConnectionIo, PgConnectError, PgEndpoint, with_kept_connection_io};
use crate::timeouts::{Idle, StallWatch};
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A connection kept longer than this is checked with a round trip before a task gets it:
/// servers, proxies and NAT gateways drop idle sessions (Azure SQL's gateway after 30 minutes,
/// cloud load balancers after about 5), and a task that starts on a dead connection fails its
/// first statement and waits out a retry backoff.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(60);

/// What a kept PostgreSQL session is reset with: `DISCARD ALL` but for `DEALLOCATE ALL`
/// (tokio-postgres keeps prepared statements of its own, for type lookups). The first statement
/// says whether a transaction was left open: in the first statement of a transaction both
/// timestamps are equal (PostgreSQL's documented behaviour), so after an open `BEGIN` they differ.
const PG_RESET: &str = "SELECT transaction_timestamp() = statement_timestamp(); \
     CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; \
     SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD TEMP; DISCARD SEQUENCES";

/// A PostgreSQL connection of a copy task.
pub struct PgConn {
    pub client: tokio_postgres::Client,
    pub watch: StallWatch,
    /// The connection's I/O when the task polls it itself
    /// ([`crate::pg::connect::with_connection_io`]); `None` once it ended, or when it was spawned.
    pub io: Option<ConnectionIo>,
    driven: bool,
}

/// A SQL Server connection of a copy task (tiberius does its I/O in the awaiting task).
pub struct TdsConn {
    pub client: TdsClient,
    pub watch: StallWatch,
}

/// A connection waiting for the next task; its stall watch stopped meanwhile.
struct Kept<C> {
    conn: C,
    since: Instant,
    _idle: Idle,
}

struct Slots<C> {
    kept: Mutex<Vec<Kept<C>>>,
    cap: usize,
    check_after: Duration,
}

impl<C> Slots<C> {
    fn new(cap: usize) -> Self {
        Slots {
            kept: Mutex::new(Vec::with_capacity(cap)),
            cap,
            check_after: CHECK_AFTER_IDLE,
        }
    }

    /// A kept connection and whether it waited long enough to need a check.
    fn take(&self) -> Option<(C, bool)> {
        // Dropping `Kept` re-arms the stall watch for the task that takes it.
        self.kept
            .lock()
            .ok()?
            .pop()
            .map(|k| (k.conn, k.since.elapsed() > self.check_after))
    }

    fn put(&self, conn: C, watch: &StallWatch) {
        if let Ok(mut kept) = self.kept.lock()
            && kept.len() < self.cap
        {
            let _idle = watch.idle();
            kept.push(Kept {
                conn,
                since: Instant::now(),
                _idle,
            });
        }
    }
}

/// The connections of the copy tasks one engine call runs (see the module doc).
pub struct Pools {
    /// PostgreSQL connections whose I/O runs in a task of its own (the target of SQL Server ->
    /// PostgreSQL).
    pg_driven: Slots<PgConn>,
    /// PostgreSQL connections whose I/O the copy task polls (the source of PostgreSQL -> SQL
    /// Server).
    pg_undriven: Slots<PgConn>,
    mssql: Slots<TdsConn>,
    opened: AtomicU64,
    reused: AtomicU64,
}

impl Pools {
    /// Room for `slots` connections of each kind (the copy's `parallelism`).
    pub fn new(slots: NonZeroUsize) -> Self {
        Pools {
            pg_driven: Slots::new(slots.get()),
            pg_undriven: Slots::new(slots.get()),
            mssql: Slots::new(slots.get()),
            opened: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    /// Connections opened and connections reused so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.opened.load(Ordering::Relaxed),
            self.reused.load(Ordering::Relaxed),
        )
    }

    fn count(&self, reused: bool) {
        let c = if reused { &self.reused } else { &self.opened };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A kept PostgreSQL connection, or a new one, its I/O spawned.
    pub async fn pg(&self, endpoint: &PgEndpoint) -> Result<PgConn, PgConnectError> {
        while let Some((c, stale)) = self.pg_driven.take() {
            // The server may have closed it while it waited.
            if !c.client.is_closed() && (!stale || c.client.simple_query("").await.is_ok()) {
                self.count(true);
                return Ok(c);
            }
        }
        let (client, watch) = endpoint.connect_watched().await?;
        self.count(false);
        Ok(PgConn {
            client,
            watch,
            io: None,
            driven: true,
        })
    }

    /// A kept PostgreSQL connection, or a new one, its I/O left to the caller (`io`).
    pub async fn pg_undriven(&self, endpoint: &PgEndpoint) -> Result<PgConn, PgConnectError> {
        while let Some((mut c, stale)) = self.pg_undriven.take() {
            if c.io.is_none() || c.client.is_closed() {
                continue;
            }
            if stale {
                let PgConn { client, io, .. } = &mut c;
                if with_kept_connection_io(client.simple_query(""), io)
                    .await
                    .is_err()
                {
                    continue;
                }
            }
            self.count(true);
            return Ok(c);
        }
        let (client, io, watch) = endpoint.connect_undriven_watched().await?;
        self.count(false);
        Ok(PgConn {
            client,
            watch,
            io: Some(io),
            driven: false,
        })
    }

    /// A kept SQL Server connection, or a new one.
    pub async fn mssql(&self, endpoint: &MssqlEndpoint) -> Result<TdsConn, ConnectError> {
        while let Some((mut c, stale)) = self.mssql.take() {
            if stale && !mssql_alive(&mut c.client).await {
                continue;
            }
            self.count(true);
            return Ok(c);
        }
        let (client, watch) = endpoint.connect_watched().await?;
        self.count(false);
        Ok(TdsConn { client, watch })
    }

    /// Keeps the connection of a task that succeeded for the next task, its session reset; one
    /// that cannot be reset, or that was left in a transaction, is closed instead.
    pub async fn give_back_pg(&self, mut conn: PgConn) {
        if conn.watch.tripped().is_some() || conn.client.is_closed() {
            return;
        }
        let reset = if conn.driven {
            conn.client.simple_query(PG_RESET).await
        } else {
            let PgConn { client, io, .. } = &mut conn;
            if io.is_none() {
                return;
            }
            with_kept_connection_io(client.simple_query(PG_RESET), io).await
        };
        let fresh = reset.ok().and_then(|msgs| {
            msgs.into_iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|v| v == "t"),
                _ => None,
            })
        });
        if fresh != Some(true) {
            tracing::debug!("a PostgreSQL connection was not reset cleanly; closing it");
            return;
        }
        let watch = conn.watch.clone();
        if conn.driven {
            self.pg_driven.put(conn, &watch);
        } else {
            self.pg_undriven.put(conn, &watch);
        }
    }

    /// Keeps the connection of a task that succeeded for the next task.
    pub fn give_back_mssql(&self, conn: TdsConn) {
        if conn.watch.tripped().is_some() {
            return;
        }
        let watch = conn.watch.clone();
        self.mssql.put(conn, &watch);
    }
}

/// One round trip on a kept SQL Server session.
async fn mssql_alive(client: &mut TdsClient) -> bool {
    match client.simple_query("SELECT 1").await {
        Ok(stream) => stream.into_results().await.is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slots_keep_at_most_their_capacity() {
        let slots = Slots::new(2);
        let w = StallWatch::new("x", Duration::from_secs(1));
        for i in 0..3 {
            slots.put(i, &w);
        }
        let mut got = Vec::new();
        while let Some((c, stale)) = slots.take() {
            assert!(!stale, "just kept");
            got.push(c);
        }
        got.sort_unstable();
        assert_eq!(got, vec![0, 1]);
    }

    #[test]
    fn a_connection_kept_past_the_idle_limit_is_taken_for_a_check() {
        let mut slots = Slots::new(1);
        slots.check_after = Duration::ZERO;
        let w = StallWatch::new("x", Duration::from_secs(1));
        slots.put(7, &w);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(slots.take(), Some((7, true)));
    }
}
