//! The PersistentVolume controller (shell; decisions in decide.rs): binds claims to volumes,
//! hands claims of a provisioning class to their external provisioner (annotation
//! `volume.kubernetes.io/storage-provisioner`, event `ExternalProvisioning`), keeps the phases of
//! claims (Pending, Bound, Lost) and volumes (Available, Bound, Released) and records upstream's
//! events as `persistentvolume-controller`.
//!
//! Keys: a claim is `(namespace, name)`, a volume `("", name)` (cluster-scoped), so one queue
//! serves both. A binding writes the volume first (claimRef, then phase Bound), then the claim
//! (volumeName with the bind-completed annotations, then phase, capacity and access modes), in
//! upstream's order, so a crash between the writes is completed by the next sync.

pub mod decide;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use serde_json::json;

use klab_api::{Clock, names};
use klab_runtime::{Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

use crate::events::EventRecorder;
use crate::replicaset::Error;
use decide::{ClaimAction, VolumeAction};

enum Ev {
    Claim(Change<PersistentVolumeClaim>),
    Volume(Change<PersistentVolume>),
    Class,
}

/// Runs the PV controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
    recorder: EventRecorder,
) -> Result<(), Error> {
    let claims = informers.get::<PersistentVolumeClaim>();
    let volumes = informers.get::<PersistentVolume>();
    let classes = informers.get::<StorageClass>();
    let sources = Sources::default()
        .add(&claims, Ev::Claim)
        .add(&volumes, Ev::Volume)
        .add(&classes, |_| Ev::Class);
    let mut c = Pvc {
        client,
        recorder,
        claims,
        volumes,
        classes,
        queue: WorkQueue::default(),
        resync_all: false,
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Pvc {
    client: kube::Client,
    recorder: EventRecorder,
    claims: SharedInformer<PersistentVolumeClaim>,
    volumes: SharedInformer<PersistentVolume>,
    classes: SharedInformer<StorageClass>,
    queue: WorkQueue,
    /// A class appeared or changed: pending claims are looked at again.
    resync_all: bool,
}

pub fn claim_ref(claim: &PersistentVolumeClaim) -> ObjectReference {
    kube::Resource::object_ref(claim, &())
}

pub fn volume_ref(pv: &PersistentVolume) -> ObjectReference {
    kube::Resource::object_ref(pv, &())
}

impl Reconcile for Pvc {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Claim(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
                // A claim's volume learns about it (Released when the claim goes).
                let (old, new) = &ch;
                for c in [old, new].into_iter().flatten() {
                    if let Some(v) = c.spec.as_ref().and_then(|s| s.volume_name.clone())
                        && !v.is_empty()
                    {
                        self.queue.add((String::new(), v));
                    }
                }
            }
            Ev::Volume(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
                // A volume pre-bound to a claim (just provisioned) lets that claim bind.
                let (old, new) = &ch;
                for v in [old, new].into_iter().flatten() {
                    if let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                        self.queue.add((
                            r.namespace.clone().unwrap_or_default(),
                            r.name.clone().unwrap_or_default(),
                        ));
                    } else {
                        // A freed volume may suit any pending claim.
                        self.resync_all = true;
                    }
                }
            }
            Ev::Class => self.resync_all = true,
        }
    }

    async fn before_reconcile(&mut self) {
        if std::mem::take(&mut self.resync_all) {
            for c in self.claims.list() {
                let unbound = c
                    .spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_deref())
                    .is_none_or(str::is_empty);
                if unbound {
                    self.queue.add(klab_runtime::key_of(c.as_ref()));
                }
            }
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        if key.0.is_empty() {
            self.sync_volume(&key.1).await
        } else {
            self.sync_claim(&key).await
        }
    }
}

impl Pvc {
    fn all_volumes(&self) -> Vec<PersistentVolume> {
        self.volumes.list().iter().map(|v| (**v).clone()).collect()
    }

    async fn sync_claim(&mut self, key: &ObjKey) -> Result<(), kube::Error> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(());
        };
        let classes: BTreeMap<String, StorageClass> = self
            .classes
            .list()
            .iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), (**c).clone()))
            .collect();
        let volumes = self.all_volumes();
        let r = claim_ref(&claim);
        match decide::sync_claim(&claim, &volumes, &classes) {
            ClaimAction::None => Ok(()),
            ClaimAction::Pending(ty, reason, msg) => {
                self.recorder.record(&r, ty, reason, msg).await;
                Ok(())
            }
            ClaimAction::Provision { provisioner } => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &key.0);
                let patch = json!({"metadata": {"annotations": {
                    names::ANN_STORAGE_PROVISIONER: provisioner,
                    names::ANN_BETA_STORAGE_PROVISIONER: provisioner,
                }}});
                crate::write::update_merged(&api, &key.1, crate::write::Target::Object, &patch)
                    .await?;
                self.recorder
                    .record(
                        &r,
                        names::EVENT_NORMAL,
                        names::EVENT_EXTERNAL_PROVISIONING,
                        decide::msg_external_provisioning(&provisioner),
                    )
                    .await;
                Ok(())
            }
            ClaimAction::Bind(pv_name) => {
                let Some(pv) = volumes
                    .iter()
                    .find(|v| v.metadata.name.as_deref() == Some(pv_name.as_str()))
                else {
                    return Ok(());
                };
                self.bind(&claim, pv).await
            }
            ClaimAction::MarkBound(pv_name) => {
                let Some(pv) = volumes
                    .iter()
                    .find(|v| v.metadata.name.as_deref() == Some(pv_name.as_str()))
                else {
                    return Ok(());
                };
                self.claim_status_bound(&claim, pv).await
            }
            ClaimAction::Lost(reason, msg) => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &key.0);
                let patch = json!({"status": {"phase": "Lost"}});
                crate::write::update_merged(&api, &key.1, crate::write::Target::Status, &patch)
                    .await?;
                self.recorder
                    .record(&r, names::EVENT_WARNING, reason, msg.to_string())
                    .await;
                Ok(())
            }
        }
    }

    /// Upstream `bind`: the volume's claimRef (and phase Bound), then the claim's volumeName
    /// with `pv.kubernetes.io/bind-completed` (and phase Bound, capacity, access modes).
    async fn bind(
        &mut self,
        claim: &PersistentVolumeClaim,
        pv: &PersistentVolume,
    ) -> Result<(), kube::Error> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let has_ref = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .is_some_and(|r| r.uid.as_deref().is_some_and(|u| !u.is_empty()));
        if !has_ref {
            let mut r = claim_ref(claim);
            r.field_path = None;
            let patch = json!({
                "metadata": {"annotations": {names::ANN_BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"claimRef": r},
            });
            crate::write::update_merged(&pvs, &pv_name, crate::write::Target::Object, &patch)
                .await?;
        }
        let phase = json!({"status": {"phase": "Bound"}});
        crate::write::update_merged(&pvs, &pv_name, crate::write::Target::Status, &phase).await?;
        let ns = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let patch = json!({
            "metadata": {"annotations": {
                names::ANN_BIND_COMPLETED: "yes",
                names::ANN_BOUND_BY_CONTROLLER: "yes",
            }},
            "spec": {"volumeName": pv_name},
        });
        crate::write::update_merged(&api, &name, crate::write::Target::Object, &patch).await?;
        self.claim_status_bound(claim, pv).await
    }

    async fn claim_status_bound(
        &mut self,
        claim: &PersistentVolumeClaim,
        pv: &PersistentVolume,
    ) -> Result<(), kube::Error> {
        let ns = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let spec = pv.spec.clone().unwrap_or_default();
        let patch = json!({"status": {
            "phase": "Bound",
            "accessModes": spec.access_modes.unwrap_or_default(),
            "capacity": spec.capacity.unwrap_or_default(),
        }});
        crate::write::update_merged(&api, &name, crate::write::Target::Status, &patch).await?;
        Ok(())
    }

    async fn sync_volume(&mut self, name: &str) -> Result<(), kube::Error> {
        let Some(pv) = self.volumes.get(&(String::new(), name.to_string())) else {
            return Ok(());
        };
        let claims: BTreeMap<(String, String), PersistentVolumeClaim> = self
            .claims
            .list()
            .iter()
            .map(|c| {
                (
                    (
                        c.metadata.namespace.clone().unwrap_or_default(),
                        c.metadata.name.clone().unwrap_or_default(),
                    ),
                    (**c).clone(),
                )
            })
            .collect();
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        match decide::sync_volume(&pv, &claims) {
            VolumeAction::None => Ok(()),
            VolumeAction::Phase(p) => {
                let patch = json!({"status": {"phase": p}});
                crate::write::update_merged(&pvs, name, crate::write::Target::Status, &patch)
                    .await?;
                Ok(())
            }
            VolumeAction::Released { .. } => {
                // The reclaim itself (Delete) is the external provisioner's: klab's CSI driver
                // deletes released volumes it provisioned; Retain keeps the volume Released.
                let patch = json!({"status": {"phase": "Released"}});
                crate::write::update_merged(&pvs, name, crate::write::Target::Status, &patch)
                    .await?;
                Ok(())
            }
        }
    }
}
