//! The Deployment controller (shell): watches Deployments, ReplicaSets and Pods; per Deployment it
//! claims ReplicaSets, finds or creates the new one (`<deploy>-<pod-template-hash>`), runs the
//! RollingUpdate or Recreate step decided in `decide.rs`, cleans up history and writes status.

pub mod config;
pub mod decide;
pub mod hash;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use klab_api::Clock;
use klab_api::names;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

pub use config::DeploymentControllerConfig;
use decide::{Params, Strategy};

use crate::events::EventRecorder;
use crate::replicaset::decide::{Claim, claim};
use crate::replicaset::util::{self, omit_zero};
use crate::replicaset::{Error, api_error_text, set_owner_refs};
use klab_runtime::index::owned_in_namespace;
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue, change_key, index,
    key_of,
};

/// The changes the Deployment controller handles.
enum Ev {
    Deploy(Change<Deployment>),
    Rs(Change<ReplicaSet>),
    Pod(Change<Pod>),
}

/// Runs the Deployment controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: DeploymentControllerConfig,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let ds = informers.get::<Deployment>();
    let rss = informers.get::<ReplicaSet>();
    rss.add_index(index::CONTROLLER_UID, index::controller_uid::<ReplicaSet>);
    let pods = informers.get::<Pod>();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let sources = Sources::default()
        .add(&ds, Ev::Deploy)
        .add(&rss, Ev::Rs)
        .add(&pods, Ev::Pod);
    let mut c = Dc {
        client,
        config,
        clock: clock.clone(),
        recorder,
        ds,
        rss,
        pods,
        queue: informers.queue("deployment"),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

impl Reconcile for Dc {
    type Event = Ev;
    type Error = SyncError;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deploy(ch) => {
                if let Some(k) = change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Rs((o, n)) => {
                for rs in [o, n].into_iter().flatten() {
                    for k in self.deployments_for_rs(&rs) {
                        self.queue.add(k);
                    }
                }
            }
            Ev::Pod(ch) => self.pod_changed(ch),
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), SyncError> {
        self.sync(key).await
    }
}

/// A failed step of one sync (retried after a second, as upstream's rate-limited queue would).
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("{0}")]
    Api(String),
    #[error("hash collision for replica set {0}; collisionCount raised")]
    Collision(String),
}

impl From<kube::Error> for SyncError {
    fn from(e: kube::Error) -> Self {
        SyncError::Api(api_error_text(&e))
    }
}

struct Dc {
    client: kube::Client,
    config: DeploymentControllerConfig,
    clock: Clock,
    recorder: EventRecorder,
    ds: SharedInformer<Deployment>,
    rss: SharedInformer<ReplicaSet>,
    pods: SharedInformer<Pod>,
    queue: WorkQueue,
}

fn owner_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    kind: &str,
) -> Option<(ObjKey, String)> {
    let r = util::controller_ref(meta)?;
    (r.kind == kind).then(|| {
        (
            (meta.namespace.clone().unwrap_or_default(), r.name.clone()),
            r.uid.clone(),
        )
    })
}

impl Dc {
    /// The Deployment that owns a ReplicaSet (cached, same UID), or those whose selector matches
    /// an orphan.
    fn deployments_for_rs(&self, rs: &ReplicaSet) -> Vec<ObjKey> {
        if let Some((k, uid)) = owner_key(&rs.metadata, "Deployment") {
            return match self.ds.get(&k) {
                Some(d) if d.metadata.uid.as_deref() == Some(uid.as_str()) => vec![k],
                _ => Vec::new(),
            };
        }
        if util::controller_ref(&rs.metadata).is_some() {
            return Vec::new();
        }
        let ns = rs.namespace().unwrap_or_default();
        let labels = util::labels(&rs.metadata);
        self.ds
            .in_namespace(&ns)
            .into_iter()
            .filter(|d| {
                d.spec.as_ref().is_some_and(|s| {
                    !util::selector_is_empty(&s.selector)
                        && util::selector_matches(&s.selector, labels)
                })
            })
            .map(|d| key_of(d.as_ref()))
            .collect()
    }

    /// Upstream `deletePod`: a Recreate Deployment waits for its old pods to disappear, so their
    /// removal (or turning terminal) re-syncs it.
    fn pod_changed(&mut self, (old, new): Change<Pod>) {
        let gone_or_terminal = match (&old, &new) {
            (Some(_), None) => true,
            (Some(o), Some(n)) => util::phase(o) != util::phase(n),
            _ => false,
        };
        if !gone_or_terminal {
            return;
        }
        let Some(pod) = new.or(old) else { return };
        let Some((rs_key, rs_uid)) = owner_key(&pod.metadata, "ReplicaSet") else {
            return;
        };
        let Some(rs) = self.rss.get(&rs_key) else {
            return;
        };
        if rs.metadata.uid.as_deref() != Some(rs_uid.as_str()) {
            return;
        }
        for k in self.deployments_for_rs(&rs.clone()) {
            let recreate = self
                .ds
                .get(&k)
                .is_some_and(|d| Params::of(&d).strategy == Strategy::Recreate);
            if recreate {
                self.queue.add(k);
            }
        }
    }

    async fn sync(&mut self, key: ObjKey) -> Result<(), SyncError> {
        let Some(d) = self.ds.get(&key) else {
            return Ok(());
        };
        let now = self.clock.now();
        let p = Params::of(&d);
        let Some(spec) = d.spec.clone() else {
            return Ok(());
        };
        let d_ref = d.object_ref(&());
        if util::selector_is_empty(&spec.selector) {
            self.recorder
                .record(
                    &d_ref,
                    names::EVENT_WARNING,
                    names::EVENT_SELECTING_ALL,
                    "This deployment is selecting all pods. A non-empty selector is required."
                        .into(),
                )
                .await;
            let observed = d
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if observed < d.metadata.generation.unwrap_or(0) {
                self.patch_status(&d, json!({"observedGeneration": d.metadata.generation}))
                    .await?;
            }
            return Ok(());
        }
        let mut rss = self.claim_replica_sets(&d).await;
        // `dl` is the Deployment as this sync sees it: conditions set along the way land in its
        // status and are written once at the end.
        let mut dl = (*d).clone();
        if d.metadata.deletion_timestamp.is_some() {
            let refs: Vec<&ReplicaSet> = rss.iter().collect();
            let (new, _) = decide::split_new_old(&dl, &refs);
            let status = decide::calculate_status(&dl, &p, &refs, new, now);
            return self.write_status(&d, &p, status).await;
        }
        let mut st = dl.status.clone().unwrap_or_default();
        decide::paused_condition(&p, &mut st, now);
        dl.status = Some(st);

        let all_refs: Vec<&ReplicaSet> = rss.iter().collect();
        if p.paused || decide::is_scaling_event(&p, &all_refs) {
            return self.sync_scale(&d, &mut dl, &p, &mut rss).await;
        }
        match p.strategy {
            Strategy::RollingUpdate => self.rollout_rolling(&d, &mut dl, &p, &mut rss).await,
            Strategy::Recreate => {
                // Upstream `getPodMapForDeployment`: the pods of each claimed ReplicaSet, by
                // index. Upstream reads them at every sync; only Recreate uses them, and read
                // here (no await since the claim) they are the same: a RollingUpdate sync of a
                // Deployment of 10 000 pods no longer copies 10 000 pointers to drop them.
                let rs_uids: Vec<String> =
                    rss.iter().filter_map(|r| r.metadata.uid.clone()).collect();
                let pods: Vec<Arc<Pod>> = owned_in_namespace(&self.pods, &key.0, &rs_uids);
                self.rollout_recreate(&d, &mut dl, &p, &mut rss, &pods)
                    .await
            }
        }
    }

    /// Upstream `ClaimReplicaSets`.
    async fn claim_replica_sets(&mut self, d: &Deployment) -> Vec<ReplicaSet> {
        let ns = d.namespace().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let deleting = d.metadata.deletion_timestamp.is_some();
        let selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        // Its own ReplicaSets and the namespace's orphans: every other one is ignored by `claim`.
        let candidates = owned_in_namespace(&self.rss, &ns, &[uid.clone(), index::orphan_key(&ns)]);
        let mut out = Vec::new();
        let mut can_adopt: Option<bool> = None;
        for rs in candidates {
            let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
            match claim(&uid, deleting, &selector, &rs.metadata) {
                Claim::Owned => out.push((*rs).clone()),
                Claim::Adopt => {
                    if can_adopt.is_none() {
                        let dapi: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
                        can_adopt = Some(matches!(dapi.get(&d.name_any()).await,
                            Ok(f) if f.metadata.uid.as_deref() == Some(uid.as_str()) && f.metadata.deletion_timestamp.is_none()));
                    }
                    if can_adopt == Some(true) {
                        let mut refs = rs.metadata.owner_references.clone().unwrap_or_default();
                        refs.push(util::new_controller_ref(
                            "apps/v1",
                            "Deployment",
                            &d.metadata,
                        ));
                        if set_owner_refs(&api, &rs.metadata, refs.clone()).await {
                            let mut owned = (*rs).clone();
                            owned.metadata.owner_references = Some(refs);
                            out.push(owned);
                        }
                    }
                }
                Claim::Release => {
                    let mut refs = rs.metadata.owner_references.clone().unwrap_or_default();
                    refs.retain(|r| r.uid != uid);
                    set_owner_refs(&api, &rs.metadata, refs).await;
                }
                Claim::Ignore => {}
            }
        }
        out
    }

    /// Upstream `getAllReplicaSetsAndSyncRevision` / `getNewReplicaSet`: returns the index of the
    /// new ReplicaSet in `rss` (created when `create` and missing).
    async fn sync_new_rs(
        &mut self,
        d: &Deployment,
        dl: &mut Deployment,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
        create: bool,
    ) -> Result<Option<usize>, SyncError> {
        let now = self.clock.now();
        let refs: Vec<&ReplicaSet> = rss.iter().collect();
        let (new, old) = decide::split_new_old(dl, &refs);
        let new_name = new.and_then(|n| n.metadata.name.clone());
        let new_revision = decide::max_revision(&old).saturating_add(1);
        let old_spec_sum = decide::sum_i32(old.iter().map(|r| decide::spec_replicas(r)));
        let ns = d.namespace().unwrap_or_default();
        let rs_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        if let Some(new_name) = new_name {
            let idx = rss
                .iter()
                .position(|r| r.metadata.name.as_deref() == Some(new_name.as_str()))
                .unwrap_or(0);
            let mut copy = rss[idx].clone();
            let ann_changed = decide::set_new_rs_annotations(dl, &mut copy, new_revision, true);
            let min_ready_changed = copy
                .spec
                .as_ref()
                .and_then(|s| s.min_ready_seconds)
                .unwrap_or(0)
                != p.min_ready_seconds;
            if ann_changed || min_ready_changed {
                let body = json!({
                    "metadata": {"annotations": copy.metadata.annotations},
                    "spec": {"minReadySeconds": omit_zero(p.min_ready_seconds)},
                });
                rs_api
                    .patch(&new_name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
                if let Some(s) = copy.spec.as_mut() {
                    s.min_ready_seconds = omit_zero(p.min_ready_seconds);
                }
                rss[idx] = copy.clone();
            }
            let rev = copy
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(names::ANN_DEPLOYMENT_REVISION))
                .cloned();
            if let Some(rev) = rev {
                self.set_deployment_revision(d, dl, &rev).await?;
            }
            let mut st = dl.status.clone().unwrap_or_default();
            if p.progress_deadline_seconds.is_some()
                && decide::get_condition(&st, names::DEPLOY_COND_PROGRESSING).is_none()
            {
                let msg = format!("Found new replica set \"{new_name}\"");
                decide::set_condition(
                    &mut st,
                    decide::condition(
                        names::DEPLOY_COND_PROGRESSING,
                        "True",
                        names::REASON_FOUND_NEW_RS,
                        msg,
                        now,
                    ),
                );
                dl.status = Some(st);
            }
            return Ok(Some(idx));
        }
        if !create {
            return Ok(None);
        }
        let collision = dl.status.as_ref().and_then(|s| s.collision_count);
        let template = dl
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let hash = hash::compute_hash(&template, collision);
        let replicas = decide::new_rs_new_replicas(p, old_spec_sum, 0);
        let new_rs = decide::new_replica_set(dl, p, &hash, new_revision, replicas);
        let rs_name = new_rs.metadata.name.clone().unwrap_or_default();
        let created = match rs_api.create(&PostParams::default(), &new_rs).await {
            Ok(rs) => {
                if replicas > 0 {
                    let msg = format!("Scaled up replica set {rs_name} to {replicas}");
                    self.recorder
                        .record(
                            &d.object_ref(&()),
                            names::EVENT_NORMAL,
                            names::EVENT_SCALING_REPLICA_SET,
                            msg,
                        )
                        .await;
                }
                let mut st = dl.status.clone().unwrap_or_default();
                if p.progress_deadline_seconds.is_some() {
                    let msg = format!("Created new replica set \"{rs_name}\"");
                    decide::set_condition(
                        &mut st,
                        decide::condition(
                            names::DEPLOY_COND_PROGRESSING,
                            "True",
                            names::REASON_NEW_RS_CREATED,
                            msg,
                            now,
                        ),
                    );
                }
                dl.status = Some(st);
                rs
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Already exists: ours with an equal template (our cache lags) — use it; otherwise
                // a hash collision: bump collisionCount and retry.
                let existing = rs_api.get(&rs_name).await?;
                let ours = util::controller_ref(&existing.metadata)
                    .is_some_and(|r| Some(r.uid.clone()) == d.metadata.uid);
                let same = existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| decide::equal_ignore_hash(t, &template));
                if ours && same {
                    existing
                } else {
                    let next = collision.unwrap_or(0).saturating_add(1);
                    self.patch_status(d, json!({"collisionCount": next}))
                        .await?;
                    return Err(SyncError::Collision(rs_name));
                }
            }
            Err(e) => {
                let mut st = dl.status.clone().unwrap_or_default();
                let msg = format!(
                    "Failed to create new replica set \"{rs_name}\": {}",
                    api_error_text(&e)
                );
                if p.progress_deadline_seconds.is_some() {
                    decide::set_condition(
                        &mut st,
                        decide::condition(
                            names::DEPLOY_COND_PROGRESSING,
                            "False",
                            names::REASON_FAILED_RS_CREATE,
                            msg.clone(),
                            now,
                        ),
                    );
                    self.write_status(d, p, st).await?;
                }
                self.recorder
                    .record(
                        &d.object_ref(&()),
                        names::EVENT_WARNING,
                        names::REASON_FAILED_RS_CREATE,
                        msg,
                    )
                    .await;
                return Err(e.into());
            }
        };
        self.set_deployment_revision(d, dl, &new_revision.to_string())
            .await?;
        rss.push(created);
        Ok(Some(rss.len().saturating_sub(1)))
    }

    /// Upstream `SetDeploymentRevision`: the Deployment carries its new ReplicaSet's revision.
    async fn set_deployment_revision(
        &mut self,
        d: &Deployment,
        dl: &mut Deployment,
        rev: &str,
    ) -> Result<(), SyncError> {
        let cur = dl
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(names::ANN_DEPLOYMENT_REVISION))
            .cloned();
        if cur.as_deref() == Some(rev) {
            return Ok(());
        }
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
        let body = json!({"metadata": {"annotations": {names::ANN_DEPLOYMENT_REVISION: rev}}});
        crate::write::update_merged(&api, &d.name_any(), crate::write::Target::Object, &body)
            .await?;
        dl.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(names::ANN_DEPLOYMENT_REVISION.into(), rev.into());
        Ok(())
    }

    /// Upstream `scaleReplicaSet`: sets `spec.replicas` and the desired/max annotations; records
    /// `Scaled up|down replica set <rs> to <b> from <a>` when the size changes. `always`: also
    /// when only the annotations are stale (proportional scaling); otherwise a same-size call is
    /// a no-op (`scaleReplicaSetAndRecordEvent`). Returns whether the size changed.
    async fn scale_rs(
        &mut self,
        d: &Deployment,
        p: &Params,
        rs: &mut ReplicaSet,
        to: i32,
        always: bool,
    ) -> Result<bool, SyncError> {
        let from = decide::spec_replicas(rs);
        if from == to && !always {
            return Ok(false);
        }
        let max = p.replicas.saturating_add(decide::max_surge(p));
        let size_changed = from != to;
        if !size_changed && !decide::replicas_annotations_need_update(rs, p.replicas, max) {
            return Ok(false);
        }
        let api: Api<ReplicaSet> =
            Api::namespaced(self.client.clone(), &rs.namespace().unwrap_or_default());
        let body = json!({
            "metadata": {"annotations": {
                names::ANN_DEPLOYMENT_DESIRED_REPLICAS: p.replicas.to_string(),
                names::ANN_DEPLOYMENT_MAX_REPLICAS: max.to_string(),
            }},
            "spec": {"replicas": to},
        });
        api.patch(
            &rs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await?;
        decide::set_replicas_annotations(&mut rs.metadata, p.replicas, max);
        if let Some(s) = rs.spec.as_mut() {
            s.replicas = Some(to);
        }
        if size_changed {
            let op = if from < to { "up" } else { "down" };
            let msg = format!(
                "Scaled {op} replica set {} to {to} from {from}",
                rs.name_any()
            );
            self.recorder
                .record(
                    &d.object_ref(&()),
                    names::EVENT_NORMAL,
                    names::EVENT_SCALING_REPLICA_SET,
                    msg,
                )
                .await;
        }
        Ok(size_changed)
    }

    async fn scale_by_name(
        &mut self,
        d: &Deployment,
        p: &Params,
        rss: &mut [ReplicaSet],
        name: &str,
        to: i32,
        always: bool,
    ) -> Result<bool, SyncError> {
        match rss
            .iter_mut()
            .find(|r| r.metadata.name.as_deref() == Some(name))
        {
            Some(rs) => self.scale_rs(d, p, rs, to, always).await,
            None => Ok(false),
        }
    }

    /// Upstream `rolloutRolling`.
    async fn rollout_rolling(
        &mut self,
        d: &Deployment,
        dl: &mut Deployment,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
    ) -> Result<(), SyncError> {
        let Some(idx) = self.sync_new_rs(d, dl, p, rss, true).await? else {
            return Ok(());
        };
        let new_name = rss[idx].name_any();
        let target = {
            let all: Vec<&ReplicaSet> = rss.iter().collect();
            decide::rolling_new_rs_target(p, &all, &rss[idx])
        };
        if let Some(t) = target
            && self.scale_rs(d, p, &mut rss[idx], t, false).await?
        {
            return self
                .sync_rollout_status(d, dl, p, rss, Some(&new_name))
                .await;
        }
        let targets = {
            let all: Vec<&ReplicaSet> = rss.iter().collect();
            let old: Vec<&ReplicaSet> = rss
                .iter()
                .filter(|r| r.metadata.name.as_deref() != Some(new_name.as_str()))
                .collect();
            decide::rolling_old_rs_targets(p, &all, &decide::active(&old), &rss[idx])
        };
        let mut scaled_down = false;
        for (name, to) in targets {
            scaled_down |= self.scale_by_name(d, p, rss, &name, to, false).await?;
        }
        if scaled_down {
            return self
                .sync_rollout_status(d, dl, p, rss, Some(&new_name))
                .await;
        }
        self.cleanup_if_complete(d, p, rss, Some(&new_name)).await?;
        self.sync_rollout_status(d, dl, p, rss, Some(&new_name))
            .await
    }

    /// Upstream `rolloutRecreate`: old ReplicaSets to 0, wait until no old pod object is left
    /// running (a Terminating pod on a dead node blocks here), then create/scale the new one.
    async fn rollout_recreate(
        &mut self,
        d: &Deployment,
        dl: &mut Deployment,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
        pods: &[Arc<Pod>],
    ) -> Result<(), SyncError> {
        let mut new_idx = self.sync_new_rs(d, dl, p, rss, false).await?;
        let new_name = new_idx.map(|i| rss[i].name_any());
        let old_active: Vec<String> = rss
            .iter()
            .filter(|r| Some(r.name_any()) != new_name && decide::spec_replicas(r) > 0)
            .map(|r| r.name_any())
            .collect();
        let mut scaled = false;
        for name in old_active {
            scaled |= self.scale_by_name(d, p, rss, &name, 0, false).await?;
        }
        if scaled {
            return self
                .sync_rollout_status(d, dl, p, rss, new_name.as_deref())
                .await;
        }
        let running = {
            let old: Vec<&ReplicaSet> = rss
                .iter()
                .filter(|r| Some(r.name_any()) != new_name)
                .collect();
            let new_uid = new_idx.and_then(|i| rss[i].metadata.uid.clone());
            let pod_refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
            decide::old_pods_running(new_uid.as_deref(), &old, &pod_refs)
        };
        if running {
            return self
                .sync_rollout_status(d, dl, p, rss, new_name.as_deref())
                .await;
        }
        if new_idx.is_none() {
            new_idx = self.sync_new_rs(d, dl, p, rss, true).await?;
        }
        let Some(idx) = new_idx else { return Ok(()) };
        let new_name = rss[idx].name_any();
        self.scale_rs(d, p, &mut rss[idx], p.replicas, false)
            .await?;
        self.cleanup_if_complete(d, p, rss, Some(&new_name)).await?;
        self.sync_rollout_status(d, dl, p, rss, Some(&new_name))
            .await
    }

    /// Upstream `sync` (scaling event or paused): proportional scale, history cleanup when paused,
    /// then the plain status (no progress estimation).
    async fn sync_scale(
        &mut self,
        d: &Deployment,
        dl: &mut Deployment,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
    ) -> Result<(), SyncError> {
        let idx = self.sync_new_rs(d, dl, p, rss, false).await?;
        let new_name = idx.map(|i| rss[i].name_any());
        let steps = {
            let new = idx.map(|i| &rss[i]);
            let old: Vec<&ReplicaSet> = rss
                .iter()
                .filter(|r| Some(r.name_any()) != new_name)
                .collect();
            decide::proportional_scale(p, dl, new, &old)
        };
        let proportional = steps.len() > 1;
        for (name, to) in steps {
            self.scale_by_name(d, p, rss, &name, to, proportional)
                .await?;
        }
        if p.paused {
            self.cleanup_old(p, rss, new_name.as_deref()).await?;
        }
        let now = self.clock.now();
        let refs: Vec<&ReplicaSet> = rss.iter().collect();
        let new = new_name
            .as_deref()
            .and_then(|n| rss.iter().find(|r| r.metadata.name.as_deref() == Some(n)));
        let status = decide::calculate_status(dl, p, &refs, new, now);
        self.write_status(d, p, status).await
    }

    async fn cleanup_if_complete(
        &mut self,
        d: &Deployment,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
        new_name: Option<&str>,
    ) -> Result<(), SyncError> {
        // Upstream checks the stored status (`d.Status`), i.e. completion seen by an earlier sync.
        let stored = d.status.clone().unwrap_or_default();
        if decide::deployment_complete(d, p, &stored) {
            self.cleanup_old(p, rss, new_name).await?;
        }
        Ok(())
    }

    /// Upstream `cleanupDeployment`.
    async fn cleanup_old(
        &mut self,
        p: &Params,
        rss: &mut Vec<ReplicaSet>,
        new_name: Option<&str>,
    ) -> Result<(), SyncError> {
        let victims = {
            let old: Vec<&ReplicaSet> = rss
                .iter()
                .filter(|r| r.metadata.name.as_deref() != new_name)
                .collect();
            decide::cleanup_victims(p, &old)
        };
        for v in victims {
            let Some(rs) = rss
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(v.as_str()))
            else {
                continue;
            };
            let api: Api<ReplicaSet> =
                Api::namespaced(self.client.clone(), &rs.namespace().unwrap_or_default());
            match api.delete(&v, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if crate::replicaset::is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
            rss.retain(|r| r.metadata.name.as_deref() != Some(v.as_str()));
        }
        Ok(())
    }

    /// Upstream `syncRolloutStatus`, then re-queue for the progress deadline if needed.
    async fn sync_rollout_status(
        &mut self,
        d: &Deployment,
        dl: &Deployment,
        p: &Params,
        rss: &[ReplicaSet],
        new_name: Option<&str>,
    ) -> Result<(), SyncError> {
        let now = self.clock.now();
        let refs: Vec<&ReplicaSet> = rss.iter().collect();
        let new = new_name.and_then(|n| rss.iter().find(|r| r.metadata.name.as_deref() == Some(n)));
        let status = decide::rollout_status(dl, p, &refs, new, now);
        self.write_status(d, p, status).await
    }

    /// Writes the status if it differs from the stored one (Go `omitempty` shape: zero counts are
    /// removed), and schedules the progress-deadline re-check.
    async fn write_status(
        &mut self,
        d: &Deployment,
        p: &Params,
        mut status: DeploymentStatus,
    ) -> Result<(), SyncError> {
        if self.config.deployment_replica_set_terminating_replicas {
            let refs: Vec<ReplicaSet> = self.owned_rs_snapshot(d);
            let refs: Vec<&ReplicaSet> = refs.iter().collect();
            status.terminating_replicas = Some(decide::terminating_replicas(&refs));
        }
        if let Some(t) = decide::stuck_recheck_at(d, p, &status) {
            self.queue.add_at(key_of(d), t);
        }
        if decide::status_equal(d.status.as_ref(), &status) {
            return Ok(());
        }
        let n = |v: Option<i32>| omit_zero(v.unwrap_or(0));
        let mut body = json!({
            "observedGeneration": status.observed_generation,
            "replicas": n(status.replicas),
            "updatedReplicas": n(status.updated_replicas),
            "readyReplicas": n(status.ready_replicas),
            "availableReplicas": n(status.available_replicas),
            "unavailableReplicas": n(status.unavailable_replicas),
            "collisionCount": status.collision_count,
            "conditions": status.conditions,
        });
        if self.config.deployment_replica_set_terminating_replicas {
            body["terminatingReplicas"] = json!(status.terminating_replicas);
        }
        self.patch_status(d, body).await
    }

    /// The cached ReplicaSets controlled by `d` (for the terminating count, which the
    /// ReplicaSet controller reports).
    fn owned_rs_snapshot(&self, d: &Deployment) -> Vec<ReplicaSet> {
        let uid = d.metadata.uid.clone().unwrap_or_default();
        owned_in_namespace(&self.rss, &d.namespace().unwrap_or_default(), &[uid])
            .iter()
            .map(|r| (**r).clone())
            .collect()
    }

    async fn patch_status(
        &self,
        d: &Deployment,
        status: serde_json::Value,
    ) -> Result<(), SyncError> {
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
        let patch = json!({ "status": status });
        crate::write::update_merged_from(&api, d, crate::write::Target::Status, &patch).await?;
        Ok(())
    }
}
