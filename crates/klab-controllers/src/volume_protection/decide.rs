//! Pure decisions of the storage-object-in-use protection controllers
//! (`pkg/controller/volume/pvcprotection`, `pvprotection`): when the `kubernetes.io/pvc-protection`
//! and `kubernetes.io/pv-protection` finalizers of a deleted claim or volume may be removed.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};

/// Whether `pod` uses claim `name` and counts as using it: only scheduled pods (the kubelet
/// refuses to start a pod on a claim being deleted) that have not terminated.
pub fn pod_uses_claim(pod: &Pod, name: &str) -> bool {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !scheduled || matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|vs| {
            vs.iter().any(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == name)
            })
        })
}

/// A deleted claim's finalizer goes once no pod of its namespace uses it.
pub fn release_claim(claim: &PersistentVolumeClaim, pods_in_namespace: &[&Pod]) -> bool {
    if claim.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let name = claim.metadata.name.as_deref().unwrap_or("");
    !pods_in_namespace.iter().any(|p| pod_uses_claim(p, name))
}

/// A deleted volume's finalizer goes once it is no longer Bound.
pub fn release_volume(pv: &PersistentVolume) -> bool {
    pv.metadata.deletion_timestamp.is_some()
        && pv.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
            "status": {"phase": "Running"}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn claim_release_table() {
        let deleting: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {
            "name": "data", "namespace": "default", "deletionTimestamp": "2026-01-01T00:00:00Z"}}))
        .unwrap();
        let live: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "data"}})).unwrap();
        let running = pod(json!({}));
        let done = pod(json!({"status": {"phase": "Succeeded"}}));
        let unscheduled = pod(json!({"spec": {"nodeName": null}}));
        let other = pod(json!({"spec": {"volumes": [{"name": "d",
            "persistentVolumeClaim": {"claimName": "other"}}]}}));
        let cases: Vec<(&str, &PersistentVolumeClaim, Vec<&Pod>, bool)> = vec![
            ("not deleted", &live, vec![], false),
            ("deleted, unused", &deleting, vec![], true),
            (
                "deleted, used by a running pod",
                &deleting,
                vec![&running],
                false,
            ),
            ("deleted, pod finished", &deleting, vec![&done], true),
            (
                "deleted, pod not scheduled",
                &deleting,
                vec![&unscheduled],
                true,
            ),
            (
                "deleted, pod uses another claim",
                &deleting,
                vec![&other],
                true,
            ),
        ];
        for (what, c, pods, want) in cases {
            assert_eq!(release_claim(c, &pods), want, "{what}");
        }
    }

    #[test]
    fn volume_release_table() {
        let pv = |v: serde_json::Value| -> PersistentVolume { serde_json::from_value(v).unwrap() };
        let del = "2026-01-01T00:00:00Z";
        assert!(!release_volume(&pv(json!({"metadata": {"name": "v"}}))));
        assert!(!release_volume(&pv(
            json!({"metadata": {"name": "v", "deletionTimestamp": del},
            "status": {"phase": "Bound"}})
        )));
        assert!(release_volume(&pv(
            json!({"metadata": {"name": "v", "deletionTimestamp": del},
            "status": {"phase": "Released"}})
        )));
    }
}
