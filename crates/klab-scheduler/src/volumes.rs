//! The VolumeBinding plugin's decisions (`pkg/scheduler/framework/plugins/volumebinding`), pure:
//! a pod whose claim is missing, being deleted, unbound with an Immediate class or of an unknown
//! class is refused at PreFilter with upstream's message; unbound claims of a
//! WaitForFirstConsumer class are bound where the pod goes (PreBind sets
//! `volume.kubernetes.io/selected-node` and binding waits until the claims are bound).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

/// `pod has unbound immediate PersistentVolumeClaims` (`ErrReasonBindConflict` family).
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The claim names a pod's volumes reference, in volume order.
pub fn claim_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

pub fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty())
}

/// The class a claim names (beta annotation first).
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class").cloned())
        .or_else(|| {
            claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
        })
        .unwrap_or_default()
}

/// What the PreFilter decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeCheck {
    /// Schedule normally; these claims (unbound, WaitForFirstConsumer) are bound at PreBind on
    /// the chosen node.
    Ok { delayed: Vec<String> },
    /// Refused on every node with this PreFilter message.
    Reject(String),
}

/// `PreFilter`: `claims` maps a claim name of the pod's namespace to the claim (absent: not
/// found); `binding_mode(class)` is the class's volumeBindingMode (`None`: no such class).
pub fn prefilter(
    pod: &Pod,
    claims: &BTreeMap<String, PersistentVolumeClaim>,
    binding_mode: &dyn Fn(&str) -> Option<String>,
) -> VolumeCheck {
    let mut delayed = Vec::new();
    let mut immediate_unbound = false;
    for name in claim_names(pod) {
        let Some(claim) = claims.get(&name) else {
            return VolumeCheck::Reject(format!("persistentvolumeclaim \"{name}\" not found"));
        };
        if claim.metadata.deletion_timestamp.is_some() {
            return VolumeCheck::Reject(format!(
                "persistentvolumeclaim \"{name}\" is being deleted"
            ));
        }
        if is_bound(claim) {
            continue;
        }
        let class = claim_class(claim);
        if class.is_empty() {
            immediate_unbound = true;
            continue;
        }
        match binding_mode(&class).as_deref() {
            None => {
                return VolumeCheck::Reject(format!(
                    "storageclass.storage.k8s.io \"{class}\" not found"
                ));
            }
            Some("WaitForFirstConsumer") => {
                if !delayed.contains(&name) {
                    delayed.push(name);
                }
            }
            Some(_) => immediate_unbound = true,
        }
    }
    if immediate_unbound {
        return VolumeCheck::Reject(ERR_REASON_UNBOUND_IMMEDIATE.into());
    }
    VolumeCheck::Ok { delayed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(claims: &[&str]) -> Pod {
        let vols: Vec<_> = claims
            .iter()
            .map(|c| json!({"name": c, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [], "volumes": vols}}))
        .unwrap()
    }

    fn claim(v: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prefilter_table() {
        let claims = BTreeMap::from([
            (
                "bound".to_string(),
                claim(json!({"metadata": {"name": "bound"},
                "spec": {"volumeName": "pv-1", "storageClassName": "standard"}})),
            ),
            (
                "wffc".to_string(),
                claim(json!({"metadata": {"name": "wffc"},
                "spec": {"storageClassName": "standard"}})),
            ),
            (
                "imm".to_string(),
                claim(json!({"metadata": {"name": "imm"},
                "spec": {"storageClassName": "fast"}})),
            ),
            (
                "noclass".to_string(),
                claim(json!({"metadata": {"name": "noclass"},
                "spec": {"storageClassName": ""}})),
            ),
            (
                "unknown".to_string(),
                claim(json!({"metadata": {"name": "unknown"},
                "spec": {"storageClassName": "nope"}})),
            ),
            (
                "deleting".to_string(),
                claim(json!({"metadata": {"name": "deleting",
                "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}})),
            ),
        ]);
        let mode = |c: &str| match c {
            "standard" => Some("WaitForFirstConsumer".to_string()),
            "fast" => Some("Immediate".to_string()),
            _ => None,
        };
        let cases: Vec<(&[&str], VolumeCheck)> = vec![
            (&[], VolumeCheck::Ok { delayed: vec![] }),
            (&["bound"], VolumeCheck::Ok { delayed: vec![] }),
            (
                &["bound", "wffc"],
                VolumeCheck::Ok {
                    delayed: vec!["wffc".into()],
                },
            ),
            (
                &["imm"],
                VolumeCheck::Reject(ERR_REASON_UNBOUND_IMMEDIATE.into()),
            ),
            (
                &["noclass"],
                VolumeCheck::Reject(ERR_REASON_UNBOUND_IMMEDIATE.into()),
            ),
            (
                &["missing"],
                VolumeCheck::Reject("persistentvolumeclaim \"missing\" not found".into()),
            ),
            (
                &["deleting"],
                VolumeCheck::Reject("persistentvolumeclaim \"deleting\" is being deleted".into()),
            ),
            (
                &["unknown"],
                VolumeCheck::Reject("storageclass.storage.k8s.io \"nope\" not found".into()),
            ),
        ];
        for (names, want) in cases {
            assert_eq!(prefilter(&pod(names), &claims, &mode), want, "{names:?}");
        }
    }
}
