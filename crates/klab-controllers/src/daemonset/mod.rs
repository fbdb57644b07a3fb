//! The DaemonSet controller (shell); decisions live in decide.rs.
//!
//! Reads DaemonSets, Pods and Nodes from the shared informers; each DaemonSet keeps, across syncs,
//! its pods and the nodes joined by node name (`decide::Table`), changed only by the pods and
//! nodes that changed since its last sync (`klab_runtime::Tracked`). Each dirty DaemonSet is
//! synced in name order: upstream-style expectations gate `manage` (create a pod per eligible
//! node, pinned with a `matchFields metadata.name` affinity and left to the default scheduler;
//! delete failed, succeeded, duplicate and misplaced pods), then the RollingUpdate step, then the
//! status PATCH.
//! Pods are matched by controllerRef UID only (no adoption of orphans). ControllerRevisions are not
//! written: the revision hash is computed from the template (see `decide::template_hash`).

pub mod config;
pub mod decide;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use klab_api::{Clock, names};

pub use config::DaemonSetControllerConfig;
use decide::{DaemonPod, FailedPodsBackoff, Member, Placed, Table};

use crate::events::EventRecorder;
use crate::replicaset::decide::Expectations;
use crate::replicaset::util;
use crate::replicaset::{api_error_text, is_not_found};
use crate::slow_start::{create_pod_recorded, never_observed, slow_start};
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, Tracked, WorkQueue, index,
    key_of,
};

/// The controller's name (event source, field manager).
pub const CONTROLLER_NAME: &str = names::CONTROLLER_DAEMONSET;

/// Why the DaemonSet controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonSetError {
    #[error("{0}")]
    Stopped(String),
}

/// Whether a node change can change any DaemonSet's decisions (upstream `shouldIgnoreNodeUpdate`:
/// labels, taints, unschedulable, or a condition's status; heartbeats alone are ignored).
pub fn node_change_matters(old: &Node, new: &Node) -> bool {
    let conds = |n: &Node| -> Vec<(String, String)> {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|c| {
                c.iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    old.metadata.labels != new.metadata.labels || old.spec != new.spec || conds(old) != conds(new)
}

/// The changes the DaemonSet controller handles.
enum Ev {
    Ds(Change<DaemonSet>),
    Node(Change<Node>),
    Pod(Change<Pod>),
}

/// Runs the DaemonSet controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: DaemonSetControllerConfig,
    recorder: EventRecorder,
) -> Result<(), DaemonSetError> {
    let dss = informers.get::<DaemonSet>();
    let pods = informers.get::<Pod>();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let nodes = informers.get::<Node>();
    let sources = Sources::default()
        .add(&dss, Ev::Ds)
        .add(&nodes, Ev::Node)
        .add(&pods, Ev::Pod);
    let mut c = Dsc {
        client,
        clock: clock.clone(),
        config,
        recorder,
        dss,
        pods,
        nodes,
        queue: informers.queue("daemonset"),
        expectations: BTreeMap::new(),
        backoff: BTreeMap::new(),
        seen: BTreeMap::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(DaemonSetError::Stopped)
}

impl Reconcile for Dsc {
    type Event = Ev;
    type Error = std::convert::Infallible;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Ds((old, new)) => match (old, new) {
                (_, Some(n)) => self.queue.add(key_of(n.as_ref())),
                (Some(o), None) => {
                    let k = key_of(o.as_ref());
                    self.expectations.remove(&k);
                    self.backoff.remove(&k);
                    self.seen.remove(&k);
                }
                (None, None) => {}
            },
            Ev::Node((old, new)) => {
                let matters = match (&old, &new) {
                    (Some(o), Some(n)) => node_change_matters(o, n),
                    _ => true,
                };
                if matters {
                    for k in self.dss.keys() {
                        self.queue.add(k);
                    }
                }
            }
            Ev::Pod(ch) => self.pod_changed(ch),
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), Self::Error> {
        self.sync(key).await;
        Ok(())
    }
}

struct Dsc {
    client: kube::Client,
    clock: Clock,
    config: DaemonSetControllerConfig,
    recorder: EventRecorder,
    dss: SharedInformer<DaemonSet>,
    pods: SharedInformer<Pod>,
    nodes: SharedInformer<Node>,
    queue: WorkQueue,
    expectations: BTreeMap<ObjKey, Expectations>,
    backoff: BTreeMap<ObjKey, FailedPodsBackoff>,
    /// What each DaemonSet's syncs read of its pods and the nodes, kept across syncs.
    seen: BTreeMap<ObjKey, Seen>,
}

/// What a DaemonSet's syncs derive from its pods and from the nodes, kept across syncs: a sync
/// reads every pod of the DaemonSet and every node (thousands of each at thousands of nodes),
/// nearly all unchanged since the last one.
#[derive(Default)]
struct Seen {
    /// Its pods as the decisions read them (`None`: filed under the DaemonSet's UID but not its
    /// daemon pod: another namespace, or a controller of another kind with the same UID).
    members: Tracked<Option<Member>>,
    /// The nodes as its pod's placement checks see them ...
    placed: Tracked<Placed>,
    /// ... for this pod (a template change places every node again).
    placed_for: Option<DaemonPod>,
    /// Both joined by node: changed by the pods and nodes that changed.
    table: Table,
}

impl Seen {
    /// The DaemonSet's nodes and pods (from the informer's UID index) as of now.
    fn read(
        &mut self,
        pods: &SharedInformer<Pod>,
        nodes: &SharedInformer<Node>,
        ds: &DaemonSet,
    ) -> &Table {
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let uid = ds.metadata.uid.as_deref().unwrap_or_default();
        let (added, dropped) = self
            .members
            .update(pods, Some((index::CONTROLLER_UID, uid)), |p| {
                is_daemon_pod_in(p, ns).then(|| Member::of(p))
            });
        // Old versions out first: a changed pod is its old version dropped and its new added.
        for m in dropped.iter().flatten() {
            self.table.remove_pod(m);
        }
        for m in added.into_iter().flatten() {
            self.table.add_pod(m.clone());
        }
        let daemon = DaemonPod::of(ds);
        if self.placed_for.as_ref() != Some(&daemon) {
            self.placed.clear();
            self.table.clear_nodes();
        }
        let d = self.placed_for.insert(daemon);
        let (added, dropped) = self.placed.update(nodes, None, |n| d.place(n));
        for n in &dropped {
            self.table
                .set_node(n.name.as_deref().unwrap_or_default(), None);
        }
        for n in added {
            self.table.set_node(
                n.name.as_deref().unwrap_or_default(),
                Some((n.should_run, n.should_continue)),
            );
        }
        &self.table
    }
}

/// A pod of namespace `ns` whose controller is a DaemonSet.
fn is_daemon_pod_in(pod: &Pod, ns: &str) -> bool {
    pod.metadata.namespace.as_deref().unwrap_or_default() == ns
        && util::controller_ref(&pod.metadata).is_some_and(|r| r.kind == "DaemonSet")
}

fn owner_ds_key(dss: &SharedInformer<DaemonSet>, pod: &Pod) -> Option<ObjKey> {
    let r = util::controller_ref(&pod.metadata)?;
    if r.kind != "DaemonSet" {
        return None;
    }
    let key = (pod.namespace().unwrap_or_default(), r.name.clone());
    let ds = dss.get(&key)?;
    (ds.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(key)
}

fn ds_ref(ds: &DaemonSet) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("DaemonSet".into()),
        namespace: ds.metadata.namespace.clone(),
        name: ds.metadata.name.clone(),
        uid: ds.metadata.uid.clone(),
        resource_version: ds.metadata.resource_version.clone(),
        field_path: None,
    }
}

impl Dsc {
    /// Observe expectations and enqueue the owning DaemonSet.
    fn pod_changed(&mut self, (old, new): Change<Pod>) {
        match (&old, &new) {
            (None, Some(n)) => {
                if let Some(k) = owner_ds_key(&self.dss, n) {
                    let e = self.expectations.entry(k.clone()).or_default();
                    if n.metadata.deletion_timestamp.is_some() {
                        e.deletion_observed(&n.name_any());
                    } else {
                        e.creation_observed();
                    }
                    self.queue.add(k);
                }
            }
            (Some(o), Some(n)) => {
                let newly_deleting = o.metadata.deletion_timestamp.is_none()
                    && n.metadata.deletion_timestamp.is_some();
                if let Some(k) = owner_ds_key(&self.dss, n).or_else(|| owner_ds_key(&self.dss, o)) {
                    if newly_deleting && let Some(e) = self.expectations.get_mut(&k) {
                        e.deletion_observed(&n.name_any());
                    }
                    self.queue.add(k);
                }
            }
            (Some(o), None) => {
                if let Some(k) = owner_ds_key(&self.dss, o) {
                    if let Some(e) = self.expectations.get_mut(&k) {
                        e.deletion_observed(&o.name_any());
                    }
                    self.queue.add(k);
                }
            }
            (None, None) => {}
        }
    }

    async fn sync(&mut self, key: ObjKey) {
        let Some(ds) = self.dss.get(&key) else {
            self.expectations.remove(&key);
            self.backoff.remove(&key);
            self.seen.remove(&key);
            return;
        };
        if ds.metadata.deletion_timestamp.is_some() {
            return;
        }
        let now = self.clock.now();
        // Taken out for the sync (the decisions borrow it while the sync writes).
        let mut seen = self.seen.remove(&key).unwrap_or_default();
        seen.read(&self.pods, &self.nodes, &ds);
        self.sync_with(&key, &ds, now, &mut seen.table).await;
        self.seen.insert(key, seen);
    }

    async fn sync_with(&mut self, key: &ObjKey, ds: &DaemonSet, now: Timestamp, table: &mut Table) {
        let Some(spec) = ds.spec.as_ref() else { return };
        let hash = decide::template_hash(
            &spec.template,
            ds.status.as_ref().and_then(|s| s.collision_count),
        );
        // The rows in the rolled-out steady state are counted, not walked, by the decisions.
        table.settle(&decide::Settling::of(ds, &hash), now);
        let table = &*table;

        let satisfied = self.expectations.get(key).is_none_or(|e| e.satisfied(now));
        if !satisfied && let Some(t) = self.expectations.get(key).and_then(|e| e.expires_at()) {
            self.queue.add_at(key.clone(), t);
        }
        if satisfied {
            let backoff = self.backoff.entry(key.clone()).or_default();
            let mut plan = decide::manage(ds, table, now, backoff, &self.config);
            if plan.create_on.is_empty() && plan.delete.is_empty() && decide::is_rolling_update(ds)
            {
                plan.delete = decide::rolling_update_deletions(ds, table, &hash, now);
            }
            let r = ds_ref(ds);
            for ev in &plan.events {
                self.recorder
                    .record(&r, ev.type_, ev.reason, ev.message.clone())
                    .await;
            }
            if let Some(d) = plan.requeue_after {
                self.queue.add_at(key.clone(), add(now, d));
            }
            self.apply(ds, key, &hash, &plan.create_on, &plan.delete, now)
                .await;
        }
        if let Some(t) = decide::next_availability_check(ds, table, now) {
            self.queue.add_at(key.clone(), t);
        }
        let status = decide::compute_status(ds, table, &hash, now);
        if ds.status.as_ref() != Some(&status) {
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), &key.0);
            let patch = json!({"status": status});
            // The role grants `update` on daemonsets/status, as upstream's UpdateStatus.
            if let Err(e) =
                crate::write::update_merged_from(&api, ds, crate::write::Target::Status, &patch)
                    .await
            {
                tracing::info!(ds = %format!("{}/{}", key.0, key.1), error = %e, "updating daemonset status");
                self.queue
                    .add_at(key.clone(), add(now, Duration::from_secs(1)));
            }
        }
    }

    /// Creates (slow-start batches) and deletes pods, recording expectations and events.
    async fn apply(
        &mut self,
        ds: &DaemonSet,
        key: &ObjKey,
        hash: &str,
        create_on: &[String],
        delete: &[String],
        now: Timestamp,
    ) {
        if create_on.is_empty() && delete.is_empty() {
            return;
        }
        let ns = key.0.clone();
        let mut exp = Expectations::expect_deletions(delete, now);
        exp.adds = create_on.len() as i64;
        self.expectations.insert(key.clone(), exp);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let r = ds_ref(ds);
        let template = decide::daemon_pod_template(ds, hash);
        let owner = util::new_controller_ref("apps/v1", "DaemonSet", &ds.metadata);
        let (api, recorder, r) = (&api, &self.recorder, &r);
        let create_one = |node: &String| {
            let mut t = template.clone();
            let meta = t.metadata.take().unwrap_or_default();
            let mut spec = t.spec.take().unwrap_or_default();
            spec.affinity = Some(decide::replace_node_name_affinity(
                spec.affinity.take(),
                node,
            ));
            let pod = Pod {
                metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    generate_name: Some(format!("{}-", key.1)),
                    namespace: Some(ns.clone()),
                    labels: meta.labels,
                    annotations: meta.annotations,
                    finalizers: meta.finalizers,
                    owner_references: Some(vec![owner.clone()]),
                    ..Default::default()
                },
                spec: Some(spec),
                status: None,
            };
            async move { create_pod_recorded(api, &pod, recorder, r).await }
        };
        let results = slow_start(create_on.iter().collect(), 1, create_one).await;
        if let Some(x) = self.expectations.get_mut(key) {
            x.adds = x
                .adds
                .saturating_sub(never_observed(&results, create_on.len()));
        }
        // Deletions all at once, as upstream does.
        let results = futures::future::join_all(delete.iter().map(|name| async move {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    let msg = format!("Deleted pod: {name}");
                    recorder
                        .record(r, names::EVENT_NORMAL, names::EVENT_SUCCESSFUL_DELETE, msg)
                        .await;
                    true
                }
                Err(e) => {
                    if !is_not_found(&e) {
                        let msg = format!("Error deleting: {}", api_error_text(&e));
                        recorder
                            .record(r, names::EVENT_WARNING, names::EVENT_FAILED_DELETE, msg)
                            .await;
                    }
                    false
                }
            }
        }))
        .await;
        for (name, deleted) in delete.iter().zip(results) {
            if !deleted && let Some(x) = self.expectations.get_mut(key) {
                x.deletion_observed(name);
            }
        }
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;
    use serde_json::json;

    /// A sync derives only from the pods and nodes that changed since the last one; another
    /// namespace's pods and pods of another kind of controller with the same UID are not
    /// members; a template change places every node again.
    #[test]
    fn a_sync_reads_what_changed() {
        let pods: SharedInformer<Pod> = SharedInformer::default();
        pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
        let nodes: SharedInformer<Node> = SharedInformer::default();
        let pod = |ns: &str, name: &str, kind: &str, node: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "ds", "uid": "u", "controller": true}]},
                "spec": {"containers": [], "nodeName": node}}))
            .unwrap()
        };
        let node = |name: &str, zone: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}}}))
                .unwrap()
        };
        let mut ds: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "ds", "namespace": "kube-system", "uid": "u"},
            "spec": {"selector": {}, "template": {"spec": {"containers": []}}}}))
        .unwrap();
        for (ns, name, kind) in [
            ("kube-system", "ds-c", "DaemonSet"),
            ("kube-system", "ds-a", "DaemonSet"),
            ("kube-system", "ds-b", "DaemonSet"),
            ("other", "ds-x", "DaemonSet"),
            ("kube-system", "rs-y", "ReplicaSet"),
        ] {
            pods.apply(watcher::Event::Apply(pod(ns, name, kind, "n1")));
        }
        for (n, z) in [("n2", "b"), ("n1", "a")] {
            nodes.apply(watcher::Event::Apply(node(n, z)));
        }
        let mut seen = Seen::default();
        type View = (Vec<(String, Option<String>)>, Vec<(String, bool)>);
        let read = |seen: &mut Seen, ds: &DaemonSet| -> View {
            let t = seen.read(&pods, &nodes, ds);
            let mut m: Vec<(String, Option<String>)> = t
                .all_rows()
                .flat_map(|(_, r)| r.pods.iter())
                .map(|x| (x.name.clone(), x.node.clone()))
                .collect();
            m.sort();
            let p = t
                .all_rows()
                .filter_map(|(n, r)| Some((n.to_string(), r.placed?.0)))
                .collect();
            (m, p)
        };
        let s = |v: &str| v.to_string();
        let n1 = || Some(s("n1"));
        let (members, placed) = read(&mut seen, &ds);
        assert_eq!(
            members,
            vec![(s("ds-a"), n1()), (s("ds-b"), n1()), (s("ds-c"), n1())]
        );
        assert_eq!(placed, vec![(s("n1"), true), (s("n2"), true)]);
        let counts = |seen: &Seen| (seen.members.derived(), seen.placed.derived());
        assert_eq!(counts(&seen), (5, 2));
        read(&mut seen, &ds);
        assert_eq!(counts(&seen), (5, 2), "nothing changed: nothing read again");

        pods.apply(watcher::Event::Apply(pod(
            "kube-system",
            "ds-b",
            "DaemonSet",
            "n2",
        )));
        nodes.apply(watcher::Event::Apply(node("n2", "a")));
        let (members, _) = read(&mut seen, &ds);
        assert_eq!(members[1], (s("ds-b"), Some(s("n2"))));
        assert_eq!(counts(&seen), (6, 3));
        assert_eq!(
            (seen.members.len(), seen.placed.len()),
            (5, 2),
            "old versions dropped"
        );
        let gone = pods.get(&(s("kube-system"), s("ds-c"))).unwrap();
        pods.apply(watcher::Event::Delete(gone.as_ref().clone()));
        assert_eq!(read(&mut seen, &ds).0.len(), 2);
        assert_eq!(seen.members.len(), 4);

        // A node selector: every node placed again, by its labels.
        nodes.apply(watcher::Event::Apply(node("n2", "b")));
        ds.spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .node_selector = Some([(s("zone"), s("a"))].into());
        let (_, placed) = read(&mut seen, &ds);
        assert_eq!(placed, vec![(s("n1"), true), (s("n2"), false)]);
        assert_eq!(counts(&seen), (6, 5));
    }

    /// Under any sequence of pod and node changes (new versions, deletions, pods of other
    /// namespaces and controllers, terminal and deleting pods, pins to nodes that do not exist)
    /// and template changes, the table kept across reads is the table built from scratch.
    #[test]
    fn the_kept_table_is_the_table_built_from_scratch() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};

        #[derive(Clone, Debug)]
        enum Op {
            Pod {
                i: u8,
                node: u8,
                bound: bool,
                phase: u8,
                deleting: bool,
                other: u8,
            },
            DeletePod(u8),
            Node {
                j: u8,
                zone_a: bool,
                tainted: bool,
            },
            DeleteNode(u8),
            Selector(bool),
            Read,
        }
        let op = prop_oneof![
            3 => (0u8..6, 0u8..6, any::<bool>(), 0u8..4, any::<bool>(), 0u8..5).prop_map(
                |(i, node, bound, phase, deleting, other)| Op::Pod { i, node, bound, phase, deleting, other }
            ),
            1 => (0u8..6).prop_map(Op::DeletePod),
            2 => (0u8..5, any::<bool>(), any::<bool>())
                .prop_map(|(j, zone_a, tainted)| Op::Node { j, zone_a, tainted }),
            1 => (0u8..5).prop_map(Op::DeleteNode),
            1 => any::<bool>().prop_map(Op::Selector),
            2 => Just(Op::Read),
        ];
        TestRunner::new(Config {
            cases: 200,
            ..Config::default()
        })
        .run(&proptest::collection::vec(op, 1..40), |ops| {
            let pods: SharedInformer<Pod> = SharedInformer::default();
            pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
            let nodes: SharedInformer<Node> = SharedInformer::default();
            let mut ds: DaemonSet = serde_json::from_value(json!({
                "metadata": {"name": "ds", "namespace": "kube-system", "uid": "u"},
                "spec": {"selector": {}, "template": {"spec": {"containers": []}}}}))
            .unwrap();
            let mut seen = Seen::default();
            let last = ops.len().saturating_sub(1);
            for (at, op) in ops.into_iter().enumerate() {
                // Several changes between reads, as between syncs.
                let check = matches!(op, Op::Read) || at == last;
                match op {
                    Op::Pod { i, node, bound, phase, deleting, other } => {
                        let (ns, kind) = match other {
                            0 => ("other", "DaemonSet"),
                            1 => ("kube-system", "ReplicaSet"),
                            _ => ("kube-system", "DaemonSet"),
                        };
                        let node = format!("n{node}");
                        let mut spec = json!({"containers": [],
                            "affinity": decide::replace_node_name_affinity(None, &node)});
                        if bound {
                            spec["nodeName"] = json!(node);
                        }
                        let mut meta = json!({"name": format!("p{i}"), "namespace": ns,
                            "creationTimestamp": format!("2026-01-01T00:00:0{}Z", i % 3),
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": "ds", "uid": "u", "controller": true}]});
                        if deleting {
                            meta["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
                        }
                        let phase = ["Pending", "Running", "Succeeded", "Failed"][usize::from(phase)];
                        // A pod that moves namespace is another pod: delete the old one first.
                        for other_ns in ["other", "kube-system"] {
                            if other_ns != ns
                                && let Some(o) = pods.get(&(other_ns.into(), format!("p{i}")))
                            {
                                pods.apply(watcher::Event::Delete(o.as_ref().clone()));
                            }
                        }
                        pods.apply(watcher::Event::Apply(
                            serde_json::from_value(json!({"metadata": meta, "spec": spec,
                                "status": {"phase": phase}}))
                            .unwrap(),
                        ));
                    }
                    Op::DeletePod(i) => {
                        for ns in ["other", "kube-system"] {
                            if let Some(o) = pods.get(&(ns.into(), format!("p{i}"))) {
                                pods.apply(watcher::Event::Delete(o.as_ref().clone()));
                            }
                        }
                    }
                    Op::Node { j, zone_a, tainted } => {
                        let taints = if tainted {
                            json!([{"key": "k", "effect": "NoExecute"}])
                        } else {
                            json!([])
                        };
                        nodes.apply(watcher::Event::Apply(
                            serde_json::from_value(json!({"metadata": {"name": format!("n{j}"),
                                "labels": {"zone": if zone_a { "a" } else { "b" }}},
                                "spec": {"taints": taints}}))
                            .unwrap(),
                        ));
                    }
                    Op::DeleteNode(j) => {
                        if let Some(o) = nodes.get(&(String::new(), format!("n{j}"))) {
                            nodes.apply(watcher::Event::Delete(o.as_ref().clone()));
                        }
                    }
                    Op::Selector(on) => {
                        let t = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
                        t.node_selector = on.then(|| [("zone".to_string(), "a".to_string())].into());
                    }
                    Op::Read => {}
                }
                if !check {
                    continue;
                }
                let kept = seen.read(&pods, &nodes, &ds).clone();
                let all_nodes = nodes.list();
                let node_refs: Vec<&Node> = all_nodes.iter().map(|n| n.as_ref()).collect();
                let members: Vec<Member> = pods
                    .list()
                    .iter()
                    .filter(|p| is_daemon_pod_in(p, "kube-system"))
                    .map(|p| Member::of(p))
                    .collect();
                prop_assert_eq!(kept, Table::build(&decide::place(&ds, &node_refs), &members));
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn node_heartbeats_do_not_matter() {
        let n = |ready: &str, hb: &str, taints: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": hb}]}})).unwrap()
        };
        let a = n("True", "2026-01-01T00:00:00Z", json!([]));
        assert!(!node_change_matters(
            &a,
            &n("True", "2026-01-01T00:00:10Z", json!([]))
        ));
        assert!(node_change_matters(
            &a,
            &n("Unknown", "2026-01-01T00:00:00Z", json!([]))
        ));
        assert!(node_change_matters(
            &a,
            &n(
                "True",
                "2026-01-01T00:00:00Z",
                json!([{"key": "k", "effect": "NoSchedule"}])
            )
        ));
    }
}

#[cfg(test)]
mod it_tests;
