//! The decisions of an online Migration, pure like the rest of `decide`: which phase the capture's
//! report puts the Migration in, whether a requested cutover may start, and whether the capture is
//! still reporting. The capture pod writes `status.online`; the operator only reads it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mssql_pg_crds::cutover::CutoverSpec;
use mssql_pg_crds::{MigrationPhase, OnlineStatus};

/// Seconds without a report after which the capture counts as not running.
pub const CAPTURE_SILENT_SECONDS: i64 = 60;

/// The capture's phase (as it writes `status.online.phase`) as the Migration's; `None` while it has
/// not reported, `Some(Failed)` when it stopped for good.
pub fn capture_phase(online: Option<&OnlineStatus>) -> Option<MigrationPhase> {
    let phase = online?.phase.as_deref()?;
    Some(match phase {
        // Anchored, or building keys after the copy: the stream has not started.
        "Copying" => MigrationPhase::Copying,
        "CatchingUp" => MigrationPhase::CatchingUp,
        "Streaming" => MigrationPhase::Streaming,
        "CuttingOver" => MigrationPhase::CuttingOver,
        "Finalizing" => MigrationPhase::Finalizing,
        "Verifying" => MigrationPhase::Verifying,
        "Succeeded" => MigrationPhase::Succeeded,
        "Failed" => MigrationPhase::Failed,
        _ => return None,
    })
}

/// Whether the stream has applied what the source had when it last looked (`CaughtUp`).
pub fn caught_up(phase: Option<MigrationPhase>) -> bool {
    matches!(
        phase,
        Some(
            MigrationPhase::Streaming
                | MigrationPhase::CuttingOver
                | MigrationPhase::Finalizing
                | MigrationPhase::Verifying
                | MigrationPhase::Succeeded
        )
    )
}

/// Seconds since the capture last reported, when it did.
pub fn silent_for(online: Option<&OnlineStatus>, now: &Time) -> Option<i64> {
    let at = online?.updated_at.as_ref()?;
    Some((now.0.as_second() - at.0.as_second()).max(0))
}

/// Whether the capture has a reverse stream to run after the cutover (`spec.cutover.reverse`) that
/// has not gone back yet: its Deployment stays, and deleting the Migration stops it.
pub fn reverse_pending(mig: &mssql_pg_crds::Migration) -> bool {
    let went_back = mig
        .status
        .as_ref()
        .and_then(|s| s.online.as_ref())
        .and_then(|o| o.reverse.as_ref())
        .and_then(|r| r.phase.as_deref())
        == Some("Succeeded");
    mig.spec.online.enabled && mig.spec.cutover.reverse && !mig.spec.dry_run && !went_back
}

/// Whether deleting `mig` first needs a Job that removes what streaming holds on the source (the
/// replication slot keeps WAL until dropped): an online Migration with `online.cleanup` that was
/// planned (its capture may have anchored) and did not cut over (the cutover cleans up itself), or
/// whose reverse stream has not gone back (it holds a slot or Change Tracking on the target).
pub fn needs_source_cleanup(mig: &mssql_pg_crds::Migration) -> bool {
    use mssql_pg_crds::conditions::{ConditionType, condition_status};
    let status = mig.status.as_ref();
    let planned =
        status.is_some_and(|s| condition_status(&s.conditions, ConditionType::Planned) == Some(true));
    mig.spec.online.enabled
        && mig.spec.online.cleanup
        && !mig.spec.dry_run
        && planned
        && (capture_phase(status.and_then(|s| s.online.as_ref())) != Some(MigrationPhase::Succeeded)
            || reverse_pending(mig))
}

/// What becomes of `spec.cutover.requested`.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate {
    NotRequested,
    /// Requested; not yet possible (the stream has not started, or no lag was measured).
    Waiting(String),
    /// Requested, refused for now: the lag is above `maxLagSeconds`.
    Refused(String),
    /// Passed on to the capture at `at` (kept while the request stands).
    Accepted {
        at: Time,
        message: String,
    },
}

impl Gate {
    /// The `CutOver` condition's reason while the cutover has not happened.
    pub fn reason(&self) -> &'static str {
        match self {
            Gate::NotRequested => "NotRequested",
            Gate::Waiting(_) => "Waiting",
            Gate::Refused(_) => "LagAboveMaximum",
            Gate::Accepted { .. } => "CuttingOver",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Gate::NotRequested => {
                "set spec.cutover.requested (kubectl mssqlpg cutover NAME) once the applications stopped writing"
            }
            Gate::Waiting(m) | Gate::Refused(m) => m,
            Gate::Accepted { message, .. } => message,
        }
    }

    pub fn accepted_at(&self) -> Option<&Time> {
        match self {
            Gate::Accepted { at, .. } => Some(at),
            _ => None,
        }
    }
}

/// Whether a requested cutover may start now. `accepted`: when it was accepted before (it stays
/// accepted while the request stands, so a lag that rises during the drain does not take it back);
/// `copied`: every copy task is done.
pub fn cutover_gate(
    spec: &CutoverSpec,
    online: Option<&OnlineStatus>,
    accepted: Option<&Time>,
    copied: bool,
    now: &Time,
) -> Gate {
    if !spec.requested {
        return Gate::NotRequested;
    }
    if let Some(at) = accepted {
        return Gate::Accepted {
            at: at.clone(),
            message: "cutover accepted: the stream drains to its fence, then finalizes and verifies".into(),
        };
    }
    let phase = capture_phase(online);
    if !copied
        || !matches!(
            phase,
            Some(MigrationPhase::CatchingUp | MigrationPhase::Streaming)
        )
    {
        return Gate::Waiting(format!(
            "cutover requested: waits until the copy is done and the stream runs (now {})",
            phase.map_or("not reported", MigrationPhase::as_str)
        ));
    }
    if let Some(silent) = silent_for(online, now).filter(|s| *s > CAPTURE_SILENT_SECONDS) {
        return Gate::Waiting(format!(
            "cutover requested: the capture has not reported for {silent}s, so the lag is unknown"
        ));
    }
    let Some(lag) = online.and_then(|o| o.lag_seconds) else {
        return Gate::Waiting("cutover requested: no lag measured yet".into());
    };
    let max = f64::from(spec.max_lag_seconds);
    if lag > max {
        return Gate::Refused(format!(
            "cutover refused for now: the lag is {lag:.1}s, above spec.cutover.maxLagSeconds ({}s); stop the \
             applications' writes and wait for the lag to fall (the request stands), or raise maxLagSeconds",
            spec.max_lag_seconds
        ));
    }
    Gate::Accepted {
        at: now.clone(),
        message: format!("cutover accepted at a lag of {lag:.1}s: the stream drains to its fence"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    fn online(phase: &str, lag: Option<f64>, updated: i64) -> OnlineStatus {
        OnlineStatus {
            phase: Some(phase.into()),
            lag_seconds: lag,
            updated_at: Some(at(updated)),
            ..OnlineStatus::default()
        }
    }

    fn requested(max: i32) -> CutoverSpec {
        CutoverSpec {
            requested: true,
            max_lag_seconds: max,
            reverse: false,
            go_back: false,
        }
    }

    #[test]
    fn a_cutover_is_refused_while_the_lag_is_above_the_maximum() {
        let o = online("Streaming", Some(12.5), 100);
        let gate = cutover_gate(&requested(5), Some(&o), None, true, &at(101));
        assert!(
            matches!(&gate, Gate::Refused(m) if m.contains("12.5s") && m.contains("maxLagSeconds (5s)")),
            "{gate:?}"
        );
        assert_eq!(gate.reason(), "LagAboveMaximum");
        assert_eq!(gate.accepted_at(), None);

        let o = online("Streaming", Some(0.8), 100);
        let gate = cutover_gate(&requested(5), Some(&o), None, true, &at(101));
        assert_eq!(gate.accepted_at(), Some(&at(101)));
    }

    #[test]
    fn an_accepted_cutover_stays_accepted_while_requested_and_goes_when_withdrawn() {
        let o = online("CuttingOver", Some(30.0), 100);
        let gate = cutover_gate(&requested(5), Some(&o), Some(&at(90)), true, &at(101));
        assert_eq!(gate.accepted_at(), Some(&at(90)));
        let withdrawn = CutoverSpec::default();
        assert_eq!(
            cutover_gate(&withdrawn, Some(&o), Some(&at(90)), true, &at(101)),
            Gate::NotRequested
        );
    }

    #[test]
    fn a_cutover_waits_for_the_copy_the_stream_and_a_fresh_lag() {
        let streaming = online("Streaming", Some(0.1), 100);
        for (o, copied, now) in [
            (Some(online("Copying", None, 100)), false, 101),
            (Some(streaming.clone()), false, 101),
            (None, true, 101),
            (Some(online("Streaming", None, 100)), true, 101),
            // The capture went quiet: its last lag says nothing about now.
            (Some(streaming.clone()), true, 100 + CAPTURE_SILENT_SECONDS + 1),
        ] {
            let gate = cutover_gate(&requested(5), o.as_ref(), None, copied, &at(now));
            assert!(matches!(gate, Gate::Waiting(_)), "{o:?} {copied}: {gate:?}");
        }
    }

    #[test]
    fn capture_phases_map_to_migration_phases() {
        assert_eq!(capture_phase(None), None);
        let phase = |p: &str| capture_phase(Some(&online(p, None, 0)));
        assert_eq!(phase("Copying"), Some(MigrationPhase::Copying));
        assert_eq!(phase("Streaming"), Some(MigrationPhase::Streaming));
        assert_eq!(phase("Failed"), Some(MigrationPhase::Failed));
        assert_eq!(phase("Unheard"), None);
        assert!(caught_up(phase("Verifying")));
        assert!(!caught_up(phase("CatchingUp")));
        assert_eq!(
            silent_for(Some(&online("Streaming", None, 100)), &at(130)),
            Some(30)
        );
    }
}
