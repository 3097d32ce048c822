//! `spec.online`: copy while the source stays in use, then stream every change made since and
//! cut over in seconds (design: `online-migration.md`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::field_error::FieldError;

pub const DEFAULT_POLL_INTERVAL: &str = "500ms";
pub const DEFAULT_HEARTBEAT_SECONDS: i32 = 5;
pub const DEFAULT_MAX_BATCH_CHANGES: i32 = 10_000;
pub const DEFAULT_MAX_BATCH_BYTES: &str = "16Mi";
pub const DEFAULT_MAX_BATCH_DELAY: &str = "300ms";

/// The shortest `pollInterval` and `maxBatchDelay`: below it the source is polled in a busy loop.
pub const MIN_DURATION_MS: u64 = 10;
/// The longest `pollInterval` and `maxBatchDelay`: the lag cannot fall below it.
pub const MAX_DURATION_MS: u64 = 60_000;
/// The bounds of `maxBatchBytes`: what the streaming process holds of one batch.
pub const MIN_BATCH_BYTES: u64 = 64 << 10;
pub const MAX_BATCH_BYTES: u64 = 1 << 30;

/// Online migration: the copy runs while applications keep writing to the source; every change
/// made since the copy started is then streamed to the target until a cutover is requested.
/// PostgreSQL sources are read by logical decoding (a publication and a replication slot, which
/// need `wal_level=logical` and the REPLICATION attribute); SQL Server sources by Change Tracking.
/// Every table migrated online needs a primary key: the plan refuses tables without one, naming
/// them (exclude them in `tables.exclude`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnlineSpec {
    /// Stream the source's changes after the copy until the cutover (off: an offline copy, the
    /// source must stay quiet until it ends).
    #[serde(default)]
    pub enabled: bool,
    /// How long the streaming process waits before asking the source again when it found no
    /// change, as a duration (`500ms`, `2s`; 10ms to 60s). The lag of an idle-then-busy source
    /// is at most about this long plus `maxBatchDelay`.
    #[serde(default = "default_poll_interval")]
    #[schemars(length(min = 2, max = 16))]
    pub poll_interval: String,
    /// Seconds between heartbeats written into the source's change stream (PostgreSQL: a
    /// logical decoding message; SQL Server: a row of `_mssqlpg.heartbeat`), so the lag reads
    /// zero on an idle source instead of going stale. 1 to 3600.
    #[serde(default = "default_heartbeat_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub heartbeat_seconds: i32,
    /// SQL Server sources: enable snapshot isolation and Change Tracking on the database and
    /// the migrated tables when they are off (needs ALTER on the database and the tables).
    /// Without it a plan that finds them off fails, listing the statements a DBA must run.
    #[serde(default)]
    pub enable_change_tracking: bool,
    /// What happens when the source no longer holds the changes since the last applied
    /// position (Change Tracking's retention ran past it, or the table was truncated):
    /// `Never` fails naming the table; `Auto` copies that table again.
    #[serde(default)]
    pub reinitialize: Reinitialize,
    /// After a successful cutover, remove what streaming needed on the source: the replication
    /// slot and publication (PostgreSQL), or Change Tracking (SQL Server, only where the worker
    /// enabled it). A slot left behind keeps the source's WAL from being recycled.
    #[serde(default = "default_true")]
    pub cleanup: bool,
    /// Most source changes (row images after coalescing by key) applied in one target
    /// transaction. Larger batches apply faster; the position advances once per batch.
    /// 1 to 1,000,000.
    #[serde(default = "default_max_batch_changes")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_batch_changes: i32,
    /// Most bytes of row images a batch holds before it is applied, as bytes or a quantity
    /// (`16Mi`; 64Ki to 1Gi): bounds the streaming process's memory, whatever the size of a
    /// source transaction (one larger than a batch is applied across several).
    #[serde(default = "default_max_batch_bytes")]
    #[schemars(schema_with = "crate::migration::byte_quantity_schema")]
    pub max_batch_bytes: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    /// Longest a change waits in a batch before the batch is applied, as a duration (`300ms`;
    /// 10ms to 60s): under a light load batches are applied this often.
    #[serde(default = "default_max_batch_delay")]
    #[schemars(length(min = 2, max = 16))]
    pub max_batch_delay: String,
}

/// What to do when the source lost the changes a table needs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Reinitialize {
    /// Fail, naming the table; nothing is copied again.
    #[default]
    Never,
    /// Copy the table again, then go on streaming.
    Auto,
}

fn default_true() -> bool {
    true
}

fn default_poll_interval() -> String {
    DEFAULT_POLL_INTERVAL.to_string()
}

fn default_heartbeat_seconds() -> i32 {
    DEFAULT_HEARTBEAT_SECONDS
}

fn default_max_batch_changes() -> i32 {
    DEFAULT_MAX_BATCH_CHANGES
}

fn default_max_batch_bytes() -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity(DEFAULT_MAX_BATCH_BYTES.to_string())
}

fn default_max_batch_delay() -> String {
    DEFAULT_MAX_BATCH_DELAY.to_string()
}

impl Default for OnlineSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            poll_interval: default_poll_interval(),
            heartbeat_seconds: DEFAULT_HEARTBEAT_SECONDS,
            enable_change_tracking: false,
            reinitialize: Reinitialize::default(),
            cleanup: true,
            max_batch_changes: DEFAULT_MAX_BATCH_CHANGES,
            max_batch_bytes: default_max_batch_bytes(),
            max_batch_delay: default_max_batch_delay(),
        }
    }
}

/// A duration as `spec.online` writes it: a decimal number and a unit (`ms`, `s`, `m`), e.g.
/// `500ms`, `1.5s`, `2m`; in whole milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a duration: write a number and a unit, such as 500ms, 2s or 1m");
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (number, unit) = t.split_at(split);
    let per_unit: f64 = match unit {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        _ => return Err(bad()),
    };
    if number.is_empty() || number.matches('.').count() > 1 || number == "." {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let ms = value * per_unit;
    if ms.fract() != 0.0 {
        return Err(format!("{text:?} is not a whole number of milliseconds"));
    }
    if ms > u64::MAX as f64 {
        return Err(format!("{text:?} is too long"));
    }
    Ok(ms as u64)
}

impl OnlineSpec {
    /// `pollInterval` in milliseconds, or the error naming the field.
    pub fn poll_interval_ms(&self) -> Result<u64, FieldError> {
        duration_in_range("spec.online.pollInterval", &self.poll_interval)
    }

    /// `maxBatchDelay` in milliseconds, or the error naming the field.
    pub fn max_batch_delay_ms(&self) -> Result<u64, FieldError> {
        duration_in_range("spec.online.maxBatchDelay", &self.max_batch_delay)
    }

    /// `maxBatchBytes` in bytes, or the error naming the field.
    pub fn max_batch_bytes(&self) -> Result<u64, FieldError> {
        let path = "spec.online.maxBatchBytes";
        let bytes =
            crate::quantity::parse_bytes(&self.max_batch_bytes.0).map_err(|e| FieldError::new(path, e))?;
        if bytes < MIN_BATCH_BYTES {
            Err(FieldError::new(path, "must be at least 64Ki"))
        } else if bytes > MAX_BATCH_BYTES {
            Err(FieldError::new(path, "must be at most 1Gi"))
        } else {
            Ok(bytes)
        }
    }

    /// Every problem with `spec.online`; `source_is_mssql` says which capture applies.
    pub(crate) fn collect_errors(&self, source_is_mssql: bool, errors: &mut Vec<FieldError>) {
        for r in [
            self.poll_interval_ms(),
            self.max_batch_delay_ms(),
            self.max_batch_bytes(),
        ] {
            if let Err(e) = r {
                errors.push(e);
            }
        }
        crate::field_error::in_range(
            errors,
            "spec.online.heartbeatSeconds",
            i64::from(self.heartbeat_seconds),
            1,
            3600,
        );
        crate::field_error::in_range(
            errors,
            "spec.online.maxBatchChanges",
            i64::from(self.max_batch_changes),
            1,
            1_000_000,
        );
        if self.enable_change_tracking && !source_is_mssql {
            errors.push(FieldError::new(
                "spec.online.enableChangeTracking",
                "applies to a SQL Server source only (a PostgreSQL source is read by logical decoding); \
                 remove it",
            ));
        }
    }
}

fn duration_in_range(path: &str, text: &str) -> Result<u64, FieldError> {
    let ms = parse_duration_ms(text).map_err(|e| FieldError::new(path, e))?;
    if ms < MIN_DURATION_MS {
        Err(FieldError::new(path, "must be at least 10ms"))
    } else if ms > MAX_DURATION_MS {
        Err(FieldError::new(path, "must be at most 60s"))
    } else {
        Ok(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_number_and_a_unit() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        for bad in ["", "5", "ms", "1h", "1.2.3s", "-1s", ".s"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration_ms("0.5ms").unwrap_err().contains("whole number"));
    }

    #[test]
    fn online_errors_name_their_fields() {
        let spec = OnlineSpec {
            enabled: true,
            poll_interval: "1ms".into(),
            heartbeat_seconds: 0,
            enable_change_tracking: true,
            max_batch_changes: 0,
            max_batch_bytes: k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into()),
            max_batch_delay: "soon".into(),
            ..OnlineSpec::default()
        };
        let mut errors = Vec::new();
        spec.collect_errors(false, &mut errors);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.online.pollInterval",
                "spec.online.maxBatchDelay",
                "spec.online.maxBatchBytes",
                "spec.online.heartbeatSeconds",
                "spec.online.maxBatchChanges",
                "spec.online.enableChangeTracking",
            ]
        );
        let mut errors = Vec::new();
        OnlineSpec::default().collect_errors(false, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
    }
}
