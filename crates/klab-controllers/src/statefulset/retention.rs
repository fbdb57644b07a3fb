//! Pure `persistentVolumeClaimRetentionPolicy` decisions, after upstream `stateful_set_utils.go`
//! (v1.32+, the StatefulSetAutoDeletePVC feature GA): which owner references a replica's claims
//! must carry (`isClaimOwnerUpToDate`), the references to write (`updateClaimOwnerRefForSetAndPod`)
//! and whether an old claim still blocks a replica's creation (`PodClaimIsStale`).
//!
//! The mechanism is ownership, not deletion: `whenDeleted: Delete` makes the StatefulSet the
//! claims' controller; `whenScaled: Delete` makes a *condemned* pod (ordinal outside the set's
//! range) the controller of its claims before the pod is deleted, so the garbage collector removes
//! the claims only once that pod object is gone. A replica is not recreated while its claim still
//! names the previous pod of that ordinal (a stale reference): it waits for the collector.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::decide::{ordinal, parent_and_ordinal, replicas, start_ordinal};
use k8s_openapi::api::core::v1::Pod;

/// The claims of a set's namespace the controller reads, by name.
pub type Claims<'a> = BTreeMap<&'a str, &'a ObjectMeta>;

const SET_API_VERSION: &str = "apps/v1";
const SET_KIND: &str = "StatefulSet";
const POD_API_VERSION: &str = "v1";
const POD_KIND: &str = "Pod";

/// Upstream's event reason and message when another controller owns a claim (the typo
/// "manging" is upstream's).
pub const REASON_CONFLICTING_CONTROLLER: &str = "ConflictingController";
pub fn conflicting_controller_message(claim: &str) -> String {
    format!(
        "PersistentVolumeClaim {claim} has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"
    )
}

/// `getPersistentVolumeClaimRetentionPolicy`: `(whenDeleted, whenScaled)` as Delete flags. An
/// unset field is Retain; a value that is neither Retain nor Delete makes upstream treat the whole
/// policy as Retain/Retain (its `default:` case falls through to retain-retain).
pub fn policy(set: &StatefulSet) -> (bool, bool) {
    let p = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let parse = |v: Option<&str>| match v {
        None | Some("Retain") => Some(false),
        Some("Delete") => Some(true),
        Some(_) => None,
    };
    let deleted = parse(p.and_then(|p| p.when_deleted.as_deref()));
    let scaled = parse(p.and_then(|p| p.when_scaled.as_deref()));
    match (deleted, scaled) {
        (Some(d), Some(s)) => (d, s),
        _ => (false, false),
    }
}

/// `podInOrdinalRange`: the pod's ordinal is inside `[start, start + replicas)`.
pub fn pod_in_range(pod: &Pod, set: &StatefulSet) -> bool {
    let Some(o) = ordinal(pod) else { return false };
    let start = start_ordinal(set);
    o >= start && o < start.saturating_add(replicas(set))
}

/// The owner side of a reference check: name, UID and the reference's group-version and kind.
struct Owner<'a> {
    name: &'a str,
    uid: &'a str,
    api_version: &'a str,
    kind: &'a str,
}

impl<'a> Owner<'a> {
    fn set(set: &'a StatefulSet) -> Self {
        Owner {
            name: set.metadata.name.as_deref().unwrap_or(""),
            uid: set.metadata.uid.as_deref().unwrap_or(""),
            api_version: SET_API_VERSION,
            kind: SET_KIND,
        }
    }
    fn pod(pod: &'a ObjectMeta) -> Self {
        Owner {
            name: pod.name.as_deref().unwrap_or(""),
            uid: pod.uid.as_deref().unwrap_or(""),
            api_version: POD_API_VERSION,
            kind: POD_KIND,
        }
    }
    /// `matchesRef`: same name, group-version and kind (whatever the UID).
    fn matches(&self, r: &OwnerReference) -> bool {
        r.api_version == self.api_version && r.kind == self.kind && r.name == self.name
    }
    /// `metav1.NewControllerRef`.
    fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.into(),
            kind: self.kind.into(),
            name: self.name.into(),
            uid: self.uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

fn refs(meta: &ObjectMeta) -> &[OwnerReference] {
    meta.owner_references.as_deref().unwrap_or(&[])
}

/// `hasOwnerRef`: a reference with the owner's UID (a pod not created yet has none).
fn has_owner_ref(claim: &ObjectMeta, owner: &Owner) -> bool {
    !owner.uid.is_empty() && refs(claim).iter().any(|r| r.uid == owner.uid)
}

/// `hasStaleOwnerRef`: the first reference naming the owner carries another UID.
fn has_stale_owner_ref(claim: &ObjectMeta, owner: &Owner) -> bool {
    refs(claim)
        .iter()
        .find(|r| owner.matches(r))
        .is_some_and(|r| r.uid != owner.uid)
}

/// `hasUnexpectedController`: under a Delete policy, a controller other than the set or the pod,
/// or a reference naming the set or pod with another UID (wrongly orphaned objects).
fn has_unexpected_controller(
    claim: &ObjectMeta,
    set: &Owner,
    pod: &Owner,
    any_delete: bool,
) -> bool {
    if !any_delete {
        return false;
    }
    refs(claim).iter().any(|r| {
        if set.matches(r) {
            return r.uid != set.uid;
        }
        if pod.matches(r) {
            return r.uid != pod.uid;
        }
        r.controller == Some(true)
    })
}

/// `hasNonControllerOwner`: the set or pod owns the claim without being its controller.
fn has_non_controller_owner(claim: &ObjectMeta, set: &Owner, pod: &Owner) -> bool {
    refs(claim).iter().any(|r| {
        let ours =
            (!set.uid.is_empty() && r.uid == set.uid) || (!pod.uid.is_empty() && r.uid == pod.uid);
        ours && r.controller != Some(true)
    })
}

/// Upstream `isClaimOwnerUpToDate`: whether a claim's references already match the policy for
/// this pod. Stale references and a foreign controller with none of ours count as up to date:
/// such claims are left alone.
pub fn claim_owner_up_to_date(claim: &ObjectMeta, set: &StatefulSet, pod: &Pod) -> bool {
    let s = Owner::set(set);
    let p = Owner::pod(&pod.metadata);
    if has_stale_owner_ref(claim, &s) || has_stale_owner_ref(claim, &p) {
        return true;
    }
    let (when_deleted, when_scaled) = policy(set);
    if has_unexpected_controller(claim, &s, &p, when_deleted || when_scaled) {
        // ours must be scrubbed from beside a foreign controller; otherwise leave it be
        return !(has_owner_ref(claim, &s) || has_owner_ref(claim, &p));
    }
    if has_non_controller_owner(claim, &s, &p) {
        return false;
    }
    let set_ref = has_owner_ref(claim, &s);
    let pod_ref = has_owner_ref(claim, &p);
    let scaled_down = !pod_in_range(pod, set);
    match (when_deleted, when_scaled) {
        (false, false) => !set_ref && !pod_ref,
        (true, false) => set_ref && !pod_ref,
        (false, true) => !set_ref && scaled_down == pod_ref,
        (true, true) => scaled_down != set_ref && scaled_down == pod_ref,
    }
}

/// Whether another controller owns the claim while the policy deletes (upstream warns with
/// ConflictingController and leaves the claim to that controller).
pub fn conflicting_controller(claim: &ObjectMeta, set: &StatefulSet, pod: &Pod) -> bool {
    let (when_deleted, when_scaled) = policy(set);
    has_unexpected_controller(
        claim,
        &Owner::set(set),
        &Owner::pod(&pod.metadata),
        when_deleted || when_scaled,
    )
}

/// Upstream `updateClaimOwnerRefForSetAndPod`: the claim's references with ours scrubbed and
/// re-added as the policy wants (others kept in order, ours appended as controller references).
pub fn claim_owner_refs(claim: &ObjectMeta, set: &StatefulSet, pod: &Pod) -> Vec<OwnerReference> {
    let s = Owner::set(set);
    let p = Owner::pod(&pod.metadata);
    let (when_deleted, when_scaled) = policy(set);
    let unexpected = has_unexpected_controller(claim, &s, &p, when_deleted || when_scaled);
    let mut out: Vec<OwnerReference> = refs(claim)
        .iter()
        .filter(|r| !s.matches(r) && !p.matches(r))
        .cloned()
        .collect();
    if unexpected {
        return out;
    }
    let scaled_down = !pod_in_range(pod, set);
    let mut add = |o: &Owner| {
        if !out.iter().any(|r| r.uid == o.uid) {
            out.push(o.controller_ref());
        }
    };
    match (when_deleted, when_scaled) {
        (false, false) => {}
        (true, false) => add(&s),
        (false, true) => {
            if scaled_down {
                add(&p)
            }
        }
        (true, true) => {
            if scaled_down {
                add(&p)
            } else {
                add(&s)
            }
        }
    }
    out
}

/// Upstream `PodClaimIsStale` for a replica about to be created (no UID yet): under
/// `whenScaled: Delete`, a claim that still names a pod of this replica's name belongs to the
/// previous, scaled-down pod and is about to be garbage-collected; creation waits for it.
pub fn claim_is_stale(set: &StatefulSet, claim: &ObjectMeta, pod_name: &str) -> bool {
    if !policy(set).1 {
        return false;
    }
    let p = Owner {
        name: pod_name,
        uid: "",
        api_version: POD_API_VERSION,
        kind: POD_KIND,
    };
    has_stale_owner_ref(claim, &p)
}

/// The set a claim's scaled-down owner pod belonged to, by the pod's name (`<set>-<ordinal>`).
pub fn owner_pod_set(claim: &ObjectMeta) -> Vec<String> {
    refs(claim)
        .iter()
        .filter(|r| r.api_version == POD_API_VERSION && r.kind == POD_KIND)
        .filter_map(|r| parent_and_ordinal(&r.name).map(|(p, _)| p.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };

    fn set(replicas: i32, deleted: Option<&str>, scaled: Option<&str>) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("set-uid".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                persistent_volume_claim_retention_policy: (deleted.is_some() || scaled.is_some())
                    .then(|| StatefulSetPersistentVolumeClaimRetentionPolicy {
                        when_deleted: deleted.map(String::from),
                        when_scaled: scaled.map(String::from),
                    }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn pod(ord: i32) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("web-{ord}")),
                uid: Some(format!("pod-uid-{ord}")),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn r(api: &str, kind: &str, name: &str, uid: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: controller.then_some(true),
            block_owner_deletion: controller.then_some(true),
        }
    }
    fn set_ref() -> OwnerReference {
        r("apps/v1", "StatefulSet", "web", "set-uid", true)
    }
    fn pod_ref(ord: i32) -> OwnerReference {
        r(
            "v1",
            "Pod",
            &format!("web-{ord}"),
            &format!("pod-uid-{ord}"),
            true,
        )
    }
    fn claim(refs: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some("data-web-2".into()),
            owner_references: (!refs.is_empty()).then_some(refs),
            ..Default::default()
        }
    }

    #[test]
    fn policy_defaults_and_unknown_values() {
        assert_eq!(policy(&set(1, None, None)), (false, false));
        assert_eq!(policy(&set(1, Some("Delete"), None)), (true, false));
        assert_eq!(policy(&set(1, None, Some("Delete"))), (false, true));
        assert_eq!(
            policy(&set(1, Some("Delete"), Some("Delete"))),
            (true, true)
        );
        // an unknown value makes the whole policy Retain, as upstream's default case
        assert_eq!(
            policy(&set(1, Some("Delete"), Some("Sometimes"))),
            (false, false)
        );
    }

    /// Every policy × (pod in range / scaled down) × claim references: up to date, and the
    /// references written when not.
    #[test]
    fn owner_refs_table() {
        let none: Vec<OwnerReference> = vec![];
        // (whenDeleted, whenScaled, replicas, claim refs, up to date, refs afterwards)
        #[allow(clippy::type_complexity)]
        let rows: Vec<(
            Option<&str>,
            Option<&str>,
            i32,
            Vec<OwnerReference>,
            bool,
            Vec<OwnerReference>,
        )> = vec![
            // Retain/Retain: no refs of ours, whatever the range
            (None, None, 3, none.clone(), true, none.clone()),
            (None, None, 1, none.clone(), true, none.clone()),
            (None, None, 3, vec![set_ref()], false, none.clone()),
            (None, None, 1, vec![pod_ref(2)], false, none.clone()),
            // Delete on set deletion: the set only
            (
                Some("Delete"),
                None,
                3,
                none.clone(),
                false,
                vec![set_ref()],
            ),
            (
                Some("Delete"),
                None,
                3,
                vec![set_ref()],
                true,
                vec![set_ref()],
            ),
            (
                Some("Delete"),
                None,
                1,
                vec![set_ref()],
                true,
                vec![set_ref()],
            ),
            (
                Some("Delete"),
                None,
                1,
                vec![set_ref(), pod_ref(2)],
                false,
                vec![set_ref()],
            ),
            // Delete on scale: the pod once condemned, nothing while in range
            (None, Some("Delete"), 3, none.clone(), true, none.clone()),
            (
                None,
                Some("Delete"),
                1,
                none.clone(),
                false,
                vec![pod_ref(2)],
            ),
            (
                None,
                Some("Delete"),
                1,
                vec![pod_ref(2)],
                true,
                vec![pod_ref(2)],
            ),
            // scaled back up before the pod was deleted: the pod's reference goes
            (
                None,
                Some("Delete"),
                3,
                vec![pod_ref(2)],
                false,
                none.clone(),
            ),
            (
                None,
                Some("Delete"),
                3,
                vec![set_ref()],
                false,
                none.clone(),
            ),
            // Delete/Delete: the set while in range, the pod (not the set) once condemned
            (
                Some("Delete"),
                Some("Delete"),
                3,
                vec![set_ref()],
                true,
                vec![set_ref()],
            ),
            (
                Some("Delete"),
                Some("Delete"),
                1,
                vec![set_ref()],
                false,
                vec![pod_ref(2)],
            ),
            (
                Some("Delete"),
                Some("Delete"),
                1,
                vec![pod_ref(2)],
                true,
                vec![pod_ref(2)],
            ),
            (
                Some("Delete"),
                Some("Delete"),
                3,
                vec![pod_ref(2)],
                false,
                vec![set_ref()],
            ),
            // a non-controller reference of ours is rewritten as a controller reference
            (
                Some("Delete"),
                None,
                3,
                vec![r("apps/v1", "StatefulSet", "web", "set-uid", false)],
                false,
                vec![set_ref()],
            ),
            // other owners are kept in front of ours
            (
                None,
                Some("Delete"),
                1,
                vec![r("v1", "ConfigMap", "keep", "cm", false)],
                false,
                vec![r("v1", "ConfigMap", "keep", "cm", false), pod_ref(2)],
            ),
        ];
        for (i, (d, s, n, refs, up, after)) in rows.into_iter().enumerate() {
            let st = set(n, d, s);
            let c = claim(refs);
            let p = pod(2);
            assert_eq!(
                claim_owner_up_to_date(&c, &st, &p),
                up,
                "row {i}: up to date"
            );
            assert_eq!(claim_owner_refs(&c, &st, &p), after, "row {i}: refs");
        }
    }

    #[test]
    fn stale_and_foreign_owners_are_left_alone() {
        let st = set(1, None, Some("Delete"));
        let p = pod(2);
        // a reference to an earlier web-2: up to date (not ours to touch), and stale for creation
        let old = claim(vec![r("v1", "Pod", "web-2", "old-uid", true)]);
        assert!(claim_owner_up_to_date(&old, &st, &p));
        assert!(claim_is_stale(&st, &old, "web-2"));
        assert!(!claim_is_stale(&st, &old, "web-1"));
        assert!(
            !claim_is_stale(&set(1, Some("Delete"), None), &old, "web-2"),
            "whenScaled Retain: never stale"
        );
        // a foreign controller alone: left as it is
        let foreign = claim(vec![r("example.com/v1", "Db", "x", "db", true)]);
        assert!(claim_owner_up_to_date(&foreign, &st, &p));
        // a foreign controller beside ours: ours is scrubbed, nothing added
        let both = claim(vec![r("example.com/v1", "Db", "x", "db", true), pod_ref(2)]);
        assert!(!claim_owner_up_to_date(&both, &st, &p));
        assert_eq!(
            claim_owner_refs(&both, &st, &p),
            vec![r("example.com/v1", "Db", "x", "db", true)]
        );
        // under Retain/Retain a foreign controller is no conflict
        let rr = set(1, None, None);
        assert!(claim_owner_up_to_date(&foreign, &rr, &p));
        assert_eq!(owner_pod_set(&old), vec!["web".to_string()]);
        assert!(conflicting_controller_message("data-web-2").contains("a manging controller"));
    }
}
