//! How long the worker waits on a database, and how often it retries a copy task after a transient
//! fault (a connection reset, a PostgreSQL restart or failover, a SQL Server deadlock victim).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const DEFAULT_CONNECT_SECONDS: i32 = 30;
pub const DEFAULT_STALL_SECONDS: i32 = 60;
pub const DEFAULT_LOCK_SECONDS: i32 = 60;
pub const DEFAULT_RETRY_ATTEMPTS: i32 = 5;
pub const DEFAULT_RETRY_BACKOFF_SECONDS: i32 = 1;
pub const DEFAULT_RETRY_MAX_BACKOFF_SECONDS: i32 = 30;

/// Bounded waits on both databases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timeouts {
    /// Seconds to open a connection and log in before giving up on that attempt.
    #[serde(default = "default_connect_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub connect_seconds: i32,
    /// Seconds a copy may go without progress (no bytes from the source, no reply from the target, or
    /// a database that accepts no more data) before the chunk fails naming the endpoint and the table.
    /// Also the TCP user timeout of every connection.
    #[serde(default = "default_stall_seconds")]
    #[schemars(range(min = 1, max = 86400))]
    pub stall_seconds: i32,
    /// Seconds a statement outside the copy's data streams (creating, dropping or emptying a table,
    /// building keys, indexes and constraints, reading for verification) waits for a lock another
    /// session holds before it fails naming the table; the step is then retried. While such a
    /// statement waits, both databases queue the table's other users behind it, so a bounded wait
    /// also bounds how long the migration can hold up applications that use the table.
    #[serde(default = "default_lock_seconds")]
    #[schemars(range(min = 1, max = 86400))]
    pub lock_seconds: i32,
}

/// Retries of a copy task inside the worker, each resuming from the task's last committed chunk.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retries {
    /// Attempts per copy task, the first included (1: no retry). Only transient faults are retried.
    #[serde(default = "default_attempts")]
    #[schemars(range(min = 1, max = 100))]
    pub attempts: i32,
    /// Seconds before the first retry; doubled for each further one.
    #[serde(default = "default_backoff_seconds")]
    #[schemars(range(min = 0, max = 3600))]
    pub backoff_seconds: i32,
    /// Upper bound of the wait between two attempts.
    #[serde(default = "default_max_backoff_seconds")]
    #[schemars(range(min = 0, max = 3600))]
    pub max_backoff_seconds: i32,
}

fn default_connect_seconds() -> i32 {
    DEFAULT_CONNECT_SECONDS
}

fn default_stall_seconds() -> i32 {
    DEFAULT_STALL_SECONDS
}

fn default_lock_seconds() -> i32 {
    DEFAULT_LOCK_SECONDS
}

fn default_attempts() -> i32 {
    DEFAULT_RETRY_ATTEMPTS
}

fn default_backoff_seconds() -> i32 {
    DEFAULT_RETRY_BACKOFF_SECONDS
}

fn default_max_backoff_seconds() -> i32 {
    DEFAULT_RETRY_MAX_BACKOFF_SECONDS
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect_seconds: DEFAULT_CONNECT_SECONDS,
            stall_seconds: DEFAULT_STALL_SECONDS,
            lock_seconds: DEFAULT_LOCK_SECONDS,
        }
    }
}

impl Default for Retries {
    fn default() -> Self {
        Self {
            attempts: DEFAULT_RETRY_ATTEMPTS,
            backoff_seconds: DEFAULT_RETRY_BACKOFF_SECONDS,
            max_backoff_seconds: DEFAULT_RETRY_MAX_BACKOFF_SECONDS,
        }
    }
}
