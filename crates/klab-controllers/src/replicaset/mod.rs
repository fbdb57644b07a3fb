//! The ReplicaSet controller (shell): watches ReplicaSets and Pods, keeps upstream-style
//! expectations, and applies the decisions of `decide.rs` (create/delete pods, adopt/release,
//! write status) through the API.
//!
//! Also home of helpers shared by the other workload controllers: `util` (pod readiness,
//! selectors, owner references) and `informer` (the garbage collector's sorted cache of dynamic
//! objects).

pub mod config;
pub mod decide;
pub mod informer;
pub mod util;

#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use klab_api::Clock;
use klab_api::names;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

pub use config::ReplicaSetControllerConfig;
use decide::{Claim, Expectations, Manage, PodFacts, StatusGates};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use klab_runtime::index::{self, owned_in_namespace};
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, Tracked, WorkQueue, key_of,
};

use crate::events::EventRecorder;
use crate::slow_start::{create_pod_recorded, never_observed, slow_start};

/// Why a workload controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Stopped(String),
    #[error("the {0} watch stream ended")]
    WatchEnded(&'static str),
}

/// The changes the ReplicaSet controller handles.
enum Ev {
    Rs(Change<ReplicaSet>),
    Pod(Change<Pod>),
}

/// Runs the ReplicaSet controller on the process's shared informers until they stop (never, in
/// practice).
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: ReplicaSetControllerConfig,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let rss = informers.get::<ReplicaSet>();
    rss.add_index(index::CONTROLLER_UID, index::controller_uid::<ReplicaSet>);
    let pods = informers.get::<Pod>();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let sources = Sources::default().add(&rss, Ev::Rs).add(&pods, Ev::Pod);
    let mut c = Rsc {
        client,
        clock: clock.clone(),
        config,
        recorder,
        rss,
        pods,
        queue: informers.queue("replicaset"),
        expectations: BTreeMap::new(),
        unsettled: BTreeSet::new(),
        last_status: BTreeMap::new(),
        tallies: BTreeMap::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Rsc {
    client: kube::Client,
    clock: Clock,
    config: ReplicaSetControllerConfig,
    recorder: EventRecorder,
    rss: SharedInformer<ReplicaSet>,
    pods: SharedInformer<Pod>,
    queue: WorkQueue,
    expectations: BTreeMap<ObjKey, Expectations>,
    /// Sets whose last sync failed a write (a create, a delete, an adoption or release, the
    /// status): every update of their pods syncs them again, as upstream's requeue would.
    unsettled: BTreeSet<ObjKey>,
    /// The status each set's last sync computed (written or already there).
    last_status: BTreeMap<ObjKey, ReplicaSetStatus>,
    /// What each set's last sync derived from its candidate pods.
    tallies: BTreeMap<ObjKey, Tally>,
}

/// What the syncs of a set derived from the pods filed under its UID (its own pods, and those it
/// is to release), by name, with the fields of the set those facts depend on (a change of any of
/// them starts the tally afresh). Kept across syncs and brought up to date from the pods changed
/// since the last one ([`Tracked`]): a set of thousands of pods is synced once per change of one
/// of them.
struct Tally {
    uid: String,
    deleting: bool,
    selector: LabelSelector,
    template: BTreeMap<String, String>,
    /// `None`: filed under the UID in another namespace.
    tracked: Tracked<Option<(Arc<Pod>, PodFacts)>>,
    pods: BTreeMap<String, (Arc<Pod>, PodFacts)>,
}

impl Tally {
    /// `prev` when it was made for the set as it is now, else an empty tally for it.
    fn for_set(prev: Option<Tally>, rs: &ReplicaSet) -> Tally {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let deleting = rs.metadata.deletion_timestamp.is_some();
        let selector = rs
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let template = decide::template_labels(rs);
        match prev {
            Some(t)
                if t.uid == uid
                    && t.deleting == deleting
                    && t.selector == selector
                    && t.template == template =>
            {
                t
            }
            _ => Tally {
                uid,
                deleting,
                selector,
                template,
                tracked: Tracked::default(),
                pods: BTreeMap::new(),
            },
        }
    }

    fn facts(&self, pod: &Pod) -> PodFacts {
        decide::pod_facts(
            &self.uid,
            self.deleting,
            &self.selector,
            &self.template,
            pod,
        )
    }

    /// Brings the set's pods of namespace `ns` up to date with the informer; returns how many
    /// pod versions it derived facts for.
    fn refresh(&mut self, pods: &SharedInformer<Pod>, ns: &str) -> u64 {
        let before = self.tracked.derived();
        let (uid, deleting, selector, template) =
            (&self.uid, self.deleting, &self.selector, &self.template);
        let (added, dropped) = self
            .tracked
            .update(pods, Some((index::CONTROLLER_UID, uid)), |p| {
                (p.metadata.namespace.as_deref().unwrap_or_default() == ns).then(|| {
                    let f = decide::pod_facts(uid, deleting, selector, template, p);
                    (p.clone(), f)
                })
            });
        // Old versions out first: a changed pod is its old version dropped and its new added.
        for (p, _) in dropped.iter().flatten() {
            self.pods
                .remove(p.metadata.name.as_deref().unwrap_or_default());
        }
        for (p, f) in added.into_iter().flatten() {
            let name = p.metadata.name.clone().unwrap_or_default();
            self.pods.insert(name, (p.clone(), *f));
        }
        self.tracked.derived().saturating_sub(before)
    }
}

/// The ReplicaSet a pod's controllerRef points to, if that ReplicaSet is in the cache with the same UID.
fn owner_rs_key(rss: &SharedInformer<ReplicaSet>, pod: &Pod) -> Option<ObjKey> {
    let r = util::controller_ref(&pod.metadata)?;
    if r.kind != "ReplicaSet" {
        return None;
    }
    let key = (pod.namespace().unwrap_or_default(), r.name.clone());
    let rs = rss.get(&key)?;
    (rs.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(key)
}

impl Reconcile for Rsc {
    type Event = Ev;
    type Error = std::convert::Infallible;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Rs((old, new)) => match (old, new) {
                (_, Some(n)) => self.queue.add(key_of(n.as_ref())),
                (Some(o), None) => {
                    let k = key_of(o.as_ref());
                    self.expectations.remove(&k);
                    self.queue.add(k);
                }
                (None, None) => {}
            },
            Ev::Pod(ch) => self.pod_changed(ch),
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), Self::Error> {
        self.sync(key).await;
        Ok(())
    }
}

impl Rsc {
    /// Upstream `addPod` / `updatePod` / `deletePod`: observe expectations and enqueue the owners.
    fn pod_changed(&mut self, (old, new): Change<Pod>) {
        let mut keys = Vec::new();
        match (&old, &new) {
            (None, Some(n)) => {
                if let Some(k) = owner_rs_key(&self.rss, n) {
                    let e = self.expectations.entry(k.clone()).or_default();
                    if n.metadata.deletion_timestamp.is_some() {
                        e.deletion_observed(&n.name_any());
                    } else {
                        e.creation_observed();
                    }
                    keys.push(k);
                } else {
                    keys.extend(self.matching_rss(n));
                }
            }
            (Some(o), Some(n)) => {
                if let Some(k) = owner_rs_key(&self.rss, n)
                    && owner_rs_key(&self.rss, o).as_ref() == Some(&k)
                    && !decide::update_concerns_owner(o, n)
                    && self.settled(&k)
                {
                    // Nothing a sync reads changed (see `update_concerns_owner`).
                    return;
                }
                let newly_deleting = o.metadata.deletion_timestamp.is_none()
                    && n.metadata.deletion_timestamp.is_some();
                for p in [o, n] {
                    if let Some(k) = owner_rs_key(&self.rss, p) {
                        if newly_deleting && let Some(e) = self.expectations.get_mut(&k) {
                            e.deletion_observed(&n.name_any());
                        }
                        keys.push(k);
                    } else {
                        keys.extend(self.matching_rss(p));
                    }
                }
            }
            (Some(o), None) => {
                if let Some(k) = owner_rs_key(&self.rss, o) {
                    if let Some(e) = self.expectations.get_mut(&k) {
                        e.deletion_observed(&o.name_any());
                    }
                    keys.push(k);
                } else {
                    keys.extend(self.matching_rss(o));
                }
            }
            (None, None) => {}
        }
        for k in keys {
            self.queue.add(k);
        }
    }

    /// Whether a sync of the set would find what its last one left: that sync wrote everything
    /// it meant to, and the cached set shows the status it computed (until the cache has seen
    /// the write, a sync would write the status again, as upstream's does from its lister) with
    /// no ReplicaFailure condition to clear.
    fn settled(&self, key: &ObjKey) -> bool {
        if self.unsettled.contains(key) {
            return false;
        }
        let (Some(rs), Some(last)) = (self.rss.get(key), self.last_status.get(key)) else {
            return false;
        };
        let status = rs.status.as_ref();
        !decide::status_changed(status, last)
            && !status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == names::DEPLOY_COND_REPLICA_FAILURE)
            })
    }

    /// ReplicaSets whose selector matches an orphan pod (candidates for adoption).
    fn matching_rss(&self, pod: &Pod) -> Vec<ObjKey> {
        if util::controller_ref(&pod.metadata).is_some() {
            return Vec::new();
        }
        let ns = pod.namespace().unwrap_or_default();
        let labels = util::labels(&pod.metadata);
        self.rss
            .in_namespace(&ns)
            .into_iter()
            .filter(|rs| {
                rs.spec.as_ref().is_some_and(|s| {
                    !util::selector_is_empty(&s.selector)
                        && util::selector_matches(&s.selector, labels)
                })
            })
            .map(|rs| key_of(rs.as_ref()))
            .collect()
    }

    async fn sync(&mut self, key: ObjKey) {
        self.unsettled.remove(&key);
        self.last_status.remove(&key);
        let Some(rs) = self.rss.get(&key) else {
            self.expectations.remove(&key);
            self.tallies.remove(&key);
            return;
        };
        let Some(spec) = rs.spec.clone() else { return };
        let now = self.clock.now();
        let (ns, name) = key.clone();
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let deleting = rs.metadata.deletion_timestamp.is_some();
        if util::selector_is_empty(&spec.selector) {
            // Upstream refuses to act on a selector that selects everything.
            return;
        }
        let satisfied = self.expectations.get(&key).is_none_or(|e| e.satisfied(now));
        if !satisfied {
            // A lost watch event must not wedge the set: look again when the expectations expire.
            if let Some(t) = self.expectations.get(&key).and_then(|e| e.expires_at()) {
                self.queue.add_at(key.clone(), t);
            }
        }

        // Claim pods: active ones may be adopted or released; terminating ones only counted.
        // Upstream's `FilterPodsByOwner` through the controllerUID index: its own pods and the
        // namespace's orphans, never the rest of the namespace. What each pod version means to
        // the set is kept from the last sync (a set of thousands of pods is synced once per
        // change of one of them): only the pods that changed since are looked at again.
        let mut tally = Tally::for_set(self.tallies.remove(&key), &rs);
        tally.refresh(&self.pods, &ns);
        let orphans: Vec<(Arc<Pod>, PodFacts)> =
            owned_in_namespace(&self.pods, &ns, &[index::orphan_key(&ns)])
                .into_iter()
                .map(|p| {
                    let f = tally.facts(&p);
                    (p, f)
                })
                .collect();
        // Every candidate in name order: the set's own and the namespace's orphans (rare).
        let mut candidates: Vec<(&Arc<Pod>, PodFacts)> =
            tally.pods.values().map(|(p, f)| (p, *f)).collect();
        if !orphans.is_empty() {
            candidates.extend(orphans.iter().map(|(p, f)| (p, *f)));
            candidates.sort_by(|a, b| a.0.metadata.name.cmp(&b.0.metadata.name));
        }
        // Indexes into `candidates`.
        let mut active: Vec<usize> = Vec::new();
        let mut owned_all: Vec<usize> = Vec::new();
        let mut can_adopt: Option<bool> = None;
        let mut settled = true;
        for (i, &(pod, facts)) in candidates.iter().enumerate() {
            match facts.claim {
                Claim::Owned => {
                    owned_all.push(i);
                    if facts.active {
                        active.push(i);
                    }
                }
                Claim::Adopt if facts.active => {
                    if can_adopt.is_none() {
                        can_adopt = Some(self.owner_still_current(&ns, &name, &uid).await);
                    }
                    if can_adopt == Some(true) {
                        if self.set_owner(&rs, pod, true).await {
                            owned_all.push(i);
                            active.push(i);
                        } else {
                            settled = false;
                        }
                    }
                }
                Claim::Release if facts.active => {
                    settled &= self.set_owner(&rs, pod, false).await;
                }
                _ => {}
            }
        }
        let pods_at = |ix: &[usize]| -> Vec<&Pod> {
            ix.iter()
                .filter_map(|&i| candidates.get(i))
                .map(|(p, _)| p.as_ref())
                .collect()
        };

        let mut create_error: Option<String> = None;
        let desired = spec.replicas.unwrap_or(1);
        // `manage_replicas` does nothing when the counts agree; the pod lists it ranks are
        // only gathered when they do not.
        if satisfied && !deleting && usize::try_from(desired.max(0)) != Ok(active.len()) {
            let owned_arcs: Vec<Arc<Pod>> = owned_all
                .iter()
                .filter_map(|&i| candidates.get(i))
                .map(|(p, _)| Arc::clone(p))
                .collect();
            let related_owned = self.related_pods(&rs, &owned_arcs);
            let active_refs = pods_at(&active);
            let related_refs: Vec<&Pod> = related_owned.iter().map(|p| p.as_ref()).collect();
            match decide::manage_replicas(
                desired,
                &active_refs,
                &related_refs,
                self.config.burst_replicas,
                now,
            ) {
                Manage::Nothing => {}
                Manage::Create(n) => create_error = self.create_pods(&key, &rs, n).await,
                Manage::Delete(victims) => {
                    settled &= self.delete_pods(&key, &rs, &victims).await;
                }
            }
        }

        // Status from the pods seen at the start of the sync, as upstream does.
        let gates = StatusGates {
            terminating_replicas: self.config.deployment_replica_set_terminating_replicas,
        };
        let claimed: Vec<(&Pod, PodFacts)> = owned_all
            .iter()
            .filter_map(|&i| candidates.get(i))
            .map(|(p, f)| (p.as_ref(), *f))
            .collect();
        let status = decide::calculate_status(&rs, &claimed, now, gates);
        let min_ready = decide::min_ready(&rs);
        let next_available = if min_ready.is_zero() {
            None
        } else {
            decide::next_availability_check(&pods_at(&active), min_ready, now)
        };
        drop(candidates);
        self.tallies.insert(key.clone(), tally);
        let failure_changed = self.replica_failure_patch(&rs, create_error.as_deref());
        if decide::status_changed(rs.status.as_ref(), &status) || failure_changed.is_some() {
            let mut body = json!({
                "replicas": status.replicas,
                "fullyLabeledReplicas": status.fully_labeled_replicas,
                "readyReplicas": status.ready_replicas,
                "availableReplicas": status.available_replicas,
                "observedGeneration": status.observed_generation,
            });
            if gates.terminating_replicas {
                body["terminatingReplicas"] = json!(status.terminating_replicas);
            }
            if let Some(conds) = failure_changed {
                body["conditions"] = conds;
            }
            let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
            let patch = json!({ "status": body });
            if let Err(e) =
                crate::write::update_merged_from(&api, &rs, crate::write::Target::Status, &patch)
                    .await
            {
                settled = false;
                tracing::debug!(rs = %name, error = %e, "replicaset status update failed; retrying");
            }
        }
        self.last_status.insert(key.clone(), status);
        if let Some(t) = next_available {
            self.queue.add_at(key.clone(), t);
        }
        if !settled || create_error.is_some() {
            self.unsettled.insert(key.clone());
            // A write that failed (a create, a delete, an adoption, the status) is retried
            // without waiting for another event: after a scale-down, say, none may come, and the
            // set would show a stale status for good. Upstream requeues the key rate-limited;
            // one second is the order of its first steps, as the other workload controllers here.
            if let Ok(t) = now.checked_add(jiff::SignedDuration::from_secs(1)) {
                self.queue.add_at(key, t);
            }
        }
    }

    /// The new `status.conditions` when the ReplicaFailure condition must change (upstream sets it
    /// on a create error and removes it once creating works again).
    fn replica_failure_patch(&self, rs: &ReplicaSet, create_error: Option<&str>) -> Option<Value> {
        let conds = rs
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let has = conds
            .iter()
            .any(|c| c.type_ == names::DEPLOY_COND_REPLICA_FAILURE);
        match create_error {
            Some(msg) => {
                if conds.iter().any(|c| {
                    c.type_ == names::DEPLOY_COND_REPLICA_FAILURE
                        && c.message.as_deref() == Some(msg)
                }) {
                    return None;
                }
                let mut out: Vec<Value> = conds
                    .iter()
                    .filter(|c| c.type_ != names::DEPLOY_COND_REPLICA_FAILURE)
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                    .collect();
                out.push(json!({
                    "type": names::DEPLOY_COND_REPLICA_FAILURE,
                    "status": "True",
                    "lastTransitionTime": self.clock.now_time(),
                    "reason": names::EVENT_FAILED_CREATE,
                    "message": msg,
                }));
                Some(Value::Array(out))
            }
            None if has => {
                let out: Vec<Value> = conds
                    .iter()
                    .filter(|c| c.type_ != names::DEPLOY_COND_REPLICA_FAILURE)
                    .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                    .collect();
                Some(if out.is_empty() {
                    Value::Null
                } else {
                    Value::Array(out)
                })
            }
            None => None,
        }
    }

    /// Upstream `getIndirectlyRelatedPods`: pods of every ReplicaSet with the same controller as
    /// `rs` (siblings under one Deployment), for the co-location rank.
    fn related_pods(&self, rs: &ReplicaSet, own: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        let Some(owner) = util::controller_ref(&rs.metadata) else {
            return own.to_vec();
        };
        let ns = rs.namespace().unwrap_or_default();
        // Upstream `getReplicaSetsWithSameController` and the pods of each, through the
        // controllerUID indexes.
        let sibling_uids: Vec<String> =
            owned_in_namespace(&self.rss, &ns, std::slice::from_ref(&owner.uid))
                .iter()
                .filter_map(|o| o.metadata.uid.clone())
                .collect();
        owned_in_namespace(&self.pods, &ns, &sibling_uids)
    }

    /// Upstream `RecheckDeletionTimestamp`: a live read that the owner still exists with this UID
    /// and is not being deleted, before adopting anything.
    async fn owner_still_current(&self, ns: &str, name: &str, uid: &str) -> bool {
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
        match api.get(name).await {
            Ok(fresh) => {
                fresh.metadata.uid.as_deref() == Some(uid)
                    && fresh.metadata.deletion_timestamp.is_none()
            }
            Err(_) => false,
        }
    }

    /// Adds (adopt) or removes (release) our controllerRef on a pod with a JSON patch guarded by
    /// the pod's UID and resourceVersion. Returns whether it took effect.
    async fn set_owner(&self, rs: &ReplicaSet, pod: &Pod, adopt: bool) -> bool {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let rs_uid = rs.metadata.uid.clone().unwrap_or_default();
        let mut refs = pod.metadata.owner_references.clone().unwrap_or_default();
        if adopt {
            refs.push(util::new_controller_ref(
                "apps/v1",
                "ReplicaSet",
                &rs.metadata,
            ));
        } else {
            refs.retain(|r| r.uid != rs_uid);
        }
        set_owner_refs(&api, &pod.metadata, refs).await
    }

    async fn create_pods(&mut self, key: &ObjKey, rs: &ReplicaSet, n: usize) -> Option<String> {
        let now = self.clock.now();
        self.expectations
            .insert(key.clone(), Expectations::expect_creations(n, now));
        let template = rs.spec.as_ref().and_then(|s| s.template.clone())?;
        let owner = util::new_controller_ref("apps/v1", "ReplicaSet", &rs.metadata);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let rs_ref = rs.object_ref(&());
        let recorder = &self.recorder;
        let create_one = |_| async {
            let mut pod = util::pod_from_template(&template, &key.0, owner.clone());
            pod.metadata.generate_name = Some(format!("{}-", key.1));
            create_pod_recorded(&api, &pod, recorder, &rs_ref).await
        };
        let results = slow_start(
            (0..n).collect(),
            decide::SLOW_START_INITIAL_BATCH_SIZE,
            create_one,
        )
        .await;
        if let Some(x) = self.expectations.get_mut(key) {
            x.adds = x.adds.saturating_sub(never_observed(&results, n));
        }
        results.into_iter().find_map(Result::err)
    }

    /// Deletes the victims, all at once as upstream does; false if a delete failed (other than
    /// the pod being gone already).
    async fn delete_pods(&mut self, key: &ObjKey, rs: &ReplicaSet, victims: &[String]) -> bool {
        self.expectations.insert(
            key.clone(),
            Expectations::expect_deletions(victims, self.clock.now()),
        );
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let rs_ref = rs.object_ref(&());
        let recorder = &self.recorder;
        let (api, rs_ref) = (&api, &rs_ref);
        let results = futures::future::join_all(victims.iter().map(|name| async move {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    let msg = format!("Deleted pod: {name}");
                    recorder
                        .record(
                            rs_ref,
                            names::EVENT_NORMAL,
                            names::EVENT_SUCCESSFUL_DELETE,
                            msg,
                        )
                        .await;
                    Ok(())
                }
                Err(e) => {
                    if !is_not_found(&e) {
                        let msg = format!("Error deleting: {}", api_error_text(&e));
                        recorder
                            .record(
                                rs_ref,
                                names::EVENT_WARNING,
                                names::EVENT_FAILED_DELETE,
                                msg,
                            )
                            .await;
                    }
                    Err(e)
                }
            }
        }))
        .await;
        let mut all = true;
        for (name, r) in victims.iter().zip(results) {
            if let Err(e) = r {
                if let Some(x) = self.expectations.get_mut(key) {
                    x.deletion_observed(name);
                }
                all &= is_not_found(&e);
            }
        }
        all
    }
}

/// Replaces `metadata.ownerReferences` with a JSON patch guarded by `test` operations on the UID
/// and on the list as last seen (a compare-and-swap on exactly the field we change), so that a
/// concurrent change makes the patch fail instead of clobbering it.
pub(crate) async fn set_owner_refs<K>(
    api: &Api<K>,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    refs: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    let mut ops = vec![json!({"op": "test", "path": "/metadata/uid", "value": meta.uid})];
    if let Some(old) = &meta.owner_references {
        ops.push(json!({"op": "test", "path": "/metadata/ownerReferences", "value": old}));
    }
    if refs.is_empty() {
        if meta.owner_references.is_some() {
            ops.push(json!({"op": "remove", "path": "/metadata/ownerReferences"}));
        }
    } else {
        ops.push(json!({"op": "add", "path": "/metadata/ownerReferences", "value": refs}));
    }
    let Ok(patch) = serde_json::from_value::<json_patch::Patch>(Value::Array(ops)) else {
        return false;
    };
    match api
        .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
    {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(object = %name, error = %e, "ownerReferences patch failed");
            false
        }
    }
}

/// The message of an API error as upstream prints it in events (the Status message).
pub(crate) fn api_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
