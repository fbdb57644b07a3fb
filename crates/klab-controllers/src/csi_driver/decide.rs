//! Pure decisions of klab's simulated CSI driver `csi.klab.dev` and its sidecars (the
//! external-provisioner and external-attacher a real driver deploys): what volume a claim gets,
//! which sizes the backend refuses, and the latencies of provisioning, attaching and detaching,
//! as explicit as the container runtime's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use klab_api::names;
use serde_json::json;

use crate::persistent_volume::decide::storage_bytes;

/// The backend's modelled latencies and limits.
#[derive(Debug, Clone, PartialEq)]
pub struct CsiModel {
    /// CreateVolume: from the claim being handed over to the PV existing.
    pub provision: Duration,
    /// ControllerPublishVolume: from the VolumeAttachment to `status.attached`.
    pub attach: Duration,
    /// ControllerUnpublishVolume: from the VolumeAttachment's deletion to its finalizer removed.
    pub detach: Duration,
    /// DeleteVolume of a released volume with reclaim policy Delete.
    pub delete: Duration,
    /// While a volume's backend is failed, attach attempts are retried this often.
    pub retry: Duration,
    /// The largest volume the backend creates.
    pub max_volume_bytes: u128,
}

impl Default for CsiModel {
    fn default() -> Self {
        CsiModel {
            provision: Duration::from_secs(2),
            attach: Duration::from_secs(2),
            detach: Duration::from_secs(2),
            delete: Duration::from_secs(1),
            retry: Duration::from_secs(10),
            max_volume_bytes: 64u128 << 40,
        }
    }
}

/// The external-attacher's finalizer on VolumeAttachments it handles (`external-attacher/` +
/// the driver name with dots replaced).
pub fn attacher_finalizer(driver: &str) -> String {
    format!(
        "{}{}",
        names::FINALIZER_CSI_ATTACHER_PREFIX,
        driver.replace('.', "-")
    )
}

/// Volumes whose backend is failed (`klab volume fail NAME`): attaching and detaching them fail
/// until healed. Shared between the driver and whoever injects faults.
#[derive(Debug, Clone, Default)]
pub struct CsiBackend {
    failed: Arc<Mutex<BTreeMap<String, ()>>>,
}

impl CsiBackend {
    pub fn fail(&self, volume: &str) {
        self.lock().insert(volume.to_string(), ());
    }

    /// `true` when the volume was failed.
    pub fn heal(&self, volume: &str) -> bool {
        self.lock().remove(volume).is_some()
    }

    pub fn is_failed(&self, volume: &str) -> bool {
        self.lock().contains_key(volume)
    }

    pub fn failed(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ()>> {
        self.failed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The error an attach of a failed backend records in `status.attachError.message`.
pub fn attach_error_message(volume: &str) -> String {
    format!("rpc error: code = Unavailable desc = backend of volume {volume} is unavailable")
}

/// `ProvisioningFailed` text when the backend refuses a size.
pub fn size_refused_message(class: &str, requested: &str, max: u128) -> String {
    format!(
        "failed to provision volume with StorageClass \"{class}\": rpc error: code = OutOfRange desc = requested size {requested} exceeds the capacity of {} ({max} bytes)",
        names::CSI_DRIVER_KLAB
    )
}

/// The driver's zone topology key (the kubelet publishes it in the CSINode and as a Node label).
pub const TOPOLOGY_KEY_ZONE: &str = "topology.csi.klab.dev/zone";

/// The zone the driver creates a claim's volume in (the external-provisioner's accessibility
/// requirements, then the driver's choice of the first preferred segment): the selected node's
/// zone for a WaitForFirstConsumer claim; otherwise the class's first allowed zone, else the
/// first zone any node offers (upstream draws one at random; klab takes the first, sorted).
/// `node_zone(name)` is a Node's `topology.csi.klab.dev/zone` label. None: no topology (the
/// node has no zone, or no node has one), so the volume is reachable everywhere.
pub fn volume_zone(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node_zone: &dyn Fn(&str) -> Option<String>,
    all_zones: &[String],
) -> Option<String> {
    if let Some(node) = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::ANN_SELECTED_NODE))
    {
        return node_zone(node);
    }
    let allowed: Vec<String> = class
        .allowed_topologies
        .iter()
        .flatten()
        .flat_map(|t| t.match_label_expressions.iter().flatten())
        .filter(|e| e.key == TOPOLOGY_KEY_ZONE)
        .flat_map(|e| e.values.clone())
        .collect();
    allowed
        .into_iter()
        .min()
        .or_else(|| all_zones.iter().min().cloned())
}

/// The volume the external-provisioner creates for `claim` (`pvc-<claim uid>`), or the reason it
/// refuses to. With a `zone` the volume is only reachable there: `spec.nodeAffinity` requires
/// `topology.csi.klab.dev/zone` (the driver's accessible topology).
pub fn provisioned_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    model: &CsiModel,
    zone: Option<&str>,
) -> Result<PersistentVolume, String> {
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let spec = claim.spec.clone().unwrap_or_default();
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let requested = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    match storage_bytes(&requested) {
        Some(b) if b <= model.max_volume_bytes => {}
        _ => {
            return Err(size_refused_message(
                &class_name,
                &requested,
                model.max_volume_bytes,
            ));
        }
    }
    let pv_name = format!("pvc-{uid}");
    let v = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name,
                     "annotations": {names::ANN_DYNAMICALLY_PROVISIONED: class.provisioner,
                                     "volume.kubernetes.io/provisioner-deletion-secret-name": "",
                                     "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""}},
        "spec": {
            "accessModes": spec.access_modes.unwrap_or_default(),
            "capacity": {"storage": requested},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "namespace": ns, "name": name, "uid": uid,
                         "resourceVersion": claim.metadata.resource_version},
            "csi": {"driver": class.provisioner, "volumeHandle": format!("vol-{uid}"),
                    "fsType": "ext4",
                    "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": format!("klab-{}", class.provisioner)}},
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "storageClassName": class_name,
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
        },
    });
    let mut v = v;
    if let Some(z) = zone {
        v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": TOPOLOGY_KEY_ZONE, "operator": "In", "values": [z]}]}]}});
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(size: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data-web-0", "namespace": "default", "uid": "u-1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "standard",
                     "resources": {"requests": {"storage": size}}}}))
        .unwrap()
    }

    fn class() -> StorageClass {
        serde_json::from_value(json!({"metadata": {"name": "standard"},
            "provisioner": "csi.klab.dev", "reclaimPolicy": "Retain"}))
        .unwrap()
    }

    #[test]
    fn provisioned_volume_mirrors_the_claim() {
        let pv = provisioned_volume(&claim("1Gi"), &class(), &CsiModel::default(), None).unwrap();
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u-1"));
        let spec = pv.spec.unwrap();
        assert_eq!(spec.capacity.unwrap()["storage"].0, "1Gi");
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.claim_ref.unwrap().uid.as_deref(), Some("u-1"));
        assert_eq!(spec.csi.unwrap().volume_handle, "vol-u-1");
    }

    /// The zone a volume is made in, and its node affinity there.
    #[test]
    fn volume_topology() {
        let zones = |n: &str| match n {
            "n1" => Some("z1".to_string()),
            "n2" => Some("z2".to_string()),
            _ => None,
        };
        let all = vec!["z2".to_string(), "z1".to_string()];
        let mut selected = claim("1Gi");
        selected.metadata.annotations =
            Some([(names::ANN_SELECTED_NODE.to_string(), "n2".to_string())].into());
        // WaitForFirstConsumer: the selected node's zone, whatever else is allowed
        assert_eq!(
            volume_zone(&selected, &class(), &zones, &all).as_deref(),
            Some("z2")
        );
        // a selected node without a zone: no topology
        selected.metadata.annotations =
            Some([(names::ANN_SELECTED_NODE.to_string(), "n9".to_string())].into());
        assert_eq!(volume_zone(&selected, &class(), &zones, &all), None);
        // Immediate: the class's allowed zones first, else the first zone a node offers
        let mut allowed = class();
        allowed.allowed_topologies = Some(
            serde_json::from_value(json!([{"matchLabelExpressions": [
                {"key": TOPOLOGY_KEY_ZONE, "values": ["z3", "z2"]}]}]))
            .unwrap(),
        );
        assert_eq!(
            volume_zone(&claim("1Gi"), &allowed, &zones, &all).as_deref(),
            Some("z2")
        );
        assert_eq!(
            volume_zone(&claim("1Gi"), &class(), &zones, &all).as_deref(),
            Some("z1")
        );
        assert_eq!(volume_zone(&claim("1Gi"), &class(), &zones, &[]), None);
        let pv =
            provisioned_volume(&claim("1Gi"), &class(), &CsiModel::default(), Some("z1")).unwrap();
        assert_eq!(
            serde_json::to_value(pv.spec.unwrap().node_affinity).unwrap(),
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.csi.klab.dev/zone", "operator": "In", "values": ["z1"]}]}]}})
        );
    }

    #[test]
    fn impossible_sizes_are_refused() {
        for size in ["1Pi", "65Ti", "", "lots"] {
            let err =
                provisioned_volume(&claim(size), &class(), &CsiModel::default(), None).unwrap_err();
            assert!(err.contains("OutOfRange"), "{size}: {err}");
        }
        assert!(provisioned_volume(&claim("64Ti"), &class(), &CsiModel::default(), None).is_ok());
    }

    #[test]
    fn backend_faults() {
        let b = CsiBackend::default();
        b.fail("pvc-1");
        assert!(b.is_failed("pvc-1"));
        assert_eq!(b.failed(), vec!["pvc-1".to_string()]);
        assert!(b.heal("pvc-1"));
        assert!(!b.heal("pvc-1"));
        assert_eq!(
            attacher_finalizer("csi.klab.dev"),
            "external-attacher/csi-klab-dev"
        );
    }
}
