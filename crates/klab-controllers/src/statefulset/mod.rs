//! The StatefulSet controller (shell): watches StatefulSets, Pods and ControllerRevisions; per set
//! it claims member pods (`<set>-<ordinal>`), keeps the revision history, runs the steps decided
//! by `decide::next_action` (claims then pod creation, deletions) and writes status.
//!
//! Pods have fixed names, so a create that races the cache fails with 409 and is simply dropped:
//! there are never two pods of one identity, and a Terminating pod blocks its replacement.

pub mod config;
pub mod decide;
pub mod retention;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use klab_api::Clock;
use klab_api::names;
use klab_runtime::create::create_unread;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

pub use config::StatefulSetControllerConfig;
use decide::{Replica, Step};

use crate::events::EventRecorder;
use crate::replicaset::decide::{Claim, claim};
use crate::replicaset::util::{self, omit_zero};
use crate::replicaset::{Error, api_error_text, set_owner_refs};
use crate::slow_start::slow_start;
use klab_runtime::derived::Fixed;
use klab_runtime::index::owned_in_namespace;
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, Tracked, WorkQueue, change_key,
    index, key_of,
};

/// The changes the StatefulSet controller handles.
enum Ev {
    Set(Change<StatefulSet>),
    Pod(Change<Pod>),
    Revision(Change<ControllerRevision>),
    Claim(Change<PersistentVolumeClaim>),
}

/// Runs the StatefulSet controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: StatefulSetControllerConfig,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let _ = config;
    let sets = informers.get::<StatefulSet>();
    let pods = informers.get::<Pod>();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let revisions = informers.get::<ControllerRevision>();
    revisions.add_index(
        index::CONTROLLER_UID,
        index::controller_uid::<ControllerRevision>,
    );
    let claims = informers.get::<PersistentVolumeClaim>();
    let sources = Sources::default()
        .add(&sets, Ev::Set)
        .add(&pods, Ev::Pod)
        .add(&revisions, Ev::Revision)
        .add(&claims, Ev::Claim);
    let mut c = Ssc {
        client,
        clock: clock.clone(),
        recorder,
        sets,
        pods,
        revisions,
        claims,
        queue: informers.queue("statefulset"),
        seen: HashMap::default(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

impl Reconcile for Ssc {
    type Event = Ev;
    type Error = SyncError;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Set(ch) => {
                if let Some(k) = change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Pod((o, n)) => {
                for pod in [o, n].into_iter().flatten() {
                    for k in self.sets_for(&pod.metadata, Some(&pod)) {
                        self.queue.add(k);
                    }
                }
            }
            Ev::Revision((o, n)) => {
                for cr in [o, n].into_iter().flatten() {
                    for k in self.sets_for(&cr.metadata, None) {
                        self.queue.add(k);
                    }
                }
            }
            // A scaled-down pod's claim is gone: the replica it blocked (a scale-up that came
            // before the garbage collector) can be created now rather than at the next event.
            Ev::Claim((Some(old), None)) => {
                let ns = old.metadata.namespace.clone().unwrap_or_default();
                for set in retention::owner_pod_set(&old.metadata) {
                    self.queue.add((ns.clone(), set));
                }
            }
            Ev::Claim(_) => {}
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), SyncError> {
        self.sync(key).await
    }
}

#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("{0}")]
    Api(String),
    #[error("controller revision {0} collides; collisionCount raised")]
    Collision(String),
}

impl From<kube::Error> for SyncError {
    fn from(e: kube::Error) -> Self {
        SyncError::Api(api_error_text(&e))
    }
}

struct Ssc {
    client: kube::Client,
    clock: Clock,
    recorder: EventRecorder,
    sets: SharedInformer<StatefulSet>,
    pods: SharedInformer<Pod>,
    revisions: SharedInformer<ControllerRevision>,
    claims: SharedInformer<PersistentVolumeClaim>,
    queue: WorkQueue,
    /// What each set's syncs read from its pods, kept for its next sync.
    seen: HashMap<ObjKey, Seen, Fixed>,
}

/// What a set's syncs read from the pods filed under its UID, kept across syncs: each member
/// pod as the decisions read it ([`Replica`]) with the set's claim on it, in name order, brought
/// up to date from the pods changed since the last sync ([`Tracked`]). At a thousand replicas,
/// claiming and reading every pod on every sync was most of a sync.
#[derive(Default)]
struct Seen {
    /// The set's UID, deletion and selector the claims were made against: a change of any of
    /// them reads every pod again.
    basis: Option<(String, bool, LabelSelector)>,
    /// `None`: filed under the UID but not a member (another namespace or name).
    tracked: Tracked<Option<(Claim, Arc<Replica>)>>,
    members: BTreeMap<String, (Claim, Arc<Replica>)>,
}

impl Seen {
    /// The set's members (owned, or to be released) as of now, by name.
    fn read(
        &mut self,
        pods: &SharedInformer<Pod>,
        set: &StatefulSet,
    ) -> &BTreeMap<String, (Claim, Arc<Replica>)> {
        let ns = set.metadata.namespace.as_deref().unwrap_or_default();
        let uid = set.metadata.uid.as_deref().unwrap_or_default();
        let deleting = set.metadata.deletion_timestamp.is_some();
        let selector = set
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let basis = (uid.to_string(), deleting, selector);
        if self.basis.as_ref() != Some(&basis) {
            self.tracked.clear();
            self.members.clear();
        }
        let (_, _, selector) = self.basis.insert(basis);
        let (added, dropped) = self
            .tracked
            .update(pods, Some((index::CONTROLLER_UID, uid)), |p| {
                let member = p.metadata.namespace.as_deref().unwrap_or_default() == ns
                    && decide::is_member_of(set, p);
                member.then(|| {
                    let c = claim(uid, deleting, selector, &p.metadata);
                    (c, Arc::new(Replica::of(p.clone())))
                })
            });
        // Old versions out first: a changed pod is its old version dropped and its new added.
        for (_, r) in dropped.iter().flatten() {
            self.members.remove(r.name());
        }
        for (c, r) in added.into_iter().flatten() {
            self.members.insert(r.name().to_string(), (*c, r.clone()));
        }
        &self.members
    }
}

impl Ssc {
    /// The set that owns (or, for an orphan member, may adopt) an object.
    fn sets_for(&self, meta: &ObjectMeta, pod: Option<&Pod>) -> Vec<ObjKey> {
        let ns = meta.namespace.clone().unwrap_or_default();
        if let Some(r) = util::controller_ref(meta) {
            if r.kind != "StatefulSet" {
                return Vec::new();
            }
            let k = (ns, r.name.clone());
            return match self.sets.get(&k) {
                Some(s) if s.metadata.uid.as_deref() == Some(r.uid.as_str()) => vec![k],
                _ => Vec::new(),
            };
        }
        let Some(pod) = pod else { return Vec::new() };
        let labels = util::labels(meta);
        self.sets
            .in_namespace(&ns)
            .into_iter()
            .filter(|s| decide::is_member_of(s, pod))
            .filter(|s| {
                s.spec
                    .as_ref()
                    .is_some_and(|sp| util::selector_matches(&sp.selector, labels))
            })
            .map(|s| key_of(s.as_ref()))
            .collect()
    }

    async fn sync(&mut self, key: ObjKey) -> Result<(), SyncError> {
        let Some(set) = self.sets.get(&key) else {
            self.seen.remove(&key);
            return Ok(());
        };
        // Out of the map for the sync (which writes through `self`); a sync that fails keeps
        // what it read all the same.
        let mut seen = self.seen.remove(&key).unwrap_or_default();
        let r = self.sync_with(key.clone(), &set, &mut seen).await;
        self.seen.insert(key, seen);
        r
    }

    async fn sync_with(
        &mut self,
        key: ObjKey,
        set: &StatefulSet,
        seen: &mut Seen,
    ) -> Result<(), SyncError> {
        let Some(spec) = set.spec.clone() else {
            return Ok(());
        };
        let (ns, name) = key.clone();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let deleting = set.metadata.deletion_timestamp.is_some();
        let set_ref = set.object_ref(&());

        // Claim member pods (Terminating ones stay ours: they still hold their identity): its
        // own, as read last time and changed since, and the namespace's orphans (by index).
        let pod_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let mut pods: Vec<Arc<Replica>> = Vec::new();
        let mut release: Vec<Arc<Replica>> = Vec::new();
        for (c, r) in seen.read(&self.pods, set).values() {
            match c {
                Claim::Owned => pods.push(r.clone()),
                Claim::Release => release.push(r.clone()),
                Claim::Adopt | Claim::Ignore => {}
            }
        }
        for r in release {
            let mut refs = r.pod.metadata.owner_references.clone().unwrap_or_default();
            refs.retain(|o| o.uid != uid);
            set_owner_refs(&pod_api, &r.pod.metadata, refs).await;
        }
        let orphans: Vec<Arc<Pod>> = owned_in_namespace(&self.pods, &ns, &[index::orphan_key(&ns)])
            .into_iter()
            .filter(|p| decide::is_member_of(set, p))
            .collect();
        for pod in orphans {
            if claim(&uid, deleting, &spec.selector, &pod.metadata) != Claim::Adopt {
                continue;
            }
            let mut refs = pod.metadata.owner_references.clone().unwrap_or_default();
            refs.push(util::new_controller_ref(
                "apps/v1",
                "StatefulSet",
                &set.metadata,
            ));
            if set_owner_refs(&pod_api, &pod.metadata, refs).await {
                pods.push(Arc::new(Replica::of(pod)));
            }
        }

        let (current, update, current_template) = self.sync_revisions(set).await?;
        let now = self.clock.now();
        let refs: Vec<&Replica> = pods.iter().map(|p| p.as_ref()).collect();
        let ns_claims = self.claims.in_namespace(&ns);
        let claims: retention::Claims = ns_claims
            .iter()
            .map(|c| (c.metadata.name.as_deref().unwrap_or(""), &c.metadata))
            .collect();
        let action = decide::next_action(set, &refs, &claims, &current, &update, now);
        let mut steps = action.steps.iter().peekable();
        while let Some(step) = steps.next() {
            match step {
                Step::Create {
                    ordinal,
                    at_current,
                } => {
                    // A run of creations (only a Parallel set has more than one) goes in
                    // slow-start batches, as upstream's runForAll does for such sets.
                    let mut run = vec![(*ordinal, *at_current)];
                    while let Some(Step::Create {
                        ordinal,
                        at_current,
                    }) = steps.next_if(|s| matches!(s, Step::Create { .. }))
                    {
                        run.push((*ordinal, *at_current));
                    }
                    let create = |(ordinal, at_current): (i32, bool)| {
                        let (template, rev) = if at_current {
                            (&current_template, &current)
                        } else {
                            (&spec.template, &update)
                        };
                        self.create_replica(set, &set_ref, template, ordinal, rev)
                    };
                    let results = slow_start(run, 1, create).await;
                    if let Some(e) = results.into_iter().find_map(Result::err) {
                        return Err(e);
                    }
                }
                Step::Delete { name: pod_name, .. } => {
                    let r = pod_api.delete(pod_name, &DeleteParams::default()).await;
                    match r {
                        Ok(_) => {
                            let msg =
                                format!("delete Pod {pod_name} in StatefulSet {name} successful");
                            self.recorder
                                .record(
                                    &set_ref,
                                    names::EVENT_NORMAL,
                                    names::EVENT_SUCCESSFUL_DELETE,
                                    msg,
                                )
                                .await;
                        }
                        Err(e) if crate::replicaset::is_not_found(&e) => {}
                        Err(e) => {
                            let msg = format!(
                                "delete Pod {pod_name} in StatefulSet {name} failed error: {}",
                                api_error_text(&e)
                            );
                            self.recorder
                                .record(
                                    &set_ref,
                                    names::EVENT_WARNING,
                                    names::EVENT_FAILED_DELETE,
                                    msg,
                                )
                                .await;
                            return Err(e.into());
                        }
                    }
                }
                Step::Wait { pod, message } => {
                    tracing::debug!(statefulset = %name, pod = %pod, "{message}");
                }
                Step::FixClaims { pod, update_event } => {
                    let Some(p) = refs.iter().find(|p| p.name() == pod) else {
                        continue;
                    };
                    self.fix_claims(set, &set_ref, &p.pod, &claims).await?;
                    if *update_event {
                        // upstream's UpdateStatefulPod, which writes the (unchanged) pod after
                        // fixing its claims and records the update
                        let msg = format!("update Pod {pod} in StatefulSet {name} successful");
                        self.recorder
                            .record(
                                &set_ref,
                                names::EVENT_NORMAL,
                                names::EVENT_SUCCESSFUL_UPDATE,
                                msg,
                            )
                            .await;
                    }
                }
            }
        }

        let mut status = action.status;
        decide::complete_rolling_update(set, &mut status);
        let old = set.status.clone().unwrap_or_default();
        let unchanged = old.replicas == status.replicas
            && old.ready_replicas.unwrap_or(0) == status.ready_replicas.unwrap_or(0)
            && old.available_replicas.unwrap_or(0) == status.available_replicas.unwrap_or(0)
            && old.current_replicas.unwrap_or(0) == status.current_replicas.unwrap_or(0)
            && old.updated_replicas.unwrap_or(0) == status.updated_replicas.unwrap_or(0)
            && old.current_revision == status.current_revision
            && old.update_revision == status.update_revision
            && old.observed_generation == status.observed_generation
            && old.collision_count.unwrap_or(0) == status.collision_count.unwrap_or(0);
        if !unchanged {
            let body = json!({"status": {
                "observedGeneration": status.observed_generation,
                "replicas": status.replicas,
                "readyReplicas": omit_zero(status.ready_replicas.unwrap_or(0)),
                "availableReplicas": status.available_replicas.unwrap_or(0),
                "currentReplicas": omit_zero(status.current_replicas.unwrap_or(0)),
                "updatedReplicas": omit_zero(status.updated_replicas.unwrap_or(0)),
                "currentRevision": status.current_revision,
                "updateRevision": status.update_revision,
                "collisionCount": status.collision_count,
            }});
            let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
            crate::write::update_merged_from(&api, set, crate::write::Target::Status, &body)
                .await?;
        }
        if let Some(t) = decide::next_availability_check(set, &refs, now) {
            self.queue.add_at(key, t);
        }
        self.truncate_history(set, &refs, &current, &update).await
    }

    /// Upstream `UpdatePodClaimForRetentionPolicy`: each existing claim of the pod whose owner
    /// references do not match the policy gets them rewritten (a claim another controller owns
    /// is reported with upstream's ConflictingController warning and only scrubbed of ours).
    async fn fix_claims(
        &self,
        set: &StatefulSet,
        set_ref: &k8s_openapi::api::core::v1::ObjectReference,
        pod: &Pod,
        claims: &retention::Claims<'_>,
    ) -> Result<(), SyncError> {
        let ns = set.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let pod_name = pod.name_any();
        for t in set
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.as_ref())
            .into_iter()
            .flatten()
        {
            let claim_name = decide::claim_name(t, &pod_name);
            let Some(meta) = claims.get(claim_name.as_str()) else {
                continue;
            };
            if retention::conflicting_controller(meta, set, pod) {
                self.recorder
                    .record(
                        set_ref,
                        names::EVENT_WARNING,
                        retention::REASON_CONFLICTING_CONTROLLER,
                        retention::conflicting_controller_message(&claim_name),
                    )
                    .await;
            }
            if retention::claim_owner_up_to_date(meta, set, pod) {
                continue;
            }
            let refs = retention::claim_owner_refs(meta, set, pod);
            if !crate::write::set_owner_refs_by_update(&api, meta, refs).await {
                return Err(SyncError::Api(format!(
                    "could not update claim {claim_name} for delete policy ownerRefs"
                )));
            }
        }
        Ok(())
    }

    /// Upstream `truncateHistory`: keep `revisionHistoryLimit` (default 10) non-live revisions.
    async fn truncate_history(
        &self,
        set: &StatefulSet,
        pods: &[&Replica],
        current: &str,
        update: &str,
    ) -> Result<(), SyncError> {
        let ns = set.namespace().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let revisions: Vec<(String, i64)> = owned_in_namespace(&self.revisions, &ns, &[uid])
            .iter()
            .map(|cr| (cr.metadata.name.clone().unwrap_or_default(), cr.revision))
            .collect();
        // the revisions pods carry: a few distinct names among many pods
        let mut carried: BTreeSet<&str> = BTreeSet::new();
        carried.extend(pods.iter().filter_map(|p| p.revision.as_deref()));
        let mut live = vec![current.to_string(), update.to_string()];
        live.extend(carried.into_iter().map(String::from));
        let limit = set
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &ns);
        for name in decide::revisions_to_prune(limit, &revisions, &live) {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if crate::replicaset::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Upstream `getStatefulSetRevisions`: finds or creates the ControllerRevision of the current
    /// template (the update revision) and resolves the current one. Returns (current name, update
    /// name, current template).
    async fn sync_revisions(
        &mut self,
        set: &StatefulSet,
    ) -> Result<(String, String, PodTemplateSpec), SyncError> {
        let ns = set.namespace().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let owned: Vec<Arc<ControllerRevision>> =
            owned_in_namespace(&self.revisions, &ns, std::slice::from_ref(&uid));
        let collision = set.status.as_ref().and_then(|s| s.collision_count);
        let update_name = decide::revision_name(set, collision);
        // stored in Go's canonical form (sorted keys), as upstream's data bytes are
        let data: serde_json::Value = serde_json::from_slice(
            &crate::deployment::hash::canonical_json(&decide::revision_data(set)),
        )
        .unwrap_or_default();
        let max_rev = owned.iter().map(|c| c.revision).max().unwrap_or(0);
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &ns);
        match owned
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(update_name.as_str()))
        {
            Some(cr) if cr.revision < max_rev => {
                // rolling back to an earlier template: the old revision becomes the newest
                api.patch(
                    &update_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"revision": max_rev.saturating_add(1)})),
                )
                .await?;
            }
            Some(_) => {}
            None => {
                let mut labels = set
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.metadata.as_ref())
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default();
                let hash = update_name
                    .rsplit('-')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                labels.insert(names::LABEL_CONTROLLER_REVISION_OBJECT_HASH.into(), hash);
                let cr = ControllerRevision {
                    metadata: ObjectMeta {
                        name: Some(update_name.clone()),
                        namespace: Some(ns.clone()),
                        labels: Some(labels),
                        annotations: set.metadata.annotations.clone(),
                        owner_references: Some(vec![util::new_controller_ref(
                            "apps/v1",
                            "StatefulSet",
                            &set.metadata,
                        )]),
                        ..Default::default()
                    },
                    data: Some(RawExtension(data.clone())),
                    revision: max_rev.saturating_add(1),
                };
                match api.create(&PostParams::default(), &cr).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let existing = api.get(&update_name).await?;
                        let same = existing.data.as_ref().map(|d| &d.0) == Some(&data);
                        if !same {
                            let next = collision.unwrap_or(0).saturating_add(1);
                            let sapi: Api<StatefulSet> = Api::namespaced(self.client.clone(), &ns);
                            let patch = json!({"status": {"collisionCount": next}});
                            crate::write::update_merged(
                                &sapi,
                                &set.name_any(),
                                crate::write::Target::Status,
                                &patch,
                            )
                            .await?;
                            return Err(SyncError::Collision(update_name));
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let current_name = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.clone())
            .unwrap_or_default();
        let current = owned
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(current_name.as_str()));
        match current {
            Some(cr) => {
                let template = cr
                    .data
                    .as_ref()
                    .and_then(|d| decide::template_from_revision(&d.0))
                    .unwrap_or_else(|| {
                        set.spec
                            .as_ref()
                            .map(|s| s.template.clone())
                            .unwrap_or_default()
                    });
                Ok((current_name, update_name, template))
            }
            None => {
                let t = set
                    .spec
                    .as_ref()
                    .map(|s| s.template.clone())
                    .unwrap_or_default();
                Ok((update_name.clone(), update_name, t))
            }
        }
    }

    /// Upstream `CreateStatefulPod`: the replica's claims first (an existing claim is kept), then
    /// the pod. A 409 on the pod means our cache lags: nothing to do.
    async fn create_replica(
        &self,
        set: &StatefulSet,
        set_ref: &k8s_openapi::api::core::v1::ObjectReference,
        template: &PodTemplateSpec,
        ordinal: i32,
        revision: &str,
    ) -> Result<(), SyncError> {
        let ns = set.namespace().unwrap_or_default();
        let set_name = set.name_any();
        let pod = decide::new_pod(set, template, ordinal, revision);
        let pod_name = pod.name_any();
        let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        for claim in decide::claims_for(set, ordinal) {
            let claim_name = claim.name_any();
            let cached = self.claims.get(&(ns.clone(), claim_name.clone()));
            if cached.is_some_and(|c| c.metadata.deletion_timestamp.is_some()) {
                // upstream createPersistentVolumeClaims: no pod on a claim on its way out
                let err = format!("pvc {claim_name} is being deleted");
                let msg =
                    format!("create Pod {pod_name} in StatefulSet {set_name} failed error: {err}");
                self.recorder
                    .record(
                        set_ref,
                        names::EVENT_WARNING,
                        names::EVENT_FAILED_CREATE,
                        msg,
                    )
                    .await;
                return Err(SyncError::Api(err));
            }
            match pvc_api.create(&PostParams::default(), &claim).await {
                Ok(_) => {
                    let msg = format!(
                        "create Claim {claim_name} Pod {pod_name} in StatefulSet {set_name} success"
                    );
                    self.recorder
                        .record(
                            set_ref,
                            names::EVENT_NORMAL,
                            names::EVENT_SUCCESSFUL_CREATE,
                            msg,
                        )
                        .await;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    let msg = format!(
                        "create Claim {claim_name} for Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                        api_error_text(&e)
                    );
                    self.recorder
                        .record(
                            set_ref,
                            names::EVENT_WARNING,
                            names::EVENT_FAILED_CREATE,
                            msg,
                        )
                        .await;
                    return Err(e.into());
                }
            }
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        match create_unread(&api, &PostParams::default(), &pod).await {
            Ok(_) => {
                let msg = format!("create Pod {pod_name} in StatefulSet {set_name} successful");
                self.recorder
                    .record(
                        set_ref,
                        names::EVENT_NORMAL,
                        names::EVENT_SUCCESSFUL_CREATE,
                        msg,
                    )
                    .await;
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => {
                let msg = format!(
                    "create Pod {pod_name} in StatefulSet {set_name} failed error: {}",
                    api_error_text(&e)
                );
                self.recorder
                    .record(
                        set_ref,
                        names::EVENT_WARNING,
                        names::EVENT_FAILED_CREATE,
                        msg,
                    )
                    .await;
                Err(e.into())
            }
        }
    }
}
