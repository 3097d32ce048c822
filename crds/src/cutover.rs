//! `spec.cutover`: when an online migration stops streaming and the target takes over (design:
//! `online-migration.md`, "Cutover").

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::field_error::FieldError;

pub const DEFAULT_MAX_LAG_SECONDS: i32 = 5;

/// The cutover of an online migration: stop the applications' writes to the source, then set
/// `requested: true` (or `kubectl mssqlpg cutover NAME`). The capture fences the stream, applies
/// what is left, checks that the source stood still, builds foreign keys, checks and identity
/// values, verifies, and reports the downtime in `status.online.downtimeSeconds`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CutoverSpec {
    /// Ask for the cutover. Refused (the `CutOver` condition says why, and the request waits)
    /// while the lag is above `maxLagSeconds` or the stream has not caught up yet.
    #[serde(default)]
    pub requested: bool,
    /// Highest lag, in seconds, at which a requested cutover starts: above it the drain would
    /// keep the applications down longer than planned. 0 to 86400.
    #[serde(default = "default_max_lag_seconds")]
    #[schemars(range(min = 0, max = 86_400))]
    pub max_lag_seconds: i32,
    /// After the cutover, stream the target's changes back to the source (anchored during the
    /// cutover, before the applications can write to the target) so that going back loses
    /// nothing. Needs `spec.online.enabled`. Going back is a second cutover, of the reverse
    /// stream; stopping it without going back removes its slot or Change Tracking from the
    /// target (docs/operations.md, "How to go back").
    #[serde(default)]
    pub reverse: bool,
    /// Go back to the source (with `reverse`, after the cutover; `kubectl mssqlpg cutover NAME
    /// --go-back`): stop the applications' writes to the target first. The reverse stream
    /// fences, drains, refuses while the target still changes (`status.online.reverse.message`
    /// says why; set it to false, then true, to ask again), sets the source's identity and
    /// sequence values past the maximum and verifies both sides; then `Reversing=False`
    /// `WentBack` and the capture Deployment is removed.
    #[serde(default)]
    pub go_back: bool,
}

fn default_max_lag_seconds() -> i32 {
    DEFAULT_MAX_LAG_SECONDS
}

impl Default for CutoverSpec {
    fn default() -> Self {
        Self {
            requested: false,
            max_lag_seconds: DEFAULT_MAX_LAG_SECONDS,
            reverse: false,
            go_back: false,
        }
    }
}

impl CutoverSpec {
    /// Every problem with `spec.cutover`; `online` is `spec.online.enabled`.
    pub(crate) fn collect_errors(&self, online: bool, errors: &mut Vec<FieldError>) {
        crate::field_error::in_range(
            errors,
            "spec.cutover.maxLagSeconds",
            i64::from(self.max_lag_seconds),
            0,
            86_400,
        );
        if self.requested && !online {
            errors.push(FieldError::new(
                "spec.cutover.requested",
                "applies to online migrations (spec.online.enabled: true); an offline migration ends on \
                 its own after the copy",
            ));
        }
        if self.reverse && !online {
            errors.push(FieldError::new(
                "spec.cutover.reverse",
                "applies to online migrations (spec.online.enabled: true): the changes streamed back are \
                 read from the target the way an online migration reads its source",
            ));
        }
        if self.go_back && !self.reverse {
            errors.push(FieldError::new(
                "spec.cutover.goBack",
                "needs spec.cutover.reverse: true (going back is the cutover of the stream that carries the \
                 target's changes back to the source)",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_requests_and_reverse_streams_are_refused_by_field() {
        let mut errors = Vec::new();
        CutoverSpec {
            requested: true,
            max_lag_seconds: -1,
            reverse: true,
            go_back: false,
        }
        .collect_errors(false, &mut errors);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.cutover.maxLagSeconds",
                "spec.cutover.requested",
                "spec.cutover.reverse"
            ]
        );
        assert!(errors[2].message.contains("spec.online.enabled"), "{errors:?}");
        let mut errors = Vec::new();
        CutoverSpec {
            go_back: true,
            ..CutoverSpec::default()
        }
        .collect_errors(true, &mut errors);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "spec.cutover.goBack");
        let mut errors = Vec::new();
        CutoverSpec {
            requested: true,
            reverse: true,
            ..CutoverSpec::default()
        }
        .collect_errors(true, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
    }
}
