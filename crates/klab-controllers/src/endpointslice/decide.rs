//! Endpoint decisions shared by the EndpointSlice and Endpoints controllers, pure: which pods a
//! Service publishes, with which conditions and ports (upstream `pkg/controller/endpointslice`,
//! `staging/src/k8s.io/endpointslice` and `pkg/controller/endpoint`), and how a Service's
//! managed slices change to hold them.
//!
//! The conditions are the heart of "when does traffic stop": `ready` follows the pod's Ready
//! condition, which the node lifecycle controller sets to False when it marks a node's pods not
//! ready (control-plane spec §9.6) — long before eviction; `terminating` follows the deletion
//! timestamp.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort as CorePort, EndpointSubset, ObjectReference, Pod, Service,
    ServicePort,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::replicaset::util;

pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// `--max-endpoints-per-slice` default.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The Service's pod selector; `None` for a Service without one (its endpoints are the user's).
pub fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// Whether `pod` is one of the Service's pods (same namespace, labels match the selector).
pub fn selects(svc: &Service, pod: &Pod) -> bool {
    let Some(sel) = selector(svc) else {
        return false;
    };
    if pod.metadata.namespace != svc.metadata.namespace {
        return false;
    }
    let labels = util::labels(&pod.metadata);
    sel.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn publish_not_ready(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

pub fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

fn pod_ip(pod: &Pod) -> Option<&str> {
    let st = pod.status.as_ref()?;
    st.pod_ip
        .as_deref()
        .filter(|ip| !ip.is_empty())
        .or_else(|| {
            st.pod_ips
                .iter()
                .flatten()
                .map(|p| p.ip.as_str())
                .find(|ip| !ip.is_empty())
        })
}

/// `ShouldPodBeInEndpoints`: not terminal, has an IP, and (unless `include_terminating`) not
/// being deleted.
pub fn should_publish(pod: &Pod, include_terminating: bool) -> bool {
    let phase = util::phase(pod);
    if phase == util::PHASE_SUCCEEDED || phase == util::PHASE_FAILED {
        return false;
    }
    if pod_ip(pod).is_none() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// (ready, serving, terminating) of a pod's endpoint: ready only while the pod is Ready and not
/// terminating (unless the Service publishes not-ready addresses).
pub fn conditions(svc: &Service, pod: &Pod) -> (bool, bool, bool) {
    let serving = util::is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let pnr = publish_not_ready(svc);
    let mut ready = pnr || serving;
    if terminating && !pnr {
        ready = false;
    }
    (ready, serving, terminating)
}

/// `podutil.FindPort`: a numeric target port as is; a named one from the pod's container ports
/// of the same protocol. `None` when the name is not found.
pub fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    match sp.target_port.as_ref() {
        None => Some(sp.port),
        Some(IntOrString::Int(0)) => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let proto = sp.protocol.as_deref().unwrap_or("TCP");
            pod.spec
                .as_ref()?
                .containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == proto
                })
                .map(|p| p.container_port)
        }
    }
}

/// The slice ports of one pod: each Service port whose target the pod has.
pub fn endpoint_ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(find_port(pod, sp)?),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// A pod's hostname in the Service's DNS (`hostname` set and `subdomain` naming the Service).
pub fn hostname(svc: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let h = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    (spec.subdomain.as_deref() == svc.metadata.name.as_deref()).then(|| h.to_string())
}

/// The endpoint of one published pod. `zone` is its node's `topology.kubernetes.io/zone`.
pub fn endpoint(svc: &Service, pod: &Pod, zone: Option<String>) -> Option<Endpoint> {
    let ip = pod_ip(pod)?;
    let (ready, serving, terminating) = conditions(svc, pod);
    Some(Endpoint {
        addresses: vec![ip.to_string()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: hostname(svc, pod),
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        target_ref: Some(pod_ref(pod)),
        zone,
        ..Default::default()
    })
}

/// The endpoints a Service should publish, grouped by port set (pods whose named ports resolve
/// differently land in different slices), each group in pod-name order.
pub fn desired(
    svc: &Service,
    pods: &[&Pod],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> Vec<(Vec<EndpointPort>, Vec<Endpoint>)> {
    let mut groups: Vec<(Vec<EndpointPort>, Vec<Endpoint>)> = Vec::new();
    let mut sorted: Vec<&&Pod> = pods.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pod in sorted {
        if !selects(svc, pod) || !should_publish(pod, true) {
            continue;
        }
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("");
        let Some(ep) = endpoint(svc, pod, zone_of(node)) else {
            continue;
        };
        let ports = endpoint_ports(svc, pod);
        match groups.iter_mut().find(|(p, _)| *p == ports) {
            Some((_, eps)) => eps.push(ep),
            None => groups.push((ports, vec![ep])),
        }
    }
    groups
}

/// The labels of a Service's slices: the Service's own, plus the service name, the manager and
/// the headless marker.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = svc
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != LABEL_SERVICE_NAME && k != LABEL_MANAGED_BY && k != LABEL_HEADLESS)
        .collect();
    l.insert(
        LABEL_SERVICE_NAME.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    l.insert(LABEL_MANAGED_BY.into(), MANAGED_BY.into());
    if is_headless(svc) {
        l.insert(LABEL_HEADLESS.into(), String::new());
    }
    l
}

/// Whether a slice is one of the Service's managed slices.
pub fn is_managed_slice_of(slice: &EndpointSlice, svc_name: &str) -> bool {
    let l = util::labels(&slice.metadata);
    l.get(LABEL_SERVICE_NAME).map(String::as_str) == Some(svc_name)
        && l.get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
}

fn owner(svc: &Service) -> OwnerReference {
    util::new_controller_ref("v1", "Service", &svc.metadata)
}

/// A new slice for the Service (named by the server from `<service>-`).
pub fn new_slice(
    svc: &Service,
    ports: Vec<EndpointPort>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let name = svc.metadata.name.clone().unwrap_or_default();
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(slice_labels(svc)),
            owner_references: Some(vec![owner(svc)]),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints,
        ports: (!ports.is_empty()).then_some(ports),
    }
}

/// What to do to a Service's managed slices.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<String>,
}

fn endpoint_key(e: &Endpoint) -> Option<&str> {
    e.target_ref.as_ref().and_then(|r| r.uid.as_deref())
}

/// Brings `existing` (the Service's managed slices) in line with `desired`, changing as few
/// slices as it can: a slice keeps the endpoints it still should have (updated in place), new
/// endpoints fill slices of the same ports that have room before new slices are made, and slices
/// left empty go. A Service that selects nothing keeps one placeholder slice with no endpoints
/// and no ports, as upstream.
pub fn plan(
    svc: &Service,
    existing: &[&EndpointSlice],
    desired: Vec<(Vec<EndpointPort>, Vec<Endpoint>)>,
) -> Plan {
    let mut plan = Plan::default();
    let labels = slice_labels(svc);
    let mut sorted: Vec<&&EndpointSlice> = existing.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut used: Vec<bool> = vec![false; sorted.len()];
    let norm = |p: &Option<Vec<EndpointPort>>| p.clone().unwrap_or_default();
    for (ports, eps) in &desired {
        let mut want: BTreeMap<&str, &Endpoint> = BTreeMap::new();
        let mut order: Vec<&str> = Vec::new();
        for e in eps {
            if let Some(k) = endpoint_key(e) {
                want.insert(k, e);
                order.push(k);
            }
        }
        let mut placed: BTreeMap<&str, ()> = BTreeMap::new();
        // Existing slices with these ports keep (and refresh) the endpoints they already hold.
        let mut kept: Vec<(usize, Vec<Endpoint>)> = Vec::new();
        for (i, s) in sorted.iter().enumerate() {
            if used[i] || norm(&s.ports) != *ports || s.address_type != "IPv4" {
                continue;
            }
            used[i] = true;
            let mut list = Vec::new();
            for e in &s.endpoints {
                if let Some(k) = endpoint_key(e)
                    && let Some(w) = want.get(k)
                    && !placed.contains_key(k)
                {
                    list.push((*w).clone());
                    placed.insert(k, ());
                }
            }
            kept.push((i, list));
        }
        // New endpoints fill the kept slices, then new slices.
        let mut fresh: Vec<Endpoint> = order
            .iter()
            .filter(|k| !placed.contains_key(**k))
            .filter_map(|k| want.get(k).map(|e| (*e).clone()))
            .collect();
        for (_, list) in kept.iter_mut() {
            while list.len() < MAX_ENDPOINTS_PER_SLICE && !fresh.is_empty() {
                list.push(fresh.remove(0));
            }
        }
        for (i, list) in kept {
            let s = sorted[i];
            if list.is_empty() {
                plan.delete
                    .push(s.metadata.name.clone().unwrap_or_default());
                continue;
            }
            let same_labels = s.metadata.labels.as_ref() == Some(&labels);
            if s.endpoints != list || !same_labels {
                let mut next = (**s).clone();
                next.endpoints = list;
                next.metadata.labels = Some(labels.clone());
                plan.update.push(next);
            }
        }
        for chunk in fresh.chunks(MAX_ENDPOINTS_PER_SLICE) {
            plan.create
                .push(new_slice(svc, ports.clone(), chunk.to_vec()));
        }
    }
    // Slices whose ports nobody needs any more.
    for (i, s) in sorted.iter().enumerate() {
        if !used[i] {
            plan.delete
                .push(s.metadata.name.clone().unwrap_or_default());
        }
    }
    // The placeholder: a Service with no endpoints keeps one empty slice.
    if desired.is_empty() {
        let placeholder = |s: &EndpointSlice| s.endpoints.is_empty() && s.ports.is_none();
        if let Some(p) = sorted.iter().find(|s| placeholder(s)) {
            let name = p.metadata.name.clone().unwrap_or_default();
            plan.delete.retain(|n| *n != name);
            if p.metadata.labels.as_ref() != Some(&labels) {
                let mut next = (**p).clone();
                next.metadata.labels = Some(labels.clone());
                plan.update.push(next);
            }
        } else {
            plan.create.push(new_slice(svc, Vec::new(), Vec::new()));
        }
    }
    // Slices to create and slices to delete: the creates become updates of the slices that
    // would go (upstream's reconciler does the same to save writes).
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        let name = plan.delete[i].clone();
        let Some(old) = sorted
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(&name))
        else {
            i = i.saturating_add(1);
            continue;
        };
        if let Some(fresh) = plan.create.pop() {
            let mut next = (**old).clone();
            next.endpoints = fresh.endpoints;
            next.ports = fresh.ports;
            next.metadata.labels = fresh.metadata.labels;
            plan.update.push(next);
            plan.delete.remove(i);
        }
    }
    plan
}

/// The subsets of a Service's legacy Endpoints (upstream's endpoints controller): ready pods as
/// `addresses`, not-ready ones as `notReadyAddresses`, terminating pods left out (unless the
/// Service publishes not-ready addresses), grouped into one subset per set of ports with
/// addresses in (IP, UID) order (`RepackSubsets`).
pub fn endpoints_subsets(svc: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let pnr = publish_not_ready(svc);
    let svc_ports: Vec<ServicePort> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    // (ports of the address, ready?) per address.
    let mut entries: Vec<(Vec<CorePort>, bool, EndpointAddress)> = Vec::new();
    for pod in pods {
        if !selects(svc, pod) || !should_publish(pod, pnr) {
            continue;
        }
        let Some(ip) = pod_ip(pod) else { continue };
        let addr = EndpointAddress {
            ip: ip.to_string(),
            hostname: hostname(svc, pod),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(pod_ref(pod)),
        };
        let ready = pnr || util::is_pod_ready(pod);
        if svc_ports.is_empty() {
            if is_headless(svc) {
                entries.push((Vec::new(), ready, addr));
            }
            continue;
        }
        let ports: Vec<CorePort> = svc_ports
            .iter()
            .filter_map(|sp| {
                Some(CorePort {
                    name: sp.name.clone().filter(|n| !n.is_empty()),
                    port: find_port(pod, sp)?,
                    protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: sp.app_protocol.clone(),
                })
            })
            .collect();
        if ports.is_empty() {
            continue;
        }
        entries.push((ports, ready, addr));
    }
    let mut subsets: Vec<EndpointSubset> = Vec::new();
    for (ports, ready, addr) in entries {
        let idx = match subsets
            .iter()
            .position(|s| s.ports.clone().unwrap_or_default() == ports)
        {
            Some(i) => i,
            None => {
                subsets.push(EndpointSubset {
                    ports: (!ports.is_empty()).then_some(ports),
                    ..Default::default()
                });
                subsets.len().saturating_sub(1)
            }
        };
        let s = &mut subsets[idx];
        let list = if ready {
            s.addresses.get_or_insert_with(Vec::new)
        } else {
            s.not_ready_addresses.get_or_insert_with(Vec::new)
        };
        list.push(addr);
    }
    let by_ip_uid = |a: &EndpointAddress, b: &EndpointAddress| {
        let uid = |x: &EndpointAddress| x.target_ref.as_ref().and_then(|r| r.uid.clone());
        a.ip.cmp(&b.ip).then_with(|| uid(a).cmp(&uid(b)))
    };
    for s in &mut subsets {
        for l in [&mut s.addresses, &mut s.not_ready_addresses]
            .into_iter()
            .flatten()
        {
            l.sort_by(by_ip_uid);
        }
    }
    subsets
}

/// The labels of a Service's legacy Endpoints: the Service's own, the headless marker, and the
/// mark that keeps the mirroring controller away.
pub fn endpoints_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut l = svc.metadata.labels.clone().unwrap_or_default();
    l.remove(LABEL_HEADLESS);
    if is_headless(svc) {
        l.insert(LABEL_HEADLESS.into(), String::new());
    }
    l.insert(LABEL_SKIP_MIRROR.into(), "true".into());
    l
}
