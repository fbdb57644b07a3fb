//! The EndpointSlice controller and the legacy Endpoints controller (shells): for every Service
//! with a selector, the pods it selects become endpoints — EndpointSlices managed by
//! `endpointslice-controller.k8s.io`, and an Endpoints object of the Service's name. Decisions
//! live in decide.rs.
//!
//! A Service is synced when it changes, when a pod it selects (before or after the change)
//! changes, and, for slices, when one of its managed slices changes (so a slice deleted or edited
//! by hand is repaired). Writes are remembered until the slice cache shows them, and a sync waits
//! for that, so a slow cache never makes the controller create a slice twice.

pub mod decide;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};

use klab_api::Clock;
use klab_runtime::{
    Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue, key_of,
};

use crate::replicaset::Error;

/// The changes the endpoint controllers handle.
enum Ev {
    Service(Change<Service>),
    Pod(Change<Pod>),
    Slice(Change<EndpointSlice>),
    Endpoints(Change<Endpoints>),
    /// Nodes are read for zones only.
    Ignored,
}

/// The keys of the Services selecting `pod` (old or new labels).
fn services_of(services: &SharedInformer<Service>, (old, new): &Change<Pod>) -> Vec<ObjKey> {
    let Some(ns) = new
        .as_ref()
        .or(old.as_ref())
        .and_then(|p| p.metadata.namespace.clone())
    else {
        return Vec::new();
    };
    services
        .in_namespace(&ns)
        .into_iter()
        .filter(|s| {
            old.as_ref().is_some_and(|p| decide::selects(s, p))
                || new.as_ref().is_some_and(|p| decide::selects(s, p))
        })
        .map(|s| key_of(s.as_ref()))
        .collect()
}

fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Runs the EndpointSlice controller on the process's shared informers until they stop.
pub async fn run_slices(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
) -> Result<(), Error> {
    let services = informers.get::<Service>();
    let pods = informers.get::<Pod>();
    let slices = informers.get::<EndpointSlice>();
    let nodes = informers.get::<Node>();
    let sources = Sources::default()
        .add(&services, Ev::Service)
        .add(&pods, Ev::Pod)
        .add(&slices, Ev::Slice)
        .add(&nodes, |_| Ev::Ignored);
    let mut c = SliceController {
        client,
        services,
        pods,
        slices,
        nodes,
        queue: informers.queue("endpoint_slice"),
        pending: BTreeMap::new(),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

/// A write whose result the slice cache must show before the Service is synced again.
enum Pending {
    /// The slice exists at this resourceVersion or later.
    Written(String, u64),
    /// The slice is gone.
    Deleted(String),
}

struct SliceController {
    client: kube::Client,
    services: SharedInformer<Service>,
    pods: SharedInformer<Pod>,
    slices: SharedInformer<EndpointSlice>,
    nodes: SharedInformer<Node>,
    queue: WorkQueue,
    pending: BTreeMap<ObjKey, Vec<Pending>>,
}

impl Reconcile for SliceController {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Service(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Pod(ch) => {
                for k in services_of(&self.services, &ch) {
                    self.queue.add(k);
                }
            }
            Ev::Slice((old, new)) => {
                let Some(s) = new.as_ref().or(old.as_ref()) else {
                    return;
                };
                let l = crate::replicaset::util::labels(&s.metadata);
                if l.get(decide::LABEL_MANAGED_BY).map(String::as_str) == Some(decide::MANAGED_BY)
                    && let Some(svc) = l.get(decide::LABEL_SERVICE_NAME)
                {
                    self.queue
                        .add((s.namespace().unwrap_or_default(), svc.clone()));
                }
            }
            Ev::Endpoints(_) | Ev::Ignored => {}
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        let Some(svc) = self.services.get(&key) else {
            self.pending.remove(&key);
            return Ok(());
        };
        if decide::selector(&svc).is_none() {
            return Ok(());
        }
        let existing: Vec<Arc<EndpointSlice>> = self
            .slices
            .in_namespace(&key.0)
            .into_iter()
            .filter(|s| decide::is_managed_slice_of(s, &key.1))
            .collect();
        // Wait until the cache shows our last writes (a slice event will queue the Service).
        if let Some(p) = self.pending.get(&key) {
            let seen = p.iter().all(|w| match w {
                Pending::Written(name, v) => existing
                    .iter()
                    .any(|s| s.metadata.name.as_deref() == Some(name) && rv(&s.metadata) >= *v),
                Pending::Deleted(name) => !existing
                    .iter()
                    .any(|s| s.metadata.name.as_deref() == Some(name)),
            });
            if !seen {
                return Ok(());
            }
            self.pending.remove(&key);
        }
        let pods: Vec<Arc<Pod>> = self
            .pods
            .in_namespace(&key.0)
            .into_iter()
            .filter(|p| decide::selects(&svc, p))
            .collect();
        let pod_refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        let nodes = &self.nodes;
        let zone_of = |node: &str| -> Option<String> {
            nodes.get(&(String::new(), node.to_string())).and_then(|n| {
                n.metadata
                    .labels
                    .as_ref()?
                    .get(klab_api::names::LABEL_ZONE)
                    .cloned()
            })
        };
        let desired = decide::desired(&svc, &pod_refs, &zone_of);
        let existing_refs: Vec<&EndpointSlice> = existing.iter().map(|s| s.as_ref()).collect();
        let plan = decide::plan(&svc, &existing_refs, desired);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &key.0);
        let mut written = Vec::new();
        let mut result = Ok(());
        for s in &plan.update {
            match api.replace(&s.name_any(), &PostParams::default(), s).await {
                Ok(n) => written.push(Pending::Written(n.name_any(), rv(&n.metadata))),
                Err(e) => result = Err(e),
            }
        }
        for s in &plan.create {
            match api.create(&PostParams::default(), s).await {
                Ok(n) => written.push(Pending::Written(n.name_any(), rv(&n.metadata))),
                Err(e) => result = Err(e),
            }
        }
        for name in &plan.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => written.push(Pending::Deleted(name.clone())),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => result = Err(e),
            }
        }
        if !written.is_empty() {
            self.pending.insert(key, written);
        }
        result
    }
}

/// Runs the legacy Endpoints controller on the process's shared informers until they stop.
pub async fn run_endpoints(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
) -> Result<(), Error> {
    let services = informers.get::<Service>();
    let pods = informers.get::<Pod>();
    let endpoints = informers.get::<Endpoints>();
    let sources = Sources::default()
        .add(&services, Ev::Service)
        .add(&pods, Ev::Pod)
        .add(&endpoints, Ev::Endpoints);
    let mut c = EndpointsController {
        client,
        services,
        pods,
        endpoints,
        queue: informers.queue("endpoint"),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(Error::Stopped)
}

struct EndpointsController {
    client: kube::Client,
    services: SharedInformer<Service>,
    pods: SharedInformer<Pod>,
    endpoints: SharedInformer<Endpoints>,
    queue: WorkQueue,
}

impl Reconcile for EndpointsController {
    type Event = Ev;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Service(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch) {
                    self.queue.add(k);
                }
            }
            Ev::Pod(ch) => {
                for k in services_of(&self.services, &ch) {
                    self.queue.add(k);
                }
            }
            // An Endpoints object changed or deleted by hand is repaired (upstream syncs its
            // Service), and a create that raced the cache is checked once the cache has it.
            Ev::Endpoints(ch) => {
                if let Some(k) = klab_runtime::change_key(&ch)
                    && self.services.get(&k).is_some()
                {
                    self.queue.add(k);
                }
            }
            _ => {}
        }
    }

    async fn reconcile(&mut self, key: ObjKey) -> Result<(), kube::Error> {
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), &key.0);
        let Some(svc) = self.services.get(&key) else {
            // The Service is gone: so are its Endpoints.
            if self.endpoints.get(&key).is_some() {
                match api.delete(&key.1, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        };
        if decide::selector(&svc).is_none() {
            return Ok(());
        }
        let pods: Vec<Arc<Pod>> = self
            .pods
            .in_namespace(&key.0)
            .into_iter()
            .filter(|p| decide::selects(&svc, p))
            .collect();
        let mut pod_refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        pod_refs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let subsets = decide::endpoints_subsets(&svc, &pod_refs);
        let labels = decide::endpoints_labels(&svc);
        let subsets = (!subsets.is_empty()).then_some(subsets);
        match self.endpoints.get(&key) {
            Some(cur) => {
                if cur.subsets == subsets && cur.metadata.labels.as_ref() == Some(&labels) {
                    return Ok(());
                }
                let mut next = (*cur).clone();
                next.subsets = subsets;
                next.metadata.labels = Some(labels);
                api.replace(&key.1, &PostParams::default(), &next)
                    .await
                    .map(|_| ())
            }
            None => {
                let ep = Endpoints {
                    metadata: ObjectMeta {
                        name: Some(key.1.clone()),
                        namespace: Some(key.0.clone()),
                        labels: Some(labels),
                        ..Default::default()
                    },
                    subsets,
                };
                match api.create(&PostParams::default(), &ep).await {
                    Ok(_) => Ok(()),
                    // The cache is behind: the next event syncs again with it.
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }
}
