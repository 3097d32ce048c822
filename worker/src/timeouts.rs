//! Bounded waits on both databases: a connect timeout, TCP keepalives and user timeout on every
//! connection, and a stall limit on the connections of a copy task.
//!
//! The stall limit lives in the socket ([`Guarded`]): a read or write that stays pending for the
//! limit without a byte moving in either direction fails with [`std::io::ErrorKind::TimedOut`], which
//! ends the client's connection, and the task reports [`Stalled`] naming the endpoint. Counting bytes
//! costs nothing per row, and it covers every await of both clients (tiberius and tokio-postgres)
//! without wrapping each one in a timer.
//!
//! Silence is not always a stall: a long MERGE, a commit, or a statement waiting for a lock another
//! session holds sends nothing until it ends, and retrying it would only wait again. So when a
//! clock runs out on a connection that has a [`Probe`], the server is asked first, over a
//! connection of its own, whether the session is still working; if it is, the clock starts again.
//! Only a session the server no longer runs (gone behind a dead link or proxy), or a server that
//! does not answer the question within the limit, is a stall.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// Probes start after this long without traffic, so a dead peer behind a silent network partition
/// is noticed by an idle connection too (an index build waiting for its reply).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a connection, TLS and login included.
    pub connect: Duration,
    /// Longest wait without progress on a copy connection; also the TCP user timeout.
    pub stall: Duration,
    /// Longest wait for a lock another session holds, on the connections that are not a copy's
    /// data streams (DDL, finalize, verify reads): the session's `lock_timeout` / `LOCK_TIMEOUT`.
    pub lock: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(30),
            stall: Duration::from_secs(60),
            lock: Duration::from_secs(60),
        }
    }
}

impl Timeouts {
    /// The lock limit in milliseconds, as both databases' session settings take it (at least 1:
    /// 0 would mean "do not wait" to SQL Server and "no limit" to PostgreSQL).
    pub fn lock_millis(&self) -> i32 {
        i32::try_from(self.lock.as_millis()).unwrap_or(i32::MAX).max(1)
    }
}

/// Whole seconds (at least 1) for messages.
pub fn secs(d: Duration) -> u64 {
    d.as_secs().max(1)
}

/// The connect timeout's error, as an I/O error so that it is classified with the others.
pub fn connect_timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the connection and login did not complete within {} s (spec.timeouts.connectSeconds)",
            secs(limit)
        ),
    )
}

/// Opens a TCP connection within the connect timeout, with keepalives and the user timeout set.
pub async fn connect_tcp(host: &str, port: u16, t: &Timeouts) -> io::Result<TcpStream> {
    let tcp = tokio::time::timeout(t.connect, TcpStream::connect((host, port)))
        .await
        .map_err(|_| connect_timed_out(t.connect))??;
    let sock = socket2::SockRef::from(&tcp);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    sock.set_tcp_keepalive(&keepalive)?;
    // Sent data unacknowledged for this long (a peer gone without a RST) ends the connection even
    // when no stall watch is running.
    #[cfg(target_os = "linux")]
    sock.set_tcp_user_timeout(Some(t.stall))?;
    Ok(tcp)
}

/// What the server says about a watched session whose connection went silent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// It runs a statement (or waits for a lock): silence is expected.
    Working,
    /// The server no longer has the session, or it is not running anything the worker waits for.
    Gone,
    /// The server could not tell (the reason, for the message).
    Unknown(String),
}

/// Asks the server, over a new connection, about the watched session ([`Liveness`]).
pub type Probe =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Liveness> + Send + 'static>> + Send + Sync + 'static>;

/// A name unique to one watched connection, for its session to be found by a [`Probe`]: the
/// client's application name (PostgreSQL's `application_name`, SQL Server's `program_name`).
pub fn session_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "mssql-pg-worker {}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

struct WatchState {
    /// "SQL Server at host:port", for messages.
    endpoint: String,
    limit: Duration,
    /// Set while the application waits on something other than this connection.
    paused: AtomicBool,
    /// Changes at every pause and resume, so a read clock armed before a pause starts afresh.
    epoch: AtomicU64,
    tripped: OnceLock<String>,
    probe: OnceLock<Probe>,
    /// Raised each time the probe finds the session working: both clocks start again.
    reprieves: AtomicU64,
    probing: AtomicBool,
    /// Why the probe did not find the session working, once it did not.
    verdict: OnceLock<String>,
    /// The task to wake when the probe answers.
    waker: Mutex<Option<Waker>>,
}

/// The stall limit of one connection, shared between its socket and the code using it.
#[derive(Clone)]
pub struct StallWatch(Arc<WatchState>);

impl StallWatch {
    pub fn new(endpoint: impl Into<String>, limit: Duration) -> Self {
        StallWatch(Arc::new(WatchState {
            endpoint: endpoint.into(),
            limit,
            paused: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            tripped: OnceLock::new(),
            probe: OnceLock::new(),
            reprieves: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            verdict: OnceLock::new(),
            waker: Mutex::new(None),
        }))
    }

    /// Lets the watch ask the server before judging the connection stalled (see the module doc).
    pub fn with_probe(self, probe: Probe) -> Self {
        let _ = self.0.probe.set(probe);
        self
    }

    /// Starts the probe unless it runs already; it wakes `waker` when it has answered.
    fn ask(&self, probe: &Probe, waker: &Waker) {
        if let Ok(mut w) = self.0.waker.lock() {
            *w = Some(waker.clone());
        }
        if self.0.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (state, asked, limit) = (self.0.clone(), probe(), self.0.limit);
        tokio::spawn(async move {
            let answer = tokio::time::timeout(limit, asked).await.unwrap_or_else(|_| {
                Liveness::Unknown(format!("the server did not answer within {} s", secs(limit)))
            });
            match answer {
                Liveness::Working => {
                    tracing::info!(
                        endpoint = %state.endpoint,
                        "no reply for the stall limit, but the server still runs the statement: waiting on"
                    );
                    state.reprieves.fetch_add(1, Ordering::AcqRel);
                }
                Liveness::Gone => {
                    let _ = state
                        .verdict
                        .set("the server no longer runs this session's statement".into());
                }
                Liveness::Unknown(why) => {
                    let _ = state.verdict.set(format!(
                        "the server could not be asked whether it still works on it: {why}"
                    ));
                }
            }
            state.probing.store(false, Ordering::Release);
            if let Some(w) = state.waker.lock().ok().and_then(|mut w| w.take()) {
                w.wake();
            }
        });
    }

    /// Runs `work` with the read clock stopped: for a connection whose reply does not come until
    /// the application sends more (a COPY IN waiting for the source's next rows). Writes that
    /// stay pending still count.
    pub async fn waiting_elsewhere<F: Future>(&self, work: F) -> F::Output {
        struct Resume<'a>(&'a WatchState);
        impl Drop for Resume<'_> {
            fn drop(&mut self) {
                self.0.paused.store(false, Ordering::Relaxed);
                self.0.epoch.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.0.paused.store(true, Ordering::Relaxed);
        self.0.epoch.fetch_add(1, Ordering::Relaxed);
        let _resume = Resume(&self.0);
        work.await
    }

    /// Stops the read clock until the returned guard is dropped: for a connection kept idle
    /// between copy tasks, which expects no reply. Dropping the guard re-arms the clock, so the
    /// next task starts with a full stall limit.
    pub fn idle(&self) -> Idle {
        self.0.paused.store(true, Ordering::Relaxed);
        self.0.epoch.fetch_add(1, Ordering::Relaxed);
        Idle(self.clone())
    }

    /// What tripped the limit, if it was.
    pub fn tripped(&self) -> Option<&str> {
        self.0.tripped.get().map(String::as_str)
    }

    pub fn endpoint(&self) -> &str {
        &self.0.endpoint
    }
}

/// A connection's stall watch stopped while it is idle (see [`StallWatch::idle`]).
pub struct Idle(StallWatch);

impl Drop for Idle {
    fn drop(&mut self) {
        self.0.0.paused.store(false, Ordering::Relaxed);
        self.0.0.epoch.fetch_add(1, Ordering::Relaxed);
    }
}

/// A copy made no progress for the stall limit.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} while copying {table} (limit: spec.timeouts.stallSeconds)")]
pub struct Stalled {
    pub message: String,
    pub table: String,
}

/// The first tripped watch among `watches`, as the task's error.
pub fn stalled<'a>(table: &str, watches: impl IntoIterator<Item = &'a StallWatch>) -> Option<Stalled> {
    watches.into_iter().find_map(|w| {
        w.tripped().map(|m| Stalled {
            message: m.to_string(),
            table: table.to_string(),
        })
    })
}

/// A timer armed when an operation goes pending.
#[derive(Default)]
struct Clock {
    sleep: Option<Pin<Box<Sleep>>>,
    /// The watch's epoch when armed.
    armed: Option<u64>,
}

impl Clock {
    /// Arms (if needed) and polls; true once the limit passed.
    fn expired(&mut self, cx: &mut Context<'_>, limit: Duration, epoch: u64) -> bool {
        if self.armed != Some(epoch) {
            let deadline = Instant::now() + limit;
            match &mut self.sleep {
                Some(s) => s.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            self.armed = Some(epoch);
        }
        self.sleep
            .as_mut()
            .is_some_and(|s| s.as_mut().poll(cx).is_ready())
    }
}

/// A socket with a stall limit (none without a watch).
pub struct Guarded<S> {
    inner: S,
    watch: Option<StallWatch>,
    read: Clock,
    write: Clock,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, watch: Option<StallWatch>) -> Self {
        Guarded {
            inner,
            watch,
            read: Clock::default(),
            write: Clock::default(),
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    fn progress(&mut self) {
        self.read.armed = None;
        self.write.armed = None;
    }

    fn pending<T>(&mut self, cx: &mut Context<'_>, reading: bool) -> Poll<io::Result<T>> {
        let Some(w) = &self.watch else {
            return Poll::Pending;
        };
        let state = &w.0;
        // A reprieve (the server still works) starts both clocks again.
        let reprieves = state.reprieves.load(Ordering::Acquire) << 32;
        let expired = if reading {
            if state.paused.load(Ordering::Relaxed) {
                return Poll::Pending;
            }
            self.read
                .expired(cx, state.limit, state.epoch.load(Ordering::Relaxed) ^ reprieves)
        } else {
            self.write.expired(cx, state.limit, reprieves)
        };
        if !expired {
            return Poll::Pending;
        }
        let verdict = match state.probe.get() {
            Some(probe) => match state.verdict.get() {
                Some(v) => Some(v.as_str()),
                None => {
                    w.ask(probe, cx.waker());
                    return Poll::Pending;
                }
            },
            None => None,
        };
        let mut message = if reading {
            format!("no data from {} for {} s", state.endpoint, secs(state.limit))
        } else {
            format!("{} accepted no data for {} s", state.endpoint, secs(state.limit))
        };
        if let Some(v) = verdict {
            message.push_str(&format!(" ({v})"));
        }
        let _ = state.tripped.set(message.clone());
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, message)))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.pending(cx, true),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.pending(cx, false),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => self.pending(cx, false),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.pending(cx, false),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_silent_peer_trips_the_read_clock_and_names_the_endpoint() {
        let (a, _b) = tokio::io::duplex(64);
        let watch = StallWatch::new("PostgreSQL at h:1", Duration::from_millis(50));
        let mut g = Guarded::new(a, Some(watch.clone()));
        let mut buf = [0u8; 8];
        let e = g.read(&mut buf).await.err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::TimedOut));
        assert_eq!(watch.tripped(), Some("no data from PostgreSQL at h:1 for 1 s"));
    }

    #[tokio::test]
    async fn bytes_in_time_keep_the_connection_and_a_pause_stops_the_read_clock() {
        let (a, mut b) = tokio::io::duplex(64);
        let watch = StallWatch::new("x", Duration::from_millis(2000));
        let mut g = Guarded::new(a, Some(watch.clone()));
        let peer = tokio::spawn(async move {
            for _ in 0..3 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                b.write_all(b"z").await.ok();
            }
            b
        });
        let mut buf = [0u8; 1];
        for _ in 0..3 {
            g.read_exact(&mut buf).await.ok();
        }
        assert!(watch.tripped().is_none());
        // Paused, a read may wait longer than the limit.
        let watch = StallWatch::new("y", Duration::from_millis(20));
        let (a, _b) = tokio::io::duplex(64);
        let mut g = Guarded::new(a, Some(watch.clone()));
        let waited = watch
            .waiting_elsewhere(tokio::time::timeout(Duration::from_millis(200), g.read(&mut buf)))
            .await;
        assert!(waited.is_err(), "the read should still be pending");
        assert!(watch.tripped().is_none());
        drop(peer);
    }

    /// A probe that finds the session working `working` times, then gone; how often it was asked.
    fn probe(working: u32) -> (Probe, Arc<AtomicU64>) {
        let asked = Arc::new(AtomicU64::new(0));
        let counter = asked.clone();
        let probe: Probe = Arc::new(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n < u64::from(working) {
                    Liveness::Working
                } else {
                    Liveness::Gone
                }
            })
        });
        (probe, asked)
    }

    #[tokio::test]
    async fn silence_while_the_server_still_works_is_no_stall_until_it_stops() {
        let (a, _b) = tokio::io::duplex(64);
        let watch = StallWatch::new("SQL Server at h:3", Duration::from_millis(50));
        let (p, asked) = probe(3);
        let watch = watch.with_probe(p);
        let mut g = Guarded::new(a, Some(watch.clone()));
        let started = Instant::now();
        let mut buf = [0u8; 8];
        let e = g.read(&mut buf).await.err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::TimedOut));
        // Three reprieves of a limit each, then the probe that found it gone.
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(asked.load(Ordering::SeqCst), 4);
        assert_eq!(
            watch.tripped(),
            Some(
                "no data from SQL Server at h:3 for 1 s (the server no longer runs this session's statement)"
            )
        );
    }

    #[tokio::test]
    async fn a_server_that_cannot_be_asked_is_a_stall_and_says_why() {
        let (a, _b) = tokio::io::duplex(64);
        let probe: Probe = Arc::new(|| Box::pin(async { Liveness::Unknown("no permission".into()) }));
        let watch = StallWatch::new("SQL Server at h:4", Duration::from_millis(50)).with_probe(probe);
        let mut g = Guarded::new(a, Some(watch.clone()));
        let mut buf = [0u8; 8];
        assert!(g.read(&mut buf).await.is_err());
        assert_eq!(
            watch.tripped(),
            Some(
                "no data from SQL Server at h:4 for 1 s (the server could not be asked whether it still works \
                 on it: no permission)"
            )
        );
    }

    #[tokio::test]
    async fn a_peer_that_reads_nothing_trips_the_write_clock() {
        let (a, _b) = tokio::io::duplex(16);
        let watch = StallWatch::new("SQL Server at h:2", Duration::from_millis(50));
        let mut g = Guarded::new(a, Some(watch.clone()));
        let e = g.write_all(&[0u8; 64]).await.err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::TimedOut));
        assert_eq!(
            watch.tripped(),
            Some("SQL Server at h:2 accepted no data for 1 s")
        );
    }
}
