//! The job controller (shell); decisions live in decide.rs.
//!
//! Watches Jobs and Pods into sorted caches and syncs dirty Jobs in name order: expectations gate
//! the sync (pods it created or deleted must be seen first), then the plan of
//! [`decide::sync_job`] is applied in upstream order — delete/create pods, write the status with
//! the newly finished pods in `uncountedTerminatedPods`, remove their
//! `batch.kubernetes.io/job-tracking` finalizers, write the status with the counters (and the
//! final condition). Pods are matched by controllerRef UID (no adoption of orphans); an orphaned
//! pod that still carries the tracking finalizer is released.

pub mod config;
pub mod decide;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use klab_api::{Clock, names};

pub use config::JobControllerConfig;
use decide::{BackoffRecord, FINALIZER_JOB_TRACKING};

use crate::events::EventRecorder;
use crate::replicaset::decide::Expectations;
use crate::replicaset::util;
use crate::replicaset::{api_error_text, is_not_found};
use crate::slow_start::{create_pod_recorded, never_observed, slow_start};
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue, index, key_of,
};

/// The controller's name (event source).
pub const CONTROLLER_NAME: &str = names::CONTROLLER_JOB;

/// Why the Job controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    Stopped(String),
}

/// The changes the Job controller handles.
enum Ev {
    Job(Change<Job>),
    Pod(Change<Pod>),
}

/// Runs the Job controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: JobControllerConfig,
    recorder: EventRecorder,
) -> Result<(), JobError> {
    let jobs = informers.get::<Job>();
    let pods = informers.get::<Pod>();
    pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
    let sources = Sources::default().add(&jobs, Ev::Job).add(&pods, Ev::Pod);
    let mut c = Jc {
        client,
        clock: clock.clone(),
        config,
        recorder,
        jobs,
        pods,
        queue: informers.queue("job"),
        expectations: BTreeMap::new(),
        finalizer_removals: BTreeSet::new(),
        backoff: BTreeMap::new(),
        orphans: BTreeSet::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(JobError::Stopped)
}

impl Reconcile for Jc {
    type Event = Ev;
    type Error = std::convert::Infallible;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Job(ch) => self.job_changed(ch),
            Ev::Pod(ch) => self.pod_changed(ch),
        }
    }

    async fn before_reconcile(&mut self) {
        self.release_orphans().await;
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), Self::Error> {
        self.sync(key).await;
        Ok(())
    }
}

struct Jc {
    client: kube::Client,
    clock: Clock,
    config: JobControllerConfig,
    recorder: EventRecorder,
    jobs: SharedInformer<Job>,
    pods: SharedInformer<Pod>,
    queue: WorkQueue,
    expectations: BTreeMap<ObjKey, Expectations>,
    /// Pod UIDs whose finalizer we removed but whose update the cache has not shown yet.
    finalizer_removals: BTreeSet<String>,
    backoff: BTreeMap<ObjKey, BackoffRecord>,
    /// Pods owned by a Job that no longer exists, still carrying the tracking finalizer.
    orphans: BTreeSet<ObjKey>,
}

fn has_tracking_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER_JOB_TRACKING)
}

fn owner_job_key(jobs: &SharedInformer<Job>, pod: &Pod) -> Option<ObjKey> {
    let r = util::controller_ref(&pod.metadata)?;
    if r.kind != "Job" {
        return None;
    }
    let key = (pod.namespace().unwrap_or_default(), r.name.clone());
    let job = jobs.get(&key)?;
    (job.metadata.uid.as_deref() == Some(r.uid.as_str())).then_some(key)
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The status as a merge patch: empty uncounted lists are cleared explicitly (a merge patch with
/// `{}` would keep the old lists).
pub fn status_patch(status: &JobStatus) -> Value {
    let mut v = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Some(u) = v.get_mut("uncountedTerminatedPods") {
        for k in ["succeeded", "failed"] {
            let empty = u
                .get(k)
                .is_none_or(|x| x.as_array().is_some_and(|a| a.is_empty()));
            if empty {
                u[k] = Value::Null;
            }
        }
    }
    json!({"status": v})
}

/// A pod for the Job (upstream `CreatePodsWithGenerateName` from the template): the template's
/// labels plus the job labels, the tracking finalizer, the controller reference.
pub fn new_job_pod(job: &Job) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let t = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tm = t.metadata.unwrap_or_default();
    let mut labels = tm.labels.unwrap_or_default();
    for (k, v) in [
        (decide::LABEL_CONTROLLER_UID, &uid),
        (decide::LABEL_JOB_NAME, &name),
        (decide::LABEL_LEGACY_CONTROLLER_UID, &uid),
        (decide::LABEL_LEGACY_JOB_NAME, &name),
    ] {
        labels.entry(k.to_string()).or_insert_with(|| v.clone());
    }
    let mut finalizers = tm.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER_JOB_TRACKING) {
        finalizers.push(FINALIZER_JOB_TRACKING.into());
    }
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: tm.annotations,
            finalizers: Some(finalizers),
            owner_references: Some(vec![util::new_controller_ref(
                "batch/v1",
                "Job",
                &job.metadata,
            )]),
            ..Default::default()
        },
        spec: t.spec,
        status: None,
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}

impl Jc {
    fn job_changed(&mut self, (old, new): Change<Job>) {
        match (old, new) {
            (_, Some(n)) => self.queue.add(key_of(n.as_ref())),
            (Some(o), None) => {
                let k = key_of(o.as_ref());
                self.expectations.remove(&k);
                self.backoff.remove(&k);
                let uid = o.metadata.uid.clone().unwrap_or_default();
                let orphans: Vec<ObjKey> = self
                    .pods
                    .by_index(index::CONTROLLER_UID, &uid)
                    .iter()
                    .filter(|p| has_tracking_finalizer(p))
                    .map(|p| key_of(p.as_ref()))
                    .filter(|pk| pk.0 == k.0)
                    .collect();
                self.orphans.extend(orphans);
            }
            (None, None) => {}
        }
    }

    fn pod_changed(&mut self, (old, new): Change<Pod>) {
        // Finalizer removals are observed when the pod shows up without it (or is gone).
        match &new {
            Some(n) if !has_tracking_finalizer(n) => {
                self.finalizer_removals
                    .remove(n.metadata.uid.as_deref().unwrap_or(""));
            }
            None => {
                if let Some(o) = &old {
                    self.finalizer_removals
                        .remove(o.metadata.uid.as_deref().unwrap_or(""));
                }
            }
            _ => {}
        }
        let pod = new.as_ref().or(old.as_ref());
        let Some(pod) = pod else { return };
        let Some(k) = owner_job_key(&self.jobs, pod) else {
            if let Some(n) = &new
                && has_tracking_finalizer(n)
                && util::controller_ref(&n.metadata).is_some_and(|r| r.kind == "Job")
                && self.jobs.synced()
            {
                self.orphans.insert(key_of(n.as_ref()));
            }
            return;
        };
        let e = self.expectations.entry(k.clone()).or_default();
        match (&old, &new) {
            (None, Some(n)) => {
                if n.metadata.deletion_timestamp.is_some() {
                    e.deletion_observed(&n.name_any());
                } else {
                    e.creation_observed();
                }
            }
            (Some(o), Some(n))
                if o.metadata.deletion_timestamp.is_none()
                    && n.metadata.deletion_timestamp.is_some() =>
            {
                e.deletion_observed(&n.name_any());
            }
            (Some(o), None) => e.deletion_observed(&o.name_any()),
            _ => {}
        }
        self.queue.add(k);
    }

    /// Removes the tracking finalizer from pods whose Job is gone.
    async fn release_orphans(&mut self) {
        let orphans = std::mem::take(&mut self.orphans);
        for k in orphans {
            let Some(p) = self.pods.get(&k) else {
                continue;
            };
            if owner_job_key(&self.jobs, &p).is_some() || !has_tracking_finalizer(&p) {
                continue;
            }
            self.remove_finalizer(&p).await;
        }
    }

    async fn remove_finalizer(&mut self, p: &Pod) -> bool {
        let ns = p.namespace().unwrap_or_default();
        let rest: Vec<String> = p
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER_JOB_TRACKING)
            .cloned()
            .collect();
        let patch = json!({"metadata": {"finalizers": if rest.is_empty() { Value::Null } else { json!(rest) }}});
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        match api
            .patch(
                &p.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                self.finalizer_removals
                    .insert(p.metadata.uid.clone().unwrap_or_default());
                true
            }
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(e) => {
                tracing::info!(pod = %format!("{ns}/{}", p.name_any()), error = %e, "removing job-tracking finalizer");
                false
            }
        }
    }

    async fn patch_status(&self, key: &ObjKey, status: &JobStatus) -> bool {
        let api: Api<Job> = Api::namespaced(self.client.clone(), &key.0);
        let patch = status_patch(status);
        match crate::write::update_merged(&api, &key.1, crate::write::Target::Status, &patch).await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::info!(job = %format!("{}/{}", key.0, key.1), error = %e, "updating job status");
                false
            }
        }
    }

    async fn sync(&mut self, key: ObjKey) {
        let Some(job) = self.jobs.get(&key) else {
            self.expectations.remove(&key);
            self.backoff.remove(&key);
            return;
        };
        let now = self.clock.now();
        if let Some(e) = self.expectations.get(&key)
            && !e.satisfied(now)
        {
            // Wait for the watch to show our writes; sync again when they would expire anyway.
            if let Some(t) = e.expires_at() {
                self.queue.add_at(key.clone(), t);
            }
            return;
        }
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let owned: Vec<Arc<Pod>> =
            index::owned_in_namespace(&self.pods, &key.0, std::slice::from_ref(&uid))
                .into_iter()
                .filter(|p| util::controller_ref(&p.metadata).is_some_and(|r| r.kind == "Job"))
                .collect();
        let refs: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
        let record = self.backoff.get(&key).cloned().unwrap_or_default();
        let plan = decide::sync_job(
            &job,
            &refs,
            &self.finalizer_removals,
            &record,
            now,
            &self.config,
        );
        let r = job_ref(&job);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);

        // Pod deletions and creations, with expectations.
        if !plan.delete.is_empty() || plan.create > 0 {
            let mut exp = Expectations::expect_deletions(&plan.delete, now);
            exp.adds = plan.create as i64;
            self.expectations.insert(key.clone(), exp);
        }
        let (recorder, r_ref, api_ref) = (&self.recorder, &r, &api);
        // Deletions all at once, then creations in slow-start batches, as upstream does.
        let deleted = futures::future::join_all(plan.delete.iter().map(|name| async move {
            match api_ref.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    let msg = format!("Deleted pod: {name}");
                    recorder
                        .record(
                            r_ref,
                            names::EVENT_NORMAL,
                            names::EVENT_SUCCESSFUL_DELETE,
                            msg,
                        )
                        .await;
                    Ok(())
                }
                Err(e) => {
                    let gone = is_not_found(&e);
                    if !gone {
                        let msg = format!("Error deleting: {}", api_error_text(&e));
                        recorder
                            .record(r_ref, names::EVENT_WARNING, names::EVENT_FAILED_DELETE, msg)
                            .await;
                    }
                    Err(gone)
                }
            }
        }))
        .await;
        for (name, result) in plan.delete.iter().zip(deleted) {
            let Err(gone) = result else { continue };
            if let Some(x) = self.expectations.get_mut(&key) {
                x.deletion_observed(name);
            }
            if !gone {
                self.queue
                    .add_at(key.clone(), add(now, Duration::from_secs(1)));
            }
        }
        let template = new_job_pod(&job);
        let create_one =
            |_| async { create_pod_recorded(api_ref, &template, recorder, r_ref).await };
        let created = slow_start((0..plan.create).collect(), 1, create_one).await;
        let observed_never = never_observed(&created, plan.create);
        if observed_never > 0 {
            if let Some(x) = self.expectations.get_mut(&key) {
                x.adds = x.adds.saturating_sub(observed_never);
            }
            self.queue
                .add_at(key.clone(), add(now, Duration::from_secs(1)));
        }

        // Finalizer tracking in three steps.
        if let Some(before) = &plan.status_before
            && !self.patch_status(&key, before).await
        {
            self.queue
                .add_at(key.clone(), add(now, Duration::from_secs(1)));
            return;
        }
        let mut all_removed = true;
        for name in &plan.remove_finalizers {
            if let Some(p) = owned
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))
                .cloned()
            {
                all_removed &= self.remove_finalizer(&p).await;
            }
        }
        self.backoff.insert(key.clone(), plan.backoff.clone());
        if !all_removed {
            self.queue
                .add_at(key.clone(), add(now, Duration::from_secs(1)));
            return;
        }
        if job.status.as_ref() != Some(&plan.status_after)
            && !self.patch_status(&key, &plan.status_after).await
        {
            self.queue
                .add_at(key.clone(), add(now, Duration::from_secs(1)));
            return;
        }
        for ev in &plan.events {
            self.recorder
                .record(&r, ev.type_, &ev.reason, ev.message.clone())
                .await;
        }
        if let Some(d) = plan.requeue_after {
            self.queue.add_at(key.clone(), add(now, d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_pod_shape_and_status_patch() {
        let job: Job = serde_json::from_value(json!({"metadata": {"name": "pi", "namespace": "default", "uid": "u1"},
            "spec": {"template": {"metadata": {"labels": {"app": "pi"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}}})).unwrap();
        let p = new_job_pod(&job);
        assert_eq!(p.metadata.generate_name.as_deref(), Some("pi-"));
        let l = p.metadata.labels.unwrap();
        for (k, v) in [
            ("app", "pi"),
            ("batch.kubernetes.io/controller-uid", "u1"),
            ("batch.kubernetes.io/job-name", "pi"),
            ("controller-uid", "u1"),
            ("job-name", "pi"),
        ] {
            assert_eq!(l.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(
            p.metadata.finalizers,
            Some(vec![FINALIZER_JOB_TRACKING.to_string()])
        );
        let o = &p.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.controller, o.block_owner_deletion),
            ("Job", Some(true), Some(true))
        );
        let st = JobStatus {
            failed: Some(1),
            uncounted_terminated_pods: Some(Default::default()),
            ..Default::default()
        };
        assert_eq!(
            status_patch(&st),
            json!({"status": {"failed": 1, "uncountedTerminatedPods": {"succeeded": null, "failed": null}}})
        );
    }
}

#[cfg(test)]
mod it_tests;
