//! Pure Deployment decisions, after upstream `pkg/controller/deployment` and its `util`:
//! maxSurge/maxUnavailable arithmetic, the rolling-update scale steps, the Recreate gate, the
//! proportional scaling of `kubectl scale` during a rollout, revision bookkeeping, history
//! cleanup, and the status with its Available/Progressing conditions.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use klab_api::clock::truncate_to_second;
use klab_api::names;

use crate::replicaset::util::{self, PHASE_FAILED, PHASE_SUCCEEDED, time};

/// Upstream `maxRevHistoryLengthInChars` (the revision-history annotation's size limit).
pub const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;

/// Errors of the pure decisions (bad user input; the controller logs and skips the sync).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    #[error("invalid value for IntOrString: invalid value {0:?}")]
    BadIntOrPercent(String),
}

/// The two strategies (`spec.strategy.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Recreate,
    RollingUpdate,
}

/// The effective spec values, with the API defaults for anything unset.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub replicas: i32,
    pub strategy: Strategy,
    pub max_surge: IntOrString,
    pub max_unavailable: IntOrString,
    pub revision_history_limit: Option<i32>,
    /// `None` = no deadline (unset or MaxInt32).
    pub progress_deadline_seconds: Option<i32>,
    pub min_ready_seconds: i32,
    pub paused: bool,
}

impl Params {
    pub fn of(d: &Deployment) -> Params {
        let spec = d.spec.clone().unwrap_or_default();
        let strat = spec.strategy.unwrap_or_default();
        let strategy = match strat.type_.as_deref() {
            Some("Recreate") => Strategy::Recreate,
            _ => Strategy::RollingUpdate,
        };
        let ru = strat.rolling_update.unwrap_or_default();
        Params {
            replicas: spec.replicas.unwrap_or(1),
            strategy,
            max_surge: ru.max_surge.unwrap_or(IntOrString::String("25%".into())),
            max_unavailable: ru
                .max_unavailable
                .unwrap_or(IntOrString::String("25%".into())),
            revision_history_limit: Some(spec.revision_history_limit.unwrap_or(10)),
            progress_deadline_seconds: match spec.progress_deadline_seconds {
                None => Some(600),
                Some(i32::MAX) => None,
                Some(s) => Some(s),
            },
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
            paused: spec.paused.unwrap_or(false),
        }
    }
}

/// Upstream `intstr.GetScaledValueFromIntOrPercent`.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, DecideError> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let n: i64 = s
                .strip_suffix('%')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| DecideError::BadIntOrPercent(s.clone()))?;
            let x = n as f64 * total as f64 / 100.0;
            Ok(if round_up { x.ceil() } else { x.floor() } as i32)
        }
    }
}

/// Upstream `ResolveFenceposts`: surge rounds up, unavailable rounds down; both zero ⇒ unavailable 1.
pub fn resolve_fenceposts(
    surge: &IntOrString,
    unavailable: &IntOrString,
    desired: i32,
) -> Result<(i32, i32), DecideError> {
    let s = scaled_value(surge, desired, true)?;
    let u = scaled_value(unavailable, desired, false)?;
    if s == 0 && u == 0 {
        return Ok((0, 1));
    }
    Ok((s, u))
}

/// Upstream `MaxUnavailable` (0 for Recreate or zero replicas; never more than replicas).
pub fn max_unavailable(p: &Params) -> i32 {
    if p.strategy != Strategy::RollingUpdate || p.replicas == 0 {
        return 0;
    }
    let (_, u) = resolve_fenceposts(&p.max_surge, &p.max_unavailable, p.replicas).unwrap_or((0, 1));
    u.min(p.replicas)
}

/// Upstream `MaxSurge` (0 for Recreate).
pub fn max_surge(p: &Params) -> i32 {
    if p.strategy != Strategy::RollingUpdate {
        return 0;
    }
    resolve_fenceposts(&p.max_surge, &p.max_unavailable, p.replicas)
        .map(|(s, _)| s)
        .unwrap_or(0)
}

pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}
fn status_replicas(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().map(|s| s.replicas).unwrap_or(0)
}
pub fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}
fn ready(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}
fn ann(meta: &ObjectMeta, k: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(k)).cloned()
}
fn ann_i32(meta: &ObjectMeta, k: &str) -> Option<i32> {
    ann(meta, k).and_then(|v| v.parse().ok())
}

/// `deployment.kubernetes.io/revision` of a ReplicaSet (0 when missing or unparsable).
pub fn revision(rs: &ReplicaSet) -> i64 {
    ann(&rs.metadata, names::ANN_DEPLOYMENT_REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn max_revision(rss: &[&ReplicaSet]) -> i64 {
    rss.iter().map(|r| revision(r)).max().unwrap_or(0)
}

/// Upstream `ReplicaSetsByCreationTimestamp` (name breaks ties).
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match t(a).cmp(&t(b)) {
        Ordering::Equal => a.metadata.name.cmp(&b.metadata.name),
        o => o,
    }
}

/// Upstream `ReplicaSetsBySizeNewer`: larger first, newer first on ties.
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    spec_replicas(b)
        .cmp(&spec_replicas(a))
        .then_with(|| by_creation(b, a))
}

/// Upstream `ReplicaSetsBySizeOlder`: larger first, older first on ties.
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    spec_replicas(b)
        .cmp(&spec_replicas(a))
        .then_with(|| by_creation(a, b))
}

/// Upstream `ReplicaSetsByRevision`: lower revision first, then by creation.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    revision(a)
        .cmp(&revision(b))
        .then_with(|| by_creation(a, b))
}

/// The template with the `pod-template-hash` label removed, normalized (upstream `EqualIgnoreHash`).
fn template_ignoring_hash(t: &PodTemplateSpec) -> serde_json::Value {
    let mut t = t.clone();
    if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.remove(names::LABEL_POD_TEMPLATE_HASH);
    }
    util::normalized_template(&t)
}

pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    template_ignoring_hash(a) == template_ignoring_hash(b)
}

/// Upstream `FindNewReplicaSet` + `FindOldReplicaSets`: the oldest ReplicaSet whose template equals
/// the Deployment's is the new one; all others are old. Input order is irrelevant.
pub fn split_new_old<'a>(
    d: &Deployment,
    rss: &[&'a ReplicaSet],
) -> (Option<&'a ReplicaSet>, Vec<&'a ReplicaSet>) {
    let mut sorted: Vec<&ReplicaSet> = rss.to_vec();
    sorted.sort_by(|a, b| by_creation(a, b));
    let tmpl = d
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let new = sorted.iter().copied().find(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, &tmpl))
    });
    let old = sorted
        .into_iter()
        .filter(|rs| Some(rs.metadata.uid.clone()) != new.map(|n| n.metadata.uid.clone()))
        .collect();
    (new, old)
}

/// Upstream `NewRSNewReplicas`: the size the new ReplicaSet may have now.
/// `all_spec_sum` is the sum of `spec.replicas` over all ReplicaSets (incl. the new one).
pub fn new_rs_new_replicas(p: &Params, all_spec_sum: i32, new_rs_replicas: i32) -> i32 {
    match p.strategy {
        Strategy::Recreate => p.replicas,
        Strategy::RollingUpdate => {
            let max_total = p.replicas.saturating_add(max_surge(p));
            if all_spec_sum >= max_total {
                return new_rs_replicas;
            }
            let up = max_total
                .saturating_sub(all_spec_sum)
                .min(p.replicas.saturating_sub(new_rs_replicas));
            new_rs_replicas.saturating_add(up)
        }
    }
}

/// Upstream `reconcileNewReplicaSet`: the new size of the new ReplicaSet, or None to leave it.
pub fn rolling_new_rs_target(p: &Params, all: &[&ReplicaSet], new: &ReplicaSet) -> Option<i32> {
    let cur = spec_replicas(new);
    if cur == p.replicas {
        return None;
    }
    if cur > p.replicas {
        return Some(p.replicas);
    }
    let sum = sum_i32(all.iter().map(|r| spec_replicas(r)));
    let n = new_rs_new_replicas(p, sum, cur);
    (n != cur).then_some(n)
}

/// Upstream `reconcileOldReplicaSets` (`cleanupUnhealthyReplicas`, then
/// `scaleDownOldReplicaSetsForRollingUpdate`): new sizes for old ReplicaSets, in the order to apply.
pub fn rolling_old_rs_targets(
    p: &Params,
    all: &[&ReplicaSet],
    old: &[&ReplicaSet],
    new: &ReplicaSet,
) -> Vec<(String, i32)> {
    let old_count = sum_i32(old.iter().map(|r| spec_replicas(r)));
    if old_count == 0 {
        return Vec::new();
    }
    let all_count = sum_i32(all.iter().map(|r| spec_replicas(r)));
    let max_unavail = max_unavailable(p);
    let min_available = p.replicas.saturating_sub(max_unavail);
    let new_unavailable = spec_replicas(new).saturating_sub(available(new));
    let max_scaled_down = all_count
        .saturating_sub(min_available)
        .saturating_sub(new_unavailable);
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut sorted: Vec<&ReplicaSet> = old.to_vec();
    sorted.sort_by(|a, b| by_creation(a, b));
    // Current sizes, updated as steps are decided.
    let mut size: BTreeMap<String, i32> =
        sorted.iter().map(|r| (name(r), spec_replicas(r))).collect();
    let mut out: Vec<(String, i32)> = Vec::new();
    // 1. unhealthy replicas first
    let mut cleaned = 0;
    for rs in &sorted {
        if cleaned >= max_scaled_down {
            break;
        }
        let cur = size.get(&name(rs)).copied().unwrap_or(0);
        if cur == 0 || cur == available(rs) {
            continue;
        }
        let down = max_scaled_down
            .saturating_sub(cleaned)
            .min(cur.saturating_sub(available(rs)));
        let n = cur.saturating_sub(down);
        size.insert(name(rs), n);
        out.push((name(rs), n));
        cleaned = cleaned.saturating_add(down);
    }
    // 2. then healthy ones, as long as availability stays above minAvailable
    let available_all = sum_i32(all.iter().map(|r| available(r)));
    if available_all > min_available {
        let total = available_all.saturating_sub(min_available);
        let mut done = 0;
        for rs in &sorted {
            if done >= total {
                break;
            }
            let cur = size.get(&name(rs)).copied().unwrap_or(0);
            if cur == 0 {
                continue;
            }
            let down = cur.min(total.saturating_sub(done));
            let n = cur.saturating_sub(down);
            size.insert(name(rs), n);
            out.retain(|(k, _)| *k != name(rs));
            out.push((name(rs), n));
            done = done.saturating_add(down);
        }
    }
    out
}

fn name(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

/// Upstream `oldPodsRunning` (Recreate): an old ReplicaSet still reports pods, or a pod of an old
/// ReplicaSet — Terminating ones included — is not Failed/Succeeded. `pods` are the pods whose
/// controllerRef is one of the Deployment's ReplicaSets.
pub fn old_pods_running(new_uid: Option<&str>, old: &[&ReplicaSet], pods: &[&Pod]) -> bool {
    if sum_i32(old.iter().map(|r| status_replicas(r))) > 0 {
        return true;
    }
    pods.iter().any(|p| {
        let owner = util::controller_ref(&p.metadata).map(|r| r.uid.as_str());
        if owner.is_some() && owner == new_uid {
            return false;
        }
        !matches!(util::phase(p), PHASE_FAILED | PHASE_SUCCEEDED)
    })
}

/// ReplicaSets with `spec.replicas > 0` (upstream `FilterActiveReplicaSets`).
pub fn active<'a>(rss: &[&'a ReplicaSet]) -> Vec<&'a ReplicaSet> {
    rss.iter()
        .copied()
        .filter(|r| spec_replicas(r) > 0)
        .collect()
}

/// Upstream `isScalingEvent`: an active ReplicaSet's desired-replicas annotation differs from
/// `spec.replicas`.
pub fn is_scaling_event(p: &Params, all: &[&ReplicaSet]) -> bool {
    active(all).iter().any(|rs| {
        ann_i32(&rs.metadata, names::ANN_DEPLOYMENT_DESIRED_REPLICAS)
            .is_some_and(|d| d != p.replicas)
    })
}

/// Upstream `IsSaturated`.
fn is_saturated(p: &Params, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let desired = ann_i32(&rs.metadata, names::ANN_DEPLOYMENT_DESIRED_REPLICAS);
    spec_replicas(rs) == p.replicas && desired == Some(p.replicas) && available(rs) == p.replicas
}

/// Upstream `scale` (a scaling event, or a paused Deployment): new sizes `(name, size)`; an entry
/// equal to the current size still rewrites the replica annotations.
pub fn proportional_scale(
    p: &Params,
    d: &Deployment,
    new: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
) -> Vec<(String, i32)> {
    // FindActiveOrLatest
    if new.is_some() || !old.is_empty() {
        let mut all: Vec<&ReplicaSet> = old.to_vec();
        all.sort_by(|a, b| by_creation(b, a));
        if let Some(n) = new {
            all.push(n);
        }
        let act = active(&all);
        let pick = match act.len() {
            0 => new.or(all.first().copied()),
            1 => Some(act[0]),
            _ => None,
        };
        if let Some(rs) = pick {
            return if spec_replicas(rs) == p.replicas {
                Vec::new()
            } else {
                vec![(name(rs), p.replicas)]
            };
        }
    }
    if is_saturated(p, new) {
        return active(old).iter().map(|r| (name(r), 0)).collect();
    }
    if p.strategy != Strategy::RollingUpdate {
        return Vec::new();
    }
    let mut all: Vec<&ReplicaSet> = old.to_vec();
    if let Some(n) = new {
        all.push(n);
    }
    let mut all = active(&all);
    let all_sum = sum_i32(all.iter().map(|r| spec_replicas(r)));
    let allowed = if p.replicas > 0 {
        p.replicas.saturating_add(max_surge(p))
    } else {
        0
    };
    let to_add = allowed.saturating_sub(all_sum);
    match to_add.cmp(&0) {
        // BySizeNewer: larger first, newer first on ties
        Ordering::Greater => all.sort_by(|a, b| by_size_newer(a, b)),
        // BySizeOlder: larger first, older first on ties
        Ordering::Less => all.sort_by(|a, b| by_size_older(a, b)),
        Ordering::Equal => {}
    }
    let d_status_replicas = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = Vec::new();
    for rs in &all {
        if to_add != 0 {
            let prop = proportion(p, rs, d_status_replicas, to_add, added);
            sizes.push((name(rs), spec_replicas(rs).saturating_add(prop)));
            added = added.saturating_add(prop);
        } else {
            sizes.push((name(rs), spec_replicas(rs)));
        }
    }
    if to_add != 0
        && let Some(first) = sizes.first_mut()
    {
        first.1 = first.1.saturating_add(to_add).saturating_sub(added).max(0);
    }
    sizes
}

/// Upstream `GetProportion` / `getReplicaSetFraction`.
fn proportion(p: &Params, rs: &ReplicaSet, d_status_replicas: i32, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if p.replicas == 0 {
        spec_replicas(rs).saturating_neg()
    } else {
        let max_now = p.replicas.saturating_add(max_surge(p));
        let before =
            ann_i32(&rs.metadata, names::ANN_DEPLOYMENT_MAX_REPLICAS).unwrap_or(d_status_replicas);
        if before == 0 {
            0
        } else {
            let x = f64::from(spec_replicas(rs)) * f64::from(max_now) / f64::from(before);
            (x.round() as i32).saturating_sub(spec_replicas(rs))
        }
    };
    let allowed = to_add.saturating_sub(added);
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// Upstream `cleanupDeployment`: old ReplicaSets to delete beyond `revisionHistoryLimit`, oldest
/// revision first, only empty, settled ones.
pub fn cleanup_victims(p: &Params, old: &[&ReplicaSet]) -> Vec<String> {
    let Some(limit) = p.revision_history_limit else {
        return Vec::new();
    };
    let mut alive: Vec<&ReplicaSet> = old
        .iter()
        .copied()
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .collect();
    let diff = (alive.len() as i64).saturating_sub(i64::from(limit));
    if diff <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| by_revision(a, b));
    alive
        .into_iter()
        .take(diff as usize)
        .filter(|r| {
            status_replicas(r) == 0
                && spec_replicas(r) == 0
                && r.metadata.generation.unwrap_or(0)
                    <= r.status
                        .as_ref()
                        .and_then(|s| s.observed_generation)
                        .unwrap_or(0)
        })
        .map(name)
        .collect()
}

/// The new ReplicaSet upstream `getNewReplicaSet` creates: `<deploy>-<hash>`, template and selector
/// carrying `pod-template-hash`, owned by the Deployment, annotations copied, revision set, and the
/// desired/max replica annotations.
pub fn new_replica_set(
    d: &Deployment,
    p: &Params,
    hash: &str,
    revision: i64,
    replicas: i32,
) -> ReplicaSet {
    let spec = d.spec.clone().unwrap_or_default();
    let mut template = spec.template.clone();
    let tm = template.metadata.get_or_insert_with(Default::default);
    tm.labels
        .get_or_insert_with(Default::default)
        .insert(names::LABEL_POD_TEMPLATE_HASH.into(), hash.into());
    let mut selector: LabelSelector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(names::LABEL_POD_TEMPLATE_HASH.into(), hash.into());
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{}",
                d.metadata.name.clone().unwrap_or_default(),
                hash
            )),
            namespace: d.metadata.namespace.clone(),
            labels: tm.labels.clone(),
            owner_references: Some(vec![util::new_controller_ref(
                "apps/v1",
                "Deployment",
                &d.metadata,
            )]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    };
    set_new_rs_annotations(d, &mut rs, revision, false);
    set_replicas_annotations(
        &mut rs.metadata,
        p.replicas,
        p.replicas.saturating_add(max_surge(p)),
    );
    rs
}

fn skip_copy_annotation(k: &str) -> bool {
    matches!(
        k,
        names::ANN_LAST_APPLIED_CONFIG
            | names::ANN_DEPLOYMENT_REVISION
            | names::ANN_DEPLOYMENT_REVISION_HISTORY
            | names::ANN_DEPLOYMENT_DESIRED_REPLICAS
            | names::ANN_DEPLOYMENT_MAX_REPLICAS
            | "deprecated.deployment.rollback.to"
    )
}

/// Upstream `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, raise the revision
/// (keeping a `revision-history` when an existing ReplicaSet is reused). Returns whether anything changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let _ = exists;
    let mut changed = false;
    let a = rs.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) || a.get(k) == Some(v) {
            continue;
        }
        a.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = a.get(names::ANN_DEPLOYMENT_REVISION).cloned();
    let old_int = match old.as_deref() {
        None | Some("") => 0,
        Some(s) => match s.parse::<i64>() {
            Ok(v) => v,
            Err(_) => return changed,
        },
    };
    if old_int < new_revision {
        a.insert(
            names::ANN_DEPLOYMENT_REVISION.into(),
            new_revision.to_string(),
        );
        changed = true;
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            let hist = a
                .get(names::ANN_DEPLOYMENT_REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            if hist.is_empty() {
                a.insert(names::ANN_DEPLOYMENT_REVISION_HISTORY.into(), old);
            } else {
                let mut revs: Vec<&str> = hist.split(',').collect();
                let mut total = hist.len().saturating_add(old.len()).saturating_add(1);
                let mut start = 0;
                while total > MAX_REV_HISTORY_LENGTH_IN_CHARS && start < revs.len() {
                    total = total.saturating_sub(revs[start].len().saturating_add(1));
                    start = start.saturating_add(1);
                }
                if total <= MAX_REV_HISTORY_LENGTH_IN_CHARS {
                    revs = revs.split_off(start);
                    revs.push(&old);
                    let joined = revs.join(",");
                    a.insert(names::ANN_DEPLOYMENT_REVISION_HISTORY.into(), joined);
                }
            }
        }
    }
    changed
}

/// Upstream `SetReplicasAnnotations`: desired-replicas and max-replicas. Returns whether changed.
pub fn set_replicas_annotations(meta: &mut ObjectMeta, desired: i32, max: i32) -> bool {
    let a = meta.annotations.get_or_insert_with(Default::default);
    let mut changed = false;
    for (k, v) in [
        (names::ANN_DEPLOYMENT_DESIRED_REPLICAS, desired),
        (names::ANN_DEPLOYMENT_MAX_REPLICAS, max),
    ] {
        if a.get(k) != Some(&v.to_string()) {
            a.insert(k.into(), v.to_string());
            changed = true;
        }
    }
    changed
}

/// Upstream `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    ann(&rs.metadata, names::ANN_DEPLOYMENT_DESIRED_REPLICAS) != Some(desired.to_string())
        || ann(&rs.metadata, names::ANN_DEPLOYMENT_MAX_REPLICAS) != Some(max.to_string())
}

// ---- conditions and status ----

/// Upstream `NewDeploymentCondition` (both times = now, at the second a `metav1.Time` keeps, so
/// that in-memory and stored conditions compare equal).
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(time(truncate_to_second(now))),
        last_transition_time: Some(time(truncate_to_second(now))),
    }
}

pub fn get_condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// Upstream `SetDeploymentCondition`: no-op when status and reason are unchanged; keeps
/// lastTransitionTime when only the reason changes; the condition moves to the end of the list.
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = get_condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_.clone());
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

pub fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
    }
}

/// Upstream `calculateStatus`.
pub fn calculate_status(
    d: &Deployment,
    p: &Params,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let available_n = sum_i32(all.iter().map(|r| available(r)));
    let total = sum_i32(all.iter().map(|r| spec_replicas(r)));
    let unavailable = total.saturating_sub(available_n).max(0);
    let old = d.status.clone().unwrap_or_default();
    let mut s = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(sum_i32(all.iter().map(|r| status_replicas(r)))),
        updated_replicas: Some(new.map(status_replicas).unwrap_or(0)),
        ready_replicas: Some(sum_i32(all.iter().map(|r| ready(r)))),
        available_replicas: Some(available_n),
        unavailable_replicas: Some(unavailable),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    if available_n >= p.replicas.saturating_sub(max_unavailable(p)) {
        set_condition(
            &mut s,
            condition(
                names::DEPLOY_COND_AVAILABLE,
                "True",
                names::REASON_MINIMUM_REPLICAS_AVAILABLE,
                names::MSG_MINIMUM_AVAILABILITY.into(),
                now,
            ),
        );
    } else {
        set_condition(
            &mut s,
            condition(
                names::DEPLOY_COND_AVAILABLE,
                "False",
                names::REASON_MINIMUM_REPLICAS_UNAVAILABLE,
                names::MSG_NO_MINIMUM_AVAILABILITY.into(),
                now,
            ),
        );
    }
    s
}

fn n(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// A sum of replica counts that saturates: counts come from specs and statuses users may write,
/// and a few ReplicaSets of `i32::MAX` replicas must not overflow (upstream's int32 sums wrap).
pub fn sum_i32(v: impl IntoIterator<Item = i32>) -> i32 {
    v.into_iter().fold(0, i32::saturating_add)
}

/// Sum of the ReplicaSets' `status.terminatingReplicas` (reported with the
/// `DeploymentReplicaSetTerminatingReplicas` gate).
pub fn terminating_replicas(all: &[&ReplicaSet]) -> i32 {
    sum_i32(
        all.iter()
            .filter_map(|r| r.status.as_ref()?.terminating_replicas),
    )
}

/// Upstream `DeploymentComplete`.
pub fn deployment_complete(d: &Deployment, p: &Params, s: &DeploymentStatus) -> bool {
    n(s.updated_replicas) == p.replicas
        && n(s.replicas) == p.replicas
        && n(s.available_replicas) == p.replicas
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Upstream `DeploymentProgressing`: more updated/ready/available pods, or fewer old ones.
pub fn deployment_progressing(d: &Deployment, s: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = n(old.replicas).saturating_sub(n(old.updated_replicas));
    let new_old = n(s.replicas).saturating_sub(n(s.updated_replicas));
    n(s.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(s.ready_replicas) > n(old.ready_replicas)
        || n(s.available_replicas) > n(old.available_replicas)
}

/// Upstream `DeploymentTimedOut`: `lastUpdateTime + progressDeadlineSeconds` is before now.
pub fn deployment_timed_out(p: &Params, s: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(deadline) = p.progress_deadline_seconds else {
        return false;
    };
    let Some(c) = get_condition(s, names::DEPLOY_COND_PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(names::REASON_NEW_RS_AVAILABLE) => false,
        Some(names::REASON_PROGRESS_DEADLINE_EXCEEDED) => true,
        _ => match &c.last_update_time {
            // Saturating: a status timestamp near the end of time must not overflow.
            Some(t) => klab_api::clock::saturating_add_secs(t.0, i64::from(deadline)) < now,
            None => false,
        },
    }
}

/// Upstream `syncRolloutStatus` (minus the write): the status with the Progressing condition
/// advanced. `d` carries conditions already set earlier in this sync (NewReplicaSetCreated…).
pub fn rollout_status(
    d: &Deployment,
    p: &Params,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    now: Timestamp,
) -> DeploymentStatus {
    let mut s = calculate_status(d, p, all, new, now);
    if p.progress_deadline_seconds.is_none() {
        remove_condition(&mut s, names::DEPLOY_COND_PROGRESSING);
    }
    let dname = d.metadata.name.clone().unwrap_or_default();
    let cur = d
        .status
        .as_ref()
        .and_then(|st| get_condition(st, names::DEPLOY_COND_PROGRESSING))
        .cloned();
    let complete_already = n(s.replicas) == n(s.updated_replicas)
        && cur
            .as_ref()
            .is_some_and(|c| c.reason.as_deref() == Some(names::REASON_NEW_RS_AVAILABLE));
    if p.progress_deadline_seconds.is_some() && !complete_already {
        let subject = |what: &str| match new {
            Some(rs) => format!("ReplicaSet \"{}\" {what}", name(rs)),
            None => format!("Deployment \"{dname}\" {what}"),
        };
        if deployment_complete(d, p, &s) {
            let c = condition(
                names::DEPLOY_COND_PROGRESSING,
                "True",
                names::REASON_NEW_RS_AVAILABLE,
                subject("has successfully progressed."),
                now,
            );
            set_condition(&mut s, c);
        } else if deployment_progressing(d, &s) {
            let mut c = condition(
                names::DEPLOY_COND_PROGRESSING,
                "True",
                names::REASON_RS_UPDATED,
                subject("is progressing."),
                now,
            );
            if let Some(cur) = &cur {
                if cur.status == "True" {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove_condition(&mut s, names::DEPLOY_COND_PROGRESSING);
            }
            set_condition(&mut s, c);
        } else if deployment_timed_out(p, &s, now) {
            let c = condition(
                names::DEPLOY_COND_PROGRESSING,
                "False",
                names::REASON_PROGRESS_DEADLINE_EXCEEDED,
                subject("has timed out progressing."),
                now,
            );
            set_condition(&mut s, c);
        }
    }
    // ReplicaFailure conditions of the ReplicaSets surface on the Deployment (upstream
    // `getReplicaFailures`: the new RS's failure, else the first old one's).
    let failure = new
        .into_iter()
        .chain(all.iter().copied())
        .filter_map(|rs| {
            rs.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == names::DEPLOY_COND_REPLICA_FAILURE)
                .cloned()
        })
        .next();
    match failure {
        Some(f) => set_condition(
            &mut s,
            DeploymentCondition {
                type_: f.type_,
                status: f.status,
                reason: f.reason,
                message: f.message,
                last_update_time: f.last_transition_time.clone(),
                last_transition_time: f.last_transition_time,
            },
        ),
        None => remove_condition(&mut s, names::DEPLOY_COND_REPLICA_FAILURE),
    }
    s
}

/// Upstream `requeueStuckDeployment`: when to look again so that ProgressDeadlineExceeded is
/// reported on time (None when no deadline check is pending).
pub fn stuck_recheck_at(d: &Deployment, p: &Params, s: &DeploymentStatus) -> Option<Timestamp> {
    let deadline = p.progress_deadline_seconds?;
    let c = get_condition(s, names::DEPLOY_COND_PROGRESSING)?;
    if matches!(
        c.reason.as_deref(),
        Some(names::REASON_NEW_RS_AVAILABLE) | Some(names::REASON_PROGRESS_DEADLINE_EXCEEDED)
    ) {
        return None;
    }
    if deployment_complete(d, p, s) {
        return None;
    }
    let t = c.last_update_time.as_ref()?.0;
    // strictly after the deadline (DeploymentTimedOut uses Before(now))
    t.checked_add(
        jiff::SignedDuration::from_secs(i64::from(deadline))
            .saturating_add(jiff::SignedDuration::from_millis(1)),
    )
    .ok()
}

/// Upstream `checkPausedConditions`: the Progressing condition while paused / after resuming.
pub fn paused_condition(p: &Params, s: &mut DeploymentStatus, now: Timestamp) -> bool {
    if p.progress_deadline_seconds.is_none() {
        return false;
    }
    let cur = get_condition(s, names::DEPLOY_COND_PROGRESSING).cloned();
    if cur
        .as_ref()
        .is_some_and(|c| c.reason.as_deref() == Some(names::REASON_PROGRESS_DEADLINE_EXCEEDED))
    {
        return false;
    }
    let paused_exists = cur
        .as_ref()
        .is_some_and(|c| c.reason.as_deref() == Some(names::REASON_DEPLOYMENT_PAUSED));
    if p.paused && !paused_exists {
        set_condition(
            s,
            condition(
                names::DEPLOY_COND_PROGRESSING,
                "Unknown",
                names::REASON_DEPLOYMENT_PAUSED,
                "Deployment is paused".into(),
                now,
            ),
        );
        true
    } else if !p.paused && paused_exists {
        set_condition(
            s,
            condition(
                names::DEPLOY_COND_PROGRESSING,
                "Unknown",
                names::REASON_DEPLOYMENT_RESUMED,
                "Deployment is resumed".into(),
                now,
            ),
        );
        true
    } else {
        false
    }
}

/// Two statuses equal for the purpose of skipping a write.
pub fn status_equal(a: Option<&DeploymentStatus>, b: &DeploymentStatus) -> bool {
    let norm = |s: &DeploymentStatus| {
        (
            s.observed_generation.unwrap_or(0),
            n(s.replicas),
            n(s.updated_replicas),
            n(s.ready_replicas),
            n(s.available_replicas),
            n(s.unavailable_replicas),
            s.collision_count,
            s.terminating_replicas,
            s.conditions.clone().unwrap_or_default(),
        )
    };
    a.is_some_and(|a| norm(a) == norm(b))
}

#[cfg(test)]
mod tests {
    use super::super::hash::compute_hash;
    use super::*;
    use crate::replicaset::util::testutil::{pod, ts};
    use k8s_openapi::api::apps::v1::{
        DeploymentSpec, DeploymentStrategy, ReplicaSetStatus, RollingUpdateDeployment,
    };

    fn is(s: &str) -> IntOrString {
        match s.parse::<i32>() {
            Ok(i) => IntOrString::Int(i),
            Err(_) => IntOrString::String(s.into()),
        }
    }

    fn params(replicas: i32, surge: &str, unavail: &str) -> Params {
        Params {
            replicas,
            strategy: Strategy::RollingUpdate,
            max_surge: is(surge),
            max_unavailable: is(unavail),
            revision_history_limit: Some(10),
            progress_deadline_seconds: Some(600),
            min_ready_seconds: 0,
            paused: false,
        }
    }

    #[test]
    fn fenceposts_table() {
        // (replicas, surge, unavailable) -> (maxSurge, maxUnavailable)
        let cases = [
            (10, "25%", "25%", 3, 2),
            (4, "25%", "25%", 1, 1),
            (3, "25%", "25%", 1, 0),
            (1, "25%", "25%", 1, 0),
            (3, "0", "0", 0, 1),
            (3, "0%", "0%", 0, 1),
            (5, "50%", "50%", 3, 2),
            (2, "1", "5", 1, 2), // maxUnavailable capped at replicas
            (0, "25%", "25%", 0, 0),
        ];
        for (r, s, u, ws, wu) in cases {
            let p = params(r, s, u);
            assert_eq!(
                (max_surge(&p), max_unavailable(&p)),
                (ws, wu),
                "replicas {r} surge {s} unavail {u}"
            );
        }
        let mut p = params(3, "25%", "25%");
        p.strategy = Strategy::Recreate;
        assert_eq!((max_surge(&p), max_unavailable(&p)), (0, 0));
        assert!(scaled_value(&IntOrString::String("x%".into()), 3, true).is_err());
    }

    fn rs(name: &str, created: i64, spec: i32, status: i32, avail: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(time(ts(created))),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas: status,
                available_replicas: Some(avail),
                ready_replicas: Some(avail),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn rolling_update_steps() {
        // 3 replicas, 25%/25% => surge 1, unavailable 0.
        let p = params(3, "25%", "25%");
        let old = rs("old", 0, 3, 3, 3);
        let new = rs("new", 10, 0, 0, 0);
        // step 1: scale the new RS up by the surge
        assert_eq!(rolling_new_rs_target(&p, &[&old, &new], &new), Some(1));
        // nothing to scale down while the new pod is unavailable (minAvailable 3)
        let new1 = rs("new", 10, 1, 1, 0);
        assert_eq!(
            rolling_old_rs_targets(&p, &[&old, &new1], &[&old], &new1),
            vec![]
        );
        assert_eq!(
            rolling_new_rs_target(&p, &[&old, &new1], &new1),
            None,
            "at maxTotal 4"
        );
        // new pod available: old goes 3 -> 2
        let new1a = rs("new", 10, 1, 1, 1);
        assert_eq!(
            rolling_old_rs_targets(&p, &[&old, &new1a], &[&old], &new1a),
            vec![("old".to_string(), 2)]
        );
        // new RS larger than wanted is cut back
        let big = rs("new", 10, 5, 5, 5);
        assert_eq!(rolling_new_rs_target(&p, &[&big], &big), Some(3));
    }

    #[test]
    fn rolling_update_cleans_unhealthy_old_replicas_first() {
        // 4 replicas, surge 1, unavailable 1. Old RS has 4 pods, only 2 available (a dead node).
        let p = params(4, "25%", "25%");
        let old = rs("old", 0, 4, 4, 2);
        let new = rs("new", 10, 1, 1, 0);
        // maxScaledDown = 5 - 3 - 1 = 1 -> one unhealthy old replica removed; availability 2 < 3 so no more
        assert_eq!(
            rolling_old_rs_targets(&p, &[&old, &new], &[&old], &new),
            vec![("old".to_string(), 3)]
        );
    }

    #[test]
    fn recreate_gate_table() {
        let old = rs("old", 0, 0, 0, 0);
        let old_reporting = rs("old", 0, 0, 1, 0);
        let new_uid = Some("uid-new");
        let running = pod("a")
            .owned_by("ReplicaSet", "old", "uid-old")
            .running_ready(0)
            .build();
        let terminating = pod("a")
            .owned_by("ReplicaSet", "old", "uid-old")
            .running_ready(0)
            .deleting(50)
            .build();
        let unknown = pod("a")
            .owned_by("ReplicaSet", "old", "uid-old")
            .phase("Unknown")
            .build();
        let failed = pod("a")
            .owned_by("ReplicaSet", "old", "uid-old")
            .phase(PHASE_FAILED)
            .deleting(50)
            .build();
        let new_pod = pod("b")
            .owned_by("ReplicaSet", "new", "uid-new")
            .running_ready(0)
            .build();
        let cases: Vec<(&str, &ReplicaSet, Vec<&Pod>, bool)> = vec![
            ("no pods", &old, vec![], false),
            (
                "old RS still reports replicas",
                &old_reporting,
                vec![],
                true,
            ),
            ("running old pod", &old, vec![&running], true),
            (
                "terminating old pod on a dead node blocks",
                &old,
                vec![&terminating],
                true,
            ),
            (
                "unknown phase counts as running",
                &old,
                vec![&unknown],
                true,
            ),
            ("failed pod does not block", &old, vec![&failed], false),
            ("pods of the new RS ignored", &old, vec![&new_pod], false),
        ];
        for (name, o, pods, want) in cases {
            assert_eq!(old_pods_running(new_uid, &[o], &pods), want, "{name}");
        }
    }

    fn deploy(replicas: i32, generation: i64) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("d-uid".into()),
                generation: Some(generation),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(is("25%")),
                        max_unavailable: Some(is("25%")),
                    }),
                }),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".into(), "web".into())].into()),
                        ..Default::default()
                    }),
                    spec: None,
                },
                selector: LabelSelector {
                    match_labels: Some([("app".into(), "web".into())].into()),
                    ..Default::default()
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn new_replica_set_shape() {
        let d = deploy(3, 1);
        let p = Params::of(&d);
        let h = compute_hash(&d.spec.as_ref().unwrap().template, None);
        let rs = new_replica_set(&d, &p, &h, 1, 1);
        assert_eq!(
            rs.metadata.name.as_deref(),
            Some(format!("web-{h}").as_str())
        );
        let a = rs.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[names::ANN_DEPLOYMENT_REVISION], "1");
        assert_eq!(a[names::ANN_DEPLOYMENT_DESIRED_REPLICAS], "3");
        assert_eq!(a[names::ANN_DEPLOYMENT_MAX_REPLICAS], "4");
        let spec = rs.spec.as_ref().unwrap();
        assert_eq!(
            spec.selector.match_labels.as_ref().unwrap()[names::LABEL_POD_TEMPLATE_HASH],
            h
        );
        assert_eq!(
            util::selector_string(&spec.selector),
            format!("app=web,pod-template-hash={h}")
        );
        assert_eq!(
            spec.template
                .as_ref()
                .unwrap()
                .metadata
                .as_ref()
                .unwrap()
                .labels
                .as_ref()
                .unwrap()[names::LABEL_POD_TEMPLATE_HASH],
            h
        );
        let r = util::controller_ref(&rs.metadata).unwrap();
        assert_eq!(
            (r.kind.as_str(), r.uid.as_str(), r.block_owner_deletion),
            ("Deployment", "d-uid", Some(true))
        );
        // the new RS's template equals the deployment's, ignoring the hash label
        let (new, old) = split_new_old(&d, &[&rs]);
        assert!(new.is_some() && old.is_empty());
    }

    #[test]
    fn revision_history_annotation() {
        let d = deploy(3, 1);
        let mut r = rs("x", 0, 0, 0, 0);
        r.metadata.annotations =
            Some([(names::ANN_DEPLOYMENT_REVISION.to_string(), "1".to_string())].into());
        assert!(set_new_rs_annotations(&d, &mut r, 3, true));
        let a = r.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            (
                a[names::ANN_DEPLOYMENT_REVISION].as_str(),
                a[names::ANN_DEPLOYMENT_REVISION_HISTORY].as_str()
            ),
            ("3", "1")
        );
        assert!(
            !set_new_rs_annotations(&d, &mut r, 2, true),
            "never lowers a revision"
        );
    }

    #[test]
    fn status_and_conditions_through_a_rollout() {
        let now = ts(100);
        let mut d = deploy(3, 2);
        let p = Params::of(&d);
        let new = rs("web-new", 10, 3, 3, 1);
        // progressing: 1 of 3 available
        d.status = Some(DeploymentStatus {
            conditions: Some(vec![condition(
                names::DEPLOY_COND_PROGRESSING,
                "True",
                names::REASON_NEW_RS_CREATED,
                "Created new replica set \"web-new\"".into(),
                ts(10),
            )]),
            ..Default::default()
        });
        let s = rollout_status(&d, &p, &[&new], Some(&new), now);
        assert_eq!(
            (
                s.replicas,
                s.updated_replicas,
                s.available_replicas,
                s.unavailable_replicas
            ),
            (Some(3), Some(3), Some(1), Some(2))
        );
        assert_eq!(s.observed_generation, Some(2));
        let av = get_condition(&s, names::DEPLOY_COND_AVAILABLE).unwrap();
        assert_eq!(
            (av.status.as_str(), av.reason.as_deref()),
            ("False", Some(names::REASON_MINIMUM_REPLICAS_UNAVAILABLE))
        );
        let pr = get_condition(&s, names::DEPLOY_COND_PROGRESSING).unwrap();
        assert_eq!(pr.reason.as_deref(), Some(names::REASON_RS_UPDATED));
        assert_eq!(
            pr.message.as_deref(),
            Some("ReplicaSet \"web-new\" is progressing.")
        );
        assert_eq!(
            pr.last_transition_time,
            Some(time(ts(10))),
            "True -> True keeps the transition time"
        );
        assert_eq!(pr.last_update_time, Some(time(now)));
        // complete
        d.status = Some(s);
        let done = rs("web-new", 10, 3, 3, 3);
        let s2 = rollout_status(&d, &p, &[&done], Some(&done), ts(130));
        let pr = get_condition(&s2, names::DEPLOY_COND_PROGRESSING).unwrap();
        assert_eq!(pr.reason.as_deref(), Some(names::REASON_NEW_RS_AVAILABLE));
        assert_eq!(
            pr.message.as_deref(),
            Some("ReplicaSet \"web-new\" has successfully progressed.")
        );
        let av = get_condition(&s2, names::DEPLOY_COND_AVAILABLE).unwrap();
        assert_eq!(
            (av.status.as_str(), av.message.as_deref()),
            ("True", Some("Deployment has minimum availability."))
        );
        assert_eq!(stuck_recheck_at(&d, &p, &s2), None);
    }

    #[test]
    fn progress_deadline_exceeded() {
        let mut d = deploy(3, 2);
        let p = Params::of(&d);
        let stuck = rs("web-new", 10, 3, 3, 1);
        d.status = Some(DeploymentStatus {
            replicas: Some(3),
            updated_replicas: Some(3),
            available_replicas: Some(1),
            ready_replicas: Some(1),
            observed_generation: Some(2),
            conditions: Some(vec![condition(
                names::DEPLOY_COND_PROGRESSING,
                "True",
                names::REASON_RS_UPDATED,
                "x".into(),
                ts(10),
            )]),
            ..Default::default()
        });
        let s = d.status.clone().unwrap();
        assert_eq!(
            stuck_recheck_at(&d, &p, &s),
            Some(ts(610) + jiff::SignedDuration::from_millis(1))
        );
        // at exactly 600s after the last update: not yet
        let at = rollout_status(&d, &p, &[&stuck], Some(&stuck), ts(610));
        assert_eq!(
            get_condition(&at, names::DEPLOY_COND_PROGRESSING)
                .unwrap()
                .reason
                .as_deref(),
            Some(names::REASON_RS_UPDATED)
        );
        let after = rollout_status(&d, &p, &[&stuck], Some(&stuck), ts(611));
        let c = get_condition(&after, names::DEPLOY_COND_PROGRESSING).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(names::REASON_PROGRESS_DEADLINE_EXCEEDED))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-new\" has timed out progressing.")
        );
    }

    /// Replica counts at the ends of i32 (specs and statuses users may write) and surge
    /// percentages far past 100%: every decision saturates instead of overflowing (the
    /// Deployment controller panicked on `replicas + maxSurge` and on sums of ReplicaSets).
    #[test]
    fn extreme_replica_counts_saturate() {
        let max = i32::MAX;
        let p = params(max, "100%", "0");
        assert_eq!(max_surge(&p), max);
        assert_eq!(new_rs_new_replicas(&p, 0, 0), max);
        assert_eq!(new_rs_new_replicas(&p, max, max - 1), max - 1);
        let p = params(max, "1000000000000%", "1000000000000%");
        assert_eq!((max_surge(&p), max_unavailable(&p)), (max, max));
        let (a, b) = (rs("a", 0, max, max, max), rs("b", 1, max, max, 0));
        let new = rs("n", 2, max, max, max);
        assert_eq!(rolling_new_rs_target(&p, &[&a, &b, &new], &new), None);
        let targets =
            rolling_old_rs_targets(&params(max, "25%", "25%"), &[&a, &b, &new], &[&a, &b], &new);
        assert!(targets.iter().all(|(_, n)| *n >= 0), "{targets:?}");
        let d = deploy(max, 1);
        let dp = Params::of(&d);
        let st = calculate_status(&d, &dp, &[&a, &b, &new], Some(&new), ts(0));
        assert_eq!(st.replicas, Some(max));
        assert_eq!(st.available_replicas, Some(max));
        assert_eq!(st.unavailable_replicas, Some(0));
        assert_eq!(terminating_replicas(&[&a, &b]), 0);
        let mut small = rs("s", 3, 1, 1, 1);
        set_replicas_annotations(&mut small.metadata, 1, 1);
        let sizes = proportional_scale(&dp, &d, Some(&new), &[&a, &small]);
        assert!(sizes.iter().all(|(_, n)| *n >= 0), "{sizes:?}");
        // Statuses that went negative or to the ends of i32.
        let weird = rs("w", 4, 0, i32::MIN, i32::MIN);
        let st = calculate_status(&d, &dp, &[&weird, &a], None, ts(0));
        assert_eq!(st.unavailable_replicas, Some(max));
        // Revision numbers from annotations users may write.
        let mut top = rs("t", 5, 0, 0, 0);
        top.metadata.annotations = Some(
            [(
                names::ANN_DEPLOYMENT_REVISION.to_string(),
                i64::MAX.to_string(),
            )]
            .into(),
        );
        assert_eq!(max_revision(&[&top]).saturating_add(1), i64::MAX);
        assert!(deployment_progressing(
            &d,
            &DeploymentStatus {
                replicas: Some(i32::MIN),
                updated_replicas: Some(i32::MAX),
                ..Default::default()
            }
        ));
    }

    #[test]
    fn scaling_event_and_proportional_scale() {
        let d = deploy(5, 3);
        let p = Params::of(&d);
        let mut only = rs("a", 0, 3, 3, 3);
        set_replicas_annotations(&mut only.metadata, 3, 4);
        assert!(is_scaling_event(&p, &[&only]));
        assert_eq!(
            proportional_scale(&p, &d, Some(&only), &[]),
            vec![("a".to_string(), 5)]
        );
        // mid-rollout: old 6 (ann max 13), new 4 (ann max 13): 10 -> 20 replicas (max 25)
        let d2 = deploy(20, 4);
        let p2 = Params::of(&d2);
        let mut old = rs("old", 0, 6, 6, 6);
        set_replicas_annotations(&mut old.metadata, 10, 13);
        let mut new = rs("new", 10, 7, 7, 0);
        set_replicas_annotations(&mut new.metadata, 10, 13);
        let got = proportional_scale(&p2, &d2, Some(&new), &[&old]);
        let total: i32 = got.iter().map(|x| x.1).sum();
        assert_eq!(total, 25, "allowed size = replicas + maxSurge: {got:?}");
        // new: round(7*25/13)-7 = 6; old: round(6*25/13)-6 = 6; no leftover
        assert_eq!(got, vec![("new".to_string(), 13), ("old".to_string(), 12)]);
    }

    #[test]
    fn cleanup_keeps_history_limit() {
        let mut p = params(3, "25%", "25%");
        p.revision_history_limit = Some(1);
        let mut a = rs("a", 0, 0, 0, 0);
        a.metadata.annotations =
            Some([(names::ANN_DEPLOYMENT_REVISION.to_string(), "1".to_string())].into());
        let mut b = rs("b", 5, 0, 0, 0);
        b.metadata.annotations =
            Some([(names::ANN_DEPLOYMENT_REVISION.to_string(), "2".to_string())].into());
        let mut c = rs("c", 6, 1, 1, 1);
        c.metadata.annotations =
            Some([(names::ANN_DEPLOYMENT_REVISION.to_string(), "3".to_string())].into());
        assert_eq!(
            cleanup_victims(&p, &[&c, &b, &a]),
            vec!["a".to_string(), "b".to_string()]
        );
        // a non-empty one is skipped, not replaced
        let mut c0 = c.clone();
        c0.metadata.annotations =
            Some([(names::ANN_DEPLOYMENT_REVISION.to_string(), "0".to_string())].into());
        assert_eq!(cleanup_victims(&p, &[&c0, &b, &a]), vec!["a".to_string()]);
    }

    #[test]
    fn paused_and_resumed_conditions() {
        let mut p = params(3, "25%", "25%");
        p.paused = true;
        let mut s = DeploymentStatus::default();
        assert!(paused_condition(&p, &mut s, ts(1)));
        assert_eq!(
            get_condition(&s, names::DEPLOY_COND_PROGRESSING)
                .unwrap()
                .reason
                .as_deref(),
            Some(names::REASON_DEPLOYMENT_PAUSED)
        );
        assert!(!paused_condition(&p, &mut s, ts(2)));
        p.paused = false;
        assert!(paused_condition(&p, &mut s, ts(3)));
        assert_eq!(
            get_condition(&s, names::DEPLOY_COND_PROGRESSING)
                .unwrap()
                .message
                .as_deref(),
            Some("Deployment is resumed")
        );
    }
}
