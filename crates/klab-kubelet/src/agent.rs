//! The kubelet process: the async shell around the pure decisions. Four loops run concurrently
//! on the current task (no spawning, so aborting the process future stops everything at once):
//! the watch of the kubelet's own Node, registration + node status, the node Lease, and the pod
//! loop (watch → `PodManager::sync` → API writes). All time comes from the `Clock`; all API
//! traffic goes through the node's client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use klab_api::shared;
use klab_api::slim::Slim;
use klab_api::{Clock, DetRng, names};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::backoff::{Doubling, LEASE_ENSURE_INITIAL, REGISTRATION_INITIAL, RETRY_CAP, jittered};
use crate::config::{
    KubeletConfig, LEASE_MAX_UPDATE_RETRIES, NODE_STATUS_UPDATE_RETRY, NodeSpecConfig, RuntimeModel,
};
use crate::events::Recorder;
use crate::fault::NetFault;
use crate::node_status::{
    self, MachineIdentity, NodeEvent, NodeHealth, compute_status, initial_node, machine_status,
    node_status_changed, should_report,
};
use crate::pods::{PodManager, PodWrite};
use crate::runtime::Machine;

/// Everything a kubelet process is built from. The machine is shared with the node (it outlives
/// the process); everything else is the process's own.
#[derive(Clone)]
pub struct KubeletContext {
    pub name: String,
    pub spec: NodeSpecConfig,
    pub cfg: KubeletConfig,
    pub model: RuntimeModel,
    pub clock: Clock,
    pub rng: DetRng,
    /// Upstream's three clients in one: each request is throttled as the one upstream sends it
    /// with would be (`crate::clients`).
    pub client: Client,
    pub machine: Arc<Mutex<Machine>>,
    pub net: NetFault,
    /// The machine's logind (graceful node shutdown).
    pub logind: crate::shutdown::Logind,
    /// Where this process publishes the pods it knows, for its HTTP server.
    pub pod_view: crate::server::PodView,
}

fn lock(m: &Mutex<Machine>) -> std::sync::MutexGuard<'_, Machine> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

struct Shared {
    ctx: KubeletContext,
    recorder: Recorder,
    /// The Node as last read or written by this process (`None` before registration).
    node: Mutex<Option<Arc<Node>>>,
    /// `spec.unschedulable` as last observed (starts at `!registerSchedulable`).
    last_unschedulable: Mutex<bool>,
    /// `status.volumesInUse` as the volume manager last computed it.
    volumes_in_use: Mutex<Vec<String>>,
    /// The node shutdown manager's "shutting down" flag (`ShutdownStatus()` is an error).
    shutting_down: std::sync::atomic::AtomicBool,
    /// Asks the status loop for a status update now (upstream's `syncNodeStatus` trigger).
    status_now: tokio::sync::Notify,
    /// The eviction manager's node conditions, read by the status setters.
    pressures: Mutex<Vec<crate::eviction::Pressure>>,
    /// What the Node watch (upstream's node informer) knows.
    node_watch: Mutex<NodeWatch>,
}

/// The state of the kubelet's watch of its own Node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct NodeWatch {
    /// Listed and not broken since: every change to the Node reaches `Shared::node` as it is
    /// made. A watch that is down (a partition, a frozen machine, a relist in progress) is not
    /// read from.
    live: bool,
    /// The Node exists as the watch last saw.
    present: bool,
}

impl Shared {
    fn identity(&self) -> MachineIdentity {
        let m = lock(&self.ctx.machine);
        MachineIdentity {
            boot_id: m.boot_id.clone(),
            machine_id: m.machine_id.clone(),
            system_uuid: m.system_uuid.clone(),
        }
    }

    /// The cached Node, shared (the pod loop reads it at every pass: no copy).
    fn cached_node(&self) -> Option<Arc<Node>> {
        self.node.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Caches a Node read or written; an older resourceVersion never replaces a newer one.
    fn set_node(&self, n: impl Into<Arc<Node>>) {
        let n = n.into();
        let mut g = self.node.lock().unwrap_or_else(|p| p.into_inner());
        let rv = |n: &Node| {
            n.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        let stale = match (g.as_deref().and_then(rv), rv(&n)) {
            (Some(old), Some(new)) => {
                new < old && g.as_ref().map(|o| &o.metadata.uid) == Some(&n.metadata.uid)
            }
            _ => false,
        };
        if !stale {
            *g = Some(n);
        }
    }

    fn set_node_watch(&self, w: NodeWatch) {
        *self.node_watch.lock().unwrap_or_else(|p| p.into_inner()) = w;
    }

    /// The Node as the watch holds it: `None` when the watch is not live (read the API server
    /// instead), `Some(None)` when it saw no Node. The copy is the newest the process has (a
    /// status PATCH's response can be newer than the watch's echo of it).
    fn informed_node(&self) -> Option<Option<Arc<Node>>> {
        let w = *self.node_watch.lock().unwrap_or_else(|p| p.into_inner());
        w.live
            .then(|| w.present.then(|| self.cached_node()).flatten())
    }

    fn jitter(&self, period: Duration) -> Duration {
        jittered(period, self.ctx.model.heartbeat_jitter, self.ctx.rng.unit())
    }

    async fn node_events(&self, events: &[NodeEvent]) {
        for e in events {
            self.recorder.node_event(e).await;
        }
    }
}

/// Runs a kubelet process until the future is dropped (= the process is killed).
pub async fn run_kubelet(ctx: KubeletContext) {
    let recorder = Recorder::new(ctx.client.clone(), ctx.clock.clone(), &ctx.rng, &ctx.name);
    let ctx_register_schedulable = ctx.cfg.register_schedulable;
    let shared = Arc::new(Shared {
        ctx,
        recorder,
        node: Mutex::new(None),
        last_unschedulable: Mutex::new(!ctx_register_schedulable),
        volumes_in_use: Mutex::new(Vec::new()),
        shutting_down: Default::default(),
        status_now: tokio::sync::Notify::new(),
        pressures: Mutex::new(Vec::new()),
        node_watch: Mutex::new(NodeWatch::default()),
    });
    // The node shutdown manager starts with the kubelet: with a non-empty priority table it
    // takes logind's delay inhibitor lock (raising InhibitDelayMaxSec to the period it needs).
    if !shared.ctx.cfg.shutdown.priority_table().is_empty() {
        shared
            .ctx
            .logind
            .inhibit(shared.ctx.cfg.shutdown.period_requested());
    }
    shared.ctx.net.wait_thawed().await;
    // BirthCry and the container manager's allocatable enforcement.
    Box::pin(shared.recorder.node_event(&NodeEvent {
        type_: names::EVENT_NORMAL,
        reason: "Starting".into(),
        message: "Starting kubelet.".into(),
    }))
    .await;
    Box::pin(shared.recorder.node_event(&NodeEvent {
        type_: names::EVENT_NORMAL,
        reason: "NodeAllocatableEnforced".into(),
        message: "Updated Node Allocatable limit across pods".into(),
    }))
    .await;
    // The loops box their larger steps (`Box::pin(…).await`): a future holds the state of every
    // step it may await, and a kubelet's loops, held for its lifetime, would otherwise be
    // about 27 KB per node.
    tokio::join!(
        node_watch_loop(shared.clone()),
        status_loop(shared.clone()),
        lease_loop(shared.clone()),
        pod_loop(shared.clone()),
    );
}

// ---------------------------------------------------------------- the Node watch

/// Upstream's node informer (`fieldSelector=metadata.name=NODE`): list, then watch from the
/// list's resourceVersion, for ever. A watch that ends is relisted at once, one that fails after
/// [`klab_runtime::informer::WATCH_ERROR_BACKOFF`]. The API server's `metadata.name` watch
/// trigger sends each kubelet only its own Node's changes.
///
/// Not a `klab_runtime` informer (kube's `watcher`): the status loop must know when the copy
/// may be stale, and that watcher resumes a broken watch from its last resourceVersion without
/// telling, its replayed changes arriving only after the new watch has answered. Here the copy
/// counts as current from a list's answer until the watch after it ends.
async fn node_watch_loop(s: Arc<Shared>) {
    let ctx = &s.ctx;
    let api: Api<shared::Shared<Node>> = Api::all(ctx.client.clone());
    let selector = format!("metadata.name={}", ctx.name);
    loop {
        let ended = Box::pin(watch_node(&s, &api, &selector)).await;
        s.set_node_watch(NodeWatch::default());
        if !ended {
            ctx.clock
                .sleep(klab_runtime::informer::WATCH_ERROR_BACKOFF)
                .await;
        }
    }
}

/// One list and the watch that follows it. True when the watch ended as watches do (a timeout,
/// an expired resourceVersion), false on an error.
async fn watch_node(s: &Shared, api: &Api<shared::Shared<Node>>, selector: &str) -> bool {
    let ctx = &s.ctx;
    let list = match api.list(&ListParams::default().fields(selector)).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!(node = %ctx.name, error = %e, "failed to list the node");
            return false;
        }
    };
    let rv = list.metadata.resource_version.clone().unwrap_or_default();
    let mut present = false;
    for n in list.items {
        present = true;
        s.set_node(n.0);
    }
    s.set_node_watch(NodeWatch {
        live: true,
        present,
    });
    let mut stream = match api
        .watch(&WatchParams::default().fields(selector), &rv)
        .await
    {
        Ok(st) => st.boxed(),
        Err(e) => {
            tracing::debug!(node = %ctx.name, error = %e, "failed to watch the node");
            return false;
        }
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(WatchEvent::Added(n) | WatchEvent::Modified(n)) => {
                s.set_node(n.0);
                present = true;
            }
            Ok(WatchEvent::Deleted(_)) => present = false,
            Ok(WatchEvent::Bookmark(_)) => continue,
            // 410 Gone: the resourceVersion was compacted away; relist.
            Ok(WatchEvent::Error(e)) => return e.code == 410,
            Err(e) => {
                tracing::debug!(node = %ctx.name, error = %e, "node watch failed");
                return false;
            }
        }
        s.set_node_watch(NodeWatch {
            live: true,
            present,
        });
    }
    true
}

// ---------------------------------------------------------------- registration and node status

async fn status_loop(s: Arc<Shared>) {
    let ctx = &s.ctx;
    if ctx.cfg.register_node {
        let mut backoff = Doubling::new(REGISTRATION_INITIAL, RETRY_CAP);
        loop {
            ctx.clock.sleep(backoff.next_sleep()).await;
            ctx.net.wait_thawed().await;
            if Box::pin(register(&s)).await {
                break;
            }
        }
    }
    let mut last_report: Option<jiff::Timestamp> = None;
    // The CSINode and the driver's registration follow the Node's (retried each status period
    // until they succeed).
    let mut csi_registered = false;
    loop {
        ctx.net.wait_thawed().await;
        if let Some(t) = Box::pin(update_node_status(&s, last_report)).await {
            last_report = Some(t);
        }
        if !csi_registered && let Some(node) = s.cached_node() {
            csi_registered = Box::pin(crate::csi_node::ensure(&ctx.client, &node)).await;
        }
        tokio::select! {
            biased;
            _ = s.status_now.notified() => {}
            _ = ctx.clock.sleep(s.jitter(ctx.cfg.node_status_update_frequency)) => {}
        }
    }
}

/// One registration attempt (`tryRegisterWithAPIServer`). True when registered.
async fn register(s: &Shared) -> bool {
    let ctx = &s.ctx;
    let now = ctx.clock.now_time();
    let (node, events) = initial_node(
        &ctx.name,
        &ctx.spec,
        &ctx.cfg,
        &s.identity(),
        &NodeHealth::default(),
        &now,
    );
    // The setters record their events while building the node, on every attempt.
    s.node_events(&events).await;
    let api: Api<Node> = Api::all(ctx.client.clone());
    match api.create(&PostParams::default(), &node).await {
        Ok(created) => {
            s.set_node(created);
            true
        }
        Err(e) if is_already_exists(&e) => {
            let existing = match api.get(&ctx.name).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::info!(node = %ctx.name, error = %e, "unable to get existing node");
                    return false;
                }
            };
            match node_status::reconcile_existing(&existing, &node) {
                None => {
                    s.set_node(existing);
                    true
                }
                Some(patch) => match api
                    .patch(&ctx.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(n) => {
                        s.set_node(n);
                        true
                    }
                    Err(e) => {
                        tracing::info!(node = %ctx.name, error = %e, "unable to reconcile node");
                        false
                    }
                },
            }
        }
        Err(e) => {
            tracing::info!(node = %ctx.name, error = %e, "unable to register node");
            false
        }
    }
}

/// One `updateNodeStatus`: up to 5 tries, each reading the Node. Returns the report time when a
/// PATCH was sent.
async fn update_node_status(
    s: &Shared,
    last_report: Option<jiff::Timestamp>,
) -> Option<jiff::Timestamp> {
    let ctx = &s.ctx;
    // Read without managed fields (the kubelet never reads them) and shared with the process's
    // other decodes of the same bytes: a GET of an unchanged Node is the bytes of the watch
    // event the controllers' informer already decoded.
    let api: Api<shared::Shared<Node>> = Api::all(ctx.client.clone());
    for attempt in 0..NODE_STATUS_UPDATE_RETRY {
        // Try 0 reads the Node watch's copy, as upstream's reads its informer; tries 1–4 GET.
        // A watch that is down is not read: upstream's would hand out the copy from before a
        // partition (its reflector's back-off between relists grows to 30 s, jittered), so a
        // node the controller marked Unknown meanwhile would stay Unknown until the relist. klab
        // GETs instead, and reports at the first status computation after the network is back.
        let informed = if attempt == 0 {
            s.informed_node()
        } else {
            None
        };
        let fetched = match informed {
            Some(Some(n)) => Ok(n),
            Some(None) => {
                tracing::debug!(node = %ctx.name, attempt, "error getting node: not found in the node watch");
                continue;
            }
            None => api.get(&ctx.name).await.map(|n| n.0),
        };
        let node = match fetched {
            Ok(n) => {
                // Admission reads labels and taints from this copy.
                s.set_node(n.clone());
                n
            }
            Err(e) => {
                tracing::debug!(node = %ctx.name, error = %e, attempt, "error getting node");
                continue;
            }
        };
        let now = ctx.clock.now_time();
        let machine = machine_status(&ctx.name, &ctx.spec, &ctx.cfg, &s.identity());
        let pressures = s
            .pressures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // Conditions a fault makes the kubelet report; a cleared type is removed while the Node
        // still shows it (so a failed write is retried), then forgotten.
        let (overrides, cleared) = {
            let mut m = lock(&ctx.machine);
            let shown: Vec<&str> = node
                .status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .map(|cs| cs.iter().map(|c| c.type_.as_str()).collect())
                .unwrap_or_default();
            m.cleared_conditions.retain(|t| shown.contains(&t.as_str()));
            (
                m.condition_overrides.clone(),
                m.cleared_conditions.iter().cloned().collect(),
            )
        };
        let health = NodeHealth {
            overrides,
            cleared,
            memory_pressure: pressures.contains(&crate::eviction::Pressure::Memory),
            disk_pressure: pressures.contains(&crate::eviction::Pressure::Disk),
            pid_pressure: pressures.contains(&crate::eviction::Pressure::Pid),
            ready_errors: if s.shutting_down.load(std::sync::atomic::Ordering::Relaxed) {
                vec![crate::shutdown::MSG_NODE_SHUTTING_DOWN.into()]
            } else {
                let down = lock(&ctx.machine).runtime_down_since;
                crate::node_status::runtime_ready_errors(down, ctx.clock.now())
            },
        };
        let (mut status, mut events) = compute_status(&node, &machine, &health, &now);
        let in_use = s
            .volumes_in_use
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        // The images on the machine, as the image manager lists them.
        let images = crate::images::node_status_images(
            &lock(&ctx.machine).images,
            ctx.cfg.node_status_max_images,
        );
        status.images = (!images.is_empty()).then_some(images);
        status.volumes_in_use = if in_use.is_empty() && status.volumes_in_use.is_none() {
            None
        } else {
            Some(in_use)
        };
        // The setters' last hook: a cordon/uncordon seen since the last computation.
        let unschedulable = node
            .spec
            .as_ref()
            .and_then(|sp| sp.unschedulable)
            .unwrap_or(false);
        if let Some(e) = node_status::schedulable_event(
            &ctx.name,
            &mut s
                .last_unschedulable
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            unschedulable,
        ) {
            events.push(e);
        }
        let changed = match &node.status {
            Some(old) => node_status_changed(old, &status),
            None => node_status_changed(&Default::default(), &status),
        };
        if !should_report(
            changed,
            now.0,
            last_report,
            ctx.cfg.effective_report_frequency(),
        ) {
            s.node_events(&events).await;
            return None;
        }
        // `volumesAttached` belongs to the attach/detach controller: never written back.
        status.volumes_attached = None;
        let patch = serde_json::json!({ "status": status });
        match api
            .patch_status(&ctx.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(n) => {
                s.set_node(n.0);
                s.node_events(&events).await;
                return Some(now.0);
            }
            Err(e) => {
                tracing::debug!(node = %ctx.name, error = %e, attempt, "error updating node status")
            }
        }
    }
    tracing::info!(node = %ctx.name, "update node status exceeds retry count");
    None
}

// ---------------------------------------------------------------- lease

async fn lease_loop(s: Arc<Shared>) {
    let ctx = &s.ctx;
    let mut cached: Option<Lease> = None;
    loop {
        ctx.net.wait_thawed().await;
        Box::pin(sync_lease(&s, &mut cached)).await;
        ctx.clock
            .sleep(s.jitter(ctx.cfg.lease_renew_interval()))
            .await;
    }
}

async fn sync_lease(s: &Shared, cached: &mut Option<Lease>) {
    if let Some(base) = cached.clone()
        && retry_update_lease(s, base, cached).await
    {
        return;
    }
    let (lease, created) = backoff_ensure_lease(s).await;
    match lease {
        None => {}
        Some(l) if created => *cached = Some(l),
        Some(l) => {
            retry_update_lease(s, l, cached).await;
        }
    }
}

/// GET the lease, creating it when missing; retries forever with 200 ms doubling to 7 s.
async fn backoff_ensure_lease(s: &Shared) -> (Option<Lease>, bool) {
    let mut backoff = Doubling::new(LEASE_ENSURE_INITIAL, RETRY_CAP);
    loop {
        match ensure_lease(s).await {
            Ok(r) => return r,
            Err(e) => {
                tracing::debug!(node = %s.ctx.name, error = %e, "failed to ensure node lease exists");
                s.ctx.clock.sleep(backoff.next_sleep()).await;
            }
        }
    }
}

async fn ensure_lease(s: &Shared) -> Result<(Option<Lease>, bool), kube::Error> {
    let ctx = &s.ctx;
    // Decoded without managed fields: the kubelet sends the lease back without them, and the
    // API server then keeps the stored ones (an update that omits them changes none).
    let leases: Api<Slim<Lease>> = Api::namespaced(ctx.client.clone(), names::NS_NODE_LEASE);
    match leases.get(&ctx.name).await {
        Ok(l) => Ok((Some(l.0), false)),
        Err(e) if is_status(&e, 404) => {
            // The owner-reference hook needs the Node; without it the lease is not created.
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            let uid = match nodes.get(&ctx.name).await {
                Ok(n) => n.metadata.uid.unwrap_or_default(),
                Err(_) => return Ok((None, false)),
            };
            let lease = node_status::new_lease(
                &ctx.name,
                &uid,
                ctx.cfg.node_lease_duration_seconds,
                ctx.clock.now_micro(),
            );
            let created = leases.create(&PostParams::default(), &Slim(lease)).await?;
            Ok((Some(created.0), true))
        }
        Err(e) => Err(e),
    }
}

/// Up to 5 UPDATEs based on `base`; a 409 fetches a fresh base first. True on success.
async fn retry_update_lease(s: &Shared, mut base: Lease, cached: &mut Option<Lease>) -> bool {
    let ctx = &s.ctx;
    // Slim as in `ensure_lease`: the renewal's response is the kubelet's next base.
    let leases: Api<Slim<Lease>> = Api::namespaced(ctx.client.clone(), names::NS_NODE_LEASE);
    for _ in 0..LEASE_MAX_UPDATE_RETRIES {
        let has_owner = base
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| !o.is_empty());
        let uid = if has_owner {
            None
        } else {
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            match nodes.get(&ctx.name).await {
                Ok(n) => n.metadata.uid,
                Err(_) => continue, // the hook failed: no UPDATE this attempt
            }
        };
        let lease = node_status::renewed_lease(
            &base,
            &ctx.name,
            uid.as_deref(),
            ctx.cfg.node_lease_duration_seconds,
            ctx.clock.now_micro(),
        );
        match leases
            .replace(&ctx.name, &PostParams::default(), &Slim(lease))
            .await
        {
            Ok(l) => {
                *cached = Some(l.0);
                return true;
            }
            Err(e) if is_status(&e, 409) => match backoff_ensure_lease(s).await {
                (Some(l), _) => base = l,
                (None, _) => return false,
            },
            Err(e) => tracing::debug!(node = %ctx.name, error = %e, "failed to update lease"),
        }
    }
    *cached = None;
    false
}

// ---------------------------------------------------------------- pods

async fn pod_loop(s: Arc<Shared>) {
    let ctx = &s.ctx;
    let mut mgr = PodManager::new(&ctx.name, &ctx.spec.node_ip, ctx.model.clone())
        .with_probe_jitter(ctx.clock.now(), ctx.rng.clone());
    // Decoded without managed fields: the kubelet never reads them (its writes are patches);
    // and once per process, shared with the controllers' and the scheduler's copies.
    let api: Api<shared::Shared<Pod>> = Api::all(ctx.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.name));
    let mut stream = watcher(api, cfg).boxed();
    let mut pods: BTreeMap<String, Arc<Pod>> = BTreeMap::new();
    let mut init: Option<BTreeMap<String, Arc<Pod>>> = None;
    let mut synced = false;
    let mut net_rx = ctx.net.subscribe();
    let mut net_open = true;
    let mut next_wake: Option<jiff::Timestamp> = None;
    let mut logind_rx = ctx.logind.subscribe();
    let mut logind_open = true;
    // The eviction manager: thresholds from the configuration (validated when it was set; a
    // configuration that does not parse disables eviction, with a log line), one synchronize
    // every 10 s from the first pod sync on.
    let thresholds = match ctx.cfg.eviction.thresholds() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(node = %ctx.name, error = %e, "eviction manager disabled");
            Vec::new()
        }
    };
    let mut eviction_state = crate::eviction::EvictionState::default();
    let mut next_eviction: Option<jiff::Timestamp> = None;
    // The image GC loop: a pass at the first pod sync, then every `ImageGCPeriod`.
    let mut next_image_gc: Option<jiff::Timestamp> = None;
    let mut image_gc_failed = false;
    // A pod seen for the first time is admitted against the Node's labels and taints, read from
    // the Node watch as upstream reads its informer. While the watch is down the Node is read
    // again first: admitting against a copy that still shows a removed taint rejects pods that
    // the scheduler rightly bound here — in virtual time a zero-time loop of rejections and
    // replacements.
    let mut new_pods = false;
    // The status manager's ticker, started with the kubelet.
    let mut next_status_sync =
        klab_api::clock::saturating_add(ctx.clock.now(), crate::pods::STATUS_SYNC_PERIOD);
    let mut status_sync_due = false;
    loop {
        let net_change = async {
            if !net_open || net_rx.changed().await.is_err() {
                net_open = false;
                std::future::pending::<()>().await;
            }
        };
        let due = [
            next_wake,
            next_eviction,
            next_image_gc,
            Some(next_status_sync),
        ]
        .into_iter()
        .flatten()
        .min();
        let wake = async {
            match due {
                Some(t) => ctx.clock.sleep_until(t).await,
                None => std::future::pending::<()>().await,
            }
        };
        let logind_change = async {
            if !logind_open || logind_rx.changed().await.is_err() {
                logind_open = false;
                std::future::pending::<()>().await;
            }
        };
        let mut watch_failed = false;
        // A pod event or a timer lets the next pass sync just the pods it concerns.
        let mut pods_or_timer = false;
        tokio::select! {
            biased;
            _ = net_change => {}
            _ = logind_change => {}
            ev = stream.next() => match ev {
                Some(Ok(watcher::Event::Init)) => init = Some(BTreeMap::new()),
                Some(Ok(watcher::Event::InitApply(shared::Shared(p)))) => {
                    if let (Some(m), Some(uid)) = (init.as_mut(), p.metadata.uid.clone()) {
                        new_pods |= !pods.contains_key(&uid);
                        m.insert(uid, p);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    if let Some(m) = init.take() {
                        pods = m;
                    }
                    synced = true;
                }
                Some(Ok(watcher::Event::Apply(shared::Shared(p)))) => {
                    pods_or_timer = true;
                    // The watch can deliver the echo of a write after the PATCH response that
                    // superseded it was stored: never go back to an older version, or the next sync
                    // would recompute transition times against a stale status and flip them.
                    if let Some(uid) = p.metadata.uid.clone()
                        && !pods.get(&uid).is_some_and(|held| is_newer(held, &p))
                    {
                        new_pods |= !pods.contains_key(&uid);
                        pods.insert(uid, p);
                    }
                }
                Some(Ok(watcher::Event::Delete(shared::Shared(p)))) => {
                    pods_or_timer = true;
                    if let Some(uid) = p.metadata.uid.clone() {
                        pods.remove(&uid);
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(node = %ctx.name, error = %e, "pod watch failed");
                    watch_failed = true;
                }
                None => return,
            },
            _ = wake => pods_or_timer = true,
        }
        if watch_failed {
            // The watcher retries on the next poll; pace it (no busy loop in virtual time).
            ctx.clock.sleep(Duration::from_secs(1)).await;
        }
        if ctx.net.state().frozen {
            // Nothing on a frozen machine progresses; resume (and resync) on thaw.
            ctx.net.wait_thawed().await;
        }
        if !pods_or_timer {
            mgr.resync_all();
        }
        let tick_now = ctx.clock.now();
        if next_status_sync <= tick_now {
            // A ticker that fell behind (a frozen machine) fires once, then keeps its phase.
            while next_status_sync <= tick_now {
                next_status_sync = klab_api::clock::saturating_add(
                    next_status_sync,
                    crate::pods::STATUS_SYNC_PERIOD,
                );
            }
            status_sync_due = true;
        }
        if !synced {
            continue;
        }
        Box::pin(resolve_volumes(ctx, &mut mgr, &pods)).await;
        Box::pin(shutdown_signal(&s, &mut mgr)).await;
        if (std::mem::take(&mut new_pods) || mgr.volumes.waiting_for_attach())
            && s.informed_node().is_none()
        {
            let nodes: Api<shared::Shared<Node>> = Api::all(ctx.client.clone());
            match Box::pin(nodes.get(&ctx.name)).await {
                Ok(n) => s.set_node(n.0),
                Err(e) => tracing::debug!(node = %ctx.name, error = %e, "error getting node"),
            }
        }
        let node = s.cached_node().unwrap_or_else(|| {
            Arc::new(
                initial_node(
                    &ctx.name,
                    &ctx.spec,
                    &ctx.cfg,
                    &s.identity(),
                    &NodeHealth::default(),
                    &ctx.clock.now_time(),
                )
                .0,
            )
        });
        let alloc = node_status::allocatable(&ctx.spec, &ctx.cfg);
        let now = ctx.clock.now();
        if std::mem::take(&mut status_sync_due) {
            mgr.reconcile_statuses(&pods);
        }
        let out = {
            let mut m = lock(&ctx.machine);
            mgr.sync(now, &mut m, &pods, &node, &alloc, &ctx.cfg)
        };
        next_wake = out.next_wake;
        for w in out.writes {
            Box::pin(apply_write(&s, &mut mgr, &mut pods, w)).await;
        }
        *s.volumes_in_use.lock().unwrap_or_else(|p| p.into_inner()) = mgr.volumes_in_use();
        if next_image_gc.is_none_or(|t| t <= now) {
            next_image_gc = Some(klab_api::clock::saturating_add(
                now,
                crate::images::IMAGE_GC_PERIOD,
            ));
            // Removing unused images changes no pod's status: a pod pulls again only when a
            // timer or change of its own makes it start a container.
            let events = image_gc_round(&s, &mut image_gc_failed, now);
            if !events.is_empty() {
                Box::pin(s.node_events(&events)).await;
            }
        }
        // Local-storage limits are enforced even without thresholds.
        if next_eviction.is_none_or(|t| t <= now) {
            next_eviction = Some(klab_api::clock::saturating_add(
                now,
                crate::eviction::MONITORING_PERIOD,
            ));
            // A round that evicts or changes the pressures makes the next pass sync every pod
            // (`PodManager::evict`, `set_pressures`); rotating logs changes no pod's status.
            let (out, event) = eviction_round(&s, &mut mgr, &thresholds, &mut eviction_state, now);
            if let Some(e) = event {
                Box::pin(s.node_events(&[e])).await;
            }
            if let Some(t) = out.next_wake {
                next_wake = Some(next_wake.map_or(t, |n| n.min(t)));
            }
            for w in out.writes {
                Box::pin(apply_write(&s, &mut mgr, &mut pods, w)).await;
            }
        }
        // What the kubelet's server answers from (its pod and status managers).
        *ctx.pod_view.lock().unwrap_or_else(|p| p.into_inner()) = pods.clone();
        // Every group killed and its final statuses written: release the inhibitor lock, and
        // logind lets the machine go down.
        if mgr.shutdown_complete() && ctx.logind.state().inhibited {
            tracing::info!(node = %ctx.name, "shutdown manager completed processing shutdown event, node will shutdown shortly");
            ctx.logind.release();
        }
    }
}

/// What an eviction signal observes on the machine now: the usage model (capacity less what the
/// system daemons, containers, volumes and images use) unless a node fault fixes it.
fn observe_signal(
    ctx: &KubeletContext,
    machine: &crate::runtime::Machine,
    now: jiff::Timestamp,
) -> impl Fn(crate::eviction::Signal) -> Option<crate::eviction::Observation> + use<> {
    use crate::eviction::{Observation, Signal};
    let overrides = machine.available_override.clone();
    let (memory_used, _, pids_used) = machine.usage_totals(now);
    let storage_used = machine.disk_used(now);
    let memory_capacity = ctx.spec.memory_bytes;
    let storage_capacity = ctx.spec.ephemeral_storage_bytes;
    // The root cgroup's working set holds the system daemons' beside the containers'.
    let system_memory = machine.system.total().memory;
    move |sig: Signal| {
        let capacity = match sig {
            Signal::MemoryAvailable => memory_capacity,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => storage_capacity,
            // Documented model values: a filesystem's inodes and the kernel's pid_max.
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => crate::eviction::MODEL_INODES,
            Signal::PidAvailable => crate::eviction::MODEL_PID_MAX,
        };
        let modelled = crate::usage::available(
            sig,
            capacity,
            system_memory,
            memory_used,
            storage_used,
            pids_used,
        );
        let available = overrides
            .get(sig.name())
            .copied()
            .unwrap_or(modelled)
            .min(capacity);
        Some(Observation {
            available,
            capacity,
        })
    }
}

/// One eviction manager `synchronize`: observe the signals, report the conditions; evict the
/// pods over their local-storage limits (all of them, and nothing else this round); else when a
/// threshold acts, reclaim at node level first for disk signals (unused images deleted, then
/// re-measure: no eviction if no threshold is met any more), and evict at most one pod — the
/// first of the ranking that is not critical.
fn eviction_round(
    s: &Shared,
    mgr: &mut PodManager,
    thresholds: &[crate::eviction::Threshold],
    state: &mut crate::eviction::EvictionState,
    now: jiff::Timestamp,
) -> (crate::pods::SyncOutput, Option<NodeEvent>) {
    let ctx = &s.ctx;
    let mut machine = lock(&ctx.machine);
    machine.advance(now);
    // The container log manager's pass (`containerLogMonitorInterval`, 10 s like the eviction
    // manager's period): run in the same tick, just before the signals are observed.
    machine.rotate_logs(now, ctx.cfg.container_log);
    let round = {
        let observe = observe_signal(ctx, &machine, now);
        crate::eviction::synchronize(
            thresholds,
            observe,
            state,
            now,
            ctx.cfg.eviction.transition_period(),
        )
    };
    mgr.set_pressures(round.pressures.clone());
    *s.pressures.lock().unwrap_or_else(|p| p.into_inner()) = round.pressures.clone();
    let mut out = crate::pods::SyncOutput::default();
    // Local ephemeral-storage limits, with or without node pressure.
    let mut storage = mgr.local_storage(&machine, now);
    storage.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let mut evicted_any = false;
    for (uid, usage, st) in storage {
        if crate::eviction::is_critical(&usage) {
            continue;
        }
        let Some(message) = crate::eviction::local_storage_violation(&st) else {
            continue;
        };
        let evicted = mgr.evict(
            &uid,
            crate::eviction::IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS,
            message,
            false,
            now,
            &mut machine,
        );
        out.writes.extend(evicted.writes);
        out.next_wake = match (out.next_wake, evicted.next_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        evicted_any = true;
    }
    if evicted_any {
        return (out, None);
    }
    let Some(i) = round.act_on else {
        return (out, None);
    };
    let t = &thresholds[i];
    let node_event = NodeEvent {
        type_: names::EVENT_WARNING,
        reason: crate::eviction::EVENT_EVICTION_THRESHOLD_MET.into(),
        message: format!("Attempting to reclaim {}", t.signal.resource()),
    };
    // The eviction message reports what this round observed, before any reclaim.
    let Some(obs) = observe_signal(ctx, &machine, now)(t.signal) else {
        return (out, Some(node_event));
    };
    if crate::eviction::reclaims_at_node_level(t.signal) {
        // Dead containers hold nothing on the model's disk; unused images go, oldest use first.
        let in_use = machine.images_in_use();
        machine.images.detect(&in_use, now);
        let (delete, freed) = crate::images::select_unused(
            &machine.images,
            &in_use,
            u64::MAX,
            now,
            ctx.cfg.image_gc.minimum_gc_age,
        );
        machine.images.remove(&delete);
        tracing::info!(node = %ctx.name, images = delete.len(), freed, "eviction manager: deleted unused images");
        let observe = observe_signal(ctx, &machine, now);
        if !crate::eviction::still_needs_eviction(thresholds, observe) {
            tracing::info!(node = %ctx.name, resource = t.signal.resource(), "eviction manager: able to reduce resource pressure without evicting pods");
            return (out, Some(node_event));
        }
    }
    let mut candidates = mgr.eviction_candidates(t.signal, &machine, now);
    candidates.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let usages: Vec<_> = candidates.iter().map(|(_, u)| u.clone()).collect();
    let victim = crate::eviction::rank(t.signal, &usages)
        .into_iter()
        .find(|&k| !crate::eviction::is_critical(&usages[k]));
    let Some(k) = victim else {
        tracing::info!(node = %ctx.name, "eviction manager: unable to evict any pods from the node");
        return (out, Some(node_event));
    };
    let (uid, usage) = &candidates[k];
    let message = crate::eviction::eviction_message(
        t.signal,
        t.value.resolve(obs.capacity),
        obs.available,
        usage,
    );
    let tgps = mgr.termination_grace_period(uid);
    let grace =
        crate::eviction::eviction_grace(t.is_hard(), ctx.cfg.eviction.max_pod_grace_period, tgps);
    let evicted = mgr.evict(uid, grace, message, true, now, &mut machine);
    out.writes.extend(evicted.writes);
    out.next_wake = evicted.next_wake;
    (out, Some(node_event))
}

/// One periodic image GC pass (`GarbageCollect`, every 5 minutes): above the high threshold,
/// delete unused images until the low one is reached. Events: `FreeDiskSpaceFailed` when it
/// cannot free enough, and `ImageGCFailed` when a pass fails right after a failed one.
fn image_gc_round(s: &Shared, previous_failed: &mut bool, now: jiff::Timestamp) -> Vec<NodeEvent> {
    let ctx = &s.ctx;
    let policy = ctx.cfg.image_gc;
    // A high threshold of 100% turns image GC off.
    if policy.high_threshold_percent >= 100 {
        return Vec::new();
    }
    let mut machine = lock(&ctx.machine);
    machine.advance(now);
    let in_use = machine.images_in_use();
    machine.images.detect(&in_use, now);
    let obs = observe_signal(ctx, &machine, now)(crate::eviction::Signal::ImageFsAvailable);
    let Some(obs) = obs else {
        return Vec::new();
    };
    let pass = crate::images::gc_pass(
        &policy,
        &machine.images,
        &in_use,
        obs.capacity,
        obs.available,
        now,
    );
    machine.images.remove(&pass.delete);
    let mut events = Vec::new();
    match pass.failure {
        None => *previous_failed = false,
        Some(message) => {
            if message.starts_with("Failed to garbage collect") {
                events.push(NodeEvent {
                    type_: names::EVENT_WARNING,
                    reason: crate::images::REASON_FREE_DISK_SPACE_FAILED.into(),
                    message: message.clone(),
                });
            }
            if *previous_failed {
                events.push(NodeEvent {
                    type_: names::EVENT_WARNING,
                    reason: crate::images::REASON_IMAGE_GC_FAILED.into(),
                    message,
                });
            }
            *previous_failed = true;
        }
    }
    events
}

/// The node shutdown manager's reaction to logind's `PrepareForShutdown` signal: on `true` a
/// `NodeShutdown` event, the shutting-down flag (Ready=False at an immediate status update,
/// admission closed) and the pod manager's group walk; on `false` the cancellation event, the
/// flag cleared (Ready returns at the next periodic status update) and the inhibitor lock taken
/// again. Upstream processes one signal at a time and the group walk blocks its loop, so a
/// cancellation is taken in only once every group is done: pods already killed stay killed.
async fn shutdown_signal(s: &Shared, mgr: &mut PodManager) {
    let ctx = &s.ctx;
    let st = ctx.logind.state();
    let table = ctx.cfg.shutdown.priority_table();
    let event = if st.preparing_shutdown && !mgr.shutting_down() && !table.is_empty() {
        mgr.begin_shutdown(table);
        s.shutting_down
            .store(true, std::sync::atomic::Ordering::Relaxed);
        crate::shutdown::MSG_SHUTDOWN_DETECTED
    } else if !st.preparing_shutdown && mgr.shutdown_complete() {
        ctx.logind.release();
        mgr.cancel_shutdown();
        s.shutting_down
            .store(false, std::sync::atomic::Ordering::Relaxed);
        ctx.logind.inhibit(ctx.cfg.shutdown.period_requested());
        crate::shutdown::MSG_SHUTDOWN_CANCELLED
    } else {
        return;
    };
    s.node_events(&[NodeEvent {
        type_: names::EVENT_NORMAL,
        reason: crate::shutdown::EVENT_NODE_SHUTDOWN.into(),
        message: event.into(),
    }])
    .await;
    if mgr.shutting_down() {
        s.status_now.notify_one();
    }
}

/// Resolves the claims of pods not resolved yet to their volumes' unique names (a claim not bound
/// yet is tried again at the next pass). Volumes of CSI drivers are attachable; others are not.
async fn resolve_volumes(
    ctx: &KubeletContext,
    mgr: &mut PodManager,
    pods: &BTreeMap<String, Arc<Pod>>,
) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    for (uid, pod) in pods {
        let claims = crate::volumes::claim_volumes(pod);
        if claims.is_empty() || mgr.volumes.is_resolved(uid) {
            continue;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
        let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
        let mut out = Vec::new();
        for (vol, claim) in claims {
            let Ok(Some(c)) = pvcs.get_opt(&claim).await else {
                break;
            };
            let Some(pv_name) = c.spec.and_then(|s| s.volume_name).filter(|n| !n.is_empty()) else {
                break;
            };
            let Ok(Some(pv)) = pvs.get_opt(&pv_name).await else {
                break;
            };
            let unique = pv
                .spec
                .and_then(|s| s.csi)
                .map(|c| format!("kubernetes.io/csi/{}^{}", c.driver, c.volume_handle));
            out.push(crate::volumes::Resolved { name: vol, unique });
        }
        if out.len() == crate::volumes::claim_volumes(pod).len() {
            mgr.set_volumes_resolved(uid, out);
        }
    }
}

/// Whether `a` is a newer version of the object than `b` (resourceVersions are compared as numbers
/// when both are; otherwise the incoming one is taken).
fn is_newer(a: &Pod, b: &Pod) -> bool {
    let rv = |p: &Pod| {
        p.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    matches!((rv(a), rv(b)), (Some(x), Some(y)) if x > y)
}

async fn apply_write(
    s: &Shared,
    mgr: &mut PodManager,
    pods: &mut BTreeMap<String, Arc<Pod>>,
    w: PodWrite,
) {
    let client = s.ctx.client.clone();
    match w {
        PodWrite::Event(e) => s.recorder.pod_event(&e).await,
        PodWrite::Status {
            namespace,
            name,
            uid,
            status,
        } => {
            let api: Api<shared::Shared<Pod>> = Api::namespaced(client, &namespace);
            let patch = serde_json::json!({ "metadata": { "uid": uid }, "status": status });
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(shared::Shared(p)) => {
                    // Keep our view current so the next sync compares against what we wrote.
                    if p.metadata.uid.as_deref() == Some(uid.as_str()) {
                        mgr.status_written(&uid);
                        pods.insert(uid, p);
                    }
                }
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "status patch failed");
                    mgr.status_write_failed(&uid);
                }
            }
        }
        PodWrite::Delete {
            namespace,
            name,
            uid,
        } => {
            let api: Api<Pod> = Api::namespaced(client, &namespace);
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            if mgr.status_pending(&uid) {
                // The terminal status it follows was not stored: deleting now would remove a pod
                // the API still shows running. Both are sent again later.
                mgr.delete_failed(&uid);
                return;
            }
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                // Gone already, or another pod by now: nothing left to delete.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::debug!(pod = %name, error = %e, "final delete failed");
                    mgr.delete_failed(&uid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rv: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.resource_version = rv.map(String::from);
        p
    }

    #[test]
    fn a_watch_echo_never_replaces_a_newer_view() {
        // Held 12, the watch delivers the echo of write 11: keep 12.
        assert!(is_newer(&at(Some("12")), &at(Some("11"))));
        // Same or newer incoming versions are taken.
        assert!(!is_newer(&at(Some("12")), &at(Some("12"))));
        assert!(!is_newer(&at(Some("12")), &at(Some("13"))));
        // Numeric, not lexical: 9 < 10.
        assert!(!is_newer(&at(Some("9")), &at(Some("10"))));
        // Opaque versions from another server: take the incoming one.
        assert!(!is_newer(&at(Some("abc")), &at(Some("1"))));
        assert!(!is_newer(&at(None), &at(Some("1"))));
    }
}
