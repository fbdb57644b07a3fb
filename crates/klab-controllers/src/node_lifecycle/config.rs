//! Knobs of the node lifecycle controller, named after kube-controller-manager's flags, with the
//! upstream defaults (v1.32+).

use std::time::Duration;

/// Configuration of the node lifecycle controller (`NodeLifecycleControllerConfiguration`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeLifecycleConfig {
    /// `--node-monitor-period`: period of the health-monitor pass (sliding: next start = end + period).
    pub node_monitor_period: Duration,
    /// `--node-monitor-grace-period`: allowed silence of a node that has a Ready condition
    /// (50s since v1.32; 40s before).
    pub node_monitor_grace_period: Duration,
    /// `--node-startup-grace-period`: allowed silence of a node without a Ready condition yet.
    pub node_startup_grace_period: Duration,
    /// `--node-eviction-rate`: NoExecute tainting rate (nodes per second) in a healthy zone.
    pub node_eviction_rate: f32,
    /// `--secondary-node-eviction-rate`: rate in a partially disrupted large zone.
    pub secondary_node_eviction_rate: f32,
    /// `--large-cluster-size-threshold`: a zone is large iff its node count is strictly greater.
    pub large_cluster_size_threshold: i32,
    /// `--unhealthy-zone-threshold`: fraction of not-Ready nodes (minimum 3) for PartialDisruption.
    pub unhealthy_zone_threshold: f32,
    /// Period of the NoExecute tainting pass (upstream constant `NodeEvictionPeriod`, 100 ms).
    pub node_eviction_period: Duration,
    /// Status-write attempts per node and pass (`NodeHealthUpdateRetry`, 5).
    pub node_health_update_retry: u32,
    /// Sleep between status-write attempts (`retrySleepTime`, 20 ms).
    pub retry_sleep_time: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        NodeLifecycleConfig {
            node_monitor_period: Duration::from_secs(5),
            node_monitor_grace_period: Duration::from_secs(50),
            node_startup_grace_period: Duration::from_secs(60),
            node_eviction_rate: 0.1,
            secondary_node_eviction_rate: 0.01,
            large_cluster_size_threshold: 50,
            unhealthy_zone_threshold: 0.55,
            node_eviction_period: Duration::from_millis(100),
            node_health_update_retry: 5,
            retry_sleep_time: Duration::from_millis(20),
        }
    }
}

/// Retry delay of the tainting pass when the node's Ready condition is missing or the cache errs
/// (upstream returns `false, 50*time.Millisecond`; the queue adds 1 ns).
pub const TAINT_RETRY_DELAY: Duration = Duration::from_millis(50);
