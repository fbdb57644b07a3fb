//! The attach/detach controller (shell; decisions in decide.rs). One reconcile of the whole
//! world, queued by any change of a pod that uses a claim (those pods are indexed; other pods
//! never reach it), of a node's presence, readiness, out-of-service taint or volumes (its other
//! writes never reach it), of claims, volumes, CSI drivers or VolumeAttachments, and by detach
//! timers:
//!
//! 1. the desired state from scheduled, non-terminated pods;
//! 2. every attachment (VolumeAttachment of an attach-required CSI driver) no longer desired is
//!    detached by spec §8: the first request time is remembered, and the volume is detached when
//!    the node no longer reports it in `status.volumesInUse`, at once with the out-of-service
//!    taint, or 6 min after the request on an unhealthy node (a timer wakes the reconcile on the
//!    first 100 ms loop after the wait strictly elapsed);
//! 3. every desired attachment without a VolumeAttachment gets one (`csi-<sha256>`), unless the
//!    volume is exclusive and attached elsewhere: then `FailedAttachVolume` (Multi-Attach) on the
//!    waiting pods;
//! 4. `status.volumesAttached` of each node lists its attached volumes, and pods whose volume
//!    became attached get `SuccessfulAttachVolume`.
//!
//! Events are recorded once per (pod, volume) and message: upstream's recorder folds the repeats
//! of its 100 ms loop into one event's count.

pub mod decide;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    AttachedVolume, Node, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::{Clock, names};
use klab_runtime::{Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

use crate::events::{EventRecorder, object_ref_for_pod};
use crate::node_lifecycle::decide::add;
use crate::replicaset::Error;
pub use decide::AttachDetachConfig;
use decide::{DetachDecision, DetachInput};

/// Index of the pods that use at least one claim (all filed under one value).
const POD_CLAIMS: &str = "adc.usesClaims";

fn pod_claims_index(pod: &Pod) -> Vec<String> {
    if decide::uses_claims(pod) {
        vec![String::new()]
    } else {
        Vec::new()
    }
}

/// Index of the nodes whose `status.volumesAttached` lists something (all under one value): the
/// ones whose list a sync may have to clear.
const NODE_ATTACHED: &str = "adc.volumesAttached";

fn node_attached_index(node: &Node) -> Vec<String> {
    if node
        .status
        .as_ref()
        .and_then(|s| s.volumes_attached.as_ref())
        .is_some_and(|v| !v.is_empty())
    {
        vec![String::new()]
    } else {
        Vec::new()
    }
}

/// Whether a node's change can move what a sync decides: its coming or going, its readiness and
/// out-of-service taint (when a detach may go ahead), and the volumes it reports in use and
/// attached. A node's heartbeats and other status writes cannot, and at thousands of nodes
/// syncing for each of them was most of this controller's work.
fn node_change_matters(old: Option<&Node>, new: Option<&Node>) -> bool {
    let (Some(o), Some(n)) = (old, new) else {
        return true;
    };
    fn in_use(n: &Node) -> Option<&Vec<String>> {
        n.status.as_ref()?.volumes_in_use.as_ref()
    }
    fn attached(n: &Node) -> Option<&Vec<AttachedVolume>> {
        n.status.as_ref()?.volumes_attached.as_ref()
    }
    decide::node_ready(Some(o)) != decide::node_ready(Some(n))
        || decide::out_of_service(Some(o)) != decide::out_of_service(Some(n))
        || in_use(o) != in_use(n)
        || attached(o) != attached(n)
}

fn all_key() -> ObjKey {
    (String::new(), "attach-detach".to_string())
}

/// Runs the attach/detach controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    config: AttachDetachConfig,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let pods = informers.get::<Pod>();
    let nodes = informers.get::<Node>();
    let claims = informers.get::<PersistentVolumeClaim>();
    let volumes = informers.get::<PersistentVolume>();
    let drivers = informers.get::<CSIDriver>();
    let attachments = informers.get::<VolumeAttachment>();
    pods.add_index(POD_CLAIMS, pod_claims_index);
    nodes.add_index(NODE_ATTACHED, node_attached_index);
    // A pod change matters only to pods that use a claim, before or after the change: most pods
    // have none, and a whole-world sync for each of their status writes would cost O(pods) per
    // write (upstream's podAdd/podUpdate likewise only process the pod's own volumes).
    let sources = Sources::default()
        .add(&pods, |(old, new)| {
            old.is_some_and(|p| decide::uses_claims(&p))
                || new.is_some_and(|p| decide::uses_claims(&p))
        })
        .add(&nodes, |(old, new)| {
            node_change_matters(old.as_deref(), new.as_deref())
        })
        .add(&claims, |_| true)
        .add(&volumes, |_| true)
        .add(&drivers, |_| true)
        .add(&attachments, |_| true);
    let mut c = Adc {
        client,
        clock: clock.clone(),
        config,
        recorder,
        pods,
        nodes,
        claims,
        volumes,
        drivers,
        attachments,
        queue: WorkQueue::default(),
        detach_requested: BTreeMap::new(),
        reported: BTreeSet::new(),
        last_in_use: BTreeMap::new(),
        nodes_seen: 0,
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Adc {
    client: kube::Client,
    clock: Clock,
    config: AttachDetachConfig,
    recorder: EventRecorder,
    pods: SharedInformer<Pod>,
    nodes: SharedInformer<Node>,
    claims: SharedInformer<PersistentVolumeClaim>,
    volumes: SharedInformer<PersistentVolume>,
    drivers: SharedInformer<CSIDriver>,
    attachments: SharedInformer<VolumeAttachment>,
    queue: WorkQueue,
    /// (volume, node) → when its detach was first requested.
    detach_requested: BTreeMap<(String, String), Timestamp>,
    /// (pod uid, volume, message) already reported: a new message (the other pod gone, the
    /// volume now only attached elsewhere) is a new event.
    reported: BTreeSet<(String, String, String)>,
    /// A deleted node's last `status.volumesInUse` (`MountedByNode` survives the Node object).
    last_in_use: BTreeMap<String, Arc<Node>>,
    /// The node informer's change number when `last_in_use` was last brought up to date.
    nodes_seen: u64,
}

/// One attachment as the VolumeAttachments show it.
struct Actual {
    name: String,
    attached: bool,
    deleting: bool,
}

impl Reconcile for Adc {
    /// Whether the change can move the desired or actual state.
    type Event = bool;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, relevant: bool) {
        if relevant {
            self.queue.add(all_key());
        }
    }

    async fn reconcile(&mut self, _key: ObjKey) -> Result<(), kube::Error> {
        self.sync().await
    }
}

impl Adc {
    fn attach_required(&self, driver: &str) -> bool {
        self.drivers
            .get(&(String::new(), driver.to_string()))
            .is_some_and(|d| d.spec.attach_required != Some(false))
    }

    async fn sync(&mut self) -> Result<(), kube::Error> {
        let now = self.clock.now();
        let pods = self.pods.by_index(POD_CLAIMS, "");
        let pod_refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        let claims: BTreeMap<(String, String), Arc<PersistentVolumeClaim>> = self
            .claims
            .list()
            .iter()
            .map(|c| {
                (
                    (
                        c.metadata.namespace.clone().unwrap_or_default(),
                        c.metadata.name.clone().unwrap_or_default(),
                    ),
                    c.clone(),
                )
            })
            .collect();
        let volumes: BTreeMap<String, Arc<PersistentVolume>> = self
            .volumes
            .list()
            .into_iter()
            .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
            .collect();
        let desired = {
            let req = |d: &str| self.attach_required(d);
            decide::desired_state(&pod_refs, &claims, &volumes, &req)
        };
        // Remember each node's last state, so a deleted node's volumesInUse still counts. A sync
        // runs every reconciler period: only the nodes changed since the last one are read (the
        // informer's record of changes; a removal changes nothing here).
        self.nodes.track_changes();
        let last_in_use = &mut self.last_in_use;
        if let Some((seq, _)) = self.nodes.changes_since(self.nodes_seen, None, |n| {
            let name = n.metadata.name.as_deref().unwrap_or_default();
            match last_in_use.get_mut(name) {
                Some(kept) => *kept = n.clone(),
                None => {
                    last_in_use.insert(name.to_owned(), n.clone());
                }
            }
        }) {
            self.nodes_seen = seq;
        }
        let mut actual: BTreeMap<(String, String), Actual> = BTreeMap::new();
        for va in self.attachments.list() {
            if !self.attach_required(&va.spec.attacher) {
                continue;
            }
            let Some(pv) = va.spec.source.persistent_volume_name.clone() else {
                continue;
            };
            actual.insert(
                (pv, va.spec.node_name.clone()),
                Actual {
                    name: va.metadata.name.clone().unwrap_or_default(),
                    attached: va.status.as_ref().is_some_and(|s| s.attached),
                    deleting: va.metadata.deletion_timestamp.is_some(),
                },
            );
        }
        self.detach_requested
            .retain(|k, _| actual.contains_key(k) && !desired.contains_key(k));

        // Detach what is no longer desired.
        let mut detaching: BTreeSet<(String, String)> = BTreeSet::new();
        for (key, a) in &actual {
            if desired.contains_key(key) {
                continue;
            }
            if a.deleting {
                detaching.insert(key.clone());
                continue;
            }
            let (pv_name, node_name) = key;
            let t0 = *self.detach_requested.entry(key.clone()).or_insert(now);
            let live = self.nodes.get(&(String::new(), node_name.clone()));
            let node = live.as_deref();
            let last = self.last_in_use.get(node_name).map(|n| n.as_ref());
            let unique = volumes
                .get(pv_name)
                .and_then(|v| decide::csi_source(v))
                .map(|(d, h)| decide::unique_volume_name(&d, &h))
                .unwrap_or_default();
            let input = DetachInput {
                healthy: decide::node_ready(node),
                out_of_service: decide::out_of_service(node),
                mounted_by_node: decide::mounted_by_node(node.or(last), &unique),
                disable_force_detach_on_timeout: self.config.disable_force_detach_on_timeout,
                elapsed: now
                    .duration_since(t0)
                    .try_into()
                    .unwrap_or(std::time::Duration::ZERO),
                max_wait: self.config.max_wait_for_unmount,
            };
            match decide::decide_detach(input) {
                DetachDecision::Wait => {
                    if !input.healthy && !input.disable_force_detach_on_timeout {
                        let at = add(
                            add(t0, self.config.max_wait_for_unmount),
                            self.config.reconciler_loop_period,
                        );
                        self.queue.add_at(all_key(), at);
                    }
                }
                DetachDecision::Detach { force } => {
                    tracing::info!(volume = %pv_name, node = %node_name,
                        force = force.map(|f| f.label()).unwrap_or("none"),
                        "attacherDetacher.DetachVolume started");
                    detaching.insert(key.clone());
                    self.set_volumes_attached(node_name, &actual, &detaching, &volumes)
                        .await?;
                    let api: Api<VolumeAttachment> = Api::all(self.client.clone());
                    match api.delete(&a.name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(e),
                    }
                    self.detach_requested.remove(key);
                }
            }
        }

        // Attach what is desired.
        for (key, d) in &desired {
            if actual.contains_key(key) {
                continue;
            }
            let elsewhere: Vec<&(String, String)> = actual
                .keys()
                .filter(|(pv, node)| pv == &d.volume && node != &d.node)
                .collect();
            if d.exclusive && !elsewhere.is_empty() {
                for (ns, name) in &d.pods {
                    let others: Vec<(String, String)> = desired
                        .values()
                        .filter(|o| o.volume == d.volume && o.node != d.node)
                        .flat_map(|o| o.pods.iter().cloned())
                        .collect();
                    let msg = decide::multi_attach_message(&d.volume, ns, &others);
                    self.report(ns, name, &d.volume, names::EVENT_FAILED_ATTACH_VOLUME, msg)
                        .await;
                }
                continue;
            }
            let va = json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                "metadata": {"name": decide::attachment_name(&d.handle, &d.driver, &d.node)},
                "spec": {"attacher": d.driver, "nodeName": d.node,
                         "source": {"persistentVolumeName": d.volume}},
            });
            let va: VolumeAttachment =
                serde_json::from_value(va).map_err(kube::Error::SerdeError)?;
            let api: Api<VolumeAttachment> = Api::all(self.client.clone());
            match api.create(&PostParams::default(), &va).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }

        // Node status and attach events.
        let mut by_node: BTreeSet<String> = BTreeSet::new();
        for ((_, node), _) in actual.iter() {
            by_node.insert(node.clone());
        }
        for n in self.nodes.by_index(NODE_ATTACHED, "") {
            by_node.insert(n.metadata.name.clone().unwrap_or_default());
        }
        for node in by_node {
            self.set_volumes_attached(&node, &actual, &detaching, &volumes)
                .await?;
        }
        for (key, d) in &desired {
            if actual.get(key).is_some_and(|a| a.attached && !a.deleting) {
                for (ns, name) in &d.pods {
                    let msg = decide::attach_succeeded_message(&d.volume);
                    self.report(
                        ns,
                        name,
                        &d.volume,
                        names::EVENT_SUCCESSFUL_ATTACH_VOLUME,
                        msg,
                    )
                    .await;
                }
            }
        }
        // Forget what was reported for pods that are gone.
        let live: BTreeSet<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        self.reported.retain(|(uid, _, _)| live.contains(uid));
        Ok(())
    }

    /// Writes `status.volumesAttached` of `node` when it differs from its attached volumes.
    async fn set_volumes_attached(
        &mut self,
        node: &str,
        actual: &BTreeMap<(String, String), Actual>,
        detaching: &BTreeSet<(String, String)>,
        volumes: &BTreeMap<String, Arc<PersistentVolume>>,
    ) -> Result<(), kube::Error> {
        let Some(current) = self.nodes.get(&(String::new(), node.to_string())) else {
            return Ok(());
        };
        let want: Vec<String> = actual
            .iter()
            .filter(|(k, a)| k.1 == node && a.attached && !detaching.contains(*k))
            .filter_map(|((pv, _), _)| volumes.get(pv).and_then(|v| decide::csi_source(v)))
            .map(|(d, h)| decide::unique_volume_name(&d, &h))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let have: Vec<String> = current
            .status
            .as_ref()
            .and_then(|s| s.volumes_attached.as_ref())
            .map(|v| v.iter().map(|a| a.name.clone()).collect())
            .unwrap_or_default();
        if want == have {
            return Ok(());
        }
        let list: Vec<serde_json::Value> = want
            .iter()
            .map(|n| json!({"name": n, "devicePath": ""}))
            .collect();
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = json!({"status": {"volumesAttached": list}});
        match api
            .patch_status(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn report(
        &mut self,
        ns: &str,
        name: &str,
        volume: &str,
        reason: &'static str,
        msg: String,
    ) {
        let Some(pod) = self.pods.get(&(ns.to_string(), name.to_string())) else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !self.reported.insert((uid, volume.to_string(), msg.clone())) {
            return;
        }
        let ty = if reason == names::EVENT_FAILED_ATTACH_VOLUME {
            names::EVENT_WARNING
        } else {
            names::EVENT_NORMAL
        };
        self.recorder
            .record(&object_ref_for_pod(&pod), ty, reason, msg)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready: &str, heartbeat: &str, taints: serde_json::Value, in_use: &[&str]) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": taints},
            "status": {
                "conditions": [{"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat}],
                "volumesInUse": in_use,
            }
        }))
        .unwrap()
    }

    /// Only a node's coming and going, readiness, out-of-service taint and volumes reach the
    /// sync; a heartbeat or another taint does not.
    #[test]
    fn only_a_node_s_volumes_readiness_and_service_matter() {
        let t1 = "2026-01-01T00:00:00Z";
        let t2 = "2026-01-01T00:00:10Z";
        let base = node("True", t1, json!([]), &["v1"]);
        let matters = |n: &Node| node_change_matters(Some(&base), Some(n));
        assert!(!matters(&node("True", t2, json!([]), &["v1"])));
        assert!(!matters(&node(
            "True",
            t1,
            json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
            &["v1"]
        )));
        assert!(matters(&node("Unknown", t2, json!([]), &["v1"])));
        assert!(matters(&node(
            "True",
            t1,
            json!([{"key": names::TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]),
            &["v1"]
        )));
        assert!(matters(&node("True", t1, json!([]), &[])));
        let mut attached = base.clone();
        attached.status.as_mut().unwrap().volumes_attached = Some(vec![
            serde_json::from_value(json!({"name": "v1", "devicePath": ""})).unwrap(),
        ]);
        assert!(matters(&attached));
        assert!(node_change_matters(None, Some(&base)));
        assert!(node_change_matters(Some(&base), None));
        assert_eq!(node_attached_index(&base), Vec::<String>::new());
        assert_eq!(node_attached_index(&attached), vec![String::new()]);
    }
}
