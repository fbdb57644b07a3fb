//! klab's simulated CSI driver `csi.klab.dev` (shell; decisions in decide.rs): the
//! external-provisioner (a claim handed to it gets a `pvc-<uid>` volume after the modelled
//! provisioning latency; released volumes with reclaim policy Delete are deleted), and the
//! external-attacher (a VolumeAttachment gets its finalizer, then `status.attached` after the
//! attach latency, or `status.attachError` while the volume's backend is failed; a deleted one is
//! detached after the detach latency and its finalizer removed).
//!
//! Work is keyed by kind: `("claim:<ns>", name)`, `("attach", name)`, `("reclaim", name)`; each
//! key's due time is first-seen + latency, kept in `due` so a re-queue does not restart it.

pub mod decide;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::{Clock, names};
use klab_runtime::{Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

use crate::events::EventRecorder;
use crate::node_lifecycle::decide::add;
use crate::persistent_volume::claim_ref;
use crate::replicaset::Error;
pub use decide::{CsiBackend, CsiModel};

const CLAIM: &str = "claim:";
const ATTACH: &str = "attach";
const DETACH: &str = "detach";
const RECLAIM: &str = "reclaim";

enum Ev {
    Claim(Change<PersistentVolumeClaim>),
    Volume(Change<PersistentVolume>),
    Attachment(Change<VolumeAttachment>),
    Class,
}

/// Runs the driver's sidecars until the informers stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    model: CsiModel,
    backend: CsiBackend,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let claims = informers.get::<PersistentVolumeClaim>();
    let volumes = informers.get::<PersistentVolume>();
    let attachments = informers.get::<VolumeAttachment>();
    let classes = informers.get::<StorageClass>();
    // read only: the zone of a claim's selected node (its topology label)
    let nodes = informers.get::<k8s_openapi::api::core::v1::Node>();
    let sources = Sources::default()
        .add(&claims, Ev::Claim)
        .add(&volumes, Ev::Volume)
        .add(&attachments, Ev::Attachment)
        .add(&classes, |_| Ev::Class);
    let mut c = Driver {
        client,
        clock: clock.clone(),
        model,
        backend,
        recorder,
        claims,
        volumes,
        attachments,
        classes,
        nodes,
        queue: WorkQueue::default(),
        due: BTreeMap::new(),
        refused: BTreeMap::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Driver {
    client: kube::Client,
    clock: Clock,
    model: CsiModel,
    backend: CsiBackend,
    recorder: EventRecorder,
    claims: SharedInformer<PersistentVolumeClaim>,
    volumes: SharedInformer<PersistentVolume>,
    attachments: SharedInformer<VolumeAttachment>,
    classes: SharedInformer<StorageClass>,
    nodes: SharedInformer<k8s_openapi::api::core::v1::Node>,
    queue: WorkQueue,
    /// When each piece of work is due (first seen + latency).
    due: BTreeMap<ObjKey, Timestamp>,
    /// Claims (by UID) whose provisioning was refused: reported once.
    refused: BTreeMap<String, ()>,
}

fn driver_name() -> &'static str {
    names::CSI_DRIVER_KLAB
}

impl Reconcile for Driver {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Claim(ch) => {
                if let Some((ns, name)) = klab_runtime::change_key(&ch) {
                    self.queue.add((format!("{CLAIM}{ns}"), name));
                }
            }
            Ev::Volume(ch) => {
                if let Some((_, name)) = klab_runtime::change_key(&ch) {
                    self.queue.add((RECLAIM.into(), name));
                }
            }
            Ev::Attachment(ch) => {
                if let Some((_, name)) = klab_runtime::change_key(&ch) {
                    self.queue.add((ATTACH.into(), name));
                }
            }
            Ev::Class => {
                for c in self.claims.list() {
                    let k = klab_runtime::key_of(c.as_ref());
                    self.queue.add((format!("{CLAIM}{}", k.0), k.1));
                }
            }
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        if let Some(ns) = key.0.strip_prefix(CLAIM) {
            let ns = ns.to_string();
            self.provision(&key, &ns).await
        } else if key.0 == ATTACH || key.0 == DETACH {
            self.attach(&(ATTACH.to_string(), key.1)).await
        } else if key.0 == RECLAIM {
            self.reclaim(&key).await
        } else {
            Ok(())
        }
    }
}

impl Driver {
    /// `Some(true)` when `key`'s work is due now; `Some(false)` when it was scheduled (first
    /// sight included).
    fn due_now(&mut self, key: &ObjKey, latency: std::time::Duration) -> bool {
        let now = self.clock.now();
        let at = *self
            .due
            .entry(key.clone())
            .or_insert_with(|| add(now, latency));
        if now >= at {
            true
        } else {
            self.queue.add_at(key.clone(), at);
            false
        }
    }

    async fn provision(&mut self, key: &ObjKey, ns: &str) -> Result<(), kube::Error> {
        let claim = self.claims.get(&(ns.to_string(), key.1.clone()));
        let wanted = claim.as_ref().is_some_and(|c| {
            c.metadata.deletion_timestamp.is_none()
                && c.spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_deref())
                    .is_none_or(str::is_empty)
                && c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(names::ANN_STORAGE_PROVISIONER))
                    .is_some_and(|p| p == driver_name())
        });
        let Some(claim) = claim.filter(|_| wanted) else {
            self.due.remove(key);
            return Ok(());
        };
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let pv_name = format!("pvc-{uid}");
        if self
            .volumes
            .get(&(String::new(), pv_name.clone()))
            .is_some()
        {
            self.due.remove(key);
            return Ok(());
        }
        let class_name = crate::persistent_volume::decide::claim_class(&claim);
        let Some(class) = self.classes.get(&(String::new(), class_name)) else {
            return Ok(());
        };
        let r = claim_ref(&claim);
        let first = !self.due.contains_key(key);
        if first {
            let msg = format!(
                "External provisioner is provisioning volume for claim \"{ns}/{}\"",
                key.1
            );
            self.recorder
                .record(&r, names::EVENT_NORMAL, "Provisioning", msg)
                .await;
        }
        if !self.due_now(key, self.model.provision) {
            return Ok(());
        }
        self.due.remove(key);
        let zone_of = |n: &k8s_openapi::api::core::v1::Node| {
            n.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(decide::TOPOLOGY_KEY_ZONE).cloned())
        };
        let all_zones: Vec<String> = self
            .nodes
            .list()
            .iter()
            .filter_map(|n| zone_of(n))
            .collect();
        let node_zone = |name: &str| {
            self.nodes
                .get(&(String::new(), name.to_string()))
                .and_then(|n| zone_of(&n))
        };
        let zone = decide::volume_zone(&claim, &class, &node_zone, &all_zones);
        match decide::provisioned_volume(&claim, &class, &self.model, zone.as_deref()) {
            Err(msg) => {
                if self.refused.insert(uid, ()).is_none() {
                    self.recorder
                        .record(
                            &r,
                            names::EVENT_WARNING,
                            names::EVENT_PROVISIONING_FAILED,
                            msg,
                        )
                        .await;
                }
                Ok(())
            }
            Ok(pv) => {
                let api: Api<PersistentVolume> = Api::all(self.client.clone());
                match api.create(&PostParams::default(), &pv).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
                    Err(e) => return Err(e),
                }
                self.recorder
                    .record(
                        &r,
                        names::EVENT_NORMAL,
                        names::EVENT_PROVISIONING_SUCCEEDED,
                        format!("Successfully provisioned volume {pv_name}"),
                    )
                    .await;
                Ok(())
            }
        }
    }

    async fn attach(&mut self, key: &ObjKey) -> Result<(), kube::Error> {
        let Some(va) = self.attachments.get(&(String::new(), key.1.clone())) else {
            self.due.remove(key);
            return Ok(());
        };
        if va.spec.attacher != driver_name() {
            return Ok(());
        }
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        let fin = decide::attacher_finalizer(driver_name());
        let finalizers = va.metadata.finalizers.clone().unwrap_or_default();
        let volume = va
            .spec
            .source
            .persistent_volume_name
            .clone()
            .unwrap_or_default();
        let now_time = self.clock.now_time();
        if va.metadata.deletion_timestamp.is_some() {
            self.due.remove(key);
            let key = &(DETACH.to_string(), key.1.clone());
            if !finalizers.contains(&fin) {
                self.due.remove(key);
                return Ok(());
            }
            if !self.due_now(key, self.model.detach) {
                return Ok(());
            }
            if self.backend.is_failed(&volume) {
                let patch = json!({"status": {"detachError": {"time": now_time,
                    "message": decide::attach_error_message(&volume)}}});
                api.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                self.due.remove(key);
                self.due_now(key, self.model.retry);
                return Ok(());
            }
            self.due.remove(key);
            let rest: Vec<&String> = finalizers.iter().filter(|f| **f != fin).collect();
            let patch = json!({"metadata": {"finalizers": rest}});
            match api
                .patch(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
            return Ok(());
        }
        if !finalizers.contains(&fin) {
            let mut all = finalizers.clone();
            all.push(fin);
            let patch = json!({"metadata": {"finalizers": all}});
            api.patch(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        if va.status.as_ref().is_some_and(|s| s.attached) {
            self.due.remove(key);
            return Ok(());
        }
        if !self.due_now(key, self.model.attach) {
            return Ok(());
        }
        self.due.remove(key);
        let patch = if self.backend.is_failed(&volume) {
            self.due_now(key, self.model.retry);
            json!({"status": {"attached": false, "attachError": {"time": now_time,
                "message": decide::attach_error_message(&volume)}}})
        } else {
            json!({"status": {"attached": true, "attachError": null}})
        };
        api.patch_status(&key.1, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Reclaim policy Delete of a released volume this driver provisioned.
    async fn reclaim(&mut self, key: &ObjKey) -> Result<(), kube::Error> {
        let Some(pv) = self.volumes.get(&(String::new(), key.1.clone())) else {
            self.due.remove(key);
            return Ok(());
        };
        let ours = pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(names::ANN_DYNAMICALLY_PROVISIONED))
            .is_some_and(|p| p == driver_name());
        let spec = pv.spec.as_ref();
        let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
        let delete =
            spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
        if !(ours && released && delete) || pv.metadata.deletion_timestamp.is_some() {
            self.due.remove(key);
            return Ok(());
        }
        if !self.due_now(key, self.model.delete) {
            return Ok(());
        }
        self.due.remove(key);
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.delete(&key.1, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}
