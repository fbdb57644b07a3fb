//! The service-account controller and the root CA publisher (shell): every namespace that
//! accepts content holds the `default` ServiceAccount and, when the cluster has a CA, the
//! `kube-root-ca.crt` ConfigMap. A namespace is synced when it changes and when one of the two
//! objects in it is deleted or edited. Decisions live in decide.rs.

pub mod decide;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use klab_api::Clock;
use klab_runtime::{Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

use decide::{DEFAULT_SERVICE_ACCOUNT, DESCRIPTION, DESCRIPTION_ANNOTATION, ROOT_CA_CONFIG_MAP};

/// Configuration: the CA bundle to publish (`None`: no CA, nothing published).
#[derive(Debug, Clone, Default)]
pub struct ServiceAccountControllerConfig {
    pub root_ca_pem: Option<String>,
}

enum Ev {
    Namespace(Change<Namespace>),
    ServiceAccount(Change<ServiceAccount>),
    ConfigMap(Change<ConfigMap>),
}

/// Runs both controllers' work on the process's shared informers until they stop: `client`
/// creates ServiceAccounts (the service-account controller's account), `publisher` writes the
/// root CA ConfigMaps (upstream's root-ca-cert-publisher runs under its own account and role).
pub async fn run(
    client: kube::Client,
    publisher: kube::Client,
    informers: Informers,
    clock: Clock,
    config: ServiceAccountControllerConfig,
) -> Result<(), crate::replicaset::Error> {
    let namespaces = informers.get::<Namespace>();
    let service_accounts = informers.get::<ServiceAccount>();
    let mut sources = Sources::default()
        .add(&namespaces, Ev::Namespace)
        .add(&service_accounts, Ev::ServiceAccount);
    let config_maps = config.root_ca_pem.is_some().then(|| {
        let cms = informers.get::<ConfigMap>();
        sources_add(&mut sources, &cms);
        cms
    });
    let mut c = Sac {
        client,
        publisher,
        namespaces,
        service_accounts,
        config_maps,
        config,
        queue: informers.queue("serviceaccount"),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(crate::replicaset::Error::Stopped)
}

fn sources_add(sources: &mut Sources<Ev>, cms: &SharedInformer<ConfigMap>) {
    *sources = std::mem::take(sources).add(cms, Ev::ConfigMap);
}

struct Sac {
    client: kube::Client,
    publisher: kube::Client,
    namespaces: SharedInformer<Namespace>,
    service_accounts: SharedInformer<ServiceAccount>,
    config_maps: Option<SharedInformer<ConfigMap>>,
    config: ServiceAccountControllerConfig,
    queue: WorkQueue,
}

fn ns_key(ns: &str) -> ObjKey {
    (String::new(), ns.to_string())
}

impl Reconcile for Sac {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Namespace((_, Some(ns))) => self.queue.add(ns_key(&ns.name_any())),
            Ev::Namespace(_) => {}
            // A deleted `default` account is created again.
            Ev::ServiceAccount((Some(old), None)) if old.name_any() == DEFAULT_SERVICE_ACCOUNT => {
                self.queue.add(ns_key(&old.namespace().unwrap_or_default()))
            }
            Ev::ServiceAccount(_) => {}
            Ev::ConfigMap((old, new)) => {
                if let Some(cm) = new.as_ref().or(old.as_ref())
                    && cm.name_any() == ROOT_CA_CONFIG_MAP
                {
                    self.queue.add(ns_key(&cm.namespace().unwrap_or_default()));
                }
            }
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        let ns_name = key.1;
        let Some(ns) = self.namespaces.get(&ns_key(&ns_name)) else {
            return Ok(());
        };
        if !decide::accepts_content(&ns) {
            return Ok(());
        }
        let sa_key = (ns_name.clone(), DEFAULT_SERVICE_ACCOUNT.to_string());
        if self.service_accounts.get(&sa_key).is_none() {
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(DEFAULT_SERVICE_ACCOUNT.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ns_name);
            ignore_exists(api.create(&PostParams::default(), &sa).await)?;
        }
        let Some(cms) = &self.config_maps else {
            return Ok(());
        };
        let existing = cms.get(&(ns_name.clone(), ROOT_CA_CONFIG_MAP.to_string()));
        let api: Api<ConfigMap> = Api::namespaced(self.publisher.clone(), &ns_name);
        match decide::root_ca(self.config.root_ca_pem.as_deref(), existing.as_deref()) {
            decide::RootCa::Nothing => {}
            decide::RootCa::Create(data) => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(ROOT_CA_CONFIG_MAP.into()),
                        annotations: Some(BTreeMap::from([(
                            DESCRIPTION_ANNOTATION.to_string(),
                            DESCRIPTION.to_string(),
                        )])),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                ignore_exists(api.create(&PostParams::default(), &cm).await)?;
            }
            decide::RootCa::Update(data) => {
                let patch = json!({
                    "metadata": {"annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data,
                    "binaryData": null,
                });
                // Upstream's publisher updates its cached copy (its role grants create and
                // update, not get or patch); a conflict is retried by the queue.
                let Some(cached) = existing.as_deref() else {
                    return Ok(());
                };
                let next = crate::write::merged(cached, &patch).map_err(kube::Error::SerdeError)?;
                match api
                    .replace(ROOT_CA_CONFIG_MAP, &PostParams::default(), &next)
                    .await
                {
                    Ok(_) => {}
                    // Deleted meanwhile: its delete notice queues the namespace again.
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }
}

/// A create that lost a race with another writer (or with our own cache) is done.
fn ignore_exists<T>(r: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        // The namespace began terminating after the cache showed it active.
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
        Err(e) => Err(e),
    }
}
