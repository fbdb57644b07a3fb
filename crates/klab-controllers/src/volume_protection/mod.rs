//! The PVC and PV protection controllers (shell; decisions in decide.rs): they remove the
//! `kubernetes.io/pvc-protection` finalizer of a deleted claim once no scheduled, running pod
//! uses it, and `kubernetes.io/pv-protection` of a deleted volume once it is not Bound. Keys: a
//! claim is `(namespace, name)`, a volume `("", name)`.

pub mod decide;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::Api;
use serde_json::json;

use klab_api::{Clock, names};
use klab_runtime::{Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

use crate::replicaset::Error;

enum Ev {
    Claim(Change<PersistentVolumeClaim>),
    Volume(Change<PersistentVolume>),
    Pod(Change<Pod>),
}

/// Runs both protection controllers until the informers stop: `client` releases claims (the
/// pvc-protection-controller's account), `pv_client` volumes (upstream's pv-protection-controller
/// runs under its own account and role).
pub async fn run(
    client: kube::Client,
    pv_client: kube::Client,
    informers: Informers,
    clock: Clock,
) -> Result<(), Error> {
    let claims = informers.get::<PersistentVolumeClaim>();
    let volumes = informers.get::<PersistentVolume>();
    let pods = informers.get::<Pod>();
    let sources = Sources::default()
        .add(&claims, Ev::Claim)
        .add(&volumes, Ev::Volume)
        .add(&pods, Ev::Pod);
    let mut c = Protection {
        client,
        pv_client,
        claims,
        volumes,
        pods,
        queue: WorkQueue::default(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct Protection {
    client: kube::Client,
    pv_client: kube::Client,
    claims: SharedInformer<PersistentVolumeClaim>,
    volumes: SharedInformer<PersistentVolume>,
    pods: SharedInformer<Pod>,
    queue: WorkQueue,
}

fn has(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, f: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|fs| fs.iter().any(|x| x == f))
}

fn without(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    f: &str,
) -> serde_json::Value {
    let rest: Vec<&String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|x| x.as_str() != f)
        .collect();
    json!({"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}})
}

impl Reconcile for Protection {
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
            }
            Ev::Volume(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Pod((old, new)) => {
                // A pod that stops using a claim (deleted, finished) may release it.
                for p in [old, new].into_iter().flatten() {
                    let ns = p.metadata.namespace.clone().unwrap_or_default();
                    for v in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
                        if let Some(c) = &v.persistent_volume_claim {
                            self.queue.add((ns.clone(), c.claim_name.clone()));
                        }
                    }
                }
            }
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        if key.0.is_empty() {
            let Some(pv) = self.volumes.get(&key) else {
                return Ok(());
            };
            if has(&pv.metadata, names::FINALIZER_PV_PROTECTION) && decide::release_volume(&pv) {
                let api: Api<PersistentVolume> = Api::all(self.pv_client.clone());
                let patch = without(&pv.metadata, names::FINALIZER_PV_PROTECTION);
                ignore_gone(
                    crate::write::update_merged(&api, &key.1, crate::write::Target::Object, &patch)
                        .await,
                )?;
            }
            return Ok(());
        }
        let Some(claim) = self.claims.get(&key) else {
            return Ok(());
        };
        if !has(&claim.metadata, names::FINALIZER_PVC_PROTECTION) {
            return Ok(());
        }
        let pods = self.pods.in_namespace(&key.0);
        let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        if decide::release_claim(&claim, &refs) {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &key.0);
            let patch = without(&claim.metadata, names::FINALIZER_PVC_PROTECTION);
            ignore_gone(
                crate::write::update_merged(&api, &key.1, crate::write::Target::Object, &patch)
                    .await,
            )?;
        }
        Ok(())
    }
}

/// A 404 (already gone) or 409 (changed since read: the change re-queues it) is not an error.
fn ignore_gone<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
