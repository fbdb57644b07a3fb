//! Pure decisions of the PersistentVolume controller (`pkg/controller/volume/persistentvolume`):
//! which volume a claim binds to (`findBestMatchForClaim`), when a claim waits for its first
//! consumer or is handed to an external provisioner, and the phases of claims and volumes
//! (`syncClaim` / `syncVolume`), including the reclaim of a released volume.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use klab_api::names;

/// The event message of a claim waiting for its first consumer (`syncUnboundClaim`).
pub const MSG_WAIT_FOR_FIRST_CONSUMER: &str =
    "waiting for first consumer to be created before binding";
/// The FailedBinding message of a claim with no class and no matching volume.
pub const MSG_NO_VOLUMES_NO_CLASS: &str =
    "no persistent volumes available for this claim and no storage class is set";

/// `ExternalProvisioning`: the claim is left to the CSI driver's external provisioner.
pub fn msg_external_provisioning(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    )
}

/// A storage quantity in bytes (`1Gi`, `500Mi`, `10G`, `1.5Gi`, `1e9`), rounded up; `None` when
/// unparsable or beyond `u128`. Only what volume sizes use: no milli suffix makes sense here.
pub fn storage_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (digits, suffix) = q.split_at(end);
    let (int_part, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac.is_empty() {
        return None;
    }
    let mut num: u128 = 0;
    let mut den: u128 = 1;
    for c in int_part.chars().chain(frac.chars()) {
        num = num
            .checked_mul(10)?
            .checked_add(u128::from(c.to_digit(10)?))?;
    }
    for _ in 0..frac.len() {
        den = den.checked_mul(10)?;
    }
    let mul: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        s if s.starts_with(['e', 'E']) => {
            let exp: u32 = s.get(1..)?.parse().ok()?;
            10u128.checked_pow(exp)?
        }
        _ => return None,
    };
    let total = num.checked_mul(mul)?;
    Some(total.div_ceil(den))
}

fn claim_request(claim: &PersistentVolumeClaim) -> Option<u128> {
    let q = claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    storage_bytes(&q.0)
}

fn volume_capacity(pv: &PersistentVolume) -> Option<u128> {
    let q = pv.spec.as_ref()?.capacity.as_ref()?.get("storage")?;
    storage_bytes(&q.0)
}

/// The class a claim or volume names: the beta annotation first, then the field.
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    if let Some(c) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::ANN_BETA_STORAGE_CLASS))
    {
        return c.clone();
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

pub fn volume_class(pv: &PersistentVolume) -> String {
    if let Some(c) = pv
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::ANN_BETA_STORAGE_CLASS))
    {
        return c.clone();
    }
    pv.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

fn modes_of(v: Option<&Vec<String>>) -> Vec<String> {
    v.cloned().unwrap_or_default()
}

fn volume_mode(m: Option<&String>) -> &str {
    m.map(String::as_str).unwrap_or("Filesystem")
}

/// Whether `pv`'s claimRef names `claim` (by namespace and name, and by UID when both have one).
pub fn is_bound_to(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name != claim.metadata.name || r.namespace != claim.metadata.namespace {
        return false;
    }
    match (r.uid.as_deref(), claim.metadata.uid.as_deref()) {
        (Some(a), Some(b)) if !a.is_empty() => a == b,
        _ => true,
    }
}

/// `findBestMatchForClaim`: a volume pre-bound to the claim wins; otherwise the smallest
/// available volume of the claim's class, volume mode and access modes (a superset) that is large
/// enough; ties by name. Volumes being deleted or bound elsewhere never match. With
/// `delay_binding` (a WaitForFirstConsumer class before a node is selected) only a pre-bound
/// volume matches: the scheduler chooses the rest.
pub fn find_best_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &'a [PersistentVolume],
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let spec = claim.spec.as_ref()?;
    let want = claim_request(claim)?;
    let class = claim_class(claim);
    let want_modes = modes_of(spec.access_modes.as_ref());
    let mut best: Option<(u128, &str, &PersistentVolume)> = None;
    for pv in volumes {
        if pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(pspec) = pv.spec.as_ref() else {
            continue;
        };
        let Some(cap) = volume_capacity(pv) else {
            continue;
        };
        let prebound = is_bound_to(pv, claim);
        if pspec.claim_ref.is_some() && !prebound {
            continue;
        }
        if volume_mode(pspec.volume_mode.as_ref()) != volume_mode(spec.volume_mode.as_ref()) {
            continue;
        }
        if prebound {
            // Upstream binds a pre-bound volume even when it is smaller or of another class
            // only after checking them; a mismatch leaves the claim pending.
            if cap >= want && volume_class(pv) == class {
                return Some(pv);
            }
            continue;
        }
        if delay_binding || volume_class(pv) != class || cap < want {
            continue;
        }
        let have = modes_of(pspec.access_modes.as_ref());
        if !want_modes.iter().all(|m| have.contains(m)) {
            continue;
        }
        let name = pv.metadata.name.as_deref().unwrap_or("");
        let better = match best {
            None => true,
            Some((c, n, _)) => (cap, name) < (c, n),
        };
        if better {
            best = Some((cap, name, pv));
        }
    }
    best.map(|(_, _, pv)| pv)
}

/// What syncing an unbound claim decides.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimAction {
    /// Nothing to write.
    None,
    /// Bind the claim to this volume (both sides, volume first).
    Bind(String),
    /// Hand the claim to `provisioner` (annotate it) and say so once.
    Provision { provisioner: String },
    /// Keep the claim Pending with this event (type, reason, message).
    Pending(&'static str, &'static str, String),
    /// The claim is bound: make its status say so (phase Bound, capacity and modes of the volume).
    MarkBound(String),
    /// The claim's volume is gone (`ClaimLost`) or bound elsewhere (`ClaimMisbound`).
    Lost(&'static str, &'static str),
}

/// `syncClaim` for one claim against every volume and class.
pub fn sync_claim(
    claim: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    classes: &BTreeMap<String, StorageClass>,
) -> ClaimAction {
    let Some(spec) = claim.spec.as_ref() else {
        return ClaimAction::None;
    };
    let bound_name = spec.volume_name.clone().unwrap_or_default();
    if !bound_name.is_empty() {
        let pv = volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(bound_name.as_str()));
        return match pv {
            None => ClaimAction::Lost(
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            ),
            Some(pv)
                if pv
                    .spec
                    .as_ref()
                    .and_then(|s| s.claim_ref.as_ref())
                    .is_none() =>
            {
                // The volume lost its half of the binding: bind it again.
                ClaimAction::Bind(bound_name)
            }
            Some(pv) if !is_bound_to(pv, claim) => ClaimAction::Lost(
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            ),
            Some(_) => {
                let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase == Some("Bound") {
                    ClaimAction::None
                } else {
                    ClaimAction::MarkBound(bound_name)
                }
            }
        };
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return ClaimAction::None;
    }
    let class_name = claim_class(claim);
    let class = classes.get(&class_name);
    let wffc = class
        .and_then(|c| c.volume_binding_mode.as_deref())
        .is_some_and(|m| m == "WaitForFirstConsumer");
    let annotations = claim.metadata.annotations.as_ref();
    let selected = annotations.is_some_and(|a| a.contains_key(names::ANN_SELECTED_NODE));
    if let Some(pv) = find_best_match(claim, volumes, wffc && !selected) {
        return ClaimAction::Bind(pv.metadata.name.clone().unwrap_or_default());
    }
    if class_name.is_empty() {
        return ClaimAction::Pending(
            names::EVENT_NORMAL,
            names::EVENT_FAILED_BINDING,
            MSG_NO_VOLUMES_NO_CLASS.to_string(),
        );
    }
    let Some(class) = class else {
        return ClaimAction::Pending(
            names::EVENT_WARNING,
            names::EVENT_PROVISIONING_FAILED,
            format!("storageclass.storage.k8s.io \"{class_name}\" not found"),
        );
    };
    if wffc && !selected {
        return ClaimAction::Pending(
            names::EVENT_NORMAL,
            names::EVENT_WAIT_FOR_FIRST_CONSUMER,
            MSG_WAIT_FOR_FIRST_CONSUMER.to_string(),
        );
    }
    let already = annotations
        .and_then(|a| a.get(names::ANN_STORAGE_PROVISIONER))
        .is_some_and(|p| *p == class.provisioner);
    if already {
        ClaimAction::None
    } else {
        ClaimAction::Provision {
            provisioner: class.provisioner.clone(),
        }
    }
}

/// What syncing a volume decides.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeAction {
    None,
    /// Set `status.phase`.
    Phase(&'static str),
    /// The claim is gone: Released, then reclaimed by policy. `delete` when the policy is Delete
    /// (the external provisioner deletes provisioned volumes; klab's driver does it).
    Released {
        delete: bool,
    },
}

/// `syncVolume` for one volume against the claims (looked up by namespace/name).
pub fn sync_volume(
    pv: &PersistentVolume,
    claims: &BTreeMap<(String, String), PersistentVolumeClaim>,
) -> VolumeAction {
    let phase = pv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let Some(spec) = pv.spec.as_ref() else {
        return VolumeAction::None;
    };
    let want = |p: &'static str| {
        if phase == p {
            VolumeAction::None
        } else {
            VolumeAction::Phase(p)
        }
    };
    let Some(r) = spec.claim_ref.as_ref() else {
        return want("Available");
    };
    let key = (
        r.namespace.clone().unwrap_or_default(),
        r.name.clone().unwrap_or_default(),
    );
    let claim = claims
        .get(&key)
        .filter(|c| match (r.uid.as_deref(), c.metadata.uid.as_deref()) {
            (Some(a), Some(b)) if !a.is_empty() => a == b,
            _ => true,
        });
    match claim {
        None => {
            // A volume pre-bound by name to a claim not created yet stays Available; one whose
            // bound claim (with a UID) is gone is Released.
            if r.uid.as_deref().is_none_or(str::is_empty) {
                return want("Available");
            }
            if phase == "Released" || phase == "Failed" {
                return VolumeAction::None;
            }
            let delete = spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete");
            VolumeAction::Released { delete }
        }
        Some(c) => {
            let claim_volume = c.spec.as_ref().and_then(|s| s.volume_name.as_deref());
            if claim_volume == pv.metadata.name.as_deref() {
                want("Bound")
            } else {
                // Pre-bound (e.g. just provisioned): the claim's sync binds it.
                want("Available")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        let mut base = json!({"metadata": {"name": "data", "namespace": "default", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": "standard"}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    fn pv(v: serde_json::Value) -> PersistentVolume {
        let mut base = json!({"metadata": {"name": "pv"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                     "storageClassName": "standard", "csi": {"driver": "d", "volumeHandle": "h"}}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    fn classes(mode: &str) -> BTreeMap<String, StorageClass> {
        let sc: StorageClass = serde_json::from_value(json!({"metadata": {"name": "standard"},
            "provisioner": "csi.klab.dev", "volumeBindingMode": mode}))
        .unwrap();
        BTreeMap::from([("standard".to_string(), sc)])
    }

    #[test]
    fn quantities() {
        let cases = [
            ("1Gi", Some(1u128 << 30)),
            ("1.5Gi", Some(3u128 << 29)),
            ("10G", Some(10_000_000_000)),
            ("500Mi", Some(500u128 << 20)),
            ("1e3", Some(1000)),
            ("7", Some(7)),
            ("0.5", Some(1)),
            ("", None),
            ("1Xi", None),
            ("99999999999999999999999999999999999999999Ei", None),
        ];
        for (q, want) in cases {
            assert_eq!(storage_bytes(q), want, "{q}");
        }
    }

    #[test]
    fn best_match_table() {
        let vols = vec![
            pv(json!({"metadata": {"name": "big"}, "spec": {"capacity": {"storage": "10Gi"}}})),
            pv(json!({"metadata": {"name": "small"}, "spec": {"capacity": {"storage": "2Gi"}}})),
            pv(json!({"metadata": {"name": "tiny"}, "spec": {"capacity": {"storage": "512Mi"}}})),
            pv(json!({"metadata": {"name": "rwx"}, "spec": {"accessModes": ["ReadWriteMany"]}})),
            pv(json!({"metadata": {"name": "taken"},
                "spec": {"claimRef": {"namespace": "default", "name": "other"}}})),
            pv(json!({"metadata": {"name": "gold"}, "spec": {"storageClassName": "gold"}})),
        ];
        let name = |c: &PersistentVolumeClaim, delay: bool| {
            find_best_match(c, &vols, delay).map(|p| p.metadata.name.clone().unwrap())
        };
        // Smallest that fits, of the class and modes.
        assert_eq!(name(&pvc(json!({})), false).as_deref(), Some("small"));
        assert_eq!(
            name(
                &pvc(json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}})),
                false
            )
            .as_deref(),
            Some("big")
        );
        assert_eq!(
            name(
                &pvc(json!({"spec": {"accessModes": ["ReadWriteMany"]}})),
                false
            )
            .as_deref(),
            Some("rwx")
        );
        // Impossible size: nothing.
        assert_eq!(
            name(
                &pvc(json!({"spec": {"resources": {"requests": {"storage": "1Pi"}}}})),
                false
            ),
            None
        );
        // Delayed binding matches nothing but a pre-bound volume.
        assert_eq!(name(&pvc(json!({})), true), None);
        let mut with_pre = vols.clone();
        with_pre.push(pv(json!({"metadata": {"name": "pre"},
            "spec": {"capacity": {"storage": "100Gi"},
                     "claimRef": {"namespace": "default", "name": "data", "uid": "u1"}}})));
        assert_eq!(
            find_best_match(&pvc(json!({})), &with_pre, true)
                .and_then(|p| p.metadata.name.as_deref()),
            Some("pre")
        );
        // A volume pre-bound to another incarnation (other UID) does not match.
        let old = vec![pv(json!({"spec": {"claimRef":
            {"namespace": "default", "name": "data", "uid": "old"}}}))];
        assert_eq!(find_best_match(&pvc(json!({})), &old, false), None);
    }

    #[test]
    fn rwx_claim_needs_an_rwx_volume() {
        let vols = vec![
            pv(json!({"metadata": {"name": "rwo"}})),
            pv(
                json!({"metadata": {"name": "rwx"}, "spec": {"accessModes": ["ReadWriteMany", "ReadWriteOnce"]}}),
            ),
        ];
        let c = pvc(json!({"spec": {"accessModes": ["ReadWriteMany"]}}));
        assert_eq!(
            find_best_match(&c, &vols, false).and_then(|p| p.metadata.name.as_deref()),
            Some("rwx")
        );
    }

    #[test]
    fn unbound_claim_table() {
        let none: Vec<PersistentVolume> = vec![];
        let selected = json!({"metadata": {"annotations": {names::ANN_SELECTED_NODE: "n1"}}});
        let cases: Vec<(&str, PersistentVolumeClaim, &str, ClaimAction)> = vec![
            (
                "WaitForFirstConsumer before a node is chosen",
                pvc(json!({})),
                "WaitForFirstConsumer",
                ClaimAction::Pending(
                    "Normal",
                    "WaitForFirstConsumer",
                    MSG_WAIT_FOR_FIRST_CONSUMER.into(),
                ),
            ),
            (
                "WaitForFirstConsumer with a selected node: provision",
                pvc(selected.clone()),
                "WaitForFirstConsumer",
                ClaimAction::Provision {
                    provisioner: "csi.klab.dev".into(),
                },
            ),
            (
                "Immediate: provision at once",
                pvc(json!({})),
                "Immediate",
                ClaimAction::Provision {
                    provisioner: "csi.klab.dev".into(),
                },
            ),
            (
                "already handed to the provisioner",
                pvc(json!({"metadata": {"annotations":
                    {names::ANN_STORAGE_PROVISIONER: "csi.klab.dev"}}})),
                "Immediate",
                ClaimAction::None,
            ),
            (
                "unknown class",
                pvc(json!({"spec": {"storageClassName": "nope"}})),
                "Immediate",
                ClaimAction::Pending(
                    "Warning",
                    "ProvisioningFailed",
                    "storageclass.storage.k8s.io \"nope\" not found".into(),
                ),
            ),
            (
                "no class, no volume",
                pvc(json!({"spec": {"storageClassName": ""}})),
                "Immediate",
                ClaimAction::Pending("Normal", "FailedBinding", MSG_NO_VOLUMES_NO_CLASS.into()),
            ),
        ];
        for (what, claim, mode, want) in cases {
            assert_eq!(sync_claim(&claim, &none, &classes(mode)), want, "{what}");
        }
    }

    #[test]
    fn bound_claim_table() {
        let claim = pvc(json!({"spec": {"volumeName": "pv"}}));
        let mine = pv(
            json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "u1"}}}),
        );
        let theirs =
            pv(json!({"spec": {"claimRef": {"namespace": "default", "name": "x", "uid": "u9"}}}));
        let free = pv(json!({}));
        let c = classes("Immediate");
        assert_eq!(
            sync_claim(&claim, std::slice::from_ref(&mine), &c),
            ClaimAction::MarkBound("pv".into())
        );
        let mut bound = claim.clone();
        bound.status = Some(Default::default());
        bound.status.as_mut().unwrap().phase = Some("Bound".into());
        assert_eq!(
            sync_claim(&bound, std::slice::from_ref(&mine), &c),
            ClaimAction::None
        );
        assert_eq!(
            sync_claim(&claim, std::slice::from_ref(&free), &c),
            ClaimAction::Bind("pv".into())
        );
        assert_eq!(
            sync_claim(&claim, &[theirs], &c),
            ClaimAction::Lost(
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly"
            )
        );
        assert!(matches!(
            sync_claim(&claim, &[], &c),
            ClaimAction::Lost("ClaimLost", _)
        ));
    }

    #[test]
    fn volume_phase_table() {
        let claim = pvc(json!({"spec": {"volumeName": "pv"}}));
        let claims = BTreeMap::from([(("default".into(), "data".into()), claim.clone())]);
        let unbound_claims = BTreeMap::from([(("default".into(), "data".into()), pvc(json!({})))]);
        let empty = BTreeMap::new();
        let mine =
            json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "u1"}}});
        let cases: Vec<(&str, PersistentVolume, &BTreeMap<_, _>, VolumeAction)> = vec![
            (
                "no claimRef",
                pv(json!({})),
                &empty,
                VolumeAction::Phase("Available"),
            ),
            (
                "already Available",
                pv(json!({"status": {"phase": "Available"}})),
                &empty,
                VolumeAction::None,
            ),
            (
                "bound both ways",
                pv(mine.clone()),
                &claims,
                VolumeAction::Phase("Bound"),
            ),
            (
                "pre-bound, claim not bound yet",
                pv(mine.clone()),
                &unbound_claims,
                VolumeAction::Phase("Available"),
            ),
            (
                "claim gone, Retain",
                pv(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": "default", "name": "data", "uid": "u1"}}})),
                &empty,
                VolumeAction::Released { delete: false },
            ),
            (
                "claim gone, Delete",
                pv(json!({"spec": {"persistentVolumeReclaimPolicy": "Delete",
                    "claimRef": {"namespace": "default", "name": "data", "uid": "u1"}}})),
                &empty,
                VolumeAction::Released { delete: true },
            ),
            (
                "claim re-created with another UID",
                pv(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": "default", "name": "data", "uid": "old"}}})),
                &claims,
                VolumeAction::Released { delete: false },
            ),
            (
                "already Released",
                pv(
                    json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "u1"}},
                    "status": {"phase": "Released"}}),
                ),
                &empty,
                VolumeAction::None,
            ),
            (
                "pre-bound by name to a claim not yet created",
                pv(json!({"spec": {"claimRef": {"namespace": "default", "name": "later"}}})),
                &empty,
                VolumeAction::Phase("Available"),
            ),
        ];
        for (what, v, cl, want) in cases {
            assert_eq!(sync_volume(&v, cl), want, "{what}");
        }
    }
}
