//! The trace: what the API showed, one line per observable change, in the order of the store's
//! revisions, with virtual timestamps and the component that made the change.
//!
//! The runner only records raw observations ([`Record`]s: an object's kubectl-relevant view after
//! a watch event, or an Event); everything here is a pure replay of those records, so the same
//! records always give the same trace, expectations and summary, and the diff rules are table-tested
//! without a cluster.
//!
//! Attribution ("who changed it") is derived from what the API shows, like a human reading
//! `kubectl get -w` would: condition reasons (`NodeStatusUnknown` is the node lifecycle controller),
//! taint keys, `DisruptionTarget` reasons, owner references, and the revisions of the runner's own
//! writes (`kubectl`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use klab_api::names;
use klab_apiserver::registry;
use serde_json::{Value, json};

/// Trace component of scenario steps (faults and the runner's own API actions).
pub const COMPONENT_SIM: &str = "sim";
/// The component EndpointSlice changes are attributed to.
pub const ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller";
/// Trace component of the runner's own API writes (what a kubectl user does).
pub const COMPONENT_KUBECTL: &str = "kubectl";
/// Who deletes the Node of a machine removed for good (`remove-node`).
pub const COMPONENT_CLOUD_NODE_LIFECYCLE: &str = "cloud-node-lifecycle-controller";

/// One observation, as recorded by the runner.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Virtual time since the start of the run.
    pub t: Duration,
    /// Store revision of the change (global order); actions take the last revision seen.
    pub rv: u64,
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    // The views are boxed: a run keeps every change, and an inline pod view made every record
    // (whatever its kind) about 300 bytes; an inline storage view, 168 (boxed: 112).
    Node {
        name: String,
        view: Option<Box<NodeView>>,
    },
    Pod {
        namespace: String,
        name: String,
        view: Option<Box<PodView>>,
    },
    Workload {
        kind: String,
        namespace: String,
        name: String,
        view: Option<Box<WorkloadView>>,
    },
    Event(Box<EventView>),
    /// An EndpointSlice (its endpoints, keyed by pod).
    Slice {
        namespace: String,
        name: String,
        view: Option<Box<SliceView>>,
    },
    /// A storage object (PersistentVolumeClaim, PersistentVolume, VolumeAttachment): the columns
    /// `kubectl get` shows that matter to failover.
    Storage {
        kind: String,
        namespace: String,
        name: String,
        view: Option<Box<StorageView>>,
    },
    /// A scenario step, described kubectl-like.
    Action(String),
    /// A line kubectl printed (a drain's progress), under the object the command is about.
    Kubectl {
        object: String,
        text: String,
    },
    /// The whole object, for kinds a scenario's `object:` expectations read (no trace line).
    Object {
        kind: String,
        namespace: String,
        name: String,
        value: Option<std::sync::Arc<Value>>,
    },
}

/// One endpoint of a slice as the trace shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointView {
    pub node: String,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

impl EndpointView {
    fn columns(&self) -> String {
        format!(
            "{} ready={} serving={} terminating={}",
            if self.node.is_empty() {
                "<none>"
            } else {
                &self.node
            },
            self.ready,
            self.serving,
            self.terminating
        )
    }
}

/// A storage object's traced columns and who wrote the change (derived from the object).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageView {
    /// `Bound pvc-… 1Gi RWO standard` (claim), `Bound default/data-web-0 Delete` (volume),
    /// `pvc-… n2 attached=true` (attachment).
    pub columns: String,
    /// A volume provisioned by a CSI driver (its create and delete are the driver's).
    pub provisioner: Option<String>,
    /// The VolumeAttachment's attacher.
    pub attacher: Option<String>,
}

impl StorageView {
    pub fn from_object(kind: &str, obj: &Value) -> StorageView {
        let modes = |p: &str| {
            let m: Vec<&str> = obj
                .pointer(p)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect();
            m.join(",")
        };
        let deleting = obj.pointer("/metadata/deletionTimestamp").is_some();
        let phase = |p: &str| {
            if deleting {
                "Terminating".to_string()
            } else {
                s(obj, p).to_string()
            }
        };
        match kind {
            "PersistentVolumeClaim" => StorageView {
                columns: format!(
                    "{} {} {} {} {}",
                    or_none(&phase("/status/phase")),
                    or_none(s(obj, "/spec/volumeName")),
                    or_none(s(obj, "/status/capacity/storage")),
                    or_none(&modes("/status/accessModes")),
                    or_none(s(obj, "/spec/storageClassName")),
                ),
                ..Default::default()
            },
            "PersistentVolume" => {
                let claim = match s(obj, "/spec/claimRef/name") {
                    "" => String::new(),
                    n => format!("{}/{n}", s(obj, "/spec/claimRef/namespace")),
                };
                StorageView {
                    columns: format!(
                        "{} {} {} {} {}",
                        or_none(&phase("/status/phase")),
                        or_none(&claim),
                        or_none(s(obj, "/spec/capacity/storage")),
                        or_none(&modes("/spec/accessModes")),
                        or_none(s(obj, "/spec/persistentVolumeReclaimPolicy")),
                    ),
                    provisioner: obj
                        .pointer("/metadata/annotations/pv.kubernetes.io~1provisioned-by")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    ..Default::default()
                }
            }
            _ => StorageView {
                columns: format!(
                    "{} {} attached={}{}",
                    or_none(s(obj, "/spec/source/persistentVolumeName")),
                    or_none(s(obj, "/spec/nodeName")),
                    obj.pointer("/status/attached")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    if deleting { " Terminating" } else { "" },
                ),
                attacher: Some(s(obj, "/spec/attacher").to_string()),
                ..Default::default()
            },
        }
    }
}

fn or_none(v: &str) -> &str {
    if v.is_empty() { "<none>" } else { v }
}

/// An EndpointSlice: its Service and endpoints by pod name (address when no pod is named).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SliceView {
    pub service: String,
    pub endpoints: BTreeMap<String, EndpointView>,
}

impl SliceView {
    pub fn from_object(obj: &Value) -> SliceView {
        let mut endpoints = BTreeMap::new();
        for e in obj
            .pointer("/endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = match s(e, "/targetRef/name") {
                "" => s(e, "/addresses/0").to_string(),
                n => n.to_string(),
            };
            let b = |p: &str| e.pointer(p).and_then(Value::as_bool).unwrap_or(false);
            endpoints.insert(
                key,
                EndpointView {
                    node: s(e, "/nodeName").to_string(),
                    ready: b("/conditions/ready"),
                    serving: b("/conditions/serving"),
                    terminating: b("/conditions/terminating"),
                },
            );
        }
        SliceView {
            service: labels(obj)
                .get("kubernetes.io/service-name")
                .cloned()
                .unwrap_or_default(),
            endpoints,
        }
    }
}

impl Change {
    /// Sort rank within one revision: the runner's actions come after the changes that precede
    /// them at the same revision.
    fn rank(&self) -> u8 {
        match self {
            Change::Action(_) | Change::Kubectl { .. } => 1,
            _ => 0,
        }
    }
}

/// Sorts records into trace order: by revision, actions after the revision they saw, otherwise
/// in arrival order (stable).
pub fn sort_records(records: &mut [Record]) {
    records.sort_by_key(|r| (r.rv, r.change.rank()));
}

/// An object's labels in a view: shared, since a run keeps every change and the pods of one
/// template (and the changes of one object) carry the same labels — see [`LabelSets`].
pub type Labels = Arc<BTreeMap<String, String>>;

/// The label sets a run has seen, each kept once: views hold the shared copy, so the labels of
/// a thousand pods of one ReplicaSet are one map, not a thousand (nor ten thousand: one per
/// change).
#[derive(Debug, Default)]
pub struct LabelSets {
    seen: BTreeSet<Labels>,
}

impl LabelSets {
    /// The kept copy of `labels` (`labels` itself, kept, when it is the first of its content).
    pub fn share(&mut self, labels: Labels) -> Labels {
        if let Some(kept) = self.seen.get(&labels) {
            return kept.clone();
        }
        self.seen.insert(labels.clone());
        labels
    }
}

/// A short text that many records repeat (`Running`, `1/1`, a node's name, `Normal`, `Pulled`):
/// shared through [`Syms`], so a run holds each distinct text once however many records carry
/// it. Reads as a `str`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sym(Arc<str>);

impl Sym {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Sym {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym(Arc::from(s))
    }
}

impl From<String> for Sym {
    fn from(s: String) -> Sym {
        Sym(Arc::from(s))
    }
}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<String> for Sym {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Sym> for String {
    fn eq(&self, other: &Sym) -> bool {
        **self == *other.0
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

/// The texts a run's views share ([`Sym`]), each kept once, as [`LabelSets`] keeps label maps.
/// A run of 150 000 pods records well over a million pod and Event views; their statuses, node
/// names, owners and reasons are a few thousand texts.
#[derive(Debug, Default)]
pub struct Syms {
    seen: std::collections::HashSet<Arc<str>>,
}

impl Syms {
    /// The kept copy of `text`.
    pub fn get(&mut self, text: &str) -> Sym {
        if let Some(kept) = self.seen.get(text) {
            return Sym(kept.clone());
        }
        let kept: Arc<str> = Arc::from(text);
        self.seen.insert(kept.clone());
        Sym(kept)
    }

    /// `view` holding the kept copies of its shared texts.
    pub fn share_pod(&mut self, view: &mut PodView) {
        let owner = view.owner.as_mut().map(|(k, n)| [k, n]);
        for t in [
            &mut view.ready,
            &mut view.status,
            &mut view.ready_condition,
            &mut view.node,
        ]
        .into_iter()
        .chain(owner.into_iter().flatten())
        {
            *t = self.get(t);
        }
    }

    /// `view` holding the kept copies of its shared texts.
    pub fn share_event(&mut self, view: &mut EventView) {
        for t in [
            &mut view.component,
            &mut view.type_,
            &mut view.reason,
            &mut view.object,
            &mut view.message,
        ] {
            *t = self.get(t);
        }
    }
}

/// A node as kubectl shows it, plus what the trace reports about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeView {
    /// kubectl STATUS column.
    pub status: String,
    /// type → (status, reason, message); heartbeat times are left out on purpose.
    pub conditions: BTreeMap<String, (String, String, String)>,
    /// `key[=value]:Effect`, sorted.
    pub taints: BTreeSet<String>,
    pub labels: Labels,
}

/// A pod as `kubectl get pods -o wide` shows it, plus deletion and ownership facts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodView {
    pub ready: Sym,
    pub status: Sym,
    pub restarts: i64,
    /// Status of the pod's `Ready` condition (the node lifecycle controller sets it to False on a
    /// NotReady node while the kubectl READY column, which counts ready containers, does not change).
    pub ready_condition: Sym,
    pub node: Sym,
    pub labels: Labels,
    pub deleting: bool,
    pub grace: Option<i64>,
    /// `DisruptionTarget=True` reason, when set.
    pub disruption: Option<String>,
    pub disruption_message: Option<String>,
    /// Controlling owner `(kind, name)`.
    pub owner: Option<(Sym, Sym)>,
}

/// A workload's desired and available replicas.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkloadView {
    pub desired: i64,
    pub available: i64,
    /// The kubectl columns that the trace prints (`READY 1/2 UP-TO-DATE 2 AVAILABLE 1`).
    pub columns: String,
    pub owner: Option<(String, String)>,
    /// Deployment `.spec.strategy.type`.
    pub strategy: Option<String>,
    /// Why the workload's status does not (yet) show its spec carried out, or `None` when it does
    /// (what `kubectl rollout status` waits for; Jobs are never unconverged).
    pub unconverged: Option<String>,
}

/// Why a workload's status does not match its spec, as `kubectl rollout status` judges it: the
/// controller has observed the latest generation, and every counter of its status has reached the
/// desired number (no extra, old, unready or unavailable pods).
fn unconverged(kind: &str, obj: &Value, replicas: i64) -> Option<String> {
    let i = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let generation = i("/metadata/generation");
    let observed = i("/status/observedGeneration");
    if kind != "Job" && observed < generation {
        return Some(format!(
            "observedGeneration {observed} < generation {generation}"
        ));
    }
    let (desired, fields): (i64, &[&str]) = match kind {
        "Deployment" => (
            replicas,
            &[
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
            ],
        ),
        "ReplicaSet" => (
            replicas,
            &["replicas", "readyReplicas", "availableReplicas"],
        ),
        "StatefulSet" => (
            replicas,
            &[
                "replicas",
                "readyReplicas",
                "availableReplicas",
                "updatedReplicas",
            ],
        ),
        "DaemonSet" => {
            let d = i("/status/desiredNumberScheduled");
            if i("/status/numberMisscheduled") != 0 {
                return Some(format!(
                    "numberMisscheduled {}",
                    i("/status/numberMisscheduled")
                ));
            }
            (
                d,
                &[
                    "currentNumberScheduled",
                    "numberReady",
                    "numberAvailable",
                    "updatedNumberScheduled",
                ],
            )
        }
        _ => return None,
    };
    let off: Vec<String> = fields
        .iter()
        .filter_map(|f| {
            let v = i(&format!("/status/{f}"));
            (v != desired).then(|| format!("{f} {v}"))
        })
        .collect();
    if kind == "StatefulSet" {
        let (cur, upd) = (
            obj.pointer("/status/currentRevision")
                .and_then(Value::as_str),
            obj.pointer("/status/updateRevision")
                .and_then(Value::as_str),
        );
        if desired > 0 && cur != upd {
            return Some(format!("currentRevision {cur:?} != updateRevision {upd:?}"));
        }
    }
    (!off.is_empty()).then(|| format!("desired {desired}, {}", off.join(", ")))
}

/// An Event (core/v1 or events.k8s.io/v1) as the trace prints it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventView {
    pub component: Sym,
    pub type_: Sym,
    pub reason: Sym,
    /// `Kind namespace/name` or `Kind name`.
    pub object: Sym,
    pub message: Sym,
    pub count: i64,
}

// ---- views from API objects --------------------------------------------------------------------

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn cell(cells: &[Value], i: usize) -> String {
    match cells.get(i) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn controller_owner(v: &Value) -> Option<(String, String)> {
    let refs = v.pointer("/metadata/ownerReferences")?.as_array()?;
    let r = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    Some((s(r, "/kind").to_string(), s(r, "/name").to_string()))
}

impl NodeView {
    pub fn from_object(node: &Value, now: Timestamp) -> NodeView {
        let ri = registry::lookup_kind("v1", "Node").expect("nodes are served");
        let cells = klab_apiserver::table::row_cells(ri, node, now);
        let conditions = node
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            s(c, "/type").to_string(),
                            (
                                s(c, "/status").to_string(),
                                s(c, "/reason").to_string(),
                                s(c, "/message").to_string(),
                            ),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let taints = node
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .map(|t| {
                        let (k, v, e) = (s(t, "/key"), s(t, "/value"), s(t, "/effect"));
                        match v {
                            "" => format!("{k}:{e}"),
                            v => format!("{k}={v}:{e}"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        NodeView {
            status: cell(&cells, 1),
            conditions,
            taints,
            labels: Arc::new(labels(node)),
        }
    }
}

impl PodView {
    pub fn from_object(pod: &Value, now: Timestamp) -> PodView {
        let ri = registry::lookup_kind("v1", "Pod").expect("pods are served");
        let cells = klab_apiserver::table::row_cells(ri, pod, now);
        // RESTARTS is `N` or `N (5s ago)`: only the count is a change worth a line.
        let restarts = cell(&cells, 3)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let disruption = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| {
                        s(c, "/type") == names::POD_COND_DISRUPTION_TARGET
                            && s(c, "/status") == "True"
                    })
                    .cloned()
            });
        let ready_condition = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| s(c, "/type") == names::POD_COND_READY))
            .map(|c| Sym::from(s(c, "/status")))
            .unwrap_or_default();
        PodView {
            ready_condition,
            ready: cell(&cells, 1).into(),
            status: cell(&cells, 2).into(),
            restarts,
            node: s(pod, "/spec/nodeName").into(),
            labels: Arc::new(labels(pod)),
            deleting: pod
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|v| !v.is_null()),
            grace: pod
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64),
            disruption: disruption.as_ref().map(|c| s(c, "/reason").to_string()),
            disruption_message: disruption.as_ref().map(|c| s(c, "/message").to_string()),
            owner: controller_owner(pod).map(|(k, n)| (k.into(), n.into())),
        }
    }
}

/// Kinds whose desired/available replicas the runner watches.
pub const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
];

impl WorkloadView {
    pub fn from_object(kind: &str, obj: &Value) -> WorkloadView {
        let i = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        let replicas = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let (desired, available, columns) = match kind {
            "Deployment" => {
                let (ready, upd, avail) = (
                    i("/status/readyReplicas"),
                    i("/status/updatedReplicas"),
                    i("/status/availableReplicas"),
                );
                (
                    replicas,
                    avail,
                    format!("READY {ready}/{replicas} UP-TO-DATE {upd} AVAILABLE {avail}"),
                )
            }
            "ReplicaSet" => {
                let (cur, ready) = (i("/status/replicas"), i("/status/readyReplicas"));
                (
                    replicas,
                    ready,
                    format!("DESIRED {replicas} CURRENT {cur} READY {ready}"),
                )
            }
            "StatefulSet" => {
                let ready = i("/status/readyReplicas");
                (replicas, ready, format!("READY {ready}/{replicas}"))
            }
            "DaemonSet" => {
                let (d, c, r, a) = (
                    i("/status/desiredNumberScheduled"),
                    i("/status/currentNumberScheduled"),
                    i("/status/numberReady"),
                    i("/status/numberAvailable"),
                );
                (
                    d,
                    a,
                    format!("DESIRED {d} CURRENT {c} READY {r} AVAILABLE {a}"),
                )
            }
            _ => {
                // Job: desired = completions (default 1); "available" = running pods.
                let completions = obj
                    .pointer("/spec/completions")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let (active, succeeded, failed) = (
                    i("/status/active"),
                    i("/status/succeeded"),
                    i("/status/failed"),
                );
                (
                    completions,
                    active,
                    format!(
                        "COMPLETIONS {succeeded}/{completions} ACTIVE {active} FAILED {failed}"
                    ),
                )
            }
        };
        WorkloadView {
            unconverged: unconverged(kind, obj, replicas),
            desired,
            available,
            columns,
            owner: controller_owner(obj),
            strategy: obj
                .pointer("/spec/strategy/type")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

impl EventView {
    /// From a core/v1 Event.
    pub fn from_core(ev: &Value) -> EventView {
        let component = match s(ev, "/source/component") {
            "" => s(ev, "/reportingComponent"),
            c => c,
        };
        let io = ev.get("involvedObject").cloned().unwrap_or(Value::Null);
        EventView {
            component: component.into(),
            type_: s(ev, "/type").into(),
            reason: s(ev, "/reason").into(),
            object: object_label(s(&io, "/kind"), s(&io, "/namespace"), s(&io, "/name")).into(),
            message: s(ev, "/message").into(),
            count: ev.get("count").and_then(Value::as_i64).unwrap_or(1),
        }
    }

    /// From an events.k8s.io/v1 Event.
    pub fn from_events_v1(ev: &Value) -> EventView {
        let component = match s(ev, "/reportingController") {
            "" => s(ev, "/deprecatedSource/component"),
            c => c,
        };
        let re = ev.get("regarding").cloned().unwrap_or(Value::Null);
        let count = ev
            .pointer("/series/count")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        EventView {
            component: component.into(),
            type_: s(ev, "/type").into(),
            reason: s(ev, "/reason").into(),
            object: object_label(s(&re, "/kind"), s(&re, "/namespace"), s(&re, "/name")).into(),
            message: s(ev, "/note").into(),
            count,
        }
    }
}

fn object_label(kind: &str, ns: &str, name: &str) -> String {
    if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    }
}

// ---- the replay ---------------------------------------------------------------------------------

/// One trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLine {
    pub t: Duration,
    pub component: String,
    /// `Node n1`, `Pod default/web-0` (for Events: the involved object), or empty for scenario steps.
    pub object: String,
    pub text: String,
}

impl TraceLine {
    /// The line as matched by trace expectations: `55.000s component object text`.
    pub fn plain(&self) -> String {
        format!(
            "{} {} {} {}",
            klab_api::clock::format_elapsed(self.t),
            self.component,
            self.object,
            self.text
        )
    }

    /// The plan's own echo of a `wait-for` step (`sim wait-for {trace: …} (timeout …)`): it
    /// quotes the expectation, so a trace pattern would find itself in it. Trace expectations
    /// look at what the cluster did, not at the plan's text.
    pub fn is_wait_for_echo(&self) -> bool {
        self.component == "sim" && self.object.is_empty() && self.text.starts_with("wait-for {")
    }
}

/// What the runner knows about its own writes.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    /// Revisions written by the runner's admin client.
    pub user_revisions: BTreeSet<u64>,
    /// Pods the runner force-deleted (namespace, name): their disappearance is kubectl's doing.
    pub user_force_deleted: BTreeSet<(String, String)>,
    /// Nodes the runner deleted: a Node DELETE answers a Status, not the object, so its revision
    /// is not known to `user_revisions`.
    pub user_deleted_nodes: BTreeSet<String>,
    /// Nodes removed with `remove-node`: their deletion is the cloud node-lifecycle controller's.
    pub removed_nodes: BTreeSet<String>,
}

/// The cluster as the trace has seen it so far.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub nodes: BTreeMap<String, NodeView>,
    pub pods: BTreeMap<(String, String), PodView>,
    pub workloads: BTreeMap<(String, String, String), WorkloadView>,
    pub slices: BTreeMap<(String, String), SliceView>,
    /// Storage objects by (kind, namespace, name).
    pub storage: BTreeMap<(String, String, String), StorageView>,
    /// Nodes seen and then deleted (a pod bound to a node not yet registered is not orphaned).
    pub deleted_nodes: BTreeSet<String>,
    /// Whole objects by (kind, namespace, name), for the kinds `object:` expectations read.
    pub objects: BTreeMap<(String, String, String), std::sync::Arc<Value>>,
}

fn controller_of(owner_kind: &str) -> &'static str {
    match owner_kind {
        "ReplicaSet" => names::CONTROLLER_REPLICASET,
        "Deployment" => names::CONTROLLER_DEPLOYMENT,
        "StatefulSet" => names::CONTROLLER_STATEFULSET,
        "DaemonSet" => "daemonset-controller",
        "Job" => "job-controller",
        _ => "controller",
    }
}

fn disruption_component(reason: &str) -> Option<&'static str> {
    match reason {
        names::REASON_DELETION_BY_TAINT_MANAGER => Some(names::CONTROLLER_TAINT_EVICTION),
        names::REASON_DELETION_BY_POD_GC => Some(names::CONTROLLER_POD_GC),
        names::REASON_EVICTION_BY_EVICTION_API => Some("eviction-api"),
        names::REASON_TERMINATION_BY_KUBELET => Some(names::COMPONENT_KUBELET),
        _ => None,
    }
}

/// Taints the node lifecycle controller owns.
fn nlc_taint(t: &str) -> bool {
    [
        names::TAINT_NOT_READY,
        names::TAINT_UNREACHABLE,
        names::TAINT_UNSCHEDULABLE,
        names::TAINT_MEMORY_PRESSURE,
        names::TAINT_DISK_PRESSURE,
        names::TAINT_PID_PRESSURE,
        names::TAINT_NETWORK_UNAVAILABLE,
    ]
    .iter()
    .any(|k| t.starts_with(&format!("{k}:")) || t.starts_with(&format!("{k}=")))
}

fn node_conditions_component(reason: &str) -> &'static str {
    if reason == names::REASON_NODE_STATUS_UNKNOWN
        || reason == names::REASON_NODE_STATUS_NEVER_UPDATED
    {
        names::CONTROLLER_NODE_LIFECYCLE
    } else {
        names::COMPONENT_KUBELET
    }
}

fn pod_columns(p: &PodView) -> String {
    let node = if p.node.is_empty() { "<none>" } else { &p.node };
    format!("{} {} {} {}", p.ready, p.status, p.restarts, node)
}

/// Node conditions that changed in one write with the same reason and message.
struct CondGroup {
    reason: String,
    message: String,
    conditions: Vec<String>,
}

fn condition_order(t: &str) -> (u8, &str) {
    (if t == "Ready" { 0 } else { 1 }, t)
}

impl World {
    /// Applies one record and appends the trace lines it produces.
    pub fn apply(&mut self, r: &Record, attr: &Attribution, out: &mut Vec<TraceLine>) {
        let by_user = attr.user_revisions.contains(&r.rv);
        let mut line = |component: &str, object: String, text: String| {
            out.push(TraceLine {
                t: r.t,
                component: component.to_string(),
                object,
                text,
            });
        };
        match &r.change {
            Change::Action(text) => line(COMPONENT_SIM, String::new(), text.clone()),
            Change::Storage {
                kind,
                namespace,
                name,
                view,
            } => {
                let key = (kind.clone(), namespace.clone(), name.clone());
                let object = if namespace.is_empty() {
                    format!("{kind} {name}")
                } else {
                    format!("{kind} {namespace}/{name}")
                };
                let prev = self.storage.get(&key).cloned();
                // Who writes what: claims are created by their workload (or a user) and bound by
                // the PV controller; provisioned volumes come and go with their CSI driver;
                // attachments are created and deleted by the attach/detach controller and
                // marked attached by the driver's attacher.
                let who = |v: &StorageView, created: bool, gone: bool| -> String {
                    if by_user {
                        return COMPONENT_KUBECTL.into();
                    }
                    match kind.as_str() {
                        "PersistentVolumeClaim" if created => names::CONTROLLER_STATEFULSET.into(),
                        "PersistentVolumeClaim" => names::CONTROLLER_PERSISTENT_VOLUME.into(),
                        "PersistentVolume" if created || gone => v
                            .provisioner
                            .clone()
                            .unwrap_or_else(|| COMPONENT_KUBECTL.into()),
                        "PersistentVolume" => names::CONTROLLER_PERSISTENT_VOLUME.into(),
                        _ if created => names::CONTROLLER_ATTACH_DETACH.into(),
                        // The attacher's finalizer is the last thing to go.
                        _ if gone => v.attacher.clone().unwrap_or_default(),
                        _ if v.columns.ends_with(" Terminating") => {
                            names::CONTROLLER_ATTACH_DETACH.into()
                        }
                        _ => v.attacher.clone().unwrap_or_default(),
                    }
                };
                match (view, &prev) {
                    (Some(v), None) => {
                        let w = who(v, true, false);
                        line(&w, object, format!("created {}", v.columns));
                    }
                    (Some(v), Some(p)) if p.columns != v.columns => {
                        let w = who(v, false, false);
                        line(&w, object, v.columns.clone());
                    }
                    (None, Some(p)) => {
                        let w = who(p, false, true);
                        line(&w, object, "deleted".into());
                    }
                    _ => {}
                }
                match view {
                    Some(v) => {
                        self.storage.insert(key, StorageView::clone(v));
                    }
                    None => {
                        self.storage.remove(&key);
                    }
                }
            }
            Change::Kubectl { object, text } => {
                line(COMPONENT_KUBECTL, object.clone(), text.clone())
            }
            Change::Object {
                kind,
                namespace,
                name,
                value,
            } => {
                let key = (kind.clone(), namespace.clone(), name.clone());
                match value {
                    Some(v) => {
                        self.objects.insert(key, v.clone());
                    }
                    None => {
                        self.objects.remove(&key);
                    }
                }
            }
            Change::Event(ev) => {
                // Like `kubectl get events`: the involved object in the object column, then
                // TYPE REASON: MESSAGE.
                let mut text = format!("event {} {}: {}", ev.type_, ev.reason, ev.message);
                if ev.count > 1 {
                    let _ = write!(text, " (x{})", ev.count);
                }
                line(
                    if ev.component.is_empty() {
                        "?"
                    } else {
                        &ev.component
                    },
                    ev.object.to_string(),
                    text,
                );
            }
            Change::Node { name, view } => {
                let object = format!("Node {name}");
                let prev = self.nodes.get(name).cloned();
                match (prev, view) {
                    (None, None) => {}
                    (Some(_), None) => {
                        let who = if by_user || attr.user_deleted_nodes.contains(name) {
                            COMPONENT_KUBECTL
                        } else if attr.removed_nodes.contains(name) {
                            COMPONENT_CLOUD_NODE_LIFECYCLE
                        } else {
                            "?"
                        };
                        line(who, object, "deleted".into());
                        self.nodes.remove(name);
                        self.deleted_nodes.insert(name.clone());
                    }
                    (None, Some(v)) => {
                        let who = if by_user {
                            COMPONENT_KUBECTL
                        } else {
                            names::COMPONENT_KUBELET
                        };
                        line(who, object, format!("created STATUS {}", v.status));
                        self.nodes.insert(name.clone(), NodeView::clone(v));
                    }
                    (Some(p), Some(v)) => {
                        // Condition changes, grouped by (reason, message): the controller forces
                        // four conditions to Unknown in one write.
                        // Groups in order of their first condition (Ready first, then by name).
                        let mut groups: Vec<CondGroup> = Vec::new();
                        let mut types: Vec<&String> = v.conditions.keys().collect();
                        types.sort_by_key(|t| condition_order(t));
                        for t in types {
                            let (st, reason, msg) = &v.conditions[t];
                            let changed = match p.conditions.get(t) {
                                Some((ps, pr, _)) => ps != st || pr != reason,
                                None => true,
                            };
                            if !changed {
                                continue;
                            }
                            match groups
                                .iter_mut()
                                .find(|g| &g.reason == reason && &g.message == msg)
                            {
                                Some(g) => g.conditions.push(format!("{t}={st}")),
                                None => groups.push(CondGroup {
                                    reason: reason.clone(),
                                    message: msg.clone(),
                                    conditions: vec![format!("{t}={st}")],
                                }),
                            }
                        }
                        let who_cond = groups
                            .first()
                            .map(|g| node_conditions_component(&g.reason))
                            .unwrap_or(names::COMPONENT_KUBELET);
                        if p.status != v.status {
                            let who = if by_user { COMPONENT_KUBECTL } else { who_cond };
                            line(who, object.clone(), format!("STATUS {}", v.status));
                        }
                        for g in &groups {
                            let detail = match (g.reason.is_empty(), g.message.is_empty()) {
                                (true, true) => String::new(),
                                (false, true) => format!(" ({})", g.reason),
                                (true, false) => format!(" ({})", g.message),
                                (false, false) => format!(" ({}: {})", g.reason, g.message),
                            };
                            line(
                                node_conditions_component(&g.reason),
                                object.clone(),
                                format!("{}{detail}", g.conditions.join(" ")),
                            );
                        }
                        for t in v.taints.difference(&p.taints) {
                            let who = if by_user {
                                COMPONENT_KUBECTL
                            } else if nlc_taint(t) {
                                names::CONTROLLER_NODE_LIFECYCLE
                            } else {
                                "?"
                            };
                            line(who, object.clone(), format!("taint+ {t}"));
                        }
                        for t in p.taints.difference(&v.taints) {
                            let who = if by_user {
                                COMPONENT_KUBECTL
                            } else if nlc_taint(t) {
                                names::CONTROLLER_NODE_LIFECYCLE
                            } else {
                                "?"
                            };
                            line(who, object.clone(), format!("taint- {t}"));
                        }
                        self.nodes.insert(name.clone(), NodeView::clone(v));
                    }
                }
            }
            Change::Pod {
                namespace,
                name,
                view,
            } => {
                let key = (namespace.clone(), name.clone());
                let object = format!("Pod {namespace}/{name}");
                let prev = self.pods.get(&key).cloned();
                match (prev, view) {
                    (None, None) => {}
                    (Some(p), None) => {
                        // The kubelet removes a pod once it has stopped it. The pod garbage
                        // collector removes bound pods only from nodes that no longer exist, or
                        // from not-Ready nodes with the out-of-service taint (spec §7).
                        let by_pod_gc = !p.node.is_empty()
                            && match self.nodes.get(p.node.as_str()) {
                                None => true,
                                Some(n) => {
                                    !n.status.starts_with("Ready")
                                        && n.taints
                                            .iter()
                                            .any(|t| t.starts_with(names::TAINT_OUT_OF_SERVICE))
                                }
                            };
                        let who = if by_user || attr.user_force_deleted.contains(&key) {
                            COMPONENT_KUBECTL
                        } else if by_pod_gc
                            || p.disruption.as_deref() == Some(names::REASON_DELETION_BY_POD_GC)
                        {
                            names::CONTROLLER_POD_GC
                        } else {
                            names::COMPONENT_KUBELET
                        };
                        line(who, object, "deleted".into());
                        self.pods.remove(&key);
                    }
                    (None, Some(v)) => {
                        let who = if by_user {
                            COMPONENT_KUBECTL
                        } else {
                            v.owner
                                .as_ref()
                                .map(|(k, _)| controller_of(k))
                                .unwrap_or("?")
                        };
                        line(who, object, format!("created {}", pod_columns(v)));
                        self.pods.insert(key, PodView::clone(v));
                    }
                    (Some(p), Some(v)) => {
                        if p.disruption != v.disruption
                            && let Some(reason) = &v.disruption
                        {
                            let who = disruption_component(reason).unwrap_or("?");
                            let msg = v.disruption_message.clone().unwrap_or_default();
                            line(
                                who,
                                object.clone(),
                                format!("DisruptionTarget=True ({reason}: {msg})"),
                            );
                        }
                        if p.node.is_empty() && !v.node.is_empty() {
                            line(
                                names::COMPONENT_SCHEDULER,
                                object.clone(),
                                format!("bound to {}", v.node),
                            );
                        }
                        if !p.deleting && v.deleting {
                            // A force delete (grace 0) marks the pod and removes it in one
                            // request whose response carries only the removal's revision: a
                            // grace-0 mark of a pod kubectl force-deleted is that kubectl's.
                            let forced =
                                v.grace == Some(0) && attr.user_force_deleted.contains(&key);
                            let who = if by_user || forced {
                                COMPONENT_KUBECTL
                            } else if let Some(c) =
                                v.disruption.as_deref().and_then(disruption_component)
                            {
                                c
                            } else {
                                v.owner
                                    .as_ref()
                                    .map(|(k, _)| controller_of(k))
                                    .unwrap_or("?")
                            };
                            let grace = v
                                .grace
                                .map(|g| format!(" (grace {g}s)"))
                                .unwrap_or_default();
                            line(who, object.clone(), format!("{}{grace}", pod_columns(v)));
                        } else if (p.ready.as_str(), p.status.as_str(), p.restarts)
                            != (v.ready.as_str(), v.status.as_str(), v.restarts)
                        {
                            // The pod garbage collector marks a pod on a dead node (not Ready with
                            // the out-of-service taint, or deleted) Failed before deleting it,
                            // touching only the phase: READY stays. A kubelet coming back also
                            // writes before its node is Ready again, but reports containers.
                            // A pod never bound has no kubelet: only the collector's
                            // unscheduled-terminating pass writes it Failed.
                            let node_down = v.node.is_empty()
                                || match self.nodes.get(v.node.as_str()) {
                                    Some(n) => !n.status.starts_with("Ready"),
                                    None => self.deleted_nodes.contains(v.node.as_str()),
                                };
                            let who = if by_user {
                                COMPONENT_KUBECTL
                            } else if node_down && v.status == "Failed" && p.ready == v.ready {
                                names::CONTROLLER_POD_GC
                            } else {
                                names::COMPONENT_KUBELET
                            };
                            line(who, object.clone(), pod_columns(v));
                        } else if p.ready_condition != v.ready_condition
                            && !v.ready_condition.is_empty()
                        {
                            // The kubectl columns did not move: only the Ready condition did. On
                            // a node that is not Ready that is the node lifecycle controller
                            // marking the pod (spec §1: MarkPodsNotReady); otherwise the kubelet.
                            let node_down = self
                                .nodes
                                .get(v.node.as_str())
                                .is_some_and(|n| !n.status.starts_with("Ready"));
                            let who = if by_user {
                                COMPONENT_KUBECTL
                            } else if node_down && v.ready_condition == "False" {
                                names::CONTROLLER_NODE_LIFECYCLE
                            } else {
                                names::COMPONENT_KUBELET
                            };
                            line(who, object.clone(), format!("Ready={}", v.ready_condition));
                        }
                        self.pods.insert(key, PodView::clone(v));
                    }
                }
            }
            Change::Slice {
                namespace,
                name,
                view,
            } => {
                // One line per endpoint that appears, changes or goes: the second traffic to a
                // pod stops is the line that says `ready=false` (or `removed`).
                let key = (namespace.clone(), name.clone());
                let object = format!("EndpointSlice {namespace}/{name}");
                let who = if by_user {
                    COMPONENT_KUBECTL
                } else {
                    ENDPOINTSLICE_CONTROLLER
                };
                let prev = self.slices.get(&key).cloned();
                let empty = BTreeMap::new();
                let before = prev.as_ref().map_or(&empty, |p| &p.endpoints);
                let after = view.as_ref().map_or(&empty, |v| &v.endpoints);
                if prev.is_none()
                    && let Some(v) = view
                {
                    line(
                        who,
                        object.clone(),
                        format!("created for Service {}", v.service),
                    );
                }
                for (pod, e) in after {
                    match before.get(pod) {
                        None => line(
                            who,
                            object.clone(),
                            format!("endpoint {pod} added {}", e.columns()),
                        ),
                        Some(b) if b != e => line(
                            who,
                            object.clone(),
                            format!("endpoint {pod} {}", e.columns()),
                        ),
                        Some(_) => {}
                    }
                }
                for pod in before.keys().filter(|p| !after.contains_key(*p)) {
                    line(who, object.clone(), format!("endpoint {pod} removed"));
                }
                match view {
                    Some(v) => {
                        self.slices.insert(key, SliceView::clone(v));
                    }
                    None => {
                        if prev.is_some() {
                            line(who, object, "deleted".into());
                        }
                        self.slices.remove(&key);
                    }
                }
            }
            Change::Workload {
                kind,
                namespace,
                name,
                view,
            } => {
                let key = (kind.clone(), namespace.clone(), name.clone());
                let object = format!("{kind} {namespace}/{name}");
                let prev = self.workloads.get(&key).cloned();
                // ReplicaSets are bookkeeping for ownership; their Deployment's line says it all.
                let quiet = kind == "ReplicaSet"
                    && view
                        .as_deref()
                        .or(prev.as_ref())
                        .is_some_and(|v| v.owner.is_some());
                match (prev, view) {
                    (None, None) => {}
                    (Some(_), None) => {
                        if !quiet {
                            line(
                                if by_user { COMPONENT_KUBECTL } else { "?" },
                                object,
                                "deleted".into(),
                            );
                        }
                        self.workloads.remove(&key);
                    }
                    (p, Some(v)) => {
                        let changed = p.as_ref().is_none_or(|p| p.columns != v.columns);
                        if changed && !quiet {
                            let who = if by_user {
                                COMPONENT_KUBECTL
                            } else {
                                controller_of(kind)
                            };
                            let verb = if p.is_none() { "created " } else { "" };
                            line(who, object, format!("{verb}{}", v.columns));
                        }
                        self.workloads.insert(key, WorkloadView::clone(v));
                    }
                }
            }
        }
    }
}

/// Replays sorted records into trace lines.
pub fn replay(records: &[Record], attr: &Attribution) -> Vec<TraceLine> {
    let mut w = World::default();
    let mut out = Vec::new();
    for r in records {
        w.apply(r, attr, &mut out);
    }
    out
}

/// The trace as aligned text (kubectl-like columns: time, component, object, change).
pub fn format_text(lines: &[TraceLine]) -> String {
    let cw = lines
        .iter()
        .map(|l| l.component.len())
        .max()
        .unwrap_or(0)
        .max(9);
    let ow = lines.iter().map(|l| l.object.len()).max().unwrap_or(0);
    let mut out = String::new();
    for l in lines {
        let t = klab_api::clock::format_elapsed(l.t);
        let row = format!(
            "{t:>10}  {:<cw$}  {:<ow$}  {}",
            l.component, l.object, l.text
        );
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

/// The trace as JSON lines.
pub fn format_json(lines: &[TraceLine]) -> String {
    let mut out = String::new();
    for l in lines {
        let v = json!({
            "t": klab_api::clock::format_elapsed(l.t),
            "ms": l.t.as_millis() as u64,
            "component": l.component,
            "object": l.object,
            "change": l.text,
        });
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// FNV-1a hash of the plain trace (the determinism check compares these).
pub fn hash(lines: &[TraceLine]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for l in lines {
        for b in l.plain().bytes().chain(std::iter::once(b'\n')) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn node(status: &str, conds: &[(&str, &str, &str, &str)], taints: &[&str]) -> NodeView {
        NodeView {
            status: status.into(),
            conditions: conds
                .iter()
                .map(|(t, s, r, m)| (t.to_string(), (s.to_string(), r.to_string(), m.to_string())))
                .collect(),
            taints: taints.iter().map(|t| t.to_string()).collect(),
            labels: Labels::default(),
        }
    }

    #[test]
    fn views_share_their_repeated_texts_and_read_as_strings() {
        let mut syms = Syms::default();
        let owned = |node: &str| PodView {
            owner: Some(("ReplicaSet".into(), "web-1".into())),
            ..pod("1/1", "Running", 0, node)
        };
        let mut a = owned("n1");
        let mut b = owned("n2");
        syms.share_pod(&mut a);
        syms.share_pod(&mut b);
        // One allocation per distinct text, whichever view brought it first.
        assert!(Arc::ptr_eq(&a.status.0, &b.status.0));
        assert!(Arc::ptr_eq(&a.ready.0, &b.ready.0));
        assert!(!Arc::ptr_eq(&a.node.0, &b.node.0));
        assert!(Arc::ptr_eq(&a.node.0, &syms.get("n1").0));
        let (ak, an) = a.owner.clone().unwrap();
        let (bk, bn) = b.owner.clone().unwrap();
        assert!(Arc::ptr_eq(&ak.0, &bk.0) && Arc::ptr_eq(&an.0, &bn.0));
        // Sharing changes no content: the views compare and print as before.
        assert_eq!(a, owned("n1"));
        assert_eq!(a.status, "Running");
        assert_eq!(a.status, "Running".to_string());
        assert_eq!(format!("{} {:?}", a.node, a.node), "n1 \"n1\"");
        assert!(a.status != "Pending");

        let mut ev = EventView {
            component: "kubelet".into(),
            type_: "Normal".into(),
            reason: "Pulled".into(),
            object: "Pod d/p".into(),
            message: "m".into(),
            count: 1,
        };
        let mut again = ev.clone();
        syms.share_event(&mut ev);
        syms.share_event(&mut again);
        assert!(Arc::ptr_eq(&ev.reason.0, &again.reason.0));
        assert!(Arc::ptr_eq(&ev.component.0, &again.component.0));
        assert!(Arc::ptr_eq(&ev.object.0, &again.object.0));
        assert!(Arc::ptr_eq(&ev.message.0, &again.message.0));
        // 1/1, Running, the empty Ready condition, n1, n2, ReplicaSet, web-1; kubelet, Normal,
        // Pulled, Pod d/p, m.
        assert_eq!(syms.seen.len(), 12, "{:?}", syms.seen);
    }

    fn pod(ready: &str, status: &str, restarts: i64, node: &str) -> PodView {
        PodView {
            ready: ready.into(),
            status: status.into(),
            restarts,
            node: node.into(),
            owner: Some(("ReplicaSet".into(), "web-1".into())),
            ..Default::default()
        }
    }

    fn rec(t: u64, rv: u64, change: Change) -> Record {
        Record {
            t: secs(t),
            rv,
            change,
        }
    }

    fn plain(lines: &[TraceLine]) -> Vec<String> {
        lines.iter().map(TraceLine::plain).collect()
    }

    const READY_OK: (&str, &str, &str, &str) = (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    );

    #[test]
    fn node_failure_lines() {
        let unknown = |t| {
            (
                t,
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
            )
        };
        let mem_ok = (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        );
        let n = |v| Change::Node {
            name: "n1".into(),
            view: Some(Box::new(v)),
        };
        let records = vec![
            rec(0, 5, n(node("Ready", &[READY_OK, mem_ok], &[]))),
            rec(
                55,
                90,
                n(node(
                    "NotReady",
                    &[unknown("Ready"), unknown("MemoryPressure")],
                    &[],
                )),
            ),
            rec(
                55,
                91,
                n(node(
                    "NotReady",
                    &[unknown("Ready"), unknown("MemoryPressure")],
                    &["node.kubernetes.io/unreachable:NoSchedule"],
                )),
            ),
            rec(
                60,
                95,
                n(node(
                    "NotReady",
                    &[unknown("Ready"), unknown("MemoryPressure")],
                    &[
                        "node.kubernetes.io/unreachable:NoSchedule",
                        "node.kubernetes.io/unreachable:NoExecute",
                    ],
                )),
            ),
            rec(
                70,
                99,
                n(node(
                    "NotReady",
                    &[unknown("Ready"), unknown("MemoryPressure")],
                    &["node.kubernetes.io/unreachable:NoExecute"],
                )),
            ),
            rec(
                80,
                120,
                Change::Node {
                    name: "n1".into(),
                    view: None,
                },
            ),
        ];
        let attr = Attribution {
            user_revisions: [99].into(),
            ..Default::default()
        };
        assert_eq!(
            plain(&replay(&records, &attr)),
            vec![
                "0.000s kubelet Node n1 created STATUS Ready",
                "55.000s node-lifecycle-controller Node n1 STATUS NotReady",
                "55.000s node-lifecycle-controller Node n1 Ready=Unknown MemoryPressure=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)",
                "55.000s node-lifecycle-controller Node n1 taint+ node.kubernetes.io/unreachable:NoSchedule",
                "60.000s node-lifecycle-controller Node n1 taint+ node.kubernetes.io/unreachable:NoExecute",
                "70.000s kubectl Node n1 taint- node.kubernetes.io/unreachable:NoSchedule",
                "80.000s ? Node n1 deleted",
            ]
        );
    }

    #[test]
    fn pod_lifecycle_lines() {
        let p = |v: PodView| Change::Pod {
            namespace: "default".into(),
            name: "web-a".into(),
            view: Some(Box::new(v)),
        };
        let mut evicted = pod("1/1", "Running", 0, "n1");
        evicted.ready_condition = "False".into();
        evicted.disruption = Some("DeletionByTaintManager".into());
        evicted.disruption_message = Some("Taint manager: deleting due to NoExecute taint".into());
        let mut terminating = evicted.clone();
        terminating.status = "Terminating".into();
        terminating.deleting = true;
        terminating.grace = Some(30);
        let mut running = pod("1/1", "Running", 0, "n1");
        running.ready_condition = "True".into();
        let mut not_ready = running.clone();
        not_ready.ready_condition = "False".into();
        let nodes_down = Change::Node {
            name: "n1".into(),
            view: Some(Box::new(node("NotReady", &[], &[]))),
        };
        let records = vec![
            rec(0, 10, p(pod("0/1", "Pending", 0, ""))),
            rec(0, 11, p(pod("0/1", "Pending", 0, "n1"))),
            rec(2, 12, p(running)),
            rec(50, 13, nodes_down),
            rec(55, 14, p(not_ready)),
            rec(360, 15, p(evicted)),
            rec(360, 16, p(terminating)),
            rec(
                400,
                17,
                Change::Pod {
                    namespace: "default".into(),
                    name: "web-a".into(),
                    view: None,
                },
            ),
        ];
        let attr = Attribution {
            user_force_deleted: [("default".to_string(), "web-a".to_string())].into(),
            ..Default::default()
        };
        let lines = plain(&replay(&records, &attr));
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("Pod"))
                .cloned()
                .collect::<Vec<_>>(),
            vec![
                "0.000s replicaset-controller Pod default/web-a created 0/1 Pending 0 <none>",
                "0.000s default-scheduler Pod default/web-a bound to n1",
                "2.000s kubelet Pod default/web-a 1/1 Running 0 n1",
                "55.000s node-lifecycle-controller Pod default/web-a Ready=False",
                "360.000s taint-eviction-controller Pod default/web-a DisruptionTarget=True (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint)",
                "360.000s taint-eviction-controller Pod default/web-a 1/1 Terminating 0 n1 (grace 30s)",
                "400.000s kubectl Pod default/web-a deleted",
            ]
        );
    }

    #[test]
    fn a_force_deletes_mark_is_kubectls() {
        let mut marked = pod("1/1", "Terminating", 0, "n1");
        marked.deleting = true;
        marked.grace = Some(0);
        let p = |view: Option<PodView>| Change::Pod {
            namespace: "d".into(),
            name: "web".into(),
            view: view.map(Box::new),
        };
        let records = vec![
            rec(0, 1, p(Some(pod("1/1", "Running", 0, "n1")))),
            rec(30, 2, p(Some(marked))),
            rec(30, 3, p(None)),
        ];
        let attr = Attribution {
            user_force_deleted: [("d".to_string(), "web".to_string())].into(),
            ..Default::default()
        };
        let who: Vec<String> = replay(&records, &attr)
            .iter()
            .skip(1)
            .map(|l| format!("{} {}", l.component, l.text))
            .collect();
        assert_eq!(
            who,
            vec!["kubectl 1/1 Terminating 0 n1 (grace 0s)", "kubectl deleted"]
        );
        // Without the force delete the owner's controller is named, as before.
        let who = replay(&records, &Attribution::default());
        assert_eq!(who[1].component, "replicaset-controller");
    }

    #[test]
    fn an_unbound_pod_marked_failed_is_the_pod_garbage_collector() {
        // Public vector CP-53: a terminating pod that was never scheduled is patched Failed by
        // pod GC; no kubelet writes the status of a pod bound to no node.
        let p = |status: &str| Change::Pod {
            namespace: "d".into(),
            name: "u".into(),
            view: Some(Box::new(pod("0/1", status, 0, ""))),
        };
        let records = vec![rec(0, 1, p("Terminating")), rec(20, 2, p("Failed"))];
        let who: Vec<String> = replay(&records, &Attribution::default())
            .iter()
            .map(|l| format!("{} {}", l.component, l.text))
            .collect();
        assert_eq!(
            who.last().unwrap(),
            "pod-garbage-collector 0/1 Failed 0 <none>"
        );
    }

    #[test]
    fn pod_deletions_are_attributed_to_the_kubelet_or_the_pod_garbage_collector() {
        let n = |status: &str, taints: &[&str]| Change::Node {
            name: "n1".into(),
            view: Some(Box::new(node(status, &[], taints))),
        };
        let p = |name: &str| Change::Pod {
            namespace: "d".into(),
            name: name.into(),
            view: Some(Box::new(pod("0/1", "Terminating", 0, "n1"))),
        };
        let gone = |name: &str| Change::Pod {
            namespace: "d".into(),
            name: name.into(),
            view: None,
        };
        let records = vec![
            rec(0, 1, n("NotReady", &[])),
            rec(0, 2, p("a")),
            rec(0, 3, p("b")),
            rec(0, 4, p("c")),
            rec(1, 5, gone("a")), // not Ready, no out-of-service taint: only a kubelet could
            rec(
                2,
                6,
                n(
                    "NotReady",
                    &["node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"],
                ),
            ),
            rec(
                3,
                7,
                Change::Pod {
                    namespace: "d".into(),
                    name: "b".into(),
                    view: Some(Box::new(pod("0/1", "Failed", 0, "n1"))),
                },
            ),
            rec(3, 7, gone("b")),
            rec(
                4,
                8,
                Change::Node {
                    name: "n1".into(),
                    view: None,
                },
            ),
            rec(5, 9, gone("c")),
        ];
        let who: Vec<String> = replay(&records, &Attribution::default())
            .iter()
            .filter(|l| l.object.starts_with("Pod") && !l.text.starts_with("created"))
            .map(|l| format!("{} {} {}", l.component, l.object, l.text))
            .collect();
        assert_eq!(
            who,
            vec![
                "kubelet Pod d/a deleted",
                "pod-garbage-collector Pod d/b 0/1 Failed 0 n1",
                "pod-garbage-collector Pod d/b deleted",
                "pod-garbage-collector Pod d/c deleted",
            ]
        );
    }

    #[test]
    fn events_actions_and_workloads() {
        let ev = EventView {
            component: "node-controller".into(),
            type_: "Normal".into(),
            reason: "NodeNotReady".into(),
            object: "Node n1".into(),
            message: "Node n1 status is now: NodeNotReady".into(),
            count: 2,
        };
        let wl = |avail| WorkloadView {
            desired: 2,
            available: avail,
            columns: format!("READY {avail}/2"),
            ..Default::default()
        };
        let w = |v| Change::Workload {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: "web".into(),
            view: Some(Box::new(v)),
        };
        let records = vec![
            rec(0, 3, w(wl(0))),
            rec(5, 4, w(wl(2))),
            rec(5, 4, w(wl(2))), // same columns: no line
            rec(30, 4, Change::Action("Node n1 fault stop-kubelet".into())),
            rec(55, 6, Change::Event(Box::new(ev))),
        ];
        let attr = Attribution {
            user_revisions: [3].into(),
            ..Default::default()
        };
        assert_eq!(
            plain(&replay(&records, &attr)),
            vec![
                "0.000s kubectl StatefulSet default/web created READY 0/2",
                "5.000s statefulset-controller StatefulSet default/web READY 2/2",
                "30.000s sim  Node n1 fault stop-kubelet",
                "55.000s node-controller Node n1 event Normal NodeNotReady: Node n1 status is now: NodeNotReady (x2)",
            ]
        );
    }

    #[test]
    fn actions_sort_after_their_revision() {
        let mut r = vec![
            rec(30, 7, Change::Action("a".into())),
            rec(
                30,
                8,
                Change::Node {
                    name: "x".into(),
                    view: None,
                },
            ),
            rec(
                29,
                7,
                Change::Node {
                    name: "y".into(),
                    view: None,
                },
            ),
        ];
        sort_records(&mut r);
        let order: Vec<(u64, u8)> = r.iter().map(|r| (r.rv, r.change.rank())).collect();
        assert_eq!(order, vec![(7, 0), (7, 1), (8, 0)]);
    }

    #[test]
    fn text_is_aligned_and_json_is_one_object_per_line() {
        let lines = vec![
            TraceLine {
                t: secs(5),
                component: "kubelet".into(),
                object: "Node n1".into(),
                text: "created".into(),
            },
            TraceLine {
                t: Duration::from_millis(360_250),
                component: "taint-eviction-controller".into(),
                object: "Pod default/web-0".into(),
                text: "x".into(),
            },
        ];
        assert_eq!(
            format_text(&lines),
            "    5.000s  kubelet                    Node n1            created\n  360.250s  taint-eviction-controller  Pod default/web-0  x\n"
        );
        let json = format_json(&lines);
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(
            first,
            json!({"t": "5.000s", "ms": 5000, "component": "kubelet", "object": "Node n1", "change": "created"})
        );
        assert_ne!(hash(&lines), hash(&lines[..1]));
    }

    #[test]
    fn views_from_objects_use_kubectl_columns() {
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, {"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "m"}]}
        });
        let v = NodeView::from_object(&node, now);
        assert_eq!(v.status, "NotReady,SchedulingDisabled");
        assert_eq!(
            v.taints.iter().cloned().collect::<Vec<_>>(),
            vec!["k=v:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"]
        );
        let pod = json!({
            "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "deletionTimestamp": "2026-01-01T00:00:40Z", "deletionGracePeriodSeconds": 30,
                         "ownerReferences": [{"kind": "StatefulSet", "name": "web", "controller": true, "apiVersion": "apps/v1", "uid": "u"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2, "state": {"running": {}}}]}
        });
        let p = PodView::from_object(&pod, now);
        assert_eq!(
            (
                p.ready.as_str(),
                p.status.as_str(),
                p.restarts,
                p.node.as_str()
            ),
            ("1/1", "Terminating", 2, "n1")
        );
        assert!(p.deleting);
        assert_eq!(p.grace, Some(30));
        assert_eq!(p.owner, Some(("StatefulSet".into(), "web".into())));
    }

    #[test]
    fn endpoint_slice_lines_say_when_traffic_stops() {
        let ep = |node: &str, ready: bool, term: bool| EndpointView {
            node: node.into(),
            ready,
            serving: ready,
            terminating: term,
        };
        let slice = |eps: &[(&str, EndpointView)]| Change::Slice {
            namespace: "d".into(),
            name: "web-abcde".into(),
            view: Some(Box::new(SliceView {
                service: "web".into(),
                endpoints: eps
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            })),
        };
        let records = vec![
            rec(
                0,
                1,
                slice(&[("a", ep("n1", true, false)), ("b", ep("n2", true, false))]),
            ),
            rec(
                80,
                2,
                slice(&[("a", ep("n1", true, false)), ("b", ep("n2", false, false))]),
            ),
            rec(
                385,
                3,
                slice(&[("a", ep("n1", true, false)), ("b", ep("n2", false, true))]),
            ),
            rec(420, 4, slice(&[("a", ep("n1", true, false))])),
            rec(
                500,
                5,
                Change::Slice {
                    namespace: "d".into(),
                    name: "web-abcde".into(),
                    view: None,
                },
            ),
        ];
        assert_eq!(
            plain(&replay(&records, &Attribution::default())),
            vec![
                "0.000s endpointslice-controller EndpointSlice d/web-abcde created for Service web",
                "0.000s endpointslice-controller EndpointSlice d/web-abcde endpoint a added n1 ready=true serving=true terminating=false",
                "0.000s endpointslice-controller EndpointSlice d/web-abcde endpoint b added n2 ready=true serving=true terminating=false",
                "80.000s endpointslice-controller EndpointSlice d/web-abcde endpoint b n2 ready=false serving=false terminating=false",
                "385.000s endpointslice-controller EndpointSlice d/web-abcde endpoint b n2 ready=false serving=false terminating=true",
                "420.000s endpointslice-controller EndpointSlice d/web-abcde endpoint b removed",
                "500.000s endpointslice-controller EndpointSlice d/web-abcde endpoint a removed",
                "500.000s endpointslice-controller EndpointSlice d/web-abcde deleted",
            ]
        );
    }
}
