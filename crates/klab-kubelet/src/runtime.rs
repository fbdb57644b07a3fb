//! The simulated machine: boot id, image store and the container runtime's process table.
//!
//! This is the node's durable state. It outlives the kubelet process (containers keep running when
//! the kubelet stops) but not the power: a power-off ends every running container (reported after
//! boot as exit code 255, reason `Unknown`, as containerd does for a lost task) and kills every
//! sandbox; a power-on brings a new boot id. Container exits are evaluated lazily from deadlines
//! (`advance(now)`), so nothing needs to run on the node for a container to finish; while the
//! machine is frozen no deadline passes (they are shifted by the frozen span on thaw).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::program::{Lifetime, OnSigterm, Program};

/// Exit code of a SIGKILLed process.
pub const EXIT_SIGKILL: i32 = 137;
/// How many removed pods a machine remembers for their logs.
pub const REMOVED_KEPT: usize = 64;
/// Exit code containerd reports for a task lost in a power failure.
pub const EXIT_LOST: i32 = 255;

pub(crate) fn sd(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// `t + d`, saturating at the end of representable time (a `sleep 1e12` must not panic).
pub(crate) fn after(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(sd(d)).unwrap_or(Timestamp::MAX)
}

fn shift(t: &mut Timestamp, span: SignedDuration) {
    *t = t.checked_add(span).unwrap_or(Timestamp::MAX);
}

/// A finished container instance.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Terminated {
    pub exit_code: i32,
    /// `Completed` (0), `Error` (non-zero), `Unknown` (lost in a power failure).
    pub reason: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub container_id: String,
    /// `state.terminated.message` (set for kubelet-synthesised states).
    pub message: Option<String>,
}

/// The signal state of a running container that is being stopped.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stopping {
    /// When the program reacts to SIGTERM by exiting (and with which code), if it does.
    pub term_exit: Option<(Timestamp, i32)>,
    /// When SIGKILL is due (`None` after the stop request was abandoned by a dying kubelet).
    pub kill_at: Option<Timestamp>,
}

/// State of a container instance in the runtime.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum RtState {
    Running {
        started_at: Timestamp,
        /// When the program ends on its own.
        natural_exit: Option<(Timestamp, i32)>,
        stopping: Option<Stopping>,
    },
    Exited(Terminated),
}

/// A container as the runtime knows it: the current instance plus the previous one.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RtContainer {
    pub name: String,
    pub image: String,
    pub container_id: String,
    /// Number of instances created before the current one (the API `restartCount`).
    pub restart_count: i32,
    pub state: RtState,
    /// The instance before the current one (API `lastState.terminated`).
    pub previous: Option<Terminated>,
    /// Hash of the container spec the instance was created from.
    pub spec_hash: u64,
    /// The simulated process (how it ends, how it reacts to SIGTERM).
    pub program: Program,
    /// The attempt of the pod sandbox the current instance was started in (`None`: unknown, e.g.
    /// remembered from before the machine lost its state). Init containers that completed in an
    /// earlier sandbox run again in a new one.
    pub sandbox_attempt: Option<u32>,
    /// Files written into the instance's writable layer by exec'd commands (`echo x > f`), by
    /// absolute path; a new instance starts without them.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The running instance's resource usage (`None` until the kubelet sets it at start).
    #[serde(default)]
    pub usage: Option<crate::usage::Model>,
}

impl RtContainer {
    pub fn is_running(&self) -> bool {
        matches!(self.state, RtState::Running { .. })
    }
}

/// A pod sandbox; it belongs to one boot of the machine.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sandbox {
    pub boot_id: String,
    pub ready_at: Timestamp,
    pub attempt: u32,
}

/// A pod as the runtime knows it (sandbox + containers), keyed by pod UID.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RuntimePod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub sandbox: Option<Sandbox>,
    pub pod_ip: String,
    /// Boxed: a map's node has room for eleven entries, and most pods have one container.
    pub containers: BTreeMap<String, Box<RtContainer>>,
    /// What the pod's emptyDir volumes hold (volume → usage model, only `ephemeral_storage` and
    /// its growth are read), from its `usage.klab.dev/volume.<name>` annotations.
    #[serde(default)]
    pub volume_usage: BTreeMap<String, crate::usage::Model>,
}

impl RuntimePod {
    pub fn any_running(&self) -> bool {
        self.containers.values().any(|c| c.is_running())
    }

    /// The earliest pending transition of this pod's containers (see [`Machine::advance`]).
    pub fn next_transition(&self) -> Option<Timestamp> {
        let mut best: Option<Timestamp> = None;
        let mut consider = |t: Timestamp| best = Some(best.map_or(t, |b: Timestamp| b.min(t)));
        for c in self.containers.values() {
            if let RtState::Running {
                natural_exit,
                stopping,
                ..
            } = &c.state
            {
                if let Some((t, _)) = natural_exit {
                    consider(*t);
                }
                if let Some(s) = stopping {
                    if let Some((t, _)) = s.term_exit {
                        consider(t);
                    }
                    if let Some(t) = s.kill_at {
                        consider(t);
                    }
                }
                if let Some(t) = c.usage.as_ref().and_then(crate::usage::Model::oom_at) {
                    consider(t);
                }
            }
        }
        best
    }
}

/// The simulated machine.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    pub boot_id: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub powered: bool,
    pub frozen_since: Option<Timestamp>,
    /// The images pulled on this machine, with their sizes and use (the image GC's records).
    #[serde(default)]
    pub images: crate::images::ImageStore,
    pub pods: BTreeMap<String, RuntimePod>,
    /// Pods removed after all their containers exited, most recent last (for their logs).
    #[serde(default)]
    pub removed: std::collections::VecDeque<RuntimePod>,
    /// What a node fault makes an eviction signal observe (signal name → available), overriding
    /// the usage model (a host process eating memory, a filling disk).
    #[serde(default)]
    pub available_override: BTreeMap<String, u64>,
    /// CPU time of container instances that ended, nanoseconds: with the running instances'
    /// counters, the node's cumulative CPU (`node_cpu_usage_seconds_total`).
    #[serde(default)]
    pub cpu_ns_retired: u64,
    /// Since when the container runtime has not answered (`runtime-down`): the kubelet's
    /// runtime status goes stale and its Ready condition reports it.
    #[serde(default)]
    pub runtime_down_since: Option<Timestamp>,
    /// Conditions a `node-condition` fault makes the kubelet report, by type, until cleared.
    #[serde(default)]
    pub condition_overrides: BTreeMap<String, crate::node_status::ConditionOverride>,
    /// Types whose fault was cleared and that the kubelet removes from its Node's status (not
    /// its own four); forgotten once the Node no longer shows them.
    #[serde(default)]
    pub cleared_conditions: BTreeSet<String>,
    /// Images whose pulls fail on this machine (`image-pull-fail`), by normalized reference,
    /// with the error the runtime answers.
    #[serde(default)]
    pub pull_failures: BTreeMap<String, String>,
    /// What the system daemons use while the machine is up (none unless the node sets it).
    #[serde(default)]
    pub system: crate::usage::SystemDaemons,
    /// When the machine last booted (`None` while off or before the node set it): the system
    /// daemons have used CPU since.
    #[serde(default)]
    pub booted_at: Option<Timestamp>,
    /// A count of changes: bumped when time changes a container's state ([`Machine::advance`])
    /// and by whoever changes the machine from outside the kubelet's pod loop (a fault, an exec
    /// signalling PID 1). The pod loop notes it after each pass; a change between two passes
    /// (even a container's exit applied by a log or stats read that advanced the machine) makes
    /// the next pass look at every pod, not only at those whose own input changed.
    #[serde(skip)]
    pub changes: u64,
    next_ip: u32,
    ip_prefix: String,
}

impl Machine {
    /// A powered-on machine. Pod IPs are handed out from `<ip_prefix>.<n>`.
    pub fn new(
        boot_id: String,
        machine_id: String,
        system_uuid: String,
        ip_prefix: String,
    ) -> Self {
        Machine {
            boot_id,
            machine_id,
            system_uuid,
            powered: true,
            frozen_since: None,
            images: Default::default(),
            pods: BTreeMap::new(),
            removed: Default::default(),
            available_override: BTreeMap::new(),
            cpu_ns_retired: 0,
            runtime_down_since: None,
            condition_overrides: BTreeMap::new(),
            cleared_conditions: Default::default(),
            pull_failures: BTreeMap::new(),
            system: Default::default(),
            booted_at: None,
            changes: 0,
            next_ip: 2,
            ip_prefix,
        }
    }

    pub fn frozen(&self) -> bool {
        self.frozen_since.is_some()
    }

    /// Applies every container transition due at or before `now` (exits, SIGTERM reactions, SIGKILLs).
    pub fn advance(&mut self, now: Timestamp) {
        if self.frozen() || !self.powered {
            return;
        }
        for pod in self.pods.values_mut() {
            for c in pod.containers.values_mut() {
                if let RtState::Running {
                    started_at,
                    natural_exit,
                    stopping,
                } = &c.state
                {
                    let mut candidates: Vec<(Timestamp, i32, bool)> = Vec::new();
                    if let Some(e) = natural_exit {
                        candidates.push((e.0, e.1, false));
                    }
                    if let Some(s) = stopping {
                        if let Some(e) = s.term_exit {
                            candidates.push((e.0, e.1, false));
                        }
                        if let Some(k) = s.kill_at {
                            candidates.push((k, EXIT_SIGKILL, false));
                        }
                    }
                    // The memory cgroup's OOM killer: SIGKILL, reported as OOMKilled.
                    if let Some(oom) = c.usage.as_ref().and_then(crate::usage::Model::oom_at) {
                        candidates.push((oom, EXIT_SIGKILL, true));
                    }
                    // Earliest wins; at a tie the program's own exit precedes the signal, and
                    // the kubelet's SIGKILL the OOM killer's.
                    if let Some(&(at, code, oom)) = candidates.iter().min_by_key(|(t, _, _)| *t)
                        && at <= now
                    {
                        self.changes = self.changes.wrapping_add(1);
                        let used = c.usage.as_ref().map_or(0, |u| u.cpu_ns_at(at));
                        self.cpu_ns_retired = self.cpu_ns_retired.saturating_add(used);
                        c.state = RtState::Exited(Terminated {
                            exit_code: code,
                            reason: if oom {
                                crate::usage::REASON_OOM_KILLED.into()
                            } else if code == 0 {
                                "Completed".into()
                            } else {
                                "Error".into()
                            },
                            started_at: *started_at,
                            finished_at: at,
                            container_id: c.container_id.clone(),
                            message: None,
                        });
                    }
                }
            }
        }
    }

    /// The earliest pending container transition (for the kubelet's wake-up timer).
    pub fn next_transition(&self) -> Option<Timestamp> {
        if self.frozen() || !self.powered {
            return None;
        }
        self.pods
            .values()
            .filter_map(RuntimePod::next_transition)
            .min()
    }

    /// Seeds the runtime's memory of a pod whose containers ran before the machine lost its state:
    /// `(name, image, restart_count, container_id, started_at)` per container, each now exited with
    /// the state a power loss leaves (exit 255, reason `Unknown`). No sandbox is recorded.
    pub fn seed_lost_containers(
        &mut self,
        uid: &str,
        namespace: &str,
        name: &str,
        containers: Vec<(String, String, i32, String, Timestamp)>,
        now: Timestamp,
    ) {
        let pod = self
            .pods
            .entry(uid.to_string())
            .or_insert_with(|| RuntimePod {
                uid: uid.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                sandbox: None,
                pod_ip: String::new(),
                containers: BTreeMap::new(),
                volume_usage: BTreeMap::new(),
            });
        for (cname, image, restart_count, container_id, started_at) in containers {
            let exited = Terminated {
                exit_code: 255,
                reason: "Unknown".into(),
                started_at,
                finished_at: now,
                container_id: container_id.clone(),
                message: None,
            };
            pod.containers
                .entry(cname.clone())
                .or_insert(Box::new(RtContainer {
                    name: cname,
                    image,
                    container_id,
                    restart_count,
                    state: RtState::Exited(exited),
                    previous: None,
                    spec_hash: 0,
                    program: Program::from_command(&[], &[]),
                    sandbox_attempt: None,
                    files: BTreeMap::new(),
                    usage: None,
                }));
        }
    }

    /// Creates (or re-creates) the sandbox of a pod; ready after `delay`.
    pub fn run_sandbox(
        &mut self,
        uid: &str,
        namespace: &str,
        name: &str,
        now: Timestamp,
        delay: Duration,
    ) {
        let ip = format!("{}.{}", self.ip_prefix, self.next_ip);
        self.next_ip = if self.next_ip >= 254 {
            2
        } else {
            self.next_ip + 1
        };
        let boot_id = self.boot_id.clone();
        let pod = self
            .pods
            .entry(uid.to_string())
            .or_insert_with(|| RuntimePod {
                uid: uid.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                sandbox: None,
                pod_ip: String::new(),
                containers: BTreeMap::new(),
                volume_usage: BTreeMap::new(),
            });
        let attempt = pod.sandbox.as_ref().map_or(0, |s| s.attempt + 1);
        pod.sandbox = Some(Sandbox {
            boot_id,
            ready_at: after(now, delay),
            attempt,
        });
        pod.pod_ip = ip;
    }

    /// Whether the pod's sandbox exists in this boot and is ready at `now`.
    pub fn sandbox_ready(&self, uid: &str, now: Timestamp) -> bool {
        self.pods
            .get(uid)
            .and_then(|p| p.sandbox.as_ref())
            .is_some_and(|s| s.boot_id == self.boot_id && s.ready_at <= now)
    }

    /// Starts a new instance of a container at `now` running `program`.
    #[allow(clippy::too_many_arguments)]
    pub fn start_container(
        &mut self,
        uid: &str,
        name: &str,
        image: &str,
        program: Program,
        spec_hash: u64,
        container_id: String,
        now: Timestamp,
    ) {
        let Some(pod) = self.pods.get_mut(uid) else {
            return;
        };
        let sandbox_attempt = pod.sandbox.as_ref().map(|s| s.attempt);
        let natural_exit = match program.lifetime {
            Lifetime::Exits { after: d, code } => Some((after(now, d), code)),
            Lifetime::Forever => None,
        };
        let state = RtState::Running {
            started_at: now,
            natural_exit,
            stopping: None,
        };
        match pod.containers.get_mut(name) {
            Some(c) => {
                if let RtState::Exited(t) = &c.state {
                    c.previous = Some(t.clone());
                }
                c.restart_count += 1;
                c.state = state;
                c.container_id = container_id;
                c.image = image.to_string();
                c.spec_hash = spec_hash;
                c.program = program;
                c.sandbox_attempt = sandbox_attempt;
                c.files.clear();
                c.usage = None;
            }
            None => {
                pod.containers.insert(
                    name.to_string(),
                    Box::new(RtContainer {
                        name: name.to_string(),
                        image: image.to_string(),
                        container_id,
                        restart_count: 0,
                        state,
                        previous: None,
                        spec_hash,
                        program,
                        sandbox_attempt,
                        files: BTreeMap::new(),
                        usage: None,
                    }),
                );
            }
        }
    }

    /// CRI `StopContainer(timeout = grace)`: SIGTERM now, SIGKILL after `grace`. A second call keeps
    /// the earlier SIGKILL deadline.
    pub fn stop_container(
        &mut self,
        uid: &str,
        name: &str,
        grace: Duration,
        sigterm_exit: Duration,
        now: Timestamp,
    ) {
        let Some(c) = self
            .pods
            .get_mut(uid)
            .and_then(|p| p.containers.get_mut(name))
        else {
            return;
        };
        let on_sigterm = c.program.on_sigterm;
        if let RtState::Running { stopping, .. } = &mut c.state {
            let term_exit = match on_sigterm {
                OnSigterm::Ignore => None,
                OnSigterm::ExitGracefully { code } => Some((after(now, sigterm_exit), code)),
                OnSigterm::Exit { code } => Some((now, code)),
            };
            let kill_at = after(now, grace);
            let (term_exit, kill_at) = match stopping.take() {
                Some(old) => (
                    match (old.term_exit, term_exit) {
                        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
                        (a, b) => a.or(b),
                    },
                    Some(old.kill_at.map_or(kill_at, |k| k.min(kill_at))),
                ),
                None => (term_exit, Some(kill_at)),
            };
            *stopping = Some(Stopping { term_exit, kill_at });
        }
    }

    /// A signal sent to the container's PID 1 from inside the container (`kill 1` in an exec).
    /// PID 1 gets no default signal actions from the kernel: it reacts only as its program
    /// handles the signal (a server exits, a shell with a `trap` exits, `sleep` ignores it), and
    /// SIGKILL from inside the namespace does nothing.
    pub fn signal_pid1(&mut self, uid: &str, name: &str, signal: &str, now: Timestamp) {
        let Some(c) = self
            .pods
            .get_mut(uid)
            .and_then(|p| p.containers.get_mut(name))
        else {
            return;
        };
        let on_sigterm = c.program.on_sigterm;
        if !matches!(
            signal,
            "TERM" | "15" | "INT" | "2" | "QUIT" | "3" | "HUP" | "1"
        ) {
            return;
        }
        if let RtState::Running { natural_exit, .. } = &mut c.state {
            let exit = match on_sigterm {
                OnSigterm::Ignore => return,
                OnSigterm::ExitGracefully { code } | OnSigterm::Exit { code } => (now, code),
            };
            *natural_exit = Some(match natural_exit {
                Some(e) if e.0 <= now => *e,
                _ => exit,
            });
        }
        self.advance(now);
    }

    /// Sets the usage model of a running container instance (at its start, or when its pod's
    /// usage annotation changes). A container that is not running keeps none.
    pub fn set_usage(&mut self, uid: &str, name: &str, model: crate::usage::Model) {
        if let Some(c) = self
            .pods
            .get_mut(uid)
            .and_then(|p| p.containers.get_mut(name))
            && c.is_running()
        {
            c.usage = Some(model);
        }
    }

    /// The container log manager's pass at `now` over every running container (upstream lists
    /// only running containers: an exited one writes nothing more).
    pub fn rotate_logs(&mut self, now: Timestamp, policy: crate::usage::LogRotation) {
        for c in self
            .pods
            .values_mut()
            .flat_map(|p| p.containers.values_mut())
        {
            if c.is_running()
                && let Some(u) = c.usage.as_mut()
            {
                u.rotate_logs(now, policy);
            }
        }
    }

    /// Running containers with their usage model, in pod UID then container name order.
    pub fn running_usage(
        &self,
    ) -> impl Iterator<Item = (&RuntimePod, &RtContainer, &crate::usage::Model)> {
        self.pods.values().flat_map(|p| {
            p.containers
                .values()
                .filter(|c| c.is_running())
                .filter_map(move |c| c.usage.as_ref().map(|u| (p, &**c, u)))
        })
    }

    /// The node's totals at `now` over every running container: (memory working set,
    /// ephemeral storage, PIDs).
    pub fn usage_totals(&self, now: Timestamp) -> (u64, u64, u64) {
        self.running_usage()
            .fold((0u64, 0u64, 0u64), |(m, e, p), (_, _, u)| {
                (
                    m.saturating_add(u.memory_at(now)),
                    e.saturating_add(u.ephemeral_storage_at(now)),
                    p.saturating_add(u.spec.pids),
                )
            })
    }

    /// Bytes used on the node's one disk at `now` (nodefs and imagefs alike): the running
    /// containers' ephemeral storage, the pods' emptyDir volumes and the images.
    pub fn disk_used(&self, now: Timestamp) -> u64 {
        let volumes = self
            .pods
            .values()
            .flat_map(|p| p.volume_usage.values())
            .fold(0u64, |a, m| a.saturating_add(m.ephemeral_storage_at(now)));
        self.usage_totals(now)
            .1
            .saturating_add(self.images.total_bytes())
            .saturating_add(volumes)
    }

    /// The images the runtime's containers refer to (running or exited, as `ListContainers`
    /// reports them): what image GC must keep.
    pub fn images_in_use(&self) -> BTreeSet<String> {
        self.pods
            .values()
            .flat_map(|p| p.containers.values())
            .map(|c| crate::pod_status::normalize_image(&c.image))
            .collect()
    }

    /// The kubelet died: in-flight `StopContainer` calls are abandoned, so no SIGKILL will come.
    /// (A SIGTERM already delivered has had its effect.)
    pub fn abandon_stops(&mut self) {
        for pod in self.pods.values_mut() {
            for c in pod.containers.values_mut() {
                if let RtState::Running {
                    stopping: Some(s), ..
                } = &mut c.state
                {
                    s.kill_at = None;
                }
            }
        }
    }

    /// Removes a pod whose containers have all exited (sandbox stopped and removed). Its exited
    /// containers are remembered (the last [`REMOVED_KEPT`]) so that their logs can still be
    /// read, as the logs of a completed pod's containers can until the pod is deleted.
    pub fn remove_pod(&mut self, uid: &str) {
        if let Some(p) = self.pods.remove(uid) {
            self.removed.retain(|r| r.uid != uid);
            self.removed.push_back(p);
            while self.removed.len() > REMOVED_KEPT {
                self.removed.pop_front();
            }
        }
    }

    /// A pod the runtime runs, or one it removed recently.
    pub fn pod_or_removed(&self, uid: &str) -> Option<&RuntimePod> {
        self.pods
            .get(uid)
            .or_else(|| self.removed.iter().rev().find(|p| p.uid == uid))
    }

    /// Power failure at `now`: every running container is lost (exit 255 `Unknown` after boot).
    pub fn power_off(&mut self, now: Timestamp) {
        self.advance(now);
        for pod in self.pods.values_mut() {
            for c in pod.containers.values_mut() {
                if let RtState::Running { started_at, .. } = &c.state {
                    let used = c.usage.as_ref().map_or(0, |u| u.cpu_ns_at(now));
                    self.cpu_ns_retired = self.cpu_ns_retired.saturating_add(used);
                    c.state = RtState::Exited(Terminated {
                        exit_code: EXIT_LOST,
                        reason: "Unknown".into(),
                        started_at: *started_at,
                        finished_at: now,
                        container_id: c.container_id.clone(),
                        message: None,
                    });
                }
            }
        }
        // The system daemons' CPU is kept in the node's counter, which never goes back.
        let system = self.system_cpu_ns_at(now);
        self.cpu_ns_retired = self.cpu_ns_retired.saturating_add(system);
        self.booted_at = None;
        self.powered = false;
        self.frozen_since = None;
    }

    /// Cumulative CPU the system daemons used since the machine booted, nanoseconds.
    pub fn system_cpu_ns_at(&self, now: Timestamp) -> u64 {
        let Some(booted) = self.booted_at.filter(|_| self.powered) else {
            return 0;
        };
        let elapsed = now.duration_since(booted).as_millis().max(0);
        let elapsed = u64::try_from(elapsed).unwrap_or(u64::MAX);
        crate::usage::SystemDaemons::cpu_ns(self.system.total(), elapsed)
    }

    /// Boot with a new boot id. Sandboxes of the previous boot are dead; container records remain.
    pub fn power_on(&mut self, boot_id: String) {
        self.boot_id = boot_id;
        self.powered = true;
    }

    pub fn freeze(&mut self, now: Timestamp) {
        if self.frozen_since.is_none() && self.powered {
            self.advance(now);
            self.frozen_since = Some(now);
        }
    }

    /// Thaw: every pending deadline moves by the frozen span, so nothing progressed meanwhile.
    pub fn thaw(&mut self, now: Timestamp) {
        let Some(since) = self.frozen_since.take() else {
            return;
        };
        let span = now.duration_since(since);
        for pod in self.pods.values_mut() {
            if let Some(s) = &mut pod.sandbox
                && s.ready_at > since
            {
                shift(&mut s.ready_at, span);
            }
            for c in pod.containers.values_mut() {
                if let RtState::Running {
                    natural_exit,
                    stopping,
                    ..
                } = &mut c.state
                {
                    if let Some((t, _)) = natural_exit {
                        shift(t, span);
                    }
                    if let Some(u) = &mut c.usage {
                        shift(&mut u.since, span);
                    }
                    if let Some(s) = stopping {
                        if let Some((t, _)) = &mut s.term_exit {
                            shift(t, span);
                        }
                        if let Some(t) = &mut s.kill_at {
                            shift(t, span);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn machine() -> Machine {
        let mut m = Machine::new("b-1".into(), "m".into(), "s".into(), "10.244.5".into());
        m.run_sandbox("u", "default", "p", t(0), Duration::from_secs(1));
        m
    }

    fn state(m: &Machine) -> RtState {
        m.pods["u"].containers["c"].state.clone()
    }

    fn exited(m: &Machine) -> (i32, Timestamp) {
        match state(m) {
            RtState::Exited(t) => (t.exit_code, t.finished_at),
            s => panic!("not exited: {s:?}"),
        }
    }

    #[test]
    fn sandbox_ready_after_delay_and_dead_after_reboot() {
        let mut m = machine();
        assert!(!m.sandbox_ready("u", t(0)));
        assert!(m.sandbox_ready("u", t(1)));
        m.power_off(t(5));
        m.power_on("b-2".into());
        assert!(!m.sandbox_ready("u", t(10)));
    }

    #[test]
    fn sleep_program_exits_lazily_and_ignores_sigterm() {
        let mut m = machine();
        let p = Program::from_command(&["sleep".into(), "30".into()], &[]);
        m.start_container("u", "c", "busybox", p, 1, "id1".into(), t(1));
        assert_eq!(m.next_transition(), Some(t(31)));
        m.advance(t(30));
        assert!(m.pods["u"].containers["c"].is_running());
        m.advance(t(40));
        assert_eq!(exited(&m), (0, t(31)));
        // Restarted: restartCount 1, previous instance kept.
        m.start_container("u", "c", "busybox", p, 1, "id2".into(), t(41));
        // Graceful stop with 5 s: SIGTERM ignored, SIGKILL at +5 → 137.
        m.stop_container("u", "c", Duration::from_secs(5), Duration::ZERO, t(50));
        m.advance(t(60));
        assert_eq!(exited(&m), (137, t(55)));
        let c = &m.pods["u"].containers["c"];
        assert_eq!(c.restart_count, 1);
        assert_eq!(c.previous.as_ref().unwrap().finished_at, t(31));
    }

    #[test]
    fn server_exits_on_sigterm_and_power_loss_reports_255() {
        let mut m = machine();
        let server = Program::from_command(&[], &[]);
        m.start_container("u", "c", "nginx", server, 1, "id1".into(), t(1));
        m.stop_container(
            "u",
            "c",
            Duration::from_secs(30),
            Duration::from_secs(3),
            t(10),
        );
        m.advance(t(100));
        assert_eq!(exited(&m), (0, t(13)));
        m.start_container("u", "c", "nginx", server, 1, "id2".into(), t(100));
        m.power_off(t(200));
        let (code, at) = exited(&m);
        assert_eq!((code, at), (255, t(200)));
        match state(&m) {
            RtState::Exited(t) => assert_eq!(t.reason, "Unknown"),
            _ => unreachable!(),
        }
    }

    #[test]
    fn freeze_shifts_deadlines_and_abandoned_stop_never_kills() {
        let mut m = machine();
        let p = Program::from_command(&["sleep".into(), "10".into()], &[]);
        m.start_container("u", "c", "busybox", p, 1, "id".into(), t(0));
        m.freeze(t(5));
        m.advance(t(100));
        assert!(
            m.pods["u"].containers["c"].is_running(),
            "nothing progresses while frozen"
        );
        m.thaw(t(100));
        assert_eq!(m.next_transition(), Some(t(105)));
        let p2 = Program::from_command(&["sleep".into(), "infinity".into()], &[]);
        m.start_container("u", "d", "busybox", p2, 1, "id".into(), t(100));
        m.stop_container("u", "d", Duration::from_secs(30), Duration::ZERO, t(100));
        m.abandon_stops();
        m.advance(t(1000));
        assert!(m.pods["u"].containers["d"].is_running());
    }
}
