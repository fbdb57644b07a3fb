//! What the scheduler knows about a node: the Node object, the non-terminal pods bound to it, their
//! summed requests (actual and "non-zero" for scoring) and the host ports they hold.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

/// Requests the scheduler accounts for (upstream `framework.Resource`, cpu/memory/pods only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
}

impl Resources {
    fn add(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(o.milli_cpu);
        self.memory = self.memory.saturating_add(o.memory);
    }
    fn max(&mut self, o: Resources) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
    }
}

/// Scoring defaults for a container that requests no CPU / memory (upstream
/// `schedutil.DefaultMilliCPURequest` = 100m and `DefaultMemoryRequest` = 200Mi).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

fn list_get<'a>(list: Option<&'a BTreeMap<String, Quantity>>, name: &str) -> Option<&'a Quantity> {
    list.and_then(|l| l.get(name))
}

fn container_requests(c: &Container, non_zero: bool) -> Resources {
    let reqs = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let cpu = list_get(reqs, "cpu").and_then(|q| quantity::milli_value(&q.0));
    let mem = list_get(reqs, "memory").and_then(|q| quantity::value(&q.0));
    // Upstream applies the non-zero defaults only when the request is missing, not when it is "0".
    Resources {
        milli_cpu: cpu.unwrap_or(if non_zero {
            DEFAULT_MILLI_CPU_REQUEST
        } else {
            0
        }),
        memory: mem.unwrap_or(if non_zero { DEFAULT_MEMORY_REQUEST } else { 0 }),
    }
}

/// The pod's effective requests (upstream `resource.PodRequests`): the sum of the app containers,
/// raised to the largest init container (restartable "sidecar" init containers add to both the
/// running total and every later init container), plus `spec.overhead`.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut reqs = Resources::default();
    for c in &spec.containers {
        reqs.add(container_requests(c, non_zero));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let mut r = container_requests(c, non_zero);
        if c.restart_policy.as_deref() == Some("Always") {
            reqs.add(r);
            sidecars.add(r);
            r = sidecars;
        } else {
            r.add(sidecars);
        }
        init_max.max(r);
    }
    reqs.max(init_max);
    if let Some(o) = spec.overhead.as_ref() {
        reqs.add(Resources {
            milli_cpu: list_get(Some(o), "cpu")
                .and_then(|q| quantity::milli_value(&q.0))
                .unwrap_or(0),
            memory: list_get(Some(o), "memory")
                .and_then(|q| quantity::value(&q.0))
                .unwrap_or(0),
        });
    }
    reqs
}

/// One host port a pod asks for: `(hostIP, protocol, port)`, with upstream defaults
/// (`0.0.0.0`, `TCP`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

/// The host ports of the pod's containers (upstream `GetHostPorts`).
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            if let Some(port) = p.host_port.filter(|p| *p > 0) {
                out.push(HostPort {
                    ip: p
                        .host_ip
                        .clone()
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "0.0.0.0".into()),
                    protocol: p
                        .protocol
                        .clone()
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "TCP".into()),
                    port,
                });
            }
        }
    }
    out
}

/// Whether two host ports collide: same protocol and port, and the same IP or either is `0.0.0.0`.
pub fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    a.port == b.port
        && a.protocol == b.protocol
        && (a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0")
}

/// A node and the scheduler's accounting of the pods on it.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    /// Non-terminal pods bound (or assumed bound) to the node, sorted by namespace/name.
    pub pods: Vec<Arc<Pod>>,
    pub requested: Resources,
    pub non_zero_requested: Resources,
    pub allocatable: Resources,
    pub allowed_pods: i64,
    pub used_ports: Vec<HostPort>,
    /// Pods not being deleted, by spreading owner ([`spread_key`]): what default topology
    /// spreading counts on each node.
    pub spread_counts: BTreeMap<SpreadKey, i64>,
    /// The node's `topology.kubernetes.io/zone` label and whether it has a
    /// `kubernetes.io/hostname` label, read once here: default topology spreading looks them up
    /// on every node for every pod scheduled.
    pub zone: Option<String>,
    pub has_hostname: bool,
}

/// The owner a pod is spread by under the default topology spreading constraints: its
/// controlling ReplicaSet, StatefulSet or ReplicationController (upstream's `DefaultSelector`
/// uses their selectors; klab matches by owner), as the XXH3-128 digest of its namespace, kind
/// and name. Scoring looks an owner up on every feasible node for every pod it schedules; the
/// names of a cluster's owners share long prefixes (`default/ReplicaSet/web-…`), so comparing
/// them was 7 % of a busy live cluster's CPU (a fifth of its scheduler's), where a digest
/// compares in one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpreadKey(u128);

pub(crate) fn spread_key(pod: &Pod) -> Option<SpreadKey> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    if !matches!(
        owner.kind.as_str(),
        "ReplicaSet" | "StatefulSet" | "ReplicationController"
    ) {
        return None;
    }
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        owner.kind.as_str(),
        owner.name.as_str(),
    ] {
        // Length-prefixed, so that no two (namespace, kind, name) triples hash the same bytes.
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    Some(SpreadKey(h.digest128()))
}

/// Pods not being deleted per spreading owner and zone, summed over the nodes of a snapshot: the
/// zone side of default topology spreading. The scheduler's cache keeps it as node infos change,
/// so that a pod's score does not walk every node of the cluster to count its siblings by zone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneSpread {
    /// owner ([`spread_key`]) → zone → pods; no zero entries, so two equal sums compare equal.
    by_owner: BTreeMap<SpreadKey, BTreeMap<String, i64>>,
}

impl ZoneSpread {
    /// The sums over `infos`, counted from scratch.
    pub fn of(infos: &[NodeInfo]) -> Self {
        let mut z = ZoneSpread::default();
        for ni in infos {
            z.add(ni);
        }
        z
    }

    /// Counts a node info's pods in (a node without a zone label adds nothing).
    pub fn add(&mut self, ni: &NodeInfo) {
        self.apply(ni, 1);
    }

    /// Takes a node info's pods out again (the info as it was added).
    pub fn remove(&mut self, ni: &NodeInfo) {
        self.apply(ni, -1);
    }

    fn apply(&mut self, ni: &NodeInfo, sign: i64) {
        let Some(zone) = ni.zone.as_deref() else {
            return;
        };
        for (owner, &n) in &ni.spread_counts {
            let zones = self.by_owner.entry(*owner).or_default();
            let c = zones.entry(zone.to_string()).or_insert(0);
            *c = c.saturating_add(n.saturating_mul(sign));
            if *c == 0 {
                zones.remove(zone);
                if zones.is_empty() {
                    self.by_owner.remove(owner);
                }
            }
        }
    }

    /// The owner's pods on the nodes of `zone`.
    pub fn count(&self, owner: SpreadKey, zone: &str) -> i64 {
        self.by_owner
            .get(&owner)
            .and_then(|z| z.get(zone))
            .copied()
            .unwrap_or(0)
    }
}

impl NodeInfo {
    pub fn new(node: Node, pods: Vec<Pod>) -> Self {
        Self::shared(Arc::new(node), pods.into_iter().map(Arc::new).collect())
    }

    /// The info of a node and its pods as the scheduler's cache holds them (shared, not copied).
    pub fn shared(node: Arc<Node>, mut pods: Vec<Arc<Pod>>) -> Self {
        pods.sort_by(|a, b| {
            (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
        });
        let mut requested = Resources::default();
        let mut non_zero_requested = Resources::default();
        let mut used_ports = Vec::new();
        let mut spread_counts: BTreeMap<SpreadKey, i64> = BTreeMap::new();
        for p in &pods {
            if p.metadata.deletion_timestamp.is_none()
                && let Some(k) = spread_key(p)
            {
                let n = spread_counts.entry(k).or_insert(0);
                *n = n.saturating_add(1);
            }
            requested.add(pod_requests(p, false));
            non_zero_requested.add(pod_requests(p, true));
            used_ports.extend(host_ports(p));
        }
        let alloc = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
        let allocatable = Resources {
            milli_cpu: list_get(alloc, "cpu")
                .and_then(|q| quantity::milli_value(&q.0))
                .unwrap_or(0),
            memory: list_get(alloc, "memory")
                .and_then(|q| quantity::value(&q.0))
                .unwrap_or(0),
        };
        let allowed_pods = list_get(alloc, "pods")
            .and_then(|q| quantity::value(&q.0))
            .unwrap_or(0);
        let labels = node.metadata.labels.as_ref();
        let zone = labels
            .and_then(|l| l.get(klab_api::names::LABEL_ZONE))
            .cloned();
        let has_hostname = labels.is_some_and(|l| l.contains_key(klab_api::names::LABEL_HOSTNAME));
        NodeInfo {
            node,
            pods,
            requested,
            non_zero_requested,
            allocatable,
            allowed_pods,
            used_ports,
            spread_counts,
            zone,
            has_hostname,
        }
    }

    pub fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }

    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.node.metadata.labels.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn pod_requests_table() {
        // (pod spec, actual requests, non-zero requests)
        let cases = [
            (
                json!({"containers": [{"name": "a"}]}),
                (0, 0),
                (100, DEFAULT_MEMORY_REQUEST),
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                                       {"name": "b", "resources": {"requests": {"cpu": "1"}}}]}),
                (1250, 64 << 20),
                (1250, (64 << 20) + DEFAULT_MEMORY_REQUEST),
            ),
            // init container max rule: the larger init container wins over the app sum
            (
                json!({"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                       "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}),
                (2000, 1 << 30),
                (2000, 1 << 30),
            ),
            // a sidecar (restartable init container) adds to the total
            (
                json!({"initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "10Mi"}}}],
                       "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}),
                (600, (1 << 30) + (10 << 20)),
                (600, (1 << 30) + (10 << 20)),
            ),
            (
                json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}], "overhead": {"cpu": "250m"}}),
                (1250, 0),
                (1250, DEFAULT_MEMORY_REQUEST),
            ),
        ];
        for (i, (spec, actual, nz)) in cases.into_iter().enumerate() {
            let p = pod(json!({"metadata": {"name": "p"}, "spec": spec}));
            assert_eq!(
                pod_requests(&p, false),
                Resources {
                    milli_cpu: actual.0,
                    memory: actual.1
                },
                "case {i}"
            );
            assert_eq!(
                pod_requests(&p, true),
                Resources {
                    milli_cpu: nz.0,
                    memory: nz.1
                },
                "case {i} non-zero"
            );
        }
    }

    #[test]
    fn host_port_conflicts() {
        let p = |ip: &str, proto: &str, port| HostPort {
            ip: ip.into(),
            protocol: proto.into(),
            port,
        };
        assert!(ports_conflict(
            &p("0.0.0.0", "TCP", 80),
            &p("10.0.0.1", "TCP", 80)
        ));
        assert!(ports_conflict(
            &p("10.0.0.1", "TCP", 80),
            &p("10.0.0.1", "TCP", 80)
        ));
        assert!(!ports_conflict(
            &p("10.0.0.1", "TCP", 80),
            &p("10.0.0.2", "TCP", 80)
        ));
        assert!(!ports_conflict(
            &p("0.0.0.0", "TCP", 80),
            &p("0.0.0.0", "UDP", 80)
        ));
        assert!(!ports_conflict(
            &p("0.0.0.0", "TCP", 80),
            &p("0.0.0.0", "TCP", 81)
        ));
        let pod = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}]}}),
        );
        assert_eq!(host_ports(&pod), vec![p("0.0.0.0", "TCP", 8080)]);
    }
}
