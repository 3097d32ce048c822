//! Stopping on SIGTERM or SIGINT without losing or half-writing a chunk.
//!
//! The worker is PID 1 of its container, where the kernel ignores a signal nobody handles, so
//! without [`listen`] a pod told to stop kept committing until the grace period's SIGKILL. On the
//! first signal a copy finishes the chunk in flight (its rows and checkpoint commit together) and
//! stops before the next; no new task starts. A second signal, or [`GRACE`] passing, stops at once:
//! the chunk in flight is abandoned and its transaction rolls back when its connection closes.
//! Steps without chunks (plan, finalize, verify) stop at the first signal, their open transactions
//! rolling back likewise ([`unless_stopped`]). The process then exits with
//! `mssql_pg_crds::names::EXIT_STOPPED`, and running the step again resumes from the last
//! committed chunk.

use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

/// How long a chunk in flight may take to commit once a stop is asked for: inside Kubernetes'
/// default grace period of 30 s, with room to exit.
pub const GRACE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    /// Stop at the next chunk boundary.
    Stopping(&'static str),
    /// Stop now.
    Forced(&'static str),
}

fn stage() -> &'static watch::Sender<Stage> {
    static STAGE: OnceLock<watch::Sender<Stage>> = OnceLock::new();
    STAGE.get_or_init(|| watch::Sender::new(Stage::Running))
}

/// A step stopped on request.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "stopped by {signal}{}; running the step again resumes after the last committed chunk",
    if *.abandoned {
        ": the work in flight did not end within the grace period and was abandoned (an open \
         transaction rolls back; a chunk's rows and checkpoint commit together or not at all)"
    } else {
        " at a chunk boundary"
    }
)]
pub struct Stopped {
    pub signal: &'static str,
    /// The work in flight was dropped rather than finished.
    pub abandoned: bool,
}

/// Handles SIGTERM and SIGINT from now on (see the module doc). Call once, from the binary.
pub fn listen() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            request(name);
        }
    });
    Ok(())
}

/// What a signal does: the first asks to stop at the next chunk boundary, and at once after
/// [`GRACE`]; the next one at once.
fn request(signal: &'static str) {
    let first = stage().send_if_modified(|s| match *s {
        Stage::Running => {
            *s = Stage::Stopping(signal);
            true
        }
        Stage::Stopping(first) => {
            *s = Stage::Forced(first);
            true
        }
        Stage::Forced(_) => false,
    });
    if first && matches!(*stage().borrow(), Stage::Stopping(_)) {
        tracing::warn!(
            signal,
            grace_seconds = GRACE.as_secs(),
            "stop requested: finishing the chunk in flight, then stopping (another signal stops at once)"
        );
        tokio::spawn(async move {
            tokio::time::sleep(GRACE).await;
            stage().send_if_modified(|s| match *s {
                Stage::Stopping(first) => {
                    *s = Stage::Forced(first);
                    true
                }
                _ => false,
            });
        });
    } else if first {
        tracing::warn!(signal, "second stop request: stopping at once");
    }
}

/// The signal that asked this process to stop, once one did.
pub fn requested() -> Option<&'static str> {
    match *stage().borrow() {
        Stage::Running => None,
        Stage::Stopping(s) | Stage::Forced(s) => Some(s),
    }
}

/// Until a stop is asked for (never, if none is); the signal's name.
pub async fn stop_requested() -> &'static str {
    let mut rx = stage().subscribe();
    match rx.wait_for(|s| *s != Stage::Running).await.map(|s| *s) {
        Ok(Stage::Stopping(s) | Stage::Forced(s)) => s,
        _ => std::future::pending().await,
    }
}

/// Until the process must stop at once: a second signal, or [`GRACE`] after the first (never,
/// if no stop is asked for); the first signal's name.
pub async fn forced() -> &'static str {
    let mut rx = stage().subscribe();
    match rx.wait_for(|s| matches!(s, Stage::Forced(_))).await.map(|s| *s) {
        Ok(Stage::Forced(s)) => s,
        _ => std::future::pending().await,
    }
}

/// The [`Stopped`] error of a copy that was asked to stop before committing more, if it was.
pub fn stopped_at_boundary() -> Option<Stopped> {
    requested().map(|signal| Stopped {
        signal,
        abandoned: false,
    })
}

/// Runs a whole step, ending it when it must stop: at the first signal for a step without chunk
/// boundaries (`at_boundaries` false: plan, finalize, verify, whose open transactions roll back
/// when the process exits and which start over when run again), else when the stop turns urgent
/// (a copy stops by itself at its next chunk boundary).
pub async fn unless_stopped<F: std::future::Future>(
    work: F,
    at_boundaries: bool,
) -> Result<F::Output, Stopped> {
    let stop = async {
        if at_boundaries {
            forced().await
        } else {
            stop_requested().await
        }
    };
    tokio::select! {
        biased;
        out = work => Ok(out),
        signal = stop => Err(Stopped { signal, abandoned: true }),
    }
}
