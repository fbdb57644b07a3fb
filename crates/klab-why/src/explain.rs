//! The explanations themselves: upstream's rules applied to one snapshot (pure).
//!
//! Pods: scheduling (the scheduler's own FailedScheduling message), the node under the pod (Ready
//! condition, Lease, grace period), NoExecute taints against the pod's tolerations (the taint
//! eviction controller's minimum toleration time), graceful deletion (who can confirm it and what
//! else ends it: pod GC, the out-of-service taint, a forced delete), volumes, kubelet evictions,
//! and what the owner does about it. Nodes: health, heartbeats, taints, the zone's disruption state
//! and eviction rate, and each pod's fate. Workloads: which replicas are missing and why.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use klab_api::clock::{saturating_add, saturating_add_secs};
use klab_api::names;
use klab_api::selector::LabelSelector;

use crate::render::format_span;
use crate::{About, Cause, Explanation, Kind, Snapshot, Target, TimeStyle, WhyError};

/// The reasons of the pod Events explanations read: why a pod is not scheduled (first), then why
/// it does not run (the latest of the others).
pub const POD_TROUBLE_EVENTS: [&str; 7] = [
    "FailedScheduling",
    "FailedAttachVolume",
    "FailedMount",
    "FailedCreatePodSandBox",
    "Failed",
    "BackOff",
    "Unhealthy",
];

/// Replacements a stuck pod's explanation names one by one; the rest are counted.
const REPLACEMENTS_SHOWN: usize = 3;

struct Ctx<'a> {
    snap: &'a Snapshot,
    style: TimeStyle,
    /// Built on first use: explaining every stuck pod of a zone outage at scale would otherwise
    /// scan every pod, Event, node and Lease once per stuck pod.
    index: std::cell::OnceCell<Index<'a>>,
}

impl<'a> Ctx<'a> {
    fn new(snap: &'a Snapshot, style: TimeStyle) -> Self {
        Ctx {
            snap,
            style,
            index: std::cell::OnceCell::new(),
        }
    }

    fn index(&self) -> &Index<'a> {
        self.index.get_or_init(|| Index::new(self.snap))
    }
}

/// The snapshot's lookups, each in snapshot order where several objects share a key (so that
/// "the first" and "the latest" pick what a scan of the lists picked).
struct Index<'a> {
    nodes: BTreeMap<&'a str, &'a Node>,
    /// Node Leases by name (namespace `kube-node-lease`).
    leases: BTreeMap<&'a str, &'a Lease>,
    /// Events about Pods, by the pod's (namespace, name).
    pod_events: BTreeMap<(&'a str, &'a str), Vec<&'a Event>>,
    /// Pods not marked for deletion, by namespace and controller UID.
    live: BTreeMap<(&'a str, &'a str), Live<'a>>,
    /// Ready and total counted nodes (those not excluded from disruption) per zone key.
    zones: BTreeMap<(String, String), (u64, u64)>,
}

/// One controller's pods that are not marked for deletion, in creation order.
#[derive(Default)]
struct Live<'a> {
    pods: Vec<(Timestamp, &'a Pod)>,
    /// `running_before[i]`: how many of the first `i` pods are Running.
    running_before: Vec<usize>,
}

impl<'a> Live<'a> {
    /// Of the pods created at or after `t`: the first `shown`, then how many more there are and
    /// how many of those are Running.
    fn since(&self, t: Timestamp, shown: usize) -> (&[(Timestamp, &'a Pod)], usize, usize) {
        let first = self.pods.partition_point(|(created, _)| *created < t);
        let rest = first.saturating_add(shown).min(self.pods.len());
        let running = |i: usize| self.running_before.get(i).copied().unwrap_or_default();
        (
            self.pods.get(first..rest).unwrap_or_default(),
            self.pods.len().saturating_sub(rest),
            running(self.pods.len()).saturating_sub(running(rest)),
        )
    }
}

impl<'a> Index<'a> {
    fn new(snap: &'a Snapshot) -> Self {
        let mut nodes = BTreeMap::new();
        let mut zones: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
        for n in &snap.nodes {
            if let Some(name) = n.metadata.name.as_deref() {
                nodes.entry(name).or_insert(n);
            }
            let excluded = n
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(names::LABEL_EXCLUDE_DISRUPTION));
            if !excluded {
                let (ready, total) = zones.entry(zone_of(n)).or_default();
                if is_ready(n) {
                    *ready = ready.saturating_add(1);
                }
                *total = total.saturating_add(1);
            }
        }
        let mut leases = BTreeMap::new();
        for l in snap.leases.iter().flatten() {
            if l.metadata.namespace.as_deref() == Some(names::NS_NODE_LEASE)
                && let Some(name) = l.metadata.name.as_deref()
            {
                leases.entry(name).or_insert(l);
            }
        }
        let mut pod_events: BTreeMap<(&str, &str), Vec<&Event>> = BTreeMap::new();
        for e in &snap.events {
            let o = &e.involved_object;
            if o.kind.as_deref() == Some("Pod")
                && let (Some(ns), Some(name)) = (o.namespace.as_deref(), o.name.as_deref())
            {
                pod_events.entry((ns, name)).or_default().push(e);
            }
        }
        let mut live: BTreeMap<(&str, &str), Live> = BTreeMap::new();
        for p in &snap.pods {
            if p.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let (Some(owner), Some(ns), Some(created)) = (
                controller_of(&p.metadata),
                p.metadata.namespace.as_deref(),
                p.metadata.creation_timestamp.as_ref(),
            ) {
                let l = live.entry((ns, owner.uid.as_str())).or_default();
                l.pods.push((created.0, p));
            }
        }
        for l in live.values_mut() {
            // Stable: pods created at the same instant keep snapshot order.
            l.pods.sort_by_key(|(created, _)| *created);
            l.running_before = std::iter::once(0)
                .chain(l.pods.iter().scan(0usize, |n, (_, p)| {
                    *n = n.saturating_add(usize::from(pod_status(p) == "Running"));
                    Some(*n)
                }))
                .collect();
        }
        Index {
            nodes,
            leases,
            pod_events,
            live,
            zones,
        }
    }
}

/// Explains one object of the snapshot.
pub fn explain(
    snap: &Snapshot,
    target: &Target,
    style: TimeStyle,
) -> Result<Explanation, WhyError> {
    let cx = Ctx::new(snap, style);
    let not_found = || {
        WhyError::NotFound(format!(
            "{} \"{}\" not found",
            target.kind.plural(),
            target.name
        ))
    };
    let in_ns = |m: &ObjectMeta| {
        m.name.as_deref() == Some(target.name.as_str())
            && m.namespace.as_deref().unwrap_or_default() == target.namespace
    };
    let mut e = match target.kind {
        Kind::Pod => {
            let p = snap
                .pods
                .iter()
                .find(|p| in_ns(&p.metadata))
                .ok_or_else(not_found)?;
            cx.pod(p)
        }
        Kind::Node => {
            let n = cx.node(&target.name).ok_or_else(not_found)?;
            cx.node_explanation(n)
        }
        Kind::Deployment => {
            let d = snap
                .deployments
                .iter()
                .find(|d| in_ns(&d.metadata))
                .ok_or_else(not_found)?;
            cx.deployment(d)
        }
        Kind::ReplicaSet => {
            let rs = snap
                .replica_sets
                .iter()
                .find(|d| in_ns(&d.metadata))
                .ok_or_else(not_found)?;
            let desired = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            cx.replicas(
                Kind::ReplicaSet,
                &rs.metadata,
                desired,
                &[rs.metadata.uid.clone().unwrap_or_default()],
            )
        }
        Kind::StatefulSet => {
            let s = snap
                .stateful_sets
                .iter()
                .find(|d| in_ns(&d.metadata))
                .ok_or_else(not_found)?;
            cx.stateful_set(s)
        }
        Kind::DaemonSet => {
            let d = snap
                .daemon_sets
                .iter()
                .find(|d| in_ns(&d.metadata))
                .ok_or_else(not_found)?;
            let desired = d
                .status
                .as_ref()
                .map(|s| s.desired_number_scheduled)
                .unwrap_or_default();
            let mut e = cx.replicas(
                Kind::DaemonSet,
                &d.metadata,
                desired,
                &[d.metadata.uid.clone().unwrap_or_default()],
            );
            e.causes.push(cause(
                About::Owner,
                "DaemonSet pods tolerate node.kubernetes.io/unreachable and not-ready NoExecute without a limit: they are never evicted from a failed node, and not replaced elsewhere".into(),
            ));
            e
        }
        Kind::Job => {
            let j = snap
                .jobs
                .iter()
                .find(|d| in_ns(&d.metadata))
                .ok_or_else(not_found)?;
            cx.job(j)
        }
    };
    e.unreadable = snap.unreadable.clone();
    Ok(e)
}

/// Every pod that is stuck or pending, in namespace/name order (`klab sim`'s summary).
pub fn explain_stuck_pods(snap: &Snapshot, style: TimeStyle) -> Vec<Explanation> {
    let cx = Ctx::new(snap, style);
    let mut pods: Vec<&Pod> = snap.pods.iter().collect();
    pods.sort_by_key(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()));
    pods.into_iter()
        .map(|p| cx.pod(p))
        .filter(|e| e.stuck)
        .collect()
}

/// kubectl's STATUS column for a pod (`printPod`, without init containers' detail).
pub fn pod_status(p: &Pod) -> String {
    let st = p.status.as_ref();
    let mut reason = st
        .and_then(|s| s.reason.clone())
        .or_else(|| st.and_then(|s| s.phase.clone()))
        .unwrap_or_else(|| "Pending".into());
    let mut running = false;
    for c in st
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
    {
        let state = c.state.as_ref();
        if let Some(w) = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
        {
            reason = w;
        } else if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            reason = t
                .reason
                .clone()
                .unwrap_or_else(|| format!("ExitCode:{}", t.exit_code));
        } else if state.is_some_and(|s| s.running.is_some()) && c.ready {
            running = true;
        }
    }
    if running && reason == "Completed" {
        reason = "Running".into();
    }
    if p.metadata.deletion_timestamp.is_some() {
        return if st.and_then(|s| s.reason.as_deref()) == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn cause(about: About, text: String) -> Cause {
    Cause {
        about,
        text,
        since: None,
        due: None,
    }
}

fn rfc(t: Timestamp) -> String {
    klab_api::clock::format_time(t)
}

fn controller_of(m: &ObjectMeta) -> Option<&OwnerReference> {
    m.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

fn ready_condition(n: &Node) -> Option<&NodeCondition> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == names::COND_READY))
}

fn is_ready(n: &Node) -> bool {
    ready_condition(n).is_some_and(|c| c.status == "True")
}

fn taints(n: &Node) -> &[Taint] {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

fn taint_text(t: &Taint) -> String {
    klab_api::taints::taint_to_string(t)
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_id(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or_default(),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The zone key of the node lifecycle controller: region and zone, beta labels first.
fn zone_of(n: &Node) -> (String, String) {
    let labels = n.metadata.labels.as_ref();
    let pick = |beta: &str, ga: &str| {
        labels
            .and_then(|l| l.get(beta).or_else(|| l.get(ga)))
            .cloned()
            .unwrap_or_default()
    };
    (
        pick(names::LABEL_REGION_BETA, names::LABEL_REGION),
        pick(names::LABEL_ZONE_BETA, names::LABEL_ZONE),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

impl<'a> Ctx<'a> {
    fn now(&self) -> Timestamp {
        self.snap.now
    }

    fn t(&self, t: Timestamp) -> String {
        self.style.format(t)
    }

    /// `in 3m12s` for the future, `3m12s ago` for the past.
    fn rel(&self, t: Timestamp) -> String {
        let d = t.duration_since(self.now());
        if d.as_secs() == 0 {
            "now".into()
        } else if d.is_negative() {
            format!("{} ago", format_span(d))
        } else {
            format!("in {}", format_span(d))
        }
    }

    fn node(&self, name: &str) -> Option<&'a Node> {
        self.index().nodes.get(name).copied()
    }

    fn lease_renewed(&self, node: &str) -> Option<Option<Timestamp>> {
        self.snap.leases.as_ref()?;
        Some(
            self.index()
                .leases
                .get(node)
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.renew_time.as_ref())
                .map(|t| t.0),
        )
    }

    fn grace_secs(&self) -> u64 {
        self.snap.settings.node_monitor_grace_period.as_secs()
    }

    /// The Lease sentence: `Lease last renewed 00:00:25 (1m10s ago), grace 50s`.
    fn lease_text(&self, node: &str) -> String {
        match self.lease_renewed(node) {
            None => "Leases could not be read".into(),
            Some(None) => format!("no Lease {}/{node}", names::NS_NODE_LEASE),
            Some(Some(t)) => format!(
                "Lease last renewed {} ({}), grace {}s",
                self.t(t),
                self.rel(t),
                self.grace_secs()
            ),
        }
    }

    /// The node's health as causes about the node: NotReady since …, or a silent node's countdown.
    fn node_health(&self, n: &Node) -> (Vec<Cause>, bool) {
        let name = n.metadata.name.clone().unwrap_or_default();
        let mut out = Vec::new();
        let c = match ready_condition(n) {
            None => {
                out.push(cause(
                    About::Node,
                    format!(
                        "node {name} has not posted a Ready condition yet (startup grace {}s)",
                        self.snap.settings.node_startup_grace_period.as_secs()
                    ),
                ));
                return (out, false);
            }
            Some(c) if c.status == "True" => {
                // Silent but not yet marked: when will the node lifecycle controller notice?
                let hb = c.last_heartbeat_time.as_ref().map(|t| t.0);
                let lease = self.lease_renewed(&name).flatten();
                let last = match (hb, lease) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                if let Some(last) = last {
                    let silent = self.now().duration_since(last);
                    // The kubelet renews its Lease every 10 s; two missed renewals are worth a word.
                    if silent > SignedDuration::from_secs(20) {
                        let due =
                            saturating_add(last, self.snap.settings.node_monitor_grace_period);
                        let mut c = cause(
                            About::Node,
                            format!(
                                "node {name} is Ready but silent: {}; after the grace period the node lifecycle controller marks it NotReady (Ready=Unknown) at ≈{} ({}, at its next pass every {}s)",
                                self.lease_text(&name),
                                self.t(due),
                                self.rel(due),
                                self.snap.settings.node_monitor_period.as_secs()
                            ),
                        );
                        c.since = Some(rfc(last));
                        c.due = Some(rfc(due));
                        out.push(c);
                        return (out, true);
                    }
                }
                return (out, false);
            }
            Some(c) => c,
        };
        let since = c.last_transition_time.as_ref().map(|t| t.0);
        let detail = match (c.reason.as_deref(), c.message.as_deref()) {
            (Some(r), Some(m)) => format!(" ({r}: {m})"),
            (Some(r), None) => format!(" ({r})"),
            _ => String::new(),
        };
        let when = since
            .map(|t| format!(" since {}", self.t(t)))
            .unwrap_or_default();
        let mut first = cause(
            About::Node,
            format!(
                "node {name} NotReady{when}, Ready={}{detail}; {}",
                c.status,
                self.lease_text(&name)
            ),
        );
        first.since = since.map(rfc);
        out.push(first);
        for t in taints(n)
            .iter()
            .filter(|t| t.effect == names::EFFECT_NO_EXECUTE)
        {
            let added = t.time_added.as_ref().map(|a| a.0);
            let mut c = cause(
                About::Node,
                format!(
                    "taint {} added{}",
                    taint_text(t),
                    added
                        .map(|a| format!(" at {}", self.t(a)))
                        .unwrap_or_default()
                ),
            );
            c.since = added.map(rfc);
            out.push(c);
        }
        (out, true)
    }

    /// The zone's disruption state and the rate at which NoExecute taints are added in it.
    fn zone(&self, n: &Node) -> (String, ZoneState, f64, bool) {
        let key = zone_of(n);
        let zones = &self.index().zones;
        let state_of = |k: &(String, String)| {
            let (ready, total) = zones.get(k).copied().unwrap_or_default();
            let not_ready = total.saturating_sub(ready);
            let state = if ready == 0 && not_ready > 0 {
                ZoneState::FullDisruption
            } else if not_ready > 2
                && (not_ready as f64) / (total.max(1) as f64)
                    >= self.snap.settings.unhealthy_zone_threshold
            {
                ZoneState::PartialDisruption
            } else {
                ZoneState::Normal
            };
            (state, ready, total)
        };
        let (state, ready, total) = state_of(&key);
        let all_full = !zones.is_empty()
            && zones
                .keys()
                .all(|z| state_of(z).0 == ZoneState::FullDisruption);
        let s = &self.snap.settings;
        let rate = if all_full {
            0.0
        } else {
            match state {
                ZoneState::Normal | ZoneState::FullDisruption => s.node_eviction_rate,
                ZoneState::PartialDisruption if total > s.large_cluster_size_threshold => {
                    s.secondary_node_eviction_rate
                }
                ZoneState::PartialDisruption => 0.0,
            }
        };
        let label = if key.1.is_empty() && key.0.is_empty() {
            "zone \"\" (nodes without zone labels)".to_string()
        } else if key.0.is_empty() {
            format!("zone {}", key.1)
        } else {
            format!("zone {}/{}", key.0, key.1)
        };
        let state_name = match state {
            ZoneState::Normal => "Normal",
            ZoneState::PartialDisruption => "PartialDisruption",
            ZoneState::FullDisruption => "FullDisruption",
        };
        let text = format!(
            "{label} is {state_name} ({ready} of {total} nodes Ready): {}",
            if all_full {
                "every zone is fully disrupted, so the node lifecycle controller adds no NoExecute taints and removes its existing ones (it cannot tell a dead cluster from its own network failure)".to_string()
            } else if rate > 0.0 {
                format!("NoExecute taints are added at {rate} nodes/s")
            } else {
                "no NoExecute taints are added (eviction rate 0 in a partially disrupted small zone)"
                    .to_string()
            }
        );
        (text, state, rate, all_full)
    }

    // ----- pods -------------------------------------------------------------------------------

    fn pod(&self, p: &Pod) -> Explanation {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let status = pod_status(p);
        let mut causes = Vec::new();
        let node_name = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let deleting = p.metadata.deletion_timestamp.as_ref().map(|t| t.0);
        let mut stuck = false;

        if node_name.is_empty() {
            if deleting.is_some() {
                causes.push(cause(
                    About::Pod,
                    format!(
                        "Terminating but never bound to a node: the pod garbage collector force-deletes it at its next pass (every {}s)",
                        self.snap.settings.pod_gc_period.as_secs()
                    ),
                ));
            } else {
                causes.push(self.pending_reason(p));
            }
            stuck = true;
        } else {
            let node = self.node(&node_name);
            let node_ok = node.is_some_and(is_ready);
            if let Some(n) = node {
                let (health, bad) = self.node_health(n);
                causes.extend(health);
                stuck |= bad;
            } else {
                causes.push(cause(
                    About::Node,
                    format!("node {node_name} no longer exists"),
                ));
                stuck = true;
            }
            if let Some(del) = deleting {
                stuck |= self.terminating(p, &node_name, node, del, &mut causes);
            } else if matches!(phase.as_str(), "Succeeded" | "Failed") {
                // Finished: nothing is waiting, whatever became of its node.
                causes.push(self.finished(p, &phase, &node_name));
                stuck = false;
            } else {
                if let Some(n) = node.filter(|_| !node_ok) {
                    causes.extend(self.eviction_countdown(p, n));
                } else if node.is_none() {
                    causes.push(cause(
                        About::Next,
                        format!(
                            "the pod garbage collector force-deletes pods of a deleted node {}s after it first sees them orphaned (passes every {}s)",
                            self.snap.settings.pod_gc_quarantine.as_secs(),
                            self.snap.settings.pod_gc_period.as_secs()
                        ),
                    ));
                }
                if node_ok {
                    let (c, bad) = self.on_healthy_node(p, &status, &node_name);
                    causes.extend(c);
                    stuck |= bad;
                }
            }
        }
        causes.extend(self.owner_causes(p, deleting.is_some()));
        causes.extend(self.pdb_causes(p));
        Explanation {
            kind: Kind::Pod,
            namespace: ns,
            name,
            state: if node_name.is_empty() {
                status
            } else {
                format!("{status} on {node_name}")
            },
            stuck,
            causes,
            parts: Vec::new(),
            unreadable: Vec::new(),
        }
    }

    /// Pending without a node: the scheduler's own words.
    fn pending_reason(&self, p: &Pod) -> Cause {
        let gates: Vec<String> = p
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .into_iter()
            .flatten()
            .map(|g| g.name.clone())
            .collect();
        if !gates.is_empty() {
            return cause(
                About::Pod,
                format!(
                    "Pending: scheduling gated by {} (SchedulingGated)",
                    gates.join(", ")
                ),
            );
        }
        let cond = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == names::POD_COND_SCHEDULED && c.status == "False")
            });
        let event = self.latest_event(p, POD_TROUBLE_EVENTS[0]);
        let (msg, since) = match (cond.and_then(|c| c.message.clone()), event) {
            (Some(m), _) => (
                m,
                cond.and_then(|c| c.last_transition_time.as_ref())
                    .map(|t| t.0),
            ),
            (None, Some((m, t))) => (m, t),
            (None, None) => (
                "not scheduled yet (no FailedScheduling event from the scheduler)".into(),
                None,
            ),
        };
        let mut c = cause(
            About::Pod,
            format!(
                "Pending{}: {msg}",
                since
                    .map(|t| format!(" since {}", self.t(t)))
                    .unwrap_or_default()
            ),
        );
        c.since = since.map(rfc);
        c
    }

    /// The latest Event of `reason` about this pod: message and time.
    fn latest_event(&self, p: &Pod, reason: &str) -> Option<(String, Option<Timestamp>)> {
        self.latest_event_of(p, &[reason]).map(|(_, m, t)| (m, t))
    }

    fn latest_event_of(
        &self,
        p: &Pod,
        reasons: &[&str],
    ) -> Option<(String, String, Option<Timestamp>)> {
        let uid = p.metadata.uid.as_deref();
        let name = p.metadata.name.as_deref()?;
        let ns = p.metadata.namespace.as_deref()?;
        self.index()
            .pod_events
            .get(&(ns, name))?
            .iter()
            .filter(|e| {
                (uid.is_none()
                    || e.involved_object.uid.is_none()
                    || e.involved_object.uid.as_deref() == uid)
                    && e.reason.as_deref().is_some_and(|r| reasons.contains(&r))
            })
            .map(|e| {
                let t = e
                    .last_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .or_else(|| e.event_time.as_ref().map(|t| t.0))
                    .or_else(|| e.first_timestamp.as_ref().map(|t| t.0));
                (
                    e.reason.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default(),
                    t,
                )
            })
            .max_by_key(|(_, _, t)| *t)
    }

    /// A pod marked for deletion: since when, by whom, and who can end it. True when stuck.
    fn terminating(
        &self,
        p: &Pod,
        node_name: &str,
        node: Option<&Node>,
        deletion: Timestamp,
        causes: &mut Vec<Cause>,
    ) -> bool {
        let grace = p.metadata.deletion_grace_period_seconds.unwrap_or(0);
        let requested = saturating_add_secs(deletion, grace.saturating_neg());
        let disruption = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
            });
        let by = match disruption {
            Some(d) => format!(
                " ({}: {})",
                d.reason.as_deref().unwrap_or_default(),
                d.message.as_deref().unwrap_or_default()
            ),
            None => String::new(),
        };
        let mut c = cause(
            About::Pod,
            format!(
                "Terminating since {}{by}, grace period {grace}s",
                self.t(requested)
            ),
        );
        c.since = Some(rfc(requested));
        causes.push(c);
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let force = format!("kubectl delete pod {name} -n {ns} --force --grace-period=0");
        let out_of_service = node.is_some_and(|n| {
            taints(n)
                .iter()
                .any(|t| t.key == names::TAINT_OUT_OF_SERVICE)
        });
        match node {
            None => {
                causes.push(cause(
                    About::Next,
                    format!(
                        "node {node_name} no longer exists: the pod garbage collector force-deletes the pod {}s after it first sees it orphaned (passes every {}s), or {force}",
                        self.snap.settings.pod_gc_quarantine.as_secs(),
                        self.snap.settings.pod_gc_period.as_secs()
                    ),
                ));
                true
            }
            Some(n) if !is_ready(n) && out_of_service => {
                causes.push(cause(
                    About::Next,
                    format!(
                        "node {node_name} is not Ready and has the {} taint: the pod garbage collector force-deletes the pod at its next pass (every {}s)",
                        names::TAINT_OUT_OF_SERVICE,
                        self.snap.settings.pod_gc_period.as_secs()
                    ),
                ));
                true
            }
            Some(n) if !is_ready(n) => {
                causes.push(cause(
                    About::Next,
                    format!(
                        "no kubelet confirms the termination because node {node_name} is NotReady; it ends when the node returns, the node is deleted (pod GC after {}s), the out-of-service taint is added (kubectl taint node {node_name} {}=nodeshutdown:NoExecute), or with {force}",
                        self.snap.settings.pod_gc_quarantine.as_secs(),
                        names::TAINT_OUT_OF_SERVICE,
                    ),
                ));
                true
            }
            Some(_) => {
                let finalizers = p.metadata.finalizers.clone().unwrap_or_default();
                if deletion > self.now() {
                    let mut c = cause(
                        About::Next,
                        format!(
                            "the kubelet on {node_name} is stopping the containers: the grace period ends at {} ({})",
                            self.t(deletion),
                            self.rel(deletion)
                        ),
                    );
                    c.due = Some(rfc(deletion));
                    causes.push(c);
                    false
                } else if !finalizers.is_empty() {
                    causes.push(cause(
                        About::Next,
                        format!(
                            "waiting for finalizers {} to be removed",
                            finalizers.join(", ")
                        ),
                    ));
                    true
                } else {
                    causes.push(cause(
                        About::Next,
                        format!(
                            "the grace period ended at {} ({}) but the kubelet on {node_name} has not confirmed the termination yet",
                            self.t(deletion),
                            self.rel(deletion)
                        ),
                    ));
                    true
                }
            }
        }
    }

    /// A pod still bound to a NotReady node: the NoExecute taints against its tolerations.
    fn eviction_countdown(&self, p: &Pod, n: &Node) -> Vec<Cause> {
        let tolerations = p
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.clone())
            .unwrap_or_default();
        let node_name = n.metadata.name.clone().unwrap_or_default();
        let no_execute: Vec<&Taint> = taints(n)
            .iter()
            .filter(|t| t.effect == names::EFFECT_NO_EXECUTE)
            .collect();
        let mut out = Vec::new();
        if no_execute.is_empty() {
            let (zone_text, _, rate, _) = self.zone(n);
            let key = match ready_condition(n).map(|c| c.status.as_str()) {
                Some("False") => names::TAINT_NOT_READY,
                _ => names::TAINT_UNREACHABLE,
            };
            out.push(cause(About::Node, zone_text));
            if rate > 0.0 {
                let secs = tolerations
                    .iter()
                    .filter(|t| {
                        klab_api::taints::tolerates(
                            t,
                            &Taint {
                                key: key.into(),
                                effect: names::EFFECT_NO_EXECUTE.into(),
                                ..Default::default()
                            },
                        )
                    })
                    .map(|t| t.toleration_seconds)
                    .collect::<Vec<_>>();
                let then = if secs.is_empty() {
                    "this pod does not tolerate it: evicted at once".to_string()
                } else if let Some(min) = secs.iter().flatten().min() {
                    format!("this pod tolerates it for {min}s, then it is evicted")
                } else {
                    "this pod tolerates it without a limit: never evicted".to_string()
                };
                out.push(cause(
                    About::Next,
                    format!(
                        "the node lifecycle controller adds {key}:NoExecute to {node_name} at its next pass (every {}s, rate-limited per zone); {then}",
                        self.snap.settings.node_monitor_period.as_secs()
                    ),
                ));
            } else {
                out.push(cause(
                    About::Next,
                    format!("no eviction while the zone stays disrupted: the pod stays bound to {node_name} until the node returns"),
                ));
            }
            return out;
        }
        // Upstream's processPodOnNode: any untolerated NoExecute taint evicts at once; else the
        // smallest tolerationSeconds among the tolerations used, counted from when the taint
        // eviction controller first saw a taint (≈ its timeAdded).
        let untolerated: Vec<&&Taint> = no_execute
            .iter()
            .filter(|t| !klab_api::taints::tolerated_by_any(&tolerations, t))
            .collect();
        let first_added = no_execute
            .iter()
            .filter_map(|t| t.time_added.as_ref().map(|a| a.0))
            .min();
        if let Some(t) = untolerated.first() {
            out.push(cause(
                About::Next,
                format!(
                    "this pod does not tolerate {}: the taint eviction controller deletes it at once",
                    taint_text(t)
                ),
            ));
            return out;
        }
        let min = no_execute
            .iter()
            .flat_map(|taint| {
                tolerations
                    .iter()
                    .filter(|tol| klab_api::taints::tolerates(tol, taint))
            })
            .filter_map(|tol| tol.toleration_seconds)
            .min();
        let keys: Vec<String> = no_execute.iter().map(|t| taint_text(t)).collect();
        match (min, first_added) {
            (None, _) => out.push(cause(
                About::Next,
                format!(
                    "this pod tolerates {} without a limit: never evicted; it stays bound to {node_name} until the node returns",
                    keys.join(", ")
                ),
            )),
            (Some(secs), Some(added)) => {
                // A pod bound after the taint is first seen by the taint eviction controller
                // when it is bound: its countdown starts then.
                let bound = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| {
                        c.iter()
                            .find(|c| c.type_ == names::POD_COND_SCHEDULED && c.status == "True")
                    })
                    .and_then(|c| c.last_transition_time.as_ref())
                    .or(p.metadata.creation_timestamp.as_ref())
                    .map(|t| t.0);
                let start = bound.map_or(added, |b| b.max(added));
                let due = saturating_add_secs(start, secs.max(0));
                let mut c = cause(
                    About::Next,
                    format!(
                        "this pod tolerates {} for {secs}s → evicted by the taint eviction controller at {} ({})",
                        keys.join(", "),
                        self.t(due),
                        self.rel(due)
                    ),
                );
                c.since = Some(rfc(start));
                c.due = Some(rfc(due));
                out.push(c);
            }
            (Some(secs), None) => out.push(cause(
                About::Next,
                format!(
                    "this pod tolerates {} for {secs}s after the taint eviction controller saw the taint (the taint has no timeAdded)",
                    keys.join(", ")
                ),
            )),
        }
        out
    }

    /// Succeeded or Failed: a kubelet eviction's message, else the phase.
    fn finished(&self, p: &Pod, phase: &str, node: &str) -> Cause {
        let st = p.status.as_ref();
        match (
            st.and_then(|s| s.reason.as_deref()),
            st.and_then(|s| s.message.as_deref()),
        ) {
            (Some("Evicted"), msg) => cause(
                About::Pod,
                format!(
                    "Evicted by the kubelet on {node}: {}",
                    msg.unwrap_or_default()
                ),
            ),
            (Some(r), Some(m)) => cause(About::Pod, format!("{phase} ({r}): {m}")),
            _ => cause(
                About::Pod,
                format!("{phase}: its containers have terminated"),
            ),
        }
    }

    /// On a Ready node: Running and Ready, or what it waits for (volumes, images, probes).
    fn on_healthy_node(&self, p: &Pod, status: &str, node: &str) -> (Vec<Cause>, bool) {
        let mut out = Vec::new();
        if status == "Running" && pod_ready(p) {
            out.push(cause(About::Pod, format!("Running and Ready on {node}")));
            return (out, false);
        }
        let claims: Vec<String> = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.clone())
            })
            .collect();
        let ns = p.metadata.namespace.as_deref();
        for claim in &claims {
            let pvc = self.snap.pvcs.iter().find(|c| {
                c.metadata.name.as_deref() == Some(claim) && c.metadata.namespace.as_deref() == ns
            });
            let phase = pvc
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.clone());
            if phase.as_deref() == Some("Pending") {
                out.push(cause(
                    About::Pod,
                    format!("PersistentVolumeClaim {claim} is Pending (not bound to a volume)"),
                ));
            }
            let volume = pvc
                .and_then(|c| c.spec.as_ref())
                .and_then(|s| s.volume_name.clone());
            if let Some(pv) = volume {
                for va in self.snap.volume_attachments.iter().filter(|va| {
                    va.spec.node_name == node
                        && va.spec.source.persistent_volume_name.as_deref() == Some(pv.as_str())
                }) {
                    let st = va.status.as_ref();
                    if !st.is_some_and(|s| s.attached) {
                        let err = st
                            .and_then(|s| s.attach_error.as_ref())
                            .and_then(|e| e.message.clone())
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default();
                        out.push(cause(
                            About::Pod,
                            format!("volume {pv} is not attached to {node} yet{err}"),
                        ));
                    }
                }
            }
        }
        if let Some((reason, msg, t)) = self.latest_event_of(p, &POD_TROUBLE_EVENTS[1..]) {
            let mut c = cause(
                About::Pod,
                format!(
                    "{status}: {reason}{}: {msg}",
                    t.map(|t| format!(" at {}", self.t(t))).unwrap_or_default()
                ),
            );
            c.since = t.map(rfc);
            out.push(c);
        } else if out.is_empty() {
            out.push(cause(
                About::Pod,
                if status == "Running" {
                    "Running but not Ready: its readiness has not been reported yet".into()
                } else {
                    format!("{status}: the kubelet on {node} is starting it")
                },
            ));
        }
        (out, true)
    }

    /// What the pod's controller does (or cannot do) about it.
    fn owner_causes(&self, p: &Pod, deleting: bool) -> Vec<Cause> {
        let Some(owner) = controller_of(&p.metadata) else {
            return Vec::new();
        };
        let name = p.metadata.name.clone().unwrap_or_default();
        let ns = p.metadata.namespace.as_deref();
        let mut out = Vec::new();
        match owner.kind.as_str() {
            "StatefulSet" if deleting => out.push(cause(
                About::Owner,
                format!(
                    "StatefulSet {} cannot create {name} elsewhere: the old {name} still exists",
                    owner.name
                ),
            )),
            "DaemonSet" if deleting => out.push(cause(
                About::Owner,
                format!(
                    "DaemonSet {} replaces it only on the same node, once it is gone",
                    owner.name
                ),
            )),
            "ReplicaSet" | "Job" if deleting => {
                let requested = p.metadata.deletion_timestamp.as_ref().map(|t| {
                    saturating_add_secs(
                        t.0,
                        p.metadata
                            .deletion_grace_period_seconds
                            .unwrap_or(0)
                            .saturating_neg(),
                    )
                });
                let recreate = (owner.kind == "ReplicaSet")
                    .then(|| {
                        self.snap
                            .replica_sets
                            .iter()
                            .find(|r| r.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                    })
                    .flatten()
                    .and_then(|rs| controller_of(&rs.metadata))
                    .and_then(|d| {
                        self.snap
                            .deployments
                            .iter()
                            .find(|x| x.metadata.uid.as_deref() == Some(d.uid.as_str()))
                    })
                    .filter(|d| {
                        d.spec
                            .as_ref()
                            .and_then(|s| s.strategy.as_ref())
                            .and_then(|s| s.type_.as_deref())
                            == Some("Recreate")
                    });
                if let Some(d) = recreate {
                    out.push(cause(
                        About::Owner,
                        format!(
                            "Deployment {} uses the Recreate strategy: it creates new pods only once every old pod is gone",
                            d.metadata.name.as_deref().unwrap_or_default()
                        ),
                    ));
                    return out;
                }
                // In creation order: the first ones are named, the rest counted (in a zone
                // outage every stuck pod of a big ReplicaSet would otherwise list thousands).
                let (replacements, more, more_running) = match (requested, ns) {
                    (Some(r), Some(ns)) => self
                        .index()
                        .live
                        .get(&(ns, owner.uid.as_str()))
                        .map(|l| l.since(r, REPLACEMENTS_SHOWN))
                        .unwrap_or_default(),
                    _ => Default::default(),
                };
                if replacements.is_empty() {
                    out.push(cause(
                        About::Owner,
                        format!(
                            "{} {} has created no replacement since",
                            owner.kind, owner.name
                        ),
                    ));
                }
                for (created, r) in replacements {
                    out.push(cause(
                        About::Owner,
                        format!(
                            "{} {} created replacement {} at {} ({} on {})",
                            owner.kind,
                            owner.name,
                            r.metadata.name.as_deref().unwrap_or_default(),
                            self.t(*created),
                            pod_status(r),
                            r.spec
                                .as_ref()
                                .and_then(|s| s.node_name.as_deref())
                                .unwrap_or("<none>")
                        ),
                    ));
                }
                if more > 0 {
                    out.push(cause(
                        About::Owner,
                        format!(
                            "{} {} created {more} more {} ({more_running} Running)",
                            owner.kind,
                            owner.name,
                            if more == 1 {
                                "replacement"
                            } else {
                                "replacements"
                            }
                        ),
                    ));
                }
            }
            _ => {}
        }
        out
    }

    /// A budget that currently refuses evictions of this pod (what `kubectl drain` would meet).
    fn pdb_causes(&self, p: &Pod) -> Vec<Cause> {
        let labels = p.metadata.labels.clone().unwrap_or_default();
        let mut out = Vec::new();
        for pdb in &self.snap.pdbs {
            if pdb.metadata.namespace != p.metadata.namespace {
                continue;
            }
            let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
                continue;
            };
            let Ok(sel) = LabelSelector::from_label_selector(sel) else {
                continue;
            };
            let allowed = pdb
                .status
                .as_ref()
                .map(|s| s.disruptions_allowed)
                .unwrap_or_default();
            if sel.matches(&labels) && allowed <= 0 && p.metadata.deletion_timestamp.is_none() {
                out.push(cause(
                    About::Owner,
                    format!(
                        "PodDisruptionBudget {} allows 0 disruptions now: an eviction (kubectl drain) of this pod is refused with 429 until another pod is healthy",
                        pdb.metadata.name.as_deref().unwrap_or_default()
                    ),
                ));
            }
        }
        out
    }

    // ----- nodes ------------------------------------------------------------------------------

    fn node_explanation(&self, n: &Node) -> Explanation {
        let name = n.metadata.name.clone().unwrap_or_default();
        let ready = is_ready(n);
        let unschedulable = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        let mut state = if ready { "Ready" } else { "NotReady" }.to_string();
        if unschedulable {
            state.push_str(",SchedulingDisabled");
        }
        let (mut causes, bad) = self.node_health(n);
        if ready && causes.is_empty() {
            let hb = ready_condition(n)
                .and_then(|c| c.last_heartbeat_time.as_ref())
                .map(|t| t.0);
            causes.push(cause(
                About::Node,
                format!(
                    "Ready{}; {}",
                    hb.map(|t| format!(", last status heartbeat {} ({})", self.t(t), self.rel(t)))
                        .unwrap_or_default(),
                    self.lease_text(&name)
                ),
            ));
        }
        for c in n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.type_ != names::COND_READY)
        {
            // Unknown pressure on a NotReady node only repeats the Ready line (the node
            // lifecycle controller marks them together).
            let abnormal = match c.type_.as_str() {
                "NetworkUnavailable" | "MemoryPressure" | "DiskPressure" | "PIDPressure" => {
                    c.status == "True" || (c.status != "False" && ready)
                }
                _ => false,
            };
            if abnormal {
                causes.push(cause(
                    About::Node,
                    format!(
                        "{}={} ({}: {})",
                        c.type_,
                        c.status,
                        c.reason.as_deref().unwrap_or_default(),
                        c.message.as_deref().unwrap_or_default()
                    ),
                ));
            }
        }
        for t in taints(n)
            .iter()
            .filter(|t| t.effect != names::EFFECT_NO_EXECUTE || ready)
        {
            causes.push(cause(
                About::Node,
                format!(
                    "taint {}{}",
                    taint_text(t),
                    t.time_added
                        .as_ref()
                        .map(|a| format!(" added at {}", self.t(a.0)))
                        .unwrap_or_default()
                ),
            ));
        }
        if unschedulable {
            causes.push(cause(
                About::Node,
                "cordoned (spec.unschedulable): no new pods are scheduled here".into(),
            ));
        }
        causes.push(cause(About::Node, self.zone(n).0));
        let mut pods: Vec<&Pod> = self
            .snap
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name))
            .collect();
        pods.sort_by_key(|p| pod_id(p));
        let parts: Vec<Explanation> = pods.into_iter().map(|p| self.pod(p)).collect();
        let stuck = bad || parts.iter().any(|p| p.stuck);
        Explanation {
            kind: Kind::Node,
            namespace: String::new(),
            name,
            state,
            stuck,
            causes,
            parts,
            unreadable: Vec::new(),
        }
    }

    // ----- workloads --------------------------------------------------------------------------

    fn owned_pods(&self, ns: Option<&str>, uids: &[String]) -> Vec<&'a Pod> {
        let mut pods: Vec<&Pod> = self
            .snap
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == ns
                    && controller_of(&p.metadata).is_some_and(|o| uids.contains(&o.uid))
            })
            .collect();
        pods.sort_by_key(|p| pod_id(p));
        pods
    }

    /// Desired against Ready pods; every pod that is not Running and Ready is explained.
    fn replicas(&self, kind: Kind, m: &ObjectMeta, desired: i32, uids: &[String]) -> Explanation {
        let pods = self.owned_pods(m.namespace.as_deref(), uids);
        let active: Vec<&&Pod> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let ready = active.iter().filter(|p| pod_ready(p)).count();
        let ready = i32::try_from(ready).unwrap_or(i32::MAX);
        let mut causes = Vec::new();
        let missing = desired.saturating_sub(ready);
        if missing > 0 {
            causes.push(cause(
                About::Owner,
                format!("{missing} of {desired} replicas are not Ready"),
            ));
        }
        let terminating = pods.len().saturating_sub(active.len());
        if terminating > 0 {
            causes.push(cause(
                About::Owner,
                format!(
                    "{terminating} pod(s) Terminating (not counted as replicas; a ReplicaSet replaces them at once)"
                ),
            ));
        }
        let parts: Vec<Explanation> = pods
            .iter()
            .map(|p| self.pod(p))
            .filter(|e| e.stuck)
            .collect();
        Explanation {
            kind,
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
            state: format!("{ready}/{desired} ready"),
            stuck: missing > 0 || !parts.is_empty(),
            causes,
            parts,
            unreadable: Vec::new(),
        }
    }

    fn deployment(&self, d: &k8s_openapi::api::apps::v1::Deployment) -> Explanation {
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let rs_uids: Vec<String> = self
            .snap
            .replica_sets
            .iter()
            .filter(|rs| {
                rs.metadata.namespace == d.metadata.namespace
                    && controller_of(&rs.metadata).is_some_and(|o| o.uid == uid)
            })
            .filter_map(|rs| rs.metadata.uid.clone())
            .collect();
        let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let mut e = self.replicas(Kind::Deployment, &d.metadata, desired, &rs_uids);
        let strategy = d
            .spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.type_.clone())
            .unwrap_or_else(|| "RollingUpdate".into());
        if strategy == "Recreate" && e.parts.iter().any(|p| p.state.starts_with("Terminating")) {
            e.causes.push(cause(
                About::Owner,
                "strategy Recreate: new pods are created only once every old pod is gone".into(),
            ));
        }
        for c in d
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.status == "False")
        {
            e.causes.push(cause(
                About::Owner,
                format!(
                    "{}=False ({}): {}",
                    c.type_,
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                ),
            ));
        }
        e
    }

    fn stateful_set(&self, s: &k8s_openapi::api::apps::v1::StatefulSet) -> Explanation {
        let name = s.metadata.name.clone().unwrap_or_default();
        let uid = s.metadata.uid.clone().unwrap_or_default();
        let spec = s.spec.as_ref();
        let desired = spec.and_then(|s| s.replicas).unwrap_or(1);
        let ordered = spec
            .and_then(|s| s.pod_management_policy.as_deref())
            .unwrap_or("OrderedReady")
            == "OrderedReady";
        let pods: BTreeMap<String, &Pod> = self
            .owned_pods(s.metadata.namespace.as_deref(), std::slice::from_ref(&uid))
            .into_iter()
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect();
        let mut causes = Vec::new();
        let mut parts = Vec::new();
        let mut ready_count = 0i32;
        let mut blocked_by: Option<String> = None;
        for i in 0..desired.max(0) {
            let pod_name = format!("{name}-{i}");
            match pods.get(&pod_name) {
                None => {
                    let text = match &blocked_by {
                        Some(b) if ordered => format!(
                            "{pod_name} does not exist: with podManagementPolicy OrderedReady it waits for {b} to be Running and Ready"
                        ),
                        _ => format!(
                            "{pod_name} does not exist yet: the StatefulSet controller creates it"
                        ),
                    };
                    causes.push(cause(About::Owner, text));
                    blocked_by.get_or_insert(pod_name);
                }
                Some(p) => {
                    let e = self.pod(p);
                    if p.metadata.deletion_timestamp.is_some() {
                        causes.push(cause(
                            About::Owner,
                            format!(
                                "StatefulSet {name} cannot create {pod_name}: the old {pod_name} still exists (Terminating)"
                            ),
                        ));
                    }
                    if pod_ready(p) && p.metadata.deletion_timestamp.is_none() {
                        ready_count = ready_count.saturating_add(1);
                    } else {
                        blocked_by.get_or_insert(pod_name);
                    }
                    if e.stuck {
                        parts.push(e);
                    }
                }
            }
        }
        let missing = desired.saturating_sub(ready_count);
        if missing > 0 {
            causes.insert(
                0,
                cause(
                    About::Owner,
                    format!("{missing} of {desired} replicas are not Ready"),
                ),
            );
        }
        Explanation {
            kind: Kind::StatefulSet,
            namespace: s.metadata.namespace.clone().unwrap_or_default(),
            name,
            state: format!("{ready_count}/{desired} ready"),
            stuck: missing > 0 || !parts.is_empty(),
            causes,
            parts,
            unreadable: Vec::new(),
        }
    }

    fn job(&self, j: &k8s_openapi::api::batch::v1::Job) -> Explanation {
        let uid = j.metadata.uid.clone().unwrap_or_default();
        let spec = j.spec.as_ref();
        let completions = spec.and_then(|s| s.completions).unwrap_or(1);
        let st = j.status.as_ref();
        let succeeded = st.and_then(|s| s.succeeded).unwrap_or(0);
        let active = st.and_then(|s| s.active).unwrap_or(0);
        let failed = st.and_then(|s| s.failed).unwrap_or(0);
        let finished = st
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
        let mut causes = vec![cause(
            About::Owner,
            format!(
                "{succeeded} of {completions} completions succeeded, {active} active, {failed} failed"
            ),
        )];
        if let Some(c) = finished {
            causes.push(cause(
                About::Owner,
                format!(
                    "{} ({}): {}",
                    c.type_,
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                ),
            ));
        }
        let parts: Vec<Explanation> = self
            .owned_pods(j.metadata.namespace.as_deref(), &[uid])
            .into_iter()
            .map(|p| self.pod(p))
            .filter(|e| e.stuck)
            .collect();
        Explanation {
            kind: Kind::Job,
            namespace: j.metadata.namespace.clone().unwrap_or_default(),
            name: j.metadata.name.clone().unwrap_or_default(),
            state: match finished {
                Some(c) => c.type_.clone(),
                None => format!("{succeeded}/{completions} completions"),
            },
            stuck: finished.is_none() && !parts.is_empty(),
            causes,
            parts,
            unreadable: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
