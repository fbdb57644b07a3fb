//! The CronJob controller (shell), after upstream's cronjob controller v2: a CronJob is synced
//! when it or one of its Jobs changes and again just after its next scheduled time. A sync
//! reconciles `status.active` with the Jobs it owns (events `SawCompletedJob`, `MissingJob`,
//! `UnexpectedJob`), records the last successful time, starts the Job of a due time
//! (`SuccessfulCreate`; Forbid skips with `JobAlreadyActive`, Replace deletes the running ones
//! first), writes the status and trims the finished Jobs to the history limits
//! (`SuccessfulDelete`). Decisions live in decide.rs.

pub mod decide;

#[cfg(test)]
mod it_tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};

use klab_api::Clock;
use klab_api::cron::Schedule;
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue, index,
};

use crate::events::EventRecorder;
use crate::replicaset::util;

/// The event source of the controller (upstream's `cronjob-controller`).
pub const CONTROLLER_NAME: &str = "cronjob-controller";

enum Ev {
    CronJob(Change<CronJob>),
    Job(Change<Job>),
}

/// Runs the CronJob controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    recorder: EventRecorder,
) -> Result<(), crate::replicaset::Error> {
    let cronjobs = informers.get::<CronJob>();
    let jobs = informers.get::<Job>();
    jobs.add_index(index::CONTROLLER_UID, index::controller_uid::<Job>);
    let sources = Sources::default()
        .add(&cronjobs, Ev::CronJob)
        .add(&jobs, Ev::Job);
    let mut c = Cjc {
        client,
        clock: clock.clone(),
        recorder,
        cronjobs,
        jobs,
        queue: informers.queue("cronjob"),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(crate::replicaset::Error::Stopped)
}

struct Cjc {
    client: kube::Client,
    clock: Clock,
    recorder: EventRecorder,
    cronjobs: SharedInformer<CronJob>,
    jobs: SharedInformer<Job>,
    queue: WorkQueue,
}

fn cronjob_ref(cj: &CronJob) -> ObjectReference {
    kube::Resource::object_ref(cj, &())
}

fn job_ref(job: &Job) -> ObjectReference {
    kube::Resource::object_ref(job, &())
}

/// The finished condition of a Job (`Complete` or `Failed` with status True), if any.
fn finished(job: &Job) -> Option<&'static str> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    for c in conds {
        if c.status == "True" {
            match c.type_.as_str() {
                "Complete" => return Some("Complete"),
                "Failed" => return Some("Failed"),
                _ => {}
            }
        }
    }
    None
}

impl Reconcile for Cjc {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::CronJob(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Job((old, new)) => {
                let Some(job) = new.as_ref().or(old.as_ref()) else {
                    return;
                };
                if let Some(r) = util::controller_ref(&job.metadata)
                    && r.kind == "CronJob"
                {
                    self.queue
                        .add((job.namespace().unwrap_or_default(), r.name.clone()));
                }
            }
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        let Some(cj) = self.cronjobs.get(&key) else {
            return Ok(());
        };
        self.sync(&key, &cj).await
    }
}

impl Cjc {
    async fn event(&self, cj: &CronJob, ty: &str, reason: &str, msg: String) {
        self.recorder
            .record(&cronjob_ref(cj), ty, reason, msg)
            .await;
    }

    async fn sync(&mut self, key: &ObjKey, cached: &Arc<CronJob>) -> Result<(), kube::Error> {
        let now = self.clock.now();
        let mut cj_owned: Arc<CronJob> = cached.clone();
        let uid = cached.metadata.uid.clone().unwrap_or_default();
        let owned: Vec<Arc<Job>> = self
            .jobs
            .by_index(index::CONTROLLER_UID, &uid)
            .into_iter()
            .filter(|j| j.namespace().as_deref() == Some(key.0.as_str()))
            .collect();
        let mut status = cached.status.clone().unwrap_or_default();
        let mut before = status.clone();
        let mut active = status.active.clone().unwrap_or_default();
        let in_active =
            |active: &[ObjectReference], j: &Job| active.iter().any(|r| r.uid == j.metadata.uid);
        for j in &owned {
            let done = finished(j);
            let mut listed = in_active(&active, j);
            if !listed && done.is_none() {
                // The cache may not show our own status write yet: ask the API server, as
                // upstream does, before calling the Job unexpected.
                let api: Api<CronJob> = Api::namespaced(self.client.clone(), &key.0);
                if let Ok(fresh) = api.get(&key.1).await {
                    let fresh_active = fresh
                        .status
                        .as_ref()
                        .and_then(|s| s.active.clone())
                        .unwrap_or_default();
                    if in_active(&fresh_active, j) {
                        status = fresh.status.clone().unwrap_or_default();
                        before = status.clone();
                        active = fresh_active;
                        cj_owned = Arc::new(fresh);
                        listed = true;
                    }
                }
            }
            if !listed && done.is_none() {
                self.event(
                    cached.as_ref(),
                    "Warning",
                    "UnexpectedJob",
                    format!(
                        "Saw a job that the controller did not create or forgot: {}",
                        j.name_any()
                    ),
                )
                .await;
            } else if listed && let Some(cond) = done {
                active.retain(|r| r.uid != j.metadata.uid);
                self.event(
                    cached.as_ref(),
                    "Normal",
                    "SawCompletedJob",
                    format!("Saw completed job: {}, condition: {cond}", j.name_any()),
                )
                .await;
            }
            if done == Some("Complete")
                && let Some(t) = j.status.as_ref().and_then(|s| s.completion_time.clone())
                && status
                    .last_successful_time
                    .as_ref()
                    .is_none_or(|l| t.0 > l.0)
            {
                status.last_successful_time = Some(t);
            }
        }
        // Active entries whose Job is gone.
        let owned_uids: Vec<Option<String>> =
            owned.iter().map(|j| j.metadata.uid.clone()).collect();
        let mut missing = Vec::new();
        active.retain(|r| {
            let keep = owned_uids.contains(&r.uid);
            if !keep {
                missing.push(r.name.clone().unwrap_or_default());
            }
            keep
        });
        for name in missing {
            self.event(
                cached.as_ref(),
                "Normal",
                "MissingJob",
                format!("Active job went missing: {name}"),
            )
            .await;
        }
        let cj: &CronJob = &cj_owned;
        let spec = cj.spec.clone().unwrap_or_default();
        let mut requeue: Option<Timestamp> = None;
        // The zone the schedule is read in; a zone the tz database does not know (stored
        // before validation refused it) starts nothing, as upstream's controller.
        let zone = match spec.time_zone.as_deref().map(klab_api::cron::load_location) {
            None => Some(jiff::tz::TimeZone::UTC),
            Some(Ok(tz)) => Some(tz),
            Some(Err(e)) => {
                self.event(
                    cj,
                    "Warning",
                    "UnknownTimeZone",
                    format!(
                        "invalid timeZone: {:?}: {e}",
                        spec.time_zone.as_deref().unwrap_or_default()
                    ),
                )
                .await;
                None
            }
        };
        if let Some(zone) = zone
            && cj.metadata.deletion_timestamp.is_none()
            && spec.suspend != Some(true)
        {
            match Schedule::parse(&spec.schedule).map(|s| s.in_time_zone(zone)) {
                Err(e) => {
                    self.event(
                        cj,
                        "Warning",
                        "UnparseableSchedule",
                        format!("unparseable schedule: {:?} : {e}", spec.schedule),
                    )
                    .await;
                }
                Ok(sched) => {
                    requeue = self
                        .schedule(cj, &sched, &spec, &mut status, &mut active, now)
                        .await?;
                }
            }
        }
        status.active = (!active.is_empty()).then_some(active);
        if status != before {
            let api: Api<CronJob> = Api::namespaced(self.client.clone(), &key.0);
            let mut updated = cj.clone();
            updated.status = Some(status.clone());
            match api
                .replace_status(&key.1, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.cleanup_history(cj, &owned, &spec).await;
        if let Some(t) = requeue {
            self.queue.add_at(key.clone(), t);
        }
        Ok(())
    }

    /// The schedule part of a sync; returns when to look again.
    async fn schedule(
        &mut self,
        cj: &CronJob,
        sched: &Schedule,
        spec: &k8s_openapi::api::batch::v1::CronJobSpec,
        status: &mut k8s_openapi::api::batch::v1::CronJobStatus,
        active: &mut Vec<ObjectReference>,
        now: Timestamp,
    ) -> Result<Option<Timestamp>, kube::Error> {
        let created = cj
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(now);
        let last = status.last_schedule_time.as_ref().map(|t| t.0);
        let names: Vec<String> = active.iter().filter_map(|r| r.name.clone()).collect();
        let concurrency = spec
            .concurrency_policy
            .clone()
            .unwrap_or_else(|| "Allow".into());
        let inputs = decide::Inputs {
            name: &cj.name_any(),
            sched,
            created,
            last_schedule: last,
            starting_deadline: spec.starting_deadline_seconds,
            concurrency: &concurrency,
            active: &names,
            now,
        };
        let (plan, missed) = match decide::plan(&inputs) {
            Ok(p) => p,
            Err(e) => {
                self.event(
                    cj,
                    "Warning",
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {e}", spec.schedule),
                )
                .await;
                return Ok(None);
            }
        };
        if missed > decide::TOO_MANY_MISSED {
            self.event(
                cj,
                "Warning",
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
            )
            .await;
        }
        match plan {
            decide::Plan::Wait | decide::Plan::AlreadyProcessed => {}
            decide::Plan::TooLate(t) => {
                self.event(cj, "Warning", "MissSchedule", decide::miss_message(t))
                    .await;
            }
            decide::Plan::Forbidden => {
                self.event(
                    cj,
                    "Normal",
                    "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
                )
                .await;
            }
            decide::Plan::Start { scheduled, replace } => {
                if replace {
                    for r in std::mem::take(active) {
                        let name = r.name.clone().unwrap_or_default();
                        if !self.delete_job(cj, &name).await {
                            active.push(r);
                        }
                    }
                }
                let job = job_from_template(cj, scheduled);
                let api: Api<Job> =
                    Api::namespaced(self.client.clone(), &cj.namespace().unwrap_or_default());
                let created_job = match api.create(&PostParams::default(), &job).await {
                    Ok(j) => {
                        self.event(
                            cj,
                            "Normal",
                            "SuccessfulCreate",
                            format!("Created job {}", j.name_any()),
                        )
                        .await;
                        j
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        // Made before (a restart between create and status): adopt it if ours.
                        match api.get(&job.name_any()).await {
                            Ok(j)
                                if util::controller_ref(&j.metadata).map(|r| &r.uid)
                                    == cj.metadata.uid.as_ref() =>
                            {
                                j
                            }
                            Ok(_) => return Ok(None),
                            Err(e) => return Err(e),
                        }
                    }
                    // Namespace going away: nothing to schedule.
                    Err(kube::Error::Api(s)) if s.code == 403 => return Ok(None),
                    Err(e) => {
                        self.event(
                            cj,
                            "Warning",
                            "FailedCreate",
                            format!("Error creating job: {e}"),
                        )
                        .await;
                        return Err(e);
                    }
                };
                if !active.iter().any(|r| r.uid == created_job.metadata.uid) {
                    active.push(job_ref(&created_job));
                }
                status.last_schedule_time = Some(Time(scheduled));
            }
        }
        Ok(decide::requeue_at(
            sched,
            created,
            status.last_schedule_time.as_ref().map(|t| t.0),
            now,
        ))
    }

    /// Deletes one Job in the background; false when it could not be deleted.
    async fn delete_job(&self, cj: &CronJob, name: &str) -> bool {
        let api: Api<Job> =
            Api::namespaced(self.client.clone(), &cj.namespace().unwrap_or_default());
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                self.event(
                    cj,
                    "Normal",
                    "SuccessfulDelete",
                    format!("Deleted job {name}"),
                )
                .await;
                true
            }
            Err(kube::Error::Api(s)) if s.code == 404 => true,
            Err(e) => {
                self.event(cj, "Warning", "FailedDelete", format!("Deleted job: {e}"))
                    .await;
                false
            }
        }
    }

    async fn cleanup_history(
        &self,
        cj: &CronJob,
        owned: &[Arc<Job>],
        spec: &k8s_openapi::api::batch::v1::CronJobSpec,
    ) {
        let done: Vec<decide::Finished> = owned
            .iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .filter_map(|j| {
                let cond = finished(j)?;
                Some(decide::Finished {
                    name: j.name_any(),
                    start: j
                        .status
                        .as_ref()
                        .and_then(|s| s.start_time.as_ref())
                        .map(|t| t.0),
                    succeeded: cond == "Complete",
                })
            })
            .collect();
        let delete = decide::history_to_delete(
            &done,
            i64::from(spec.successful_jobs_history_limit.unwrap_or(3)),
            i64::from(spec.failed_jobs_history_limit.unwrap_or(1)),
        );
        for name in delete {
            self.delete_job(cj, &name).await;
        }
    }
}

/// `getJobFromTemplate2`: the template's labels and annotations, the scheduled-time annotation,
/// the CronJob as controller, and the template's spec.
fn job_from_template(cj: &CronJob, scheduled: Timestamp) -> Job {
    let template = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = tmeta.annotations.unwrap_or_default();
    annotations.insert(
        decide::SCHEDULED_TIMESTAMP_ANNOTATION.into(),
        decide::scheduled_timestamp(
            scheduled,
            cj.spec.as_ref().and_then(|s| s.time_zone.as_deref()),
        ),
    );
    let mut job = Job {
        metadata: ObjectMeta {
            name: Some(decide::job_name(&cj.name_any(), scheduled)),
            labels: tmeta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![util::new_controller_ref(
                "batch/v1",
                "CronJob",
                &cj.metadata,
            )]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    };
    // `creationTimestamp: null` of the template is not ours to send.
    if let Some(s) = job.spec.as_mut() {
        s.template
            .metadata
            .get_or_insert_with(Default::default)
            .creation_timestamp = None;
    }
    job
}
