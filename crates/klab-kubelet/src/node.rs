//! `SimNode`: one simulated machine with its kubelet. The machine (process table, images, boot id)
//! is the node's durable state; the kubelet is a process built from it by a factory, so "restart"
//! means building it again. Faults are applied here, only at the two seams: the kubelet's client
//! (through [`NetFault`]) and the machine.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use klab_api::supervise::{Health, RestartPolicy, supervise};
use klab_api::{Clock, DetRng};
use tower::{Layer, Service};

use crate::agent::{KubeletContext, run_kubelet};
use crate::config::{KubeletConfig, NodeSpecConfig, RuntimeModel};
use crate::fault::{BoxError, NetFault, NodeFault};
use crate::runtime::{Machine, RtState};
use crate::server::{KubeletEndpoint, PodView};
use crate::shutdown::Logind;

pub use crate::clients::ClientKind;

type ClientFactory = Arc<dyn Fn() -> kube::Client + Send + Sync>;
type KubeletSlot = Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>;

/// What powering the machine off touches, detached from the node so logind's timer can do it
/// when a graceful shutdown's inhibitor lock is released.
#[derive(Clone)]
struct PowerSwitch {
    kubelet: KubeletSlot,
    process: Arc<Mutex<Option<PodView>>>,
    net: NetFault,
    machine: Arc<Mutex<Machine>>,
    logind: Logind,
    clock: Clock,
}

impl PowerSwitch {
    fn stop_kubelet(&self) {
        if let Some(h) = self
            .kubelet
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            h.abort();
        }
        // Nothing listens on the kubelet's port any more.
        *self.process.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // The process is gone: its open connections break, its pending StopContainer calls are
        // abandoned by the runtime, and its inhibitor lock is released with its D-Bus connection.
        self.net.break_connections();
        self.machine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .abandon_stops();
        self.logind.release();
    }

    fn power_off(&self) {
        self.stop_kubelet();
        self.net.set_frozen(false);
        self.logind.update(|s| s.preparing_shutdown = false);
        let now = self.clock.now();
        self.machine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .power_off(now);
    }
}

/// A snapshot of a node's simulated state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimNodeState {
    pub name: String,
    pub powered: bool,
    pub kubelet_running: bool,
    pub partitioned: bool,
    pub frozen: bool,
    /// logind is preparing a shutdown (a graceful node shutdown in progress).
    pub shutting_down: bool,
    pub boot_id: String,
    /// Running containers as `namespace/pod/container`, sorted.
    pub running_containers: Vec<String>,
}

/// One simulated node (machine + kubelet).
pub struct SimNode {
    name: String,
    spec: NodeSpecConfig,
    cfg: KubeletConfig,
    model: RuntimeModel,
    clock: Clock,
    rng: DetRng,
    make_client: ClientFactory,
    machine: Arc<Mutex<Machine>>,
    net: NetFault,
    /// The machine's logind: `PrepareForShutdown` signals and the kubelet's inhibitor lock.
    logind: Logind,
    /// The kubelet process, shared with logind's power-off timer (which ends it).
    kubelet: KubeletSlot,
    /// Where the kubelet's supervisor reports failures; without one the kubelet runs unsupervised.
    health: Option<Health>,
    /// The kubelet's port as the network sees it.
    endpoint: KubeletEndpoint,
}

impl SimNode {
    /// Builds a powered-on node whose kubelet is not started yet. `make_service` returns the
    /// in-process API service for this node's identity and one of the kubelet's clients (e.g.
    /// `api.router_as(identity)` behind that client's rate limiter); the node wraps it in its
    /// fault layer and builds fresh clients for every kubelet start, as a new process has.
    #[allow(clippy::too_many_arguments)]
    pub fn new<S, B>(
        name: &str,
        spec: NodeSpecConfig,
        cfg: KubeletConfig,
        model: RuntimeModel,
        clock: Clock,
        rng: DetRng,
        make_service: impl Fn(ClientKind) -> S + Send + Sync + 'static,
    ) -> SimNode
    where
        S: Service<Request<kube::client::Body>, Response = Response<B>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let net = NetFault::new();
        let layer = net.layer();
        let make_client: ClientFactory = Arc::new(move || {
            let split = crate::clients::Split {
                main: make_service(ClientKind::Main),
                events: make_service(ClientKind::Events),
                heartbeat: make_service(ClientKind::Heartbeat),
            };
            kube::Client::new(layer.layer(split), "default")
        });
        let last_octet = spec.node_ip.rsplit('.').next().unwrap_or("1").to_string();
        let mut machine = Machine::new(
            rng.uid(),
            rng.hex32(),
            rng.uid(),
            format!("10.244.{last_octet}"),
        );
        machine.system = crate::usage::SystemDaemons::from_reserved(
            cfg.reserved_cpu_millis,
            cfg.reserved_memory,
        );
        machine.booted_at = Some(clock.now());
        let machine = Arc::new(Mutex::new(machine));
        let endpoint = KubeletEndpoint {
            machine: machine.clone(),
            net: net.clone(),
            clock: clock.clone(),
            process: Arc::new(Mutex::new(None)),
            open_streams: Default::default(),
            node: Arc::new(crate::resource_metrics::NodeInfo {
                name: name.to_string(),
                memory_bytes: spec.memory_bytes,
                ephemeral_storage_bytes: spec.ephemeral_storage_bytes,
            }),
        };
        SimNode {
            name: name.to_string(),
            spec,
            cfg,
            model,
            clock,
            rng,
            make_client,
            machine,
            net,
            logind: Logind::default(),
            kubelet: Default::default(),
            health: None,
            endpoint,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Supervises the kubelet from its next start on: a kubelet that panics or returns is
    /// reported in `health` as `kubelet/<node>` and started again after 10 s, as systemd does.
    pub fn set_health(&mut self, health: Health) {
        self.health = Some(health);
    }

    /// Starts the kubelet (same as `apply(NodeFault::StartKubelet)`). Must run inside the runtime
    /// that drives the cluster.
    pub fn start(&mut self) {
        self.apply(NodeFault::StartKubelet);
    }

    /// The machine, for a change from outside the kubelet (a fault): counted, so that the pod
    /// loop's next pass looks at every pod.
    fn machine(&self) -> std::sync::MutexGuard<'_, Machine> {
        let mut m = self.machine.lock().unwrap_or_else(|p| p.into_inner());
        m.changes = m.changes.wrapping_add(1);
        m
    }

    /// The machine, to read: not counted as a change. A read that counted would make the pod
    /// loop's next pass sync every pod (`klab up` snapshots every machine as often as every
    /// second to save them, and each snapshot cost every kubelet a pass over all its pods).
    fn machine_read(&self) -> std::sync::MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kubelet_running(&self) -> bool {
        self.kubelet
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    fn switch(&self) -> PowerSwitch {
        PowerSwitch {
            kubelet: self.kubelet.clone(),
            process: self.endpoint.process.clone(),
            net: self.net.clone(),
            machine: self.machine.clone(),
            logind: self.logind.clone(),
            clock: self.clock.clone(),
        }
    }

    fn stop_kubelet(&mut self) {
        self.switch().stop_kubelet();
    }

    /// `systemctl poweroff`: without an inhibitor lock the machine goes down at once; with one,
    /// logind signals `PrepareForShutdown(true)` and waits until the lock is released (the
    /// kubelet finished its groups, or its process ended) or `InhibitDelayMaxSec` passed.
    fn shutdown(&mut self) {
        let st = self.logind.state();
        if !self.machine_read().powered || st.preparing_shutdown {
            return;
        }
        if !st.inhibited {
            self.switch().power_off();
            return;
        }
        self.logind.update(|s| {
            s.preparing_shutdown = true;
            s.generation = s.generation.wrapping_add(1);
        });
        let generation = self.logind.state().generation;
        let switch = self.switch();
        let mut rx = self.logind.subscribe();
        // logind's own delay timer: a short-lived task that ends with the power-off or the
        // cancellation of this shutdown.
        tokio::spawn(async move {
            let delay = switch.logind.state().inhibit_delay_max;
            let released = rx
                .wait_for(|s| s.generation != generation || !s.preparing_shutdown || !s.inhibited);
            let _ = tokio::time::timeout(switch.clock.to_runtime(delay), released).await;
            let st = switch.logind.state();
            if st.generation == generation && st.preparing_shutdown {
                switch.power_off();
            }
        });
    }

    fn start_kubelet(&mut self) {
        if self.kubelet_running() || !self.machine_read().powered {
            return;
        }
        let (name, spec, cfg, model) = (
            self.name.clone(),
            self.spec.clone(),
            self.cfg.clone(),
            self.model.clone(),
        );
        let (clock, rng, make_client) = (
            self.clock.clone(),
            self.rng.clone(),
            self.make_client.clone(),
        );
        let (machine, net) = (self.machine.clone(), self.net.clone());
        let logind = self.logind.clone();
        let process = self.endpoint.process.clone();
        let mut first = true;
        // One kubelet process per call: a restart after a crash is a new process, whose
        // predecessor's connections broke and whose pending stops were abandoned.
        let start = move || {
            if !std::mem::take(&mut first) {
                net.break_connections();
                machine
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .abandon_stops();
            }
            // A new process has a new (empty) pod view, served on the kubelet's port.
            let pod_view = PodView::default();
            *process.lock().unwrap_or_else(|p| p.into_inner()) = Some(pod_view.clone());
            let ctx = KubeletContext {
                name: name.clone(),
                spec: spec.clone(),
                cfg: cfg.clone(),
                model: model.clone(),
                clock: clock.clone(),
                rng: rng.clone(),
                client: make_client(),

                machine: machine.clone(),
                net: net.clone(),
                logind: logind.clone(),
                pod_view,
            };
            async move {
                run_kubelet(ctx).await;
                Ok(())
            }
        };
        let handle = match &self.health {
            // kubeadm's kubelet.service: `Restart=always`, `RestartSec=10`.
            Some(h) => tokio::spawn(supervise(
                h.clone(),
                format!("kubelet/{}", self.name),
                self.clock.clone(),
                RestartPolicy::Fixed(std::time::Duration::from_secs(10)),
                start,
            )),
            None => {
                let mut start = start;
                let run = start();
                tokio::spawn(async move {
                    let _ = run.await;
                })
            }
        };
        *self.kubelet.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }

    /// Applies a fault now (virtual time of the clock).
    pub fn apply(&mut self, fault: NodeFault) {
        let now = self.clock.now();
        match fault {
            NodeFault::StopKubelet => self.stop_kubelet(),
            NodeFault::StartKubelet => self.start_kubelet(),
            NodeFault::PowerOff => self.switch().power_off(),
            NodeFault::PowerOn => {
                if !self.machine_read().powered {
                    let boot = self.rng.uid();
                    let mut m = self.machine();
                    m.power_on(boot);
                    m.booted_at = Some(now);
                    drop(m);
                    self.start_kubelet();
                }
            }
            NodeFault::Reboot => {
                self.apply(NodeFault::PowerOff);
                self.apply(NodeFault::PowerOn);
            }
            NodeFault::Partition => self.net.set_partitioned(true),
            NodeFault::Heal => self.net.set_partitioned(false),
            NodeFault::Freeze => {
                self.machine().freeze(now);
                self.net.set_frozen(true);
            }
            NodeFault::Thaw => {
                self.machine().thaw(now);
                self.net.set_frozen(false);
            }
            NodeFault::Shutdown => self.shutdown(),
            NodeFault::ShutdownCancel => self.logind.update(|s| {
                if s.preparing_shutdown {
                    s.preparing_shutdown = false;
                    s.generation = s.generation.wrapping_add(1);
                }
            }),
            NodeFault::RuntimeDown => {
                let mut m = self.machine();
                if m.runtime_down_since.is_none() {
                    m.runtime_down_since = Some(now);
                }
            }
            NodeFault::RuntimeUp => self.machine().runtime_down_since = None,
            NodeFault::FailLeaseUpdates => self.net.set_lease_writes_fail(true),
            NodeFault::HealLeaseUpdates => self.net.set_lease_writes_fail(false),
            NodeFault::FailStatusUpdates => self.net.set_status_writes_fail(true),
            NodeFault::HealStatusUpdates => self.net.set_status_writes_fail(false),
        }
    }

    /// A node-pressure fault: what an eviction signal observes from now on (`memory.available`,
    /// `nodefs.available`, `pid.available`, …), or back to the usage model with `None`
    /// (relieved). An unknown signal is refused with upstream's text and changes nothing.
    pub fn set_available(&mut self, signal: &str, available: Option<u64>) -> Result<(), String> {
        if crate::eviction::Signal::parse(signal).is_none() {
            return Err(format!("unsupported eviction signal {signal}"));
        }
        let mut m = self.machine();
        match available {
            Some(a) => m.available_override.insert(signal.to_string(), a),
            None => m.available_override.remove(signal),
        };
        Ok(())
    }

    /// A `node-condition` fault: the kubelet reports this condition type with the given status,
    /// reason and message from its next status computation on, whatever it computes itself; with
    /// `None` the fault is cleared (the kubelet's own four conditions come back to its own
    /// computation, any other type is removed from the Node's status).
    pub fn set_condition(
        &mut self,
        type_: &str,
        report: Option<crate::node_status::ConditionOverride>,
    ) {
        let mut m = self.machine();
        match report {
            Some(o) => {
                m.cleared_conditions.remove(type_);
                m.condition_overrides.insert(type_.to_string(), o);
            }
            None => {
                if m.condition_overrides.remove(type_).is_some()
                    && !crate::node_status::KUBELET_CONDITIONS.contains(&type_)
                {
                    m.cleared_conditions.insert(type_.to_string());
                }
            }
        }
    }

    /// A reboot into changed hardware or kubelet flags (a resized VM, new `--node-labels`): the
    /// machine powers off, the changes take effect, it boots and its kubelet starts with them.
    /// The kubelet re-registering an existing Node patches its status (capacity, allocatable)
    /// and only its default labels; `labels` reach the Node only if it is created anew, as
    /// upstream's `--node-labels`.
    pub fn reboot_with(
        &mut self,
        cpu_millis: Option<u64>,
        memory_bytes: Option<u64>,
        labels: Option<BTreeMap<String, String>>,
    ) {
        self.apply(NodeFault::PowerOff);
        if let Some(c) = cpu_millis {
            self.spec.cpu_millis = c;
        }
        if let Some(m) = memory_bytes {
            self.spec.memory_bytes = m;
        }
        if let Some(l) = labels {
            self.spec.labels = l;
        }
        self.apply(NodeFault::PowerOn);
    }

    /// An `image-pull-fail` fault: pulls of `image` on this machine fail with `error` (the
    /// runtime's answer) from now on; `None` heals it. Images already pulled stay usable.
    pub fn set_pull_failure(&mut self, image: &str, error: Option<String>) {
        let key = crate::pod_status::normalize_image(image);
        let mut m = self.machine();
        match error {
            Some(e) => m.pull_failures.insert(key, e),
            None => m.pull_failures.remove(&key),
        };
    }

    /// A snapshot of the node.
    pub fn state(&self) -> SimNodeState {
        let now = self.clock.now();
        let running_kubelet = self.kubelet_running();
        // A read: advancing to now counts the transitions it makes itself.
        let mut m = self.machine_read();
        m.advance(now);
        let mut running = Vec::new();
        for p in m.pods.values() {
            for c in p.containers.values() {
                if matches!(c.state, RtState::Running { .. }) {
                    running.push(format!("{}/{}/{}", p.namespace, p.name, c.name));
                }
            }
        }
        running.sort();
        let net = self.net.state();
        SimNodeState {
            name: self.name.clone(),
            powered: m.powered,
            kubelet_running: running_kubelet,
            partitioned: net.partitioned,
            frozen: net.frozen,
            shutting_down: self.logind.state().preparing_shutdown,
            boot_id: m.boot_id.clone(),
            running_containers: running,
        }
    }

    /// Replaces the machine with one saved earlier (a control-plane restart of `klab up`: the
    /// machines kept running, with their containers, boot ids and images). Call before `start`.
    pub fn restore_machine(&mut self, mut machine: Machine) {
        // The system daemons' usage follows this start's kubelet configuration; a machine saved
        // without a boot time (before the model had one) counts their CPU from now.
        machine.system = crate::usage::SystemDaemons::from_reserved(
            self.cfg.reserved_cpu_millis,
            self.cfg.reserved_memory,
        );
        if machine.powered && machine.booted_at.is_none() {
            machine.booted_at = Some(self.clock.now());
        }
        // `machine()` counts this change; the restored machine carries the count on.
        let mut m = self.machine();
        machine.changes = m.changes;
        *m = machine;
    }

    /// A copy of the machine's state, to save across a control-plane restart.
    pub fn machine_snapshot(&self) -> Machine {
        self.machine_read().clone()
    }

    /// The node's machine, for inspection in tests and traces.
    pub fn machine_handle(&self) -> Arc<Mutex<Machine>> {
        self.machine.clone()
    }

    /// The node's network seam.
    pub fn net(&self) -> NetFault {
        self.net.clone()
    }

    /// The kubelet's port (10250) on the node's address, as the API server dials it.
    pub fn endpoint(&self) -> KubeletEndpoint {
        self.endpoint.clone()
    }

    /// The node's address (`InternalIP`).
    pub fn node_ip(&self) -> &str {
        &self.spec.node_ip
    }
}

impl Drop for SimNode {
    fn drop(&mut self) {
        if let Some(h) = self
            .kubelet
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            h.abort();
        }
    }
}
