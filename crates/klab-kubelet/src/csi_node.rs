//! The kubelet's CSI node registration (`pkg/volume/csi/nodeinfomanager`), for the simulated
//! `csi.klab.dev` driver: the node's `CSINode` (named after the node, owned by the Node, with the
//! migrated-plugins annotation) is created once the Node is registered, then the driver's
//! registration adds its entry (nodeID, topologyKeys, `allocatable.count`) and, on the Node, the
//! `csi.volume.kubernetes.io/nodeid` annotation and the driver's topology labels — what
//! node-driver-registrar and NodeGetInfo give upstream. Decisions here are pure; `ensure` is the
//! shell, writing only the node's own objects (as NodeRestriction allows a kubelet).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use klab_api::names;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// The Node annotation mapping each registered driver to its node ID (a JSON object).
pub const ANN_CSI_NODE_ID: &str = "csi.volume.kubernetes.io/nodeid";
/// The CSINode annotation listing the in-tree plugins migrated to CSI (v1.33's set).
pub const ANN_MIGRATED_PLUGINS: &str = "storage.alpha.kubernetes.io/migrated-plugins";
pub const MIGRATED_PLUGINS: &str = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume";
/// The simulated driver's zone topology key (its NodeGetInfo accessible topology).
pub const TOPOLOGY_KEY_ZONE: &str = "topology.csi.klab.dev/zone";
/// The simulated driver's `max_volumes_per_node` (NodeGetInfo): `allocatable.count`.
pub const MAX_VOLUMES_PER_NODE: i32 = 39;

/// What the driver's NodeGetInfo answers on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    pub name: String,
    pub node_id: String,
    /// Accessible topology segments (key → value).
    pub topology: BTreeMap<String, String>,
    pub max_volumes: i32,
}

/// `csi.klab.dev` on this node: the node name as ID; the zone segment from the Node's
/// `topology.kubernetes.io/zone` label when it has one.
pub fn driver_info(node: &Node) -> DriverInfo {
    let name = node.metadata.name.clone().unwrap_or_default();
    let topology = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::LABEL_ZONE))
        .filter(|z| !z.is_empty())
        .map(|z| BTreeMap::from([(TOPOLOGY_KEY_ZONE.to_string(), z.clone())]))
        .unwrap_or_default();
    DriverInfo {
        name: names::CSI_DRIVER_KLAB.into(),
        node_id: name,
        topology,
        max_volumes: MAX_VOLUMES_PER_NODE,
    }
}

fn node_owner(node: &Node) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// `CreateCSINode`: the node's CSINode with no drivers yet, owned by the Node (a deleted Node takes
/// its CSINode with it through the garbage collector).
pub fn new_csi_node(node: &Node) -> CSINode {
    CSINode {
        metadata: ObjectMeta {
            name: node.metadata.name.clone(),
            owner_references: Some(vec![node_owner(node)]),
            annotations: Some(BTreeMap::from([(
                ANN_MIGRATED_PLUGINS.to_string(),
                MIGRATED_PLUGINS.to_string(),
            )])),
            ..Default::default()
        },
        spec: CSINodeSpec {
            drivers: Vec::new(),
        },
    }
}

/// The CSINode's owner references when they do not name this Node (a CSINode left from a Node of
/// the same name that was deleted and registered again): the current Node only.
pub fn owner_fix(csi: &CSINode, node: &Node) -> Option<Vec<OwnerReference>> {
    let uid = node.metadata.uid.as_deref().unwrap_or("");
    let ok = csi
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|r| r.iter().any(|o| o.kind == "Node" && o.uid == uid));
    (!ok).then(|| vec![node_owner(node)])
}

/// `installDriverToCSINode`: the CSINode with this driver's entry (replacing one of the same name),
/// or None when it is already there as it should be.
pub fn with_driver(csi: &CSINode, d: &DriverInfo) -> Option<CSINode> {
    let entry = CSINodeDriver {
        name: d.name.clone(),
        node_id: d.node_id.clone(),
        topology_keys: (!d.topology.is_empty()).then(|| d.topology.keys().cloned().collect()),
        allocatable: (d.max_volumes > 0).then_some(VolumeNodeResources {
            count: Some(d.max_volumes),
        }),
    };
    if csi.spec.drivers.contains(&entry) {
        return None;
    }
    let mut out = csi.clone();
    out.spec.drivers.retain(|e| e.name != d.name);
    out.spec.drivers.push(entry);
    Some(out)
}

/// The merge patch that puts the driver's node ID into the Node's `csi.volume.kubernetes.io/nodeid`
/// annotation (other drivers' entries kept) and its topology segments into the Node's labels; None
/// when both are already there.
pub fn node_patch(node: &Node, d: &DriverInfo) -> Option<serde_json::Value> {
    let mut ids: BTreeMap<String, String> = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_CSI_NODE_ID))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let mut patch = serde_json::Map::new();
    if ids.get(&d.name) != Some(&d.node_id) {
        ids.insert(d.name.clone(), d.node_id.clone());
        let v = serde_json::to_string(&ids).unwrap_or_default();
        patch.insert(
            "annotations".into(),
            serde_json::json!({ ANN_CSI_NODE_ID: v }),
        );
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let missing: serde_json::Map<String, serde_json::Value> = d
        .topology
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    if !missing.is_empty() {
        patch.insert("labels".into(), serde_json::Value::Object(missing));
    }
    (!patch.is_empty()).then(|| serde_json::json!({ "metadata": patch }))
}

/// Registers the node's CSINode and the driver (one attempt). True when everything is in place.
pub async fn ensure(client: &kube::Client, node: &Node) -> bool {
    match try_ensure(client, node).await {
        Ok(()) => true,
        Err(e) => {
            tracing::info!(node = ?node.metadata.name, error = %e, "CSINode registration failed");
            false
        }
    }
}

async fn try_ensure(client: &kube::Client, node: &Node) -> Result<(), kube::Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let api: Api<CSINode> = Api::all(client.clone());
    let mut csi = match api.get_opt(&name).await? {
        Some(c) => c,
        None => {
            api.create(&PostParams::default(), &new_csi_node(node))
                .await?
        }
    };
    if let Some(refs) = owner_fix(&csi, node) {
        csi.metadata.owner_references = Some(refs);
        csi = api.replace(&name, &PostParams::default(), &csi).await?;
    }
    let d = driver_info(node);
    if let Some(updated) = with_driver(&csi, &d) {
        api.replace(&name, &PostParams::default(), &updated).await?;
    }
    if let Some(p) = node_patch(node, &d) {
        let nodes: Api<Node> = Api::all(client.clone());
        nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, annotations: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "uid": "node-uid",
            "labels": labels, "annotations": annotations}}))
        .unwrap()
    }

    #[test]
    fn driver_entry_annotation_and_topology() {
        let zoned = node(json!({"topology.kubernetes.io/zone": "z1"}), json!({}));
        let d = driver_info(&zoned);
        assert_eq!(d.node_id, "n1");
        assert_eq!(d.topology[TOPOLOGY_KEY_ZONE], "z1");
        let fresh = new_csi_node(&zoned);
        let refs = fresh.metadata.owner_references.clone().unwrap();
        assert_eq!(
            (
                refs[0].kind.as_str(),
                refs[0].uid.as_str(),
                refs[0].controller
            ),
            ("Node", "node-uid", None)
        );
        let with = with_driver(&fresh, &d).unwrap();
        let v = serde_json::to_value(&with.spec.drivers).unwrap();
        assert_eq!(
            v,
            json!([{"name": "csi.klab.dev", "nodeID": "n1",
                "topologyKeys": ["topology.csi.klab.dev/zone"], "allocatable": {"count": 39}}])
        );
        assert_eq!(with_driver(&with, &d), None, "registered once");
        assert_eq!(
            node_patch(&zoned, &d),
            Some(json!({"metadata": {
                "annotations": {ANN_CSI_NODE_ID: "{\"csi.klab.dev\":\"n1\"}"},
                "labels": {TOPOLOGY_KEY_ZONE: "z1"}}}))
        );

        // no zone: no topology keys, no labels; another driver's node ID is kept
        let plain = node(
            json!({}),
            json!({ANN_CSI_NODE_ID: "{\"other.example.com\":\"i-123\"}"}),
        );
        let d = driver_info(&plain);
        let with = with_driver(&new_csi_node(&plain), &d).unwrap();
        assert_eq!(with.spec.drivers[0].topology_keys, None);
        assert_eq!(
            node_patch(&plain, &d),
            Some(json!({"metadata": {"annotations": {ANN_CSI_NODE_ID:
                "{\"csi.klab.dev\":\"n1\",\"other.example.com\":\"i-123\"}"}}}))
        );
        let done = node(
            json!({}),
            json!({ANN_CSI_NODE_ID: "{\"csi.klab.dev\":\"n1\"}"}),
        );
        assert_eq!(node_patch(&done, &d), None);
        // a changed entry (new zone) replaces the old one
        let mut moved = with.clone();
        moved.spec.drivers[0].node_id = "old".into();
        let fixed = with_driver(&moved, &d).unwrap();
        assert_eq!(fixed.spec.drivers.len(), 1);
        assert_eq!(fixed.spec.drivers[0].node_id, "n1");
    }

    #[test]
    fn a_csinode_of_a_deleted_node_is_taken_over() {
        let n = node(json!({}), json!({}));
        let mut c = new_csi_node(&n);
        assert_eq!(owner_fix(&c, &n), None);
        c.metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".into();
        assert_eq!(owner_fix(&c, &n).unwrap()[0].uid, "node-uid");
        c.metadata.owner_references = None;
        assert!(owner_fix(&c, &n).is_some());
    }
}
