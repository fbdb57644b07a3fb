//! DaemonSet controller knobs (kube-controller-manager names and defaults).

use std::time::Duration;

/// Configuration of the DaemonSet controller.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSetControllerConfig {
    /// `--concurrent-daemonset-syncs` (2). klab syncs one DaemonSet at a time; kept for the flag.
    pub concurrent_daemonset_syncs: u32,
    /// Upstream `BurstReplicas` (250): at most this many creations/deletions per sync.
    pub burst_replicas: usize,
    /// Initial per-node back-off after a failed daemon pod is deleted (`failedPodsBackoff`, 1 s).
    pub failed_pods_backoff_initial: Duration,
    /// Maximum of that back-off (15 min).
    pub failed_pods_backoff_max: Duration,
}

impl Default for DaemonSetControllerConfig {
    fn default() -> Self {
        DaemonSetControllerConfig {
            concurrent_daemonset_syncs: 2,
            burst_replicas: 250,
            failed_pods_backoff_initial: Duration::from_secs(1),
            failed_pods_backoff_max: Duration::from_secs(15 * 60),
        }
    }
}
