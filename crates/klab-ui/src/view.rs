//! What the dashboard shows, as a pure function of a snapshot of API objects at the cluster's
//! `now`: nodes (Ready, heartbeat, taints, cordon), pods per node (kubectl's STATUS, deletion and
//! eviction countdowns from `klab-why`), workloads (available/desired) and the last Events; and the
//! delta between two views, which is what the page receives after its first snapshot.
//!
//! Every instant is the cluster's (virtual) time in RFC 3339: the page counts down against the
//! cluster clock it is sent (`now`, `speed`), so a `klab up --speed 20` countdown ticks twenty
//! seconds per wall second.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use klab_why::{Kind, Snapshot, Target, TimeStyle};
use serde::Serialize;

/// The Events the page lists (the most recent ones).
pub const LAST_EVENTS: usize = 40;

/// The whole picture the page draws.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct View {
    /// The cluster's time when the view was built.
    pub now: String,
    /// Cluster seconds per wall second.
    pub speed: f64,
    pub nodes: BTreeMap<String, NodeView>,
    /// Keyed `namespace/name`.
    pub pods: BTreeMap<String, PodView>,
    /// Keyed `Kind/namespace/name`.
    pub workloads: BTreeMap<String, WorkloadView>,
    /// Oldest first.
    pub events: Vec<EventView>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub name: String,
    /// kubectl's STATUS column: `Ready`, `NotReady`, `Unknown`, `…,SchedulingDisabled`.
    pub status: String,
    /// The Ready condition's status: `True`, `False`, `Unknown` (empty before the first one).
    pub ready: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ready_message: String,
    /// The node Lease's renewTime (the heartbeat), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<String>,
    pub taints: Vec<TaintView>,
    pub unschedulable: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaintView {
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`; empty while unscheduled.
    pub node: String,
    /// kubectl's STATUS column.
    pub status: String,
    /// kubectl's READY column (`1/1`).
    pub ready: String,
    pub restarts: i32,
    /// `Kind/name` of the controller.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// `metadata.deletionTimestamp`: the end of the graceful deletion.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion: Option<String>,
    /// What happens next and when (the nearest future instant `klab why` gives).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub countdown: Option<Countdown>,
    /// `klab why`'s chain of causes, for pods whose node is not healthy or that are going away.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Countdown {
    pub text: String,
    pub due: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkloadView {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub desired: i32,
    pub ready: i32,
    pub available: i32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub time: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    /// `kind/name` as `kubectl get events` prints OBJECT.
    pub object: String,
    pub namespace: String,
    pub message: String,
    pub count: i32,
}

/// What changed between two views: `None` entries were removed; `events` is the whole new list
/// when it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delta {
    pub now: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, Option<NodeView>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pods: BTreeMap<String, Option<PodView>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub workloads: BTreeMap<String, Option<WorkloadView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<EventView>>,
}

impl Delta {
    /// Nothing but the clock moved.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.pods.is_empty()
            && self.workloads.is_empty()
            && self.events.is_none()
    }
}

fn diff_map<T: Clone + PartialEq>(
    prev: &BTreeMap<String, T>,
    next: &BTreeMap<String, T>,
) -> BTreeMap<String, Option<T>> {
    let mut out = BTreeMap::new();
    for (k, v) in next {
        if prev.get(k) != Some(v) {
            out.insert(k.clone(), Some(v.clone()));
        }
    }
    for k in prev.keys() {
        if !next.contains_key(k) {
            out.insert(k.clone(), None);
        }
    }
    out
}

fn apply_map<T: Clone>(map: &mut BTreeMap<String, T>, delta: &BTreeMap<String, Option<T>>) {
    for (k, v) in delta {
        match v {
            Some(v) => {
                map.insert(k.clone(), v.clone());
            }
            None => {
                map.remove(k);
            }
        }
    }
}

/// The delta that turns `prev` into `next` (what the page applies).
pub fn diff(prev: &View, next: &View) -> Delta {
    Delta {
        now: next.now.clone(),
        nodes: diff_map(&prev.nodes, &next.nodes),
        pods: diff_map(&prev.pods, &next.pods),
        workloads: diff_map(&prev.workloads, &next.workloads),
        events: (prev.events != next.events).then(|| next.events.clone()),
    }
}

impl View {
    /// Applies a delta as the page does (the inverse of [`diff`]).
    pub fn apply(&mut self, d: &Delta) {
        self.now = d.now.clone();
        apply_map(&mut self.nodes, &d.nodes);
        apply_map(&mut self.pods, &d.pods);
        apply_map(&mut self.workloads, &d.workloads);
        if let Some(e) = &d.events {
            self.events = e.clone();
        }
    }
}

fn rfc(t: Timestamp) -> String {
    klab_api::clock::format_time(t)
}

fn name_of(m: &ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

fn ns_of(m: &ObjectMeta) -> String {
    m.namespace.clone().unwrap_or_default()
}

/// kubectl's node STATUS (`printNode`): the Ready condition as `Ready`/`NotReady`, `Unknown`
/// without one, `SchedulingDisabled` appended for a cordoned node.
pub fn node_status(n: &Node) -> String {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let mut s = match ready {
        Some(c) if c.status == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        s.push_str(",SchedulingDisabled");
    }
    s
}

fn node_view(n: &Node, heartbeat: Option<Timestamp>) -> NodeView {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let spec = n.spec.as_ref();
    NodeView {
        name: name_of(&n.metadata),
        status: node_status(n),
        ready: ready.map(|c| c.status.clone()).unwrap_or_default(),
        ready_since: ready
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| rfc(t.0)),
        ready_message: ready.and_then(|c| c.message.clone()).unwrap_or_default(),
        heartbeat: heartbeat.map(rfc),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| TaintView {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
                since: t.time_added.as_ref().map(|t| rfc(t.0)),
            })
            .collect(),
        unschedulable: spec.and_then(|s| s.unschedulable) == Some(true),
        zone: n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("topology.kubernetes.io/zone"))
            .cloned()
            .unwrap_or_default(),
    }
}

/// Whether a pod's fate depends on more than its own containers: its node is not Ready or has
/// NoExecute taints, or it is being deleted. Those are the pods `klab why` is asked about.
fn needs_explaining(p: &Pod, nodes: &BTreeMap<String, NodeView>) -> bool {
    if p.metadata.deletion_timestamp.is_some() {
        return true;
    }
    let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
    match node.and_then(|n| nodes.get(n)) {
        Some(n) => n.ready != "True" || n.taints.iter().any(|t| t.effect == "NoExecute"),
        // Bound to a node that is gone: pod GC's business.
        None => node.is_some(),
    }
}

fn pod_view(snap: &Snapshot, p: &Pod, nodes: &BTreeMap<String, NodeView>) -> PodView {
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let total = p.spec.as_ref().map(|s| s.containers.len()).unwrap_or(0);
    let ready = statuses.into_iter().flatten().filter(|c| c.ready).count();
    let restarts = statuses
        .into_iter()
        .flatten()
        .fold(0i32, |acc, c| acc.saturating_add(c.restart_count));
    let owner = p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| format!("{}/{}", o.kind, o.name))
        .unwrap_or_default();
    let mut view = PodView {
        namespace: ns_of(&p.metadata),
        name: name_of(&p.metadata),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        status: klab_why::pod_status(p),
        ready: format!("{ready}/{total}"),
        restarts,
        owner,
        deletion: p.metadata.deletion_timestamp.as_ref().map(|t| rfc(t.0)),
        countdown: None,
        why: Vec::new(),
    };
    if needs_explaining(p, nodes) {
        let target = Target {
            kind: Kind::Pod,
            namespace: view.namespace.clone(),
            name: view.name.clone(),
        };
        if let Ok(e) = klab_why::explain(snap, &target, TimeStyle::Wall) {
            // The nearest instant still ahead is what the page counts down to.
            view.countdown = e
                .causes
                .iter()
                .filter_map(|c| {
                    let due = c.due.as_deref()?.parse::<Timestamp>().ok()?;
                    (due >= snap.now).then_some((due, c))
                })
                .min_by_key(|(due, _)| *due)
                .map(|(due, c)| Countdown {
                    text: timeless(&c.text),
                    due: rfc(due),
                });
            view.why = e.causes.iter().map(|c| timeless(&c.text)).collect();
        }
    }
    view
}

/// A cause's text without its spans relative to `now` (`(in 4m35s)`, `(1m20s ago)`, `(now)`):
/// the page counts those itself, and a text that changed with every tick of the clock would be
/// sent again at every rebuild.
pub fn timeless(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(" (") {
        let (before, after) = rest.split_at(open);
        out.push_str(before);
        let inner_start = &after[2..];
        match inner_start.find(')') {
            Some(close) => {
                let inner = &inner_start[..close];
                let relative =
                    inner.starts_with("in ") || inner.ends_with(" ago") || inner == "now";
                if !relative {
                    out.push_str(&after[..close.saturating_add(3)]);
                }
                rest = &inner_start[close.saturating_add(1)..];
            }
            None => {
                out.push_str(after);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn event_time(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn event_view(e: &Event, t: Timestamp) -> EventView {
    let o = &e.involved_object;
    EventView {
        time: rfc(t),
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        object: format!(
            "{}/{}",
            o.kind.as_deref().unwrap_or_default().to_ascii_lowercase(),
            o.name.as_deref().unwrap_or_default()
        ),
        namespace: ns_of(&e.metadata),
        message: e.message.clone().unwrap_or_default(),
        count: e.count.unwrap_or(1),
    }
}

/// The workloads the page lists: Deployments, StatefulSets, DaemonSets and ReplicaSets that no
/// Deployment controls.
fn workloads(snap: &Snapshot) -> BTreeMap<String, WorkloadView> {
    let mut out = BTreeMap::new();
    let mut put = |kind: &str, m: &ObjectMeta, desired: i32, ready: i32, available: i32| {
        let (namespace, name) = (ns_of(m), name_of(m));
        out.insert(
            format!("{kind}/{namespace}/{name}"),
            WorkloadView {
                kind: kind.to_string(),
                namespace,
                name,
                desired,
                ready,
                available,
            },
        );
    };
    for d in &snap.deployments {
        let s = d.status.as_ref();
        put(
            "Deployment",
            &d.metadata,
            d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            s.and_then(|s| s.ready_replicas).unwrap_or(0),
            s.and_then(|s| s.available_replicas).unwrap_or(0),
        );
    }
    for d in &snap.stateful_sets {
        let s = d.status.as_ref();
        put(
            "StatefulSet",
            &d.metadata,
            d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            s.and_then(|s| s.ready_replicas).unwrap_or(0),
            s.and_then(|s| s.available_replicas).unwrap_or(0),
        );
    }
    for d in &snap.daemon_sets {
        let s = d.status.as_ref();
        put(
            "DaemonSet",
            &d.metadata,
            s.map(|s| s.desired_number_scheduled).unwrap_or(0),
            s.map(|s| s.number_ready).unwrap_or(0),
            s.and_then(|s| s.number_available).unwrap_or(0),
        );
    }
    for d in &snap.replica_sets {
        let controlled = d
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        if controlled {
            continue;
        }
        let s = d.status.as_ref();
        put(
            "ReplicaSet",
            &d.metadata,
            d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            s.and_then(|s| s.ready_replicas).unwrap_or(0),
            s.and_then(|s| s.available_replicas).unwrap_or(0),
        );
    }
    out
}

/// The view of a snapshot (pure: the same snapshot gives the same view).
pub fn build(snap: &Snapshot, speed: f64) -> View {
    let heartbeats: BTreeMap<&str, Timestamp> = snap
        .leases
        .iter()
        .flatten()
        .filter(|l| l.metadata.namespace.as_deref() == Some(klab_api::names::NS_NODE_LEASE))
        .filter_map(|l| {
            let t = l.spec.as_ref()?.renew_time.as_ref()?.0;
            Some((l.metadata.name.as_deref()?, t))
        })
        .collect();
    let nodes: BTreeMap<String, NodeView> = snap
        .nodes
        .iter()
        .map(|n| {
            let name = name_of(&n.metadata);
            let hb = heartbeats.get(name.as_str()).copied();
            (name, node_view(n, hb))
        })
        .collect();
    let pods = snap
        .pods
        .iter()
        .map(|p| {
            let v = pod_view(snap, p, &nodes);
            (format!("{}/{}", v.namespace, v.name), v)
        })
        .collect();
    let mut events: Vec<(Timestamp, String, EventView)> = snap
        .events
        .iter()
        .filter_map(|e| {
            let t = event_time(e)?;
            let key = format!("{}/{}", ns_of(&e.metadata), name_of(&e.metadata));
            Some((t, key, event_view(e, t)))
        })
        .collect();
    // Time, then name: a total order, so equal instants always list the same way.
    events.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let skip = events.len().saturating_sub(LAST_EVENTS);
    View {
        now: rfc(snap.now),
        speed: if speed.is_finite() && speed > 0.0 {
            speed
        } else {
            1.0
        },
        nodes,
        pods,
        workloads: workloads(snap),
        events: events.into_iter().skip(skip).map(|(_, _, e)| e).collect(),
    }
}

/// The kube-controller-manager flags a kubeadm-style static pod shows (as `klab why` reads them),
/// so countdowns use the cluster's grace periods rather than upstream's defaults.
pub fn settings_from_pods(pods: &[Pod]) -> klab_why::Settings {
    let mut settings = klab_why::Settings::default();
    for p in pods.iter().filter(|p| {
        p.metadata.namespace.as_deref() == Some(klab_api::names::NS_KUBE_SYSTEM)
            && p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("component"))
                .map(String::as_str)
                == Some("kube-controller-manager")
    }) {
        for c in p.spec.iter().flat_map(|s| s.containers.iter()) {
            let args = c.command.iter().flatten().chain(c.args.iter().flatten());
            settings.apply_args(args.map(String::as_str));
        }
    }
    settings
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // tests compute expectations freely
mod tests {
    use super::*;
    use serde_json::json;

    const T0: &str = "2026-01-01T10:00:00Z";

    fn at(secs: i64) -> Timestamp {
        klab_api::clock::saturating_add_secs(T0.parse().unwrap(), secs)
    }

    fn obj<K: serde::de::DeserializeOwned>(v: serde_json::Value) -> K {
        serde_json::from_value(v).unwrap()
    }

    fn node(name: &str, ready: &str, since: i64, taints: serde_json::Value) -> Node {
        obj(json!({
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready,
                "lastTransitionTime": rfc(at(since)), "message": format!("ready {ready}")}]}
        }))
    }

    fn lease(node: &str, renew: i64) -> k8s_openapi::api::coordination::v1::Lease {
        obj(json!({
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "renewTime": klab_api::clock::format_micro_time(at(renew))}
        }))
    }

    fn pod(name: &str, node: &str) -> Pod {
        obj(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "creationTimestamp": rfc(at(-600)),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
                    "uid": "rs-uid", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}],
                "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": true,
                    "restartCount": 2, "state": {"running": {"startedAt": rfc(at(-590))}}}]}
        }))
    }

    fn event(name: &str, t: i64, reason: &str) -> Event {
        obj(json!({
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": "n1"},
            "reason": reason, "message": format!("{reason} message"), "type": "Normal",
            "lastTimestamp": rfc(at(t)), "count": 1
        }))
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            now: at(60),
            nodes: vec![
                node("n1", "True", -600, json!([])),
                node(
                    "n2",
                    "Unknown",
                    40,
                    json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": rfc(at(45))},
                           {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": rfc(at(40))}]),
                ),
            ],
            leases: Some(vec![lease("n1", 55), lease("n2", -10)]),
            pods: vec![pod("web-1", "n1"), pod("web-2", "n2")],
            deployments: vec![obj(json!({
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 2, "selector": {}, "template": {}},
                "status": {"availableReplicas": 1, "readyReplicas": 1}
            }))],
            events: vec![event("b", 30, "NodeNotReady"), event("a", 10, "Starting")],
            ..Default::default()
        }
    }

    #[test]
    fn nodes_show_readiness_heartbeats_and_taints() {
        let v = build(&snapshot(), 20.0);
        assert_eq!(v.now, "2026-01-01T10:01:00Z");
        assert_eq!(v.speed, 20.0);
        let n1 = &v.nodes["n1"];
        assert_eq!((n1.status.as_str(), n1.ready.as_str()), ("Ready", "True"));
        assert_eq!(n1.heartbeat.as_deref(), Some("2026-01-01T10:00:55Z"));
        assert_eq!(n1.zone, "a");
        let n2 = &v.nodes["n2"];
        // kubectl prints an Unknown Ready condition as NotReady; the colour comes from `ready`.
        assert_eq!(
            (n2.status.as_str(), n2.ready.as_str()),
            ("NotReady", "Unknown")
        );
        assert_eq!(n2.ready_since.as_deref(), Some("2026-01-01T10:00:40Z"));
        assert_eq!(n2.taints.len(), 2);
        assert_eq!(n2.taints[0].effect, "NoExecute");
        assert_eq!(n2.taints[0].since.as_deref(), Some("2026-01-01T10:00:45Z"));
    }

    #[test]
    fn pods_on_a_failed_node_count_down_to_their_eviction() {
        let v = build(&snapshot(), 1.0);
        let healthy = &v.pods["default/web-1"];
        assert_eq!(healthy.status, "Running");
        assert_eq!(healthy.ready, "1/1");
        assert_eq!(healthy.restarts, 2);
        assert_eq!(healthy.owner, "ReplicaSet/web-abc");
        assert_eq!(
            healthy.countdown, None,
            "a healthy node's pod has nothing pending"
        );
        assert!(healthy.why.is_empty());
        let stranded = &v.pods["default/web-2"];
        assert_eq!(stranded.node, "n2");
        let cd = stranded.countdown.as_ref().expect("an eviction countdown");
        // The NoExecute taint was added at 45 s; the toleration lasts 300 s.
        assert_eq!(cd.due, "2026-01-01T10:05:45Z", "{cd:?}");
        assert!(!stranded.why.is_empty());
    }

    #[test]
    fn workloads_and_the_last_events() {
        let v = build(&snapshot(), 1.0);
        let w = &v.workloads["Deployment/default/web"];
        assert_eq!((w.desired, w.ready, w.available), (2, 1, 1));
        let reasons: Vec<&str> = v.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["Starting", "NodeNotReady"], "oldest first");
        assert_eq!(v.events[0].object, "node/n1");
        // Only the most recent ones are kept.
        let mut snap = snapshot();
        snap.events = (0..100)
            .map(|i| event(&format!("e{i:03}"), i, "R"))
            .collect();
        let v = build(&snap, 1.0);
        assert_eq!(v.events.len(), LAST_EVENTS);
        assert_eq!(v.events.last().unwrap().time, rfc(at(99)));
    }

    #[test]
    fn deltas_carry_only_changes_and_rebuild_the_view() {
        let snap = snapshot();
        let before = build(&snap, 1.0);
        let mut later = snap.clone();
        later.now = at(70);
        // Only the clock moved: nothing to send.
        let d = diff(&before, &build(&later, 1.0));
        assert!(d.is_empty(), "{d:#?} from {:#?}", before.pods);
        // n1 goes NotReady, web-1 is deleted, a new pod appears, a new event.
        later.nodes[0] = node("n1", "Unknown", 65, json!([]));
        later
            .pods
            .retain(|p| p.metadata.name.as_deref() != Some("web-1"));
        later.pods.push(pod("web-3", "n2"));
        later.events.push(event("c", 66, "NodeNotReady"));
        let after = build(&later, 1.0);
        let d = diff(&before, &after);
        assert!(!d.is_empty());
        assert_eq!(d.nodes.keys().collect::<Vec<_>>(), ["n1"]);
        assert_eq!(d.pods.get("default/web-1"), Some(&None));
        assert!(d.pods.get("default/web-3").is_some_and(Option::is_some));
        assert!(
            !d.pods.contains_key("default/web-2"),
            "unchanged pods are not sent"
        );
        assert_eq!(d.events.as_ref().map(Vec::len), Some(3));
        let mut rebuilt = before.clone();
        rebuilt.apply(&d);
        assert_eq!(rebuilt, after);
        // The wire form the page reads: removals are nulls, names camelCase.
        let wire = serde_json::to_value(&d).unwrap();
        assert_eq!(wire["pods"]["default/web-1"], serde_json::Value::Null);
        assert_eq!(wire["nodes"]["n1"]["ready"], "Unknown");
        assert_eq!(wire["nodes"]["n1"]["readySince"], "2026-01-01T10:01:05Z");
        assert!(
            wire.get("workloads").is_none(),
            "unchanged sections are left out"
        );
    }

    #[test]
    fn odd_objects_do_not_break_the_view() {
        // Nameless objects, a pod without a spec, a node without status, absurd speeds.
        let snap = Snapshot {
            now: at(0),
            nodes: vec![obj(json!({"metadata": {}}))],
            pods: vec![obj(json!({"metadata": {"deletionTimestamp": rfc(at(5))}}))],
            events: vec![obj(json!({"metadata": {}, "involvedObject": {}}))],
            ..Default::default()
        };
        for speed in [f64::NAN, -3.0, 0.0, f64::INFINITY] {
            let v = build(&snap, speed);
            assert_eq!(v.speed, 1.0);
            assert_eq!(v.nodes[""].status, "Unknown");
            assert_eq!(v.pods["/"].status, "Terminating");
            assert_eq!(
                v.pods["/"].deletion.as_deref(),
                Some("2026-01-01T10:00:05Z")
            );
            assert!(
                v.events.is_empty(),
                "an event without any time is not listed"
            );
        }
    }

    #[test]
    fn relative_spans_are_left_to_the_page() {
        let cases = [
            ("evicted at 10:05:45 (in 4m35s)", "evicted at 10:05:45"),
            (
                "Lease last renewed 09:59:50 (1m20s ago), grace 50s",
                "Lease last renewed 09:59:50, grace 50s",
            ),
            (
                "Terminating (DeletionByTaintManager: x), grace 30s (now)",
                "Terminating (DeletionByTaintManager: x), grace 30s",
            ),
            ("unclosed (in 3s", "unclosed (in 3s"),
            ("", ""),
            ("ünïcode (in 1s) ✓", "ünïcode ✓"),
        ];
        for (text, want) in cases {
            assert_eq!(timeless(text), want, "{text}");
        }
    }

    #[test]
    fn controller_manager_flags_set_the_grace_periods() {
        let kcm: Pod = obj(json!({
            "metadata": {"name": "kube-controller-manager-cp", "namespace": "kube-system",
                "labels": {"component": "kube-controller-manager"}},
            "spec": {"containers": [{"name": "kcm", "command": ["kube-controller-manager",
                "--node-monitor-grace-period=20s"]}]}
        }));
        let s = settings_from_pods(&[kcm, pod("web-1", "n1")]);
        assert_eq!(
            s.node_monitor_grace_period,
            std::time::Duration::from_secs(20)
        );
        assert_eq!(
            settings_from_pods(&[pod("web-1", "n1")]),
            klab_why::Settings::default()
        );
    }
}
