//! The disruption controller's decisions (upstream `pkg/controller/disruption`), pure: which pods
//! a budget covers, how many are expected and must stay healthy, how many are healthy now, which
//! `disruptedPods` entries still hold, and the status (with its `DisruptionAllowed` condition)
//! to write — or none when the stored one is up to date.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::replicaset::util;

/// How long an entry of `status.disruptedPods` keeps its pod out of `currentHealthy` while the
/// pod is not seen deleting (upstream `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a `DisruptionTarget=True` condition may stay on a pod that is not being deleted
/// before the controller resets it to False (upstream `stalePodDisruptionTimeout`).
pub const STALE_POD_DISRUPTION_TIMEOUT: Duration = Duration::from_secs(120);

/// Condition type and reasons of `policy/v1` (`DisruptionAllowedCondition`, …).
pub const COND_DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const REASON_SUFFICIENT_PODS: &str = "SufficientPods";
pub const REASON_INSUFFICIENT_PODS: &str = "InsufficientPods";
pub const REASON_SYNC_FAILED: &str = "SyncFailed";

/// The pod condition reason the kubelet sets; such conditions are never stale.
pub const REASON_TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

/// What the controller's caches know of one workload object.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub uid: String,
    /// `spec.replicas` (defaulted by the API server, so always set on stored objects).
    pub replicas: i32,
    /// The object's own controller reference (a ReplicaSet's Deployment).
    pub controller: Option<OwnerReference>,
}

/// The workload kinds the controller reads from informers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    ReplicaSet,
    StatefulSet,
}

/// Read access to the workload caches.
pub trait Workloads {
    fn get(&self, kind: WorkloadKind, namespace: &str, name: &str) -> Option<Workload>;
}

/// Kinds klab serves that a pod's controller reference may name, with their resource and whether
/// they have a `scale` subresource: the part of a discovery-backed REST mapper the controller
/// needs (upstream asks discovery; klab's table of served resources is fixed, and a test keeps
/// this list equal to it).
pub const SERVED_KINDS: &[(&str, &str, &str, bool)] = &[
    // (group, kind, plural, has scale)
    ("", "Node", "nodes", false),
    ("", "Pod", "pods", false),
    ("", "Service", "services", false),
    ("", "ConfigMap", "configmaps", false),
    ("", "Secret", "secrets", false),
    ("", "Namespace", "namespaces", false),
    ("", "ServiceAccount", "serviceaccounts", false),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", false),
    ("apps", "Deployment", "deployments", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", false),
    ("apps", "ControllerRevision", "controllerrevisions", false),
    ("batch", "Job", "jobs", false),
];

/// `schema.ParseGroupVersion`: `v1` (core), `apps/v1`; more than one `/` is an error.
fn parse_group_version(api_version: &str) -> Result<(&str, &str), String> {
    if api_version.is_empty() {
        return Ok(("", ""));
    }
    match api_version.split_once('/') {
        None => Ok(("", api_version)),
        Some((g, v)) if !v.contains('/') => Ok((g, v)),
        _ => Err(format!("unexpected GroupVersion string: {api_version}")),
    }
}

/// `verifyGroupKind`: the reference names `kind` in one of `groups`.
fn verify_group_kind(r: &OwnerReference, kind: &str, groups: &[&str]) -> Result<bool, String> {
    let (group, _) = parse_group_version(&r.api_version)?;
    Ok(r.kind == kind && groups.contains(&group))
}

const APPS: &[&str] = &["apps", "extensions"];

/// A controller and its scale, as upstream's `controllerAndScale`.
type Scale = Option<(String, i32)>;

fn find_deployment(w: &dyn Workloads, r: &OwnerReference, ns: &str) -> Result<Scale, String> {
    if !verify_group_kind(r, "ReplicaSet", APPS)? {
        return Ok(None);
    }
    let Some(rs) = w
        .get(WorkloadKind::ReplicaSet, ns, &r.name)
        .filter(|rs| rs.uid == r.uid)
    else {
        return Ok(None);
    };
    let Some(dref) = rs.controller else {
        return Ok(None);
    };
    if !verify_group_kind(&dref, "Deployment", APPS)? {
        return Ok(None);
    }
    Ok(w.get(WorkloadKind::Deployment, ns, &dref.name)
        .filter(|d| d.uid == dref.uid)
        .map(|d| (d.uid, d.replicas)))
}

fn find_replica_set(w: &dyn Workloads, r: &OwnerReference, ns: &str) -> Result<Scale, String> {
    if !verify_group_kind(r, "ReplicaSet", APPS)? {
        return Ok(None);
    }
    let Some(rs) = w
        .get(WorkloadKind::ReplicaSet, ns, &r.name)
        .filter(|rs| rs.uid == r.uid)
    else {
        return Ok(None);
    };
    // A ReplicaSet of a Deployment counts with the Deployment's scale (the finder above).
    if rs
        .controller
        .as_ref()
        .is_some_and(|c| c.kind == "Deployment")
    {
        return Ok(None);
    }
    Ok(Some((rs.uid, rs.replicas)))
}

fn find_stateful_set(w: &dyn Workloads, r: &OwnerReference, ns: &str) -> Result<Scale, String> {
    if !verify_group_kind(r, "StatefulSet", &["apps"])? {
        return Ok(None);
    }
    Ok(w.get(WorkloadKind::StatefulSet, ns, &r.name)
        .filter(|s| s.uid == r.uid)
        .map(|s| (s.uid, s.replicas)))
}

/// `getScaleController`: any kind through its `scale` subresource; a kind without one is an
/// error, an unknown kind is the REST mapper's error.
fn find_by_scale(w: &dyn Workloads, r: &OwnerReference, ns: &str) -> Result<Scale, String> {
    let (group, version) = parse_group_version(&r.api_version)?;
    let gv = r.api_version.as_str();
    let Some(&(_, kind, plural, has_scale)) = SERVED_KINDS
        .iter()
        .find(|(g, k, _, _)| *g == group && *k == r.kind)
        .filter(|_| version == "v1")
    else {
        return Err(format!(
            "no matches for kind {:?} in version {gv:?}",
            r.kind
        ));
    };
    if !has_scale {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        return Err(format!("{gr} does not implement the scale subresource"));
    }
    let wk = match kind {
        "Deployment" => WorkloadKind::Deployment,
        "ReplicaSet" => WorkloadKind::ReplicaSet,
        _ => WorkloadKind::StatefulSet,
    };
    Ok(w.get(wk, ns, &r.name)
        .filter(|o| o.uid == r.uid)
        .map(|o| (o.uid, o.replicas)))
}

/// `getExpectedScale`: the sum of the scales of the controllers of `pods`, and the pods with no
/// controller. A pod whose controller cannot be found is an error.
pub fn expected_scale(pods: &[&Pod], w: &dyn Workloads) -> Result<(i32, Vec<String>), String> {
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    let mut unmanaged = Vec::new();
    type Finder = fn(&dyn Workloads, &OwnerReference, &str) -> Result<Scale, String>;
    let finders: [Finder; 4] = [
        find_deployment,
        find_replica_set,
        find_stateful_set,
        find_by_scale,
    ];
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(r) = util::controller_ref(&pod.metadata) else {
            unmanaged.push(name);
            continue;
        };
        if scales.contains_key(&r.uid) {
            continue;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        let mut found = false;
        for f in finders {
            if let Some((uid, scale)) = f(w, r, ns)? {
                scales.insert(uid, scale);
                found = true;
                break;
            }
        }
        if !found {
            return Err(format!("found no controllers for pod {name:?}"));
        }
    }
    // Upstream adds int32s; klab saturates instead of wrapping.
    let total = scales.values().fold(0i32, |a, s| a.saturating_add(*s));
    Ok((total, unmanaged))
}

/// `intstr.GetScaledValueFromIntOrPercent`: an int as is, `N%` of `total` rounded up or down.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .into(),
                );
            };
            let p: i64 = num.parse().map_err(|e: std::num::ParseIntError| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                        "value out of range"
                    }
                    _ => "invalid syntax",
                };
                format!(
                    "invalid value for IntOrString: invalid value {s:?}: strconv.Atoi: parsing {num:?}: {why}"
                )
            })?;
            let prod = p.saturating_mul(i64::from(total));
            let q = if round_up {
                prod.div_euclid(100)
                    .saturating_add(i64::from(prod.rem_euclid(100) != 0))
            } else {
                prod.div_euclid(100)
            };
            Ok(q.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
        }
    }
}

/// `getExpectedPodCount`: (expected pods, desired healthy, unmanaged pods).
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    w: &dyn Workloads,
) -> Result<(i32, i32, Vec<String>), String> {
    let spec = pdb.spec.as_ref();
    if let Some(max) = spec.and_then(|s| s.max_unavailable.as_ref()) {
        let (expected, unmanaged) = expected_scale(pods, w)?;
        let max = scaled_value(max, expected, true)?;
        let desired = expected.saturating_sub(max).max(0);
        return Ok((expected, desired, unmanaged));
    }
    match spec.and_then(|s| s.min_available.as_ref()) {
        Some(IntOrString::Int(n)) => Ok((len_i32(pods.len()), *n, Vec::new())),
        Some(min @ IntOrString::String(_)) => {
            let (expected, unmanaged) = expected_scale(pods, w)?;
            Ok((expected, scaled_value(min, expected, true)?, unmanaged))
        }
        None => Ok((0, 0, Vec::new())),
    }
}

fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `buildDisruptedPodMap`: the entries of `status.disruptedPods` that still hold (their pod
/// exists, is not deleting, and the entry is younger than [`DELETION_TIMEOUT`]), the instant the
/// earliest of them has expired (when to sync again: a millisecond after its deadline, since
/// an entry expires strictly after it and a sync at the deadline itself would find nothing to
/// drop and ask again at once), and the pods whose entry expired (upstream records a
/// `NotDeleted` warning on each).
pub fn disrupted_pod_map(
    pods: &[&Pod],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>, Vec<String>) {
    let mut result = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let mut not_deleted = Vec::new();
    let Some(disrupted) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else {
        return (result, recheck, not_deleted);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(t) = disrupted.get(&name) else {
            continue;
        };
        let expected_deletion = klab_api::clock::saturating_add(t.0, DELETION_TIMEOUT);
        if expected_deletion < now {
            not_deleted.push(name);
        } else {
            let expired_at =
                klab_api::clock::saturating_add(expected_deletion, Duration::from_millis(1));
            if recheck.is_none_or(|r| expired_at < r) {
                recheck = Some(expired_at);
            }
            result.insert(name, t.clone());
        }
    }
    (result, recheck, not_deleted)
}

/// `countHealthyPods`: Ready pods that are not deleting and not about to be (a recent
/// `disruptedPods` entry).
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    let healthy = pods.iter().filter(|pod| {
        if pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let name = pod.metadata.name.as_deref().unwrap_or("");
        if disrupted
            .get(name)
            .is_some_and(|t| klab_api::clock::saturating_add(t.0, DELETION_TIMEOUT) > now)
        {
            return false;
        }
        util::is_pod_ready(pod)
    });
    len_i32(healthy.count())
}

/// `apimeta.SetStatusCondition`: replaces the condition of the same type, keeping its transition
/// time unless the status changed.
pub fn set_condition(conds: &mut Vec<Condition>, mut c: Condition) {
    match conds.iter_mut().find(|x| x.type_ == c.type_) {
        Some(existing) => {
            if existing.status != c.status {
                existing.status = std::mem::take(&mut c.status);
                existing.last_transition_time = c.last_transition_time;
            }
            existing.reason = c.reason;
            existing.message = c.message;
            existing.observed_generation = c.observed_generation;
        }
        None => conds.push(c),
    }
}

/// `pdbhelper.UpdateDisruptionAllowedCondition`.
pub fn update_disruption_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Timestamp) {
    let (st, reason) = if status.disruptions_allowed > 0 {
        ("True", REASON_SUFFICIENT_PODS)
    } else {
        ("False", REASON_INSUFFICIENT_PODS)
    };
    let observed = status.observed_generation;
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        Condition {
            type_: COND_DISRUPTION_ALLOWED.into(),
            status: st.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: observed,
            last_transition_time: Time(now),
        },
    );
}

/// `pdbhelper.ConditionsAreUpToDate`.
fn conditions_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let Some(status) = pdb.status.as_ref() else {
        return false;
    };
    let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == COND_DISRUPTION_ALLOWED)
    else {
        return false;
    };
    if status.observed_generation != pdb.metadata.generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        c.status == "True" && c.reason == REASON_SUFFICIENT_PODS
    } else {
        c.status == "False" && c.reason == REASON_INSUFFICIENT_PODS
    }
}

/// `updatePdbStatus`: the status to write, or `None` when the stored one already says it.
pub fn new_status(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    desired_healthy: i32,
    expected: i32,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    // A budget that matches no pods yet allows nothing, so that its first pods are safe before
    // the controller has counted them.
    let allowed = current_healthy.saturating_sub(desired_healthy);
    let allowed = if expected <= 0 || allowed <= 0 {
        0
    } else {
        allowed
    };
    let old = pdb.status.clone().unwrap_or_default();
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    if old.current_healthy == current_healthy
        && old.desired_healthy == desired_healthy
        && old.expected_pods == expected
        && old.disruptions_allowed == allowed
        && old_disrupted == disrupted
        && old.observed_generation == pdb.metadata.generation
        && conditions_up_to_date(pdb)
    {
        return None;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy,
        desired_healthy,
        expected_pods: expected,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: old.conditions,
    };
    update_disruption_allowed_condition(&mut status, now);
    Some(status)
}

/// `failSafe`: when the budget cannot be computed, allow no disruption and say why.
pub fn fail_safe_status(
    pdb: &PodDisruptionBudget,
    err: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let observed = status.observed_generation;
    set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        Condition {
            type_: COND_DISRUPTION_ALLOWED.into(),
            status: "False".into(),
            reason: REASON_SYNC_FAILED.into(),
            message: err.to_string(),
            observed_generation: observed,
            last_transition_time: Time(now),
        },
    );
    status
}

/// `nonTerminatingPodHasStaleDisruptionCondition`: when a `DisruptionTarget=True` condition on a
/// pod that is not being deleted becomes stale (`Some(t)`, possibly already past), or `None` when
/// the pod has no such condition (or the kubelet set it, or the pod is terminal).
pub fn stale_disruption_at(pod: &Pod) -> Option<Timestamp> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = util::phase(pod);
    if phase == util::PHASE_SUCCEEDED || phase == util::PHASE_FAILED {
        return None;
    }
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == klab_api::names::POD_COND_DISRUPTION_TARGET)?;
    if c.status != "True" || c.reason.as_deref() == Some(REASON_TERMINATION_BY_KUBELET) {
        return None;
    }
    let since = c
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    Some(klab_api::clock::saturating_add(
        since,
        STALE_POD_DISRUPTION_TIMEOUT,
    ))
}

/// The `%v` rendering of a `*metav1.LabelSelector` in upstream's `UnmanagedPods` event.
pub fn go_selector(
    sel: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> String {
    let Some(sel) = sel else {
        return "nil".into();
    };
    let labels: String = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}: {v},"))
        .collect();
    let exprs: String = sel
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let values: String = e.values.iter().flatten().map(|v| format!("{v},")).collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[]string{{{values}}},}},",
                e.key, e.operator
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
}

/// The pods a budget covers: the namespace's pods its selector matches (policy/v1: an empty
/// selector matches every pod, a missing one none).
pub fn selects(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    let Some(sel) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    match klab_api::selector::LabelSelector::from_label_selector(sel) {
        Ok(s) => s.matches(util::labels(&pod.metadata)),
        Err(_) => false,
    }
}
