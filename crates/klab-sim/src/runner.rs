//! The virtual-time runner: builds the cluster on a memory store and a virtual clock, watches it
//! through the API as any client would, applies the manifests and the fault plan at their virtual
//! times, and hands the recorded observations to the pure trace / expectation / summary replays.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use klab_api::slim::Slim;
use klab_api::{Clock, DetRng};
use klab_apiserver::registry::{self, ResourceInfo};
use klab_cluster::Cluster;
use klab_store::memory::MemoryStore;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, WatchEvent, WatchParams,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::drain::{self, DrainOptions};
use crate::expect::{self, Verdict};
use crate::manifest::{Manifest, api_resource};
use crate::project::{EventFields, EventListFields, PodFields, PodListFields, Projected};
use crate::scenario::{Action, Check, PatchType, Propagation, Scenario, TaintSpec};
use crate::summary;
use crate::trace::{
    self, Attribution, Change, EventView, NodeView, PodView, Record, TraceLine, WorkloadView,
};

/// Why a run could not be carried out (as opposed to expectations failing).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    #[error("starting the cluster: {0}")]
    Cluster(String),
    #[error("{file}:{line}: step at {at} failed: {msg}")]
    Step {
        file: String,
        line: u64,
        at: String,
        msg: String,
    },
    #[error("{source_}: creating {what} failed: {msg}")]
    Manifest {
        source_: String,
        what: String,
        msg: String,
    },
    #[error("building the runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// Work that never lets virtual time advance (see `LIVELOCK_CHANGES`).
    #[error("{0}")]
    Livelock(String),
    /// A component panicked, failed or stopped: a klab bug, never a simulated fault.
    #[error("component failure at {at}: {failure}")]
    Component { at: String, failure: String },
}

/// Called right after `Cluster::start`, before anything is created: starts extra in-process
/// clients next to the cluster (a controller under test). They must talk to the cluster only
/// through `cluster.client(..)`, like every component.
pub type StartHook = Arc<dyn Fn(&Cluster) + Send + Sync>;

/// Command-line overrides.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Stops the run early (expectations after it are skipped).
    pub until: Option<Duration>,
    /// See [`StartHook`].
    pub on_start: Option<StartHook>,
    /// Changes of one workload within one virtual instant that make a livelock (default
    /// [`LIVELOCK_CHANGES`]).
    pub livelock_changes: Option<u32>,
    /// Where the run reports how far it is (`klab sim`'s progress bar); read by another thread,
    /// never by the run itself, so it cannot change what the run does.
    pub progress: Option<Arc<Progress>>,
}

/// How far a run is: virtual milliseconds reached and observations recorded so far.
#[derive(Debug, Default)]
pub struct Progress {
    pub virtual_ms: std::sync::atomic::AtomicU64,
    pub records: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("seed", &self.seed)
            .field("until", &self.until)
            .field("on_start", &self.on_start.is_some())
            .finish()
    }
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub seed: u64,
    /// Virtual time at which the run stopped.
    pub end: Duration,
    pub records: Vec<Record>,
    pub attribution: Attribution,
    pub lines: Vec<TraceLine>,
    pub verdict: Verdict,
    pub summary: String,
    /// The objects at the end of the run, as `klab why` reads them.
    pub snapshot: klab_why::Snapshot,
    /// The virtual instant the run started at (time 0 of the trace).
    pub epoch: jiff::Timestamp,
}

impl RunOutcome {
    pub fn trace_hash(&self) -> u64 {
        trace::hash(&self.lines)
    }
}

/// Runs a scenario on a fresh current-thread runtime with paused (virtual) time, whose own
/// random choices (the order in which a `watch` channel wakes its waiters) are seeded from the
/// run's seed, so that the run is a function of the scenario and its seed alone.
pub fn run_blocking(scenario: &Scenario, opts: &RunOptions) -> Result<RunOutcome, SimError> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all().start_paused(true);
    // `.cargo/config.toml` sets the cfg; a build whose RUSTFLAGS override it still compiles, but
    // its runs may differ where tokio picks among equals.
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(
        &opts.seed.unwrap_or(scenario.seed).to_le_bytes(),
    ));
    let rt = builder.build()?;
    rt.block_on(run(scenario, opts))
}

/// Shared between the watch tasks and the runner; every push happens on the one runtime thread.
#[derive(Default)]
struct Recorded {
    records: Vec<Record>,
    max_rv: u64,
    attr: Attribution,
    /// The virtual instant of the latest record, and how often each workload changed in it.
    instant: Duration,
    changes_in_instant: BTreeMap<(String, String, String), u32>,
    /// Set when one object changed so often in one instant that the run cannot be progressing.
    livelock: Option<String>,
    /// The label sets of the views, each kept once.
    labels: trace::LabelSets,
    /// The views' repeated texts, each kept once.
    syms: trace::Syms,
}

/// How often one workload may change within a single virtual instant before the run is declared
/// a livelock. Work takes no virtual time, so a loop that upstream would run at the speed of its
/// API calls (a kubelet rejecting pods the scheduler keeps binding to it) never lets virtual time
/// advance; this turns a hung run into a failure that names the loop. Legitimate bursts (a
/// 150 000-replica Deployment created at t = 0) change their workload's status far less often.
pub const LIVELOCK_CHANGES: u32 = 10_000;

#[derive(Clone)]
struct Recorder {
    clock: Clock,
    inner: Arc<Mutex<Recorded>>,
    livelock: Arc<tokio::sync::Notify>,
    livelock_changes: u32,
    progress: Option<Arc<Progress>>,
    /// Woken at every record, for `wait-for` steps.
    pushed: Arc<tokio::sync::Notify>,
    /// `(group, kind)` of the kinds recorded whole (`object:` expectations read them).
    full_kinds: Arc<Vec<(&'static str, &'static str)>>,
}

/// What one watch task observes.
#[derive(Clone, Copy, Debug)]
enum Watched {
    Node,
    Pod,
    CoreEvent,
    Workload(&'static str),
    Slice,
    Storage(&'static str),
    /// A kind watched only to record whole objects.
    Object,
}

impl Recorder {
    fn with<T>(&self, f: impl FnOnce(&mut Recorded) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    fn push(&self, rv: u64, change: Change) {
        let t = self.clock.elapsed();
        if let Some(p) = &self.progress {
            use std::sync::atomic::Ordering::Relaxed;
            p.virtual_ms
                .store(u64::try_from(t.as_millis()).unwrap_or(u64::MAX), Relaxed);
            p.records.fetch_add(1, Relaxed);
        }
        let looping = self.with(|r| {
            if r.instant != t {
                r.instant = t;
                r.changes_in_instant.clear();
            }
            let mut looping = false;
            if let Change::Workload {
                kind,
                namespace,
                name,
                ..
            } = &change
            {
                let key = (kind.clone(), namespace.clone(), name.clone());
                let n = r.changes_in_instant.entry(key).or_default();
                *n = n.saturating_add(1);
                if *n == self.livelock_changes && r.livelock.is_none() {
                    r.livelock = Some(format!(
                        "livelock at {}: {kind} {namespace}/{name} changed {n} times without virtual time advancing",
                        klab_api::clock::format_elapsed(t)
                    ));
                    looping = true;
                }
            }
            r.max_rv = r.max_rv.max(rv);
            r.records.push(Record { t, rv, change });
            looping
        });
        self.pushed.notify_waiters();
        if looping {
            self.livelock.notify_one();
        }
    }

    fn action(&self, text: String) {
        let rv = self.with(|r| r.max_rv);
        self.push(rv, Change::Action(text));
    }

    /// A line kubectl prints (a drain's progress) about `object`.
    fn kubectl(&self, object: String, text: String) {
        let rv = self.with(|r| r.max_rv);
        self.push(rv, Change::Kubectl { object, text });
    }

    fn user_rv(&self, obj: &DynamicObject) {
        if let Some(rv) = obj
            .metadata
            .resource_version
            .as_deref()
            .and_then(|s| s.parse().ok())
        {
            self.with(|r| r.attr.user_revisions.insert(rv));
        }
    }

    /// Whether objects of `ri` are kept whole, for `object:` expectations to read.
    fn keeps_whole(&self, ri: &ResourceInfo) -> bool {
        self.full_kinds
            .iter()
            .any(|(g, k)| *g == ri.group && *k == ri.kind)
    }

    fn observe(
        &self,
        ri: &'static ResourceInfo,
        what: Watched,
        value: Value,
        deleted: bool,
        modified: bool,
    ) {
        let rv = rv_num(&value);
        let meta = |k: &str| {
            value
                .pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let name = meta("name");
        let namespace = meta("namespace");
        if self.keeps_whole(ri) {
            self.push(
                rv,
                Change::Object {
                    kind: ri.kind.to_string(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    value: (!deleted).then(|| Arc::new(value.clone())),
                },
            );
        }
        let now = self.clock.now();
        let change = match what {
            Watched::Object => return,
            Watched::Node => Change::Node {
                name,
                view: (!deleted).then(|| {
                    let mut view = NodeView::from_object(&value, now);
                    view.labels = self.with(|r| r.labels.share(view.labels));
                    Box::new(view)
                }),
            },
            Watched::Pod => Change::Pod {
                namespace,
                name,
                view: (!deleted).then(|| {
                    let mut view = PodView::from_object(&value, now);
                    view.labels = self.with(|r| {
                        r.syms.share_pod(&mut view);
                        r.labels.share(view.labels.clone())
                    });
                    Box::new(view)
                }),
            },
            Watched::Workload(kind) => Change::Workload {
                kind: kind.into(),
                namespace,
                name,
                view: (!deleted).then(|| Box::new(WorkloadView::from_object(kind, &value))),
            },
            Watched::Slice => Change::Slice {
                namespace,
                name,
                view: (!deleted).then(|| Box::new(trace::SliceView::from_object(&value))),
            },
            Watched::Storage(kind) => Change::Storage {
                kind: kind.into(),
                namespace,
                name,
                view: (!deleted).then(|| Box::new(trace::StorageView::from_object(kind, &value))),
            },
            Watched::CoreEvent => {
                if deleted {
                    return;
                }
                let mut ev = EventView::from_core(&value);
                // A modification of an Event is a repeat (count bump); other edits are noise.
                if modified && ev.count <= 1 {
                    return;
                }
                self.with(|r| r.syms.share_event(&mut ev));
                Change::Event(Box::new(ev))
            }
        };
        self.push(rv, change);
    }
}

fn resource(api_version: &str, kind: &str) -> &'static ResourceInfo {
    registry::lookup_kind(api_version, kind).expect("klab serves every kind the runner watches")
}

/// Lists, then watches one resource across all namespaces until aborted. Objects are read as
/// JSON values, as the recorder uses them (no typed or `DynamicObject` decode in between), and
/// without their managed fields (pods and Events with only the fields their views read) unless
/// an `object:` expectation may read them ([`Decode`]).
async fn watch_loop(
    client: kube::Client,
    ri: &'static ResourceInfo,
    what: Watched,
    rec: Recorder,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    // Pods and Events are read with only what the recorder's views use (`project`).
    let decode = match what {
        _ if rec.keeps_whole(ri) => Decode::Whole,
        Watched::Pod => Decode::Pods,
        Watched::CoreEvent => Decode::Events,
        _ => Decode::Slim,
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(ri));
    let request = kube::core::Request::new(api.resource_url());
    let mut ready = Some(ready);
    let mut rv = String::new();
    let mut seen = 0u64;
    loop {
        if rv.is_empty() {
            let list = match request.list(&ListParams::default()) {
                Ok(req) => match decode {
                    Decode::Whole => list_as(&client, req, std::convert::identity).await,
                    Decode::Slim => list_as(&client, req, Slim::into_inner).await,
                    Decode::Pods => {
                        list_as::<Projected<PodListFields>>(&client, req, Projected::into_inner)
                            .await
                    }
                    Decode::Events => {
                        list_as::<Projected<EventListFields>>(&client, req, Projected::into_inner)
                            .await
                    }
                },
                Err(e) => Err(kube::Error::BuildRequest(e)),
            };
            match list {
                Ok(mut list) => {
                    let mut items = match list.get_mut("items").map(Value::take) {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    };
                    let key = |o: &Value| {
                        let m = |k: &str| {
                            o.pointer(&format!("/metadata/{k}"))
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        };
                        (m("namespace"), m("name"))
                    };
                    items.sort_by_cached_key(key);
                    for o in items {
                        // After a 410 relist, only what changed since the last event is new
                        // (objects deleted in the gap are not seen; the store's history is long
                        // enough in sim that this does not happen).
                        if rv_num(&o) > seen {
                            rec.observe(ri, what, o, false, false);
                        }
                    }
                    rv = list
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                }
                Err(e) => {
                    tracing::warn!("sim: listing {} failed: {e}", ri.plural);
                    rec.clock.sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
        }
        let stream = match request.watch(&WatchParams::default().timeout(290), &rv) {
            Ok(req) => match decode {
                Decode::Whole => watch_as(&client, req, std::convert::identity).await,
                Decode::Slim => watch_as(&client, req, Slim::into_inner).await,
                Decode::Pods => {
                    watch_as::<Projected<PodFields>>(&client, req, Projected::into_inner).await
                }
                Decode::Events => {
                    watch_as::<Projected<EventFields>>(&client, req, Projected::into_inner).await
                }
            },
            Err(e) => Err(kube::Error::BuildRequest(e)),
        };
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("sim: watching {} failed: {e}", ri.plural);
                rec.clock.sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        loop {
            let ev = match stream.try_next().await {
                Ok(Some(ev)) => ev,
                Ok(None) => break, // timeoutSeconds: watch again from `rv`
                Err(e) => {
                    // Back off in virtual time so a persistent error cannot spin at one instant.
                    tracing::warn!("sim: watch of {} failed: {e}", ri.plural);
                    rec.clock.sleep(Duration::from_secs(1)).await;
                    break;
                }
            };
            let (o, deleted, modified) = match ev {
                WatchEvent::Added(o) => (o, false, false),
                WatchEvent::Modified(o) => (o, false, true),
                WatchEvent::Deleted(o) => (o, true, false),
                WatchEvent::Bookmark(b) => {
                    rv = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Error(e) => {
                    tracing::warn!("sim: watch of {} ended: {}", ri.plural, e.message);
                    if e.code == 410 {
                        rv.clear(); // relist
                    }
                    break;
                }
            };
            seen = seen.max(rv_num(&o));
            if let Some(r) = o
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                rv = r.to_string();
            }
            rec.observe(ri, what, o, deleted, modified);
        }
    }
}

/// How a watch task decodes its objects.
#[derive(Clone, Copy)]
enum Decode {
    /// Whole, for `object:` expectations.
    Whole,
    /// Without managed fields.
    Slim,
    /// With only what the pod views read (`project::POD`).
    Pods,
    /// With only what an Event's line reads (`project::EVENT`).
    Events,
}

/// A list decoded as `T`, as a value.
async fn list_as<T: DeserializeOwned>(
    client: &kube::Client,
    req: http::Request<Vec<u8>>,
    value: fn(T) -> Value,
) -> kube::Result<Value> {
    client.request::<T>(req).await.map(value)
}

/// A watch whose objects are decoded as `T`, as one of values.
async fn watch_as<T: Clone + DeserializeOwned + 'static>(
    client: &kube::Client,
    req: http::Request<Vec<u8>>,
    value: fn(T) -> Value,
) -> kube::Result<BoxStream<'static, kube::Result<WatchEvent<Value>>>> {
    let events = client.request_events::<T>(req).await?;
    Ok(events
        .map(move |r| r.map(|e| event_value(e, value)))
        .boxed())
}

/// A watch event of a value decoded without some of its fields, as one of a value.
fn event_value<T>(ev: WatchEvent<T>, value: fn(T) -> Value) -> WatchEvent<Value> {
    match ev {
        WatchEvent::Added(o) => WatchEvent::Added(value(o)),
        WatchEvent::Modified(o) => WatchEvent::Modified(value(o)),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(value(o)),
        WatchEvent::Bookmark(b) => WatchEvent::Bookmark(b),
        WatchEvent::Error(e) => WatchEvent::Error(e),
    }
}

fn rv_num(o: &Value) -> u64 {
    o.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Runs a scenario on the current (paused, current-thread) runtime.
pub async fn run(sc: &Scenario, opts: &RunOptions) -> Result<RunOutcome, SimError> {
    let seed = opts.seed.unwrap_or(sc.seed);
    let clock = match sc.epoch {
        Some(e) => Clock::virtual_at(e),
        None => Clock::virtual_default(),
    };
    let store: klab_store::DynStorage = MemoryStore::new();
    let cluster = Cluster::start(
        store,
        clock.clone(),
        DetRng::seeded(seed),
        sc.cluster.clone(),
    )
    .await
    .map_err(|e| SimError::Cluster(e.to_string()))?;
    if let Some(hook) = &opts.on_start {
        hook(&cluster);
    }
    let client = cluster.admin_client();
    // The steps' requests go through the API path as a kubectl's do: refused while the API
    // server is stopped (`check_api_down_steps` refuses such plans up front; a drain started
    // before the stop runs on and sees its requests refused).
    let kubectl = cluster.kubectl_client();
    // The API server's request log is kept only when an expectation counts writes (it grows
    // with every request of the run).
    let waits = sc.steps.iter().filter_map(|s| match &s.action {
        Action::WaitFor { until, .. } => Some(&*until.0),
        _ => None,
    });
    let counts_writes = sc
        .expectations
        .iter()
        .chain(waits)
        .any(|e| matches!(e.check, Check::Writes { .. }));
    if counts_writes {
        cluster.api().metrics().record_requests();
    }
    let rec = Recorder {
        clock: clock.clone(),
        inner: Arc::new(Mutex::new(Recorded::default())),
        livelock: Arc::new(tokio::sync::Notify::new()),
        livelock_changes: opts.livelock_changes.unwrap_or(LIVELOCK_CHANGES),
        progress: opts.progress.clone(),
        pushed: Arc::new(tokio::sync::Notify::new()),
        full_kinds: Arc::new(sc.object_kinds.iter().map(|r| (r.group, r.kind)).collect()),
    };

    let mut watches: Vec<(&'static ResourceInfo, Watched)> = vec![
        (resource("v1", "Node"), Watched::Node),
        (resource("v1", "Pod"), Watched::Pod),
        // events.k8s.io/v1 is served as a view of the same Events, so one watch sees both the
        // kubelet's core/v1 Events and the scheduler's events.k8s.io ones.
        (resource("v1", "Event"), Watched::CoreEvent),
        (
            resource("discovery.k8s.io/v1", "EndpointSlice"),
            Watched::Slice,
        ),
        (
            resource("v1", "PersistentVolumeClaim"),
            Watched::Storage("PersistentVolumeClaim"),
        ),
        (
            resource("v1", "PersistentVolume"),
            Watched::Storage("PersistentVolume"),
        ),
        (
            resource("storage.k8s.io/v1", "VolumeAttachment"),
            Watched::Storage("VolumeAttachment"),
        ),
    ];
    for (av, kind) in trace::WORKLOAD_KINDS {
        watches.push((resource(av, kind), Watched::Workload(kind)));
    }
    // Kinds `object:` expectations read that nothing above watches.
    for ri in &sc.object_kinds {
        if !watches
            .iter()
            .any(|(w, _)| w.group == ri.group && w.kind == ri.kind)
        {
            watches.push((ri, Watched::Object));
        }
    }
    let mut tasks = Vec::new();
    let mut readies = Vec::new();
    for (ri, what) in watches {
        let (tx, rx) = tokio::sync::oneshot::channel();
        tasks.push(tokio::spawn(watch_loop(
            client.clone(),
            ri,
            what,
            rec.clone(),
            tx,
        )));
        readies.push(rx);
    }
    for r in readies {
        let _ = r.await;
    }

    let end = match opts.until {
        Some(u) if u < sc.run_for => u,
        _ => sc.run_for,
    };
    let drive = async {
        for m in &sc.manifests {
            create(&client, &rec, m).await?;
        }

        // How far a `wait-for` has pushed the rest of the plan.
        let mut shift = Duration::ZERO;
        let mut waits: Vec<Result<(), expect::Failure>> = Vec::new();
        for step in &sc.steps {
            let planned = step.at.saturating_add(shift);
            if planned > end {
                break;
            }
            sleep_to(&clock, planned).await;
            rec.action(step.action.describe());
            if let Action::WaitFor { until, timeout } = &step.action {
                let (held_at, outcome) =
                    wait_for(&cluster, &rec, &until.0, *timeout, end, step.line).await;
                shift = held_at.saturating_sub(step.at);
                waits.push(outcome);
                continue;
            }
            execute(&cluster, &kubectl, &rec, &step.action)
                .await
                .map_err(|msg| SimError::Step {
                    file: sc.path.display().to_string(),
                    line: step.line,
                    at: klab_api::clock::format_elapsed(planned),
                    msg,
                })?;
        }
        sleep_to(&clock, end).await;
        Ok::<_, SimError>(waits)
    };
    let livelock = rec.livelock.clone();
    let waits = tokio::select! {
        biased;
        _ = livelock.notified() => {
            for t in &tasks {
                t.abort();
            }
            let msg = rec.with(|r| r.livelock.clone()).unwrap_or_default();
            return Err(SimError::Livelock(msg));
        }
        r = drive => r?,
    };
    // Let the watchers drain what the last instant wrote, without advancing time.
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    for t in &tasks {
        t.abort();
    }
    if let Some(f) = cluster.health().first_failure() {
        let since = f.at.duration_since(clock.epoch()).unsigned_abs();
        return Err(SimError::Component {
            at: klab_api::clock::format_elapsed(since),
            failure: f.to_string(),
        });
    }
    // A component refused by the authorizer did not do what upstream's would: a klab bug, as a
    // panic is.
    if let Some((at, message)) = cluster.api().first_component_denial() {
        let since = at.duration_since(clock.epoch()).unsigned_abs();
        return Err(SimError::Component {
            at: klab_api::clock::format_elapsed(since),
            failure: format!(
                "refused by the authorizer: {message} (all refusals: {})",
                cluster.api().component_denials().join(", ")
            ),
        });
    }
    // The components are done: stopped, their informers and caches (most of the process's
    // memory in a big run) are dropped before the final read allocates the snapshot.
    cluster.stop_all_components();
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
    // What `klab why` would read at the end, for the summary's explanations (reads only: the
    // trace and the random draws are untouched).
    let mut settings = klab_why::Settings::default();
    for (name, value) in &sc.flags {
        let _ = settings.set_flag(name, value);
    }
    settings.known = true; // klab's defaults are upstream's, the scenario's flags applied
    let snapshot =
        klab_why::fetch::fetch_all(&client, "default", settings, Some(clock.now())).await;
    let requests = cluster.api().metrics().request_log();
    drop(cluster);

    let (mut records, attr) = rec.with(|r| (std::mem::take(&mut r.records), r.attr.clone()));
    records.retain(|r| r.t <= end);
    trace::sort_records(&mut records);
    let lines = trace::replay(&records, &attr);
    let mut verdict = expect::evaluate(
        &records,
        &lines,
        &requests,
        &attr,
        &sc.expectations,
        end,
        sc.run_for,
    );
    for w in waits {
        match w {
            Ok(()) => verdict.passed = verdict.passed.saturating_add(1),
            Err(f) => verdict.failures.push(f),
        }
    }
    verdict.failures.sort_by_key(|f| (f.at, f.line));
    let stuck =
        klab_why::explain_stuck_pods(&snapshot, klab_why::TimeStyle::Elapsed(clock.epoch()));
    let summary = summary::summarize(&records, &attr, end, &stuck);
    Ok(RunOutcome {
        snapshot,
        epoch: clock.epoch(),
        seed,
        end,
        records,
        attribution: attr,
        lines,
        verdict,
        summary,
    })
}

async fn sleep_to(clock: &Clock, at: Duration) {
    let now = clock.elapsed();
    if at > now {
        clock.sleep(at - now).await;
    }
}

/// Holds the plan until `until` holds, checked at every instant something is recorded (after
/// that instant's work has landed), or until `timeout` (or the end of the run) passes. Returns
/// when it ended and, if it timed out, the failure naming the step.
async fn wait_for(
    cluster: &Cluster,
    rec: &Recorder,
    until: &crate::scenario::Expectation,
    timeout: Duration,
    end: Duration,
    line: u64,
) -> (Duration, Result<(), expect::Failure>) {
    let clock = &rec.clock;
    let start = clock.elapsed();
    let deadline = start.saturating_add(timeout).min(end);
    let counts_writes = matches!(until.check, Check::Writes { .. });
    let mut live = expect::Live::default();
    loop {
        // Let the instant's work land before looking (as an expectation "at" sees its instant).
        for _ in 0..64 {
            tokio::task::yield_now().await;
        }
        let now = clock.elapsed();
        let requests = if counts_writes {
            cluster.api().metrics().request_log()
        } else {
            Vec::new()
        };
        rec.with(|r| live.advance(&r.records, &r.attr));
        match live.check(&requests, until, start, now) {
            Ok(()) => {
                rec.action(format!(
                    "wait-for held after {}",
                    klab_api::clock::format_elapsed(now.saturating_sub(start))
                ));
                return (now, Ok(()));
            }
            Err(detail) if now >= deadline => {
                rec.action(format!(
                    "wait-for timed out after {}",
                    klab_api::clock::format_elapsed(now.saturating_sub(start))
                ));
                let failure = expect::Failure {
                    line,
                    text: until.text.clone(),
                    at: now,
                    detail: format!(
                        "wait-for did not hold within {}: {detail}",
                        klab_api::clock::format_elapsed(timeout)
                    ),
                };
                return (now, Err(failure));
            }
            Err(_) => {}
        }
        let pushed = rec.pushed.notified();
        tokio::select! {
            _ = pushed => {}
            _ = sleep_to(clock, deadline) => {}
        }
    }
}

/// The URL of one object (and subresource), as kubectl builds it.
fn object_path(
    ri: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    sub: Option<&str>,
) -> String {
    let mut p = if ri.group.is_empty() {
        format!("/api/{}", ri.version)
    } else {
        format!("/apis/{}/{}", ri.group, ri.version)
    };
    if let (true, Some(ns)) = (ri.namespaced, namespace) {
        p.push_str(&format!("/namespaces/{ns}"));
    }
    p.push_str(&format!("/{}/{name}", ri.plural));
    if let Some(s) = sub {
        p.push('/');
        p.push_str(s);
    }
    p
}

/// What kubectl prints for a refused request.
fn server_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("Error from server ({}): {}", s.reason, s.message),
        other => format!("error: {other}"),
    }
}

async fn create(client: &kube::Client, rec: &Recorder, m: &Manifest) -> Result<(), SimError> {
    match m.create(client).await {
        Ok(obj) => {
            rec.user_rv(&obj);
            Ok(())
        }
        Err(e) => Err(SimError::Manifest {
            source_: m.source.clone(),
            what: m.display(),
            msg: e.to_string(),
        }),
    }
}

fn dyn_api(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let ar = api_resource(resource(api_version, kind));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

fn taint_matches(spec: &TaintSpec, t: &Value) -> bool {
    let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("");
    s("key") == spec.key && spec.effect.as_deref().is_none_or(|e| e == s("effect"))
}

/// Carries out one step; errors are returned as messages for the step's line.
/// `kubectl annotate pod NAME --overwrite KEY=VALUE`, or `-l SELECTOR` for every pod it selects
/// (in name order); a pod listed by the selector may be gone before its patch, as between
/// `kubectl annotate -l`'s list and its patches.
async fn annotate(
    client: &kube::Client,
    rec: &Recorder,
    namespace: &str,
    pod: Option<&str>,
    selector: Option<&str>,
    key: &str,
    value: &str,
) -> Result<(), String> {
    let pods = dyn_api(client, "v1", "Pod", Some(namespace));
    let mut targets: Vec<String> = match (pod, selector) {
        (Some(p), _) => vec![p.to_string()],
        (None, Some(sel)) => pods
            .list(&ListParams::default().labels(sel))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect(),
        (None, None) => Vec::new(),
    };
    targets.sort();
    for name in targets {
        let r = pods
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
            )
            .await;
        match r {
            Err(kube::Error::Api(s)) if s.code == 404 && pod.is_none() => {}
            r => rec.user_rv(&r.map_err(|e| e.to_string())?),
        }
    }
    Ok(())
}

async fn execute(
    cluster: &Cluster,
    client: &kube::Client,
    rec: &Recorder,
    action: &Action,
) -> Result<(), String> {
    let nodes = dyn_api(client, "v1", "Node", None);
    let pp = PatchParams::default();
    let patched = |r: Result<DynamicObject, kube::Error>| -> Result<(), String> {
        let o = r.map_err(|e| e.to_string())?;
        rec.user_rv(&o);
        Ok(())
    };
    match action {
        Action::Fault { node, fault } => cluster
            .apply_fault(node, *fault)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::Taint { node, taint } | Action::Untaint { node, taint } => {
            let n = nodes.get(node).await.map_err(|e| e.to_string())?;
            let mut taints: Vec<Value> = n
                .data
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if matches!(action, Action::Taint { .. }) {
                // kubectl: re-tainting the same key and effect overwrites the value.
                taints.retain(|t| !taint_matches(taint, t));
                let mut t = json!({"key": taint.key, "effect": taint.effect});
                if let Some(v) = &taint.value {
                    t["value"] = json!(v);
                }
                taints.push(t);
            } else {
                let before = taints.len();
                taints.retain(|t| !taint_matches(taint, t));
                if taints.len() == before {
                    return Err(format!(
                        "taint {taint:?} not found on node {node}",
                        taint = taint.to_string()
                    ));
                }
            }
            patched(
                nodes
                    .patch(
                        node,
                        &pp,
                        &Patch::Merge(json!({"spec": {"taints": taints}})),
                    )
                    .await,
            )
        }
        Action::Cordon {
            node,
            unschedulable,
        } => {
            let v = if *unschedulable {
                json!(true)
            } else {
                Value::Null
            };
            patched(
                nodes
                    .patch(
                        node,
                        &pp,
                        &Patch::Merge(json!({"spec": {"unschedulable": v}})),
                    )
                    .await,
            )
        }
        Action::Drain { node, opts } => {
            // kubectl drain runs on its own, beside the timeline.
            tokio::spawn(run_drain(
                client.clone(),
                rec.clock.clone(),
                rec.clone(),
                node.clone(),
                opts.clone(),
            ));
            Ok(())
        }
        Action::DeleteNode { node } => {
            rec.with(|r| r.attr.user_deleted_nodes.insert(node.clone()));
            nodes
                .delete(node, &DeleteParams::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        Action::Pressure {
            node,
            fault,
            available,
        } => cluster
            .apply_pressure(node, fault, available.as_deref())
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::NodeCondition {
            node,
            type_,
            report,
        } => cluster
            .set_node_condition(node, type_, report.clone())
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::ImagePull {
            node,
            image,
            fail,
            message,
        } => cluster
            .image_pull_fault(node.as_deref(), image, *fail, message.as_deref())
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::RebootWith {
            node,
            cpu,
            memory,
            labels,
        } => cluster
            .reboot_node_with(node, cpu.as_deref(), memory.as_deref(), labels.clone())
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::Probe {
            namespace,
            pod,
            selector,
            container,
            kind,
            value,
        } => {
            let key = format!("probe.klab.dev/{container}.{kind}");
            annotate(
                client,
                rec,
                namespace,
                pod.as_deref(),
                selector.as_deref(),
                &key,
                value,
            )
            .await
        }
        Action::Rejoin { node } => cluster
            .rejoin_node(node)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::Component { component, op } => cluster
            .control_component(component, *op)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::Brownout {
            component,
            brownout,
        } => cluster
            .brownout(component, *brownout)
            .map_err(|e| e.to_string()),
        Action::ClockSkew { node, offset } => cluster
            .set_clock_skew(node, *offset)
            .map_err(|e| e.to_string()),
        Action::VolumeFault { name, fail } => cluster
            .volume_fault(name, *fail)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::AddNode { spec } => cluster
            .add_node(spec)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Action::RemoveNode { node } => {
            rec.with(|r| r.attr.removed_nodes.insert(node.clone()));
            cluster.remove_node(node).await.map_err(|e| e.to_string())
        }
        Action::DeletePod {
            namespace,
            name,
            grace,
            force,
        } => {
            let pods = dyn_api(client, "v1", "Pod", Some(namespace));
            let dp = DeleteParams {
                grace_period_seconds: grace.map(|g| g as u32),
                ..Default::default()
            };
            if *force || *grace == Some(0) {
                rec.with(|r| {
                    r.attr
                        .user_force_deleted
                        .insert((namespace.clone(), name.clone()))
                });
            }
            let res = pods.delete(name, &dp).await.map_err(|e| e.to_string())?;
            if let Some(o) = res.left() {
                rec.user_rv(&o);
            }
            Ok(())
        }
        Action::DeletePods {
            namespace,
            selector,
            on_node,
            grace,
            force,
        } => {
            let pods = dyn_api(client, "v1", "Pod", Some(namespace));
            let mut lp = ListParams::default().labels(selector);
            if let Some(n) = on_node {
                lp = lp.fields(&format!("spec.nodeName={n}"));
            }
            let list = pods.list(&lp).await.map_err(|e| e.to_string())?;
            let mut victims: Vec<String> = list
                .items
                .iter()
                .filter(|p| {
                    on_node.as_ref().is_none_or(|n| {
                        p.data.pointer("/spec/nodeName").and_then(Value::as_str) == Some(n.as_str())
                    })
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            victims.sort();
            // As `kubectl delete pods -l …`: "No resources found" is not an error, and neither is
            // a pod that went away in the meantime.
            let dp = DeleteParams {
                grace_period_seconds: grace.map(|g| g as u32),
                ..Default::default()
            };
            for name in victims {
                if *force || *grace == Some(0) {
                    rec.with(|r| {
                        r.attr
                            .user_force_deleted
                            .insert((namespace.clone(), name.clone()))
                    });
                }
                // kubectl ignores NotFound when deleting by selector (`--ignore-not-found`
                // defaults to true with `-l`): a pod can go between the list and its delete.
                match pods.delete(&name, &dp).await {
                    Ok(r) => {
                        if let Some(o) = r.left() {
                            rec.user_rv(&o);
                        }
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok(())
        }
        Action::Patch {
            resource,
            namespace,
            name,
            patch,
            patch_type,
            subresource,
        } if *patch_type != PatchType::Merge || subresource.is_some() => {
            let path = object_path(resource, namespace.as_deref(), name, subresource.as_deref());
            let body = serde_json::to_vec(patch).map_err(|e| e.to_string())?;
            let req = http::Request::patch(path)
                .header(http::header::CONTENT_TYPE, patch_type.content_type())
                .body(body)
                .map_err(|e| e.to_string())?;
            patched(client.request::<DynamicObject>(req).await)
        }
        Action::Patch {
            resource,
            namespace,
            name,
            patch,
            ..
        } => {
            let ar = api_resource(resource);
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            patched(api.patch(name, &pp, &Patch::Merge(patch)).await)
        }
        Action::Delete {
            resource,
            namespace,
            name,
            propagation,
            grace,
        } => {
            let ar = api_resource(resource);
            let api: Api<DynamicObject> = match namespace {
                Some(ns) if resource.namespaced => Api::namespaced_with(client.clone(), ns, &ar),
                _ => Api::all_with(client.clone(), &ar),
            };
            let dp = DeleteParams {
                grace_period_seconds: grace.and_then(|g| u32::try_from(g).ok()),
                propagation_policy: propagation.map(|p| match p {
                    Propagation::Foreground => kube::api::PropagationPolicy::Foreground,
                    Propagation::Background => kube::api::PropagationPolicy::Background,
                    Propagation::Orphan => kube::api::PropagationPolicy::Orphan,
                }),
                ..Default::default()
            };
            if resource.kind == "Pod" && *grace == Some(0) {
                let ns = namespace.clone().unwrap_or_default();
                rec.with(|r| r.attr.user_force_deleted.insert((ns, name.clone())));
            }
            if resource.kind == "Node" {
                rec.with(|r| r.attr.user_deleted_nodes.insert(name.clone()));
            }
            match api.delete(name, &dp).await {
                Ok(r) => {
                    if let Some(o) = r.left() {
                        rec.user_rv(&o);
                    }
                }
                // A refusal is what the scenario observes, as kubectl prints it.
                Err(e @ kube::Error::Api(_)) => rec.kubectl(
                    crate::scenario::object_label(resource, namespace.as_deref(), name),
                    server_error(&e),
                ),
                Err(e) => return Err(e.to_string()),
            }
            Ok(())
        }
        Action::Evict {
            namespace,
            name,
            grace,
        } => {
            let api: Api<k8s_openapi::api::core::v1::Pod> =
                Api::namespaced(client.clone(), namespace);
            let ep = kube::api::EvictParams {
                delete_options: grace.map(|g| DeleteParams {
                    grace_period_seconds: u32::try_from(g).ok(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            match api.evict(name, &ep).await {
                Ok(_) => {}
                // A budget's 429 (or any refusal) is the step's outcome: into the trace.
                Err(e @ kube::Error::Api(_)) => {
                    rec.kubectl(format!("Pod {namespace}/{name}"), server_error(&e))
                }
                Err(e) => return Err(e.to_string()),
            }
            Ok(())
        }
        // Run by the drive loop itself (it moves the rest of the plan).
        Action::WaitFor { .. } => Ok(()),
        Action::Scale {
            kind,
            namespace,
            name,
            replicas,
        } => {
            let api = dyn_api(client, "apps/v1", kind, Some(namespace));
            patched(
                api.patch(
                    name,
                    &pp,
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await,
            )
        }
        Action::Apply { manifests } => {
            for m in manifests {
                let o = m
                    .create(client)
                    .await
                    .map_err(|e| format!("creating {}: {e}", m.display()))?;
                rec.user_rv(&o);
            }
            Ok(())
        }
        // What kubectl prints is the step's outcome, errors included: it goes into the trace.
        Action::Logs {
            namespace,
            name,
            container,
            tail,
        } => {
            let out =
                crate::kubectl::logs(client, namespace, name, container.as_deref(), *tail).await;
            for l in out {
                rec.action(format!("Pod {namespace}/{name} logs: {l}"));
            }
            Ok(())
        }
        Action::Usage {
            namespace,
            pod,
            selector,
            container,
            value,
        } => {
            let key = format!("usage.klab.dev/{container}");
            annotate(
                client,
                rec,
                namespace,
                pod.as_deref(),
                selector.as_deref(),
                &key,
                value,
            )
            .await
        }
        Action::Exec {
            namespace,
            name,
            container,
            command,
        } => {
            let router = cluster.api().router_as(klab_apiserver::Identity::admin());
            let out =
                crate::kubectl::exec(router, namespace, name, container.as_deref(), command).await;
            for l in out {
                rec.action(format!("Pod {namespace}/{name} exec: {l}"));
            }
            Ok(())
        }
    }
}

/// Runs `kubectl drain NODE` (see [`crate::drain`]): its output lines go into the trace as
/// `kubectl` lines; it runs beside the scenario's timeline, on the virtual clock.
async fn run_drain(
    client: kube::Client,
    clock: Clock,
    rec: Recorder,
    node: String,
    opts: DrainOptions,
) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::EvictParams;
    let object = format!("Node {node}");
    let out = |s: String| rec.kubectl(object.clone(), s);
    let start = clock.elapsed();
    let nodes = dyn_api(&client, "v1", "Node", None);
    // 1. Cordon.
    match nodes.get(&node).await {
        Ok(n)
            if n.data
                .pointer("/spec/unschedulable")
                .and_then(Value::as_bool)
                == Some(true) =>
        {
            out(format!("node/{node} already cordoned"));
        }
        Ok(_) => {
            match nodes
                .patch(
                    &node,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"unschedulable": true}})),
                )
                .await
            {
                Ok(o) => {
                    rec.user_rv(&o);
                    out(format!("node/{node} cordoned"));
                }
                Err(e) => return out(format!("error: {e}")),
            }
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return out(format!(
                "Error from server (NotFound): nodes \"{node}\" not found"
            ));
        }
        Err(e) => return out(format!("error: {e}")),
    }
    // 2. The node's pods, through kubectl's filters.
    let pods_api = dyn_api(&client, "v1", "Pod", None);
    let mut lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    if let Some(sel) = &opts.pod_selector {
        lp = lp.labels(sel);
    }
    let list = match pods_api.list(&lp).await {
        Ok(l) => l.items,
        Err(e) => return out(format!("error: {e}")),
    };
    let values: Vec<Value> = list
        .iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    let mut daemonsets: BTreeMap<(String, String), bool> = BTreeMap::new();
    for p in &values {
        let ns = p
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        for r in p
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if r.get("kind").and_then(Value::as_str) == Some("DaemonSet") {
                let name = r
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let exists = dyn_api(&client, "apps/v1", "DaemonSet", Some(ns))
                    .get(&name)
                    .await
                    .is_ok();
                daemonsets.insert((ns.to_string(), name), exists);
            }
        }
    }
    let ds_exists = |ns: &str, name: &str| {
        daemonsets
            .get(&(ns.to_string(), name.to_string()))
            .copied()
            .unwrap_or(false)
    };
    let now = clock.now();
    let filtered: Vec<(Value, drain::Status)> = values
        .into_iter()
        .map(|p| {
            let s = drain::filter(&p, &opts, now, &ds_exists);
            (p, s)
        })
        .collect();
    let (to_evict, warning, errors) = drain::plan(&filtered);
    if !errors.is_empty() {
        let agg = if errors.len() == 1 {
            errors[0].clone()
        } else {
            format!("[{}]", errors.join(", "))
        };
        out(format!(
            "error: unable to drain node {node:?} due to error: {agg}, continuing command..."
        ));
        out("There are pending nodes to be drained:".into());
        out(format!(" {node}"));
        out(format!("error: {agg}"));
        return;
    }
    if let Some(w) = warning {
        out(format!("Warning: {w}"));
    }
    // 3. Evict (or delete) each pod and wait for it to go.
    let deadline = opts.timeout.map(|t| start.saturating_add(t));
    let one = |p: Value| {
        let client = client.clone();
        let clock = clock.clone();
        let opts = opts.clone();
        let out = &out;
        async move {
            let ns = p
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let name = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let uid = p
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let api: Api<Pod> = Api::namespaced(client, &ns);
            let timed_out = |clock: &Clock| deadline.is_some_and(|d| clock.elapsed() >= d);
            loop {
                if timed_out(&clock) {
                    return Err(format!(
                        "drain did not complete within {}s",
                        opts.timeout.unwrap_or_default().as_secs()
                    ));
                }
                let dp = DeleteParams {
                    grace_period_seconds: opts
                        .grace_period
                        .filter(|g| *g >= 0)
                        .and_then(|g| u32::try_from(g).ok()),
                    ..Default::default()
                };
                let r = if opts.disable_eviction {
                    api.delete(&name, &dp).await.map(|_| ())
                } else {
                    out(format!("evicting pod {ns}/{name}"));
                    let ep = EvictParams {
                        delete_options: Some(dp),
                        ..Default::default()
                    };
                    api.evict(&name, &ep).await.map(|_| ())
                };
                match r {
                    Ok(()) => break,
                    Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 429 => {
                        out(format!(
                            "error when evicting pods/{name:?} -n {ns:?} (will retry after 5s): {}",
                            s.message
                        ));
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    }
                    Err(e) => {
                        return Err(format!("error when evicting pods/{name:?} -n {ns:?}: {e}"));
                    }
                }
            }
            let verb = if opts.disable_eviction {
                "deleted"
            } else {
                "evicted"
            };
            loop {
                match api.get(&name).await {
                    Err(kube::Error::Api(s)) if s.code == 404 => break,
                    Ok(cur) if cur.metadata.uid.as_deref() != Some(uid.as_str()) => break,
                    Ok(cur) => {
                        let v = serde_json::to_value(&cur).unwrap_or(Value::Null);
                        if drain::should_skip(&v, opts.skip_wait_for_delete_timeout, clock.now()) {
                            out(format!(
                                "pod {name:?} has DeletionTimestamp older than {} seconds, skipping",
                                opts.skip_wait_for_delete_timeout
                            ));
                            return Ok(());
                        }
                    }
                    Err(_) => {}
                }
                if timed_out(&clock) {
                    return Err(format!(
                        "drain did not complete within {}s",
                        opts.timeout.unwrap_or_default().as_secs()
                    ));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            out(format!("pod/{name} {verb}"));
            Ok(())
        }
    };
    let results = futures::future::join_all(to_evict.into_iter().map(one)).await;
    let errs: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    if errs.is_empty() {
        out(format!("node/{node} drained"));
    } else {
        let agg = if errs.len() == 1 {
            errs[0].clone()
        } else {
            format!("[{}]", errs.join(", "))
        };
        out(format!(
            "There are pending pods in node {node:?} when an error occurred: {agg}"
        ));
        out(format!(
            "error: unable to drain node {node:?} due to error: {agg}, continuing command..."
        ));
        out("There are pending nodes to be drained:".into());
        out(format!(" {node}"));
        out(format!("error: {agg}"));
    }
}
