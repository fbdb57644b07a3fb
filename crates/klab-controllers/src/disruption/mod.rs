//! The disruption controller (shell): keeps every PodDisruptionBudget's status — `currentHealthy`,
//! `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods`, the
//! `DisruptionAllowed` condition — that the eviction subresource reads, and resets stale
//! `DisruptionTarget` pod conditions. Decisions live in decide.rs.
//!
//! As upstream, a budget is synced when it changes or when one of its pods changes (the pod's
//! first budget by name), and again when a `disruptedPods` entry expires; the workload caches are
//! read for scales but their changes do not trigger syncs.

pub mod decide;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use klab_api::{Clock, names};
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue, key_of,
};

use crate::events::{EventRecorder, object_ref_for_pod};
use crate::replicaset::Error;
use crate::replicaset::util;
use decide::{Workload, WorkloadKind, Workloads};

/// The event source upstream's disruption controller records with.
pub const EVENT_COMPONENT: &str = "controllermanager";

/// The changes the disruption controller handles.
enum Ev {
    Pdb(Change<PodDisruptionBudget>),
    Pod(Change<Pod>),
    /// Workload changes: read through the caches only (upstream registers no handlers).
    Ignored,
}

/// Runs the disruption controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let pdbs = informers.get::<PodDisruptionBudget>();
    let pods = informers.get::<Pod>();
    let replica_sets = informers.get::<ReplicaSet>();
    let deployments = informers.get::<Deployment>();
    let stateful_sets = informers.get::<StatefulSet>();
    let sources = Sources::default()
        .add(&pdbs, Ev::Pdb)
        .add(&pods, Ev::Pod)
        .add(&replica_sets, |_| Ev::Ignored)
        .add(&deployments, |_| Ev::Ignored)
        .add(&stateful_sets, |_| Ev::Ignored);
    let mut c = Dc {
        client,
        clock: clock.clone(),
        recorder,
        pdbs,
        pods,
        caches: Caches {
            replica_sets,
            deployments,
            stateful_sets,
        },
        queue: informers.queue("disruption"),
        stale: informers.queue("stale_pod_disruption"),
        pending_events: Vec::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Caches {
    replica_sets: SharedInformer<ReplicaSet>,
    deployments: SharedInformer<Deployment>,
    stateful_sets: SharedInformer<StatefulSet>,
}

impl Workloads for Caches {
    fn get(&self, kind: WorkloadKind, namespace: &str, name: &str) -> Option<Workload> {
        let key = (namespace.to_string(), name.to_string());
        let (meta, replicas) = match kind {
            WorkloadKind::ReplicaSet => {
                let o = self.replica_sets.get(&key)?;
                let r = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                (o.metadata.clone(), r)
            }
            WorkloadKind::Deployment => {
                let o = self.deployments.get(&key)?;
                let r = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                (o.metadata.clone(), r)
            }
            WorkloadKind::StatefulSet => {
                let o = self.stateful_sets.get(&key)?;
                let r = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                (o.metadata.clone(), r)
            }
        };
        Some(Workload {
            uid: meta.uid.clone().unwrap_or_default(),
            replicas,
            controller: util::controller_ref(&meta).cloned(),
        })
    }
}

struct Dc {
    client: kube::Client,
    clock: Clock,
    recorder: EventRecorder,
    pdbs: SharedInformer<PodDisruptionBudget>,
    pods: SharedInformer<Pod>,
    caches: Caches,
    /// Budgets to sync.
    queue: WorkQueue,
    /// Pods whose `DisruptionTarget` condition goes stale (upstream's stalePodDisruptionQueue).
    stale: WorkQueue,
    /// Events decided by handlers, which do no I/O; recorded before the next syncs.
    pending_events: Vec<(ObjectReference, &'static str, &'static str, String)>,
}

fn pdb_ref(pdb: &PodDisruptionBudget) -> ObjectReference {
    kube::Resource::object_ref(pdb, &())
}

impl Reconcile for Dc {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Pdb(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Pod((old, new)) => {
                let Some(pod) = new.as_ref().or(old.as_ref()) else {
                    return;
                };
                if let Some(k) = self.pdb_for_pod(pod) {
                    self.queue.add(k);
                }
                if let Some(n) = &new
                    && let Some(t) = decide::stale_disruption_at(n)
                {
                    self.stale.add_at(key_of(n.as_ref()), t);
                }
            }
            Ev::Ignored => {}
        }
    }

    fn next_timer(&mut self) -> Option<Timestamp> {
        self.stale.next_deadline()
    }

    async fn before_reconcile(&mut self) {
        for (r, ty, reason, msg) in std::mem::take(&mut self.pending_events) {
            self.recorder.record(&r, ty, reason, msg).await;
        }
        let now = self.clock.now();
        self.stale.fire_due(now);
        while let Some(k) = self.stale.pop() {
            self.reset_stale_condition(k.clone(), now).await;
            self.stale.done(&k);
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        let Some(pdb) = self.pdbs.get(&key) else {
            return Ok(());
        };
        self.sync(&key, &pdb).await
    }
}

impl Dc {
    /// `getPdbForPod`: the first budget (by name) of the pod's namespace that selects it; more
    /// than one is warned about on the pod, as upstream does.
    fn pdb_for_pod(&mut self, pod: &Pod) -> Option<ObjKey> {
        let ns = pod.namespace().unwrap_or_default();
        let matching: Vec<Arc<PodDisruptionBudget>> = self
            .pdbs
            .in_namespace(&ns)
            .into_iter()
            .filter(|b| decide::selects(b, pod))
            .collect();
        let first = matching.first()?;
        if matching.len() > 1 {
            let msg = format!(
                "Pod {:?}/{:?} matches multiple PodDisruptionBudgets.  Chose {:?} arbitrarily.",
                ns,
                pod.name_any(),
                first.name_any()
            );
            self.pending_events.push((
                object_ref_for_pod(pod),
                "Warning",
                "MultiplePodDisruptionBudgets",
                msg,
            ));
        }
        Some(key_of(first.as_ref()))
    }

    async fn sync(&mut self, key: &ObjKey, pdb: &PodDisruptionBudget) -> Result<(), kube::Error> {
        let owned: Vec<Arc<Pod>> = self
            .pods
            .in_namespace(&key.0)
            .into_iter()
            .filter(|p| decide::selects(pdb, p))
            .collect();
        let pods: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
        let r = pdb_ref(pdb);
        if pods.is_empty() {
            self.recorder
                .record(&r, "Normal", "NoPods", "No matching pods found".into())
                .await;
        }
        let now = self.clock.now();
        let (expected, desired, unmanaged) = match decide::expected_pod_count(
            pdb,
            &pods,
            &self.caches,
        ) {
            Ok(x) => x,
            Err(e) => {
                self.recorder
                    .record(
                        &r,
                        "Warning",
                        "CalculateExpectedPodCountFailed",
                        format!("Failed to calculate the number of expected pods: {e}"),
                    )
                    .await;
                tracing::info!(pdb = %format!("{}/{}", key.0, key.1), error = %e, "failed to sync PDB");
                let status = decide::fail_safe_status(pdb, &e, now);
                return self.write_status(pdb, status).await;
            }
        };
        if !unmanaged.is_empty() {
            let sel = decide::go_selector(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()));
            self.recorder
                .record(
                    &r,
                    "Warning",
                    "UnmanagedPods",
                    format!(
                        "Pods selected by this PodDisruptionBudget (selector: {sel}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
                    ),
                )
                .await;
        }
        let (disrupted, recheck, not_deleted) = decide::disrupted_pod_map(&pods, pdb, now);
        for name in not_deleted {
            if let Some(p) = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&name))
            {
                // Upstream prints the budget's namespace twice; kept as users see it.
                self.recorder
                    .record(
                        &object_ref_for_pod(p),
                        "Warning",
                        "NotDeleted",
                        format!(
                            "Pod was expected by PDB {}/{} to be deleted but it wasn't",
                            key.0, key.0
                        ),
                    )
                    .await;
            }
        }
        let healthy = decide::count_healthy(&pods, &disrupted, now);
        if let Some(status) = decide::new_status(pdb, healthy, desired, expected, disrupted, now) {
            self.write_status(pdb, status).await?;
        }
        if let Some(t) = recheck {
            self.queue.add_at(key.clone(), t);
        }
        Ok(())
    }

    /// `UpdateStatus` with the cached object's resourceVersion: a conflict fails the sync, which
    /// runs again on the newer object.
    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: PodDisruptionBudgetStatus,
    ) -> Result<(), kube::Error> {
        let mut next = pdb.clone();
        next.status = Some(status);
        let api: Api<PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), &pdb.namespace().unwrap_or_default());
        api.replace_status(&pdb.name_any(), &PostParams::default(), &next)
            .await
            .map(|_| ())
    }

    /// `syncStalePodDisruption`: a pod still carrying `DisruptionTarget=True` two minutes after it
    /// was set, and not being deleted, gets the condition set to False.
    async fn reset_stale_condition(&mut self, key: ObjKey, now: Timestamp) {
        let Some(pod) = self.pods.get(&key) else {
            return;
        };
        let Some(at) = decide::stale_disruption_at(&pod) else {
            return;
        };
        if at > now {
            self.stale.add_at(key, at);
            return;
        }
        let mut next = (*pod).clone();
        if let Some(conds) = next.status.as_mut().and_then(|s| s.conditions.as_mut())
            && let Some(c) = conds
                .iter_mut()
                .find(|c| c.type_ == names::POD_COND_DISRUPTION_TARGET)
        {
            // `UpdatePodCondition` replaces the whole condition: reason and message go.
            *c = PodCondition {
                type_: names::POD_COND_DISRUPTION_TARGET.into(),
                status: "False".into(),
                last_transition_time: Some(Time(now)),
                ..Default::default()
            };
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &key.0);
        let result = api
            .replace_status(&key.1, &PostParams::default(), &next)
            .await
            .map(|_| ());
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::info!(pod = %format!("{}/{}", key.0, key.1), error = %e, "clearing DisruptionTarget condition");
                self.stale
                    .add_after(key, now, klab_runtime::controller::RETRY_AFTER);
            }
        }
    }
}
