//! Pieces of the Pod status as the kubelet reports them.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub fn now() -> Time {
    Time(Timestamp::now())
}

pub fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

pub fn running(started: Time) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(started),
        }),
        ..Default::default()
    }
}

pub fn terminated(
    exit_code: i32,
    reason: &str,
    message: Option<String>,
    started: Option<Time>,
    container_id: &str,
) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code,
            reason: Some(reason.to_string()),
            message,
            started_at: started,
            finished_at: Some(now()),
            container_id: Some(container_id.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The reason the kubelet gives a terminated container.
pub fn exit_reason(exit_code: i32) -> &'static str {
    if exit_code == 0 { "Completed" } else { "Error" }
}

/// Pod conditions that keep their transition time while their status does not change.
#[derive(Debug, Default)]
pub struct Conditions {
    list: Vec<PodCondition>,
}

impl Conditions {
    pub fn set(&mut self, type_: &str, status: bool, reason: Option<&str>) {
        let status = if status { "True" } else { "False" }.to_string();
        let reason = reason.map(str::to_string);
        match self.list.iter_mut().find(|c| c.type_ == type_) {
            Some(c) if c.status == status => c.reason = reason,
            Some(c) => {
                c.status = status;
                c.reason = reason;
                c.last_transition_time = Some(now());
            }
            None => self.list.push(PodCondition {
                type_: type_.to_string(),
                status,
                reason,
                last_transition_time: Some(now()),
                ..Default::default()
            }),
        }
    }

    pub fn to_vec(&self) -> Vec<PodCondition> {
        self.list.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_changes_only_with_the_status() {
        let mut c = Conditions::default();
        c.set("Ready", false, Some("ContainersNotReady"));
        let first = c.to_vec()[0].last_transition_time.clone();
        c.set("Ready", false, Some("PodCompleted"));
        assert_eq!(c.to_vec()[0].last_transition_time, first);
        assert_eq!(c.to_vec()[0].reason.as_deref(), Some("PodCompleted"));
        c.set("Ready", true, None);
        assert_eq!(c.to_vec()[0].status, "True");
        assert_eq!(c.to_vec().len(), 1);
    }
}
