//! The pod manager: the kubelet's pod workers, status manager and housekeeping as one synchronous
//! state machine over the simulated runtime. `sync(now, …)` is deterministic and does no I/O: it
//! returns the API writes (status PATCHes, final DELETEs, events) for the async shell to send and
//! the next instant it must be woken at.
//!
//! Per pod UID (upstream `pod_workers.go`): admission → SyncPod (sandbox, image pulls, container
//! starts and restarts with crash-loop backoff) → Terminating (preStop, SIGTERM, SIGKILL within the
//! grace budget) → Terminated (final status, DELETE with grace 0 and a UID precondition) → finished.
//! Runtime pods that belong to no known pod are orphans: stopped with grace 1 (2 s) and no preStop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use klab_api::duration::format_go_duration;
use klab_api::names;

use crate::backoff::{CrashLoopBackoff, RestartDecision};
use crate::config::{KubeletConfig, RuntimeModel};
use crate::eviction;
use crate::node_status::Allocatable;
use crate::pod_status::{
    self, CState, ContainerView, PodFacts, Rejection, admit, generate_status, is_terminal_phase,
    normalize_image,
};
use crate::probes::{Instance, ProbeKind, ProbeParams, ProbeWorker, Target};
use crate::program::Program;
use crate::runtime::{Machine, RtContainer, RtState, Terminated, after, sd};
use crate::shutdown::{self, PriorityGroup};
use crate::termination::{HookTime, effective_grace, kill_plan};
use crate::usage;
use klab_api::DetRng;

/// The status manager's `syncPeriod`: every 10 s from the kubelet's start, each pod's status in
/// the API is checked against the one the kubelet holds ([`PodManager::reconcile_statuses`]).
pub const STATUS_SYNC_PERIOD: Duration = Duration::from_secs(10);

/// An event about a pod, to be recorded by the shell.
#[derive(Clone, Debug, PartialEq)]
pub struct PodEvent {
    pub namespace: String,
    pub pod_name: String,
    pub pod_uid: String,
    /// `spec.containers{app}` for container events.
    pub field_path: Option<String>,
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

/// An API write the shell must perform, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum PodWrite {
    /// PATCH `pods/<name>/status` (the UID is sent as a precondition).
    Status {
        namespace: String,
        name: String,
        uid: String,
        status: Box<PodStatus>,
    },
    /// DELETE `pods/<name>` with `gracePeriodSeconds: 0` and `preconditions.uid`.
    Delete {
        namespace: String,
        name: String,
        uid: String,
    },
    Event(PodEvent),
}

/// Result of one sync pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncOutput {
    pub writes: Vec<PodWrite>,
    /// The next instant something is due (container exit, pull done, back-off over, SIGKILL …).
    pub next_wake: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq)]
enum Stage {
    Pulling { until: Timestamp },
    Creating { until: Timestamp },
}

#[derive(Clone, Debug, PartialEq)]
struct Starting {
    container: String,
    init: bool,
    stage: Stage,
    pull_started: Timestamp,
}

#[derive(Clone, Debug, PartialEq)]
struct PendingHook {
    sigterm_at: Timestamp,
    kill_at: Timestamp,
    failed: bool,
    abandoned: bool,
}

#[derive(Clone, Debug, PartialEq)]
struct Term {
    grace: i64,
    hooks: BTreeMap<String, PendingHook>,
}

#[derive(Clone, Debug, PartialEq)]
enum Lifecycle {
    /// Not admitted yet.
    New,
    Rejected,
    Syncing,
    Terminating(Term),
    /// Final status produced; waiting for nothing (kept so a UID never restarts).
    Finished,
}

/// Records, in a machine that has never seen `pod`, the containers the API says ran for it (with
/// their restart counts), as exited with the state a power loss leaves. Returns whether any was.
fn seed_from_api_status(pod: &Pod, machine: &mut Machine, now: Timestamp) -> bool {
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return false;
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let ran: Vec<_> = statuses
        .into_iter()
        .flatten()
        .filter(|c| c.container_id.is_some())
        .collect();
    if ran.is_empty() {
        return false;
    }
    let started = |c: &k8s_openapi::api::core::v1::ContainerStatus| {
        c.state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .map(|t| t.0)
            .unwrap_or(now)
    };
    let records = ran
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.image.clone(),
                c.restart_count,
                c.container_id.clone().unwrap_or_default(),
                started(c),
            )
        })
        .collect();
    machine.seed_lost_containers(
        uid,
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
        records,
        now,
    );
    true
}

/// Whether a pod has a local ephemeral-storage limit its usage could exceed: an
/// `ephemeral-storage` limit on a container or a `sizeLimit` on an emptyDir volume (what
/// `eviction::local_storage_violation` compares against).
fn has_local_storage_limit(spec: &PodSpec) -> bool {
    spec.containers.iter().any(|c| {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some_and(|l| l.contains_key("ephemeral-storage"))
    }) || spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.empty_dir.as_ref().is_some_and(|e| e.size_limit.is_some()))
}

#[derive(Clone, Debug)]
struct Worker {
    /// The API object, shared with the pod loop's view (a sync re-reads every pod of the node).
    pod: Arc<Pod>,
    in_api: bool,
    life: Lifecycle,
    starting: Option<Starting>,
    start_time: Option<Time>,
    /// The status the kubelet holds for the pod: the last one it generated and sent, or the
    /// API's when the worker was created (`None`: send the next one whatever it is).
    status_sent: Option<PodStatus>,
    /// The last send of `status_sent` failed: send it again at the next pass (a running pod)
    /// or the next status sync (a finished one), and send no final DELETE before it is stored.
    status_pending: bool,
    /// The API server's copy disagrees with ours: send ours at the next pass even if it did
    /// not change (the status manager's reconcile).
    force_status: bool,
    /// The API copy the status sync last found to agree with `status_sent` (cleared when the
    /// kubelet holds a new status): while the API still shows that very copy, the sync need
    /// not compare them again.
    agreed_with: Option<Arc<Pod>>,
    /// `finishedAt` of the exit for which a BackOff event was already recorded, per container.
    backoff_noted: BTreeMap<String, Timestamp>,
    /// Current CrashLoopBackOff waits: container → (until, delay).
    backoff_wait: BTreeMap<String, (Timestamp, Duration)>,
    deleted_sent: bool,
    /// When the pod was added to the pod manager (probe workers tick from here).
    added_at: Option<Timestamp>,
    /// Probe workers by container and kind.
    probes: BTreeMap<(String, ProbeKind), ProbeWorker>,
    /// Image errors that keep a container waiting (container → waiting reason and message:
    /// `ErrImageNeverPull`, `ErrImagePull`, `ImagePullBackOff`).
    image_errors: BTreeMap<String, (String, String)>,
    /// The image manager's pull back-off of this pod, by image (upstream keys it by pod UID
    /// and image).
    pull_backoff: BTreeMap<String, crate::images::PullBackoff>,
    /// After a failed pull the pod worker syncs the pod again only at this instant.
    pull_retry_at: Option<Timestamp>,
    /// Killed by the graceful node shutdown, with the pod's phase at the kill: its status
    /// carries the shutdown's phase, reason, message and `DisruptionTarget` from the kill on.
    shutdown_killed: Option<Option<String>>,
    /// Evicted: the eviction message, written with the final status, and whether the status
    /// carries the `DisruptionTarget` condition (node pressure) or not (local storage limits).
    evicted: Option<(String, bool)>,
    /// Usage annotations refused (container → the value), reported once per value.
    usage_errors: BTreeMap<String, String>,
}

impl Worker {
    /// Whether the eviction manager may act on the pod: admitted and running in the API's
    /// view, not being killed.
    fn is_eviction_candidate(&self) -> bool {
        matches!(self.life, Lifecycle::Syncing) && self.in_api
    }

    /// Holds `status` as the one sent (or about to be).
    fn hold_status(&mut self, status: PodStatus) {
        self.status_sent = Some(status);
        self.agreed_with = None;
    }

    /// Whether `status` must be sent: it differs from the one held, the last send failed, or
    /// the status sync asked for it. Clears the last two (the caller sends).
    fn status_needs_send(&mut self, status: &PodStatus) -> bool {
        let forced = std::mem::take(&mut self.force_status);
        let pending = std::mem::take(&mut self.status_pending);
        forced || pending || self.status_sent.as_ref() != Some(status)
    }

    fn ns(&self) -> String {
        self.pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| names::NS_DEFAULT.into())
    }
    fn name(&self) -> String {
        self.pod.metadata.name.clone().unwrap_or_default()
    }
    fn uid(&self) -> String {
        self.pod.metadata.uid.clone().unwrap_or_default()
    }
    fn spec_containers(&self, init: bool) -> Vec<Container> {
        // Only the list asked for is copied, not the whole spec (this runs on every sync).
        match self.pod.spec.as_ref() {
            Some(s) if init => s.init_containers.clone().unwrap_or_default(),
            Some(s) => s.containers.clone(),
            None => Vec::new(),
        }
    }
    fn restart_policy(&self) -> String {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.clone())
            .unwrap_or_else(|| "Always".into())
    }
    fn event(
        &self,
        field: Option<(bool, &str)>,
        type_: &'static str,
        reason: &str,
        message: String,
    ) -> PodWrite {
        PodWrite::Event(PodEvent {
            namespace: self.ns(),
            pod_name: self.name(),
            pod_uid: self.uid(),
            field_path: field.map(|(init, c)| {
                format!(
                    "spec.{}{{{c}}}",
                    if init { "initContainers" } else { "containers" }
                )
            }),
            type_,
            reason: reason.to_string(),
            message,
        })
    }
    /// `name_namespace(uid)` as upstream's `format.Pod`.
    fn format_pod(&self) -> String {
        format!("{}_{}({})", self.name(), self.ns(), self.uid())
    }
}

/// The kubelet's pod-side state; lost when the kubelet process stops (the machine keeps the rest).
#[derive(Clone, Debug)]
pub struct PodManager {
    node_name: String,
    host_ip: String,
    model: RuntimeModel,
    workers: BTreeMap<String, Worker>,
    backoff: CrashLoopBackoff,
    /// Kubelet start and the RNG for the first-probe jitter right after a start.
    probe_jitter: Option<(Timestamp, DetRng)>,
    /// The volume manager: claims attached and mounted before a pod's sandbox starts.
    pub volumes: crate::volumes::VolumeManager,
    /// A graceful node shutdown in progress (`PrepareForShutdown(true)` seen, not cancelled).
    shutdown: Option<ShutdownRun>,
    /// The node conditions the eviction manager reports (admission reads them).
    pressures: Vec<eviction::Pressure>,
    /// What the last pass saw besides the pods: a pass whose other inputs are all unchanged
    /// steps only the pods whose own inputs changed (upstream's pod workers are per pod).
    last_pass: Option<PassMark>,
    /// Pods whose input changed since the last pass outside their API object (a status write
    /// answered or failed, their volumes resolved).
    dirty: BTreeSet<String>,
    /// An input of every pod may have changed (the network, logind, a watch restart, an
    /// eviction, a pressure change): the next pass steps every pod.
    resync_all: bool,
    /// Pod steps taken, for tests that a change re-steps only its pod.
    steps: u64,
}

/// What one pass saw of the inputs shared by all pods.
#[derive(Clone, Debug)]
struct PassMark {
    /// When it ran: every pod instant up to it was handled.
    now: Timestamp,
    /// [`Machine::changes`] after the pass.
    machine_changes: u64,
    /// The volumes the Node showed attached.
    attached: BTreeSet<String>,
}

/// The node shutdown manager's walk through its priority groups, lowest priority first.
#[derive(Clone, Debug, PartialEq)]
struct ShutdownRun {
    table: Vec<PriorityGroup>,
    /// The group being killed (`table.len()` once every group is done).
    group: usize,
    /// When the current group's timer ends (`None`: the group has not started).
    deadline: Option<Timestamp>,
}

fn spec_hash(c: &Container) -> u64 {
    pod_status::fnv64(&serde_json::to_string(c).unwrap_or_default())
}

fn container_id(node: &str, uid: &str, name: &str, attempt: i32, at: Timestamp) -> String {
    let seed = format!("{node}/{uid}/{name}/{attempt}/{}", at.as_nanosecond());
    let h = pod_status::fnv_hex64(&seed);
    let h2 = pod_status::fnv_hex64(&format!("{seed}#"));
    format!("containerd://{h}{h2}{h}{h2}")
}

/// Admission under node pressure (`Evicted`, `The node had condition: [..]. `): critical pods
/// always pass; under memory pressure alone BestEffort pods pass only if they tolerate
/// `node.kubernetes.io/memory-pressure:NoSchedule`.
/// The `image-size` a pod's usage annotation gives a container's image (`None`: the runtime
/// model's default; a refused annotation gives nothing, its event is recorded at the start).
fn image_size(pod: &Pod, container: &str) -> Option<u64> {
    let key = format!("{}{container}", usage::USAGE_ANNOTATION_PREFIX);
    let v = pod.metadata.annotations.as_ref()?.get(&key)?;
    usage::parse_annotation(v).ok()?.image_size
}

fn pressure_admit(pressures: &[eviction::Pressure], pod: &Pod) -> Result<(), String> {
    if pressures.is_empty() {
        return Ok(());
    }
    let spec = pod.spec.clone().unwrap_or_default();
    let critical = spec.priority.unwrap_or(0) >= shutdown::SYSTEM_CRITICAL_PRIORITY;
    let best_effort = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .all(|c| {
            c.resources.as_ref().is_none_or(|r| {
                r.requests.as_ref().is_none_or(|m| m.is_empty())
                    && r.limits.as_ref().is_none_or(|m| m.is_empty())
            })
        });
    let tolerates = spec.tolerations.iter().flatten().any(|t| {
        let key_ok = t
            .key
            .as_deref()
            .is_none_or(|k| k.is_empty() || k == "node.kubernetes.io/memory-pressure");
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        let op_ok = t.operator.as_deref() == Some("Exists")
            || t.key.as_deref() == Some("node.kubernetes.io/memory-pressure");
        key_ok && effect_ok && op_ok
    });
    eviction::admit(pressures, critical, best_effort, tolerates)
}

fn min_opt(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

impl PodManager {
    pub fn new(node_name: &str, host_ip: &str, model: RuntimeModel) -> Self {
        PodManager {
            node_name: node_name.into(),
            host_ip: host_ip.into(),
            model,
            workers: BTreeMap::new(),
            backoff: CrashLoopBackoff::default(),
            probe_jitter: None,
            volumes: Default::default(),
            shutdown: None,
            pressures: Vec::new(),
            last_pass: None,
            dirty: BTreeSet::new(),
            resync_all: false,
            steps: 0,
        }
    }

    /// An input besides the pod objects may have changed (the shell woke for the network,
    /// logind or a watch restart): the next pass steps every pod.
    pub fn resync_all(&mut self) {
        self.resync_all = true;
    }

    /// Pod steps taken so far (each is one pod worker's sync).
    pub fn steps_taken(&self) -> u64 {
        self.steps
    }

    /// The volume manager resolved a pod's claims: that pod is synced again at the next pass.
    pub fn set_volumes_resolved(&mut self, uid: &str, vols: Vec<crate::volumes::Resolved>) {
        self.volumes.set_resolved(uid, vols);
        self.dirty.insert(uid.to_string());
    }

    /// A pod's `terminationGracePeriodSeconds`.
    pub fn termination_grace_period(&self, uid: &str) -> Option<i64> {
        self.workers
            .get(uid)
            .and_then(|w| w.pod.spec.as_ref())
            .and_then(|s| s.termination_grace_period_seconds)
    }

    /// A container's usage spec from its requests and its pod's `usage.klab.dev/<container>`
    /// annotation, and the Warning event of an annotation refused (once per value): the
    /// defaults stand in for a refused annotation at a start.
    fn usage_spec(
        &mut self,
        uid: &str,
        c: &Container,
        init: bool,
    ) -> (usage::UsageSpec, bool, Option<PodWrite>) {
        let Some(w) = self.workers.get_mut(uid) else {
            return (usage::UsageSpec::default(), false, None);
        };
        let key = format!("{}{}", usage::USAGE_ANNOTATION_PREFIX, c.name);
        let value = w
            .pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&key))
            .cloned();
        let res = usage::Resources::of(c);
        match value.as_deref().map(usage::parse_annotation) {
            None => {
                w.usage_errors.remove(&c.name);
                (usage::spec(&res, &Default::default()), false, None)
            }
            Some(Ok(o)) => {
                w.usage_errors.remove(&c.name);
                (usage::spec(&res, &o), false, None)
            }
            Some(Err(e)) => {
                let v = value.unwrap_or_default();
                let event =
                    (w.usage_errors.insert(c.name.clone(), v.clone()) != Some(v)).then(|| {
                        w.event(
                            Some((init, &c.name)),
                            names::EVENT_WARNING,
                            usage::REASON_INVALID_USAGE,
                            format!("{key}: {e}; the usage model is unchanged"),
                        )
                    });
                (usage::spec(&res, &Default::default()), true, event)
            }
        }
    }

    /// Re-anchors the usage model of a pod's running containers whose annotation changed; a
    /// refused annotation changes nothing.
    fn follow_usage(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let Some(w) = self.workers.get(uid) else {
            return;
        };
        if !matches!(w.life, Lifecycle::Syncing) {
            return;
        }
        // The pod is shared: walk its containers in place (this runs at every sync).
        let pod = Arc::clone(&w.pod);
        let spec = pod.spec.as_ref();
        let init_containers = spec
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or(&[]);
        let regular = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
        let containers = init_containers
            .iter()
            .map(|c| (true, c))
            .chain(regular.iter().map(|c| (false, c)));
        for (init, c) in containers {
            let Some(current) = machine
                .pods
                .get(uid)
                .and_then(|p| p.containers.get(&c.name))
                .filter(|rc| rc.is_running())
                .and_then(|rc| rc.usage.as_ref())
            else {
                continue;
            };
            let (spec, refused, event) = self.usage_spec(uid, c, init);
            out.writes.extend(event);
            if refused || spec == current.spec {
                continue;
            }
            let reanchored = current.reanchor(spec, now);
            machine.set_usage(uid, &c.name, reanchored);
        }
        self.follow_volume_usage(uid, now, machine, out);
    }

    /// The contents of a running pod's emptyDir volumes from its `usage.klab.dev/volume.<name>`
    /// annotations: a new or changed value anchors the volume's model now (its contents are
    /// what the value says from now on); a removed one empties it; a refused one changes
    /// nothing and gets one `InvalidUsage` event.
    fn follow_volume_usage(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let Some(w) = self.workers.get_mut(uid) else {
            return;
        };
        let Some(rp) = machine.pods.get_mut(uid) else {
            return;
        };
        // The pod is shared: hold it, not a copy of its annotations (this runs at every sync).
        let pod = Arc::clone(&w.pod);
        let no_annotations = BTreeMap::new();
        let annotations = pod.metadata.annotations.as_ref().unwrap_or(&no_annotations);
        let empty_dirs: Vec<String> = w
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter(|v| v.empty_dir.is_some())
            .map(|v| v.name.clone())
            .collect();
        rp.volume_usage.retain(|v, _| empty_dirs.contains(v));
        for vol in empty_dirs {
            let key = format!("{}{vol}", usage::VOLUME_ANNOTATION_PREFIX);
            let error_key = format!("volume.{vol}");
            let Some(value) = annotations.get(&key) else {
                w.usage_errors.remove(&error_key);
                rp.volume_usage.remove(&vol);
                continue;
            };
            match usage::parse_volume_annotation(value) {
                Ok(spec) => {
                    w.usage_errors.remove(&error_key);
                    if rp.volume_usage.get(&vol).is_none_or(|m| m.spec != spec) {
                        rp.volume_usage
                            .insert(vol, usage::Model::new(spec, now, None));
                    }
                }
                Err(e) => {
                    if w.usage_errors.insert(error_key, value.clone()).as_ref() != Some(value) {
                        out.writes.push(w.event(
                            None,
                            names::EVENT_WARNING,
                            usage::REASON_INVALID_USAGE,
                            format!("{key}: {e}; the usage model is unchanged"),
                        ));
                    }
                }
            }
        }
    }

    /// The local ephemeral storage of each running pod that has a limit to exceed, for
    /// `localStorageEviction` (pods the eviction manager may act on, see
    /// [`Self::eviction_candidates`]), by UID. A pod without an `ephemeral-storage` limit on a
    /// container or a `sizeLimit` on an emptyDir cannot be evicted by that check
    /// (`eviction::local_storage_violation`), so it is not measured: this runs every 10 s over
    /// every pod of the node.
    pub fn local_storage(
        &self,
        machine: &Machine,
        now: Timestamp,
    ) -> Vec<(String, eviction::PodUsage, eviction::PodStorage)> {
        let no_spec = PodSpec::default();
        self.workers
            .iter()
            .filter(|(_, w)| {
                w.is_eviction_candidate()
                    && has_local_storage_limit(w.pod.spec.as_ref().unwrap_or(&no_spec))
            })
            .filter_map(|(uid, w)| {
                let rp = machine.pods.get(uid)?;
                let usage =
                    Self::pod_usage(uid, w, eviction::Signal::NodeFsAvailable, machine, now);
                let spec = w.pod.spec.as_ref().unwrap_or(&no_spec);
                let containers = spec
                    .containers
                    .iter()
                    .map(|c| {
                        let used = rp
                            .containers
                            .get(&c.name)
                            .filter(|rc| rc.is_running())
                            .and_then(|rc| rc.usage.as_ref())
                            .map_or(0, |m| m.ephemeral_storage_at(now));
                        let limit = c
                            .resources
                            .as_ref()
                            .and_then(|r| r.limits.as_ref())
                            .and_then(|l| l.get("ephemeral-storage"))
                            .and_then(|q| crate::quantity::bytes(&q.0).map(|b| (b, q.0.clone())));
                        (c.name.clone(), used, limit)
                    })
                    .collect();
                let empty_dirs =
                    spec.volumes
                        .iter()
                        .flatten()
                        .filter_map(|v| {
                            let ed = v.empty_dir.as_ref()?;
                            let used = rp
                                .volume_usage
                                .get(&v.name)
                                .map_or(0, |m| m.ephemeral_storage_at(now));
                            let limit = ed.size_limit.as_ref().and_then(|q| {
                                crate::quantity::bytes(&q.0).map(|b| (b, q.0.clone()))
                            });
                            Some((v.name.clone(), used, limit))
                        })
                        .collect();
                Some((
                    uid.clone(),
                    usage,
                    eviction::PodStorage {
                        containers,
                        empty_dirs,
                    },
                ))
            })
            .collect()
    }

    /// The eviction manager's current conditions, for admission.
    pub fn set_pressures(&mut self, pressures: Vec<eviction::Pressure>) {
        if self.pressures != pressures {
            self.resync_all = true;
        }
        self.pressures = pressures;
    }

    /// The pods an eviction may pick from (admitted and running, not being killed), with what
    /// the ranking needs: each container's usage of the signal's resource at `now` from the
    /// machine's usage model (a container that is not running uses nothing).
    pub fn eviction_candidates(
        &self,
        signal: eviction::Signal,
        machine: &Machine,
        now: Timestamp,
    ) -> Vec<(String, eviction::PodUsage)> {
        self.workers
            .iter()
            .filter(|(_, w)| w.is_eviction_candidate())
            .map(|(uid, w)| (uid.clone(), Self::pod_usage(uid, w, signal, machine, now)))
            .collect()
    }

    /// One candidate's usage of `signal`'s resource (see [`Self::eviction_candidates`]).
    fn pod_usage(
        uid: &str,
        w: &Worker,
        signal: eviction::Signal,
        machine: &Machine,
        now: Timestamp,
    ) -> eviction::PodUsage {
        let resource = signal.resource();
        // A ranking looks at every pod of the node: read its spec and annotations in place.
        let no_spec = PodSpec::default();
        let no_annotations = BTreeMap::new();
        let spec = w.pod.spec.as_ref().unwrap_or(&no_spec);
        let containers = spec
            .containers
            .iter()
            .map(|c| {
                let request = c
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get(resource))
                    .and_then(|q| crate::quantity::bytes(&q.0))
                    .unwrap_or(0);
                let model = machine
                    .pods
                    .get(uid)
                    .and_then(|p| p.containers.get(&c.name))
                    .filter(|rc| rc.is_running())
                    .and_then(|rc| rc.usage.as_ref());
                let used = model.map_or(0, |m| match signal {
                    eviction::Signal::MemoryAvailable => m.memory_at(now),
                    eviction::Signal::PidAvailable => m.spec.pids,
                    eviction::Signal::NodeFsAvailable | eviction::Signal::ImageFsAvailable => {
                        m.ephemeral_storage_at(now)
                    }
                    // klab models no inode use per container.
                    eviction::Signal::NodeFsInodesFree | eviction::Signal::ImageFsInodesFree => 0,
                });
                (c.name.clone(), Some(used), request)
            })
            .collect();
        let annotations = w
            .pod
            .metadata
            .annotations
            .as_ref()
            .unwrap_or(&no_annotations);
        // The disk signals also rank by the pod's emptyDir contents.
        let local_volumes = match signal {
            eviction::Signal::NodeFsAvailable | eviction::Signal::ImageFsAvailable => {
                machine.pods.get(uid).map_or(0, |p| {
                    p.volume_usage
                        .values()
                        .fold(0u64, |a, m| a.saturating_add(m.ephemeral_storage_at(now)))
                })
            }
            _ => 0,
        };
        eviction::PodUsage {
            name: format!("{}/{}", w.ns(), w.name()),
            priority: spec.priority.unwrap_or(0),
            is_static: annotations
                .get("kubernetes.io/config.source")
                .is_some_and(|s| s != "api")
                || annotations.contains_key("kubernetes.io/config.mirror"),
            containers,
            local_volumes,
        }
    }

    /// Evicts one pod: the `Evicted` event now, a kill with `grace`, and the final status
    /// `Failed` / `Evicted` / `message`, with `DisruptionTarget=True` (`TerminationByKubelet`)
    /// when `disruption_target` (node-pressure evictions; local-storage ones carry none).
    pub fn evict(
        &mut self,
        uid: &str,
        grace: i64,
        message: String,
        disruption_target: bool,
        now: Timestamp,
        machine: &mut Machine,
    ) -> SyncOutput {
        let mut out = SyncOutput::default();
        let Some(w) = self.workers.get_mut(uid) else {
            return out;
        };
        if !matches!(w.life, Lifecycle::Syncing) {
            return out;
        }
        self.resync_all = true;
        let w = self.workers.get_mut(uid).expect("worker");
        w.evicted = Some((message.clone(), disruption_target));
        out.writes.push(w.event(
            None,
            names::EVENT_WARNING,
            eviction::REASON_EVICTED,
            message,
        ));
        let grace = effective_grace(0, None, Some(grace), None);
        self.begin_termination(uid, grace, now, machine, &mut out);
        self.step(uid, now, machine, &mut out);
        out.next_wake = min_opt(machine.next_transition(), self.next_due(machine, now));
        out
    }

    /// `PrepareForShutdown(true)`: from now on every new pod is rejected and the active pods
    /// are killed group by group (`table`: the effective priority table, sorted, non-empty).
    pub fn begin_shutdown(&mut self, table: Vec<PriorityGroup>) {
        if self.shutdown.is_none() && !table.is_empty() {
            self.resync_all = true;
            self.shutdown = Some(ShutdownRun {
                table,
                group: 0,
                deadline: None,
            });
        }
    }

    /// `PrepareForShutdown(false)`: admission opens again; pods already killed stay killed.
    pub fn cancel_shutdown(&mut self) {
        if self.shutdown.take().is_some() {
            self.resync_all = true;
        }
    }

    /// Whether a node shutdown is in progress (`ShutdownStatus()` is an error).
    pub fn shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    /// Whether every shutdown group is done: the inhibitor lock can be released.
    pub fn shutdown_complete(&self) -> bool {
        self.shutdown
            .as_ref()
            .is_some_and(|r| r.group >= r.table.len())
    }

    /// The shutdown manager's step at `now`: starts the next group when the current one is over
    /// (all its pods terminated, or its timer ran out), skipping empty groups, and kills the
    /// started group's pods with their override grace. Returns whether it killed any pod.
    fn shutdown_step(
        &mut self,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) -> bool {
        let mut killed = false;
        loop {
            let Some(run) = self.shutdown.clone() else {
                return killed;
            };
            let Some(group) = run.table.get(run.group).copied() else {
                return killed;
            };
            let members: Vec<String> = self
                .workers
                .iter()
                .filter(|(_, w)| matches!(w.life, Lifecycle::Syncing | Lifecycle::Terminating(_)))
                .filter(|(_, w)| {
                    let priority = w.pod.spec.as_ref().and_then(|s| s.priority);
                    shutdown::group_index(&run.table, priority) == run.group
                })
                .map(|(k, _)| k.clone())
                .collect();
            let next = |m: &mut Self| {
                if let Some(r) = m.shutdown.as_mut() {
                    r.group = r.group.saturating_add(1);
                    r.deadline = None;
                }
            };
            match run.deadline {
                None if members.is_empty() => next(self),
                None => {
                    let secs = u64::try_from(group.shutdown_grace_period_seconds).unwrap_or(0);
                    if let Some(r) = self.shutdown.as_mut() {
                        r.deadline = Some(after(now, Duration::from_secs(secs)));
                    }
                    for uid in members {
                        let w = &self.workers[&uid];
                        if !matches!(w.life, Lifecycle::Syncing) {
                            continue;
                        }
                        let tgps = w
                            .pod
                            .spec
                            .as_ref()
                            .and_then(|s| s.termination_grace_period_seconds);
                        let grace = effective_grace(
                            0,
                            None,
                            Some(shutdown::override_grace(
                                group.shutdown_grace_period_seconds,
                                tgps,
                            )),
                            tgps,
                        );
                        let w = self.workers.get_mut(&uid).expect("worker");
                        w.shutdown_killed =
                            Some(w.pod.status.as_ref().and_then(|s| s.phase.clone()));
                        self.begin_termination(&uid, grace, now, machine, out);
                        killed = true;
                    }
                    return killed;
                }
                Some(deadline) if members.is_empty() || deadline <= now => next(self),
                Some(_) => return killed,
            }
        }
    }

    /// Probe workers created within one period of `kubelet_start` delay their first tick by a
    /// random fraction of the period (upstream's start-up jitter).
    pub fn with_probe_jitter(mut self, kubelet_start: Timestamp, rng: DetRng) -> Self {
        self.probe_jitter = Some((kubelet_start, rng));
        self
    }

    /// The shell reports that a status PATCH failed: it will be re-sent at the next sync.
    pub fn status_write_failed(&mut self, uid: &str) {
        if let Some(w) = self.workers.get_mut(uid) {
            w.status_pending = true;
            self.dirty.insert(uid.to_string());
        }
    }

    /// Whether the last status PATCH of the pod failed and was not yet sent again: its final
    /// DELETE must wait (upstream deletes only once the API shows the terminal phase).
    pub fn status_pending(&self, uid: &str) -> bool {
        self.workers.get(uid).is_some_and(|w| w.status_pending)
    }

    /// The shell reports that the final DELETE was not done (the API server could not be
    /// reached, or the status it follows is not stored yet): it is sent again at a later pass.
    pub fn delete_failed(&mut self, uid: &str) {
        if let Some(w) = self.workers.get_mut(uid) {
            w.deleted_sent = false;
            self.dirty.insert(uid.to_string());
        }
    }

    /// The shell reports that the API server stored our PATCH.
    pub fn status_written(&mut self, uid: &str) {
        if self.workers.contains_key(uid) {
            self.dirty.insert(uid.to_string());
        }
    }

    /// The status manager's periodic sync (`syncBatch(all)`, every [`STATUS_SYNC_PERIOD`]):
    /// every pod the kubelet holds a status for (running, terminating, or finished and still in
    /// the API) whose API copy disagrees with it ([`pod_status::agrees_by_kubelet`]), or whose
    /// last write failed, has it sent at the next pass, changed or not. This is what gives a pod
    /// back the `Ready=True` that the node lifecycle controller took while the node was
    /// unreachable, and what tells the API of a pod that ended (evicted, say) while the API
    /// server could not be reached. Returns the pods it concerns.
    pub fn reconcile_statuses(&mut self, api_pods: &BTreeMap<String, Arc<Pod>>) -> Vec<String> {
        let mut due = Vec::new();
        for (uid, w) in self.workers.iter_mut() {
            let running = matches!(w.life, Lifecycle::Syncing | Lifecycle::Terminating(_));
            let ended = matches!(w.life, Lifecycle::Finished | Lifecycle::Rejected);
            if !w.in_api || !(running || ended) {
                continue;
            }
            let Some(api) = api_pods.get(uid) else {
                continue;
            };
            let agrees = match (&w.status_sent, &api.status) {
                // A running pod sends whatever it generates next; an ended one has nothing to
                // send.
                (None, _) => ended,
                (Some(_), _) if w.status_pending => false,
                // Neither side changed since they last agreed.
                (Some(_), _) if w.agreed_with.as_ref().is_some_and(|a| Arc::ptr_eq(a, api)) => true,
                (Some(held), Some(api)) => pod_status::agrees_by_kubelet(api, held),
                (Some(held), None) => pod_status::agrees_by_kubelet(&PodStatus::default(), held),
            };
            w.agreed_with = (agrees && w.status_sent.is_some()).then(|| api.clone());
            if !agrees {
                w.force_status = true;
                self.dirty.insert(uid.clone());
                due.push(uid.clone());
            }
        }
        due
    }

    /// `status.volumesInUse`: the attachable volumes of the pods not yet stopped.
    pub fn volumes_in_use(&self) -> Vec<String> {
        self.volumes.in_use(&self.active_uids())
    }

    /// UIDs of pods the kubelet currently runs (admitted, not finished).
    pub fn active_uids(&self) -> Vec<String> {
        self.workers
            .iter()
            .filter(|(_, w)| matches!(w.life, Lifecycle::Syncing | Lifecycle::Terminating(_)))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// One pass at `now`. `api_pods`: the pods bound to this node as last seen (by UID); `node`:
    /// this kubelet's Node as last seen (for admission).
    ///
    /// Each pod's worker is synced when its own input changed: its API object, a timer of its
    /// own, its status write answered. Anything shared by all pods (a change to the machine
    /// between passes, the network, logind, the attached volumes, a shutdown, an eviction or a
    /// pressure change) syncs them all, as does the first pass. A pod whose inputs did not change would be stepped to the very
    /// state it has, so skipping it is exact; debug builds check this on every partial pass
    /// against a full pass on a copy.
    pub fn sync(
        &mut self,
        now: Timestamp,
        machine: &mut Machine,
        api_pods: &BTreeMap<String, Arc<Pod>>,
        node: &Node,
        alloc: &Allocatable,
        _cfg: &KubeletConfig,
    ) -> SyncOutput {
        if machine.frozen() || !machine.powered {
            return SyncOutput::default();
        }
        let attached: BTreeSet<String> = node
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .into_iter()
            .flatten()
            .map(|v| v.name.clone())
            .collect();
        let only = self.changed_pods(now, machine, api_pods, &attached);
        machine.advance(now);
        #[cfg(debug_assertions)]
        let copy = only.as_ref().map(|_| (self.dry_copy(), machine.clone()));
        let out = self.pass(
            now,
            machine,
            api_pods,
            node,
            alloc,
            &attached,
            only.as_ref(),
        );
        #[cfg(debug_assertions)]
        if let Some((mut full, mut full_machine)) = copy {
            let full_out = full.pass(
                now,
                &mut full_machine,
                api_pods,
                node,
                alloc,
                &attached,
                None,
            );
            assert_eq!(
                (&out, self.state_debug(), format!("{machine:?}")),
                (&full_out, full.state_debug(), format!("{full_machine:?}")),
                "a partial pass at {now} over {only:?} differs from a full pass"
            );
        }
        self.last_pass = Some(PassMark {
            now,
            machine_changes: machine.changes,
            attached,
        });
        self.dirty.clear();
        self.resync_all = false;
        out
    }

    /// The pods whose own input changed since the last pass, or `None` when every pod must be
    /// synced (see [`Self::sync`]). Called before the machine advances to `now`.
    fn changed_pods(
        &self,
        now: Timestamp,
        machine: &Machine,
        api_pods: &BTreeMap<String, Arc<Pod>>,
        attached: &BTreeSet<String>,
    ) -> Option<BTreeSet<String>> {
        let last = self.last_pass.as_ref()?;
        if self.resync_all
            || self.shutdown.is_some()
            || self.volumes.any_waiting()
            || last.machine_changes != machine.changes
            || last.attached != *attached
            || last.now > now
        {
            return None;
        }
        let mut changed: BTreeSet<String> = self
            .dirty
            .iter()
            .filter(|uid| self.workers.contains_key(*uid))
            .cloned()
            .collect();
        // A pod instant after the last pass and up to now: its worker's timer fired.
        let fired = |t: Timestamp| last.now < t && t <= now;
        for (uid, w) in &self.workers {
            if self.worker_instants(uid, w, machine).any(fired)
                || machine
                    .pods
                    .get(uid)
                    .and_then(|rp| rp.next_transition())
                    .is_some_and(fired)
            {
                changed.insert(uid.clone());
            }
        }
        for (uid, pod) in api_pods {
            match self.workers.get(uid) {
                Some(w) if w.in_api && Arc::ptr_eq(&w.pod, pod) => {}
                _ => {
                    changed.insert(uid.clone());
                }
            }
        }
        for (uid, w) in &self.workers {
            if w.in_api && !api_pods.contains_key(uid) {
                changed.insert(uid.clone());
            }
        }
        Some(changed)
    }

    /// A copy whose probe jitter draws from a snapshot of the random sequence, not from it.
    #[cfg(debug_assertions)]
    fn dry_copy(&self) -> Self {
        let mut copy = self.clone();
        if let Some((_, rng)) = copy.probe_jitter.as_mut() {
            *rng = rng.snapshot();
        }
        copy
    }

    /// Everything a pass may change, for comparing a partial pass with a full one.
    #[cfg(debug_assertions)]
    fn state_debug(&self) -> String {
        format!(
            "{:?} {:?} {:?} {:?} {:?}",
            self.workers, self.backoff, self.volumes, self.shutdown, self.pressures
        )
    }

    /// The pass itself: every pod, or only the pods in `only`.
    #[allow(clippy::too_many_arguments)]
    fn pass(
        &mut self,
        now: Timestamp,
        machine: &mut Machine,
        api_pods: &BTreeMap<String, Arc<Pod>>,
        node: &Node,
        alloc: &Allocatable,
        attached: &BTreeSet<String>,
        only: Option<&BTreeSet<String>>,
    ) -> SyncOutput {
        let mut out = SyncOutput::default();
        let selected = |uid: &String| only.is_none_or(|o| o.contains(uid));
        self.volumes.set_attached(attached.clone());

        // 1. Workers follow the API objects.
        for (uid, pod) in api_pods.iter().filter(|(uid, _)| selected(uid)) {
            match self.workers.get_mut(uid) {
                Some(w) => {
                    // Someone else writing the status (a controller marking Ready=False) is
                    // repaired by the next status sync (`reconcile_statuses`), not here: a pod
                    // update that changes no input of the kubelet's generates the status it
                    // holds, which it does not send again.
                    w.pod = pod.clone();
                    w.in_api = true;
                }
                None => {
                    self.workers.insert(
                        uid.clone(),
                        Worker {
                            pod: pod.clone(),
                            in_api: true,
                            life: Lifecycle::New,
                            starting: None,
                            start_time: pod.status.as_ref().and_then(|s| s.start_time.clone()),
                            status_sent: pod.status.clone(),
                            status_pending: false,
                            force_status: false,
                            agreed_with: None,
                            backoff_noted: BTreeMap::new(),
                            backoff_wait: BTreeMap::new(),
                            deleted_sent: false,
                            added_at: None,
                            probes: BTreeMap::new(),
                            image_errors: BTreeMap::new(),
                            pull_backoff: BTreeMap::new(),
                            pull_retry_at: None,
                            shutdown_killed: None,
                            evicted: None,
                            usage_errors: BTreeMap::new(),
                        },
                    );
                }
            }
        }
        for (uid, w) in self.workers.iter_mut() {
            if !api_pods.contains_key(uid) {
                w.in_api = false;
            }
        }

        // Usage annotations changed since a container started re-anchor its model now.
        let uids: Vec<String> = self
            .workers
            .keys()
            .filter(|k| selected(k))
            .cloned()
            .collect();
        for uid in &uids {
            self.follow_usage(uid, now, machine, &mut out);
        }

        // 2. Admission of new pods in creation order.
        let mut new: Vec<String> = self
            .workers
            .iter()
            .filter(|(_, w)| w.life == Lifecycle::New)
            .map(|(k, _)| k.clone())
            .collect();
        new.sort_by_key(|uid| {
            let p = &self.workers[uid].pod;
            (
                p.metadata.creation_timestamp.clone().map(|t| t.0),
                p.metadata.namespace.clone(),
                p.metadata.name.clone(),
            )
        });
        for uid in new {
            self.admit_one(&uid, now, machine, node, alloc, &mut out);
        }

        // 3. Each worker, in namespace/name order.
        let mut order: Vec<(String, String, String)> = self
            .workers
            .iter()
            .filter(|(uid, _)| selected(uid))
            .map(|(uid, w)| (w.ns(), w.name(), uid.clone()))
            .collect();
        order.sort();
        // The shutdown manager kills group by group; a group that ends within this pass lets the
        // next one start at once, so the pass is repeated for the newly killed pods.
        for _ in 0..=self.shutdown.as_ref().map_or(0, |r| r.table.len()) {
            self.shutdown_step(now, machine, &mut out);
            for (_, _, uid) in &order {
                self.step(uid, now, machine, &mut out);
            }
            let before = self.shutdown.clone();
            if !self.shutdown_step(now, machine, &mut out) && before == self.shutdown {
                break;
            }
        }

        // 4. Orphaned runtime pods: stop with grace 1 (⇒ 2 s), no preStop; remove when stopped.
        let orphans: Vec<String> = machine
            .pods
            .keys()
            .filter(|uid| !self.workers.contains_key(*uid))
            .cloned()
            .collect();
        for uid in orphans {
            let names_: Vec<String> = machine.pods[&uid]
                .containers
                .values()
                .filter(|c| c.is_running())
                .map(|c| c.name.clone())
                .collect();
            for c in &names_ {
                let already = matches!(&machine.pods[&uid].containers[c].state, RtState::Running { stopping: Some(s), .. } if s.kill_at.is_some());
                if !already {
                    machine.stop_container(
                        &uid,
                        c,
                        Duration::from_secs(crate::config::MINIMUM_GRACE_PERIOD_SECONDS as u64),
                        self.model.sigterm_exit,
                        now,
                    );
                }
            }
            machine.advance(now);
            if !machine.pods[&uid].any_running() {
                machine.remove_pod(&uid);
            }
        }

        // 5. Forget finished workers whose API object is gone.
        let gone: Vec<String> = self
            .workers
            .iter()
            .filter(|(_, w)| {
                !w.in_api
                    && matches!(
                        w.life,
                        Lifecycle::Finished | Lifecycle::Rejected | Lifecycle::New
                    )
            })
            .map(|(k, _)| k.clone())
            .collect();
        for uid in gone {
            self.workers.remove(&uid);
            self.volumes.forget(&uid);
            self.backoff.forget_prefix(&format!("{uid}/"));
        }

        out.next_wake = min_opt(
            min_opt(machine.next_transition(), self.next_due(machine, now)),
            self.volumes.next_due(now),
        );
        out
    }

    fn admit_one(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &Machine,
        node: &Node,
        alloc: &Allocatable,
        out: &mut SyncOutput,
    ) {
        let pod = self.workers[uid].pod.clone();
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        if is_terminal_phase(phase.as_deref())
            && !machine.pods.get(uid).is_some_and(|p| p.any_running())
        {
            // Terminal pods are remembered as terminated and not started again; a terminal pod
            // still carrying a deletion timestamp gets its final DELETE.
            let w = self.workers.get_mut(uid).expect("worker exists");
            w.life = Lifecycle::Finished;
            if pod.metadata.deletion_timestamp.is_some() && !w.deleted_sent {
                w.deleted_sent = true;
                out.writes.push(PodWrite::Delete {
                    namespace: w.ns(),
                    name: w.name(),
                    uid: uid.to_string(),
                });
            }
            return;
        }
        let others: Vec<Arc<Pod>> = self
            .workers
            .iter()
            .filter(|(k, w)| {
                *k != uid && matches!(w.life, Lifecycle::Syncing | Lifecycle::Terminating(_))
            })
            .map(|(_, w)| w.pod.clone())
            .collect();
        let refs: Vec<&Pod> = others.iter().map(|p| p.as_ref()).collect();
        let result: Result<(), Rejection> =
            if self.shutdown.is_some() && !machine.pods.contains_key(uid) {
                Err(Rejection {
                    reason: shutdown::REJECT_REASON.into(),
                    message: shutdown::REJECT_MESSAGE.into(),
                })
            } else if let Err(message) = if machine.pods.contains_key(uid) {
                Ok(())
            } else {
                pressure_admit(&self.pressures, &pod)
            } {
                Err(Rejection {
                    reason: eviction::REASON_EVICTED.into(),
                    message,
                })
            } else if machine.pods.contains_key(uid) || pod.metadata.deletion_timestamp.is_some() {
                // Already running here (kubelet restart) or being deleted: nothing to decide.
                Ok(())
            } else {
                admit(&pod, &refs, node, alloc)
            };
        let w = self.workers.get_mut(uid).expect("worker exists");
        match result {
            Ok(()) => {
                w.life = Lifecycle::Syncing;
                w.added_at = Some(now);
                if w.start_time.is_none() {
                    w.start_time = Some(Time(klab_api::clock::truncate_to_second(now)));
                }
            }
            Err(r) => {
                w.life = Lifecycle::Rejected;
                let status =
                    pod_status::rejected_status(&pod.status.clone().unwrap_or_default(), &r);
                out.writes
                    .push(w.event(None, names::EVENT_WARNING, &r.reason, r.message.clone()));
                w.hold_status(status.clone());
                out.writes.push(PodWrite::Status {
                    namespace: w.ns(),
                    name: w.name(),
                    uid: uid.to_string(),
                    status: Box::new(status),
                });
            }
        }
    }

    /// Every instant at which a worker's own timers fire (pull or create done, back-off over,
    /// pull retry, probe tick, preStop over, sandbox ready), past or future.
    fn worker_instants<'a>(
        &'a self,
        uid: &'a str,
        w: &'a Worker,
        machine: &'a Machine,
    ) -> impl Iterator<Item = Timestamp> + 'a {
        let stage = w.starting.as_ref().map(|s| match s.stage {
            Stage::Pulling { until } | Stage::Creating { until } => until,
        });
        let backoff = w.backoff_wait.values().map(|(until, _)| *until);
        let probes = w.probes.values().map(|p| p.next_wake());
        let hooks = match &w.life {
            Lifecycle::Terminating(t) => Some(t.hooks.values().map(|h| h.sigterm_at)),
            _ => None,
        };
        let sandbox = machine
            .pods
            .get(uid)
            .and_then(|p| p.sandbox.as_ref())
            .filter(|sb| sb.boot_id == machine.boot_id)
            .map(|sb| sb.ready_at);
        stage
            .into_iter()
            .chain(backoff)
            .chain(w.pull_retry_at)
            .chain(probes)
            .chain(hooks.into_iter().flatten())
            .chain(sandbox)
    }

    fn next_due(&self, machine: &Machine, now: Timestamp) -> Option<Timestamp> {
        let mut best = None;
        for (uid, w) in &self.workers {
            if let Some(s) = &w.starting {
                best = min_opt(
                    best,
                    Some(match s.stage {
                        Stage::Pulling { until } | Stage::Creating { until } => until,
                    }),
                );
            }
            for (until, _) in w.backoff_wait.values() {
                best = min_opt(best, Some(*until));
            }
            // Only a retry still ahead: a passed one must not hide the next real instant.
            best = min_opt(best, w.pull_retry_at.filter(|t| *t > now));
            if matches!(w.life, Lifecycle::Syncing) {
                for ((c, _), p) in &w.probes {
                    let running = machine
                        .pods
                        .get(uid)
                        .and_then(|rp| rp.containers.get(c))
                        .is_some_and(|r| r.is_running());
                    if running {
                        best = min_opt(best, Some(p.next_wake()));
                    }
                }
            }
            if let Lifecycle::Terminating(t) = &w.life {
                for h in t.hooks.values() {
                    best = min_opt(best, Some(h.sigterm_at));
                }
            }
            if let Some(sb) = machine.pods.get(uid).and_then(|p| p.sandbox.as_ref())
                && sb.boot_id == machine.boot_id
                && sb.ready_at > now
                && matches!(w.life, Lifecycle::Syncing)
            {
                best = min_opt(best, Some(sb.ready_at));
            }
        }
        // The shutdown manager moves on when the current group's timer ends.
        best = min_opt(best, self.shutdown.as_ref().and_then(|r| r.deadline));
        // Only future instants: anything already due was handled by this pass.
        best.filter(|t| *t > now)
    }

    fn step(&mut self, uid: &str, now: Timestamp, machine: &mut Machine, out: &mut SyncOutput) {
        self.steps = self.steps.wrapping_add(1);
        // Several transitions can be due at one instant (exit 1, restart at once): iterate until stable.
        // The state before is copied once; after the step it is compared in place.
        for _ in 0..16 {
            let before = (
                self.workers
                    .get(uid)
                    .map(|w| (w.life.clone(), w.starting.clone())),
                machine.pods.get(uid).cloned(),
            );
            self.step_once(uid, now, machine, out);
            machine.advance(now);
            let worker_same = match (self.workers.get(uid), &before.0) {
                (Some(w), Some((life, starting))) => w.life == *life && w.starting == *starting,
                (None, None) => true,
                _ => false,
            };
            if worker_same && machine.pods.get(uid) == before.1.as_ref() {
                break;
            }
        }
        self.write_status(uid, now, machine, out);
    }

    fn step_once(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let Some(w) = self.workers.get(uid) else {
            return;
        };
        match w.life.clone() {
            Lifecycle::New => {}
            Lifecycle::Rejected | Lifecycle::Finished => {
                let w = self.workers.get_mut(uid).expect("worker");
                // The status sync found the API disagreeing with the final status held (or its
                // send failed): send it again as it is.
                if w.in_api
                    && std::mem::take(&mut w.force_status)
                    && let Some(status) = w.status_sent.clone()
                {
                    w.status_pending = false;
                    out.writes.push(PodWrite::Status {
                        namespace: w.ns(),
                        name: w.name(),
                        uid: uid.to_string(),
                        status: Box::new(status),
                    });
                }
                // A terminal pod deleted later (a finished Job pod, a rejected pod): nothing runs,
                // so the status manager can send the final DELETE at once.
                if w.in_api
                    && w.pod.metadata.deletion_timestamp.is_some()
                    && !w.deleted_sent
                    && !w.status_pending
                {
                    w.deleted_sent = true;
                    out.writes.push(PodWrite::Delete {
                        namespace: w.ns(),
                        name: w.name(),
                        uid: uid.to_string(),
                    });
                }
            }
            Lifecycle::Syncing => {
                let deletion = w.pod.metadata.deletion_timestamp.is_some();
                if deletion || !w.in_api {
                    let dgp = if w.in_api {
                        w.pod.metadata.deletion_grace_period_seconds
                    } else {
                        Some(1)
                    };
                    let tgps = w
                        .pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.termination_grace_period_seconds);
                    let g = effective_grace(0, dgp, None, tgps);
                    self.begin_termination(uid, g, now, machine, out);
                } else if self.pod_is_done(uid, machine) {
                    // SyncPod reports the pod terminal: all containers finished for good.
                    self.begin_termination(uid, 1, now, machine, out);
                } else {
                    self.run_probes(uid, now, machine, out);
                    self.sync_pod(uid, now, machine, out);
                }
            }
            Lifecycle::Terminating(term) => {
                let w = &self.workers[uid];
                if w.in_api && w.pod.metadata.deletion_timestamp.is_some() {
                    let g = effective_grace(
                        term.grace,
                        w.pod.metadata.deletion_grace_period_seconds,
                        None,
                        None,
                    );
                    if g < term.grace {
                        // A shorter grace restarts the termination with the new budget.
                        self.restart_termination(uid, g, now, machine);
                    }
                }
                self.progress_termination(uid, now, machine, out);
            }
        }
    }

    /// Whether the restart policy lets nothing run any more (Never / OnFailure with successes).
    fn pod_is_done(&self, uid: &str, machine: &Machine) -> bool {
        let w = &self.workers[uid];
        let policy = w.restart_policy();
        let Some(rp) = machine.pods.get(uid) else {
            return false;
        };
        let sandbox_ok = machine.sandbox_ready(uid, Timestamp::MAX)
            || rp
                .sandbox
                .as_ref()
                .is_some_and(|s| s.boot_id == machine.boot_id);
        let init = w.spec_containers(true);
        let regular = w.spec_containers(false);
        if policy == "Never" {
            let init_failed = init.iter().any(|c| matches!(rp.containers.get(&c.name).map(|r| &r.state), Some(RtState::Exited(t)) if t.exit_code != 0));
            if init_failed {
                return true;
            }
            if !sandbox_ok && !rp.containers.is_empty() {
                // Never pods whose sandbox died (reboot) are not restarted.
                return !rp.any_running();
            }
        }
        if policy == "Always" {
            return false;
        }

        !regular.is_empty()
            && regular
                .iter()
                .all(|c| match rp.containers.get(&c.name).map(|r| &r.state) {
                    Some(RtState::Exited(t)) => policy == "Never" || t.exit_code == 0,
                    _ => false,
                })
    }

    /// Startup, readiness and liveness probe answers due by `now`; a liveness or startup failure
    /// stops the container.
    fn run_probes(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let Some(w) = self.workers.get(uid) else {
            return;
        };
        let added = w.added_at.unwrap_or(now);
        let containers = w.spec_containers(false);
        let pod_tgps = w
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds);
        // The address probes go to (hostNetwork pods share the node's).
        let host_network = w
            .pod
            .spec
            .as_ref()
            .and_then(|sp| sp.host_network)
            .unwrap_or(false);
        let pod_ip = if host_network {
            self.host_ip.clone()
        } else {
            machine
                .pods
                .get(uid)
                .map(|p| p.pod_ip.clone())
                .unwrap_or_default()
        };
        for c in containers {
            let inst = machine
                .pods
                .get(uid)
                .and_then(|p| p.containers.get(&c.name))
                .map(|r| match &r.state {
                    RtState::Running { started_at, .. } => Instance {
                        container_id: r.container_id.clone(),
                        started_at: *started_at,
                        finished_at: None,
                    },
                    RtState::Exited(t) => Instance {
                        container_id: r.container_id.clone(),
                        started_at: t.started_at,
                        finished_at: Some(t.finished_at),
                    },
                });
            // Without a startup probe a container counts as started when it starts; with one,
            // when that probe succeeded (the startup worker runs first and says when).
            let mut started_since = inst.as_ref().map(|i| i.started_at);
            for (kind, probe) in [
                (ProbeKind::Startup, &c.startup_probe),
                (ProbeKind::Readiness, &c.readiness_probe),
                (ProbeKind::Liveness, &c.liveness_probe),
            ] {
                let Some(probe) = probe else { continue };
                let Some(target) = Target::of(probe, &c, &pod_ip) else {
                    continue;
                };
                let params = ProbeParams::from_probe(probe);
                // A scripted answer (the pod's annotation, a scenario's `probe` step) overrides
                // the modelled one.
                let scripted = crate::probes::scripted_result(
                    self.workers[uid].pod.metadata.annotations.as_ref(),
                    &c.name,
                    kind,
                );
                let ans = crate::probes::answer(&target, scripted.as_ref(), params.timeout);
                let first = match &self.probe_jitter {
                    Some((start, rng)) if now.duration_since(*start) < sd(params.period) => {
                        after(added, params.period.mul_f64(rng.unit()))
                    }
                    _ => added,
                };
                let w = self.workers.get_mut(uid).expect("worker");
                let worker = w
                    .probes
                    .entry((c.name.clone(), kind))
                    .or_insert_with(|| ProbeWorker::new(kind, first));
                let outcomes = worker.advance(&params, &ans, now, inst.as_ref(), started_since);
                if kind == ProbeKind::Startup {
                    started_since = match &inst {
                        Some(i) if worker.succeeded_for(&i.container_id) => worker.success_at,
                        _ => None,
                    };
                }
                let w = &self.workers[uid];
                for o in outcomes {
                    if o.failed {
                        out.writes.push(w.event(
                            Some((false, &c.name)),
                            names::EVENT_WARNING,
                            "Unhealthy",
                            format!("{} probe failed: {}", kind.label(), ans.output),
                        ));
                    }
                    if o.warned {
                        out.writes.push(w.event(
                            Some((false, &c.name)),
                            names::EVENT_WARNING,
                            "ProbeWarning",
                            format!("{} probe warning: {}", kind.label(), ans.output),
                        ));
                    }
                    if kind != ProbeKind::Readiness
                        && o.flipped_to == Some(false)
                        && machine
                            .pods
                            .get(uid)
                            .and_then(|p| p.containers.get(&c.name))
                            .is_some_and(|r| r.is_running())
                    {
                        out.writes.push(w.event(
                            Some((false, &c.name)),
                            names::EVENT_NORMAL,
                            "Killing",
                            format!(
                                "Container {} failed {} probe, will be restarted",
                                c.name,
                                kind.key()
                            ),
                        ));
                        // Grace: the probe's own terminationGracePeriodSeconds, else the pod's
                        // (N-35); the SIGTERM→SIGKILL floor applies.
                        let g = params
                            .termination_grace_period_seconds
                            .or(pod_tgps)
                            .unwrap_or(names::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
                        let plan = kill_plan(g, None);
                        machine.stop_container(
                            uid,
                            &c.name,
                            plan.kill_after,
                            self.model.sigterm_exit,
                            o.at,
                        );
                    }
                }
            }
        }
    }

    fn sync_pod(&mut self, uid: &str, now: Timestamp, machine: &mut Machine, out: &mut SyncOutput) {
        let w = self.workers.get(uid).expect("worker");
        let (ns, name) = (w.ns(), w.name());
        // Sandbox.
        if !machine.sandbox_ready(uid, now) {
            let rp = machine.pods.get(uid);
            let current = rp
                .and_then(|p| p.sandbox.as_ref())
                .is_some_and(|s| s.boot_id == machine.boot_id);
            if current {
                return; // being created
            }
            let had_old = rp.and_then(|p| p.sandbox.as_ref()).is_some();
            // No runtime record, but the API says containers of this pod ran here: the machine
            // was restarted underneath us (a `klab up` restart, like a reboot whose runtime state
            // survived on disk). Seed what the runtime would remember, so the containers restart
            // with restartCount + 1 and a lost (Unknown, 255) last state.
            let seeded = rp.is_none() && seed_from_api_status(&w.pod, machine, now);
            if had_old || seeded {
                out.writes.push(w.event(
                    None,
                    names::EVENT_NORMAL,
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.".into(),
                ));
            }
            // WaitForAttachAndMount: the pod's claims attached to this node and mounted first.
            let pod = w.pod.clone();
            if let crate::volumes::Gate::Waiting(event) = self.volumes.check(uid, &pod, now) {
                if let Some(message) = event {
                    out.writes.push(w.event(
                        None,
                        names::EVENT_WARNING,
                        names::EVENT_FAILED_MOUNT,
                        message,
                    ));
                }
                return;
            }
            let w = self.workers.get_mut(uid).expect("worker");
            w.starting = None;
            machine.run_sandbox(uid, &ns, &name, now, self.model.sandbox_start);
            return;
        }
        // A container start in progress.
        if let Some(st) = self.workers[uid].starting.clone() {
            let w = self.workers.get(uid).expect("worker");
            let spec = w
                .spec_containers(st.init)
                .into_iter()
                .find(|c| c.name == st.container);
            let Some(spec) = spec else {
                self.workers.get_mut(uid).expect("worker").starting = None;
                return;
            };
            let image = spec.image.clone().unwrap_or_default();
            match st.stage {
                Stage::Pulling { until } if until <= now => {
                    if let Some(err) = machine.pull_failures.get(&normalize_image(&image)).cloned()
                    {
                        // The registry refused: `Failed` events, ErrImagePull, the pull back-off
                        // advanced and the pod synced again after the pod worker's back-off.
                        let field = Some((st.init, st.container.as_str()));
                        let failed = w.event(
                            field,
                            names::EVENT_WARNING,
                            crate::images::EVENT_FAILED,
                            crate::images::failed_to_pull_message(&image, &err),
                        );
                        let error = w.event(
                            field,
                            names::EVENT_WARNING,
                            crate::images::EVENT_FAILED,
                            format!("Error: {}", crate::images::REASON_ERR_IMAGE_PULL),
                        );
                        out.writes.push(failed);
                        out.writes.push(error);
                        let w = self.workers.get_mut(uid).expect("worker");
                        let prev = w.pull_backoff.get(&image).copied();
                        w.pull_backoff
                            .insert(image.clone(), crate::images::pull_backoff_next(prev, now));
                        w.image_errors.insert(
                            st.container.clone(),
                            (crate::images::REASON_ERR_IMAGE_PULL.into(), err),
                        );
                        w.pull_retry_at = Some(after(now, crate::images::POD_WORKER_BACKOFF));
                        w.starting = None;
                        return;
                    }
                    let took = format_go_duration(
                        Duration::try_from(until.duration_since(st.pull_started))
                            .unwrap_or_default(),
                    );
                    let size =
                        image_size(&w.pod, &st.container).unwrap_or(self.model.image_size_bytes);
                    out.writes.push(w.event(Some((st.init, &st.container)), names::EVENT_NORMAL, "Pulled", format!(
                        "Successfully pulled image \"{image}\" in {took} ({took} including waiting). Image size: {size} bytes."
                    )));
                    machine.images.pulled(&image, size, now);
                    let until = after(now, self.model.container_start);
                    let w = self.workers.get_mut(uid).expect("worker");
                    w.image_errors.remove(&st.container);
                    w.pull_retry_at = None;
                    self.workers.get_mut(uid).expect("worker").starting = Some(Starting {
                        stage: Stage::Creating { until },
                        ..st
                    });
                }
                Stage::Creating { until } if until <= now => {
                    out.writes.push(w.event(
                        Some((st.init, &st.container)),
                        names::EVENT_NORMAL,
                        "Created",
                        format!("Created container: {}", st.container),
                    ));
                    let program = Program::from_command(
                        spec.command.as_deref().unwrap_or(&[]),
                        spec.args.as_deref().unwrap_or(&[]),
                    );
                    let attempt = machine
                        .pods
                        .get(uid)
                        .and_then(|p| p.containers.get(&st.container))
                        .map_or(0, |c| c.restart_count + 1);
                    let id = container_id(&self.node_name, uid, &st.container, attempt, now);
                    machine.start_container(
                        uid,
                        &st.container,
                        &normalize_image(&image),
                        program,
                        spec_hash(&spec),
                        id,
                        now,
                    );
                    out.writes.push(w.event(
                        Some((st.init, &st.container)),
                        names::EVENT_NORMAL,
                        "Started",
                        format!("Started container {}", st.container),
                    ));
                    let (usage, _, refused) = self.usage_spec(uid, &spec, st.init);
                    let limit = usage::Resources::of(&spec).memory_limit;
                    machine.set_usage(uid, &st.container, usage::Model::new(usage, now, limit));
                    out.writes.extend(refused);
                    self.workers.get_mut(uid).expect("worker").starting = None;
                }
                _ => {}
            }
            return;
        }
        // Pick the next container to (re)start: init containers in order, then regular ones.
        let policy = w.restart_policy();
        let init_specs = w.spec_containers(true);
        let rp = machine.pods.get(uid).cloned();
        let rec = |n: &str| -> Option<RtContainer> {
            rp.as_ref()
                .and_then(|p| p.containers.get(n).map(|c| (**c).clone()))
        };
        // Init containers completed in an earlier sandbox run again in a new one (upstream's
        // computePodActions: a re-created sandbox starts over from the first init container).
        let sandbox_attempt = rp
            .as_ref()
            .and_then(|p| p.sandbox.as_ref())
            .map(|s| s.attempt);
        let completed_here = |r: &RtContainer, t: &Terminated| {
            t.exit_code == 0 && r.sandbox_attempt == sandbox_attempt
        };
        let mut candidate: Option<(bool, Container)> = None;
        for c in init_specs.clone() {
            let Some(r) = rec(&c.name) else {
                candidate = Some((true, c));
                break;
            };
            match &r.state {
                // A sidecar (restartable init container) only has to be running.
                RtState::Running { .. } if c.restart_policy.as_deref() == Some("Always") => {
                    continue;
                }
                RtState::Running { .. } => return,
                RtState::Exited(t)
                    if completed_here(&r, t) && c.restart_policy.as_deref() != Some("Always") =>
                {
                    continue;
                }
                RtState::Exited(t)
                    if t.exit_code == 0 && c.restart_policy.as_deref() != Some("Always") =>
                {
                    // Succeeded, but in a sandbox that is gone.
                    candidate = Some((true, c));
                    break;
                }
                RtState::Exited(t) => {
                    if policy == "Never" && c.restart_policy.as_deref() != Some("Always") {
                        return;
                    }
                    if self.restart_allowed(uid, true, &c.name, t, now, out) {
                        candidate = Some((true, c));
                    }
                    break;
                }
            }
        }
        let init_done = init_specs.iter().all(|c| match rec(&c.name) {
            Some(r) => match &r.state {
                RtState::Exited(t) => completed_here(&r, t),
                RtState::Running { .. } => c.restart_policy.as_deref() == Some("Always"),
            },
            None => false,
        });
        if candidate.is_none() && init_done {
            for c in self.workers[uid].spec_containers(false) {
                match rec(&c.name).map(|r| r.state) {
                    None => {
                        candidate = Some((false, c));
                        break;
                    }
                    Some(RtState::Running { .. }) => continue,
                    Some(RtState::Exited(t)) => {
                        let wants = match policy.as_str() {
                            "Always" => true,
                            "OnFailure" => t.exit_code != 0,
                            _ => false,
                        };
                        if wants && self.restart_allowed(uid, false, &c.name, &t, now, out) {
                            candidate = Some((false, c));
                            break;
                        }
                    }
                }
            }
        }
        let Some((init, c)) = candidate else { return };
        let image = c.image.clone().unwrap_or_default();
        let pull_policy = c.image_pull_policy.clone().unwrap_or_else(|| {
            let last = image.rsplit('/').next().unwrap_or("");
            if !last.contains(':') || image.ends_with(":latest") {
                "Always".into()
            } else {
                "IfNotPresent".into()
            }
        });
        let present = machine.images.contains(&image);
        if pull_policy == "Never" && !present {
            // The image can never appear by itself: report it once and keep waiting.
            let msg =
                format!("Container image \"{image}\" is not present with pull policy of Never");
            let w = self.workers.get_mut(uid).expect("worker");
            if w.image_errors
                .insert(c.name.clone(), ("ErrImageNeverPull".into(), msg.clone()))
                .is_none()
            {
                let w = &self.workers[uid];
                out.writes.push(w.event(
                    Some((init, &c.name)),
                    names::EVENT_WARNING,
                    "ErrImageNeverPull",
                    msg,
                ));
            }
            return;
        }
        let w = self.workers.get(uid).expect("worker");
        let must_pull = pull_policy == "Always" || (pull_policy == "IfNotPresent" && !present);
        if must_pull {
            // After a failed pull the pod is synced again only after the pod worker's back-off.
            if w.pull_retry_at.is_some_and(|t| t > now) {
                return;
            }
            if crate::images::pull_in_backoff(w.pull_backoff.get(&image), now) {
                let msg = crate::images::backoff_pulling_message(&image);
                out.writes.push(w.event(
                    Some((init, &c.name)),
                    names::EVENT_NORMAL,
                    crate::images::EVENT_BACKOFF,
                    msg.clone(),
                ));
                out.writes.push(w.event(
                    Some((init, &c.name)),
                    names::EVENT_WARNING,
                    crate::images::EVENT_FAILED,
                    format!("Error: {}", crate::images::REASON_IMAGE_PULL_BACKOFF),
                ));
                let w = self.workers.get_mut(uid).expect("worker");
                w.image_errors.insert(
                    c.name.clone(),
                    (crate::images::REASON_IMAGE_PULL_BACKOFF.into(), msg),
                );
                w.pull_retry_at = Some(after(now, crate::images::POD_WORKER_BACKOFF));
                return;
            }
        }
        let stage = if must_pull {
            out.writes.push(w.event(
                Some((init, &c.name)),
                names::EVENT_NORMAL,
                "Pulling",
                format!("Pulling image \"{image}\""),
            ));
            Stage::Pulling {
                until: after(now, self.model.image_pull),
            }
        } else {
            out.writes.push(w.event(
                Some((init, &c.name)),
                names::EVENT_NORMAL,
                "Pulled",
                format!("Container image \"{image}\" already present on machine"),
            ));
            Stage::Creating {
                until: after(now, self.model.container_start),
            }
        };
        let w = self.workers.get_mut(uid).expect("worker");
        w.backoff_wait.remove(&c.name);
        w.pull_retry_at = None;
        if !must_pull {
            // The image is here after all: the last image error no longer holds. (During a
            // retried pull the last error stays, as upstream's status keeps the last sync's.)
            w.image_errors.remove(&c.name);
        }
        w.starting = Some(Starting {
            container: c.name.clone(),
            init,
            stage,
            pull_started: now,
        });
    }

    /// Crash-loop backoff check for an exited container the policy wants restarted.
    fn restart_allowed(
        &mut self,
        uid: &str,
        init: bool,
        name: &str,
        t: &Terminated,
        now: Timestamp,
        out: &mut SyncOutput,
    ) -> bool {
        let key = format!("{uid}/{name}");
        match self.backoff.decide(&key, t.finished_at, now) {
            RestartDecision::StartNow => true,
            RestartDecision::Wait { until, delay } => {
                let w = self.workers.get_mut(uid).expect("worker");
                w.backoff_wait.insert(name.to_string(), (until, delay));
                if w.backoff_noted.get(name) != Some(&t.finished_at) {
                    w.backoff_noted.insert(name.to_string(), t.finished_at);
                    let msg = format!(
                        "Back-off restarting failed container {name} in pod {}",
                        w.format_pod()
                    );
                    out.writes.push(w.event(
                        Some((init, name)),
                        names::EVENT_WARNING,
                        "BackOff",
                        msg,
                    ));
                }
                false
            }
        }
    }

    fn hook_time(&self, c: &Container) -> Option<(HookTime, bool)> {
        let h = c.lifecycle.as_ref()?.pre_stop.as_ref()?;
        if let Some(e) = &h.exec {
            let (d, code) = Program::hook_outcome(e.command.as_deref().unwrap_or(&[]));
            return Some((d.map_or(HookTime::Never, HookTime::After), code != 0));
        }
        if h.http_get.is_some() {
            return Some((HookTime::After(self.model.http_prestop), false));
        }
        if let Some(s) = &h.sleep {
            return Some((
                HookTime::After(Duration::from_secs(s.seconds.max(0) as u64)),
                false,
            ));
        }
        None
    }

    fn begin_termination(
        &mut self,
        uid: &str,
        grace: i64,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let w = self.workers.get(uid).expect("worker");
        let mut hooks = BTreeMap::new();
        let running: Vec<String> = machine
            .pods
            .get(uid)
            .map(|p| {
                p.containers
                    .values()
                    .filter(|c| c.is_running())
                    .map(|c| c.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        let all: Vec<(bool, Container)> = w
            .spec_containers(true)
            .into_iter()
            .map(|c| (true, c))
            .chain(w.spec_containers(false).into_iter().map(|c| (false, c)))
            .collect();
        for name in &running {
            let (init, spec) = match all.iter().find(|(_, c)| &c.name == name) {
                Some((i, c)) => (*i, Some(c.clone())),
                None => (false, None),
            };
            out.writes.push(w.event(
                Some((init, name)),
                names::EVENT_NORMAL,
                "Killing",
                format!("Stopping container {name}"),
            ));
            let hook = if w.in_api || spec.is_some() {
                spec.as_ref().and_then(|c| self.hook_time(c))
            } else {
                None
            };
            let plan = kill_plan(grace, hook.map(|(h, _)| h));
            if plan.sigterm_after.is_zero() {
                machine.stop_container(uid, name, plan.kill_after, self.model.sigterm_exit, now);
            } else {
                hooks.insert(
                    name.clone(),
                    PendingHook {
                        sigterm_at: after(now, plan.sigterm_after),
                        kill_at: after(now, plan.kill_after),
                        failed: hook.is_some_and(|(_, f)| f),
                        abandoned: plan.hook_abandoned,
                    },
                );
            }
        }
        let w = self.workers.get_mut(uid).expect("worker");
        w.starting = None;
        w.backoff_wait.clear();
        w.life = Lifecycle::Terminating(Term { grace, hooks });
    }

    fn restart_termination(
        &mut self,
        uid: &str,
        grace: i64,
        now: Timestamp,
        machine: &mut Machine,
    ) {
        let w = self.workers.get_mut(uid).expect("worker");
        let running: Vec<String> = machine
            .pods
            .get(uid)
            .map(|p| {
                p.containers
                    .values()
                    .filter(|c| c.is_running())
                    .map(|c| c.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for name in running {
            let plan = kill_plan(grace, None);
            machine.stop_container(uid, &name, plan.kill_after, self.model.sigterm_exit, now);
        }
        w.life = Lifecycle::Terminating(Term {
            grace,
            hooks: BTreeMap::new(),
        });
    }

    fn progress_termination(
        &mut self,
        uid: &str,
        now: Timestamp,
        machine: &mut Machine,
        out: &mut SyncOutput,
    ) {
        let Lifecycle::Terminating(mut term) = self.workers[uid].life.clone() else {
            return;
        };
        let due: Vec<String> = term
            .hooks
            .iter()
            .filter(|(_, h)| h.sigterm_at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for name in due {
            let h = term.hooks.remove(&name).expect("present");
            if h.failed && !h.abandoned {
                let w = &self.workers[uid];
                out.writes.push(w.event(
                    Some((false, &name)),
                    names::EVENT_WARNING,
                    "FailedPreStopHook",
                    "PreStopHook failed".into(),
                ));
            }
            let grace =
                Duration::try_from(h.kill_at.duration_since(h.sigterm_at)).unwrap_or_default();
            machine.stop_container(uid, &name, grace, self.model.sigterm_exit, h.sigterm_at);
        }
        machine.advance(now);
        let running = machine.pods.get(uid).is_some_and(|p| p.any_running());
        if !term.hooks.is_empty() || running {
            self.workers.get_mut(uid).expect("worker").life = Lifecycle::Terminating(term);
            return;
        }
        // Terminated: final status (terminal phase), then DELETE if the API object is being deleted.
        let final_status = self.generate(uid, now, machine, true);
        let w = self.workers.get_mut(uid).expect("worker");
        w.life = Lifecycle::Finished;
        if w.in_api {
            if w.status_needs_send(&final_status) {
                w.hold_status(final_status.clone());
                out.writes.push(PodWrite::Status {
                    namespace: w.ns(),
                    name: w.name(),
                    uid: uid.to_string(),
                    status: Box::new(final_status),
                });
            }
            if w.pod.metadata.deletion_timestamp.is_some() && !w.deleted_sent {
                w.deleted_sent = true;
                out.writes.push(PodWrite::Delete {
                    namespace: w.ns(),
                    name: w.name(),
                    uid: uid.to_string(),
                });
            }
        }
        machine.remove_pod(uid);
    }

    /// The container views and the generated API status of a pod.
    fn generate(&self, uid: &str, now: Timestamp, machine: &Machine, terminal: bool) -> PodStatus {
        let w = &self.workers[uid];
        let rp = machine.pods.get(uid);
        let has_init = !w.spec_containers(true).is_empty();
        let view = |init: bool, c: &Container| -> ContainerView {
            let image = normalize_image(c.image.as_deref().unwrap_or(""));
            let rec = rp.and_then(|p| p.containers.get(&c.name));
            let (state, last, restart_count, container_id) = match rec {
                None => {
                    let waiting = if terminal {
                        // TerminatePod: a container that never ran is reported as lost.
                        CState::Terminated(Terminated {
                            exit_code: 137,
                            reason: "ContainerStatusUnknown".into(),
                            started_at: now,
                            finished_at: now,
                            container_id: String::new(),
                            message: Some(
                                "The container could not be located when the pod was terminated"
                                    .into(),
                            ),
                        })
                    } else {
                        // Before the first start: PodInitializing when the pod has init containers.
                        let reason = if has_init {
                            "PodInitializing"
                        } else {
                            "ContainerCreating"
                        };
                        match w.image_errors.get(&c.name) {
                            Some((r, m)) => CState::Waiting {
                                reason: r.clone(),
                                message: Some(m.clone()),
                            },
                            None => CState::Waiting {
                                reason: reason.into(),
                                message: None,
                            },
                        }
                    };
                    (waiting, None, 0, None)
                }
                Some(r) => {
                    let state = match &r.state {
                        RtState::Running { started_at, .. } => CState::Running {
                            started_at: *started_at,
                        },
                        // A restart whose pull failed waits with the pull's reason.
                        RtState::Exited(_) if !terminal && w.image_errors.contains_key(&c.name) => {
                            let (reason, message) = w.image_errors[&c.name].clone();
                            CState::Waiting {
                                reason,
                                message: Some(message),
                            }
                        }
                        RtState::Exited(t) => match w.backoff_wait.get(&c.name) {
                            Some((_, delay)) if !terminal => CState::Waiting {
                                reason: "CrashLoopBackOff".into(),
                                message: Some(format!(
                                    "back-off {} restarting failed container={} pod={}",
                                    format_go_duration(*delay),
                                    c.name,
                                    w.format_pod()
                                )),
                            },
                            _ => CState::Terminated(t.clone()),
                        },
                    };
                    let last = match (&state, &r.state) {
                        (CState::Waiting { .. }, RtState::Exited(t)) => Some(t.clone()),
                        _ => r.previous.clone(),
                    };
                    (state, last, r.restart_count, Some(r.container_id.clone()))
                }
            };
            // Started: running, and its startup probe (if any) succeeded for this instance;
            // not started, never ready (the prober manager's UpdatePodStatus).
            let running = matches!(state, CState::Running { .. });
            // (Probes run for regular containers only: a sidecar counts as started running.)
            let started = running
                && (init
                    || c.startup_probe.is_none()
                    || container_id.as_deref().is_some_and(|id| {
                        w.probes
                            .get(&(c.name.clone(), ProbeKind::Startup))
                            .is_some_and(|p| p.succeeded_for(id))
                    }));
            let probed_ready = c.readiness_probe.is_none()
                || w.probes
                    .get(&(c.name.clone(), ProbeKind::Readiness))
                    .is_some_and(|p| p.succeeded());
            let ready = !init && started && !terminal && probed_ready;
            ContainerView {
                sidecar: init && c.restart_policy.as_deref() == Some("Always"),
                name: c.name.clone(),
                image: image.clone(),
                image_id: if container_id.is_some() {
                    pod_status::image_id(&image)
                } else {
                    String::new()
                },
                container_id,
                state,
                last,
                restart_count,
                ready,
                started,
            }
        };
        let init: Vec<ContainerView> = w
            .spec_containers(true)
            .iter()
            .map(|c| view(true, c))
            .collect();
        let regular: Vec<ContainerView> = w
            .spec_containers(false)
            .iter()
            .map(|c| view(false, c))
            .collect();
        let facts = PodFacts {
            sandbox_ready: machine.sandbox_ready(uid, now) && !terminal,
            pod_is_terminal: terminal,
            // hostNetwork pods share the node's address.
            pod_ip: if w
                .pod
                .spec
                .as_ref()
                .and_then(|sp| sp.host_network)
                .unwrap_or(false)
            {
                rp.map(|_| self.host_ip.clone())
            } else {
                rp.map(|p| p.pod_ip.clone()).filter(|ip| !ip.is_empty())
            },
            host_ip: self.host_ip.clone(),
            start_time: w.start_time.clone(),
        };
        // The base for merging: our last write, with the conditions other components own taken
        // from the API object.
        let base = match &w.status_sent {
            None => w.pod.status.clone().unwrap_or_default(),
            Some(sent) => {
                let mut s = sent.clone();
                let foreign: Vec<_> = w
                    .pod
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .filter(|c| !pod_status::KUBELET_OWNED.contains(&c.type_.as_str()))
                    .cloned()
                    .collect();
                let own: Vec<_> = sent
                    .conditions
                    .iter()
                    .flatten()
                    .filter(|c| pod_status::KUBELET_OWNED.contains(&c.type_.as_str()))
                    .cloned()
                    .collect();
                s.conditions = Some(foreign.into_iter().chain(own).collect());
                s
            }
        };
        let mut status = generate_status(
            w.pod.spec.as_ref(),
            base,
            &init,
            &regular,
            &facts,
            &Time(klab_api::clock::truncate_to_second(now)),
        );
        if terminal && !is_terminal_phase(status.phase.as_deref()) {
            // TerminatePod forces a non-terminal phase to Failed.
            status.phase = Some(pod_status::PHASE_FAILED.into());
        }
        if terminal && let Some((message, disruption_target)) = &w.evicted {
            status.phase = Some(pod_status::PHASE_FAILED.into());
            status.reason = Some(eviction::REASON_EVICTED.into());
            status.message = Some(message.clone());
            if *disruption_target {
                shutdown::set_disruption_target(
                    &mut status,
                    message,
                    &Time(klab_api::clock::truncate_to_second(now)),
                );
            }
        }
        if let Some(phase_at_kill) = &w.shutdown_killed {
            shutdown::apply_killed_status(
                &mut status,
                phase_at_kill.as_deref(),
                &Time(klab_api::clock::truncate_to_second(now)),
            );
        }
        status
    }

    fn write_status(&mut self, uid: &str, now: Timestamp, machine: &Machine, out: &mut SyncOutput) {
        let Some(w) = self.workers.get(uid) else {
            return;
        };
        if !w.in_api || !matches!(w.life, Lifecycle::Syncing | Lifecycle::Terminating(_)) {
            return;
        }
        let status = self.generate(uid, now, machine, false);
        let w = self.workers.get_mut(uid).expect("worker");
        if w.status_needs_send(&status) {
            w.hold_status(status.clone());
            out.writes.push(PodWrite::Status {
                namespace: w.ns(),
                name: w.name(),
                uid: uid.to_string(),
                status: Box::new(status),
            });
        }
    }

    /// Names of the UIDs the manager tracks (for tests and `state()`).
    pub fn known(&self) -> BTreeSet<String> {
        self.workers.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NodeSpecConfig;
    use crate::node_status::allocatable;
    use k8s_openapi::api::core::v1::{
        ExecAction, Lifecycle as K8sLifecycle, LifecycleHandler, PodCondition, PodSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const T0: i64 = 1_767_225_600;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(T0 * 1000 + ms).unwrap()
    }

    /// Only a pod with a limit its local storage can exceed is measured by the local-storage
    /// check; requests alone, other limits or an emptyDir without `sizeLimit` set none.
    #[test]
    fn local_storage_limits_are_container_limits_and_empty_dir_size_limits() {
        let spec = |v: serde_json::Value| -> PodSpec { serde_json::from_value(v).unwrap() };
        let limited = [
            spec(serde_json::json!({"containers": [
                {"name": "a", "resources": {"requests": {"ephemeral-storage": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"ephemeral-storage": "2Gi"}}}]})),
            spec(serde_json::json!({"containers": [{"name": "a"}],
                "volumes": [{"name": "t", "emptyDir": {}},
                    {"name": "c", "emptyDir": {"sizeLimit": "1Gi"}}]})),
        ];
        let unlimited = [
            spec(serde_json::json!({"containers": [{"name": "a"}]})),
            spec(
                serde_json::json!({"containers": [{"name": "a", "resources": {
                "requests": {"ephemeral-storage": "1Gi"}, "limits": {"memory": "1Gi"}}}],
                "volumes": [{"name": "t", "emptyDir": {"medium": "Memory"}},
                    {"name": "h", "hostPath": {"path": "/x"}}]}),
            ),
        ];
        for s in &limited {
            assert!(has_local_storage_limit(s), "{s:?}");
        }
        for s in &unlimited {
            assert!(!has_local_storage_limit(s), "{s:?}");
        }
    }

    fn pod(name: &str, policy: &str, command: &[&str], prestop: Option<&[&str]>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(at(0))),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                restart_policy: Some(policy.into()),
                termination_grace_period_seconds: Some(30),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("busybox:1.36".into()),
                    command: if command.is_empty() {
                        None
                    } else {
                        Some(command.iter().map(|s| s.to_string()).collect())
                    },
                    lifecycle: prestop.map(|c| K8sLifecycle {
                        pre_stop: Some(LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(c.iter().map(|s| s.to_string()).collect()),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
        }
    }

    struct Harness {
        mgr: PodManager,
        machine: Machine,
        /// The pods as the API holds them; a pod's `Arc` is replaced only when it changes, as
        /// the pod loop's view, so that passes sync only the pods that changed.
        api: BTreeMap<String, Arc<Pod>>,
        node: Node,
        alloc: Allocatable,
        now: Timestamp,
        log: Vec<(i64, PodWrite)>,
    }

    impl Harness {
        fn new() -> Self {
            let model = RuntimeModel::default();
            let spec = NodeSpecConfig::default();
            Harness {
                mgr: PodManager::new("n1", "10.0.0.5", model),
                machine: Machine::new("b-1".into(), "m".into(), "s".into(), "10.244.5".into()),
                api: BTreeMap::new(),
                node: Node {
                    metadata: ObjectMeta {
                        name: Some("n1".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                alloc: allocatable(&spec, &KubeletConfig::default()),
                now: at(0),
                log: Vec::new(),
            }
        }
        fn add(&mut self, p: Pod) {
            self.api
                .insert(p.metadata.uid.clone().unwrap(), Arc::new(p));
        }
        fn sync(&mut self) -> Option<Timestamp> {
            let api = self.api.clone();
            let out = self.mgr.sync(
                self.now,
                &mut self.machine,
                &api,
                &self.node,
                &self.alloc,
                &KubeletConfig::default(),
            );
            for w in out.writes {
                match &w {
                    PodWrite::Status { uid, status, .. } => {
                        if let Some(p) = self.api.get_mut(uid) {
                            Arc::make_mut(p).status = Some((**status).clone());
                        }
                    }
                    PodWrite::Delete { uid, .. } => {
                        self.api.remove(uid);
                    }
                    PodWrite::Event(_) => {}
                }
                let ms = self.now.as_millisecond() - T0 * 1000;
                self.log.push((ms, w));
            }
            out.next_wake
        }
        /// Syncs at every wake-up until `until` (ms).
        fn run_until(&mut self, until: i64) {
            loop {
                let next = self.sync();
                match next {
                    Some(t) if t <= at(until) && t > self.now => self.now = t,
                    _ => {
                        self.now = at(until);
                        self.sync();
                        return;
                    }
                }
            }
        }
        fn events(&self) -> Vec<(i64, String, String)> {
            self.log
                .iter()
                .filter_map(|(t, w)| match w {
                    PodWrite::Event(e) => Some((*t, e.reason.clone(), e.message.clone())),
                    _ => None,
                })
                .collect()
        }
        fn status(&self, name: &str) -> PodStatus {
            self.api[&format!("uid-{name}")].status.clone().unwrap()
        }
        fn phases(&self) -> Vec<(i64, String)> {
            let mut v: Vec<(i64, String)> = Vec::new();
            for (t, w) in &self.log {
                if let PodWrite::Status { status, .. } = w {
                    let p = status.phase.clone().unwrap_or_default();
                    if v.last().map(|(_, l)| l) != Some(&p) {
                        v.push((*t, p));
                    }
                }
            }
            v
        }
        fn delete(&mut self, name: &str, grace: i64) {
            let p = Arc::make_mut(self.api.get_mut(&format!("uid-{name}")).unwrap());
            p.metadata.deletion_timestamp =
                Some(Time(self.now + jiff::SignedDuration::from_secs(grace)));
            p.metadata.deletion_grace_period_seconds = Some(grace);
        }
    }

    fn reasons(h: &Harness) -> Vec<(i64, String)> {
        h.events().into_iter().map(|(t, r, _)| (t, r)).collect()
    }

    #[test]
    fn pod_reaches_running_after_modelled_delays() {
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.run_until(10_000);
        // sandbox 1 s, pull 2 s, start 0.5 s.
        assert_eq!(
            h.phases(),
            vec![(0, "Pending".into()), (3500, "Running".into())]
        );
        assert_eq!(
            reasons(&h),
            vec![
                (1000, "Pulling".into()),
                (3000, "Pulled".into()),
                (3500, "Created".into()),
                (3500, "Started".into())
            ]
        );
        let ev = h.events();
        assert_eq!(ev[0].2, "Pulling image \"busybox:1.36\"");
        assert_eq!(
            ev[1].2,
            "Successfully pulled image \"busybox:1.36\" in 2s (2s including waiting). Image size: 26214400 bytes."
        );
        assert_eq!(ev[2].2, "Created container: app");
        assert_eq!(ev[3].2, "Started container app");
        let s = h.status("web");
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert!(cs.ready && cs.restart_count == 0);
        assert_eq!(cs.image, "docker.io/library/busybox:1.36");
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.5.2"));
        assert!(s.conditions.unwrap().iter().all(|c| c.status == "True"));
        // The first status (t=0) said ContainerCreating and PodReadyToStartContainers False.
        let PodWrite::Status { status: first, .. } = &h
            .log
            .iter()
            .find(|(_, w)| matches!(w, PodWrite::Status { .. }))
            .unwrap()
            .1
        else {
            unreachable!()
        };
        let w = first.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .waiting
            .clone()
            .unwrap();
        assert_eq!(w.reason.as_deref(), Some("ContainerCreating"));
    }

    #[test]
    fn a_pass_steps_only_the_pods_whose_input_changed() {
        let mut h = Harness::new();
        for name in ["a", "b", "c"] {
            h.add(pod(name, "Always", &[], None));
        }
        h.run_until(10_000);
        for name in ["a", "b", "c"] {
            assert_eq!(h.status(name).phase.as_deref(), Some("Running"));
        }
        // Nothing changed: a pass at a later instant with no timer due steps no pod.
        let before = h.mgr.steps_taken();
        h.now = at(12_000);
        assert_eq!(h.sync(), None);
        assert_eq!(h.mgr.steps_taken(), before);
        // One pod's API object changed: only its worker is synced, and it begins terminating.
        h.delete("b", 30);
        assert_eq!(h.sync(), None, "b's container exits on SIGTERM at once");
        assert_eq!(h.mgr.steps_taken(), before + 1);
        assert!(!h.api.contains_key("uid-b"), "b's final DELETE was sent");
        assert_eq!(h.status("a").phase.as_deref(), Some("Running"));
        assert_eq!(h.status("c").phase.as_deref(), Some("Running"));
        // Any change from outside the pod loop (a fault) also syncs every pod.
        let before = h.mgr.steps_taken();
        h.machine.changes += 1;
        h.now = at(30_000);
        h.sync();
        assert_eq!(
            h.mgr.steps_taken() - before,
            3,
            "a, c and b's finished worker"
        );
    }

    fn ready_condition(s: &PodStatus) -> (String, Option<Time>) {
        let c = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == names::POD_COND_READY)
            .expect("Ready condition");
        (c.status.clone(), c.last_transition_time.clone())
    }

    #[test]
    fn the_status_sync_sends_the_held_status_again_only_where_the_api_disagrees() {
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.add(pod("db", "Always", &[], None));
        h.run_until(10_000);
        let ready_since = ready_condition(&h.status("web")).1;
        assert_eq!(ready_condition(&h.status("web")).0, "True");
        // The API server adds what others own (qosClass, a foreign condition): no disagreement.
        for name in ["web", "db"] {
            let p = Arc::make_mut(h.api.get_mut(&format!("uid-{name}")).unwrap());
            let st = p.status.as_mut().unwrap();
            st.qos_class = Some("BestEffort".into());
            st.conditions.get_or_insert_default().push(PodCondition {
                type_: "example.com/gate".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        h.sync();
        assert!(h.mgr.reconcile_statuses(&h.api).is_empty());

        // The node lifecycle controller marks `web` not ready: a pod update alone sends nothing…
        let writes = h.log.len();
        {
            let p = Arc::make_mut(h.api.get_mut("uid-web").unwrap());
            for c in p.status.as_mut().unwrap().conditions.iter_mut().flatten() {
                if c.type_ == names::POD_COND_READY {
                    c.status = "False".into();
                    c.last_transition_time = Some(Time(at(20_000)));
                }
            }
        }
        h.now = at(20_000);
        h.sync();
        assert_eq!(h.log.len(), writes, "{:?}", &h.log[writes..]);
        assert_eq!(ready_condition(&h.status("web")).0, "False");
        // …the status sync does, for that pod only, with the transition time the kubelet holds.
        h.now = at(25_000);
        assert_eq!(
            h.mgr.reconcile_statuses(&h.api),
            vec!["uid-web".to_string()]
        );
        h.sync();
        let sent: Vec<_> = h.log[writes..]
            .iter()
            .filter_map(|(_, w)| match w {
                PodWrite::Status { uid, .. } => Some(uid.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(sent, vec!["uid-web".to_string()]);
        assert_eq!(
            ready_condition(&h.status("web")),
            ("True".to_string(), ready_since)
        );
        // The foreign condition stays.
        assert!(
            h.status("web")
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "example.com/gate")
        );
        assert!(h.mgr.reconcile_statuses(&h.api).is_empty());

        // A status the kubelet holds anew is compared again, although the API copy is the one
        // that agreed last time (a write the API server stored but the watch has not shown).
        let w = h.mgr.workers.get_mut("uid-web").unwrap();
        let mut held = w.status_sent.clone().unwrap();
        held.message = Some("held anew".into());
        w.hold_status(held);
        assert_eq!(
            h.mgr.reconcile_statuses(&h.api),
            vec!["uid-web".to_string()]
        );
        h.sync();
        assert!(h.mgr.reconcile_statuses(&h.api).is_empty());

        // A failed write is sent again at the next status sync too.
        h.mgr.status_write_failed("uid-db");
        assert_eq!(h.mgr.reconcile_statuses(&h.api), vec!["uid-db".to_string()]);
    }

    #[test]
    fn an_exit_applied_outside_the_pod_loop_is_seen_by_the_next_pass() {
        let mut h = Harness::new();
        h.add(pod("job", "Never", &["sh", "-c", "sleep 5; exit 3"], None));
        h.add(pod("web", "Always", &[], None));
        h.run_until(4_000);
        let exit = h.machine.next_transition().expect("job's exit is due");
        // A log or stats read at the exit instant advances the machine first: the exit is
        // applied outside the pod loop, and the pod's own instant is no longer pending.
        h.now = exit;
        h.machine.advance(exit);
        assert!(
            h.machine
                .pods
                .values()
                .all(|p| p.next_transition().is_none())
        );
        h.sync();
        assert_eq!(h.status("job").phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn crash_loop_backoff_delays() {
        let mut h = Harness::new();
        h.add(pod("crash", "Always", &["sh", "-c", "exit 1"], None));
        h.run_until(60_000);
        // Starts at 3.5 s; image then present: each restart takes 0.5 s to create.
        let started: Vec<i64> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "Started")
            .map(|(t, _, _)| t)
            .collect();
        assert_eq!(started, vec![3500, 4000, 14_500, 35_000]);
        let backoffs: Vec<(i64, String)> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "BackOff")
            .map(|(t, _, m)| (t, m))
            .collect();
        assert_eq!(
            backoffs[0],
            (
                4000,
                "Back-off restarting failed container app in pod crash_default(uid-crash)".into()
            )
        );
        let s = h.status("crash");
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.restart_count, 3);
        let w = cs.state.as_ref().unwrap().waiting.clone().unwrap();
        assert_eq!(w.reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(
            w.message.as_deref(),
            Some("back-off 40s restarting failed container=app pod=crash_default(uid-crash)")
        );
        assert_eq!(
            cs.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn never_and_onfailure_end_terminal() {
        let mut h = Harness::new();
        h.add(pod("fail", "Never", &["sh", "-c", "sleep 2; exit 3"], None));
        h.add(pod("ok", "OnFailure", &["sleep", "1"], None));
        h.run_until(20_000);
        assert_eq!(h.status("fail").phase.as_deref(), Some("Failed"));
        assert_eq!(h.status("ok").phase.as_deref(), Some("Succeeded"));
        let t = h.status("fail").container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!((t.exit_code, t.reason.as_deref()), (3, Some("Error")));
        assert!(
            !h.log
                .iter()
                .any(|(_, w)| matches!(w, PodWrite::Delete { .. })),
            "no DELETE without deletionTimestamp"
        );
    }

    fn deletion_time(h: &Harness) -> Option<i64> {
        h.log
            .iter()
            .find_map(|(t, w)| matches!(w, PodWrite::Delete { .. }).then_some(*t))
    }

    #[test]
    fn graceful_delete_sigterm_ignored_ends_with_sigkill_at_grace() {
        // N-37: sleep as PID 1 ignores SIGTERM → SIGKILL at 30 s → Failed, DELETE.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &["sleep", "3600"], None));
        h.run_until(10_000);
        h.delete("web", 30);
        h.run_until(60_000);
        assert_eq!(deletion_time(&h), Some(40_000));
        let (t, last) = h
            .log
            .iter()
            .rev()
            .find_map(|(t, w)| match w {
                PodWrite::Status { status, .. } => Some((*t, (**status).clone())),
                _ => None,
            })
            .unwrap();
        assert_eq!(t, 40_000);
        assert_eq!(last.phase.as_deref(), Some("Failed"));
        let term = last.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(term.exit_code, 137);
        assert!(
            h.events()
                .iter()
                .any(|(t, r, m)| *t == 10_000 && r == "Killing" && m == "Stopping container app")
        );
        assert!(h.api.is_empty());
    }

    #[test]
    fn graceful_delete_server_exits_on_sigterm_and_floor_applies() {
        // N-38: a server exits 0 on SIGTERM at once → Succeeded, DELETE at t.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.run_until(10_000);
        h.delete("web", 30);
        h.run_until(20_000);
        assert_eq!(deletion_time(&h), Some(10_000));
        // N-41: --grace-period=1 on a SIGTERM-ignoring container: SIGKILL 2 s later.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &["sleep", "3600"], None));
        h.run_until(10_000);
        h.delete("web", 1);
        h.run_until(20_000);
        assert_eq!(deletion_time(&h), Some(12_000));
    }

    #[test]
    fn prestop_longer_than_grace() {
        // N-40: preStop sleep 40 with grace 30 → SIGTERM at 30, SIGKILL at 32.
        let mut h = Harness::new();
        h.add(pod(
            "web",
            "Always",
            &["sleep", "3600"],
            Some(&["sleep", "40"]),
        ));
        h.run_until(10_000);
        h.delete("web", 30);
        h.run_until(60_000);
        assert_eq!(deletion_time(&h), Some(42_000));
        // preStop sleep 5 then a server: exits at SIGTERM (5 s).
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], Some(&["sleep", "5"])));
        h.run_until(10_000);
        h.delete("web", 30);
        h.run_until(60_000);
        assert_eq!(deletion_time(&h), Some(15_000));
    }

    #[test]
    fn grace_shortened_while_terminating() {
        // N-43: 60 s, then 10 s at +5 s → SIGKILL at +15 s.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &["sleep", "3600"], None));
        h.run_until(10_000);
        h.delete("web", 60);
        h.run_until(15_000);
        h.delete("web", 10);
        h.run_until(100_000);
        assert_eq!(deletion_time(&h), Some(25_000));
    }

    #[test]
    fn kubelet_restart_adopts_running_containers() {
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.run_until(10_000);
        // New kubelet process: fresh manager, same machine.
        h.mgr = PodManager::new("n1", "10.0.0.5", RuntimeModel::default());
        h.log.clear();
        h.run_until(20_000);
        assert!(h.events().is_empty(), "no kill, no start: {:?}", h.events());
        assert!(h.log.is_empty(), "identical status is not re-sent");
        assert_eq!(
            h.status("web").container_statuses.unwrap()[0].restart_count,
            0
        );
    }

    #[test]
    fn reboot_restarts_always_pods_and_fails_never_pods() {
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.add(pod("job", "Never", &["sleep", "3600"], None));
        h.run_until(10_000);
        h.machine.power_off(at(10_000));
        h.now = at(90_000);
        h.machine.power_on("b-2".into());
        h.mgr = PodManager::new("n1", "10.0.0.5", RuntimeModel::default());
        h.log.clear();
        h.run_until(100_000);
        let web = h.status("web");
        let cs = &web.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.restart_count, 1);
        let last = cs.last_state.as_ref().unwrap().terminated.clone().unwrap();
        assert_eq!(
            (last.exit_code, last.reason.as_deref()),
            (255, Some("Unknown"))
        );
        assert_eq!(web.phase.as_deref(), Some("Running"));
        assert!(h.events().iter().any(|(t, r, m)| *t == 90_000
            && r == "SandboxChanged"
            && m == "Pod sandbox changed, it will be killed and re-created."));
        let job = h.status("job");
        assert_eq!(job.phase.as_deref(), Some("Failed"));
        let conds = job.conditions.unwrap();
        let ready = conds.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("PodFailed"));
        assert!(
            !h.events()
                .iter()
                .any(|(_, r, m)| r == "SandboxChanged" && m.contains("job"))
        );
    }

    /// A reboot re-creates the pod sandbox, and a new sandbox runs the init containers again
    /// before the app (upstream's computePodActions starts over from the first init container).
    #[test]
    fn init_containers_run_again_in_a_new_sandbox_after_reboot() {
        let mut h = Harness::new();
        let mut p = pod("web", "Always", &[], None);
        p.spec.as_mut().unwrap().init_containers = Some(vec![Container {
            name: "setup".into(),
            image: Some("busybox:1.36".into()),
            command: Some(vec!["sh".into(), "-c".into(), "sleep 2".into()]),
            ..Default::default()
        }]);
        h.add(p);
        h.run_until(30_000);
        let started = |h: &Harness| -> Vec<(i64, String)> {
            h.events()
                .into_iter()
                .filter(|(_, r, _)| r == "Started")
                .map(|(t, _, m)| (t, m))
                .collect()
        };
        assert_eq!(started(&h).len(), 2, "{:?}", started(&h));
        h.machine.power_off(at(30_000));
        h.now = at(90_000);
        h.machine.power_on("b-2".into());
        h.mgr = PodManager::new("n1", "10.0.0.5", RuntimeModel::default());
        h.log.clear();
        h.run_until(120_000);
        let after: Vec<String> = started(&h).into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            after,
            vec!["Started container setup", "Started container app"],
            "init first, then the app"
        );
        let s = h.status("web");
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!(init.restart_count, 1);
        assert_eq!(
            init.state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            0
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn orphans_are_stopped_with_two_seconds_and_no_prestop() {
        // N-46: pod force-deleted while the kubelet was down.
        let mut h = Harness::new();
        h.add(pod(
            "web",
            "Always",
            &["sleep", "3600"],
            Some(&["sleep", "5"]),
        ));
        h.run_until(10_000);
        h.mgr = PodManager::new("n1", "10.0.0.5", RuntimeModel::default());
        h.api.clear();
        h.now = at(60_000);
        h.log.clear();
        h.run_until(61_000);
        assert!(h.machine.pods.contains_key("uid-web"));
        h.run_until(70_000);
        assert!(
            !h.machine.pods.contains_key("uid-web"),
            "removed after SIGKILL at +2 s"
        );
        assert!(h.log.is_empty(), "no API writes for an orphan");
    }

    /// The terminated instant (ms) of a pod's `app` container as last written.
    fn finished_ms(h: &Harness, name: &str) -> Option<i64> {
        let s = h.status(name);
        let t = s.container_statuses?[0]
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .finished_at
            .clone()?;
        Some(t.0.as_millisecond() - T0 * 1000)
    }

    #[test]
    fn graceful_shutdown_kills_group_by_group_with_override_grace() {
        // N-49/N-55 with 30 s / 10 s: the normal group (20 s) first, the critical group (10 s)
        // once the normal one is over — here early, because its pods end before the timer.
        let mut h = Harness::new();
        let mut web = pod("web", "Always", &["sleep", "3600"], None);
        web.spec.as_mut().unwrap().termination_grace_period_seconds = Some(5);
        h.add(web);
        h.add(pod("api", "Always", &[], None)); // a server: exits at SIGTERM
        let mut crit = pod("coredns", "Always", &["sleep", "3600"], None);
        crit.spec.as_mut().unwrap().priority = Some(shutdown::SYSTEM_CRITICAL_PRIORITY);
        crit.spec.as_mut().unwrap().termination_grace_period_seconds = None;
        h.add(crit);
        h.add(pod("done", "Never", &["true"], None));
        h.run_until(10_000);
        assert_eq!(h.status("web").phase.as_deref(), Some("Running"));
        assert_eq!(h.status("done").phase.as_deref(), Some("Succeeded"));

        let table = crate::shutdown::ShutdownConfig {
            grace_period: Duration::from_secs(30),
            grace_period_critical_pods: Duration::from_secs(10),
            ..Default::default()
        }
        .priority_table();
        h.mgr.begin_shutdown(table);
        h.run_until(10_000);
        assert!(h.mgr.shutting_down());
        // Killed at once with the shutdown status; the critical pod still runs.
        for name in ["web", "api"] {
            let s = h.status(name);
            assert_eq!(s.phase.as_deref(), Some("Failed"), "{name}");
            assert_eq!(s.reason.as_deref(), Some("Terminated"));
            assert_eq!(
                s.message.as_deref(),
                Some("Pod was terminated in response to imminent node shutdown.")
            );
            let dt = s
                .conditions
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == "DisruptionTarget")
                .expect("DisruptionTarget");
            assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
        }
        assert_eq!(h.status("coredns").phase.as_deref(), Some("Running"));
        assert_eq!(h.status("done").phase.as_deref(), Some("Succeeded"));

        // A pod bound during the shutdown is rejected.
        let mut late = pod("late", "Always", &[], None);
        late.metadata.creation_timestamp = Some(Time(at(12_000)));
        h.add(late);
        h.run_until(12_000);
        let s = h.status("late");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("NodeShutdown"));
        assert_eq!(
            s.message.as_deref(),
            Some("Pod was rejected: Pod was rejected as the node is shutting down.")
        );

        // web: override min(20, TGPS 5) = 5 → SIGKILL at 15 s; api exited at 10 s. The normal
        // group is over at 15 s, so the critical group starts then: SIGKILL at 25 s.
        h.run_until(14_999);
        assert_eq!(h.status("coredns").phase.as_deref(), Some("Running"));
        h.run_until(40_000);
        assert_eq!(finished_ms(&h, "api"), Some(10_000));
        assert_eq!(finished_ms(&h, "web"), Some(15_000));
        assert_eq!(finished_ms(&h, "coredns"), Some(25_000));
        assert_eq!(h.status("coredns").reason.as_deref(), Some("Terminated"));
        assert!(h.mgr.shutdown_complete());
        // Nothing is deleted: the pods stay Failed for their controllers to replace.
        assert!(
            !h.log
                .iter()
                .any(|(_, w)| matches!(w, PodWrite::Delete { .. }))
        );
    }

    #[test]
    fn shutdown_group_timer_ends_the_wait_and_cancel_reopens_admission() {
        // N-50 (30 s / 0 s): the critical group's timer is 0, so the manager is complete as soon
        // as that group starts; here the normal group's pod ignores SIGTERM with TGPS 60, so the
        // group's 30 s timer (not the pod) ends the wait.
        let mut h = Harness::new();
        let mut web = pod("web", "Always", &["sleep", "3600"], None);
        web.spec.as_mut().unwrap().termination_grace_period_seconds = Some(60);
        h.add(web);
        h.run_until(5_000);
        let table = crate::shutdown::ShutdownConfig {
            grace_period: Duration::from_secs(30),
            ..Default::default()
        }
        .priority_table();
        h.mgr.begin_shutdown(table);
        h.run_until(34_999);
        assert!(!h.mgr.shutdown_complete());
        h.run_until(35_000);
        assert_eq!(finished_ms(&h, "web"), Some(35_000), "override 30 s");
        assert!(h.mgr.shutdown_complete());
        // Cancelled: new pods are admitted again, the killed one stays Failed.
        h.mgr.cancel_shutdown();
        let mut next = pod("next", "Always", &[], None);
        next.metadata.creation_timestamp = Some(Time(at(36_000)));
        h.add(next);
        h.run_until(40_000);
        assert_eq!(h.status("next").phase.as_deref(), Some("Running"));
        assert_eq!(h.status("web").phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn admission_rejection_writes_failed_status() {
        let mut h = Harness::new();
        let mut p = pod("big", "Always", &[], None);
        p.spec.as_mut().unwrap().node_selector =
            Some([("disk".to_string(), "ssd".to_string())].into());
        h.add(p);
        h.run_until(1000);
        let s = h.status("big");
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert_eq!(s.reason.as_deref(), Some("NodeAffinity"));
        assert_eq!(
            s.message.as_deref(),
            Some(
                "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Node selector"
            )
        );
        assert!(h.events().iter().any(|(_, r, _)| r == "NodeAffinity"));
        assert!(h.machine.pods.is_empty());
    }
    #[test]
    fn finished_pod_deleted_later_gets_its_final_delete() {
        let mut h = Harness::new();
        h.add(pod("job", "Never", &["sleep", "1"], None));
        h.run_until(10_000);
        assert_eq!(h.status("job").phase.as_deref(), Some("Succeeded"));
        h.delete("job", 30);
        h.run_until(10_500);
        assert_eq!(deletion_time(&h), Some(10_000));
    }

    #[test]
    fn deletion_while_kubelet_down_gets_full_grace_after_restart() {
        // N-44: deleted at 10 s while the kubelet is down; restarted at 300 s: full 30 s budget.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &["sleep", "3600"], None));
        h.run_until(5_000);
        h.machine.abandon_stops();
        h.delete("web", 30);
        h.now = at(300_000);
        h.mgr = PodManager::new("n1", "10.0.0.5", RuntimeModel::default());
        h.run_until(400_000);
        assert_eq!(deletion_time(&h), Some(330_000));
    }

    #[test]
    fn job_with_sidecar_completes_and_sidecar_is_stopped() {
        let mut h = Harness::new();
        let mut p = pod("job", "Never", &["sleep", "10"], None);
        let spec = p.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![Container {
            name: "log".into(),
            image: Some("busybox:1.36".into()),
            restart_policy: Some("Always".into()),
            ..Default::default()
        }]);
        h.add(p);
        h.run_until(60_000);
        let s = h.status("job");
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        // sandbox 1, pull+start sidecar 3.5, app (image present) 4.0, runs 10 s → 14 s.
        let started: Vec<i64> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "Started")
            .map(|(t, _, _)| t)
            .collect();
        assert_eq!(started, vec![3500, 4000]);
        assert!(
            h.events()
                .iter()
                .any(|(t, r, m)| *t == 14_000 && r == "Killing" && m == "Stopping container log")
        );
        assert!(h.machine.pods.is_empty());
    }
    fn with_probe(mut p: Pod, kind: ProbeKind, cmd: &[&str]) -> Pod {
        let probe = k8s_openapi::api::core::v1::Probe {
            exec: Some(ExecAction {
                command: Some(cmd.iter().map(|s| s.to_string()).collect()),
            }),
            ..Default::default()
        };
        let c = &mut p.spec.as_mut().unwrap().containers[0];
        match kind {
            ProbeKind::Startup => c.startup_probe = Some(probe),
            ProbeKind::Readiness => c.readiness_probe = Some(probe),
            ProbeKind::Liveness => c.liveness_probe = Some(probe),
        }
        p
    }

    fn started_flag(h: &Harness, name: &str) -> Option<bool> {
        h.status(name).container_statuses.unwrap()[0].started
    }

    #[test]
    fn startup_probe_gates_liveness_and_readiness_then_kills() {
        // A startup probe that never succeeds: no liveness or readiness probe runs (their
        // commands would fail / succeed), the container is neither started nor ready, and the
        // third failure (ticks 10, 20, 30 s; the container started at 3.5 s) kills it.
        let mut h = Harness::new();
        let p = with_probe(
            pod("web", "Always", &[], None),
            ProbeKind::Startup,
            &["false"],
        );
        let p = with_probe(p, ProbeKind::Liveness, &["false"]);
        let p = with_probe(p, ProbeKind::Readiness, &["true"]);
        h.add(p);
        h.run_until(25_000);
        assert_eq!(started_flag(&h, "web"), Some(false));
        assert_eq!(ready_at(&h), vec![(0, false)]);
        h.run_until(31_000);
        let ev = h.events();
        let probes: Vec<(i64, String)> = ev
            .iter()
            .filter(|(_, r, _)| r == "Unhealthy" || r == "Killing")
            .map(|(t, _, m)| (*t, m.clone()))
            .collect();
        assert_eq!(
            probes,
            vec![
                (10_000, "Startup probe failed: ".to_string()),
                (20_000, "Startup probe failed: ".to_string()),
                (30_000, "Startup probe failed: ".to_string()),
                (
                    30_000,
                    "Container app failed startup probe, will be restarted".to_string()
                ),
            ]
        );
    }

    #[test]
    fn startup_success_starts_the_container_and_the_other_probes() {
        // Started at 3.5 s, the startup probe succeeds at its 10 s tick: started, the readiness
        // probe runs at once (its tick at 10 s) and the container is ready; the liveness probe
        // fails from then on and kills the container at its third failure (30 s).
        let mut h = Harness::new();
        let p = with_probe(
            pod("web", "Always", &[], None),
            ProbeKind::Startup,
            &["true"],
        );
        let p = with_probe(p, ProbeKind::Readiness, &["true"]);
        let p = with_probe(p, ProbeKind::Liveness, &["false"]);
        h.add(p);
        h.run_until(9_000);
        assert_eq!(started_flag(&h, "web"), Some(false));
        h.run_until(15_000);
        assert_eq!(started_flag(&h, "web"), Some(true));
        assert_eq!(ready_at(&h), vec![(0, false), (10_000, true)]);
        h.run_until(30_000);
        let unhealthy: Vec<(i64, String)> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "Unhealthy" || r == "Killing")
            .map(|(t, _, m)| (t, m))
            .collect();
        assert_eq!(
            unhealthy,
            vec![
                (10_000, "Liveness probe failed: ".to_string()),
                (20_000, "Liveness probe failed: ".to_string()),
                (30_000, "Liveness probe failed: ".to_string()),
                (
                    30_000,
                    "Container app failed liveness probe, will be restarted".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_scripted_timeout_answers_timeout_seconds_after_the_tick() {
        // An httpGet liveness probe (timeoutSeconds 3) scripted to time out: each failure is
        // recorded 3 s after its tick with Go's client timeout text, the kill at the third.
        let mut h = Harness::new();
        let mut p = pod("web", "Always", &[], None);
        p.metadata.annotations = Some(
            [(
                "probe.klab.dev/app.liveness".to_string(),
                "timeout".to_string(),
            )]
            .into(),
        );
        p.spec.as_mut().unwrap().containers[0].liveness_probe =
            Some(k8s_openapi::api::core::v1::Probe {
                http_get: Some(k8s_openapi::api::core::v1::HTTPGetAction {
                    path: Some("/healthz".into()),
                    port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080),
                    ..Default::default()
                }),
                timeout_seconds: Some(3),
                ..Default::default()
            });
        h.add(p);
        h.run_until(34_000);
        let ip = h.status("web").pod_ip.unwrap();
        let msg = format!(
            "Liveness probe failed: Get \"http://{ip}:8080/healthz\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        );
        let ev: Vec<(i64, String, String)> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "Unhealthy" || r == "Killing")
            .collect();
        assert_eq!(
            ev,
            vec![
                (13_000, "Unhealthy".to_string(), msg.clone()),
                (23_000, "Unhealthy".to_string(), msg.clone()),
                (33_000, "Unhealthy".to_string(), msg),
                (
                    33_000,
                    "Killing".to_string(),
                    "Container app failed liveness probe, will be restarted".to_string()
                ),
            ]
        );
    }

    fn ready_at(h: &Harness) -> Vec<(i64, bool)> {
        let mut v: Vec<(i64, bool)> = Vec::new();
        for (t, w) in &h.log {
            if let PodWrite::Status { status, .. } = w {
                let r = status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if v.last().map(|(_, l)| *l) != Some(r) {
                    v.push((*t, r));
                }
            }
        }
        v
    }

    #[test]
    fn readiness_probe_gates_ready_until_first_success() {
        // N-34: added at 0, running at 3.5 s → probed at once, Ready at 3.5 s (not at the 10 s tick).
        let mut h = Harness::new();
        h.add(with_probe(
            pod("web", "Always", &[], None),
            ProbeKind::Readiness,
            &["true"],
        ));
        h.run_until(30_000);
        assert_eq!(ready_at(&h), vec![(0, false), (3_500, true)]);
        assert!(!h.events().iter().any(|(_, r, _)| r == "Unhealthy"));
        // A failing readiness probe: Unhealthy events every period, never Ready.
        let mut h = Harness::new();
        h.add(with_probe(
            pod("web", "Always", &[], None),
            ProbeKind::Readiness,
            &["sh", "-c", "exit 1"],
        ));
        h.run_until(30_000);
        assert_eq!(ready_at(&h), vec![(0, false)]);
        let unhealthy: Vec<(i64, String)> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "Unhealthy")
            .map(|(t, _, m)| (t, m))
            .collect();
        assert_eq!(
            unhealthy,
            vec![
                (3_500, "Readiness probe failed: ".to_string()),
                (10_000, "Readiness probe failed: ".to_string()),
                (20_000, "Readiness probe failed: ".to_string()),
                (30_000, "Readiness probe failed: ".to_string())
            ]
        );
    }

    #[test]
    fn liveness_failure_kills_and_restarts() {
        // N-29: failures at 10, 20, 30 s → Killing at 30 s; the server exits on SIGTERM and is
        // restarted (image present: 0.5 s).
        let mut h = Harness::new();
        h.add(with_probe(
            pod("web", "Always", &[], None),
            ProbeKind::Liveness,
            &["false"],
        ));
        h.run_until(31_000);
        let ev = h.events();
        let unhealthy: Vec<i64> = ev
            .iter()
            .filter(|(_, r, _)| r == "Unhealthy")
            .map(|(t, _, _)| *t)
            .collect();
        assert_eq!(unhealthy, vec![10_000, 20_000, 30_000]);
        assert!(ev.iter().any(|(t, r, m)| *t == 30_000
            && r == "Killing"
            && m == "Container app failed liveness probe, will be restarted"));
        let started: Vec<i64> = ev
            .iter()
            .filter(|(_, r, _)| r == "Started")
            .map(|(t, _, _)| *t)
            .collect();
        assert_eq!(started, vec![3500, 30_500]);
        assert_eq!(
            h.status("web").container_statuses.unwrap()[0].restart_count,
            1
        );
    }
    #[test]
    fn pending_pod_deleted_reports_container_status_unknown() {
        // Deleted while the image is still being pulled: nothing ever ran.
        let mut h = Harness::new();
        h.add(pod("web", "Always", &[], None));
        h.run_until(2_000);
        h.delete("web", 30);
        h.run_until(3_000);
        assert_eq!(deletion_time(&h), Some(2_000));
        let last = h
            .log
            .iter()
            .rev()
            .find_map(|(_, w)| match w {
                PodWrite::Status { status, .. } => Some((**status).clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(last.phase.as_deref(), Some("Failed"));
        let t = last.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(
            (t.exit_code, t.reason.as_deref()),
            (137, Some("ContainerStatusUnknown"))
        );
        assert_eq!(
            t.message.as_deref(),
            Some("The container could not be located when the pod was terminated")
        );
    }
    #[test]
    fn never_pull_policy_without_the_image_waits_with_err_image_never_pull() {
        let mut h = Harness::new();
        let mut p = pod("web", "Always", &[], None);
        p.spec.as_mut().unwrap().containers[0].image_pull_policy = Some("Never".into());
        h.add(p);
        h.run_until(30_000);
        let ev: Vec<_> = h
            .events()
            .into_iter()
            .filter(|(_, r, _)| r == "ErrImageNeverPull")
            .collect();
        assert_eq!(
            ev,
            vec![(
                1000,
                "ErrImageNeverPull".to_string(),
                "Container image \"busybox:1.36\" is not present with pull policy of Never"
                    .to_string()
            )]
        );
        let w = h.status("web").container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImageNeverPull"));
        assert_eq!(h.status("web").phase.as_deref(), Some("Pending"));
    }
}
