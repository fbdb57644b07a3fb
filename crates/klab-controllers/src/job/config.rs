//! Job controller knobs (kube-controller-manager names and upstream constants).

use std::time::Duration;

/// Configuration of the Job controller.
#[derive(Clone, Debug, PartialEq)]
pub struct JobControllerConfig {
    /// `--concurrent-job-syncs` (5). klab syncs one Job at a time; kept for the flag.
    pub concurrent_job_syncs: u32,
    /// `DefaultJobPodFailureBackOff` (10 s): first delay before replacing a failed pod.
    pub pod_failure_backoff: Duration,
    /// `MaxJobPodFailureBackOff` (6 min).
    pub max_pod_failure_backoff: Duration,
    /// `MaxPodCreateDeletePerSync` (500).
    pub max_pod_create_delete_per_sync: usize,
}

impl Default for JobControllerConfig {
    fn default() -> Self {
        JobControllerConfig {
            concurrent_job_syncs: 5,
            pod_failure_backoff: Duration::from_secs(10),
            max_pod_failure_backoff: Duration::from_secs(6 * 60),
            max_pod_create_delete_per_sync: 500,
        }
    }
}
