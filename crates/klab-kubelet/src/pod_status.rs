//! Pure pod-side decisions: kubelet admission (resources, node affinity, NoExecute taints),
//! the pod phase (`getPhase`), container statuses and the kubelet-owned pod conditions with
//! upstream's reasons and messages, merged over the conditions other components own.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Node, NodeSelectorRequirement, Pod, PodCondition, PodIP, PodSpec,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use klab_api::names;

use crate::node_status::Allocatable;
use crate::quantity;
use crate::runtime::Terminated;

pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_RUNNING: &str = "Running";
pub const PHASE_SUCCEEDED: &str = "Succeeded";
pub const PHASE_FAILED: &str = "Failed";

pub fn is_terminal_phase(phase: Option<&str>) -> bool {
    matches!(phase, Some(PHASE_SUCCEEDED) | Some(PHASE_FAILED))
}

/// A kubelet admission rejection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

/// Requests of a pod as integers: max(sum of regular containers, largest init container).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
}

pub fn pod_requests(spec: &PodSpec) -> Requests {
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let req = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let get = |k: &str, f: fn(&str) -> Option<u64>| {
            req.and_then(|r| r.get(k))
                .and_then(|q| f(&q.0))
                .unwrap_or(0)
        };
        Requests {
            cpu_millis: get("cpu", quantity::cpu_millis),
            memory_bytes: get("memory", quantity::bytes),
            ephemeral_storage_bytes: get("ephemeral-storage", quantity::bytes),
        }
    };
    let mut sum = Requests::default();
    for c in &spec.containers {
        let r = of(c);
        sum.cpu_millis += r.cpu_millis;
        sum.memory_bytes += r.memory_bytes;
        sum.ephemeral_storage_bytes += r.ephemeral_storage_bytes;
    }
    for c in spec.init_containers.iter().flatten() {
        let r = of(c);
        sum.cpu_millis = sum.cpu_millis.max(r.cpu_millis);
        sum.memory_bytes = sum.memory_bytes.max(r.memory_bytes);
        sum.ephemeral_storage_bytes = sum.ephemeral_storage_bytes.max(r.ephemeral_storage_bytes);
    }
    sum
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.clone().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(x)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|x| x.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" { v > x } else { v < x }
        }
        _ => false,
    }
}

/// `nodeSelector` and required node affinity against the node's labels (and `metadata.name` field).
pub fn node_affinity_matches(spec: &PodSpec, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if let Some(sel) = &spec.node_selector
        && !sel.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let Some(required) = required else {
        return true;
    };
    let node_name = node.metadata.name.clone().unwrap_or_default();
    // Terms are ORed; requirements inside a term are ANDed; an empty term matches nothing.
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.clone().unwrap_or_default();
        let fields = term.match_fields.clone().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            return false;
        }
        exprs
            .iter()
            .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
            && fields
                .iter()
                .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(&node_name)))
    })
}

/// Kubelet admission of `pod` given the already admitted, non-terminal pods (§4.1): resources
/// (pods, cpu, memory, ephemeral-storage), node affinity/selector, untolerated NoExecute taints.
pub fn admit(
    pod: &Pod,
    admitted: &[&Pod],
    node: &Node,
    alloc: &Allocatable,
) -> Result<(), Rejection> {
    let Some(spec) = pod.spec.as_ref() else {
        return Err(Rejection {
            reason: "UnexpectedAdmissionError".into(),
            message: "pod has no spec".into(),
        });
    };
    let insufficient = |resource: &str, requested: u64, used: u64, capacity: u64| Rejection {
        reason: format!("OutOf{resource}"),
        message: format!(
            "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    };
    let used_pods = admitted.len() as u64;
    if used_pods + 1 > alloc.pods.max(0) as u64 {
        return Err(insufficient("pods", 1, used_pods, alloc.pods.max(0) as u64));
    }
    let want = pod_requests(spec);
    let mut used = Requests::default();
    for p in admitted {
        if let Some(s) = p.spec.as_ref() {
            let r = pod_requests(s);
            used.cpu_millis += r.cpu_millis;
            used.memory_bytes += r.memory_bytes;
            used.ephemeral_storage_bytes += r.ephemeral_storage_bytes;
        }
    }
    if want.cpu_millis > 0 && used.cpu_millis + want.cpu_millis > alloc.cpu_millis {
        return Err(insufficient(
            "cpu",
            want.cpu_millis,
            used.cpu_millis,
            alloc.cpu_millis,
        ));
    }
    if want.memory_bytes > 0 && used.memory_bytes + want.memory_bytes > alloc.memory_bytes {
        return Err(insufficient(
            "memory",
            want.memory_bytes,
            used.memory_bytes,
            alloc.memory_bytes,
        ));
    }
    if want.ephemeral_storage_bytes > 0
        && used.ephemeral_storage_bytes + want.ephemeral_storage_bytes
            > alloc.ephemeral_storage_bytes
    {
        return Err(insufficient(
            "ephemeral-storage",
            want.ephemeral_storage_bytes,
            used.ephemeral_storage_bytes,
            alloc.ephemeral_storage_bytes,
        ));
    }
    if !node_affinity_matches(spec, node) {
        return Err(Rejection {
            reason: "NodeAffinity".into(),
            message: "Predicate NodeAffinity failed: node(s) didn't match Node selector".into(),
        });
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let tolerations = spec.tolerations.clone().unwrap_or_default();
    if !klab_api::taints::untolerated(&taints, &tolerations, &[names::EFFECT_NO_EXECUTE]).is_empty()
    {
        return Err(Rejection {
            reason: "TaintToleration".into(),
            message:
                "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"
                    .into(),
        });
    }
    Ok(())
}

/// The status written for a rejected pod.
pub fn rejected_status(old: &PodStatus, r: &Rejection) -> PodStatus {
    PodStatus {
        phase: Some(PHASE_FAILED.into()),
        reason: Some(r.reason.clone()),
        message: Some(format!("Pod was rejected: {}", r.message)),
        ..old.clone()
    }
}

/// A container's state as the kubelet reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum CState {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: Timestamp,
    },
    Terminated(Terminated),
}

/// Everything the status generator needs to know about one container.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerView {
    pub name: String,
    /// Normalized image reference (`docker.io/library/nginx:latest`).
    pub image: String,
    pub image_id: String,
    pub container_id: Option<String>,
    pub state: CState,
    pub last: Option<Terminated>,
    pub restart_count: i32,
    pub ready: bool,
    /// Running, and its startup probe (if any) succeeded: containerStatuses[].started.
    pub started: bool,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub sidecar: bool,
}

impl ContainerView {
    fn counts_stopped(&self) -> Option<bool> {
        // Some(succeeded) when the container counts as stopped.
        match &self.state {
            CState::Terminated(t) => Some(t.exit_code == 0),
            CState::Waiting { .. } => self.last.as_ref().map(|t| t.exit_code == 0),
            CState::Running { .. } => None,
        }
    }
}

/// Upstream `getPhase` (§4.3). `pod_is_terminal`: the kubelet is terminating the pod
/// (deletion, eviction, shutdown) and every container has stopped.
pub fn get_phase(
    restart_policy: &str,
    init: &[ContainerView],
    regular: &[ContainerView],
    pod_is_terminal: bool,
) -> &'static str {
    let mut init_pending = 0;
    let mut init_failed = 0;
    for c in init {
        match &c.state {
            // A running sidecar has done its init part; a stopped one is ignored.
            _ if c.sidecar && !matches!(c.state, CState::Waiting { .. }) => {}
            CState::Terminated(t) if t.exit_code == 0 => {}
            CState::Terminated(_) => init_failed += 1,
            CState::Waiting { .. } if c.last.as_ref().is_some_and(|t| t.exit_code != 0) => {
                init_failed += 1
            }
            _ => init_pending += 1,
        }
    }
    if init_failed > 0 && restart_policy == "Never" {
        return PHASE_FAILED;
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    let mut ever_started = false;
    for c in regular {
        match &c.state {
            CState::Running { .. } => {
                running += 1;
                ever_started = true;
            }
            _ => match c.counts_stopped() {
                Some(ok) => {
                    stopped += 1;
                    ever_started = true;
                    if ok {
                        succeeded += 1;
                    }
                }
                None => waiting += 1,
            },
        }
    }
    if (init_pending > 0 || init_failed > 0) && !ever_started || waiting > 0 {
        return PHASE_PENDING;
    }
    if running > 0 {
        return PHASE_RUNNING;
    }
    if stopped > 0 {
        if pod_is_terminal {
            return if stopped == succeeded {
                PHASE_SUCCEEDED
            } else {
                PHASE_FAILED
            };
        }
        return match restart_policy {
            "Always" => PHASE_RUNNING,
            _ if stopped == succeeded => PHASE_SUCCEEDED,
            "Never" => PHASE_FAILED,
            _ => PHASE_RUNNING,
        };
    }
    PHASE_PENDING
}

/// Go `%v` of a string slice: `[a b]`.
fn go_list(v: &[String]) -> String {
    format!("[{}]", v.join(" "))
}

fn condition(type_: &str, ok: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ok { "True".into() } else { "False".into() },
        reason: reason.map(str::to_string),
        message,
        ..Default::default()
    }
}

/// Everything about a pod the status generator needs besides the containers.
#[derive(Clone, Debug)]
pub struct PodFacts {
    pub sandbox_ready: bool,
    /// The kubelet finished terminating the pod (deletion/eviction): terminal phase is forced.
    pub pod_is_terminal: bool,
    pub pod_ip: Option<String>,
    pub host_ip: String,
    pub start_time: Option<Time>,
}

fn to_api_state(s: &CState) -> ContainerState {
    match s {
        CState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..Default::default()
        },
        CState::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started_at)),
            }),
            ..Default::default()
        },
        CState::Terminated(t) => ContainerState {
            terminated: Some(to_api_terminated(t)),
            ..Default::default()
        },
    }
}

fn to_api_terminated(t: &Terminated) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        reason: Some(t.reason.clone()),
        started_at: Some(Time(t.started_at)),
        finished_at: Some(Time(t.finished_at)),
        message: t.message.clone(),
        container_id: if t.container_id.is_empty() {
            None
        } else {
            Some(t.container_id.clone())
        },
        ..Default::default()
    }
}

fn to_api_status(c: &ContainerView) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        container_id: c.container_id.clone(),
        ready: c.ready,
        restart_count: c.restart_count,
        started: Some(c.started),
        state: Some(to_api_state(&c.state)),
        last_state: Some(c.last.as_ref().map_or_else(ContainerState::default, |t| {
            ContainerState {
                terminated: Some(to_api_terminated(t)),
                ..Default::default()
            }
        })),
        ..Default::default()
    }
}

/// The kubelet-owned condition types (`PodConditionsByKubelet`).
pub const KUBELET_OWNED: &[&str] = &[
    names::POD_COND_SCHEDULED,
    names::POD_COND_READY,
    names::POD_COND_INITIALIZED,
    names::POD_COND_CONTAINERS_READY,
    names::POD_COND_READY_TO_START,
];

/// Generates the pod's status (`generateAPIPodStatus` + the status manager's merge): phase, the
/// kubelet-owned conditions after the conditions others own, container statuses. A terminal phase
/// already in `old` is never left.
///
/// `old` is the status to merge into (the API object's, or the last write with the conditions
/// others own taken from the API object); it is taken by value so that nothing of the pod is
/// copied beyond the status itself.
pub fn generate_status(
    spec: Option<&PodSpec>,
    old: PodStatus,
    init: &[ContainerView],
    regular: &[ContainerView],
    facts: &PodFacts,
    now: &Time,
) -> PodStatus {
    let no_spec = PodSpec::default();
    let spec = spec.unwrap_or(&no_spec);
    let policy = spec
        .restart_policy
        .clone()
        .unwrap_or_else(|| "Always".into());
    let mut phase = get_phase(&policy, init, regular, facts.pod_is_terminal);
    if is_terminal_phase(old.phase.as_deref()) {
        phase = if old.phase.as_deref() == Some(PHASE_SUCCEEDED) {
            PHASE_SUCCEEDED
        } else {
            PHASE_FAILED
        };
    }

    let incomplete_init: Vec<String> = init
        .iter()
        .filter(|c| !matches!(&c.state, CState::Terminated(t) if t.exit_code == 0))
        .filter(|c| !(c.sidecar && matches!(c.state, CState::Running { .. })))
        .map(|c| c.name.clone())
        .collect();
    let initialized = if phase == PHASE_SUCCEEDED {
        condition(
            names::POD_COND_INITIALIZED,
            true,
            Some("PodCompleted"),
            None,
        )
    } else if incomplete_init.is_empty() {
        condition(names::POD_COND_INITIALIZED, true, None, None)
    } else {
        condition(
            names::POD_COND_INITIALIZED,
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: {}",
                go_list(&incomplete_init)
            )),
        )
    };
    let unready: Vec<String> = regular
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.clone())
        .collect();
    let containers_ready = if phase == PHASE_SUCCEEDED {
        condition(
            names::POD_COND_CONTAINERS_READY,
            false,
            Some("PodCompleted"),
            None,
        )
    } else if phase == PHASE_FAILED {
        condition(
            names::POD_COND_CONTAINERS_READY,
            false,
            Some("PodFailed"),
            None,
        )
    } else if !incomplete_init.is_empty() {
        // Regular containers cannot be ready before initialization completed.
        condition(
            names::POD_COND_CONTAINERS_READY,
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                go_list(&regular.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
            )),
        )
    } else if unready.is_empty() {
        condition(names::POD_COND_CONTAINERS_READY, true, None, None)
    } else {
        condition(
            names::POD_COND_CONTAINERS_READY,
            false,
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: {}",
                go_list(&unready)
            )),
        )
    };
    let mut ready = PodCondition {
        type_: names::POD_COND_READY.into(),
        ..containers_ready.clone()
    };
    if ready.status == "True" {
        // Readiness gates: every gate's condition must be True.
        for gate in spec.readiness_gates.iter().flatten() {
            let c = old
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == gate.condition_type);
            match c {
                None => {
                    ready = condition(
                        names::POD_COND_READY,
                        false,
                        Some("ReadinessGatesNotReady"),
                        Some(format!(
                            "corresponding condition of pod readiness gate \"{}\" does not exist.",
                            gate.condition_type
                        )),
                    );
                    break;
                }
                Some(c) if c.status != "True" => {
                    ready = condition(
                        names::POD_COND_READY,
                        false,
                        Some("ReadinessGatesNotReady"),
                        Some(format!(
                            "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                            gate.condition_type, c.status
                        )),
                    );
                    break;
                }
                _ => {}
            }
        }
    }
    let kubelet_conds = vec![
        condition(
            names::POD_COND_READY_TO_START,
            facts.sandbox_ready,
            None,
            None,
        ),
        initialized,
        ready,
        containers_ready,
        condition(names::POD_COND_SCHEDULED, true, None, None),
    ];
    // Merge: conditions owned by others first (kept as they are), then the kubelet's, each keeping
    // its old lastTransitionTime when the status did not change.
    let mut conditions: Vec<PodCondition> = old
        .conditions
        .iter()
        .flatten()
        .filter(|c| !KUBELET_OWNED.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    for mut c in kubelet_conds {
        let prev = old.conditions.iter().flatten().find(|o| o.type_ == c.type_);
        c.last_transition_time = match prev {
            Some(p) if p.status == c.status => p.last_transition_time.clone(),
            _ => Some(now.clone()),
        };
        if c.type_ == names::POD_COND_SCHEDULED
            && let Some(p) = prev
        {
            c = p.clone();
        }
        conditions.push(c);
    }

    let ip = facts.pod_ip.clone();
    PodStatus {
        phase: Some(phase.into()),
        conditions: Some(conditions),
        host_ip: Some(facts.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: facts.host_ip.clone(),
        }]),
        pod_ip: ip.clone().or(old.pod_ip.clone()),
        pod_ips: ip.map(|ip| vec![PodIP { ip }]).or(old.pod_ips.clone()),
        start_time: facts.start_time.clone().or(old.start_time.clone()),
        init_container_statuses: if init.is_empty() {
            None
        } else {
            Some(init.iter().map(to_api_status).collect())
        },
        container_statuses: Some(regular.iter().map(to_api_status).collect()),
        ..old
    }
}

/// `docker.io/library/nginx:latest` from `nginx` (containerd's normalized reference).
/// Whether the API server's copy of a pod's status agrees with the status the kubelet holds for
/// it (the status manager's `needsReconcile`, negated). The conditions the kubelet owns or
/// shares (`DisruptionTarget`) are compared by type, status, reason and message, as upstream's
/// `isPodStatusByKubeletEqual` does: a transition time alone is no disagreement. Every other
/// field the kubelet holds must be in the API's copy as it is; a field the kubelet leaves unset
/// (`qosClass`, `nominatedNodeName`, set by others) is no disagreement, because its status PATCH
/// (a merge patch) would not touch it either. A disagreement is repaired by sending the
/// kubelet's status again at the next 10 s status sync.
pub fn agrees_by_kubelet(api: &PodStatus, held: &PodStatus) -> bool {
    fn by_kubelet(s: &PodStatus) -> BTreeMap<&str, (&str, Option<&str>, Option<&str>)> {
        s.conditions
            .iter()
            .flatten()
            .filter(|c| {
                KUBELET_OWNED.contains(&c.type_.as_str())
                    || c.type_ == names::POD_COND_DISRUPTION_TARGET
            })
            .map(|c| {
                (
                    c.type_.as_str(),
                    (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
                )
            })
            .collect()
    }
    fn same<T: PartialEq>(api: &Option<T>, held: &Option<T>) -> bool {
        held.is_none() || api == held
    }
    // The container times the kubelet holds carry sub-second precision that the API's copy
    // (RFC 3339 in seconds) lost: compare them as upstream's `normalizeStatus` does.
    fn seconds(t: &Option<Time>) -> Option<i64> {
        t.as_ref().map(|t| t.0.as_second())
    }
    fn in_seconds(c: &ContainerStatus) -> ContainerStatus {
        let trunc = |t: &mut Option<Time>| {
            if let Some(t) = t {
                t.0 = klab_api::clock::truncate_to_second(t.0);
            }
        };
        let mut c = c.clone();
        for s in [&mut c.state, &mut c.last_state].into_iter().flatten() {
            if let Some(r) = &mut s.running {
                trunc(&mut r.started_at);
            }
            if let Some(t) = &mut s.terminated {
                trunc(&mut t.started_at);
                trunc(&mut t.finished_at);
            }
        }
        c
    }
    fn same_containers(
        api: &Option<Vec<ContainerStatus>>,
        held: &Option<Vec<ContainerStatus>>,
    ) -> bool {
        let Some(held) = held else {
            return true;
        };
        let Some(api) = api else {
            return false;
        };
        api.len() == held.len()
            && api
                .iter()
                .zip(held)
                .all(|(a, h)| a == h || in_seconds(a) == in_seconds(h))
    }
    // Every field is named, so that a field added to the type must be decided on here.
    let PodStatus {
        conditions: _,
        container_statuses,
        ephemeral_container_statuses,
        host_ip,
        host_ips,
        init_container_statuses,
        message,
        nominated_node_name,
        observed_generation,
        phase,
        pod_ip,
        pod_ips,
        qos_class,
        reason,
        resize,
        resource_claim_statuses,
        start_time,
    } = held;
    by_kubelet(api) == by_kubelet(held)
        && same_containers(&api.container_statuses, container_statuses)
        && same(
            &api.ephemeral_container_statuses,
            ephemeral_container_statuses,
        )
        && same(&api.host_ip, host_ip)
        && same(&api.host_ips, host_ips)
        && same_containers(&api.init_container_statuses, init_container_statuses)
        && same(&api.message, message)
        && same(&api.nominated_node_name, nominated_node_name)
        && same(&api.observed_generation, observed_generation)
        && same(&api.phase, phase)
        && same(&api.pod_ip, pod_ip)
        && same(&api.pod_ips, pod_ips)
        && same(&api.qos_class, qos_class)
        && same(&api.reason, reason)
        && same(&api.resize, resize)
        && same(&api.resource_claim_statuses, resource_claim_statuses)
        && (start_time.is_none() || seconds(&api.start_time) == seconds(start_time))
}

pub fn normalize_image(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let first = name.split('/').next().unwrap_or("");
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut full = if has_registry {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    let last = full.rsplit('/').next().unwrap_or("");
    if digest.is_none() && !last.contains(':') {
        full.push_str(":latest");
    }
    match digest {
        Some(d) => format!("{full}@{d}"),
        None => full,
    }
}

/// A deterministic image digest id (`docker.io/library/nginx@sha256:…`).
pub fn image_id(image: &str) -> String {
    let n = normalize_image(image);
    let repo = match n.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r.to_string(),
        _ => n.clone(),
    };
    format!("{repo}@sha256:{}", fnv_hex64(&n).repeat(4))
}

/// FNV-1a, printed as 16 hex digits (stable across runs and platforms).
pub fn fnv_hex64(s: &str) -> String {
    format!("{:016x}", fnv64(s))
}

pub fn fnv64(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, NodeSpec, ResourceRequirements, Taint, Toleration,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    #[test]
    fn agreement_by_kubelet_compares_what_the_kubelet_owns_and_sends() {
        let cond = |t: &str, st: &str, at: i64| PodCondition {
            type_: t.into(),
            status: st.into(),
            last_transition_time: Some(Time(ts(at))),
            ..Default::default()
        };
        let millis = |ms: i64| {
            Some(Time(
                Timestamp::from_millisecond(1_767_225_600_000 + ms).unwrap(),
            ))
        };
        let running_since = |ms: i64| ContainerStatus {
            name: "app".into(),
            ready: true,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: millis(ms),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let held = PodStatus {
            phase: Some(PHASE_RUNNING.into()),
            pod_ip: Some("10.244.0.5".into()),
            start_time: millis(1_200),
            container_statuses: Some(vec![running_since(3_600)]),
            conditions: Some(vec![
                cond("Ready", "True", 5),
                cond("ContainersReady", "True", 5),
            ]),
            ..Default::default()
        };
        let with = |f: &dyn Fn(&mut PodStatus)| {
            let mut s = held.clone();
            f(&mut s);
            s
        };
        let cases: Vec<(&str, PodStatus, bool)> = vec![
            ("identical", held.clone(), true),
            (
                "a field the kubelet leaves unset",
                with(&|s| s.qos_class = Some("BestEffort".into())),
                true,
            ),
            (
                "a condition another component owns",
                with(&|s| {
                    s.conditions
                        .as_mut()
                        .unwrap()
                        .push(cond("x/gate", "False", 9))
                }),
                true,
            ),
            (
                "only a transition time differs",
                with(&|s| s.conditions.as_mut().unwrap()[0] = cond("Ready", "True", 7)),
                true,
            ),
            (
                "Ready taken away",
                with(&|s| s.conditions.as_mut().unwrap()[0] = cond("Ready", "False", 9)),
                false,
            ),
            (
                "a kubelet condition missing",
                with(&|s| {
                    s.conditions.as_mut().unwrap().pop();
                }),
                false,
            ),
            (
                "DisruptionTarget added (shared with the kubelet)",
                with(&|s| {
                    s.conditions.as_mut().unwrap().push(cond(
                        names::POD_COND_DISRUPTION_TARGET,
                        "True",
                        9,
                    ))
                }),
                false,
            ),
            (
                "a reason on a kubelet condition",
                with(&|s| s.conditions.as_mut().unwrap()[1].reason = Some("X".into())),
                false,
            ),
            (
                "a field the kubelet sends",
                with(&|s| s.phase = Some(PHASE_FAILED.into())),
                false,
            ),
            (
                "a field the kubelet sends, gone",
                with(&|s| s.pod_ip = None),
                false,
            ),
            (
                "times the API stored in whole seconds",
                with(&|s| {
                    s.start_time = millis(1_000);
                    s.container_statuses = Some(vec![running_since(3_000)]);
                }),
                true,
            ),
            (
                "a container started in another second",
                with(&|s| s.container_statuses = Some(vec![running_since(4_000)])),
                false,
            ),
            (
                "a container not ready",
                with(&|s| {
                    let mut c = running_since(3_000);
                    c.ready = false;
                    s.container_statuses = Some(vec![c]);
                }),
                false,
            ),
            (
                "started in another second",
                with(&|s| s.start_time = millis(2_000)),
                false,
            ),
        ];
        for (what, api, want) in cases {
            assert_eq!(agrees_by_kubelet(&api, &held), want, "{what}");
        }
    }

    fn term(code: i32) -> Terminated {
        Terminated {
            exit_code: code,
            reason: if code == 0 {
                "Completed".into()
            } else {
                "Error".into()
            },
            started_at: ts(0),
            finished_at: ts(1),
            container_id: "containerd://x".into(),
            message: None,
        }
    }

    fn view(name: &str, state: CState, last: Option<Terminated>) -> ContainerView {
        let ready = matches!(state, CState::Running { .. });
        ContainerView {
            name: name.into(),
            image: "i".into(),
            image_id: "d".into(),
            container_id: None,
            state,
            last,
            restart_count: 0,
            ready,
            started: ready,
            sidecar: false,
        }
    }

    fn sidecar(v: ContainerView) -> ContainerView {
        ContainerView {
            sidecar: true,
            ready: false,
            ..v
        }
    }

    #[test]
    fn sidecar_phases() {
        // A running sidecar does not hold the pod in Pending; a stopped one is ignored.
        assert_eq!(
            get_phase(
                "Never",
                &[sidecar(running("log"))],
                &[running("app")],
                false
            ),
            "Running"
        );
        assert_eq!(
            get_phase(
                "Never",
                &[sidecar(exited("log", 137))],
                &[exited("app", 0)],
                true
            ),
            "Succeeded"
        );
        let p = pod("Never", &["app"], &["log"]);
        let s = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[sidecar(running("log"))],
            &[running("app")],
            &facts(true, false),
            &Time(ts(0)),
        );
        assert!(conds(&s).contains(&c("Initialized", "True", None, None)));
    }

    fn running(n: &str) -> ContainerView {
        view(n, CState::Running { started_at: ts(0) }, None)
    }
    fn exited(n: &str, code: i32) -> ContainerView {
        view(n, CState::Terminated(term(code)), None)
    }
    fn creating(n: &str) -> ContainerView {
        view(
            n,
            CState::Waiting {
                reason: "ContainerCreating".into(),
                message: None,
            },
            None,
        )
    }
    fn backoff(n: &str, code: i32) -> ContainerView {
        view(
            n,
            CState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: None,
            },
            Some(term(code)),
        )
    }

    /// N-31 and N-32 plus the multi-container cases.
    #[test]
    fn phase_table() {
        type Case<'a> = (
            &'a str,
            Vec<ContainerView>,
            Vec<ContainerView>,
            bool,
            &'a str,
        );
        let cases: Vec<Case> = vec![
            ("Always", vec![], vec![creating("a")], false, "Pending"),
            ("Always", vec![], vec![running("a")], false, "Running"),
            ("Always", vec![], vec![exited("a", 0)], false, "Running"),
            ("Always", vec![], vec![backoff("a", 1)], false, "Running"),
            (
                "OnFailure",
                vec![],
                vec![exited("a", 0)],
                false,
                "Succeeded",
            ),
            ("OnFailure", vec![], vec![exited("a", 1)], false, "Running"),
            ("Never", vec![], vec![exited("a", 0)], false, "Succeeded"),
            ("Never", vec![], vec![exited("a", 1)], false, "Failed"),
            (
                "Never",
                vec![],
                vec![exited("a", 0), running("b")],
                false,
                "Running",
            ),
            (
                "Never",
                vec![],
                vec![exited("a", 0), exited("b", 143)],
                false,
                "Failed",
            ),
            // terminated by the kubelet (deletion): Always pods become terminal too.
            ("Always", vec![], vec![exited("a", 0)], true, "Succeeded"),
            ("Always", vec![], vec![exited("a", 137)], true, "Failed"),
            (
                "Always",
                vec![],
                vec![exited("a", 0), exited("b", 143)],
                true,
                "Failed",
            ),
            // init containers (N-32)
            (
                "Never",
                vec![exited("init", 1)],
                vec![view(
                    "app",
                    CState::Waiting {
                        reason: "PodInitializing".into(),
                        message: None,
                    },
                    None,
                )],
                false,
                "Failed",
            ),
            (
                "Always",
                vec![backoff("init", 1)],
                vec![view(
                    "app",
                    CState::Waiting {
                        reason: "PodInitializing".into(),
                        message: None,
                    },
                    None,
                )],
                false,
                "Pending",
            ),
            (
                "Always",
                vec![running("init")],
                vec![view(
                    "app",
                    CState::Waiting {
                        reason: "PodInitializing".into(),
                        message: None,
                    },
                    None,
                )],
                false,
                "Pending",
            ),
            (
                "Always",
                vec![exited("init", 0)],
                vec![running("app")],
                false,
                "Running",
            ),
        ];
        for (i, (policy, init, regular, terminal, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                get_phase(policy, &init, &regular, terminal),
                want,
                "case {i}"
            );
        }
    }

    fn pod(policy: &str, containers: &[&str], init: &[&str]) -> Pod {
        let c = |n: &&str| Container {
            name: n.to_string(),
            image: Some("nginx".into()),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                restart_policy: Some(policy.into()),
                containers: containers.iter().map(c).collect(),
                init_containers: if init.is_empty() {
                    None
                } else {
                    Some(init.iter().map(c).collect())
                },
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn facts(sandbox: bool, terminal: bool) -> PodFacts {
        PodFacts {
            sandbox_ready: sandbox,
            pod_is_terminal: terminal,
            pod_ip: Some("10.244.5.2".into()),
            host_ip: "10.0.0.5".into(),
            start_time: None,
        }
    }

    fn conds(s: &PodStatus) -> Vec<(String, String, Option<String>, Option<String>)> {
        s.conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect()
    }

    fn c(
        t: &str,
        s: &str,
        r: Option<&str>,
        m: Option<&str>,
    ) -> (String, String, Option<String>, Option<String>) {
        (t.into(), s.into(), r.map(Into::into), m.map(Into::into))
    }

    /// N-34: conditions of a normally starting pod, then running, then terminal.
    #[test]
    fn conditions_through_a_pods_life() {
        let mut p = pod("Always", &["app"], &[]);
        let s0 = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[],
            &[creating("app")],
            &facts(false, false),
            &Time(ts(0)),
        );
        assert_eq!(s0.phase.as_deref(), Some("Pending"));
        assert_eq!(
            conds(&s0),
            vec![
                c("PodReadyToStartContainers", "False", None, None),
                c("Initialized", "True", None, None),
                c(
                    "Ready",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]")
                ),
                c(
                    "ContainersReady",
                    "False",
                    Some("ContainersNotReady"),
                    Some("containers with unready status: [app]")
                ),
                c("PodScheduled", "True", None, None),
            ]
        );
        p.status = Some(s0.clone());
        let s1 = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[],
            &[running("app")],
            &facts(true, false),
            &Time(ts(3)),
        );
        assert_eq!(s1.phase.as_deref(), Some("Running"));
        let ready = s1
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time.clone()),
            ("True", Some(Time(ts(3))))
        );
        let init = s1
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Initialized")
            .unwrap();
        assert_eq!(
            init.last_transition_time,
            Some(Time(ts(0))),
            "unchanged status keeps its transition time"
        );
        // A DisruptionTarget set by another component is kept, before the kubelet's conditions.
        let mut s1b = s1.clone();
        s1b.conditions.as_mut().unwrap().push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            ..Default::default()
        });
        p.status = Some(s1b);
        let s2 = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[],
            &[exited("app", 137)],
            &facts(true, true),
            &Time(ts(40)),
        );
        assert_eq!(s2.phase.as_deref(), Some("Failed"));
        assert_eq!(s2.conditions.as_ref().unwrap()[0].type_, "DisruptionTarget");
        let got = conds(&s2);
        assert!(got.contains(&c("Ready", "False", Some("PodFailed"), None)));
        assert!(got.contains(&c("ContainersReady", "False", Some("PodFailed"), None)));
        // Terminal is never left.
        p.status = Some(s2);
        let s3 = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[],
            &[running("app")],
            &facts(true, false),
            &Time(ts(50)),
        );
        assert_eq!(s3.phase.as_deref(), Some("Failed"));
    }

    #[test]
    fn succeeded_and_init_conditions() {
        let p = pod("Never", &["app"], &[]);
        let s = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[],
            &[exited("app", 0)],
            &facts(true, false),
            &Time(ts(0)),
        );
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        assert!(conds(&s).contains(&c("Initialized", "True", Some("PodCompleted"), None)));
        assert!(conds(&s).contains(&c("Ready", "False", Some("PodCompleted"), None)));
        let p = pod("Never", &["app"], &["init"]);
        let waiting = view(
            "app",
            CState::Waiting {
                reason: "PodInitializing".into(),
                message: None,
            },
            None,
        );
        let s = generate_status(
            p.spec.as_ref(),
            p.status.clone().unwrap_or_default(),
            &[exited("init", 1)],
            &[waiting],
            &facts(true, false),
            &Time(ts(0)),
        );
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        assert!(conds(&s).contains(&c(
            "Initialized",
            "False",
            Some("ContainersNotInitialized"),
            Some("containers with incomplete status: [init]")
        )));
    }

    fn node(labels: &[(&str, &str)], taints: Vec<Taint>) -> Node {
        Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("n1".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: Some(taints),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn with_requests(cpu: &str, mem: &str) -> Pod {
        let mut p = pod("Always", &["app"], &[]);
        let reqs: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(mem.into())),
        ]
        .into();
        p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
            requests: Some(reqs),
            ..Default::default()
        });
        p
    }

    #[test]
    fn admission_table() {
        let alloc = Allocatable {
            cpu_millis: 4000,
            memory_bytes: 1 << 30,
            ephemeral_storage_bytes: 1 << 30,
            pods: 2,
        };
        let n = node(&[("disk", "ssd")], vec![]);
        let big = with_requests("3700m", "1Mi");
        assert_eq!(admit(&with_requests("500m", "1Mi"), &[&big], &n, &alloc), Err(Rejection {
            reason: "OutOfcpu".into(),
            message: "Node didn't have enough resource: cpu, requested: 500, used: 3700, capacity: 4000".into(),
        }));
        assert_eq!(
            admit(&with_requests("300m", "1Mi"), &[&big], &n, &alloc),
            Ok(())
        );
        assert_eq!(
            admit(&with_requests("1m", "2Gi"), &[], &n, &alloc)
                .unwrap_err()
                .reason,
            "OutOfmemory"
        );
        assert_eq!(
            admit(&with_requests("1m", "1"), &[&big, &big], &n, &alloc)
                .unwrap_err()
                .reason,
            "OutOfpods"
        );
        let mut sel = pod("Always", &["app"], &[]);
        sel.spec.as_mut().unwrap().node_selector =
            Some([("disk".to_string(), "hdd".to_string())].into());
        let r = admit(&sel, &[], &n, &alloc).unwrap_err();
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Node selector"
            )
        );
        sel.spec.as_mut().unwrap().node_selector =
            Some([("disk".to_string(), "ssd".to_string())].into());
        assert_eq!(admit(&sel, &[], &n, &alloc), Ok(()));
        // NoExecute taints only; NoSchedule is the scheduler's business.
        let noexec = Taint {
            key: "k".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        };
        let nosched = Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let p = pod("Always", &["app"], &[]);
        assert_eq!(admit(&p, &[], &node(&[], vec![nosched]), &alloc), Ok(()));
        assert_eq!(
            admit(&p, &[], &node(&[], vec![noexec.clone()]), &alloc)
                .unwrap_err()
                .reason,
            "TaintToleration"
        );
        let mut tol = p.clone();
        tol.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
        assert_eq!(admit(&tol, &[], &node(&[], vec![noexec]), &alloc), Ok(()));
        let s = rejected_status(
            &PodStatus::default(),
            &Rejection {
                reason: "OutOfcpu".into(),
                message: "m".into(),
            },
        );
        assert_eq!(
            (s.phase.as_deref(), s.message.as_deref()),
            (Some("Failed"), Some("Pod was rejected: m"))
        );
    }

    #[test]
    fn images() {
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalize_image("nginx:1.27"),
            "docker.io/library/nginx:1.27"
        );
        assert_eq!(
            normalize_image("bitnami/redis:7"),
            "docker.io/bitnami/redis:7"
        );
        assert_eq!(
            normalize_image("registry.k8s.io/pause:3.10"),
            "registry.k8s.io/pause:3.10"
        );
        assert_eq!(
            normalize_image("localhost:5000/app"),
            "localhost:5000/app:latest"
        );
        assert!(image_id("nginx").starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(
            image_id("nginx").len(),
            "docker.io/library/nginx@sha256:".len() + 64
        );
    }
}
