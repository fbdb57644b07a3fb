//! klab-cluster: the composition root shared by `klab sim` and `klab up`.
//!
//! It builds the API server over a store, gives every component its own in-process `kube::Client`
//! carrying the component's identity, starts the controller manager, the scheduler and one
//! simulated kubelet per node, and applies node faults at the node agents' seams. Nothing else in
//! klab wires components together.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use klab_api::kubelet_net::{DialError, DialFuture, KUBELET_PORT, KubeletNetwork};
use klab_api::supervise::{ComponentOp, Health, RestartPolicy, supervise};
use klab_api::{Clock, DetRng};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use klab_kubelet::server::{Dial, KubeletEndpoint};
use klab_runtime::{Rate, Throttled};
use klab_store::DynStorage;

pub mod admin;
pub mod control;

#[cfg(test)]
mod proxy_tests;

/// A cluster on a memory store and a paused virtual clock, for tests.
#[cfg(test)]
async fn test_cluster(seed: u64, config: ClusterConfig) -> Cluster {
    Cluster::start(
        klab_store::memory::MemoryStore::new(),
        Clock::virtual_default(),
        DetRng::seeded(seed),
        config,
    )
    .await
    .expect("the test cluster starts")
}

/// A one-node cluster (`n1`) on a memory store and a paused virtual clock, for tests.
#[cfg(test)]
async fn one_node_cluster(seed: u64) -> Cluster {
    let config = ClusterConfig {
        nodes: vec![NodeSpec::new("n1")],
        ..Default::default()
    };
    test_cluster(seed, config).await
}

#[cfg(test)]
mod metrics_tests;

pub use klab_controllers::manager::{ControllerManagerConfig, ControllerMetrics};
pub use klab_controllers::metrics_server::{MetricsServerConfig, MetricsStore};
pub use klab_kubelet::config::{KubeletConfig, RuntimeModel};
pub use klab_kubelet::fault::NodeFault;
pub use klab_kubelet::node::{ClientKind, SimNode, SimNodeState};
pub use klab_kubelet::node_status::ConditionOverride;
pub use klab_kubelet::runtime::Machine;
pub use klab_kubelet::usage::parse_annotation as parse_usage;
pub use klab_kubelet::usage::parse_volume_annotation as parse_volume_usage;
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
    /// This node's own KubeletConfiguration fields over the cluster's (`registerWithTaints`,
    /// `kubeReserved`, …), in their flag-like text form, applied in order
    /// ([`node_kubelet_config`]).
    pub kubelet: Vec<(String, String)>,
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
            kubelet: Vec::new(),
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
    /// metrics-server (`--metric-resolution`).
    pub metrics_server: MetricsServerConfig,
    /// Configuration shared by every node's kubelet.
    pub kubelet: KubeletConfig,
    /// Modelled latencies of the simulated container runtime.
    pub runtime: RuntimeModel,
    /// Machines saved by an earlier run, by node name: a restarted `klab up` is a control-plane
    /// restart, and these nodes come back with their containers still running.
    pub restore_machines: BTreeMap<String, Machine>,
    /// Client-side rate limits of the components' API clients.
    pub client_rates: ClientRates,
}

/// Each component's client-side rate limit (client-go's token bucket): the controller manager's
/// `--kube-api-qps` / `--kube-api-burst` (every controller's client and the shared informers'
/// each have their own bucket, as each controller's clientset does upstream), the scheduler's
/// `clientConnection`, and the kubelet's `kubeAPIQPS` / `kubeAPIBurst` and `eventRecordQPS` /
/// `eventBurst` (its heartbeat client is never limited).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientRates {
    pub controller_manager: Rate,
    pub scheduler: Rate,
    pub kubelet: Rate,
    pub kubelet_events: Rate,
}

impl Default for ClientRates {
    fn default() -> Self {
        ClientRates {
            controller_manager: Rate::CONTROLLER_MANAGER,
            scheduler: Rate::SCHEDULER,
            kubelet: Rate::KUBELET,
            kubelet_events: Rate::KUBELET_EVENTS,
        }
    }
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
    /// `klab node add` of a name the cluster already has.
    #[error("node {0:?} is already a klab node")]
    NodeExists(String),
    /// An API call the cluster made on the administrator's behalf failed.
    #[error("{0}")]
    Request(String),
    /// `klab volume fail|heal` of a name that is neither a volume nor a bound claim.
    #[error("no PersistentVolume or bound PersistentVolumeClaim named {0:?}")]
    UnknownVolume(String),
    /// `klab component stop|start|restart` of a name that is no component.
    #[error("{0}")]
    UnknownComponent(String),
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
    /// The simulated nodes, by name. Machines join and leave a running cluster (`add_node`,
    /// `remove_node`), hence the outer lock. `SimNode::apply` is synchronous, so plain mutexes
    /// are enough and neither is ever held across an await.
    nodes: Mutex<BTreeMap<String, Arc<Mutex<SimNode>>>>,
    /// The network from the API server to the kubelets; every machine built joins it (a removed
    /// machine stays on it, powered off: its address answers nothing).
    net: Arc<SimNetwork>,
    /// How many machines were ever built: a machine's address comes from it, so a machine added
    /// after one was removed never reuses that one's node IP or pod CIDR.
    machines_built: AtomicUsize,
    controller_metrics: ControllerMetrics,
    /// metrics-server's in-memory storage, which `metrics.k8s.io` serves.
    metrics_store: MetricsStore,
    /// Every component's path to the API server: the API server's stop/start and brownouts.
    plane: control::ControlPlane,
    /// Each machine's clock offset (`clock-skew`), by node name.
    skews: Mutex<BTreeMap<String, klab_api::clock::ClockSkew>>,
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
        let plane = control::ControlPlane::new(clock.clone(), &rng);
        let client_api = api.clone();
        let (cm_rate, cm_clock, cm_plane) = (
            config.client_rates.controller_manager,
            clock.clone(),
            plane.clone(),
        );
        let (mut tasks, controller_metrics) = klab_controllers::manager::start(
            move |sa| {
                let router = cm_plane.gate(
                    client_api.router_as(service_account(sa)),
                    format!("{}/{sa}", control::CONTROLLER_MANAGER),
                );
                kube::Client::new(
                    Throttled::new(router, cm_rate, cm_clock.clone(), sa),
                    "default",
                )
            },
            clock.clone(),
            rng.clone(),
            config.controllers.clone(),
            api.health().clone(),
        );
        // One process: the controllers' metric families are served on the API server's
        // `/metrics` (there is no kube-controller-manager port to scrape).
        let m = controller_metrics.clone();
        api.add_metrics_source(move || {
            let mut s = m.node_lifecycle.render();
            s.push_str(&m.taint_eviction.render());
            s.push_str(&m.workqueue.render());
            s
        });
        // kube-scheduler's two clientsets, each with its own rate limiter at the same rate: one
        // for everything else, one for events.
        let scheduler_client_with_bucket = || {
            kube::Client::new(
                Throttled::new(
                    plane.gate(
                        api.router_as(Identity::component("kube-scheduler")),
                        control::SCHEDULER,
                    ),
                    config.client_rates.scheduler,
                    clock.clone(),
                    "kube-scheduler",
                ),
                "default",
            )
        };
        let scheduler_client = scheduler_client_with_bucket();
        let scheduler_event_client = scheduler_client_with_bucket();
        let (sclock, srng, scfg) = (clock.clone(), rng.clone(), config.scheduler.clone());
        tasks.push(tokio::spawn(supervise(
            api.health().clone(),
            "kube-scheduler",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                let run = klab_scheduler::run(
                    scheduler_client.clone(),
                    scheduler_event_client.clone(),
                    sclock.clone(),
                    srng.clone(),
                    scfg.clone(),
                );
                async move { run.await.map_err(|e| e.to_string()) }
            },
        )));
        // The network to the kubelets: the API server's proxy and metrics-server dial through it.
        let net = Arc::new(SimNetwork::default());
        // metrics-server: its own component and identity for its node watch, scraping the
        // kubelets directly; the API server serves its storage as `metrics.k8s.io`.
        let metrics_store = MetricsStore::default();
        api.set_metrics_reader(Arc::new(metrics_store.clone()));
        let metrics_client = kube::Client::new(
            plane.gate(
                api.router_as(service_account(METRICS_SERVER_ACCOUNT)),
                "metrics-server",
            ),
            "default",
        );
        let (mnet, mclock, mrng, mcfg, mstore, mhealth) = (
            net.clone() as Arc<dyn KubeletNetwork>,
            clock.clone(),
            // Its scrapes' staggers shift no other component's draws.
            rng.side_stream(METRICS_SERVER_STREAM),
            config.metrics_server.clone(),
            metrics_store.clone(),
            api.health().clone(),
        );
        tasks.push(tokio::spawn(supervise(
            api.health().clone(),
            "metrics-server",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                klab_controllers::metrics_server::run(
                    metrics_client.clone(),
                    mnet.clone(),
                    mclock.clone(),
                    mrng.clone(),
                    mcfg.clone(),
                    mstore.clone(),
                    mhealth.clone(),
                )
            },
        )));
        let cluster = Cluster {
            api,
            clock,
            rng,
            config,
            nodes: Mutex::new(BTreeMap::new()),
            net,
            machines_built: AtomicUsize::new(0),
            controller_metrics,
            metrics_store,
            plane,
            skews: Mutex::new(BTreeMap::new()),
            tasks,
        };
        for spec in cluster.config.nodes.clone() {
            let node = cluster.build_node(&spec)?;
            cluster.nodes().insert(spec.name.clone(), node);
        }
        cluster.api.set_kubelet_network(cluster.net.clone());
        Ok(cluster)
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Mutex<SimNode>>>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn node(&self, name: &str) -> Result<Arc<Mutex<SimNode>>, ClusterError> {
        self.nodes()
            .get(name)
            .cloned()
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))
    }

    /// A machine added to the running cluster (`klab node add`): it boots and its kubelet
    /// registers a new Node, as a new VM of a cloud node group would.
    pub fn add_node(&self, spec: &NodeSpec) -> Result<SimNodeState, ClusterError> {
        let errs = klab_api::selector::is_dns1123_subdomain(&spec.name);
        if !errs.is_empty() {
            return Err(ClusterError::InvalidNode {
                node: spec.name.clone(),
                reason: errs.join("; "),
            });
        }
        // Checked and inserted under one lock: two adds of one name cannot both succeed.
        let mut nodes = self.nodes();
        if nodes.contains_key(&spec.name) {
            return Err(ClusterError::NodeExists(spec.name.clone()));
        }
        let node = self.build_node(spec)?;
        let state = node.lock().unwrap_or_else(|p| p.into_inner()).state();
        nodes.insert(spec.name.clone(), node);
        Ok(state)
    }

    /// A machine taken out of the cluster for good (`klab node remove`): it powers off and its
    /// Node object is deleted with upstream's `DeletingNode` event, which is what a cloud
    /// provider's node-lifecycle controller does once the instance is gone. Upstream's
    /// controller only looks at nodes that are no longer Ready (so it acts some 40–55 s after the
    /// power-off); klab deletes at once, since the machine is known to be gone.
    pub async fn remove_node(&self, name: &str) -> Result<(), ClusterError> {
        let cell = self
            .nodes()
            .remove(name)
            .ok_or_else(|| ClusterError::UnknownNode(name.to_string()))?;
        {
            let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
            if n.state().powered {
                n.apply(NodeFault::PowerOff);
            }
        }
        drop(cell);
        let client = self.client(service_account("cloud-node-lifecycle-controller"));
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
        if let Ok(Some(node)) = nodes.get_opt(name).await {
            // Upstream's reference carries kind, name and UID only.
            let regarding = k8s_openapi::api::core::v1::ObjectReference {
                kind: Some("Node".into()),
                name: Some(name.to_string()),
                uid: node.metadata.uid.clone(),
                ..Default::default()
            };
            klab_controllers::events::EventRecorder::new(
                client,
                self.clock.clone(),
                self.rng.clone(),
                "cloud-node-lifecycle-controller",
            )
            .record(
                &regarding,
                "Normal",
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
        }
        match nodes.delete(name, &Default::default()).await {
            Ok(_) => Ok(()),
            // Already deleted (by an admin, say): the machine is gone all the same.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(ClusterError::Request(e.to_string())),
        }
    }

    /// Restarts a node's kubelet (`klab node rejoin`): the new kubelet process registers at
    /// start-up, so a Node object deleted meanwhile comes back with a new UID and the kubelet's
    /// own labels, taints and status, and containers of pods that no longer exist are killed.
    pub fn rejoin_node(&self, name: &str) -> Result<SimNodeState, ClusterError> {
        let cell = self.node(name)?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        let state = n.state();
        if !state.powered {
            return Err(ClusterError::Transition(format!(
                "node {name} is powered off (use power-on)"
            )));
        }
        if state.frozen {
            return Err(ClusterError::Transition(format!(
                "node {name} is frozen (use thaw)"
            )));
        }
        if state.kubelet_running {
            n.apply(NodeFault::StopKubelet);
        }
        n.apply(NodeFault::StartKubelet);
        Ok(n.state())
    }

    /// Builds one simulated node (machine + kubelet) and starts its kubelet; the caller files it.
    fn build_node(&self, spec: &NodeSpec) -> Result<Arc<Mutex<SimNode>>, ClusterError> {
        let index = self.machines_built.fetch_add(1, Ordering::Relaxed);
        let invalid = |reason: String| ClusterError::InvalidNode {
            node: spec.name.clone(),
            reason,
        };
        let mut node_spec = klab_kubelet::config::NodeSpecConfig {
            labels: spec.labels.clone(),
            zone: spec.zone.clone(),
            node_ip: node_ip(index),
            ..Default::default()
        };
        node_spec.cpu_millis = klab_kubelet::quantity::cpu_millis(&spec.cpu)
            .ok_or_else(|| invalid(format!("bad cpu quantity {:?}", spec.cpu)))?;
        node_spec.memory_bytes = klab_kubelet::quantity::bytes(&spec.memory)
            .ok_or_else(|| invalid(format!("bad memory quantity {:?}", spec.memory)))?;
        let mut kubelet = self.config.kubelet.clone();
        kubelet.max_pods = i64::from(spec.pods);
        let kubelet = node_kubelet_config(&kubelet, &spec.kubelet).map_err(invalid)?;
        let api = self.api.clone();
        let plane = self.plane.clone();
        let identity = Identity::node(&spec.name);
        let rates = self.config.client_rates;
        let (clock, name) = (self.clock.clone(), format!("kubelet/{}", spec.name));
        // The machine reads its own clock: true time until a `clock-skew` fault offsets it.
        let (machine_clock, skew) = self.clock.skewed();
        self.skews
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(spec.name.clone(), skew);
        let mut node = SimNode::new(
            &spec.name,
            node_spec,
            kubelet,
            self.config.runtime.clone(),
            machine_clock,
            self.rng.clone(),
            // A fresh bucket for every client of every kubelet start, as a new process has;
            // all three are the one process to a brownout.
            move |kind| {
                let rate = match kind {
                    ClientKind::Main => rates.kubelet,
                    ClientKind::Events => rates.kubelet_events,
                    ClientKind::Heartbeat => Rate::UNLIMITED,
                };
                Throttled::new(
                    plane.gate(api.router_as(identity.clone()), name.clone()),
                    rate,
                    clock.clone(),
                    &name,
                )
            },
        );
        node.set_health(self.api.health().clone());
        if let Some(m) = self.config.restore_machines.get(&spec.name) {
            node.restore_machine(m.clone());
        }
        node.start();
        self.net
            .endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node.node_ip().to_string(), node.endpoint());
        Ok(Arc::new(Mutex::new(node)))
    }

    /// The supervision registry: every component's failures and restarts.
    pub fn health(&self) -> &Health {
        self.api.health()
    }

    /// Stops, starts or restarts a control-plane component (`klab component stop|start|restart`,
    /// a scenario's `component-stop`): the API server, the controller manager, one controller or
    /// the scheduler (names as [`control::resolve_component`]). Returns the component's name.
    pub fn control_component(&self, name: &str, op: ComponentOp) -> Result<String, ClusterError> {
        let target = control::resolve_component(name).map_err(ClusterError::UnknownComponent)?;
        let names = match &target {
            control::ComponentTarget::ApiServer => {
                self.plane
                    .api_server(op)
                    .map_err(ClusterError::Transition)?;
                return Ok(target.display().to_string());
            }
            control::ComponentTarget::ControllerManager => self
                .health()
                .components()
                .into_keys()
                .filter(|n| control::in_controller_manager(n))
                .collect::<Vec<_>>(),
            control::ComponentTarget::Named(n) => vec![n.clone()],
        };
        // The whole controller manager stops as one process: refused if any part is already
        // in the asked state (a part stopped alone must be started alone first).
        self.health().control(&names, op).map_err(|e| {
            if e.starts_with("no supervised component") {
                ClusterError::UnknownComponent(format!(
                    "component {} is not running in this cluster",
                    target.display()
                ))
            } else {
                ClusterError::Transition(e)
            }
        })?;
        Ok(target.display().to_string())
    }

    /// Ends every component (the controller manager with its shared informers, the scheduler,
    /// metrics-server, the kubelets) and leaves the API server serving. The end of a `klab sim`
    /// run does this before it reads the final state: the components' caches are dropped, at
    /// the runtime's next turn, before the read builds its own.
    pub fn stop_all_components(&self) {
        // The supervisors own what a restart would start from (the shared informers' stores
        // among it): aborting them drops that too. Kubelets belong to their nodes, which stay.
        for t in &self.tasks {
            t.abort();
        }
        let health = self.health();
        for name in health.components().into_keys() {
            if !health.is_stopped(&name) {
                // A component that cannot be stopped now (already stopping) is left as it is.
                let _ = health.control(std::slice::from_ref(&name), ComponentOp::Stop);
            }
        }
    }

    /// Starts (`Some`) or ends (`None`) a brownout of one component's API requests: `kubelet/NODE`,
    /// `kube-scheduler`, `kube-controller-manager` (every controller) or `metrics-server`.
    pub fn brownout(
        &self,
        component: &str,
        brownout: Option<control::Brownout>,
    ) -> Result<(), ClusterError> {
        let who = brownout_target(component, &self.node_names())?;
        self.plane
            .set_brownout(&who, brownout)
            .map_err(|reason| ClusterError::InvalidFlag {
                flag: "brownout".into(),
                value: component.into(),
                reason,
            })
    }

    /// Offsets a node's machine clock (`klab node clock-skew NODE --offset D`, a scenario's
    /// `clock-skew`): its kubelet writes its Lease renewTime, condition heartbeats and container
    /// times in the skewed timeline; the control plane keeps the true time.
    pub fn set_clock_skew(
        &self,
        node: &str,
        offset: jiff::SignedDuration,
    ) -> Result<(), ClusterError> {
        let skews = self.skews.lock().unwrap_or_else(|p| p.into_inner());
        let skew = skews
            .get(node)
            .ok_or_else(|| ClusterError::UnknownNode(node.to_string()))?;
        skew.set(offset)
            .map_err(|reason| ClusterError::InvalidFlag {
                flag: "offset".into(),
                value: format!("{}s", offset.as_secs()),
                reason,
            })
    }

    /// The API path's state (the API server stopped, brownouts).
    pub fn plane_state(&self) -> control::PlaneState {
        self.plane.state()
    }

    /// The API path's state as it changes: `klab up` closes its listener while the API server
    /// is stopped and ends every open connection when it stops or restarts.
    pub fn watch_plane(&self) -> tokio::sync::watch::Receiver<control::PlaneState> {
        self.plane.subscribe()
    }

    /// Metrics of the controller manager's controllers.
    pub fn controller_metrics(&self) -> &ControllerMetrics {
        &self.controller_metrics
    }

    /// metrics-server's storage (what `kubectl top` reads).
    pub fn metrics_store(&self) -> &MetricsStore {
        &self.metrics_store
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

    /// The administrator's client through the API path's gate, as a kubectl user reaches the
    /// API server: refused (`connection refused`) while `kube-apiserver` is stopped, its open
    /// watches ended when it stops. A scenario's kubectl steps use it; the observer that records
    /// the trace uses [`Cluster::admin_client`], which sees the store whatever the API server's
    /// state.
    pub fn kubectl_client(&self) -> kube::Client {
        kube::Client::new(
            self.plane
                .gate(self.api.router_as(Identity::admin()), "kubectl"),
            "default",
        )
    }

    /// Applies a fault to one node's agent and machine, refusing transitions that make no sense
    /// (starting a running kubelet, powering on a running machine, …).
    pub async fn apply_fault(
        &self,
        node: &str,
        fault: NodeFault,
    ) -> Result<SimNodeState, ClusterError> {
        let cell = self.node(node)?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        check_transition(&n.state(), fault).map_err(ClusterError::Transition)?;
        n.apply(fault);
        Ok(n.state())
    }

    /// `klab volume fail|heal NAME`: makes the simulated CSI backend of one volume unavailable
    /// (attach and detach fail with an error in the VolumeAttachment's status, retried) or
    /// available again. `name` is a PersistentVolume, or a claim as `[namespace/]claim` (its
    /// bound volume). Returns the volume's name.
    pub async fn volume_fault(&self, name: &str, fail: bool) -> Result<String, ClusterError> {
        use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
        let client = self.admin_client();
        let req = |e: kube::Error| ClusterError::Request(e.to_string());
        let pvs: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
        let pv = if pvs.get_opt(name).await.map_err(req)?.is_some() {
            name.to_string()
        } else {
            let (ns, claim) = name.split_once('/').unwrap_or(("default", name));
            let pvcs: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client, ns);
            let bound = pvcs
                .get_opt(claim)
                .await
                .map_err(req)?
                .and_then(|c| c.spec.and_then(|s| s.volume_name))
                .filter(|v| !v.is_empty());
            match bound {
                Some(v) => v,
                None => return Err(ClusterError::UnknownVolume(name.to_string())),
            }
        };
        let backend = &self.config.controllers.csi_backend;
        if fail {
            backend.fail(&pv);
        } else {
            backend.heal(&pv);
        }
        Ok(pv)
    }

    /// A node-pressure fault (`memory-pressure`, `disk-pressure`, `pid-pressure` with the
    /// signal's available amount as a quantity, or `relieve`): what the node's eviction signals
    /// observe from now on. Bad input changes nothing: an unknown node, a machine that is off, a
    /// missing or malformed quantity.
    pub fn apply_pressure(
        &self,
        node: &str,
        fault: &str,
        available: Option<&str>,
    ) -> Result<SimNodeState, ClusterError> {
        let invalid = |value: &str, reason: String| ClusterError::InvalidFlag {
            flag: "available".into(),
            value: value.into(),
            reason,
        };
        let cell = self.node(node)?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        if !n.state().powered {
            return Err(ClusterError::Transition(format!(
                "node {node} is powered off"
            )));
        }
        let change: Vec<(&str, Option<u64>)> = if fault == "relieve" {
            PRESSURE_FAULTS.iter().map(|(_, s)| (*s, None)).collect()
        } else {
            let signal = pressure_signal(fault)
                .ok_or_else(|| invalid(fault, "not a pressure fault".into()))?;
            let value = available.ok_or_else(|| invalid("", "a quantity is required".into()))?;
            let amount = parse_available(value).ok_or_else(|| {
                invalid(
                    value,
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                        .into(),
                )
            })?;
            vec![(signal, Some(amount))]
        };
        for (signal, amount) in change {
            n.set_available(signal, amount)
                .map_err(|e| invalid(available.unwrap_or_default(), e))?;
        }
        Ok(n.state())
    }

    /// A `node-condition` fault: the node's kubelet reports condition `type_` with the given
    /// status, reason and message from its next status computation on (`None` clears it). The
    /// status must be `True`, `False` or `Unknown`; bad input changes nothing.
    pub fn set_node_condition(
        &self,
        node: &str,
        type_: &str,
        report: Option<ConditionOverride>,
    ) -> Result<SimNodeState, ClusterError> {
        if let Some(r) = &report
            && !["True", "False", "Unknown"].contains(&r.status.as_str())
        {
            return Err(ClusterError::InvalidFlag {
                flag: "condition".into(),
                value: format!("{type_}={}", r.status),
                reason: "the status must be True, False or Unknown".into(),
            });
        }
        if let Err(e) = check_condition_type(type_) {
            return Err(ClusterError::InvalidFlag {
                flag: "condition".into(),
                value: type_.into(),
                reason: e,
            });
        }
        let cell = self.node(node)?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        n.set_condition(type_, report);
        Ok(n.state())
    }

    /// `reboot` into changed hardware or `--node-labels`: the machine powers off, comes back
    /// with the new capacity (`cpu`, `memory` quantities) and labels, and its kubelet
    /// re-registers (`SimNode::reboot_with`). Bad quantities or labels change nothing.
    pub async fn reboot_node_with(
        &self,
        node: &str,
        cpu: Option<&str>,
        memory: Option<&str>,
        labels: Option<BTreeMap<String, String>>,
    ) -> Result<SimNodeState, ClusterError> {
        let invalid = |reason: String| ClusterError::InvalidNode {
            node: node.to_string(),
            reason,
        };
        let cpu_millis = cpu
            .map(|c| {
                klab_kubelet::quantity::cpu_millis(c)
                    .ok_or_else(|| invalid(format!("bad cpu quantity {c:?}")))
            })
            .transpose()?;
        let memory_bytes = memory
            .map(|m| {
                klab_kubelet::quantity::bytes(m)
                    .ok_or_else(|| invalid(format!("bad memory quantity {m:?}")))
            })
            .transpose()?;
        for (k, v) in labels.iter().flatten() {
            let mut errs = klab_api::selector::is_qualified_name(k);
            errs.extend(klab_api::selector::is_valid_label_value(v));
            if !errs.is_empty() {
                return Err(invalid(format!(
                    "invalid label {k}={v}: {}",
                    errs.join("; ")
                )));
            }
        }
        let cell = self.node(node)?;
        let mut n = cell.lock().unwrap_or_else(|p| p.into_inner());
        check_transition(&n.state(), NodeFault::Reboot).map_err(ClusterError::Transition)?;
        n.reboot_with(cpu_millis, memory_bytes, labels);
        Ok(n.state())
    }

    /// `image-pull-fail` / `image-pull-heal`: pulls of `image` fail (with `error`, or
    /// containerd's not-found answer) on one node, or on every node of the cluster when `node`
    /// is `None`; `fail: false` heals. Returns the nodes changed.
    pub fn image_pull_fault(
        &self,
        node: Option<&str>,
        image: &str,
        fail: bool,
        error: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        if image.trim().is_empty() {
            return Err(ClusterError::InvalidFlag {
                flag: "image".into(),
                value: image.into(),
                reason: "an image is required".into(),
            });
        }
        let names = match node {
            Some(n) => {
                self.node(n)?;
                vec![n.to_string()]
            }
            None => self.node_names(),
        };
        let error = fail.then(|| {
            error
                .map(str::to_string)
                .unwrap_or_else(|| klab_kubelet::images::default_pull_error(image))
        });
        for n in &names {
            let cell = self.node(n)?;
            let mut sim = cell.lock().unwrap_or_else(|p| p.into_inner());
            sim.set_pull_failure(image, error.clone());
        }
        Ok(names)
    }

    /// Copies of every node's machine, by node name (what a control-plane restart keeps).
    pub fn machines(&self) -> BTreeMap<String, Machine> {
        self.nodes()
            .iter()
            .map(|(name, n)| {
                let n = n.lock().unwrap_or_else(|p| p.into_inner());
                (name.clone(), n.machine_snapshot())
            })
            .collect()
    }

    /// The simulated state of one node.
    pub fn node_state(&self, node: &str) -> Result<SimNodeState, ClusterError> {
        let cell = self.node(node)?;
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
            "shutdownGracePeriod" | "shutdownGracePeriodCriticalPods" => {
                let mut shutdown = config.kubelet.shutdown.clone();
                if name == "shutdownGracePeriod" {
                    shutdown.grace_period = dur(value)?;
                } else {
                    shutdown.grace_period_critical_pods = dur(value)?;
                }
                shutdown.validate().map_err(invalid)?;
                config.kubelet.shutdown = shutdown;
            }
            "shutdownGracePeriodByPodPriority" => {
                let mut shutdown = config.kubelet.shutdown.clone();
                shutdown.by_pod_priority =
                    klab_kubelet::shutdown::parse_by_pod_priority(value).map_err(invalid)?;
                shutdown.validate().map_err(invalid)?;
                config.kubelet.shutdown = shutdown;
            }
            "eviction-hard"
            | "eviction-soft"
            | "eviction-soft-grace-period"
            | "eviction-minimum-reclaim"
            | "eviction-pressure-transition-period"
            | "eviction-max-pod-grace-period" => {
                use klab_kubelet::eviction::parse_flag_map;
                let mut e = config.kubelet.eviction.clone();
                match name {
                    "eviction-hard" => e.hard = parse_flag_map(value, '<').map_err(invalid)?,
                    "eviction-soft" => e.soft = parse_flag_map(value, '<').map_err(invalid)?,
                    "eviction-soft-grace-period" => {
                        e.soft_grace_period = parse_flag_map(value, '=').map_err(invalid)?
                    }
                    "eviction-minimum-reclaim" => {
                        e.minimum_reclaim = parse_flag_map(value, '=').map_err(invalid)?
                    }
                    "eviction-pressure-transition-period" => {
                        e.pressure_transition_period = dur(value)?
                    }
                    _ => e.max_pod_grace_period = int(value)?,
                }
                // A soft threshold is checked against its grace period once both are set (the
                // grace-period flag sorts first in a scenario's flags).
                match e.thresholds() {
                    Err(m) if m.starts_with("grace period must be specified") => {}
                    other => {
                        other.map_err(invalid)?;
                    }
                }
                config.kubelet.eviction = e;
            }
            "kube-api-qps"
            | "kube-api-burst"
            | "kubeAPIQPS"
            | "kubeAPIBurst"
            | "event-qps"
            | "event-burst"
            | "eventRecordQPS"
            | "eventBurst"
            | "clientConnection.qps"
            | "clientConnection.burst" => {
                let rates = &mut config.client_rates;
                let rate = if name.starts_with("kube-api") {
                    &mut rates.controller_manager
                } else if name.starts_with("clientConnection") {
                    // kube-scheduler's configuration (`KubeSchedulerConfiguration.clientConnection`):
                    // both of its clients, as upstream builds them from the one setting.
                    &mut rates.scheduler
                } else if name.starts_with("event") {
                    &mut rates.kubelet_events
                } else {
                    &mut rates.kubelet
                };
                let mut new = *rate;
                if name.ends_with("qps") || name.ends_with("QPS") {
                    new.qps = value.parse::<f32>().map_err(|e| invalid(e.to_string()))?;
                } else {
                    new.burst = value.parse::<u32>().map_err(|e| invalid(e.to_string()))?;
                }
                new.validate().map_err(invalid)?;
                *rate = new;
            }
            "imageGCHighThresholdPercent"
            | "image-gc-high-threshold"
            | "imageGCLowThresholdPercent"
            | "image-gc-low-threshold"
            | "imageMinimumGCAge"
            | "minimum-image-ttl-duration" => {
                let mut gc = config.kubelet.image_gc;
                let percent = |v: &str| i32::try_from(int(v)?).map_err(|e| invalid(e.to_string()));
                match name {
                    "imageGCHighThresholdPercent" | "image-gc-high-threshold" => {
                        gc.high_threshold_percent = percent(value)?
                    }
                    "imageGCLowThresholdPercent" | "image-gc-low-threshold" => {
                        gc.low_threshold_percent = percent(value)?
                    }
                    _ => {
                        if value.trim_start().starts_with('-') {
                            return Err(invalid(format!(
                                "invalid configuration: imageMinimumGCAge {value} must not be negative"
                            )));
                        }
                        gc.minimum_gc_age = dur(value)?
                    }
                }
                // The two thresholds are checked against each other once every flag is set
                // (`validate_config`): one may be given before the other.
                if let Err(e) = gc.validate()
                    && !e.ends_with(&format!(
                        "must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {}",
                        gc.high_threshold_percent
                    ))
                {
                    return Err(invalid(e));
                }
                config.kubelet.image_gc = gc;
            }
            "containerLogMaxSize" | "container-log-max-size" => {
                config.kubelet.container_log.max_size =
                    klab_kubelet::usage::LogRotation::parse_max_size(value).map_err(invalid)?
            }
            "containerLogMaxFiles" | "container-log-max-files" => {
                config.kubelet.container_log.max_files =
                    klab_kubelet::usage::LogRotation::parse_max_files(value).map_err(invalid)?
            }
            "nodeStatusMaxImages" | "node-status-max-images" => {
                config.kubelet.node_status_max_images =
                    i32::try_from(int(value)?).map_err(|e| invalid(e.to_string()))?
            }
            "metric-resolution" => {
                let d = dur(value)?;
                // metrics-server's own validation (`--metric-resolution` below 10s is refused).
                if d < std::time::Duration::from_secs(10) {
                    return Err(invalid(format!(
                        "metric-resolution should be a time duration at least 10s, but value {value} provided"
                    )));
                }
                config.metrics_server.metric_resolution = d;
            }
            // The API server's `--authorization-mode` (AlwaysAllow, RBAC, Node,RBAC).
            "authorization-mode" => {
                config.apiserver.authorization_mode =
                    klab_apiserver::authz::AuthorizationMode::parse(value).map_err(invalid)?
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

    /// Checks what single flags cannot: a soft eviction threshold against its grace period, the
    /// image GC thresholds against each other.
    pub fn validate_config(config: &ClusterConfig) -> Result<(), ClusterError> {
        let e = &config.kubelet.eviction;
        if let Err(reason) = e.thresholds() {
            // Only a soft threshold without its grace period gets this far (every other
            // refusal is reported by the flag that causes it).
            let value = e
                .soft
                .iter()
                .map(|(k, v)| format!("{k}<{v}"))
                .collect::<Vec<_>>()
                .join(",");
            return Err(ClusterError::InvalidFlag {
                flag: "eviction-soft".into(),
                value,
                reason,
            });
        }
        let gc = config.kubelet.image_gc;
        gc.validate().map_err(|reason| ClusterError::InvalidFlag {
            flag: "image-gc-low-threshold".into(),
            value: gc.low_threshold_percent.to_string(),
            reason,
        })
    }

    /// The kubelet port of a node, as the API server dials it (tests look at its open streams).
    pub fn kubelet_endpoint(&self, node: &str) -> Option<KubeletEndpoint> {
        let n = self.nodes().get(node)?.clone();
        let n = n.lock().unwrap_or_else(|p| p.into_inner());
        Some(n.endpoint())
    }

    /// Names of the cluster's nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes().keys().cloned().collect()
    }
}

/// The network between the control plane (the API server, metrics-server) and the kubelets:
/// each node's address leads to its kubelet's port, and the node's faults decide what a dial
/// meets (see `klab_kubelet::server::Dial`).
#[derive(Default)]
struct SimNetwork {
    /// Kubelet endpoints by node address.
    endpoints: Mutex<BTreeMap<String, KubeletEndpoint>>,
}

impl KubeletNetwork for SimNetwork {
    fn dial(&self, host: &str, port: u16) -> DialFuture {
        let endpoint = self
            .endpoints
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
            .cloned();
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

/// The client a brownout acts on: `kubelet/NODE` of a known node, the controller manager, the
/// scheduler or metrics-server.
pub fn brownout_target(component: &str, nodes: &[String]) -> Result<String, ClusterError> {
    if let Some(node) = component.strip_prefix("kubelet/") {
        return if nodes.iter().any(|n| n == node) {
            Ok(component.to_string())
        } else {
            Err(ClusterError::UnknownNode(node.to_string()))
        };
    }
    match control::resolve_component(component).map_err(ClusterError::UnknownComponent)? {
        control::ComponentTarget::ControllerManager => Ok(control::CONTROLLER_MANAGER.into()),
        control::ComponentTarget::Named(n) if n == control::SCHEDULER || n == "metrics-server" => {
            Ok(n)
        }
        _ => Err(ClusterError::UnknownComponent(format!(
            "a brownout acts on a client: kubelet/NODE, {}, {} or metrics-server, not {component:?}",
            control::CONTROLLER_MANAGER,
            control::SCHEDULER
        ))),
    }
}

/// The address of the `index`th machine built: 10.0.0.10 onwards, carrying into the third octet
/// (a cluster that keeps adding machines never gets an invalid address).
fn node_ip(index: usize) -> String {
    let host = index.saturating_add(10);
    format!("10.0.{}.{}", (host / 256) % 256, host % 256)
}

/// The random sequence of metrics-server's scrape staggers (a side stream of the cluster's).
const METRICS_SERVER_STREAM: u64 = 0x6d_65_74_72;

/// metrics-server's service account (kube-system), bound to `system:metrics-server`.
pub const METRICS_SERVER_ACCOUNT: &str = "metrics-server";

/// The identity upstream gives a controller: its service account in kube-system. The shared
/// informers list and watch as kube-controller-manager itself (`system:kube-controller-manager`,
/// whose role may list and watch everything), as upstream's SharedInformerFactory does.
fn service_account(name: &str) -> Identity {
    if name == "shared-informers" {
        return Identity::component("kube-controller-manager");
    }
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
        | NodeFault::Shutdown
        | NodeFault::ShutdownCancel
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
        NodeFault::Shutdown if state.shutting_down => {
            err(format!("node {n} is already shutting down"))
        }
        NodeFault::ShutdownCancel if !state.shutting_down => {
            err(format!("node {n} is not shutting down"))
        }
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
        "shutdown" => NodeFault::Shutdown,
        "shutdown-cancel" => NodeFault::ShutdownCancel,
        "runtime-down" => NodeFault::RuntimeDown,
        "runtime-up" => NodeFault::RuntimeUp,
        "fail-lease-updates" => NodeFault::FailLeaseUpdates,
        "heal-lease-updates" => NodeFault::HealLeaseUpdates,
        "fail-status-updates" => NodeFault::FailStatusUpdates,
        "heal-status-updates" => NodeFault::HealStatusUpdates,
        _ => return None,
    })
}

/// The node-pressure faults and the eviction signal each one drives (`relieve` clears them).
pub const PRESSURE_FAULTS: [(&str, &str); 3] = [
    ("memory-pressure", "memory.available"),
    ("disk-pressure", "nodefs.available"),
    ("pid-pressure", "pid.available"),
];

/// A node condition type as the kubelet may report one: a CamelCase word (`Ready`,
/// `NetworkUnavailable`, `KernelDeadlock`), at most 316 characters as a qualified name.
pub fn check_condition_type(t: &str) -> Result<(), String> {
    let mut chars = t.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return Err("a condition type starts with a letter".into()),
    }
    if t.len() > 316 || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err("a condition type is letters and digits (at most 316)".into());
    }
    Ok(())
}

/// The KubeletConfiguration fields one node may set for itself, by their upstream names.
pub const NODE_KUBELET_FIELDS: &[&str] = &[
    "registerNode",
    "registerWithTaints",
    "kubeReserved",
    "systemReserved",
    "enableControllerAttachDetach",
    "nodeLeaseDurationSeconds",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "maxPods",
    "podsPerCore",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "imageMinimumGCAge",
    "nodeStatusMaxImages",
];

/// One node's kubelet configuration: the cluster's with this node's fields applied in order.
/// Values are text: booleans `true`/`false`, durations `40s`, numbers, taint lists
/// `key[=value]:Effect,…`, resource lists `cpu=100m,memory=1Gi` (`kubeReserved`,
/// `systemReserved`: their sum is what allocatable subtracts), threshold maps in the flag syntax
/// `memory.available<200Mi,nodefs.available<10%` (`evictionHard`: a `memory.available` in bytes
/// and a `nodefs.available` percentage are also what allocatable subtracts, as upstream).
pub fn node_kubelet_config(
    base: &KubeletConfig,
    fields: &[(String, String)],
) -> Result<KubeletConfig, String> {
    let mut cfg = ClusterConfig {
        kubelet: base.clone(),
        ..Default::default()
    };
    let mut reserved: Option<(u64, u64)> = None;
    let mut kube_reserved = (0u64, 0u64);
    let mut system_reserved = (0u64, 0u64);
    for (name, value) in fields {
        let bad = |reason: String| format!("kubelet {name}: {reason}");
        let boolean = || match value.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad(format!("{value:?} is not a boolean"))),
        };
        let k = &mut cfg.kubelet;
        match name.as_str() {
            "registerNode" => k.register_node = boolean()?,
            "enableControllerAttachDetach" => k.enable_controller_attach_detach = boolean()?,
            "registerWithTaints" => {
                let mut taints = Vec::new();
                for t in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                    taints.push(parse_register_taint(t).map_err(bad)?);
                }
                k.register_with_taints = taints;
            }
            "kubeReserved" | "systemReserved" => {
                let mut r = (0u64, 0u64);
                for kv in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                    let (res, q) = kv
                        .split_once('=')
                        .ok_or_else(|| bad(format!("{kv:?} is not resource=quantity")))?;
                    match res {
                        "cpu" => {
                            r.0 = klab_kubelet::quantity::cpu_millis(q)
                                .ok_or_else(|| bad(format!("bad cpu quantity {q:?}")))?
                        }
                        "memory" => {
                            r.1 = klab_kubelet::quantity::bytes(q)
                                .ok_or_else(|| bad(format!("bad memory quantity {q:?}")))?
                        }
                        // Upstream also takes ephemeral-storage and pid; klab's allocatable
                        // models cpu and memory reservations only.
                        other => {
                            return Err(bad(format!(
                                "unsupported resource {other:?} (cpu, memory)"
                            )));
                        }
                    }
                }
                if name == "kubeReserved" {
                    kube_reserved = r;
                } else {
                    system_reserved = r;
                }
                reserved = Some((
                    kube_reserved.0.saturating_add(system_reserved.0),
                    kube_reserved.1.saturating_add(system_reserved.1),
                ));
            }
            "maxPods" | "podsPerCore" => {
                let n: i64 = value.parse().map_err(|e| bad(format!("{e}")))?;
                if n < 0 {
                    return Err(bad("must not be negative".into()));
                }
                if name == "maxPods" {
                    k.max_pods = n;
                } else {
                    k.pods_per_core = n;
                }
            }
            other if NODE_KUBELET_FIELDS.contains(&other) => {
                // The fields the cluster-wide flags already take, with their validation.
                let flag = match other {
                    "evictionHard" => "eviction-hard",
                    "evictionSoft" => "eviction-soft",
                    "evictionSoftGracePeriod" => "eviction-soft-grace-period",
                    "evictionPressureTransitionPeriod" => "eviction-pressure-transition-period",
                    "evictionMaxPodGracePeriod" => "eviction-max-pod-grace-period",
                    f => f,
                };
                Cluster::set_flag(&mut cfg, flag, value).map_err(|e| bad(e.to_string()))?;
                if other == "evictionHard" {
                    let hard = &cfg.kubelet.eviction.hard;
                    if let Some(m) = hard.get("memory.available") {
                        cfg.kubelet.eviction_hard_memory_available =
                            klab_kubelet::quantity::bytes(m).unwrap_or(0);
                    }
                    if let Some(p) = hard
                        .get("nodefs.available")
                        .and_then(|p| p.strip_suffix('%'))
                        .and_then(|p| p.parse::<u8>().ok())
                    {
                        cfg.kubelet.eviction_hard_nodefs_available_percent = p.min(100);
                    }
                }
            }
            other => {
                return Err(format!(
                    "unknown kubelet field {other:?} (one of: {})",
                    NODE_KUBELET_FIELDS.join(", ")
                ));
            }
        }
    }
    if let Some((cpu, memory)) = reserved {
        cfg.kubelet.reserved_cpu_millis = cpu;
        cfg.kubelet.reserved_memory = memory;
    }
    Ok(cfg.kubelet)
}

/// A `registerWithTaints` entry, `key[=value]:Effect`.
fn parse_register_taint(t: &str) -> Result<k8s_openapi::api::core::v1::Taint, String> {
    let (kv, effect) = t
        .rsplit_once(':')
        .ok_or_else(|| format!("taint {t:?} needs an effect (key[=value]:Effect)"))?;
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(format!("invalid taint effect {effect:?}"));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (kv, None),
    };
    let errs = klab_api::selector::is_qualified_name(key);
    if !errs.is_empty() {
        return Err(format!("invalid taint key {key:?}: {}", errs.join("; ")));
    }
    Ok(k8s_openapi::api::core::v1::Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        ..Default::default()
    })
}

/// A CPU quantity (`4`, `500m`) in millicores, as a node's capacity is given.
pub fn parse_cpu(q: &str) -> Option<u64> {
    klab_kubelet::quantity::cpu_millis(q)
}

/// A pressure fault's `available` quantity (`80Mi`, `500`) as a count of bytes or units.
pub fn parse_available(q: &str) -> Option<u64> {
    klab_kubelet::quantity::bytes(q)
}

/// The eviction signal of a pressure fault (`memory-pressure` → `memory.available`).
pub fn pressure_signal(fault: &str) -> Option<&'static str> {
    PRESSURE_FAULTS
        .iter()
        .find(|(f, _)| *f == fault)
        .map(|(_, s)| *s)
}

/// The spelling `parse_fault` accepts for each fault.
pub const FAULT_NAMES: [&str; 17] = [
    "stop-kubelet",
    "start-kubelet",
    "power-off",
    "power-on",
    "reboot",
    "partition",
    "heal",
    "freeze",
    "thaw",
    "shutdown",
    "shutdown-cancel",
    "runtime-down",
    "runtime-up",
    "fail-lease-updates",
    "heal-lease-updates",
    "fail-status-updates",
    "heal-status-updates",
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
            shutting_down: false,
            boot_id: "b".into(),
            running_containers: vec![],
        }
    }

    #[test]
    fn shutdown_transitions_and_flags() {
        let mut st = state(true, true);
        assert!(check_transition(&st, NodeFault::Shutdown).is_ok());
        assert_eq!(
            check_transition(&st, NodeFault::ShutdownCancel).unwrap_err(),
            "node n1 is not shutting down"
        );
        st.shutting_down = true;
        assert_eq!(
            check_transition(&st, NodeFault::Shutdown).unwrap_err(),
            "node n1 is already shutting down"
        );
        assert!(check_transition(&st, NodeFault::ShutdownCancel).is_ok());
        assert_eq!(
            check_transition(&state(false, false), NodeFault::Shutdown).unwrap_err(),
            "node n1 is powered off"
        );
        assert_eq!(
            parse_fault("shutdown-cancel"),
            Some(NodeFault::ShutdownCancel)
        );

        let mut c = ClusterConfig::default();
        Cluster::set_flag(&mut c, "shutdownGracePeriod", "30s").unwrap();
        Cluster::set_flag(&mut c, "shutdownGracePeriodCriticalPods", "10s").unwrap();
        assert_eq!(
            c.kubelet.shutdown.period_requested(),
            Duration::from_secs(30)
        );
        // Bad values are refused with upstream's texts and change nothing.
        let err = Cluster::set_flag(&mut c, "shutdownGracePeriodCriticalPods", "40s")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid value \"40s\" for --shutdownGracePeriodCriticalPods: invalid configuration: \
             shutdownGracePeriodCriticalPods {40s} must be <= shutdownGracePeriod {30s}"
        );
        let err = Cluster::set_flag(&mut c, "shutdownGracePeriodByPodPriority", "0=10s")
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"), "{err}");
        assert!(Cluster::set_flag(&mut c, "shutdownGracePeriod", "soon").is_err());
        assert_eq!(
            c.kubelet.shutdown.grace_period_critical_pods,
            Duration::from_secs(10)
        );
        assert!(c.kubelet.shutdown.by_pod_priority.is_empty());
    }

    #[test]
    fn eviction_flags_are_validated_and_bad_ones_change_nothing() {
        let mut c = ClusterConfig::default();
        Cluster::set_flag(
            &mut c,
            "eviction-soft-grace-period",
            "memory.available=1m30s",
        )
        .unwrap();
        Cluster::set_flag(&mut c, "eviction-soft", "memory.available<500Mi").unwrap();
        Cluster::set_flag(&mut c, "eviction-max-pod-grace-period", "60").unwrap();
        let t = c.kubelet.eviction.thresholds().unwrap();
        assert_eq!(t.len(), 6, "five default hard thresholds and the soft one");
        assert_eq!(t[5].grace_period, Duration::from_secs(90));
        for (flag, value, want) in [
            (
                "eviction-hard",
                "memory.available<150%",
                "eviction percentage threshold memory.available must be <= 100%: 150%",
            ),
            (
                "eviction-hard",
                "memory.available>1Gi",
                "invalid eviction threshold syntax memory.available>1Gi, expected <signal><operator><value>",
            ),
            (
                "eviction-hard",
                "memory.free<1Gi",
                "unsupported eviction signal memory.free",
            ),
            (
                "eviction-hard",
                "memory.available<lots",
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ] {
            let err = Cluster::set_flag(&mut c, flag, value)
                .unwrap_err()
                .to_string();
            assert!(err.ends_with(want), "{err}");
        }
        assert_eq!(
            c.kubelet.eviction.thresholds().unwrap().len(),
            6,
            "unchanged"
        );
    }

    #[test]
    fn client_rate_flags_are_validated_and_bad_ones_change_nothing() {
        let mut c = ClusterConfig::default();
        assert_eq!(c.client_rates, ClientRates::default());
        Cluster::set_flag(&mut c, "kube-api-qps", "100").unwrap();
        Cluster::set_flag(&mut c, "kube-api-burst", "200").unwrap();
        Cluster::set_flag(&mut c, "kubeAPIQPS", "5").unwrap();
        Cluster::set_flag(&mut c, "kubeAPIBurst", "10").unwrap();
        Cluster::set_flag(&mut c, "event-qps", "2").unwrap();
        Cluster::set_flag(&mut c, "eventBurst", "4").unwrap();
        Cluster::set_flag(&mut c, "clientConnection.qps", "300").unwrap();
        Cluster::set_flag(&mut c, "clientConnection.burst", "600").unwrap();
        let want = ClientRates {
            controller_manager: Rate {
                qps: 100.0,
                burst: 200,
            },
            scheduler: Rate {
                qps: 300.0,
                burst: 600,
            },
            kubelet: Rate {
                qps: 5.0,
                burst: 10,
            },
            kubelet_events: Rate { qps: 2.0, burst: 4 },
        };
        assert_eq!(c.client_rates, want);
        for (flag, value, reason) in [
            ("kube-api-qps", "0", "qps must be a positive number, got 0"),
            (
                "kube-api-qps",
                "-1",
                "qps must be a positive number, got -1",
            ),
            ("kube-api-qps", "fast", "invalid float literal"),
            ("kube-api-burst", "0", "burst must be at least 1"),
            ("kubeAPIBurst", "-3", "invalid digit found in string"),
            (
                "eventRecordQPS",
                "0",
                "qps must be a positive number, got 0",
            ),
            ("event-burst", "0", "burst must be at least 1"),
            (
                "clientConnection.qps",
                "-5",
                "qps must be a positive number, got -5",
            ),
            ("clientConnection.burst", "0", "burst must be at least 1"),
        ] {
            let err = Cluster::set_flag(&mut c, flag, value)
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!("invalid value {value:?} for --{flag}: {reason}"),
                "{flag}"
            );
        }
        assert_eq!(c.client_rates, want, "unchanged");
    }

    #[test]
    fn a_soft_threshold_needs_its_grace_period_once_every_flag_is_set() {
        let mut c = ClusterConfig::default();
        // Either order is accepted flag by flag; the whole configuration is checked at the end.
        Cluster::set_flag(&mut c, "eviction-soft", "memory.available<500Mi").unwrap();
        let err = Cluster::validate_config(&c).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid value \"memory.available<500Mi\" for --eviction-soft: grace period must be specified for the soft eviction threshold memory.available"
        );
        Cluster::set_flag(
            &mut c,
            "eviction-soft-grace-period",
            "memory.available=1m30s",
        )
        .unwrap();
        Cluster::validate_config(&c).unwrap();
        assert_eq!(c.kubelet.eviction.thresholds().unwrap().len(), 6);
    }

    #[test]
    fn container_log_flags_are_validated_as_upstream() {
        let mut c = ClusterConfig::default();
        Cluster::set_flag(&mut c, "container-log-max-size", "1Mi").unwrap();
        Cluster::set_flag(&mut c, "containerLogMaxFiles", "3").unwrap();
        assert_eq!(c.kubelet.container_log.max_size, 1 << 20);
        assert_eq!(c.kubelet.container_log.max_files, 3);
        // Bad values are refused with upstream's texts and change nothing.
        let err = Cluster::set_flag(&mut c, "container-log-max-files", "1")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid configuration: containerLogMaxFiles must be greater than 1"),
            "{err}"
        );
        let err = Cluster::set_flag(&mut c, "containerLogMaxSize", "big")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("failed to parse container log max size \"big\""),
            "{err}"
        );
        assert_eq!(c.kubelet.container_log.max_size, 1 << 20);
        assert_eq!(c.kubelet.container_log.max_files, 3);
        // A negative size turns rotation off.
        Cluster::set_flag(&mut c, "container-log-max-size", "-1").unwrap();
        assert!(!c.kubelet.container_log.enabled());
    }

    #[test]
    fn image_gc_flags_are_validated_as_upstream() {
        let mut c = ClusterConfig::default();
        // Low before high, or high before low: only the final pair is checked.
        Cluster::set_flag(&mut c, "image-gc-low-threshold", "40").unwrap();
        Cluster::set_flag(&mut c, "image-gc-high-threshold", "50").unwrap();
        Cluster::validate_config(&c).unwrap();
        assert_eq!(c.kubelet.image_gc.high_threshold_percent, 50);
        Cluster::set_flag(&mut c, "imageMinimumGCAge", "5m").unwrap();
        assert_eq!(
            c.kubelet.image_gc.minimum_gc_age,
            std::time::Duration::from_secs(300)
        );
        let err = Cluster::set_flag(&mut c, "image-gc-high-threshold", "101")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"),
            "{err}"
        );
        assert_eq!(c.kubelet.image_gc.high_threshold_percent, 50);
        let err = Cluster::set_flag(&mut c, "minimum-image-ttl-duration", "-1m")
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not be negative"), "{err}");
        Cluster::set_flag(&mut c, "image-gc-low-threshold", "60").unwrap();
        let err = Cluster::validate_config(&c).unwrap_err().to_string();
        assert!(
            err.contains("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 60 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50"),
            "{err}"
        );
        Cluster::set_flag(&mut c, "nodeStatusMaxImages", "2").unwrap();
        assert_eq!(c.kubelet.node_status_max_images, 2);
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
    async fn pressure_faults_refuse_bad_input_and_change_nothing() {
        let cluster = one_node_cluster(3).await;
        let overrides = |c: &Cluster| c.machines()["n1"].available_override.clone();
        assert!(matches!(
            cluster.apply_pressure("n9", "memory-pressure", Some("80Mi")),
            Err(ClusterError::UnknownNode(_))
        ));
        assert_eq!(
            cluster
                .apply_pressure("n1", "memory-pressure", Some("lots"))
                .unwrap_err()
                .to_string(),
            "invalid value \"lots\" for --available: quantities must match the regular expression \
             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert!(cluster.apply_pressure("n1", "disk-pressure", None).is_err());
        assert!(overrides(&cluster).is_empty(), "nothing changed");
        cluster
            .apply_pressure("n1", "memory-pressure", Some("80Mi"))
            .unwrap();
        cluster
            .apply_pressure("n1", "pid-pressure", Some("500"))
            .unwrap();
        assert_eq!(
            overrides(&cluster),
            [
                ("memory.available".to_string(), 80 << 20),
                ("pid.available".to_string(), 500)
            ]
            .into()
        );
        cluster.apply_pressure("n1", "relieve", None).unwrap();
        assert!(overrides(&cluster).is_empty());
        cluster
            .apply_fault("n1", NodeFault::PowerOff)
            .await
            .unwrap();
        assert_eq!(
            cluster
                .apply_pressure("n1", "memory-pressure", Some("80Mi"))
                .unwrap_err()
                .to_string(),
            "node n1 is powered off"
        );
    }

    /// A one-node cluster with these client rates, and ten pods created 30 s after its start.
    async fn ten_pods_at_30s(
        rates: ClientRates,
    ) -> (Cluster, Api<k8s_openapi::api::core::v1::Pod>) {
        let config = ClusterConfig {
            nodes: vec![NodeSpec::new("n1")],
            client_rates: rates,
            ..Default::default()
        };
        let cluster = test_cluster(3, config).await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(cluster.admin_client(), "default");
        for i in 0..10 {
            let pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p{i}")},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}
            }))
            .unwrap();
            pods.create(&Default::default(), &pod).await.unwrap();
        }
        (cluster, pods)
    }

    /// kube-scheduler's events go through a client of their own, with its own rate limiter: at
    /// 1 request a second, ten pods are bound within ten seconds (sharing one bucket, a binding
    /// and an event per pod, it took twice as long).
    #[tokio::test(start_paused = true)]
    async fn the_schedulers_events_do_not_slow_its_bindings() {
        let (_cluster, pods) = ten_pods_at_30s(ClientRates {
            scheduler: Rate { qps: 1.0, burst: 1 },
            ..Default::default()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        let bound = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count();
        assert_eq!(bound, 10);
    }

    /// A kubelet whose main and event clients are throttled to a crawl, starting ten pods, still
    /// renews its Lease and reports its status on time: they go through its heartbeat client,
    /// which has no rate limit (upstream's `heartbeatClient`). Through one shared bucket the
    /// renewals would queue behind minutes of pod status patches and the node would go Unknown.
    #[tokio::test(start_paused = true)]
    async fn a_kubelets_pod_writes_do_not_delay_its_heartbeat() {
        let crawl = Rate { qps: 0.2, burst: 1 };
        let (cluster, pods) = ten_pods_at_30s(ClientRates {
            kubelet: crawl,
            kubelet_events: crawl,
            ..Default::default()
        })
        .await;
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(cluster.admin_client(), "kube-node-lease");
        let nodes: Api<Node> = Api::all(cluster.admin_client());
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_secs(10)).await;
            let now = cluster.clock().now();
            let lease = leases
                .get_opt("n1")
                .await
                .unwrap()
                .expect("the node's Lease");
            let renewed = lease.spec.unwrap().renew_time.unwrap().0;
            let lag = now.duration_since(renewed);
            assert!(
                lag <= jiff::SignedDuration::from_millis(10_500),
                "lease renewed {lag:?} ago"
            );
            let node = nodes.get("n1").await.unwrap();
            let ready = node.status.unwrap().conditions.unwrap();
            let ready = ready.iter().find(|c| c.type_ == "Ready").unwrap();
            assert_eq!(ready.status, "True", "{ready:?}");
        }
        // The main client really is the bottleneck: not every pod's status has been written.
        let running = pods
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        assert!(running < 10, "{running} pods running");
    }

    /// Once every component is stopped nothing writes any more (no lease renewals, no node
    /// status, no controller), while the API server still answers reads.
    #[tokio::test(start_paused = true)]
    async fn stopping_all_components_leaves_the_api_serving_reads() {
        let cluster = one_node_cluster(3).await;
        let store = cluster.api().store();
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        let before = store.current_revision();
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        assert!(
            store.current_revision() > before,
            "a running cluster writes"
        );
        cluster.stop_all_components();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let stopped = store.current_revision();
        tokio::time::sleep(std::time::Duration::from_secs(120)).await;
        assert_eq!(store.current_revision(), stopped, "nothing writes");
        let nodes: kube::Api<Node> = kube::Api::all(cluster.admin_client());
        assert_eq!(
            nodes.list(&Default::default()).await.unwrap().items.len(),
            1
        );
        assert!(cluster.health().is_stopped("kubelet/n1"));
    }

    /// The kubectl client is refused while the API server is stopped and served again once it
    /// starts, the store untouched; the trace's observer (the plain admin client) is not gated.
    /// A resized reboot with a bad label or quantity changes nothing.
    #[tokio::test(start_paused = true)]
    async fn the_kubectl_client_is_refused_while_the_api_server_is_stopped() {
        let cluster = one_node_cluster(3).await;
        let kubectl: kube::Api<Node> = kube::Api::all(cluster.kubectl_client());
        let observer: kube::Api<Node> = kube::Api::all(cluster.admin_client());
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        assert_eq!(
            kubectl.list(&Default::default()).await.unwrap().items.len(),
            1
        );
        cluster
            .control_component("kube-apiserver", ComponentOp::Stop)
            .unwrap();
        let err = kubectl.list(&Default::default()).await.unwrap_err();
        assert!(err.to_string().contains("connection refused"), "{err}");
        assert_eq!(
            observer
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len(),
            1
        );
        cluster
            .control_component("apiserver", ComponentOp::Start)
            .unwrap();
        assert_eq!(
            kubectl.list(&Default::default()).await.unwrap().items.len(),
            1
        );

        let before = cluster.node_state("n1").unwrap();
        let bad_label = [("a b".to_string(), "c".to_string())].into();
        let err = cluster
            .reboot_node_with("n1", None, None, Some(bad_label))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid node \"n1\": invalid label a b=c: "),
            "{err}"
        );
        let err = cluster
            .reboot_node_with("n1", Some("lots"), None, None)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(err, "invalid node \"n1\": bad cpu quantity \"lots\"");
        assert!(matches!(
            cluster.reboot_node_with("n9", Some("8"), None, None).await,
            Err(ClusterError::UnknownNode(_))
        ));
        assert_eq!(cluster.node_state("n1").unwrap().boot_id, before.boot_id);
    }

    #[tokio::test(start_paused = true)]
    async fn nodes_register_and_faults_apply() {
        let config = ClusterConfig {
            nodes: vec![NodeSpec::new("n1"), NodeSpec::new("n2")],
            ..Default::default()
        };
        let cluster = test_cluster(3, config).await;
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

    async fn wait_for(what: &str, mut ok: impl AsyncFnMut() -> bool) {
        let start = tokio::time::Instant::now();
        while !ok().await {
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn uid(n: &Node) -> String {
        n.metadata.uid.clone().unwrap_or_default()
    }

    /// Spec §11: a deleted Node stays deleted while its kubelet runs (registration happens at
    /// start-up only); a kubelet restart re-registers it with a new UID and the kubelet's own
    /// labels. A machine added later registers; a removed one is powered off and its Node goes.
    #[tokio::test(start_paused = true)]
    async fn delete_rejoin_add_and_remove_nodes() {
        let mut n1 = NodeSpec::new("n1");
        n1.zone = Some("z1".into());
        let config = ClusterConfig {
            nodes: vec![n1, NodeSpec::new("n2")],
            ..Default::default()
        };
        let cluster = test_cluster(3, config).await;
        let nodes: Api<Node> = Api::all(cluster.admin_client());
        wait_for("n1 registered", async || {
            nodes.get_opt("n1").await.unwrap().is_some()
        })
        .await;
        let old = nodes.get("n1").await.unwrap();
        // An admin edit the kubelet does not own: lost with the object.
        nodes
            .patch(
                "n1",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    serde_json::json!({"metadata": {"labels": {"team": "a"}}}),
                ),
            )
            .await
            .unwrap();
        nodes.delete("n1", &Default::default()).await.unwrap();
        // A running kubelet does not re-create its Node.
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(nodes.get_opt("n1").await.unwrap().is_none());

        let s = cluster.rejoin_node("n1").unwrap();
        assert!(s.kubelet_running);
        wait_for("n1 re-registered", async || {
            nodes.get_opt("n1").await.unwrap().is_some()
        })
        .await;
        let new = nodes.get("n1").await.unwrap();
        assert_ne!(uid(&new), uid(&old), "a re-registered Node is a new object");
        let labels = new.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            Some("z1")
        );
        assert!(!labels.contains_key("team"), "{labels:?}");

        // Rejoin of a powered-off machine is refused; of an unknown one, too.
        cluster
            .apply_fault("n2", NodeFault::PowerOff)
            .await
            .unwrap();
        assert!(matches!(
            cluster.rejoin_node("n2"),
            Err(ClusterError::Transition(_))
        ));
        assert!(matches!(
            cluster.rejoin_node("n9"),
            Err(ClusterError::UnknownNode(_))
        ));

        let mut n3 = NodeSpec::new("n3");
        n3.zone = Some("z2".into());
        let s = cluster.add_node(&n3).unwrap();
        assert!(s.powered && s.kubelet_running);
        assert!(matches!(
            cluster.add_node(&n3),
            Err(ClusterError::NodeExists(_))
        ));
        assert!(matches!(
            cluster.add_node(&NodeSpec::new("Bad_Name")),
            Err(ClusterError::InvalidNode { .. })
        ));
        wait_for("n3 registered", async || {
            nodes.get_opt("n3").await.unwrap().is_some()
        })
        .await;
        assert_eq!(cluster.node_names(), vec!["n1", "n2", "n3"]);

        cluster.remove_node("n3").await.unwrap();
        assert!(nodes.get_opt("n3").await.unwrap().is_none());
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(cluster.admin_client(), "default");
        let deleting: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("DeletingNode"))
            .map(|e| {
                format!(
                    "{} {}",
                    e.source.and_then(|s| s.component).unwrap_or_default(),
                    e.message.unwrap_or_default()
                )
            })
            .collect();
        assert_eq!(
            deleting,
            [
                "cloud-node-lifecycle-controller Deleting node n3 because it does not exist in the cloud provider"
            ]
        );
        assert_eq!(cluster.node_names(), vec!["n1", "n2"]);
        assert!(matches!(
            cluster.remove_node("n3").await,
            Err(ClusterError::UnknownNode(_))
        ));
        // Nothing re-creates it: its kubelet is gone with the machine.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(nodes.get_opt("n3").await.unwrap().is_none());
        // The name is free again: a new machine, a new Node.
        cluster.add_node(&NodeSpec::new("n3")).unwrap();
        wait_for("n3 back", async || {
            nodes.get_opt("n3").await.unwrap().is_some()
        })
        .await;
    }

    /// Spec §11: pods force-deleted while the kubelet was down (by pod GC after a Node delete, or
    /// by hand) leave containers behind on the machine; the kubelet that starts on rejoin finds
    /// no pod for them and kills them.
    #[tokio::test(start_paused = true)]
    async fn rejoin_kills_containers_of_pods_that_no_longer_exist() {
        use k8s_openapi::api::core::v1::Pod;
        let cluster = one_node_cluster(5).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin_client(), "default");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
        let running = |c: &Cluster| c.node_state("n1").unwrap().running_containers;
        wait_for("web running", async || {
            running(&cluster) == ["default/web/c"]
        })
        .await;

        cluster
            .apply_fault("n1", NodeFault::StopKubelet)
            .await
            .unwrap();
        pods.delete("web", &kube::api::DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(running(&cluster), ["default/web/c"], "nobody stops it");

        cluster.rejoin_node("n1").unwrap();
        wait_for("orphan killed", async || running(&cluster).is_empty()).await;
    }

    #[test]
    fn machine_addresses_stay_valid() {
        assert_eq!(node_ip(0), "10.0.0.10");
        assert_eq!(node_ip(245), "10.0.0.255");
        assert_eq!(node_ip(246), "10.0.1.0");
        assert_eq!(node_ip(usize::MAX), node_ip(usize::MAX));
    }
}
