//! Which failures of a copy task are transient, and how often and how soon such a task is tried
//! again (from its last committed chunk: the checkpoint commits with each chunk); and which are
//! about the data itself, which no further attempt can get past.

use std::error::Error;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use tokio_postgres::error::SqlState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RetryPolicy {
    /// Attempts per task, the first included.
    pub attempts: u32,
    /// Wait before the first retry, doubled for each further one.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait after the `failed`-th failed attempt (1-based).
    pub fn backoff_after(&self, failed: u32) -> Duration {
        let factor = 1u32.checked_shl(failed.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }
}

/// SQL Server errors that say "try again": database unavailable or moved (40613, 40197, 49918),
/// throttled (40501, 10928), chosen as a deadlock victim (1205), a lock another session held past
/// the session's LOCK_TIMEOUT (1222).
const MSSQL_TRANSIENT: [u32; 7] = [40613, 40197, 40501, 49918, 10928, 1205, 1222];

fn io_transient(kind: io::ErrorKind) -> bool {
    use io::ErrorKind::*;
    matches!(
        kind,
        ConnectionReset
            | ConnectionRefused
            | ConnectionAborted
            | NotConnected
            | BrokenPipe
            | UnexpectedEof
            | TimedOut
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
    )
}

fn pg_transient(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    let Some(code) = e.code() else { return false };
    // Class 08: connection exceptions; 57P0x: the server is shutting down, crashed or starting;
    // 55P03: a lock another session held past the session's lock_timeout.
    code.code().starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::LOCK_NOT_AVAILABLE,
        ]
        .contains(code)
}

fn tds_transient(e: &tiberius::error::Error) -> bool {
    match e {
        tiberius::error::Error::Io { kind, .. } => io_transient(*kind),
        tiberius::error::Error::Server(t) => MSSQL_TRANSIENT.contains(&t.code()),
        _ => false,
    }
}

/// Whether `e` or one of its causes is a fault that another attempt may not meet: a lost or
/// refused connection, a server restarting or failing over, a deadlock victim, a stall.
pub fn is_transient(e: &(dyn Error + 'static)) -> bool {
    any_cause(e, |e| {
        if let Some(e) = e.downcast_ref::<io::Error>() {
            io_transient(e.kind())
        } else if let Some(e) = e.downcast_ref::<tokio_postgres::Error>() {
            pg_transient(e)
        } else if let Some(e) = tds_error(e) {
            tds_transient(e)
        } else {
            e.is::<crate::timeouts::Stalled>()
        }
    })
}

/// Whether `hit` holds for `e` or one of its causes.
fn any_cause<'e>(e: &'e (dyn Error + 'static), hit: impl Fn(&'e (dyn Error + 'static)) -> bool) -> bool {
    std::iter::successors(Some(e), |&e| e.source()).any(hit)
}

/// A SQL Server error, as it is or boxed (the engines box tiberius's large error).
fn tds_error<'e>(e: &'e (dyn Error + 'static)) -> Option<&'e tiberius::error::Error> {
    e.downcast_ref::<tiberius::error::Error>()
        .or_else(|| e.downcast_ref::<Box<tiberius::error::Error>>().map(|b| &**b))
}

/// SQL Server errors about the rows written: string or binary data truncated (8152, 2628), NULL
/// into a NOT NULL column (515), duplicate key (2627, 2601), a constraint conflict (547),
/// arithmetic overflow (8115), a conversion that failed (241, 242, 245), a bulk-load value the
/// column cannot take (4815).
const MSSQL_DATA: [u32; 11] = [8152, 2628, 515, 2627, 2601, 547, 8115, 241, 242, 245, 4815];

/// Whether `e` is the target refusing the rows themselves, so that every attempt on the same rows
/// meets it again: PostgreSQL's data exceptions and integrity violations, SQL Server's
/// `MSSQL_DATA`. Never when a transient fault is in the chain too. (A value the worker itself
/// cannot convert is its readers' `is_data`: their errors are wrapped transparently, so they are
/// not in a `source` chain.)
pub fn is_data_error(e: &(dyn Error + 'static)) -> bool {
    if is_transient(e) {
        return false;
    }
    any_cause(e, |e| {
        if let Some(e) = e.downcast_ref::<tokio_postgres::Error>() {
            // Class 22: data exception; class 23: integrity constraint violation.
            e.code()
                .is_some_and(|c| c.code().starts_with("22") || c.code().starts_with("23"))
        } else {
            tds_error(e).is_some_and(
                |e| matches!(e, tiberius::error::Error::Server(t) if MSSQL_DATA.contains(&t.code())),
            )
        }
    })
}

/// The message of a task whose last attempt failed (its cause follows it).
pub(crate) fn failed_message(attempts: u32, transient: bool, committed: Option<i64>) -> String {
    let committed = match committed {
        Some(n) => format!("with {n} rows committed"),
        None => "before reading its checkpoint".to_string(),
    };
    if transient {
        format!("gave up after {attempts} attempts {committed}")
    } else {
        format!("failed on attempt {attempts} {committed}")
    }
}

/// What the attempts of one task share: the rows committed when the first began, the rows
/// committed now (updated by the writer at each commit), and the task's claim: made by the first
/// attempt that reaches the target, and kept by the next ones (a retry is the same writer).
pub struct AttemptState {
    start: AtomicI64,
    committed: AtomicI64,
    fence: tokio::sync::OnceCell<crate::fence::Fence>,
}

impl Default for AttemptState {
    fn default() -> Self {
        AttemptState {
            start: AtomicI64::new(-1),
            committed: AtomicI64::new(-1),
            fence: tokio::sync::OnceCell::new(),
        }
    }
}

impl AttemptState {
    /// The task's claim, made with `claim` by the first attempt that gets here.
    pub async fn claimed<E, Fut>(&self, claim: impl FnOnce() -> Fut) -> Result<&crate::fence::Fence, E>
    where
        Fut: std::future::Future<Output = Result<crate::fence::Fence, E>>,
    {
        self.fence.get_or_try_init(claim).await
    }

    /// An attempt resumes with `committed` rows in the target.
    pub fn begin(&self, committed: i64) {
        let _ = self
            .start
            .compare_exchange(-1, committed, Ordering::Relaxed, Ordering::Relaxed);
        self.committed.store(committed, Ordering::Relaxed);
    }

    /// The counter the writer keeps current.
    pub fn committed(&self) -> &AtomicI64 {
        &self.committed
    }

    /// (rows committed by this run, rows committed in total if an attempt read the checkpoint).
    pub fn rows(&self) -> (u64, Option<i64>) {
        let start = self.start.load(Ordering::Relaxed);
        if start < 0 {
            return (0, None);
        }
        let now = self.committed.load(Ordering::Relaxed).max(start);
        (u64::try_from(now - start).unwrap_or(0), Some(now))
    }
}

/// Runs `attempt` until it succeeds, fails with a fault that is not `transient`, or has been tried
/// `policy.attempts` times, waiting `policy.backoff_after(n)` between attempts; each failed
/// attempt is logged. Returns the value or the last error, with the attempts made (and, for the
/// error, whether it was transient).
pub async fn with_retries<T, E, F, Fut>(
    policy: &RetryPolicy,
    task: &str,
    mut attempt: F,
    transient: impl Fn(&E) -> bool,
) -> Result<(T, u32), (E, u32, bool)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::error::Error + 'static,
{
    let mut n = 0;
    loop {
        n += 1;
        match attempt().await {
            Ok(v) => return Ok((v, n)),
            Err(e) => {
                let retry = transient(&e);
                if !retry || n >= policy.attempts {
                    if retry {
                        tracing::error!(task, attempt = n, attempts = policy.attempts, error = %crate::error_text::error_text(&e), "copy attempt failed; no attempts left");
                    }
                    return Err((e, n, retry));
                }
                let wait = policy.backoff_after(n);
                tracing::warn!(
                    task,
                    attempt = n,
                    attempts = policy.attempts,
                    retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    error = %crate::error_text::error_text(&e),
                    "copy attempt failed with a transient fault; retrying from the last checkpoint"
                );
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        let waits: Vec<u64> = (1..=7).map(|n| p.backoff_after(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(p.backoff_after(200), Duration::from_secs(30));
    }

    #[test]
    fn lost_connections_and_retryable_server_errors_are_transient() {
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert!(is_transient(&reset));
        assert!(!is_transient(&io::Error::from(io::ErrorKind::PermissionDenied)));
        let eof = tiberius::error::Error::Io {
            kind: io::ErrorKind::UnexpectedEof,
            message: "eof".into(),
        };
        assert!(is_transient(&eof));
        let stalled = crate::timeouts::Stalled {
            message: "no data".into(),
            table: "dbo.t".into(),
        };
        assert!(is_transient(&stalled));
        let protocol = tiberius::error::Error::Protocol("bad token".into());
        assert!(!is_transient(&protocol));
    }
}
