//! Pod and owner helpers shared by the workload controllers (ReplicaSet, Deployment, StatefulSet,
//! garbage collector): activeness, readiness and availability as upstream `podutil` defines them,
//! controller references, label-selector matching and template comparison.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde_json::Value;

/// Phase strings of `PodStatus.phase`.
pub const PHASE_PENDING: &str = "Pending";
pub const PHASE_RUNNING: &str = "Running";
pub const PHASE_SUCCEEDED: &str = "Succeeded";
pub const PHASE_FAILED: &str = "Failed";
pub const PHASE_UNKNOWN: &str = "Unknown";

/// The phase of a pod ("" when the status is missing; the API server defaults it to Pending).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// `deletionTimestamp` is set: the pod is Terminating (kubectl's rendering).
pub fn is_terminating(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// Upstream `controller.IsPodActive`: not Succeeded, not Failed and not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    let p = phase(pod);
    p != PHASE_SUCCEEDED && p != PHASE_FAILED && !is_terminating(&pod.metadata)
}

/// Upstream `controller.IsPodTerminating` (used for `terminatingReplicas`): being deleted and
/// not yet in a terminal phase.
pub fn is_pod_terminating_nonterminal(pod: &Pod) -> bool {
    let p = phase(pod);
    p != PHASE_SUCCEEDED && p != PHASE_FAILED && is_terminating(&pod.metadata)
}

/// The pod's `Ready` condition as (status is True, lastTransitionTime).
pub fn ready_condition(pod: &Pod) -> Option<(bool, Option<Timestamp>)> {
    let conds = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conds
        .iter()
        .find(|c| c.type_ == klab_api::names::POD_COND_READY)?;
    Some((
        c.status == "True",
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
}

/// Upstream `podutil.IsPodReady`: the Ready condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    matches!(ready_condition(pod), Some((true, _)))
}

/// When the pod last became Ready (None if not ready or the time is unset).
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    match ready_condition(pod) {
        Some((true, t)) => t,
        _ => None,
    }
}

/// Upstream `podutil.IsPodAvailable`: Ready, and Ready for longer than `min_ready` (strictly:
/// `lastTransitionTime + minReadySeconds < now`). With `min_ready == 0` Ready is enough.
pub fn is_pod_available(pod: &Pod, min_ready: Duration, now: Timestamp) -> bool {
    available(ready_condition(pod), min_ready, now)
}

/// [`is_pod_available`] of a pod whose [`ready_condition`] is `ready`.
pub fn available(
    ready: Option<(bool, Option<Timestamp>)>,
    min_ready: Duration,
    now: Timestamp,
) -> bool {
    match ready {
        Some((true, _)) if min_ready.is_zero() => true,
        Some((true, Some(t))) => match jiff::SignedDuration::try_from(min_ready) {
            Ok(d) => t.checked_add(d).map(|avail| avail < now).unwrap_or(false),
            Err(_) => false,
        },
        _ => false,
    }
}

/// The instant at which a Ready pod becomes available (None if not Ready or already counted).
pub fn available_at(pod: &Pod, min_ready: Duration) -> Option<Timestamp> {
    available_at_of(ready_condition(pod), min_ready)
}

/// [`available_at`] of a pod whose [`ready_condition`] is `ready`.
pub fn available_at_of(
    ready: Option<(bool, Option<Timestamp>)>,
    min_ready: Duration,
) -> Option<Timestamp> {
    let Some((true, Some(t))) = ready else {
        return None;
    };
    let d = jiff::SignedDuration::try_from(min_ready).ok()?;
    // Available strictly after `t + minReady` (upstream compares with `Before(now)`); real clocks
    // are never exactly on the second, so wake a millisecond later, not a whole period later.
    t.checked_add(d)
        .ok()?
        .checked_add(jiff::SignedDuration::from_millis(1))
        .ok()
}

/// `status.phase == Running` and Ready (upstream statefulset `isRunningAndReady`).
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == PHASE_RUNNING && is_pod_ready(pod)
}

/// Maximum restart count over the pod's containers (ranking key).
pub fn max_container_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// The controller owner reference (`controller: true`), if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller owner reference as upstream `metav1.NewControllerRef` builds it.
pub fn new_controller_ref(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Labels of an object (empty map when unset).
pub fn labels(meta: &ObjectMeta) -> &BTreeMap<String, String> {
    // Borrowed: a sync of a 3 000-pod ReplicaSet reads every pod's labels, twice.
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    meta.labels.as_ref().unwrap_or(&NONE)
}

/// Whether `labels` satisfy a `metav1.LabelSelector` (matchLabels AND every matchExpression).
/// An empty selector matches everything; a malformed expression matches nothing (upstream's
/// conversion error makes the controller skip the object).
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    klab_api::selector::LabelSelector::label_selector_matches(sel, labels)
}

/// A selector that selects nothing is not expressible; a selector with no requirements selects
/// everything, which upstream refuses to act on for ReplicaSets/Deployments.
pub fn selector_is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|m| m.is_empty())
}

/// The selector as kubectl's string form (`app=web,pod-template-hash=x`), as
/// `metav1.FormatLabelSelector` prints it.
pub fn selector_string(sel: &LabelSelector) -> String {
    klab_api::selector::LabelSelector::from_label_selector(sel)
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// JSON of a template with nulls, empty maps and empty lists removed, so that two templates that
/// upstream's semantic equality treats as equal (nil vs empty) compare and hash the same.
pub fn normalized_template(t: &PodTemplateSpec) -> Value {
    let v = serde_json::to_value(t).unwrap_or(Value::Null);
    normalize(v)
}

/// Recursively drops nulls, `{}` and `[]`.
pub fn normalize(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let v = normalize(v);
                let empty = matches!(&v, Value::Null)
                    || matches!(&v, Value::Object(o) if o.is_empty())
                    || matches!(&v, Value::Array(a) if a.is_empty());
                if !empty {
                    out.insert(k, v);
                }
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// Upstream `controller.GetPodFromTemplate`: a pod for `template` owned by `owner_ref`, named by
/// `generateName` (`<prefix>`), in `namespace`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    owner_ref: OwnerReference,
) -> Pod {
    let tm = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            labels: tm.labels.filter(|l| !l.is_empty()),
            annotations: tm.annotations.filter(|a| !a.is_empty()),
            finalizers: tm.finalizers.filter(|f| !f.is_empty()),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// `metav1.Time` helper.
pub fn time(t: Timestamp) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t)
}

/// `None` for zero so that status JSON looks like Go's `omitempty` output.
/// A workload's `spec.minReadySeconds` as a duration (absent or negative: zero).
pub fn min_ready(seconds: Option<i32>) -> Duration {
    Duration::from_secs(u64::try_from(seconds.unwrap_or(0)).unwrap_or(0))
}

pub fn omit_zero(n: i32) -> Option<i32> {
    if n == 0 { None } else { Some(n) }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Builders for table tests.
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};

    pub fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    /// The phases property tests give [`status_json`] ("" for none; "Unknown" for one the
    /// controllers do not name).
    pub const PHASES: &[&str] = &["", "Pending", "Running", "Succeeded", "Failed", "Unknown"];

    /// A pod status as property tests vary it: `phase` ("" for none) and a Ready condition of
    /// `ready` ("-" for none; "True" or "False") that changed at `since` seconds (or never),
    /// after a PodScheduled one.
    pub fn status_json(phase: &str, ready: &str, since: Option<i64>) -> serde_json::Value {
        let mut status = serde_json::json!({});
        if !phase.is_empty() {
            status["phase"] = serde_json::json!(phase);
        }
        if ready != "-" {
            let mut c = serde_json::json!({"type": "Ready", "status": ready});
            if let Some(s) = since {
                c["lastTransitionTime"] = serde_json::json!(ts(s).to_string());
            }
            status["conditions"] =
                serde_json::json!([{"type": "PodScheduled", "status": "True"}, c]);
        }
        status
    }

    #[derive(Clone)]
    pub struct P(pub Pod);

    pub fn pod(name: &str) -> P {
        P(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(time(ts(0))),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            status: Some(PodStatus {
                phase: Some(PHASE_PENDING.into()),
                ..Default::default()
            }),
        })
    }

    impl P {
        pub fn node(mut self, n: &str) -> Self {
            self.0.spec.get_or_insert_with(Default::default).node_name = Some(n.into());
            self
        }
        pub fn phase(mut self, p: &str) -> Self {
            self.0.status.get_or_insert_with(Default::default).phase = Some(p.into());
            self
        }
        pub fn running_ready(self, since: i64) -> Self {
            self.phase(PHASE_RUNNING).ready(true, since)
        }
        pub fn ready(mut self, ready: bool, since: i64) -> Self {
            let st = self.0.status.get_or_insert_with(Default::default);
            let conds = st.conditions.get_or_insert_with(Vec::new);
            conds.retain(|c| c.type_ != "Ready");
            conds.push(PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(time(ts(since))),
                ..Default::default()
            });
            self
        }
        pub fn created(mut self, s: i64) -> Self {
            self.0.metadata.creation_timestamp = Some(time(ts(s)));
            self
        }
        pub fn deleting(mut self, s: i64) -> Self {
            self.0.metadata.deletion_timestamp = Some(time(ts(s)));
            self
        }
        pub fn restarts(mut self, n: i32) -> Self {
            self.0
                .status
                .get_or_insert_with(Default::default)
                .container_statuses = Some(vec![ContainerStatus {
                restart_count: n,
                ..Default::default()
            }]);
            self
        }
        pub fn cost(mut self, c: &str) -> Self {
            self.0
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    "controller.kubernetes.io/pod-deletion-cost".into(),
                    c.into(),
                );
            self
        }
        pub fn label(mut self, k: &str, v: &str) -> Self {
            self.0
                .metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(k.into(), v.into());
            self
        }
        pub fn owned_by(mut self, kind: &str, name: &str, uid: &str) -> Self {
            self.0.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]);
            self
        }
        pub fn build(self) -> Pod {
            self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn active_ready_available() {
        let now = ts(100);
        let p = pod("a").running_ready(90).build();
        assert!(is_pod_active(&p));
        assert!(is_pod_ready(&p));
        assert!(is_pod_available(&p, Duration::ZERO, now));
        assert!(is_pod_available(&p, Duration::from_secs(9), now));
        // exactly minReadySeconds after the transition is not yet available (strict Before)
        assert!(!is_pod_available(&p, Duration::from_secs(10), now));
        assert!(!is_pod_active(&pod("b").deleting(5).build()));
        assert!(!is_pod_active(&pod("c").phase(PHASE_FAILED).build()));
        assert!(is_pod_terminating_nonterminal(
            &pod("d").running_ready(0).deleting(5).build()
        ));
        assert!(!is_pod_ready(&pod("e").ready(false, 3).build()));
    }

    #[test]
    fn selectors() {
        let l: BTreeMap<String, String> =
            [("app".into(), "web".into()), ("tier".into(), "fe".into())].into();
        let req = |k: &str, op: &str, v: &[&str]| LabelSelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
        };
        let cases = [
            (LabelSelector::default(), true),
            (
                LabelSelector {
                    match_labels: Some([("app".into(), "web".into())].into()),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: Some([("app".into(), "db".into())].into()),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![req("tier", "In", &["fe", "be"])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![req("tier", "NotIn", &["fe"])]),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![req("x", "DoesNotExist", &[])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![req("x", "Exists", &[])]),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![req("x", "Bogus", &[])]),
                    ..Default::default()
                },
                false,
            ),
        ];
        for (i, (sel, want)) in cases.iter().enumerate() {
            assert_eq!(selector_matches(sel, &l), *want, "case {i}");
        }
        let s = LabelSelector {
            match_labels: Some(
                [
                    ("app".into(), "web".into()),
                    ("pod-template-hash".into(), "x".into()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        assert_eq!(selector_string(&s), "app=web,pod-template-hash=x");
    }

    #[test]
    fn normalize_drops_empty() {
        let v = serde_json::json!({"a": {}, "b": [], "c": null, "d": {"e": {}}, "f": 1});
        assert_eq!(normalize(v), serde_json::json!({"f": 1}));
    }
}
