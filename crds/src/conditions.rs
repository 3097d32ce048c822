//! Condition types of a Migration and the Kubernetes rules for updating a condition list.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::status::bounded_message;

/// Condition types a Migration reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    Validated,
    Planned,
    Copied,
    Finalized,
    Verified,
    Ready,
    Failed,
    Degraded,
    /// Online: the stream applied what the source had when the copy ended (phase Streaming).
    CaughtUp,
    /// Online: the target took over (True), or why a requested cutover waits or failed.
    CutOver,
    /// Online: a source table's columns changed while streaming.
    SchemaDrift,
    /// Online with `spec.cutover.reverse`: after the cutover, the target's changes stream back
    /// to the source (True), or why not (not yet, gone back, stopped).
    Reversing,
}

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Validated => "Validated",
            ConditionType::Planned => "Planned",
            ConditionType::Copied => "Copied",
            ConditionType::Finalized => "Finalized",
            ConditionType::Verified => "Verified",
            ConditionType::Ready => "Ready",
            ConditionType::Failed => "Failed",
            ConditionType::Degraded => "Degraded",
            ConditionType::CaughtUp => "CaughtUp",
            ConditionType::CutOver => "CutOver",
            ConditionType::SchemaDrift => "SchemaDrift",
            ConditionType::Reversing => "Reversing",
        }
    }
}

/// Set (insert or replace) condition `type_` in `conditions`. `lastTransitionTime` only moves when the
/// status value changes, as the API conventions require; reason/message/observedGeneration always update.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: ConditionType,
    status: bool,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let message = bounded_message(message);
    match conditions.iter_mut().find(|c| c.type_ == type_.as_str()) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message;
            c.observed_generation = observed_generation;
        }
        None => conditions.push(Condition {
            type_: type_.as_str().to_string(),
            status,
            reason: reason.to_string(),
            message,
            observed_generation,
            last_transition_time: now.clone(),
        }),
    }
}

/// The condition's status as a bool; `None` when absent or Unknown.
pub fn condition_status(conditions: &[Condition], type_: ConditionType) -> Option<bool> {
    conditions
        .iter()
        .find(|c| c.type_ == type_.as_str())
        .and_then(|c| match c.status.as_str() {
            "True" => Some(true),
            "False" => Some(false),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut cs = Vec::new();
        set_condition(
            &mut cs,
            ConditionType::Ready,
            false,
            "Copying",
            "1/4",
            Some(1),
            &at(10),
        );
        set_condition(
            &mut cs,
            ConditionType::Ready,
            false,
            "Copying",
            "2/4",
            Some(2),
            &at(20),
        );
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].last_transition_time, at(10));
        assert_eq!(cs[0].message, "2/4");
        assert_eq!(cs[0].observed_generation, Some(2));
        set_condition(
            &mut cs,
            ConditionType::Ready,
            true,
            "Succeeded",
            "done",
            Some(2),
            &at(30),
        );
        assert_eq!(cs[0].last_transition_time, at(30));
        assert_eq!(condition_status(&cs, ConditionType::Ready), Some(true));
        assert_eq!(condition_status(&cs, ConditionType::Failed), None);
    }
}
