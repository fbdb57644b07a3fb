//! Virtual-time tests of the node lifecycle controller (with the taint eviction controller and
//! PodGC where the vector needs them) against the in-process API server; fake kubelets are plain
//! test code renewing Leases and posting status through the API. Times are asserted half a second
//! around the expected instant, in the objects' timeline (seconds since the clock's epoch).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Container, Event, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodCondition, PodSpec,
    PodStatus, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use klab_api::{Clock, DetRng, names};
use klab_apiserver::{ApiServer, ApiServerConfig, Identity};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{NodeLifecycleConfig, NodeLifecycleMetrics};
use crate::pod_gc::{PodGcConfig, PodGcMetrics};
use crate::taint_eviction::{TaintEvictionConfig, TaintEvictionMetrics};

/// A test cluster: API server, clock and an admin client.
pub(crate) struct Cluster {
    /// Kept alive for the duration of the test (the clients only hold its router).
    pub _api: ApiServer,
    pub clock: Clock,
    pub client: kube::Client,
}

pub(crate) fn toleration(
    key: &str,
    op: &str,
    value: &str,
    effect: &str,
    seconds: Option<i64>,
) -> Toleration {
    let s = |x: &str| (!x.is_empty()).then(|| x.to_string());
    Toleration {
        key: s(key),
        operator: s(op),
        value: s(value),
        effect: s(effect),
        toleration_seconds: seconds,
    }
}

impl Cluster {
    pub async fn new() -> Self {
        let clock = Clock::virtual_default();
        let api = klab_apiserver::testing::memory_server_with(
            clock.clone(),
            DetRng::seeded(1),
            ApiServerConfig::default(),
        )
        .await;
        let client = kube::Client::new(api.router_as(Identity::admin()), "default");
        Cluster {
            _api: api,
            clock,
            client,
        }
    }

    /// The instant `secs` after the epoch.
    pub fn t(&self, secs: f64) -> Timestamp {
        self.clock.epoch() + SignedDuration::from_secs_f64(secs)
    }

    /// Seconds since the epoch of a timestamp.
    pub fn secs(&self, t: Timestamp) -> f64 {
        t.duration_since(self.clock.epoch()).as_secs_f64()
    }

    /// Sleeps until `secs` after the epoch, asserting that virtual time really got there.
    pub async fn at(&self, secs: f64) {
        self.clock.sleep_until(self.t(secs)).await;
        assert!(self.clock.now() >= self.t(secs));
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), names::NS_NODE_LEASE)
    }

    /// Registers a Ready node (status posted, Lease created) with the given labels.
    pub async fn add_node(&self, name: &str, labels: &[(&str, &str)]) {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: None,
        };
        self.nodes()
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        self.post_status(name, "True").await;
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(names::NS_NODE_LEASE.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(self.clock.now_micro()),
                ..Default::default()
            }),
        };
        match self.leases().create(&PostParams::default(), &lease).await {
            Ok(_) => {}
            // A re-registered node finds its old Lease: renew it.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let patch = json!({ "spec": { "renewTime": self.clock.now_micro() } });
                self.leases()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .expect("renew lease");
            }
            Err(e) => panic!("create lease: {e}"),
        }
    }

    /// Posts a full kubelet status with the given Ready status (heartbeats = now).
    pub async fn post_status(&self, name: &str, ready: &str) {
        let now = self.clock.now_time();
        let c = |type_: &str, status: &str| NodeCondition {
            type_: type_.into(),
            status: status.into(),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
            reason: Some(if type_ == "Ready" && status != "True" {
                "KubeletNotReady".into()
            } else {
                "KubeletReady".into()
            }),
            message: Some("kubelet".into()),
        };
        let status = NodeStatus {
            conditions: Some(vec![
                c("MemoryPressure", "False"),
                c("DiskPressure", "False"),
                c("PIDPressure", "False"),
                c("Ready", ready),
            ]),
            ..Default::default()
        };
        self.nodes()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
            .expect("post node status");
    }

    /// A fake kubelet renewing the node's Lease every 10 s from now, last renewal at or before
    /// `until` seconds.
    pub fn spawn_kubelet(&self, name: &str, until: f64) -> tokio::task::JoinHandle<()> {
        self.spawn_kubelet_between(name, 0.0, until)
    }

    /// A fake kubelet renewing the node's Lease every 10 s from `from` seconds (or now, if later)
    /// until `until` seconds.
    pub fn spawn_kubelet_between(
        &self,
        name: &str,
        from: f64,
        until: f64,
    ) -> tokio::task::JoinHandle<()> {
        let (client, clock, name) = (self.client.clone(), self.clock.clone(), name.to_string());
        let (from, until) = (self.t(from), self.t(until));
        tokio::spawn(async move {
            let leases: Api<Lease> = Api::namespaced(client, names::NS_NODE_LEASE);
            clock.sleep_until(from).await;
            loop {
                if clock.now() > until {
                    return;
                }
                let patch = json!({ "spec": { "renewTime": clock.now_micro() } });
                let _ = leases
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                clock.sleep(Duration::from_secs(10)).await;
            }
        })
    }

    /// Creates a running, Ready pod bound to `node` (tolerations None = admission defaults apply).
    pub async fn add_pod(&self, name: &str, node: &str, tolerations: Option<Vec<Toleration>>) {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.into()),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("nginx".into()),
                    ..Default::default()
                }],
                tolerations,
                ..Default::default()
            }),
            status: None,
        };
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        let now = self.clock.now_time();
        let c = |t: &str| PodCondition {
            type_: t.into(),
            status: "True".into(),
            last_transition_time: Some(now.clone()),
            ..Default::default()
        };
        let status = PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![
                c("PodScheduled"),
                c("Initialized"),
                c("ContainersReady"),
                c("Ready"),
            ]),
            ..Default::default()
        };
        self.pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await
            .expect("post pod status");
    }

    pub async fn node(&self, name: &str) -> Node {
        self.nodes().get(name).await.expect("node")
    }

    pub async fn pod(&self, name: &str) -> Option<Pod> {
        self.pods().get_opt(name).await.expect("get pod")
    }

    /// All events of a namespace, oldest first.
    pub async fn events(&self, ns: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let mut v = api
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items;
        v.sort_by_key(|e| e.first_timestamp.as_ref().map(|t| t.0));
        v
    }

    /// Whether an event with this reason and message exists in `ns`.
    pub async fn has_event(&self, ns: &str, reason: &str, message: &str) -> bool {
        self.events(ns)
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason) && e.message.as_deref() == Some(message))
    }

    pub fn spawn_nlc(
        &self,
        config: NodeLifecycleConfig,
    ) -> (NodeLifecycleMetrics, tokio::task::JoinHandle<()>) {
        let metrics = NodeLifecycleMetrics::default();
        let (client, clock, m) = (self.client.clone(), self.clock.clone(), metrics.clone());
        let h = tokio::spawn(async move {
            let inf = klab_runtime::Informers::new(client.clone(), clock.clone());
            let r = super::run(client, inf, clock, DetRng::seeded(11), config, m).await;
            panic!("node lifecycle controller stopped: {r:?}");
        });
        (metrics, h)
    }

    pub fn spawn_tec(&self) -> (TaintEvictionMetrics, tokio::task::JoinHandle<()>) {
        let metrics = TaintEvictionMetrics::default();
        let (client, clock, m) = (self.client.clone(), self.clock.clone(), metrics.clone());
        let h = tokio::spawn(async move {
            let inf = klab_runtime::Informers::new(client.clone(), clock.clone());
            let r = crate::taint_eviction::run(
                client,
                inf,
                clock,
                DetRng::seeded(12),
                TaintEvictionConfig::default(),
                m,
            )
            .await;
            panic!("taint eviction controller stopped: {r:?}");
        });
        (metrics, h)
    }

    pub fn spawn_pod_gc(&self, config: PodGcConfig) -> (PodGcMetrics, tokio::task::JoinHandle<()>) {
        let metrics = PodGcMetrics::default();
        let (client, clock, m) = (self.client.clone(), self.clock.clone(), metrics.clone());
        let h = tokio::spawn(async move {
            let inf = klab_runtime::Informers::new(client.clone(), clock.clone());
            let r = crate::pod_gc::run(client, inf, clock, config, m).await;
            panic!("pod gc stopped: {r:?}");
        });
        (metrics, h)
    }
}

pub(crate) fn condition<'a>(node: &'a Node, type_: &str) -> &'a NodeCondition {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .expect("condition")
}

pub(crate) fn pod_cond<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub(crate) fn find_taint<'a>(node: &'a Node, key: &str, effect: &str) -> Option<&'a Taint> {
    node.spec
        .as_ref()?
        .taints
        .as_ref()?
        .iter()
        .find(|t| t.key == key && t.effect == effect)
}

fn time_secs(c: &Cluster, t: &Option<Time>) -> f64 {
    c.secs(t.as_ref().expect("time").0)
}

/// The quirk toleration pair that suppresses admission defaults without tolerating the real
/// (empty-valued) taints: behaves like pod E of CP-01 (no tolerations at all).
fn no_effective_tolerations() -> Vec<Toleration> {
    vec![
        toleration(names::TAINT_NOT_READY, "Equal", "x", "NoExecute", Some(5)),
        toleration(names::TAINT_UNREACHABLE, "Equal", "x", "NoExecute", Some(5)),
    ]
}

#[tokio::test(start_paused = true)]
async fn cp01_kubelet_stops_heartbeating_full_timeline() {
    let c = Cluster::new().await;
    for n in ["n1", "n2", "n3"] {
        c.add_node(n, &[]).await;
    }
    let ds = vec![
        toleration(names::TAINT_NOT_READY, "Exists", "", "NoExecute", None),
        toleration(names::TAINT_UNREACHABLE, "Exists", "", "NoExecute", None),
    ];
    c.add_pod("a", "n1", None).await;
    c.add_pod("b", "n1", Some(ds)).await;
    c.add_pod(
        "c",
        "n1",
        Some(vec![toleration(
            names::TAINT_UNREACHABLE,
            "Exists",
            "",
            "NoExecute",
            Some(0),
        )]),
    )
    .await;
    c.add_pod(
        "d",
        "n1",
        Some(vec![toleration("", "Exists", "", "", None)]),
    )
    .await;
    c.add_pod("e", "n1", Some(no_effective_tolerations())).await;
    let a = c.pod("a").await.unwrap();
    assert_eq!(
        a.spec.as_ref().unwrap().tolerations.as_ref().map(Vec::len),
        Some(2),
        "admission defaults applied"
    );

    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let (metrics, _nlc) = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    let _gc = c.spawn_pod_gc(PodGcConfig::default());

    c.at(54.5).await;
    let n1 = c.node("n1").await;
    assert_eq!(
        condition(&n1, "Ready").status,
        "True",
        "pass at 50: 50 > 0 + 50 is false"
    );
    assert!(find_taint(&n1, names::TAINT_UNREACHABLE, "NoSchedule").is_none());

    c.at(55.5).await;
    let n1 = c.node("n1").await;
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let cond = condition(&n1, type_);
        assert_eq!(cond.status, "Unknown", "{type_}");
        assert_eq!(cond.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            cond.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(time_secs(&c, &cond.last_transition_time), 55.0);
        assert_eq!(
            time_secs(&c, &cond.last_heartbeat_time),
            0.0,
            "heartbeat unchanged"
        );
    }
    let ns_taint =
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoSchedule").expect("unreachable:NoSchedule");
    assert_eq!(time_secs(&c, &ns_taint.time_added), 55.0);
    assert!(
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute").is_none(),
        "NoExecute one pass later"
    );
    assert!(
        c.has_event(
            "default",
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady"
        )
        .await
    );
    for p in ["a", "b", "c", "d", "e"] {
        let pod = c.pod(p).await.unwrap();
        let ready = pod_cond(&pod, "Ready").unwrap();
        assert_eq!(ready.status, "False", "pod {p}");
        assert_eq!(time_secs(&c, &ready.last_transition_time), 55.0);
        assert_eq!(
            pod_cond(&pod, "ContainersReady").unwrap().status,
            "True",
            "ContainersReady untouched"
        );
    }
    let not_ready_events = c
        .events("default")
        .await
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("NodeNotReady")
                && e.message.as_deref() == Some("Node is not ready")
        })
        .count();
    assert_eq!(not_ready_events, 5);
    assert_eq!(condition(&c.node("n2").await, "Ready").status, "True");

    c.at(59.95).await;
    assert!(find_taint(&c.node("n1").await, names::TAINT_UNREACHABLE, "NoExecute").is_none());
    c.at(60.5).await;
    let n1 = c.node("n1").await;
    let ne = find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute")
        .expect("unreachable:NoExecute at 60+");
    assert_eq!(time_secs(&c, &ne.time_added), 60.0);
    assert_eq!(metrics.snapshot().evictions_total.get(""), Some(&1));
    for p in ["c", "e"] {
        let pod = c.pod(p).await.expect("still there: graceful deletion");
        let dt = pod_cond(&pod, "DisruptionTarget").expect("DisruptionTarget");
        assert_eq!(dt.reason.as_deref(), Some("DeletionByTaintManager"));
        assert_eq!(
            dt.message.as_deref(),
            Some("Taint manager: deleting due to NoExecute taint")
        );
        assert_eq!(
            c.secs(pod.metadata.deletion_timestamp.as_ref().unwrap().0),
            90.0,
            "pod {p}"
        );
        assert_eq!(pod.metadata.deletion_grace_period_seconds, Some(30));
        assert!(
            c.has_event(
                "default",
                "TaintManagerEviction",
                &format!("Marking for deletion Pod default/{p}")
            )
            .await
        );
    }
    for p in ["a", "b", "d"] {
        assert!(
            c.pod(p)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "pod {p}"
        );
    }

    c.at(359.5).await;
    assert!(
        c.pod("a")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    c.at(360.5).await;
    let a = c.pod("a").await.unwrap();
    assert_eq!(
        c.secs(a.metadata.deletion_timestamp.as_ref().unwrap().0),
        390.0
    );
    for p in ["b", "d"] {
        assert!(
            c.pod(p)
                .await
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "pod {p} never deleted"
        );
    }
    c.at(420.0).await;
    for p in ["a", "c", "e"] {
        assert!(
            c.pod(p).await.is_some(),
            "{p} stays Terminating: no PodGC action"
        );
    }
    assert!(
        !c.has_event(
            "default",
            "TaintManagerEviction",
            "Cancelling deletion of Pod default/a"
        )
        .await
    );
}

/// CP-01's cluster: n1–n3 Ready in zone "", pods a–e on n1 (a default, b DaemonSet-like, c with
/// `unreachable tolerationSeconds: 0`, d wildcard, e without effective tolerations).
pub(crate) async fn cp01_setup(c: &Cluster) {
    for n in ["n1", "n2", "n3"] {
        c.add_node(n, &[]).await;
    }
    let ds = vec![
        toleration(names::TAINT_NOT_READY, "Exists", "", "NoExecute", None),
        toleration(names::TAINT_UNREACHABLE, "Exists", "", "NoExecute", None),
    ];
    c.add_pod("a", "n1", None).await;
    c.add_pod("b", "n1", Some(ds)).await;
    c.add_pod(
        "c",
        "n1",
        Some(vec![toleration(
            names::TAINT_UNREACHABLE,
            "Exists",
            "",
            "NoExecute",
            Some(0),
        )]),
    )
    .await;
    c.add_pod(
        "d",
        "n1",
        Some(vec![toleration("", "Exists", "", "", None)]),
    )
    .await;
    c.add_pod("e", "n1", Some(no_effective_tolerations())).await;
}

pub(crate) async fn deletion_secs(c: &Cluster, pod: &str) -> Option<f64> {
    c.pod(pod)
        .await
        .and_then(|p| p.metadata.deletion_timestamp.map(|t| c.secs(t.0)))
}

#[tokio::test(start_paused = true)]
async fn cp02_grace_40s_shifts_everything_10s_earlier() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let cfg = NodeLifecycleConfig {
        node_monitor_grace_period: Duration::from_secs(40),
        ..Default::default()
    };
    let _nlc = c.spawn_nlc(cfg);
    let _tec = c.spawn_tec();
    c.at(44.5).await;
    assert_eq!(condition(&c.node("n1").await, "Ready").status, "True");
    c.at(45.5).await;
    assert_eq!(
        time_secs(
            &c,
            &condition(&c.node("n1").await, "Ready").last_transition_time
        ),
        45.0
    );
    c.at(50.5).await;
    let ne = find_taint(&c.node("n1").await, names::TAINT_UNREACHABLE, "NoExecute")
        .cloned()
        .expect("NoExecute at 50+");
    assert_eq!(time_secs(&c, &ne.time_added), 50.0);
    assert_eq!(deletion_secs(&c, "c").await, Some(80.0));
    assert_eq!(deletion_secs(&c, "e").await, Some(80.0));
    c.at(349.5).await;
    assert_eq!(deletion_secs(&c, "a").await, None);
    c.at(350.5).await;
    assert_eq!(deletion_secs(&c, "a").await, Some(380.0));
}

#[tokio::test(start_paused = true)]
async fn cp13_kubelet_alive_reports_not_ready() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 1000.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    c.at(12.0).await;
    c.post_status("n1", "False").await;
    c.at(12.5).await;
    let n1 = c.node("n1").await;
    assert_eq!(
        time_secs(
            &c,
            &find_taint(&n1, names::TAINT_NOT_READY, "NoSchedule")
                .expect("not-ready:NoSchedule")
                .time_added
        ),
        12.0
    );
    assert!(find_taint(&n1, names::TAINT_NOT_READY, "NoExecute").is_none());
    c.at(15.5).await;
    let n1 = c.node("n1").await;
    let ne =
        find_taint(&n1, names::TAINT_NOT_READY, "NoExecute").expect("not-ready:NoExecute at 15+");
    assert_eq!(time_secs(&c, &ne.time_added), 15.0);
    assert_eq!(
        condition(&n1, "Ready").reason.as_deref(),
        Some("KubeletNotReady"),
        "NLC wrote nothing"
    );
    assert!(
        !c.has_event(
            "default",
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady"
        )
        .await
    );
    assert!(
        !c.has_event("default", "NodeNotReady", "Node is not ready")
            .await
    );
    assert_eq!(
        pod_cond(&c.pod("a").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "True",
        "pods not marked"
    );
    assert_eq!(deletion_secs(&c, "e").await, Some(45.0), "e deleted at 15");
    assert_eq!(
        deletion_secs(&c, "c").await,
        None,
        "c: first not-ready match is the default 300 s"
    );
    c.at(314.5).await;
    assert_eq!(deletion_secs(&c, "a").await, None);
    c.at(315.5).await;
    assert_eq!(deletion_secs(&c, "a").await, Some(345.0));
    assert_eq!(deletion_secs(&c, "c").await, Some(345.0));
    assert_eq!(deletion_secs(&c, "b").await, None);
    assert_eq!(deletion_secs(&c, "d").await, None);
}

#[tokio::test(start_paused = true)]
async fn cp15_not_ready_then_unreachable_swaps_without_limiter() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 20.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(12.0).await;
    c.post_status("n1", "False").await;
    c.at(15.5).await;
    assert!(find_taint(&c.node("n1").await, names::TAINT_NOT_READY, "NoExecute").is_some());
    // Last probe at 20 (lease renewal) ⇒ Unknown written at the pass at 75.
    c.at(74.5).await;
    assert_eq!(condition(&c.node("n1").await, "Ready").status, "False");
    c.at(75.5).await;
    let n1 = c.node("n1").await;
    assert_eq!(condition(&n1, "Ready").status, "Unknown");
    assert!(
        find_taint(&n1, names::TAINT_NOT_READY, "NoExecute").is_some(),
        "swap happens one pass later"
    );
    assert!(
        !c.has_event(
            "default",
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady"
        )
        .await,
        "observed was False"
    );
    assert_eq!(
        pod_cond(&c.pod("a").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "True",
        "no MarkPodsNotReady"
    );
    c.at(80.05).await;
    let n1 = c.node("n1").await;
    assert!(find_taint(&n1, names::TAINT_NOT_READY, "NoExecute").is_none());
    let ne = find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute")
        .expect("immediate swap at the pass at 80");
    assert_eq!(time_secs(&c, &ne.time_added), 80.0);
}

#[tokio::test(start_paused = true)]
async fn cp16_recovery_before_toleration_cancels_eviction() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet_between("n1", 200.0, 1000.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let (tec_metrics, _tec) = c.spawn_tec();
    c.at(60.5).await;
    assert!(find_taint(&c.node("n1").await, names::TAINT_UNREACHABLE, "NoExecute").is_some());
    c.at(200.0).await;
    c.post_status("n1", "True").await;
    c.at(200.5).await;
    let n1 = c.node("n1").await;
    assert!(
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute").is_none(),
        "markNodeAsReachable at pass 200"
    );
    assert!(
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoSchedule").is_none(),
        "NoSchedule pass on the update"
    );
    assert!(
        c.has_event(
            "default",
            "TaintManagerEviction",
            "Cancelling deletion of Pod default/a"
        )
        .await
    );
    c.at(400.0).await;
    assert_eq!(deletion_secs(&c, "a").await, None, "a is never deleted");
    assert_eq!(
        tec_metrics.pod_deletions_total(),
        2,
        "only c and e were deleted"
    );
    // NLC never sets pods Ready again (that is the kubelet's job).
    assert_eq!(
        pod_cond(&c.pod("a").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "False"
    );
}

#[tokio::test(start_paused = true)]
async fn cp33_single_node_cluster_never_evicts() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_pod("a", "n1", None).await;
    c.add_pod("e", "n1", Some(no_effective_tolerations())).await;
    c.spawn_kubelet("n1", 0.0);
    let (metrics, _nlc) = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    c.at(55.5).await;
    let n1 = c.node("n1").await;
    assert_eq!(condition(&n1, "Ready").status, "Unknown");
    assert!(find_taint(&n1, names::TAINT_UNREACHABLE, "NoSchedule").is_some());
    assert_eq!(
        pod_cond(&c.pod("a").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "False"
    );
    c.at(400.0).await;
    let n1 = c.node("n1").await;
    assert!(
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute").is_none(),
        "master disruption mode"
    );
    assert_eq!(deletion_secs(&c, "a").await, None);
    assert_eq!(deletion_secs(&c, "e").await, None);
    assert_eq!(metrics.snapshot().evictions_total.get(""), Some(&0));
}

#[tokio::test(start_paused = true)]
async fn cp34_whole_zone_down_is_evicted_at_normal_rate() {
    let c = Cluster::new().await;
    for (n, z) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
        c.add_node(n, &[(names::LABEL_ZONE, z)]).await;
    }
    c.add_pod("pa1", "a1", None).await;
    c.add_pod("pa2", "a2", None).await;
    c.spawn_kubelet("a1", 0.0);
    c.spawn_kubelet("a2", 0.0);
    c.spawn_kubelet("b1", 1000.0);
    c.spawn_kubelet("b2", 1000.0);
    let (metrics, _nlc) = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    c.at(60.5).await;
    assert!(find_taint(&c.node("a1").await, names::TAINT_UNREACHABLE, "NoExecute").is_some());
    assert!(
        find_taint(&c.node("a2").await, names::TAINT_UNREACHABLE, "NoExecute").is_none(),
        "one node per 10 s"
    );
    c.at(69.95).await;
    assert!(find_taint(&c.node("a2").await, names::TAINT_UNREACHABLE, "NoExecute").is_none());
    c.at(70.5).await;
    let a2 = c.node("a2").await;
    assert_eq!(
        time_secs(
            &c,
            &find_taint(&a2, names::TAINT_UNREACHABLE, "NoExecute")
                .expect("a2 at 70+")
                .time_added
        ),
        70.0
    );
    assert_eq!(metrics.snapshot().evictions_total.get(":\0:a"), Some(&2));
    c.at(370.5).await;
    assert_eq!(deletion_secs(&c, "pa1").await, Some(390.0));
    assert_eq!(deletion_secs(&c, "pa2").await, Some(400.0));
    for n in ["b1", "b2"] {
        assert!(
            c.node(n)
                .await
                .spec
                .unwrap()
                .taints
                .unwrap_or_default()
                .is_empty(),
            "{n} untouched"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn cp27_controller_restart_restarts_countdowns() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let (_m, nlc) = c.spawn_nlc(NodeLifecycleConfig::default());
    let (_t, tec) = c.spawn_tec();
    c.at(100.0).await;
    assert!(find_taint(&c.node("n1").await, names::TAINT_UNREACHABLE, "NoExecute").is_some());
    c.at(200.0).await;
    nlc.abort();
    tec.abort();
    let _ = (nlc.await, tec.await);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    c.at(200.5).await;
    let n1 = c.node("n1").await;
    let ne =
        find_taint(&n1, names::TAINT_UNREACHABLE, "NoExecute").expect("re-added after the restart");
    assert_eq!(
        time_secs(&c, &ne.time_added),
        200.0,
        "removed by markNodeAsReachable, then re-added"
    );
    assert!(
        c.has_event(
            "default",
            "RegisteredNode",
            "Node n1 event: Registered Node n1 in Controller"
        )
        .await
    );
    c.at(360.5).await;
    assert_eq!(
        deletion_secs(&c, "a").await,
        None,
        "the old countdown is gone"
    );
    c.at(499.5).await;
    assert_eq!(deletion_secs(&c, "a").await, None);
    c.at(500.5).await;
    assert_eq!(deletion_secs(&c, "a").await, Some(530.0));
}

#[tokio::test(start_paused = true)]
async fn cp08_node_that_never_posts_status_gets_conditions_after_startup_grace() {
    let c = Cluster::new().await;
    let node = Node {
        metadata: ObjectMeta {
            name: Some("fresh".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    c.nodes()
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    // A healthy node beside it, so that the zone is not fully disrupted (which stops tainting).
    c.add_node("n1", &[]).await;
    c.spawn_kubelet("n1", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(64.5).await;
    let n = c.node("fresh").await;
    assert!(
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_none_or(|v| v.is_empty()),
        "startup grace 60 s: {:?}",
        n.status
    );
    c.at(65.5).await;
    let n = c.node("fresh").await;
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let cond = condition(&n, type_);
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_deref()),
            ("Unknown", Some("NodeStatusNeverUpdated"))
        );
        assert_eq!(time_secs(&c, &cond.last_transition_time), 65.0);
        assert_eq!(
            time_secs(&c, &cond.last_heartbeat_time),
            0.0,
            "creationTimestamp"
        );
    }
    assert!(
        !c.has_event(
            "default",
            "NodeNotReady",
            "Node fresh status is now: NodeNotReady"
        )
        .await
    );
    // The Unknown Ready condition gets the unreachable NoSchedule taint, and the same monitor
    // pass queues the NoExecute taint (processTaintBaseEviction sees the observed Unknown).
    assert!(find_taint(&n, names::TAINT_UNREACHABLE, "NoSchedule").is_some());
    c.at(65.5).await;
    let n = c.node("fresh").await;
    let t = find_taint(&n, names::TAINT_UNREACHABLE, "NoExecute")
        .expect("NoExecute in the pass that marked the node Unknown");
    assert_eq!(time_secs(&c, &t.time_added), 65.0);
}

#[tokio::test(start_paused = true)]
async fn node_deletion_emits_removing_node() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_node("n2", &[]).await;
    c.spawn_kubelet("n2", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(1.0).await;
    assert!(
        c.has_event(
            "default",
            "RegisteredNode",
            "Node n1 event: Registered Node n1 in Controller"
        )
        .await
    );
    c.at(5.0).await;
    c.nodes().delete("n1", &Default::default()).await.unwrap();
    c.at(5.5).await;
    let ev = c.events("default").await;
    let removing = ev
        .iter()
        .find(|e| e.reason.as_deref() == Some("RemovingNode"))
        .expect("RemovingNode at pass 5");
    assert_eq!(
        removing.message.as_deref(),
        Some("Node n1 event: Removing Node n1 from Controller")
    );
    assert_eq!(
        removing.involved_object.namespace, None,
        "cluster-scoped object"
    );
    assert_eq!(
        removing
            .source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("node-controller")
    );
    assert_eq!(c.secs(removing.first_timestamp.as_ref().unwrap().0), 5.0);
}

async fn count_no_execute(c: &Cluster) -> usize {
    let nodes = c.nodes().list(&ListParams::default()).await.unwrap().items;
    nodes
        .iter()
        .filter(|n| find_taint(n, names::TAINT_UNREACHABLE, "NoExecute").is_some())
        .count()
}

#[tokio::test(start_paused = true)]
async fn cp31_large_zone_partial_disruption_taints_one_node_per_100s() {
    let c = Cluster::new().await;
    for i in 0..51 {
        let name = format!("n{i:02}");
        c.add_node(&name, &[]).await;
        c.spawn_kubelet(&name, if i < 30 { 0.0 } else { 1000.0 });
    }
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(55.5).await;
    assert_eq!(count_no_execute(&c).await, 0);
    c.at(60.5).await;
    assert_eq!(
        count_no_execute(&c).await,
        1,
        "the bucket swapped to 0.01/s at 55 starts full"
    );
    // The float32 rate (0.01f32 < 0.01) puts the next token 2.2 µs after 160 s: tick at 160.1.
    c.at(160.05).await;
    assert_eq!(count_no_execute(&c).await, 1);
    c.at(160.5).await;
    assert_eq!(count_no_execute(&c).await, 2);
    c.at(261.0).await;
    assert_eq!(count_no_execute(&c).await, 3);
}

#[tokio::test(start_paused = true)]
async fn cp31_variant_50_nodes_partial_disruption_stops_tainting() {
    let c = Cluster::new().await;
    for i in 0..50 {
        let name = format!("n{i:02}");
        c.add_node(&name, &[]).await;
        c.spawn_kubelet(&name, if i < 30 { 0.0 } else { 1000.0 });
    }
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(200.0).await;
    assert_eq!(condition(&c.node("n00").await, "Ready").status, "Unknown");
    assert_eq!(
        count_no_execute(&c).await,
        0,
        "small zone in partial disruption: rate 0"
    );
}

#[tokio::test(start_paused = true)]
async fn pod_bound_to_an_unhealthy_node_is_marked_not_ready() {
    // §1.9: a pod newly assigned to a node whose saved Ready is not True gets Ready=False.
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_node("n2", &[]).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(100.0).await;
    // A Ready pod (status posted earlier) is bound to the dead node now.
    c.add_pod("late", "", None).await;
    let binding = k8s_openapi::api::core::v1::Binding {
        metadata: ObjectMeta {
            name: Some("late".into()),
            ..Default::default()
        },
        target: k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Node".into()),
            name: Some("n1".into()),
            ..Default::default()
        },
    };
    let r: Result<serde_json::Value, _> = c
        .pods()
        .create_subresource("binding", "late", &PostParams::default(), &binding)
        .await;
    r.expect("bind");
    c.at(100.5).await;
    let p = c.pod("late").await.unwrap();
    assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    assert_eq!(pod_cond(&p, "Ready").unwrap().status, "False");
    assert_eq!(
        time_secs(&c, &pod_cond(&p, "Ready").unwrap().last_transition_time),
        100.0
    );
    c.add_pod("fine", "n2", None).await;
    c.at(101.0).await;
    assert_eq!(
        pod_cond(&c.pod("fine").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "True"
    );
}

/// Runs CP-01 to t = 70 s and returns a trace of every event and of n1's taints.
async fn cp01_trace() -> Vec<String> {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    let kubelets = [
        c.spawn_kubelet("n1", 0.0),
        c.spawn_kubelet("n2", 1000.0),
        c.spawn_kubelet("n3", 1000.0),
    ];
    let (_m, nlc) = c.spawn_nlc(NodeLifecycleConfig::default());
    let (_t, tec) = c.spawn_tec();
    c.at(70.0).await;
    let mut trace: Vec<String> = c
        .events("default")
        .await
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {:?} {:?}",
                e.metadata.name.as_deref().unwrap_or_default(),
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default(),
                e.count,
                e.last_timestamp.as_ref().map(|t| t.0)
            )
        })
        .collect();
    trace.sort();
    trace.push(format!(
        "{:?}",
        c.node("n1").await.spec.and_then(|s| s.taints)
    ));
    for h in kubelets.into_iter().chain([nlc, tec]) {
        h.abort();
    }
    trace
}

#[tokio::test(start_paused = true)]
async fn same_run_twice_gives_the_same_trace() {
    let a = cp01_trace().await;
    let b = cp01_trace().await;
    assert!(a.len() > 10, "{a:?}");
    assert_eq!(a, b);
}

#[tokio::test(start_paused = true)]
async fn cp29_excluded_node_does_not_count_for_the_zone() {
    // Row 9: the only counted node of the zone is dead ⇒ all zones Full ⇒ master disruption mode,
    // although the excluded control-plane node is healthy: no NoExecute taint.
    let c = Cluster::new().await;
    c.add_node("node0", &[]).await;
    c.add_node("node-master", &[(names::LABEL_EXCLUDE_DISRUPTION, "")])
        .await;
    c.spawn_kubelet("node0", 0.0);
    c.spawn_kubelet("node-master", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(120.0).await;
    let n0 = c.node("node0").await;
    assert_eq!(condition(&n0, "Ready").status, "Unknown");
    assert!(find_taint(&n0, names::TAINT_UNREACHABLE, "NoExecute").is_none());
}

#[tokio::test(start_paused = true)]
async fn cp64_node_deleted_and_reregistered() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_node("n2", &[]).await;
    c.add_pod("p", "n1", None).await;
    c.spawn_kubelet("n1", 1000.0);
    c.spawn_kubelet("n2", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let _gc = c.spawn_pod_gc(PodGcConfig::default());
    c.at(3.0).await;
    c.nodes().delete("n1", &Default::default()).await.unwrap();
    c.at(30.0).await;
    c.add_node("n1", &[]).await;
    c.at(100.0).await;
    let ev = c.events("default").await;
    let at = |reason: &str| -> Vec<f64> {
        ev.iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.involved_object.name.as_deref() == Some("n1")
            })
            .map(|e| c.secs(e.last_timestamp.as_ref().unwrap().0))
            .collect()
    };
    assert_eq!(at("RemovingNode"), [5.0]);
    // Registered at the first pass (0) and again at the pass at 30 after re-registration (a new
    // UID, so client-go's correlator does not aggregate the two).
    assert_eq!(at("RegisteredNode"), [0.0, 30.0]);
    assert!(
        c.pod("p").await.is_some(),
        "PodGC found the node again before its check at 60"
    );
}

#[tokio::test(start_paused = true)]
async fn recovery_after_the_toleration_leaves_evicted_pods_terminating() {
    let c = Cluster::new().await;
    cp01_setup(&c).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet_between("n1", 400.0, 1000.0);
    c.spawn_kubelet("n2", 1000.0);
    c.spawn_kubelet("n3", 1000.0);
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    let _tec = c.spawn_tec();
    c.at(400.0).await;
    c.post_status("n1", "True").await;
    c.at(405.5).await;
    let n1 = c.node("n1").await;
    assert!(
        n1.spec.unwrap().taints.unwrap_or_default().is_empty(),
        "all NLC taints gone after recovery"
    );
    assert_eq!(
        deletion_secs(&c, "a").await,
        Some(390.0),
        "already evicted: stays Terminating for the kubelet"
    );
    assert!(
        !c.has_event(
            "default",
            "TaintManagerEviction",
            "Cancelling deletion of Pod default/a"
        )
        .await
    );
    assert_eq!(deletion_secs(&c, "b").await, None);
}

#[tokio::test(start_paused = true)]
async fn beta_os_arch_labels_are_reconciled() {
    let c = Cluster::new().await;
    c.add_node(
        "n1",
        &[
            (names::LABEL_OS, "linux"),
            (names::LABEL_ARCH, "amd64"),
            (names::LABEL_ARCH_BETA, "arm64"),
        ],
    )
    .await;
    let _nlc = c.spawn_nlc(NodeLifecycleConfig::default());
    c.at(0.5).await;
    let labels = c.node("n1").await.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(names::LABEL_OS_BETA).map(String::as_str),
        Some("linux")
    );
    assert_eq!(
        labels.get(names::LABEL_ARCH_BETA).map(String::as_str),
        Some("amd64")
    );
}

/// A client whose pod-status PATCHes fail with a 500 while `fail` is set (fault injection at the
/// transport seam, as klab's fault plans do).
fn failing_pod_status_client(
    c: &Cluster,
    fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> kube::Client {
    use axum::response::IntoResponse;
    let layer = axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let fail = fail.clone();
            async move {
                let path = req.uri().path().to_string();
                if fail.load(std::sync::atomic::Ordering::SeqCst)
                    && req.method() == axum::http::Method::PATCH
                    && path.contains("/pods/")
                    && path.ends_with("/status")
                {
                    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "injected failure", "reason": "InternalError", "code": 500});
                    return (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        axum::Json(body),
                    )
                        .into_response();
                }
                next.run(req).await
            }
        },
    );
    let router = axum::Router::new().fallback_service(c._api.router_as(Identity::admin()));
    kube::Client::new(router.layer(layer), "default")
}

#[tokio::test(start_paused = true)]
async fn cp12_mark_pods_not_ready_is_retried_until_it_succeeds() {
    let c = Cluster::new().await;
    c.add_node("n1", &[]).await;
    c.add_node("n2", &[]).await;
    c.add_pod("p", "n1", None).await;
    c.spawn_kubelet("n1", 0.0);
    c.spawn_kubelet("n2", 1000.0);
    let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = failing_pod_status_client(&c, fail.clone());
    let clock = c.clock.clone();
    let _nlc = tokio::spawn(async move {
        let inf = klab_runtime::Informers::new(client.clone(), clock.clone());
        let r = super::run(
            client,
            inf,
            clock,
            DetRng::seeded(11),
            NodeLifecycleConfig::default(),
            NodeLifecycleMetrics::default(),
        )
        .await;
        panic!("stopped: {r:?}");
    });
    c.at(54.0).await;
    fail.store(true, std::sync::atomic::Ordering::SeqCst);
    c.at(55.5).await;
    assert_eq!(condition(&c.node("n1").await, "Ready").status, "Unknown");
    assert_eq!(
        pod_cond(&c.pod("p").await.unwrap(), "Ready")
            .unwrap()
            .status,
        "True",
        "the update failed"
    );
    fail.store(false, std::sync::atomic::Ordering::SeqCst);
    // Pass 60: observed is Unknown now, but the node is in the retry set.
    c.at(60.5).await;
    let ready = pod_cond(&c.pod("p").await.unwrap(), "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready.status, "False");
    assert_eq!(time_secs(&c, &ready.last_transition_time), 60.0);
    let node_events = c
        .events("default")
        .await
        .iter()
        .filter(|e| e.message.as_deref() == Some("Node n1 status is now: NodeNotReady"))
        .map(|e| e.count)
        .collect::<Vec<_>>();
    assert_eq!(node_events, [Some(1)], "NodeNotReady only at the flip");
}
