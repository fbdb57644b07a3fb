//! klab-cluster: the composition root shared by `klab sim` and `klab up`.
//!
//! It builds the API server over a store, gives every component its own in-process `kube::Client`
//! carrying the component's identity, starts the controller manager, the scheduler and one
//! simulated kubelet per node, and applies node faults at the node agents' seams. Nothing else in
//! klab wires components together.

use std::collections::BTreeMap;
use std::sync::Mutex;

use klab_api::supervise::{Health, RestartPolicy, supervise};
use klab_api::{Clock, DetRng};
use klab_apiserver::kubelet_proxy::{DialError, DialFuture, KubeletNetwork};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use klab_kubelet::server::{Dial, KubeletEndpoint};
use klab_store::DynStorage;

pub mod admin;

#[cfg(test)]
mod proxy_tests;

pub use klab_controllers::manager::{ControllerManagerConfig, ControllerMetrics};
pub use klab_kubelet::config::{KubeletConfig, RuntimeModel};
pub use klab_kubelet::fault::NodeFault;
pub use klab_kubelet::node::{SimNode, SimNodeState};
pub use klab_kubelet::runtime::Machine;
pub use klab_scheduler::SchedulerConfig;

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
        NodeSpec {
            name: name.into(),
            zone: None,
            labels: BTreeMap::new(),
            cpu: "4".into(),
            memory: "8Gi".into(),
            pods: 110,
        }
    }
}

/// Everything needed to build a cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    pub nodes: Vec<NodeSpec>,
    pub apiserver: ApiServerConfig,
    /// The controller manager's controllers.
    pub controllers: ControllerManagerConfig,
    /// The default scheduler.
    pub scheduler: SchedulerConfig,
    /// Configuration shared by every node's kubelet.
    pub kubelet: KubeletConfig,
    /// Modelled latencies of the simulated container runtime.
    pub runtime: RuntimeModel,
    /// Machines saved by an earlier run, by node name: a restarted `klab up` is a control-plane
    /// restart, and these nodes come back with their containers still running.
    pub restore_machines: BTreeMap<String, Machine>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("API server: {0:?}")]
    Api(klab_apiserver::ApiError),
    #[error("unknown node {0:?}")]
    UnknownNode(String),
    #[error("invalid node {node:?}: {reason}")]
    InvalidNode { node: String, reason: String },
    #[error("{0}")]
    Transition(String),
    #[error("unknown flag --{0}")]
    UnknownFlag(String),
    #[error("invalid value {value:?} for --{flag}: {reason}")]
    InvalidFlag {
        flag: String,
        value: String,
        reason: String,
    },
}

/// A running cluster in this process.
pub struct Cluster {
    api: ApiServer,
    clock: Clock,
    rng: DetRng,
    config: ClusterConfig,
    /// The simulated nodes, by name. `SimNode::apply` is synchronous, so a plain mutex is enough
    /// and is never held across an await.
    nodes: BTreeMap<String, Mutex<SimNode>>,
    controller_metrics: ControllerMetrics,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Cluster {
    /// Builds the API server over `store` and starts every component. Call inside the runtime
    /// that will drive the cluster (a paused current-thread runtime for sim).
    pub async fn start(
        store: DynStorage,
        clock: Clock,
        rng: DetRng,
        config: ClusterConfig,
    ) -> Result<Cluster, ClusterError> {
        let api = ApiServer::new(store, clock.clone(), rng.clone(), config.apiserver.clone())
            .await
            .map_err(ClusterError::Api)?;
        let client_api = api.clone();
        let (mut tasks, controller_metrics) = klab_controllers::manager::start(
            move |sa| kube::Client::new(client_api.router_as(service_account(sa)), "default"),
            clock.clone(),
            rng.clone(),
            config.controllers.clone(),
            api.health().clone(),
        );
        let scheduler_client = kube::Client::new(
            api.router_as(Identity::component("kube-scheduler")),
            "default",
        );
        let (sclock, srng, scfg) = (clock.clone(), rng.clone(), config.scheduler.clone());
        tasks.push(tokio::spawn(supervise(
            api.health().clone(),
            "kube-scheduler",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                let run = klab_scheduler::run(
                    scheduler_client.clone(),
                    sclock.clone(),
                    srng.clone(),
                    scfg.clone(),
                );
                async move { run.await.map_err(|e| e.to_string()) }
            },
        )));
        let mut cluster = Cluster {
            api,
            clock,
            rng,
            config,
            nodes: BTreeMap::new(),
            controller_metrics,
            tasks,
        };
        for (i, spec) in cluster.config.nodes.clone().into_iter().enumerate() {
            cluster.add_node(&spec, i)?;
        }
        let endpoints = cluster
            .nodes
            .values()
            .map(|n| {
                let n = n.lock().unwrap_or_else(|p| p.into_inner());
                (n.node_ip().to_string(), n.endpoint())
            })
            .collect();
        cluster
            .api
            .set_kubelet_network(std::sync::Arc::new(SimNetwork { endpoints }));
        Ok(cluster)
    }

    /// Builds one simulated node (machine + kubelet) and starts its kubelet.
    fn add_node(&mut self, spec: &NodeSpec, index: usize) -> Result<(), ClusterError> {
        let invalid = |reason: String| ClusterError::InvalidNode {
            node: spec.name.clone(),
            reason,
        };
        let mut node_spec = klab_kubelet::config::NodeSpecConfig {
            labels: spec.labels.clone(),
            zone: spec.zone.clone(),
            node_ip: format!("10.0.0.{}", 10 + index),
            ..Default::default()
        };
        node_spec.cpu_millis = klab_kubelet::quantity::cpu_millis(&spec.cpu)
            .ok_or_else(|| invalid(format!("bad cpu quantity {:?}", spec.cpu)))?;
        node_spec.memory_bytes = klab_kubelet::quantity::bytes(&spec.memory)
            .ok_or_else(|| invalid(format!("bad memory quantity {:?}", spec.memory)))?;
        let mut kubelet = self.config.kubelet.clone();
        kubelet.max_pods = i64::from(spec.pods);
        let api = self.api.clone();
        let identity = Identity::node(&spec.name);
        let mut node = SimNode::new(
            &spec.name,
            node_spec,
            kubelet,
            self.config.runtime.clone(),
            self.clock.clone(),
            self.rng.clone(),
            move || api.router_as(identity.clone()),
        );
        node.set_health(self.api.health().clone());
        if let Some(m) = self.config.restore_machines.get(&spec.name) {
            node.restore_machine(m.clone());
        }
        node.start();
        self.nodes.insert(spec.name.clone(), Mutex::new(node));
        Ok(())
    }

    /// The supervision registry: every component's failures and restarts.
    pub fn health(&self) -> &Health {
        self.api.health()
    }

    /// Metrics of the controller manager's controllers.
    pub fn controller_metrics(&self) -> &ControllerMetrics {
        &self.controller_metrics
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

    /// Applies a fault to one node's agent and machine, refusing transitions that make no sense
    /// (starting a running kubelet, powering on a running machine, …).
    pub async fn apply_fault(
        &self,
        node: &str,
        fault: NodeFault,
    ) -> Result<SimNodeState, ClusterError> {
        let cell = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::UnknownNode(node.to_string()))?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        check_transition(&n.state(), fault).map_err(ClusterError::Transition)?;
        n.apply(fault);
        Ok(n.state())
    }

    /// Copies of every node's machine, by node name (what a control-plane restart keeps).
    pub fn machines(&self) -> BTreeMap<String, Machine> {
        self.nodes
            .iter()
            .map(|(name, n)| {
                let n = n.lock().unwrap_or_else(|p| p.into_inner());
                (name.clone(), n.machine_snapshot())
            })
            .collect()
    }

    /// The simulated state of one node.
    pub fn node_state(&self, node: &str) -> Result<SimNodeState, ClusterError> {
        let cell = self
            .nodes
            .get(node)
            .ok_or_else(|| ClusterError::UnknownNode(node.to_string()))?;
        let n = cell.lock().unwrap_or_else(|p| p.into_inner());
        Ok(n.state())
    }

    /// Sets a component flag by its upstream name: kube-apiserver
    /// (`default-unreachable-toleration-seconds`, …), kube-controller-manager
    /// (`node-monitor-grace-period`, …) and kubelet configuration (`nodeStatusUpdateFrequency`, …).
    pub fn set_flag(
        config: &mut ClusterConfig,
        name: &str,
        value: &str,
    ) -> Result<(), ClusterError> {
        let invalid = |reason: String| ClusterError::InvalidFlag {
            flag: name.into(),
            value: value.into(),
            reason,
        };
        let int = |v: &str| v.parse::<i64>().map_err(|e| invalid(e.to_string()));
        let dur = |v: &str| klab_api::duration::parse_duration(v).map_err(invalid);
        match name {
            "default-not-ready-toleration-seconds" => {
                config
                    .apiserver
                    .default_toleration_seconds
                    .not_ready_seconds = int(value)?
            }
            "default-unreachable-toleration-seconds" => {
                config
                    .apiserver
                    .default_toleration_seconds
                    .unreachable_seconds = int(value)?
            }
            "nodeStatusUpdateFrequency" | "node-status-update-frequency" => {
                config.kubelet.node_status_update_frequency = dur(value)?
            }
            "nodeStatusReportFrequency" => {
                config.kubelet.node_status_report_frequency = Some(dur(value)?)
            }
            "nodeLeaseDurationSeconds" => {
                config.kubelet.node_lease_duration_seconds =
                    i32::try_from(int(value)?).map_err(|e| invalid(e.to_string()))?
            }
            other => {
                if !config.controllers.set_flag(other, value).map_err(invalid)? {
                    return Err(ClusterError::UnknownFlag(other.to_string()));
                }
            }
        }
        Ok(())
    }

    /// The kubelet port of a node, as the API server dials it (tests look at its open streams).
    pub fn kubelet_endpoint(&self, node: &str) -> Option<KubeletEndpoint> {
        let n = self.nodes.get(node)?;
        let n = n.lock().unwrap_or_else(|p| p.into_inner());
        Some(n.endpoint())
    }

    /// Names of the cluster's nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }
}

/// The network between the API server and the kubelets: each node's address leads to its
/// kubelet's port, and the node's faults decide what a dial meets (see
/// `klab_kubelet::server::Dial`).
struct SimNetwork {
    /// Kubelet endpoints by node address.
    endpoints: BTreeMap<String, KubeletEndpoint>,
}

impl KubeletNetwork for SimNetwork {
    fn dial(&self, host: &str, port: u16) -> DialFuture {
        let endpoint = self.endpoints.get(host).cloned();
        Box::pin(async move {
            let Some(endpoint) = endpoint else {
                return Err(DialError::NoRoute);
            };
            match endpoint.dial() {
                Dial::Connected(conn) if port == KUBELET_PORT => Ok(conn),
                Dial::Connected(_) | Dial::Refused => Err(DialError::Refused),
                // Nothing answers: the dial waits until the caller gives up.
                Dial::NoAnswer => std::future::pending().await,
            }
        })
    }
}

/// The port the simulated kubelets listen on (node spec §8.1).
const KUBELET_PORT: u16 = 10250;

/// The identity upstream gives a controller: its service account in kube-system.
fn service_account(name: &str) -> Identity {
    Identity::new(
        format!("system:serviceaccount:kube-system:{name}"),
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ],
    )
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Whether `fault` can be applied to a node in `state`; the error says why not.
pub fn check_transition(state: &SimNodeState, fault: NodeFault) -> Result<(), String> {
    let n = &state.name;
    let err = |m: String| Err(m);
    match fault {
        NodeFault::StopKubelet
        | NodeFault::StartKubelet
        | NodeFault::Reboot
        | NodeFault::PowerOff
        | NodeFault::Partition
        | NodeFault::Freeze
            if !state.powered =>
        {
            err(format!("node {n} is powered off"))
        }
        NodeFault::StopKubelet if !state.kubelet_running => {
            err(format!("the kubelet on node {n} is not running"))
        }
        NodeFault::StartKubelet if state.kubelet_running => {
            err(format!("the kubelet on node {n} is already running"))
        }
        NodeFault::PowerOn if state.powered => err(format!("node {n} is already powered on")),
        NodeFault::Partition if state.partitioned => {
            err(format!("node {n} is already partitioned"))
        }
        NodeFault::Heal if !state.partitioned => err(format!("node {n} is not partitioned")),
        NodeFault::Freeze if state.frozen => err(format!("node {n} is already frozen")),
        NodeFault::Thaw if !state.frozen => err(format!("node {n} is not frozen")),
        _ => Ok(()),
    }
}

/// Parses a fault name as `klab node` and scenario files spell it (`stop-kubelet`, `power-off`, …).
pub fn parse_fault(name: &str) -> Option<NodeFault> {
    Some(match name {
        "stop-kubelet" => NodeFault::StopKubelet,
        "start-kubelet" => NodeFault::StartKubelet,
        "power-off" => NodeFault::PowerOff,
        "power-on" => NodeFault::PowerOn,
        "reboot" => NodeFault::Reboot,
        "partition" => NodeFault::Partition,
        "heal" => NodeFault::Heal,
        "freeze" => NodeFault::Freeze,
        "thaw" => NodeFault::Thaw,
        _ => return None,
    })
}

/// The spelling `parse_fault` accepts for each fault.
pub const FAULT_NAMES: [&str; 9] = [
    "stop-kubelet",
    "start-kubelet",
    "power-off",
    "power-on",
    "reboot",
    "partition",
    "heal",
    "freeze",
    "thaw",
];

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Api, ListParams};
    use std::time::Duration;

    fn state(powered: bool, kubelet: bool) -> SimNodeState {
        SimNodeState {
            name: "n1".into(),
            powered,
            kubelet_running: kubelet,
            partitioned: false,
            frozen: false,
            boot_id: "b".into(),
            running_containers: vec![],
        }
    }

    #[test]
    fn impossible_transitions_are_refused() {
        assert!(check_transition(&state(true, true), NodeFault::StopKubelet).is_ok());
        assert_eq!(
            check_transition(&state(true, true), NodeFault::StartKubelet).unwrap_err(),
            "the kubelet on node n1 is already running"
        );
        assert_eq!(
            check_transition(&state(true, false), NodeFault::StopKubelet).unwrap_err(),
            "the kubelet on node n1 is not running"
        );
        assert_eq!(
            check_transition(&state(false, false), NodeFault::StartKubelet).unwrap_err(),
            "node n1 is powered off"
        );
        assert_eq!(
            check_transition(&state(true, true), NodeFault::PowerOn).unwrap_err(),
            "node n1 is already powered on"
        );
        assert!(check_transition(&state(false, false), NodeFault::PowerOn).is_ok());
        assert_eq!(
            check_transition(&state(true, true), NodeFault::Heal).unwrap_err(),
            "node n1 is not partitioned"
        );
        for name in FAULT_NAMES {
            assert!(parse_fault(name).is_some(), "{name}");
        }
        assert!(parse_fault("explode").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn nodes_register_and_faults_apply() {
        let config = ClusterConfig {
            nodes: vec![NodeSpec::new("n1"), NodeSpec::new("n2")],
            ..Default::default()
        };
        let cluster = Cluster::start(
            klab_store::memory::MemoryStore::new(),
            Clock::virtual_default(),
            DetRng::seeded(3),
            config,
        )
        .await
        .unwrap();
        let nodes: Api<Node> = Api::all(cluster.admin_client());
        let start = tokio::time::Instant::now();
        loop {
            let l = nodes.list(&ListParams::default()).await.unwrap();
            let ready = l
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            if ready == 2 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "nodes did not become Ready"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let s = cluster
            .apply_fault("n1", NodeFault::StopKubelet)
            .await
            .unwrap();
        assert!(!s.kubelet_running);
        assert!(matches!(
            cluster.apply_fault("n1", NodeFault::StopKubelet).await,
            Err(ClusterError::Transition(_))
        ));
        assert!(matches!(
            cluster.apply_fault("n9", NodeFault::Reboot).await,
            Err(ClusterError::UnknownNode(_))
        ));
        assert_eq!(cluster.node_names(), vec!["n1", "n2"]);
    }
}
