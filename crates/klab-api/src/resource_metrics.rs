//! What the resource metrics pipeline knows: the usage of a node or of a pod's containers over the
//! window between two scrapes, as metrics-server keeps it in memory and the `metrics.k8s.io`
//! API serves it. The scraper (klab-controllers' `metrics_server`) fills it; the API server reads
//! it through [`MetricsReader`], which the composition root connects, as kube-apiserver reaches
//! metrics-server through its APIService.

use jiff::Timestamp;

/// A usage over a window: CPU averaged over it, memory (working set) at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    /// CPU, nanocores (`cpu: 250000000n` is 250m).
    pub cpu_nanocores: u64,
    /// Working set, bytes.
    pub memory_bytes: u64,
}

/// A node's usage: `timestamp` is the later sample, `window` the time since the earlier one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeUsage {
    pub timestamp: Timestamp,
    pub window: std::time::Duration,
    pub usage: Usage,
}

/// A pod's containers' usage, sorted by container name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodUsage {
    pub timestamp: Timestamp,
    pub window: std::time::Duration,
    pub containers: Vec<(String, Usage)>,
}

/// Reads the pipeline's current metrics (`None`: none known yet, or no longer).
pub trait MetricsReader: Send + Sync + 'static {
    fn node(&self, name: &str) -> Option<NodeUsage>;
    fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage>;
}
