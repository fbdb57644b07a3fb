//! Kubelet configuration: upstream `KubeletConfiguration` knobs (names and defaults as in
//! `k8s.io/kubelet/config/v1beta1`), the node's machine description, and klab's runtime model
//! (the modelled latencies of the simulated container runtime, which upstream has no knob for).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;

/// The subset of upstream `KubeletConfiguration` that klab's node agent models. Field names are the
/// upstream config names in snake case; defaults are upstream's (`pkg/kubelet/apis/config/v1beta1/defaults.go`).
#[derive(Clone, Debug, PartialEq)]
pub struct KubeletConfig {
    /// `registerNode` (default true): create the Node object at start.
    pub register_node: bool,
    /// `registerWithTaints` (default none): taints put on the Node only when it is created.
    pub register_with_taints: Vec<Taint>,
    /// `registerSchedulable` (flag, default true): `spec.unschedulable = !register_schedulable`.
    pub register_schedulable: bool,
    /// `nodeStatusUpdateFrequency` (default 10s): how often node status is computed.
    pub node_status_update_frequency: Duration,
    /// `nodeStatusReportFrequency` (default 5m): the longest time between status PATCHes when
    /// nothing changed. `None` = upstream's defaulting rule: 5m, or equal to
    /// `nodeStatusUpdateFrequency` when only that one was set explicitly (see [`Self::effective_report_frequency`]).
    pub node_status_report_frequency: Option<Duration>,
    /// `nodeLeaseDurationSeconds` (default 40); renew interval = 25 % of it.
    pub node_lease_duration_seconds: i32,
    /// `maxPods` (default 110).
    pub max_pods: i64,
    /// `podsPerCore` (default 0 = unlimited).
    pub pods_per_core: i64,
    /// `port` (default 10250): published as `status.daemonEndpoints.kubeletEndpoint.Port`.
    pub port: i32,
    /// `enableControllerAttachDetach` (default true): sets the CMAD annotation on the Node.
    pub enable_controller_attach_detach: bool,
    /// `syncFrequency` (default 1m): pod resync period (a simulated pod needs no periodic resync;
    /// kept for fidelity of configuration files).
    pub sync_frequency: Duration,
    /// `evictionHard` `memory.available` threshold in bytes (default 100Mi); it is subtracted from
    /// allocatable memory.
    pub eviction_hard_memory_available: u64,
    /// `evictionHard` `nodefs.available` threshold as a percentage (default 10); subtracted from
    /// allocatable ephemeral-storage.
    pub eviction_hard_nodefs_available_percent: u8,
    /// `kubeReserved` + `systemReserved` cpu, millicores (default 0).
    pub reserved_cpu_millis: u64,
    /// `kubeReserved` + `systemReserved` memory, bytes (default 0).
    pub reserved_memory: u64,
    /// `shutdownGracePeriod`, `shutdownGracePeriodCriticalPods`,
    /// `shutdownGracePeriodByPodPriority` (default: all unset, graceful node shutdown disabled).
    pub shutdown: crate::shutdown::ShutdownConfig,
    /// `evictionHard`, `evictionSoft`, `evictionSoftGracePeriod`, `evictionMinimumReclaim`,
    /// `evictionPressureTransitionPeriod`, `evictionMaxPodGracePeriod` (upstream defaults).
    pub eviction: crate::eviction::EvictionConfig,
    /// `imageGCHighThresholdPercent`, `imageGCLowThresholdPercent`, `imageMinimumGCAge`
    /// (85, 80, 2m).
    pub image_gc: crate::images::ImageGcPolicy,
    /// `nodeStatusMaxImages` (default 50; −1: no limit).
    pub node_status_max_images: i32,
    /// `containerLogMaxSize`, `containerLogMaxFiles` (10Mi, 5): container log rotation.
    pub container_log: crate::usage::LogRotation,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            register_node: true,
            register_with_taints: Vec::new(),
            register_schedulable: true,
            node_status_update_frequency: Duration::from_secs(10),
            node_status_report_frequency: None,
            node_lease_duration_seconds: 40,
            max_pods: 110,
            pods_per_core: 0,
            port: klab_api::names::KUBELET_PORT,
            enable_controller_attach_detach: true,
            sync_frequency: Duration::from_secs(60),
            eviction_hard_memory_available: 100 * 1024 * 1024,
            eviction_hard_nodefs_available_percent: 10,
            reserved_cpu_millis: 0,
            reserved_memory: 0,
            shutdown: Default::default(),
            eviction: Default::default(),
            image_gc: Default::default(),
            node_status_max_images: crate::images::NODE_STATUS_MAX_IMAGES,
            container_log: Default::default(),
        }
    }
}

/// Upstream's `nodeLeaseRenewIntervalFraction` (`pkg/kubelet/kubelet.go`).
pub const NODE_LEASE_RENEW_INTERVAL_FRACTION: f64 = 0.25;
/// Upstream's `nodeStatusUpdateRetry`: attempts per status sync.
pub const NODE_STATUS_UPDATE_RETRY: usize = 5;
/// Lease controller `maxUpdateRetries`.
pub const LEASE_MAX_UPDATE_RETRIES: usize = 5;
/// Jitter factor of the sliding lease and node-status periods (`wait.JitterUntil(…, 0.04, …)`).
pub const HEARTBEAT_JITTER_FACTOR: f64 = 0.04;
/// `minimumGracePeriodInSeconds`: SIGTERM→SIGKILL floor.
pub const MINIMUM_GRACE_PERIOD_SECONDS: i64 = 2;
/// `containerBackOffPeriod`: first crash-loop delay.
pub const CONTAINER_BACKOFF_PERIOD: Duration = Duration::from_secs(10);
/// `MaxContainerBackOff`: crash-loop delay cap.
pub const MAX_CONTAINER_BACKOFF: Duration = Duration::from_secs(300);

impl KubeletConfig {
    /// The report frequency after upstream's defaulting: explicit value, else the update frequency
    /// if that was changed from its default, else 5m.
    pub fn effective_report_frequency(&self) -> Duration {
        match self.node_status_report_frequency {
            Some(d) => d,
            None if self.node_status_update_frequency != Duration::from_secs(10) => {
                self.node_status_update_frequency
            }
            None => Duration::from_secs(300),
        }
    }

    /// `leaseDuration × 0.25` (10 s by default).
    pub fn lease_renew_interval(&self) -> Duration {
        Duration::from_secs(self.node_lease_duration_seconds.max(1) as u64)
            .mul_f64(NODE_LEASE_RENEW_INTERVAL_FRACTION)
    }

    /// `maxPods`, or `min(cores × podsPerCore, maxPods)` when `podsPerCore > 0`.
    pub fn pod_capacity(&self, cpu_millis: u64) -> i64 {
        if self.pods_per_core > 0 {
            let cores = (cpu_millis / 1000) as i64;
            (cores * self.pods_per_core).min(self.max_pods)
        } else {
            self.max_pods
        }
    }
}

/// The simulated machine a kubelet runs on (what cAdvisor and flags would tell upstream's kubelet).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpecConfig {
    /// `--node-labels`: merged over the default labels on create; zone/region given here too.
    pub labels: BTreeMap<String, String>,
    /// Shortcut for `--node-labels=topology.kubernetes.io/zone=<zone>`.
    pub zone: Option<String>,
    /// Shortcut for `--node-labels=topology.kubernetes.io/region=<region>`.
    pub region: Option<String>,
    /// `--node-ip` (the InternalIP address).
    pub node_ip: String,
    /// CPU capacity in millicores (4 cores = 4000).
    pub cpu_millis: u64,
    /// Memory capacity in bytes.
    pub memory_bytes: u64,
    /// Root filesystem capacity in bytes (`ephemeral-storage`).
    pub ephemeral_storage_bytes: u64,
    /// GOARCH label value.
    pub arch: String,
    /// `status.nodeInfo.kubeletVersion`.
    pub kubelet_version: String,
    /// `status.nodeInfo.containerRuntimeVersion` (`<runtime>://<version>`).
    pub container_runtime_version: String,
    pub kernel_version: String,
    pub os_image: String,
}

impl Default for NodeSpecConfig {
    fn default() -> Self {
        NodeSpecConfig {
            labels: BTreeMap::new(),
            zone: None,
            region: None,
            node_ip: "10.0.0.5".into(),
            cpu_millis: 4000,
            memory_bytes: 16 << 30,
            ephemeral_storage_bytes: 100 << 30,
            arch: "amd64".into(),
            kubelet_version: "v1.33.1".into(),
            container_runtime_version: "containerd://1.7.27".into(),
            kernel_version: "6.8.0-60-generic".into(),
            os_image: "Ubuntu 24.04.2 LTS".into(),
        }
    }
}

/// klab's model of the container runtime's latencies and of heartbeat jitter. These have no upstream
/// knob: they stand in for the real durations of pulling, creating and starting things.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeModel {
    /// Time to create and network a pod sandbox (`RunPodSandbox` + CNI).
    pub sandbox_start: Duration,
    /// Time to pull an image that is not on the node yet (or with `imagePullPolicy: Always`).
    pub image_pull: Duration,
    /// Time from `CreateContainer` to the process running.
    pub container_start: Duration,
    /// Duration of an `httpGet` preStop hook (the simulated server answers after this long).
    pub http_prestop: Duration,
    /// Time an image's own entrypoint (a "server") needs to exit after SIGTERM.
    pub sigterm_exit: Duration,
    /// Jitter factor of the lease and status periods: upstream's 0.04; tests may set 0 to assert
    /// exact 10 s periods.
    pub heartbeat_jitter: f64,
    /// Size reported for every pulled image in `Pulled` events.
    pub image_size_bytes: u64,
}

impl Default for RuntimeModel {
    fn default() -> Self {
        RuntimeModel {
            sandbox_start: Duration::from_secs(1),
            image_pull: Duration::from_secs(2),
            container_start: Duration::from_millis(500),
            http_prestop: Duration::ZERO,
            sigterm_exit: Duration::ZERO,
            heartbeat_jitter: HEARTBEAT_JITTER_FACTOR,
            image_size_bytes: 25 * 1024 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_frequency_defaulting_rule() {
        // N-16: nothing → 10s/5m; only update 4s → 4s/4s; 10s + 1m → 1m.
        let c = KubeletConfig::default();
        assert_eq!(c.effective_report_frequency(), Duration::from_secs(300));
        let c = KubeletConfig {
            node_status_update_frequency: Duration::from_secs(4),
            ..Default::default()
        };
        assert_eq!(c.effective_report_frequency(), Duration::from_secs(4));
        let c = KubeletConfig {
            node_status_report_frequency: Some(Duration::from_secs(60)),
            ..Default::default()
        };
        assert_eq!(c.effective_report_frequency(), Duration::from_secs(60));
    }

    #[test]
    fn lease_interval_and_pods() {
        assert_eq!(
            KubeletConfig::default().lease_renew_interval(),
            Duration::from_secs(10)
        );
        let c = KubeletConfig {
            node_lease_duration_seconds: 60,
            ..Default::default()
        };
        assert_eq!(c.lease_renew_interval(), Duration::from_secs(15));
        assert_eq!(KubeletConfig::default().pod_capacity(4000), 110);
        let c = KubeletConfig {
            pods_per_core: 10,
            ..Default::default()
        };
        assert_eq!(c.pod_capacity(4000), 40);
    }
}
