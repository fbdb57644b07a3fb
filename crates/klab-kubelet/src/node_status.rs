//! Pure node-side decisions: the Node object a kubelet registers, the status setters (conditions with
//! upstream's exact reasons, messages, transition and event rules), reboot detection, the
//! "changed or due" report decision, default-label reconciliation of an existing Node, and the Lease.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use klab_api::names;

use crate::config::{KubeletConfig, NodeSpecConfig};
use crate::quantity::{format_bytes, format_cpu};

/// Annotation set when `enableControllerAttachDetach` is on.
pub const ANNOTATION_CMAD: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// A node event the kubelet records (involvedObject = the Node, uid = node name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEvent {
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

impl NodeEvent {
    fn status_now(node: &str, reason: &str) -> NodeEvent {
        NodeEvent {
            type_: names::EVENT_NORMAL,
            reason: reason.to_string(),
            message: format!("Node {node} status is now: {reason}"),
        }
    }
}

/// What the kubelet knows about its own health at a status computation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeHealth {
    pub memory_pressure: bool,
    pub disk_pressure: bool,
    pub pid_pressure: bool,
    /// Errors that make Ready False (runtime down, network not ready, shutting down …).
    pub ready_errors: Vec<String>,
    /// Conditions a `node-condition` fault makes the kubelet report, by type, whatever it
    /// computes itself (a Ready the runtime would make True, a `NetworkUnavailable` the CNI
    /// plugin would set).
    pub overrides: BTreeMap<String, ConditionOverride>,
    /// Condition types whose fault was cleared and that are not the kubelet's own: they are
    /// dropped from the status (the kubelet's four come back to its own computation).
    pub cleared: Vec<String>,
}

/// A condition a fault makes the kubelet report: status (`True`, `False`, `Unknown`), reason and
/// message, written as given on every status computation.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConditionOverride {
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// The condition types the kubelet's own setters write.
pub const KUBELET_CONDITIONS: &[&str] = &[
    names::COND_MEMORY_PRESSURE,
    names::COND_DISK_PRESSURE,
    names::COND_PID_PRESSURE,
    names::COND_READY,
];

struct PressureStrings {
    type_: &'static str,
    true_reason: &'static str,
    true_message: &'static str,
    false_reason: &'static str,
    false_message: &'static str,
    true_event: &'static str,
    false_event: &'static str,
}

const MEMORY: PressureStrings = PressureStrings {
    type_: names::COND_MEMORY_PRESSURE,
    true_reason: "KubeletHasInsufficientMemory",
    true_message: "kubelet has insufficient memory available",
    false_reason: "KubeletHasSufficientMemory",
    false_message: "kubelet has sufficient memory available",
    true_event: "NodeHasInsufficientMemory",
    false_event: "NodeHasSufficientMemory",
};
const DISK: PressureStrings = PressureStrings {
    type_: names::COND_DISK_PRESSURE,
    true_reason: "KubeletHasDiskPressure",
    true_message: "kubelet has disk pressure",
    false_reason: "KubeletHasNoDiskPressure",
    false_message: "kubelet has no disk pressure",
    true_event: "NodeHasDiskPressure",
    false_event: "NodeHasNoDiskPressure",
};
const PID: PressureStrings = PressureStrings {
    type_: names::COND_PID_PRESSURE,
    true_reason: "KubeletHasInsufficientPID",
    true_message: "kubelet has insufficient PID available",
    false_reason: "KubeletHasSufficientPID",
    false_message: "kubelet has sufficient PID available",
    true_event: "NodeHasInsufficientPID",
    false_event: "NodeHasSufficientPID",
};

/// Ready=True reason and message.
pub const REASON_KUBELET_READY: &str = "KubeletReady";
pub const MSG_KUBELET_READY: &str = "kubelet is posting ready status";
pub const REASON_KUBELET_NOT_READY: &str = "KubeletNotReady";

/// How long the runtime status may go without an answer before the kubelet reports the runtime
/// down (upstream's `maxWaitForContainerRuntime`).
pub const RUNTIME_STATUS_THRESHOLD: Duration = Duration::from_secs(30);
/// How long PLEG may go without a successful relist before it is unhealthy (`relistThreshold`).
pub const PLEG_RELIST_THRESHOLD: Duration = Duration::from_secs(180);

/// The Ready errors of a container runtime that stopped answering at `down_since`, as the
/// kubelet's runtime state reports them at `now`: `container runtime is down` once the last
/// good runtime status is 30 s old, and PLEG's error once its last relist (the last moment the
/// runtime answered) is more than 3 minutes old.
pub fn runtime_ready_errors(down_since: Option<Timestamp>, now: Timestamp) -> Vec<String> {
    let Some(since) = down_since else {
        return Vec::new();
    };
    let elapsed = now
        .duration_since(since)
        .try_into()
        .unwrap_or(Duration::ZERO);
    let mut errors = Vec::new();
    if elapsed >= RUNTIME_STATUS_THRESHOLD {
        errors.push("container runtime is down".to_string());
    }
    if elapsed > PLEG_RELIST_THRESHOLD {
        errors.push(format!(
            "PLEG is not healthy: pleg was last seen active {} ago; threshold is {}",
            klab_api::duration::format_go_duration(elapsed),
            klab_api::duration::format_go_duration(PLEG_RELIST_THRESHOLD)
        ));
    }
    errors
}

/// Runs the four condition setters on `existing` at `now`. Existing conditions keep their position;
/// missing ones are appended in setter order (MemoryPressure, DiskPressure, PIDPressure, Ready:
/// Ready last). Returns the new list and the events to record.
pub fn set_conditions(
    node: &str,
    existing: &[NodeCondition],
    health: &NodeHealth,
    now: &Time,
) -> (Vec<NodeCondition>, Vec<NodeEvent>) {
    let mut conds = existing.to_vec();
    let mut events = Vec::new();
    for (s, pressure) in [
        (&MEMORY, health.memory_pressure),
        (&DISK, health.disk_pressure),
        (&PID, health.pid_pressure),
    ] {
        let idx = match conds.iter().position(|c| c.type_ == s.type_) {
            Some(i) => i,
            None => {
                // A missing pressure condition starts as Unknown, so its first computation is a
                // transition (and records an event).
                conds.push(NodeCondition {
                    type_: s.type_.into(),
                    status: "Unknown".into(),
                    ..Default::default()
                });
                conds.len() - 1
            }
        };
        let c = &mut conds[idx];
        if let Some(o) = health.overrides.get(s.type_) {
            // A reported condition is written as given every time; the events follow its status.
            if c.status != o.status {
                c.status = o.status.clone();
                c.last_transition_time = Some(now.clone());
                match o.status.as_str() {
                    "True" => events.push(NodeEvent::status_now(node, s.true_event)),
                    "False" => events.push(NodeEvent::status_now(node, s.false_event)),
                    _ => {}
                }
            }
            c.reason = o.reason.clone();
            c.message = o.message.clone();
            c.last_heartbeat_time = Some(now.clone());
            continue;
        }
        let (want, reason, message, event) = if pressure {
            ("True", s.true_reason, s.true_message, s.true_event)
        } else {
            ("False", s.false_reason, s.false_message, s.false_event)
        };
        // Reason and message are only written on a transition (a legacy reason survives).
        if c.status != want {
            c.status = want.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_transition_time = Some(now.clone());
            events.push(NodeEvent::status_now(node, event));
        }
        c.last_heartbeat_time = Some(now.clone());
    }

    // Ready: reason and message rewritten on every computation; events only for an existing
    // condition that changes status.
    let (status, reason, message) = if let Some(o) = health.overrides.get(names::COND_READY) {
        (
            o.status.as_str(),
            o.reason.clone().unwrap_or_default(),
            o.message.clone().unwrap_or_default(),
        )
    } else if health.ready_errors.is_empty() {
        (
            "True",
            REASON_KUBELET_READY.to_string(),
            MSG_KUBELET_READY.to_string(),
        )
    } else if health.ready_errors.len() == 1 {
        (
            "False",
            REASON_KUBELET_NOT_READY.to_string(),
            health.ready_errors[0].clone(),
        )
    } else {
        (
            "False",
            REASON_KUBELET_NOT_READY.to_string(),
            format!("[{}]", health.ready_errors.join(", ")),
        )
    };
    match conds.iter_mut().find(|c| c.type_ == names::COND_READY) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = Some(now.clone());
                let ev = if status == "True" {
                    "NodeReady"
                } else {
                    "NodeNotReady"
                };
                events.push(NodeEvent::status_now(node, ev));
            }
            c.status = status.into();
            c.reason = Some(reason);
            c.message = Some(message);
            c.last_heartbeat_time = Some(now.clone());
        }
        None => conds.push(NodeCondition {
            type_: names::COND_READY.into(),
            status: status.into(),
            reason: Some(reason),
            message: Some(message),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        }),
    }
    set_other_conditions(&mut conds, health, now);
    (conds, events)
}

/// Conditions other than the kubelet's four, as a node-problem agent reports them: a reported
/// type is written (a new one appended, its transition time moved only when its status
/// changes); a cleared one is removed. No event: the kubelet records events only for its own.
fn set_other_conditions(conds: &mut Vec<NodeCondition>, health: &NodeHealth, now: &Time) {
    for (type_, o) in &health.overrides {
        if KUBELET_CONDITIONS.contains(&type_.as_str()) {
            continue;
        }
        match conds.iter_mut().find(|c| &c.type_ == type_) {
            Some(c) => {
                if c.status != o.status {
                    c.status = o.status.clone();
                    c.last_transition_time = Some(now.clone());
                }
                c.reason = o.reason.clone();
                c.message = o.message.clone();
                c.last_heartbeat_time = Some(now.clone());
            }
            None => conds.push(NodeCondition {
                type_: type_.clone(),
                status: o.status.clone(),
                reason: o.reason.clone(),
                message: o.message.clone(),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(now.clone()),
            }),
        }
    }
    conds.retain(|c| {
        !health.cleared.contains(&c.type_)
            || health.overrides.contains_key(&c.type_)
            || KUBELET_CONDITIONS.contains(&c.type_.as_str())
    });
}

/// The `Rebooted` Warning event for a changed boot id.
pub fn rebooted_event(node: &str, new_boot_id: &str) -> NodeEvent {
    NodeEvent {
        type_: names::EVENT_WARNING,
        reason: "Rebooted".into(),
        message: format!("Node {node} has been rebooted, boot id: {new_boot_id}"),
    }
}

/// `NodeSchedulable` / `NodeNotSchedulable` when `spec.unschedulable` differs from the last
/// observation (which is updated).
pub fn schedulable_event(node: &str, last: &mut bool, unschedulable: bool) -> Option<NodeEvent> {
    if *last == unschedulable {
        return None;
    }
    *last = unschedulable;
    let reason = if unschedulable {
        "NodeNotSchedulable"
    } else {
        "NodeSchedulable"
    };
    Some(NodeEvent::status_now(node, reason))
}

/// Upstream `nodeStatusHasChanged`: conditions compared by type with `lastHeartbeatTime` blanked;
/// every other status field compared for equality.
pub fn node_status_changed(old: &NodeStatus, new: &NodeStatus) -> bool {
    // Field by field, without copies: every kubelet compares its status every 10 s. The
    // destructuring names every field, so a field added to the type is compared too.
    let NodeStatus {
        addresses,
        allocatable,
        capacity,
        conditions: _,
        config,
        daemon_endpoints,
        features,
        images,
        node_info,
        phase,
        runtime_handlers,
        volumes_attached,
        volumes_in_use,
    } = old;
    let rest_same = *addresses == new.addresses
        && *allocatable == new.allocatable
        && *capacity == new.capacity
        && *config == new.config
        && *daemon_endpoints == new.daemon_endpoints
        && *features == new.features
        && *images == new.images
        && *node_info == new.node_info
        && *phase == new.phase
        && *runtime_handlers == new.runtime_handlers
        && *volumes_attached == new.volumes_attached
        && *volumes_in_use == new.volumes_in_use;
    if !rest_same {
        return true;
    }
    fn by_type(s: &NodeStatus) -> Vec<&NodeCondition> {
        let mut conds: Vec<&NodeCondition> = s.conditions.iter().flatten().collect();
        conds.sort_by(|a, b| a.type_.cmp(&b.type_));
        conds
    }
    // Equal but for the heartbeat time.
    fn same(a: &NodeCondition, b: &NodeCondition) -> bool {
        let NodeCondition {
            last_heartbeat_time: _,
            last_transition_time,
            message,
            reason,
            status,
            type_,
        } = a;
        *last_transition_time == b.last_transition_time
            && *message == b.message
            && *reason == b.reason
            && *status == b.status
            && *type_ == b.type_
    }
    let (a, b) = (by_type(old), by_type(new));
    a.len() != b.len() || a.iter().zip(&b).any(|(x, y)| !same(x, y))
}

/// PATCH iff the status changed or the last report is at least `report_frequency` old.
pub fn should_report(
    changed: bool,
    now: Timestamp,
    last_report: Option<Timestamp>,
    report_frequency: Duration,
) -> bool {
    if changed {
        return true;
    }
    match last_report {
        None => true,
        Some(t) => {
            now.duration_since(t)
                >= jiff::SignedDuration::try_from(report_frequency).unwrap_or_default()
        }
    }
}

/// The machine's identity as cAdvisor would report it.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineIdentity {
    pub boot_id: String,
    pub machine_id: String,
    pub system_uuid: String,
}

/// The non-condition status fields every computation sets (addresses, capacity, allocatable,
/// nodeInfo, daemonEndpoints).
pub fn machine_status(
    name: &str,
    spec: &NodeSpecConfig,
    cfg: &KubeletConfig,
    id: &MachineIdentity,
) -> NodeStatus {
    let pods = cfg.pod_capacity(spec.cpu_millis);
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity(format_cpu(spec.cpu_millis)));
    capacity.insert(
        "memory".to_string(),
        Quantity(format_bytes(spec.memory_bytes)),
    );
    capacity.insert(
        "ephemeral-storage".to_string(),
        Quantity(format_bytes(spec.ephemeral_storage_bytes)),
    );
    capacity.insert("pods".to_string(), Quantity(pods.to_string()));
    let a = allocatable(spec, cfg);
    let mut alloc = BTreeMap::new();
    alloc.insert("cpu".to_string(), Quantity(format_cpu(a.cpu_millis)));
    alloc.insert("memory".to_string(), Quantity(format_bytes(a.memory_bytes)));
    alloc.insert(
        "ephemeral-storage".to_string(),
        Quantity(format_bytes(a.ephemeral_storage_bytes)),
    );
    alloc.insert("pods".to_string(), Quantity(a.pods.to_string()));
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: spec.node_ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: name.to_string(),
            },
        ]),
        capacity: Some(capacity),
        allocatable: Some(alloc),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: cfg.port }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: spec.arch.clone(),
            boot_id: id.boot_id.clone(),
            container_runtime_version: spec.container_runtime_version.clone(),
            kernel_version: spec.kernel_version.clone(),
            kube_proxy_version: String::new(),
            kubelet_version: spec.kubelet_version.clone(),
            machine_id: id.machine_id.clone(),
            operating_system: "linux".into(),
            os_image: spec.os_image.clone(),
            system_uuid: id.system_uuid.clone(),
            swap: None,
        }),
        ..Default::default()
    }
}

/// Allocatable resources as integers (what admission compares against).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allocatable {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub pods: i64,
}

/// capacity − reserved − hard eviction thresholds, clamped at 0.
pub fn allocatable(spec: &NodeSpecConfig, cfg: &KubeletConfig) -> Allocatable {
    let storage_reserve =
        spec.ephemeral_storage_bytes / 100 * cfg.eviction_hard_nodefs_available_percent as u64;
    Allocatable {
        cpu_millis: spec.cpu_millis.saturating_sub(cfg.reserved_cpu_millis),
        memory_bytes: spec
            .memory_bytes
            .saturating_sub(cfg.reserved_memory)
            .saturating_sub(cfg.eviction_hard_memory_available),
        ephemeral_storage_bytes: spec.ephemeral_storage_bytes.saturating_sub(storage_reserve),
        pods: cfg.pod_capacity(spec.cpu_millis),
    }
}

/// The labels of a freshly built node: defaults, then `--node-labels` (zone/region shortcuts first).
pub fn initial_labels(name: &str, spec: &NodeSpecConfig) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert(names::LABEL_HOSTNAME.to_string(), name.to_string());
    l.insert(names::LABEL_OS.to_string(), "linux".to_string());
    l.insert(names::LABEL_ARCH.to_string(), spec.arch.clone());
    l.insert(names::LABEL_OS_BETA.to_string(), "linux".to_string());
    l.insert(names::LABEL_ARCH_BETA.to_string(), spec.arch.clone());
    if let Some(z) = &spec.zone {
        l.insert(names::LABEL_ZONE.to_string(), z.clone());
    }
    if let Some(r) = &spec.region {
        l.insert(names::LABEL_REGION.to_string(), r.clone());
    }
    for (k, v) in &spec.labels {
        l.insert(k.clone(), v.clone());
    }
    l
}

/// Upstream `initialNode`: the object POSTed at registration, with every status setter run once.
/// Returns the node and the pressure events the setters record while building it.
pub fn initial_node(
    name: &str,
    spec: &NodeSpecConfig,
    cfg: &KubeletConfig,
    id: &MachineIdentity,
    health: &NodeHealth,
    now: &Time,
) -> (Node, Vec<NodeEvent>) {
    let mut taints: Vec<Taint> = cfg.register_with_taints.clone();
    if !cfg.register_schedulable {
        taints.push(Taint {
            key: names::TAINT_UNSCHEDULABLE.into(),
            effect: names::EFFECT_NO_SCHEDULE.into(),
            ..Default::default()
        });
    }
    let mut annotations = BTreeMap::new();
    if cfg.enable_controller_attach_detach {
        annotations.insert(ANNOTATION_CMAD.to_string(), "true".to_string());
    }
    let mut status = machine_status(name, spec, cfg, id);
    let (conds, events) = set_conditions(name, &[], health, now);
    status.conditions = Some(conds);
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(initial_labels(name, spec)),
            annotations: if annotations.is_empty() {
                None
            } else {
                Some(annotations)
            },
            ..Default::default()
        },
        spec: Some(NodeSpec {
            unschedulable: if cfg.register_schedulable {
                None
            } else {
                Some(true)
            },
            taints: if taints.is_empty() {
                None
            } else {
                Some(taints)
            },
            ..Default::default()
        }),
        status: Some(status),
    };
    (node, events)
}

/// The label keys the kubelet re-asserts on an existing Node (`reconcileDefaultLabels`).
pub const DEFAULT_LABELS: &[&str] = &[
    names::LABEL_HOSTNAME,
    names::LABEL_ZONE,
    names::LABEL_REGION,
    names::LABEL_ZONE_BETA,
    names::LABEL_REGION_BETA,
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    names::LABEL_OS,
    names::LABEL_ARCH,
    "node.kubernetes.io/windows-build",
    names::LABEL_OS_BETA,
    names::LABEL_ARCH_BETA,
];

/// Reconciliation of an existing Node with the freshly built one (§1.4): default labels copied when
/// the fresh node has them (empty value deletes), CMAD annotation matched to the local setting.
/// Returns the merge patch of `metadata` to send, or `None` when nothing changes. Taints,
/// `spec.unschedulable`, other labels and annotations are left alone.
pub fn reconcile_existing(existing: &Node, fresh: &Node) -> Option<serde_json::Value> {
    let empty = BTreeMap::new();
    let old_labels = existing.metadata.labels.as_ref().unwrap_or(&empty);
    let new_labels = fresh.metadata.labels.as_ref().unwrap_or(&empty);
    let mut label_patch = serde_json::Map::new();
    for key in DEFAULT_LABELS {
        if let Some(v) = new_labels.get(*key) {
            if v.is_empty() {
                if old_labels.contains_key(*key) {
                    label_patch.insert(key.to_string(), serde_json::Value::Null);
                }
            } else if old_labels.get(*key) != Some(v) {
                label_patch.insert(key.to_string(), serde_json::Value::String(v.clone()));
            }
        }
    }
    let old_ann = existing.metadata.annotations.as_ref().unwrap_or(&empty);
    let want_cmad = fresh
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_CMAD));
    let mut ann_patch = serde_json::Map::new();
    match (want_cmad, old_ann.get(ANNOTATION_CMAD)) {
        (true, Some(v)) if v == "true" => {}
        (true, _) => {
            ann_patch.insert(ANNOTATION_CMAD.into(), "true".into());
        }
        (false, Some(_)) => {
            ann_patch.insert(ANNOTATION_CMAD.into(), serde_json::Value::Null);
        }
        (false, None) => {}
    }
    if label_patch.is_empty() && ann_patch.is_empty() {
        return None;
    }
    let mut meta = serde_json::Map::new();
    if !label_patch.is_empty() {
        meta.insert("labels".into(), serde_json::Value::Object(label_patch));
    }
    if !ann_patch.is_empty() {
        meta.insert("annotations".into(), serde_json::Value::Object(ann_patch));
    }
    Some(serde_json::json!({ "metadata": meta }))
}

/// Computes the next status of an existing Node (every status tick): machine fields, the boot-id
/// check (returns a `Rebooted` event when the stored boot id is non-empty and different), and the
/// conditions. Other conditions already on the node are kept.
pub fn compute_status(
    existing: &Node,
    machine: &NodeStatus,
    health: &NodeHealth,
    now: &Time,
) -> (NodeStatus, Vec<NodeEvent>) {
    let name = existing.metadata.name.clone().unwrap_or_default();
    let old = existing.status.as_ref();
    let mut events = Vec::new();
    fn boot(s: Option<&NodeStatus>) -> &str {
        s.and_then(|s| s.node_info.as_ref())
            .map_or("", |i| i.boot_id.as_str())
    }
    let new_boot = boot(Some(machine));
    let old_boot = boot(old);
    if !old_boot.is_empty() && old_boot != new_boot {
        events.push(rebooted_event(&name, new_boot));
    }
    let (conds, mut cond_events) = set_conditions(
        &name,
        old.and_then(|o| o.conditions.as_deref()).unwrap_or(&[]),
        health,
        now,
    );
    events.append(&mut cond_events);
    // The machine's fields and the new conditions; the rest as stored. Every field is named
    // (no `..`), so only what is kept is copied.
    let status = NodeStatus {
        addresses: machine.addresses.clone(),
        allocatable: machine.allocatable.clone(),
        capacity: machine.capacity.clone(),
        conditions: Some(conds),
        config: old.and_then(|o| o.config.clone()),
        daemon_endpoints: machine.daemon_endpoints.clone(),
        features: old.and_then(|o| o.features.clone()),
        images: old.and_then(|o| o.images.clone()),
        node_info: machine.node_info.clone(),
        phase: old.and_then(|o| o.phase.clone()),
        runtime_handlers: old.and_then(|o| o.runtime_handlers.clone()),
        volumes_attached: old.and_then(|o| o.volumes_attached.clone()),
        volumes_in_use: old.and_then(|o| o.volumes_in_use.clone()),
    };
    (status, events)
}

/// The node Lease (`kube-node-lease/<node>`) at `renew_time`. Without a node UID the owner
/// reference cannot be set (the caller then skips creating it, as upstream).
pub fn new_lease(
    node: &str,
    node_uid: &str,
    duration_seconds: i32,
    renew_time: MicroTime,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(names::NS_NODE_LEASE.to_string()),
            owner_references: Some(vec![node_owner_ref(node, node_uid)]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(duration_seconds),
            renew_time: Some(renew_time),
            ..Default::default()
        }),
    }
}

/// The owner reference of a node Lease: no `controller`, no `blockOwnerDeletion`.
pub fn node_owner_ref(node: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.to_string(),
        uid: uid.to_string(),
        ..Default::default()
    }
}

/// A renewal built from the cached lease: `renewTime = now`, duration re-written (v1.34+), owner
/// reference added if missing.
pub fn renewed_lease(
    base: &Lease,
    node: &str,
    node_uid: Option<&str>,
    duration_seconds: i32,
    now: MicroTime,
) -> Lease {
    let mut l = base.clone();
    let spec = l.spec.get_or_insert_with(Default::default);
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(duration_seconds);
    spec.holder_identity = Some(node.to_string());
    if l.metadata
        .owner_references
        .as_ref()
        .is_none_or(|o| o.is_empty())
        && let Some(uid) = node_uid
    {
        l.metadata.owner_references = Some(vec![node_owner_ref(node, uid)]);
    }
    l
}

#[cfg(test)]
mod runtime_tests {
    use super::*;

    #[test]
    fn a_runtime_that_stopped_answering_reports_as_upstream() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let table: &[(Option<f64>, f64, &[&str])] = &[
            (None, 100.0, &[]),
            (Some(0.0), 29.9, &[]),
            (Some(0.0), 30.0, &["container runtime is down"]),
            (Some(10.0), 180.0, &["container runtime is down"]),
            (
                Some(10.0),
                190.5,
                &[
                    "container runtime is down",
                    "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s",
                ],
            ),
        ];
        for (since, now, want) in table {
            let got = runtime_ready_errors(since.map(at), at(*now));
            assert_eq!(got, *want, "{since:?} {now}");
        }
        // Both errors make one Ready=False message, upstream's aggregate.
        let health = NodeHealth {
            memory_pressure: false,
            disk_pressure: false,
            pid_pressure: false,
            ready_errors: runtime_ready_errors(Some(at(0.0)), at(200.0)),
            ..Default::default()
        };
        let now = Time(at(200.0));
        let (conds, _) = set_conditions("n1", &[], &health, &now);
        let ready = conds.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            ready.message.as_deref(),
            Some(
                "[container runtime is down, PLEG is not healthy: pleg was last seen active 3m20s ago; threshold is 3m0s]"
            )
        );
        assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
    }
}

#[cfg(test)]
mod override_tests {
    use super::*;

    fn time(s: i64) -> Time {
        Time(Timestamp::from_second(1_767_225_600 + s).unwrap())
    }

    fn over(status: &str, reason: &str, message: &str) -> ConditionOverride {
        ConditionOverride {
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
        }
    }

    fn health(overrides: &[(&str, ConditionOverride)], cleared: &[&str]) -> NodeHealth {
        NodeHealth {
            overrides: overrides
                .iter()
                .map(|(t, o)| (t.to_string(), o.clone()))
                .collect(),
            cleared: cleared.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn find<'a>(conds: &'a [NodeCondition], t: &str) -> Option<&'a NodeCondition> {
        conds.iter().find(|c| c.type_ == t)
    }

    #[test]
    fn a_reported_ready_wins_over_the_kubelets_own_and_transitions_once() {
        let (c0, _) = set_conditions("n1", &[], &NodeHealth::default(), &time(0));
        let h = health(
            &[(
                "Ready",
                over("False", "KubeletNotReady", "container runtime is down"),
            )],
            &[],
        );
        let (c1, e1) = set_conditions("n1", &c0, &h, &time(10));
        let r = find(&c1, "Ready").unwrap();
        assert_eq!(r.status, "False");
        assert_eq!(r.reason.as_deref(), Some("KubeletNotReady"));
        assert_eq!(r.message.as_deref(), Some("container runtime is down"));
        assert_eq!(r.last_transition_time, Some(time(10)));
        assert_eq!(
            e1.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
            ["NodeNotReady"]
        );
        // Held: heartbeat moves, transition and events do not.
        let (c2, e2) = set_conditions("n1", &c1, &h, &time(20));
        let r = find(&c2, "Ready").unwrap();
        assert_eq!(r.last_transition_time, Some(time(10)));
        assert_eq!(r.last_heartbeat_time, Some(time(20)));
        assert!(e2.is_empty());
        // Runtime errors do not change what the fault reports.
        let mut h2 = h.clone();
        h2.ready_errors = vec!["container runtime is down".into()];
        let (c3, _) = set_conditions("n1", &c2, &h2, &time(30));
        assert_eq!(
            find(&c3, "Ready").unwrap().reason.as_deref(),
            Some("KubeletNotReady")
        );
        // Cleared: the kubelet's own computation, NodeReady again.
        let (c4, e4) = set_conditions("n1", &c3, &health(&[], &["Ready"]), &time(40));
        let r = find(&c4, "Ready").unwrap();
        assert_eq!(r.status, "True");
        assert_eq!(r.reason.as_deref(), Some(REASON_KUBELET_READY));
        assert_eq!(
            e4.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
            ["NodeReady"]
        );
    }

    #[test]
    fn a_reported_pressure_condition_records_the_kubelets_event() {
        let (c0, _) = set_conditions("n1", &[], &NodeHealth::default(), &time(0));
        let h = health(
            &[(
                "DiskPressure",
                over(
                    "True",
                    "KubeletHasDiskPressure",
                    "kubelet has disk pressure",
                ),
            )],
            &[],
        );
        let (c1, e1) = set_conditions("n1", &c0, &h, &time(10));
        assert_eq!(find(&c1, "DiskPressure").unwrap().status, "True");
        assert_eq!(
            e1.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(),
            ["NodeHasDiskPressure"]
        );
        // An Unknown report records no event.
        let h = health(&[("DiskPressure", over("Unknown", "R", "m"))], &[]);
        let (c2, e2) = set_conditions("n1", &c1, &h, &time(20));
        assert_eq!(find(&c2, "DiskPressure").unwrap().status, "Unknown");
        assert!(e2.is_empty());
    }

    #[test]
    fn other_condition_types_are_added_kept_and_removed_when_cleared() {
        let (c0, _) = set_conditions("n1", &[], &NodeHealth::default(), &time(0));
        let h = health(
            &[(
                "NetworkUnavailable",
                over("True", "NoRouteCreated", "Node created without a route"),
            )],
            &[],
        );
        let (c1, e1) = set_conditions("n1", &c0, &h, &time(10));
        // Appended after the kubelet's four, no event.
        assert_eq!(c1.len(), 5);
        assert_eq!(c1[4].type_, "NetworkUnavailable");
        assert_eq!(c1[4].last_transition_time, Some(time(10)));
        assert!(e1.is_empty());
        let h2 = health(
            &[(
                "NetworkUnavailable",
                over("False", "RouteCreated", "RouteController created a route"),
            )],
            &[],
        );
        let (c2, _) = set_conditions("n1", &c1, &h2, &time(20));
        assert_eq!(c2[4].status, "False");
        assert_eq!(c2[4].reason.as_deref(), Some("RouteCreated"));
        assert_eq!(c2[4].last_transition_time, Some(time(20)));
        // Without the fault and not cleared it stays as it is (someone else's condition).
        let (c3, _) = set_conditions("n1", &c2, &NodeHealth::default(), &time(30));
        assert_eq!(c3[4], c2[4]);
        // Cleared: removed; clearing one of the kubelet's own never removes it.
        let (c4, _) = set_conditions(
            "n1",
            &c3,
            &health(&[], &["NetworkUnavailable", "Ready"]),
            &time(40),
        );
        assert_eq!(c4.len(), 4);
        assert!(find(&c4, "Ready").is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: i64) -> Time {
        Time(Timestamp::from_second(1_767_225_600 + s).unwrap())
    }

    fn cond(type_: &str, status: &str, reason: &str, at: i64) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some("old message".into()),
            last_heartbeat_time: Some(time(at)),
            last_transition_time: Some(time(at)),
        }
    }

    /// N-17 truth table for MemoryPressure (the other two share the code path, checked below).
    #[test]
    fn pressure_setter_truth_table() {
        let (t, b) = (100, 99);
        // (existing, pressure, status, reason, transition, event)
        type Case<'a> = (
            Option<NodeCondition>,
            bool,
            &'a str,
            &'a str,
            i64,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                None,
                false,
                "False",
                "KubeletHasSufficientMemory",
                t,
                Some("NodeHasSufficientMemory"),
            ),
            (
                None,
                true,
                "True",
                "KubeletHasInsufficientMemory",
                t,
                Some("NodeHasInsufficientMemory"),
            ),
            (
                Some(cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    b,
                )),
                true,
                "True",
                "KubeletHasInsufficientMemory",
                t,
                Some("NodeHasInsufficientMemory"),
            ),
            (
                Some(cond(
                    "MemoryPressure",
                    "True",
                    "KubeletHasInsufficientMemory",
                    b,
                )),
                false,
                "False",
                "KubeletHasSufficientMemory",
                t,
                Some("NodeHasSufficientMemory"),
            ),
            (
                Some(cond(
                    "MemoryPressure",
                    "True",
                    "KubeletHasInsufficientMemory",
                    b,
                )),
                true,
                "True",
                "KubeletHasInsufficientMemory",
                b,
                None,
            ),
            (
                Some(cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    b,
                )),
                false,
                "False",
                "KubeletHasSufficientMemory",
                b,
                None,
            ),
            (
                Some(cond("MemoryPressure", "Unknown", "NodeStatusUnknown", b)),
                false,
                "False",
                "KubeletHasSufficientMemory",
                t,
                Some("NodeHasSufficientMemory"),
            ),
        ];
        for (i, (existing, pressure, status, reason, transition, event)) in
            cases.into_iter().enumerate()
        {
            let existing: Vec<_> = existing.into_iter().collect();
            let health = NodeHealth {
                memory_pressure: pressure,
                ..Default::default()
            };
            let (conds, events) = set_conditions("n1", &existing, &health, &time(t));
            let c = conds.iter().find(|c| c.type_ == "MemoryPressure").unwrap();
            assert_eq!(c.status, status, "case {i}");
            assert_eq!(c.reason.as_deref(), Some(reason), "case {i}");
            assert_eq!(c.last_transition_time, Some(time(transition)), "case {i}");
            assert_eq!(c.last_heartbeat_time, Some(time(t)), "case {i}");
            let mem_events: Vec<_> = events
                .iter()
                .filter(|e| e.reason.contains("Memory"))
                .collect();
            match event {
                Some(r) => {
                    assert_eq!(mem_events.len(), 1, "case {i}");
                    assert_eq!(mem_events[0].reason, r);
                    assert_eq!(mem_events[0].message, format!("Node n1 status is now: {r}"));
                    assert_eq!(mem_events[0].type_, "Normal");
                }
                None => assert!(mem_events.is_empty(), "case {i}"),
            }
        }
    }

    #[test]
    fn fresh_node_conditions_order_strings_and_events() {
        // N-01 §3–4: four conditions, Ready last, three pressure events, no NodeReady.
        let (conds, events) = set_conditions("n1", &[], &NodeHealth::default(), &time(0));
        let got: Vec<_> = conds
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.clone().unwrap(),
                    c.message.clone().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory".into(),
                    "kubelet has sufficient memory available".into()
                ),
                (
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure".into(),
                    "kubelet has no disk pressure".into()
                ),
                (
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID".into(),
                    "kubelet has sufficient PID available".into()
                ),
                (
                    "Ready",
                    "True",
                    "KubeletReady".into(),
                    "kubelet is posting ready status".into()
                ),
            ]
        );
        assert!(
            conds.iter().all(|c| c.last_heartbeat_time == Some(time(0))
                && c.last_transition_time == Some(time(0)))
        );
        let reasons: Vec<_> = events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(
            reasons,
            vec![
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID"
            ]
        );
    }

    #[test]
    fn legacy_disk_reason_is_kept_without_transition() {
        let legacy = NodeCondition {
            type_: "DiskPressure".into(),
            status: "False".into(),
            reason: Some("KubeletHasSufficientDisk".into()),
            message: Some("kubelet has sufficient disk space available".into()),
            last_heartbeat_time: Some(time(0)),
            last_transition_time: Some(time(0)),
        };
        let (conds, _) = set_conditions("n1", &[legacy], &NodeHealth::default(), &time(10));
        let d = conds.iter().find(|c| c.type_ == "DiskPressure").unwrap();
        assert_eq!(d.reason.as_deref(), Some("KubeletHasSufficientDisk"));
        assert_eq!(
            d.message.as_deref(),
            Some("kubelet has sufficient disk space available")
        );
        assert_eq!(d.last_heartbeat_time, Some(time(10)));
        assert_eq!(
            conds[0].type_, "DiskPressure",
            "existing conditions keep their position"
        );
    }

    #[test]
    fn ready_setter_rules() {
        let ready = |s: &str, at| NodeCondition {
            type_: "Ready".into(),
            status: s.into(),
            reason: Some("x".into()),
            message: Some(String::new()),
            last_heartbeat_time: Some(time(at)),
            last_transition_time: Some(time(at)),
        };
        // ready, no transition: message rewritten, transition time kept, no event.
        let (c, e) = set_conditions("n1", &[ready("True", 5)], &NodeHealth::default(), &time(10));
        let r = c.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (r.reason.as_deref(), r.message.as_deref()),
            (
                Some("KubeletReady"),
                Some("kubelet is posting ready status")
            )
        );
        assert_eq!(r.last_transition_time, Some(time(5)));
        assert!(
            !e.iter()
                .any(|e| e.reason.starts_with("NodeReady") || e.reason == "NodeNotReady")
        );
        // True → False with one error, then with two errors (Go aggregate format).
        let h = NodeHealth {
            ready_errors: vec!["container runtime is down".into()],
            ..Default::default()
        };
        let (c, e) = set_conditions("n1", &[ready("True", 5)], &h, &time(10));
        let r = c.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (r.status.as_str(), r.reason.as_deref(), r.message.as_deref()),
            (
                "False",
                Some("KubeletNotReady"),
                Some("container runtime is down")
            )
        );
        assert_eq!(r.last_transition_time, Some(time(10)));
        assert!(
            e.iter().any(|e| e.reason == "NodeNotReady"
                && e.message == "Node n1 status is now: NodeNotReady")
        );
        let h = NodeHealth {
            ready_errors: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        let (c, _) = set_conditions("n1", &[ready("False", 5)], &h, &time(10));
        assert_eq!(
            c.iter()
                .find(|c| c.type_ == "Ready")
                .unwrap()
                .message
                .as_deref(),
            Some("[a, b]")
        );
        // Unknown (controller) → True: NodeReady event.
        let (_, e) = set_conditions(
            "n1",
            &[ready("Unknown", 5)],
            &NodeHealth::default(),
            &time(10),
        );
        assert!(e.iter().any(|e| e.reason == "NodeReady"));
    }

    #[test]
    fn status_change_ignores_heartbeats_only() {
        let (c1, _) = set_conditions("n1", &[], &NodeHealth::default(), &time(0));
        let old = NodeStatus {
            conditions: Some(c1.clone()),
            ..Default::default()
        };
        let (c2, _) = set_conditions("n1", &c1, &NodeHealth::default(), &time(10));
        let new = NodeStatus {
            conditions: Some(c2),
            ..Default::default()
        };
        assert!(!node_status_changed(&old, &new));
        let (c3, _) = set_conditions(
            "n1",
            &c1,
            &NodeHealth {
                memory_pressure: true,
                ..Default::default()
            },
            &time(10),
        );
        assert!(node_status_changed(
            &old,
            &NodeStatus {
                conditions: Some(c3),
                ..Default::default()
            }
        ));
        let mut other = new.clone();
        other.node_info = Some(NodeSystemInfo {
            boot_id: "b-2".into(),
            ..Default::default()
        });
        assert!(node_status_changed(&old, &other));
    }

    #[test]
    fn schedulable_events_on_cordon_and_uncordon() {
        let mut last = false; // registerSchedulable: true
        assert_eq!(schedulable_event("n1", &mut last, false), None);
        let e = schedulable_event("n1", &mut last, true).unwrap();
        assert_eq!(
            (e.reason.as_str(), e.message.as_str()),
            (
                "NodeNotSchedulable",
                "Node n1 status is now: NodeNotSchedulable"
            )
        );
        assert_eq!(schedulable_event("n1", &mut last, true), None);
        assert_eq!(
            schedulable_event("n1", &mut last, false).unwrap().reason,
            "NodeSchedulable"
        );
    }

    #[test]
    fn report_decision_table() {
        let t0 = Timestamp::from_second(1_767_225_600).unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let five = Duration::from_secs(300);
        let cases = [
            (true, at(10), Some(at(0)), true),
            (false, at(10), Some(at(0)), false),
            (false, at(299), Some(at(0)), false),
            (false, at(300), Some(at(0)), true),
            (false, at(0), None, true),
        ];
        for (changed, now, last, want) in cases {
            assert_eq!(
                should_report(changed, now, last, five),
                want,
                "{changed} {now} {last:?}"
            );
        }
    }

    fn ident(boot: &str) -> MachineIdentity {
        MachineIdentity {
            boot_id: boot.into(),
            machine_id: "m".into(),
            system_uuid: "s".into(),
        }
    }

    #[test]
    fn initial_node_matches_n01() {
        let spec = NodeSpecConfig {
            zone: Some("z1".into()),
            ..Default::default()
        };
        let (node, events) = initial_node(
            "n1",
            &spec,
            &KubeletConfig::default(),
            &ident("b-1"),
            &NodeHealth::default(),
            &time(0),
        );
        let labels = node.metadata.labels.clone().unwrap();
        let want: BTreeMap<String, String> = [
            ("kubernetes.io/hostname", "n1"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/arch", "amd64"),
            ("topology.kubernetes.io/zone", "z1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(labels, want);
        assert_eq!(
            node.metadata
                .annotations
                .unwrap()
                .get(ANNOTATION_CMAD)
                .map(String::as_str),
            Some("true")
        );
        let spec_ = node.spec.unwrap();
        assert!(spec_.taints.is_none() && spec_.unschedulable.is_none());
        let st = node.status.unwrap();
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(
            json["capacity"],
            serde_json::json!({"cpu": "4", "ephemeral-storage": "100Gi", "memory": "16Gi", "pods": "110"})
        );
        assert_eq!(
            json["allocatable"],
            serde_json::json!({"cpu": "4", "ephemeral-storage": "90Gi", "memory": "16284Mi", "pods": "110"})
        );
        assert_eq!(
            json["addresses"],
            serde_json::json!([{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "n1"}])
        );
        assert_eq!(json["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
        assert_eq!(json["nodeInfo"]["bootID"], "b-1");
        assert_eq!(json["nodeInfo"]["kubeletVersion"], "v1.33.1");
        assert_eq!(
            json["nodeInfo"]["containerRuntimeVersion"],
            "containerd://1.7.27"
        );
        assert_eq!(json["nodeInfo"]["kubeProxyVersion"], "");
        assert_eq!(events.len(), 3);
    }

    /// Node `n1` as first registered, boot id `b-1`, with the configuration it was built from.
    fn registered_n1() -> (NodeSpecConfig, KubeletConfig, Node) {
        let spec = NodeSpecConfig::default();
        let cfg = KubeletConfig::default();
        let (node, _) = initial_node(
            "n1",
            &spec,
            &cfg,
            &ident("b-1"),
            &NodeHealth::default(),
            &time(0),
        );
        (spec, cfg, node)
    }

    /// The field-by-field comparison is the comparison of copies with the conditions sorted by
    /// type and their heartbeat times cleared, over statuses that differ in each field, in a
    /// condition's parts, in the conditions' order, and in none versus no conditions.
    #[test]
    fn status_change_is_the_comparison_of_normalized_copies() {
        fn reference(old: &NodeStatus, new: &NodeStatus) -> bool {
            let norm = |s: &NodeStatus| {
                let mut conds = s.conditions.clone().unwrap_or_default();
                for c in &mut conds {
                    c.last_heartbeat_time = None;
                }
                conds.sort_by(|a, b| a.type_.cmp(&b.type_));
                (
                    NodeStatus {
                        conditions: None,
                        ..s.clone()
                    },
                    conds,
                )
            };
            norm(old) != norm(new)
        }
        let base = registered_n1().2.status.unwrap();
        let mut variants = vec![base.clone(), NodeStatus::default()];
        let mut with = |f: &dyn Fn(&mut NodeStatus)| {
            let mut s = base.clone();
            f(&mut s);
            variants.push(s);
        };
        with(&|s| s.conditions = None);
        with(&|s| s.conditions = Some(vec![]));
        with(&|s| s.conditions.as_mut().unwrap().reverse());
        with(&|s| s.conditions.as_mut().unwrap()[0].last_heartbeat_time = Some(time(99)));
        with(&|s| s.conditions.as_mut().unwrap()[0].last_transition_time = Some(time(99)));
        with(&|s| s.conditions.as_mut().unwrap()[0].message = Some("other".into()));
        with(&|s| s.conditions.as_mut().unwrap()[0].reason = Some("Other".into()));
        with(&|s| s.conditions.as_mut().unwrap()[0].status = "Unknown".into());
        with(&|s| s.conditions.as_mut().unwrap()[0].type_ = "Other".into());
        with(&|s| {
            s.conditions.as_mut().unwrap().pop();
        });
        with(&|s| s.addresses = None);
        with(&|s| s.allocatable = None);
        with(&|s| s.capacity = None);
        with(&|s| s.config = Some(Default::default()));
        with(&|s| s.daemon_endpoints = None);
        with(&|s| s.features = Some(Default::default()));
        with(&|s| s.images = Some(vec![Default::default()]));
        with(&|s| s.node_info.as_mut().unwrap().boot_id = "b-2".into());
        with(&|s| s.phase = Some("Running".into()));
        with(&|s| s.runtime_handlers = Some(vec![Default::default()]));
        with(&|s| s.volumes_attached = Some(vec![Default::default()]));
        with(&|s| s.volumes_in_use = Some(vec!["v".into()]));
        let mut differ = 0;
        for a in &variants {
            for b in &variants {
                assert_eq!(node_status_changed(a, b), reference(a, b), "{a:?}\n{b:?}");
                differ += usize::from(reference(a, b));
            }
        }
        // Most pairs differ; the heartbeat and order variants do not differ from the base.
        assert!(differ > variants.len() * (variants.len() - 4));
    }

    #[test]
    fn reboot_detected_once_per_changed_boot_id() {
        let (spec, cfg, node) = registered_n1();
        // Same boot id: no event, nothing changed.
        let m1 = machine_status("n1", &spec, &cfg, &ident("b-1"));
        let (s, e) = compute_status(&node, &m1, &NodeHealth::default(), &time(10));
        assert!(e.is_empty());
        assert!(!node_status_changed(node.status.as_ref().unwrap(), &s));
        // New boot id: Rebooted Warning with the new id; status changed.
        let m2 = machine_status("n1", &spec, &cfg, &ident("b-2"));
        let (s, e) = compute_status(&node, &m2, &NodeHealth::default(), &time(10));
        assert_eq!(e, vec![rebooted_event("n1", "b-2")]);
        assert_eq!(e[0].type_, "Warning");
        assert_eq!(e[0].message, "Node n1 has been rebooted, boot id: b-2");
        assert!(node_status_changed(node.status.as_ref().unwrap(), &s));
        // Empty stored boot id: no event.
        let mut blank = node.clone();
        blank
            .status
            .as_mut()
            .unwrap()
            .node_info
            .as_mut()
            .unwrap()
            .boot_id
            .clear();
        assert!(
            compute_status(&blank, &m2, &NodeHealth::default(), &time(10))
                .1
                .is_empty()
        );
    }

    /// N-05 table (the 9 keys) and N-02 (nothing to reconcile ⇒ no PATCH).
    #[test]
    fn default_label_reconciliation() {
        let nine = [
            names::LABEL_HOSTNAME,
            names::LABEL_ZONE,
            names::LABEL_REGION,
            names::LABEL_ZONE_BETA,
            names::LABEL_REGION_BETA,
            "node.kubernetes.io/instance-type",
            "beta.kubernetes.io/instance-type",
            names::LABEL_OS,
            names::LABEL_ARCH,
        ];
        let labels = |prefix: &str, extra: bool| -> Option<BTreeMap<String, String>> {
            let mut m: BTreeMap<String, String> = nine
                .iter()
                .map(|k| (k.to_string(), format!("{prefix}-{k}")))
                .collect();
            if extra {
                m.insert("please-persist".into(), "foo".into());
            }
            Some(m)
        };
        let node = |labels: Option<BTreeMap<String, String>>| Node {
            metadata: ObjectMeta {
                labels,
                annotations: Some([(ANNOTATION_CMAD.to_string(), "true".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let cases = [
            (labels("new", false), Some(BTreeMap::new()), true),
            (labels("new", false), labels("old", false), true),
            (labels("new", false), labels("new", true), false),
            (None, labels("new", true), false),
            (labels("new", false), labels("new", false), false),
            (labels("new", false), None, true),
        ];
        for (i, (fresh, existing, patch)) in cases.into_iter().enumerate() {
            let p = reconcile_existing(&node(existing), &node(fresh.clone()));
            assert_eq!(p.is_some(), patch, "case {i}");
            if let Some(p) = p {
                for k in nine {
                    assert_eq!(
                        p["metadata"]["labels"][k],
                        format!("new-{k}"),
                        "case {i} {k}"
                    );
                }
            }
        }
        // Empty value deletes; CMAD annotation added when missing.
        let mut fresh = node(Some(
            [(names::LABEL_ZONE.to_string(), String::new())].into(),
        ));
        fresh.metadata.annotations =
            Some([(ANNOTATION_CMAD.to_string(), "true".to_string())].into());
        let mut existing = node(Some(
            [(names::LABEL_ZONE.to_string(), "z".to_string())].into(),
        ));
        existing.metadata.annotations = None;
        let p = reconcile_existing(&existing, &fresh).unwrap();
        assert_eq!(
            p["metadata"]["labels"][names::LABEL_ZONE],
            serde_json::Value::Null
        );
        assert_eq!(p["metadata"]["annotations"][ANNOTATION_CMAD], "true");
    }

    #[test]
    fn lease_shape() {
        let now = MicroTime(Timestamp::from_second(1_767_225_600).unwrap());
        let l = new_lease("n1", "u-n1", 40, now.clone());
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(
            j["metadata"]["ownerReferences"],
            serde_json::json!([{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u-n1"}])
        );
        assert_eq!(j["spec"]["holderIdentity"], "n1");
        assert_eq!(j["spec"]["leaseDurationSeconds"], 40);
        assert!(
            j["spec"].get("acquireTime").is_none() && j["spec"].get("leaseTransitions").is_none()
        );
        // Renewal: duration re-written (N-14), owner reference added when missing.
        let mut base = l.clone();
        base.metadata.owner_references = None;
        base.spec.as_mut().unwrap().lease_duration_seconds = Some(123);
        let r = renewed_lease(&base, "n1", Some("u-n1"), 456, now);
        assert_eq!(r.spec.as_ref().unwrap().lease_duration_seconds, Some(456));
        assert_eq!(r.metadata.owner_references.unwrap()[0].uid, "u-n1");
    }
}
