//! Virtual-time tests of the whole kubelet against the in-process API server: heartbeats, pod
//! start, graceful deletion, kubelet restart and reboot, with exact virtual times.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Event, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use klab_api::{Clock, DetRng};
use klab_apiserver::identity::Identity;
use klab_apiserver::testing::memory_server_with;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tower::ServiceExt;

use crate::config::{KubeletConfig, NodeSpecConfig, RuntimeModel};
use crate::fault::NodeFault;
use crate::node::SimNode;

/// Whole-second latencies and no jitter, so every assertion is an exact instant.
fn model() -> RuntimeModel {
    RuntimeModel {
        sandbox_start: Duration::from_secs(1),
        image_pull: Duration::from_secs(2),
        container_start: Duration::from_secs(1),
        heartbeat_jitter: 0.0,
        ..RuntimeModel::default()
    }
}

struct Cluster {
    clock: Clock,
    admin: Client,
    node: SimNode,
    t0: tokio::time::Instant,
    /// Every request the kubelet sent: (virtual time, "METHOD URI").
    requests: Arc<Mutex<Vec<(Duration, String)>>>,
}

async fn cluster() -> Cluster {
    cluster_with(model()).await
}

async fn cluster_with(model: RuntimeModel) -> Cluster {
    cluster_cfg(model, KubeletConfig::default()).await
}

async fn cluster_cfg(model: RuntimeModel, cfg: KubeletConfig) -> Cluster {
    let clock = Clock::virtual_default();
    let api = memory_server_with(clock.clone(), DetRng::seeded(1), Default::default()).await;
    let admin = Client::new(api.router(), "default");
    let router = api.router_as(Identity::node("n1"));
    let requests: Arc<Mutex<Vec<(Duration, String)>>> = Default::default();
    let (log, log_clock) = (requests.clone(), clock.clone());
    let node = SimNode::new(
        "n1",
        NodeSpecConfig::default(),
        cfg,
        model,
        clock.clone(),
        DetRng::seeded(7),
        move |_| {
            let (log, log_clock) = (log.clone(), log_clock.clone());
            router
                .clone()
                .map_request(move |r: http::Request<kube::client::Body>| {
                    let line = format!("{} {}", r.method(), r.uri());
                    log.lock().unwrap().push((log_clock.elapsed(), line));
                    r
                })
        },
    );
    Cluster {
        clock,
        admin,
        node,
        t0: tokio::time::Instant::now(),
        requests,
    }
}

impl Cluster {
    /// Sleeps until `secs` (fractional) after the start of the test.
    async fn at(&self, secs: f64) {
        tokio::time::sleep_until(self.t0 + Duration::from_secs_f64(secs)).await;
        assert_eq!(
            self.clock.elapsed(),
            Duration::from_secs_f64(secs),
            "virtual time advanced to {secs}s"
        );
    }
    /// The times of the kubelet's requests whose "METHOD URI" starts with `prefix`.
    fn requests_at(&self, prefix: &str) -> Vec<Duration> {
        let log = self.requests.lock().unwrap();
        log.iter()
            .filter(|(_, r)| r.starts_with(prefix))
            .map(|(t, _)| *t)
            .collect()
    }
    /// Marks the node's Ready condition Unknown, as the node lifecycle controller does.
    async fn mark_ready_unknown(&self) {
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }]}});
        Api::<Node>::all(self.admin.clone())
            .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
    }
    /// Starts the node, applies `fault` at 35 s, marks Ready Unknown at 60 s (unseen by the
    /// kubelet, as the controller's mark of a node it stopped hearing from) and applies `undo`
    /// at `undo_at` s.
    async fn marked_unknown_during(&mut self, fault: NodeFault, undo: NodeFault, undo_at: f64) {
        self.node.start();
        self.at(35.0).await;
        self.node.apply(fault);
        self.at(60.0).await;
        self.mark_ready_unknown().await;
        self.at(undo_at).await;
        self.node.apply(undo);
    }
    fn ts(&self, secs: i64) -> Timestamp {
        self.clock.epoch() + SignedDuration::from_secs(secs)
    }
    async fn lease(&self) -> Option<Lease> {
        Api::<Lease>::namespaced(self.admin.clone(), "kube-node-lease")
            .get_opt("n1")
            .await
            .unwrap()
    }
    async fn renew_time(&self) -> Option<Timestamp> {
        self.lease()
            .await
            .and_then(|l| l.spec?.renew_time)
            .map(|t| t.0)
    }
    async fn node_obj(&self) -> Node {
        Api::<Node>::all(self.admin.clone())
            .get("n1")
            .await
            .unwrap()
    }
    async fn ready_heartbeat(&self) -> Timestamp {
        let n = self.node_obj().await;
        n.status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_heartbeat_time
            .unwrap()
            .0
    }
    async fn pod(&self, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.admin.clone(), "default")
            .get_opt(name)
            .await
            .unwrap()
    }
    async fn create_pod(&self, name: &str, policy: &str, command: &[&str]) {
        let p = Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                restart_policy: Some(policy.into()),
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("busybox:1.36".into()),
                    command: if command.is_empty() {
                        None
                    } else {
                        Some(command.iter().map(|s| s.to_string()).collect())
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        Api::<Pod>::namespaced(self.admin.clone(), "default")
            .create(&PostParams::default(), &p)
            .await
            .unwrap();
    }
    async fn events(&self, reason: &str) -> Vec<Event> {
        let mut v: Vec<Event> = Api::<Event>::namespaced(self.admin.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect();
        v.sort_by_key(|e| e.metadata.name.clone());
        v
    }
    /// The Ready condition's (status, message).
    async fn ready(&self) -> (String, Option<String>) {
        let c = self
            .node_obj()
            .await
            .status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        (c.status, c.message)
    }
    async fn set_priority_class(&self, name: &str, class: &str) {
        let api = Api::<Pod>::namespaced(self.admin.clone(), "default");
        let mut p = api.get(name).await.unwrap();
        api.delete(name, &DeleteParams::default()).await.unwrap();
        p.metadata = ObjectMeta {
            name: p.metadata.name,
            namespace: p.metadata.namespace,
            ..Default::default()
        };
        let spec = p.spec.as_mut().unwrap();
        spec.priority_class_name = Some(class.into());
        spec.priority = None;
        p.status = None;
        api.create(&PostParams::default(), &p).await.unwrap();
    }
    async fn phase(&self, name: &str) -> Option<String> {
        self.pod(name).await.and_then(|p| p.status?.phase)
    }
    async fn container(&self, name: &str) -> k8s_openapi::api::core::v1::ContainerStatus {
        self.pod(name)
            .await
            .unwrap()
            .status
            .unwrap()
            .container_statuses
            .unwrap()
            .remove(0)
    }
}

#[tokio::test(start_paused = true)]
async fn registers_and_renews_the_lease_every_ten_seconds() {
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    let n = c.node_obj().await;
    assert_eq!(n.metadata.labels.unwrap()["kubernetes.io/hostname"], "n1");
    let conds: Vec<String> = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(
        conds,
        vec!["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    // The first lease sync (t=0) ran before registration (t=0.1): no owner, no lease.
    assert!(c.lease().await.is_none());
    c.at(15.0).await;
    let lease = c.lease().await.unwrap();
    assert_eq!(lease.metadata.owner_references.unwrap()[0].kind, "Node");
    assert_eq!(
        lease.spec.as_ref().unwrap().lease_duration_seconds,
        Some(40)
    );
    assert_eq!(c.renew_time().await, Some(c.ts(10)));
    for k in 2..6 {
        c.at(k as f64 * 10.0 + 5.0).await;
        assert_eq!(c.renew_time().await, Some(c.ts(k * 10)), "renewal {k}");
    }
    let starting = c.events("Starting").await;
    assert_eq!(starting.len(), 1);
    assert_eq!(starting[0].message.as_deref(), Some("Starting kubelet."));
    assert_eq!(starting[0].involved_object.uid.as_deref(), Some("n1"));
    assert_eq!(c.events("NodeHasSufficientMemory").await.len(), 1);
    assert!(
        c.events("NodeReady").await.is_empty(),
        "a new Ready condition records no event"
    );
}

#[tokio::test(start_paused = true)]
async fn status_posted_on_change_at_once_and_unchanged_every_five_minutes() {
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    // Registered and reported at t=0.1 (Time has whole seconds).
    assert_eq!(c.ready_heartbeat().await, c.ts(0));
    c.at(299.0).await;
    assert_eq!(
        c.ready_heartbeat().await,
        c.ts(0),
        "unchanged status is not re-posted before 5m"
    );
    c.at(301.0).await;
    assert_eq!(c.ready_heartbeat().await, c.ts(300), "re-posted at 300.1 s");
    // A controller marks the node Unknown at t=305: the kubelet's next computation (310.1 s)
    // differs and is posted at once, with a NodeReady event.
    let unknown = serde_json::json!({"status": {"conditions": [
        {"type": "MemoryPressure", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": "2026-01-01T00:05:00Z", "lastTransitionTime": "2026-01-01T00:05:05Z"},
        {"type": "DiskPressure", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": "2026-01-01T00:05:00Z", "lastTransitionTime": "2026-01-01T00:05:05Z"},
        {"type": "PIDPressure", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": "2026-01-01T00:05:00Z", "lastTransitionTime": "2026-01-01T00:05:05Z"},
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": "2026-01-01T00:05:00Z", "lastTransitionTime": "2026-01-01T00:05:05Z"}
    ]}});
    c.at(305.0).await;
    Api::<Node>::all(c.admin.clone())
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&unknown))
        .await
        .unwrap();
    c.at(310.0).await;
    assert_eq!(c.ready_heartbeat().await, c.ts(300));
    c.at(311.0).await;
    let n = c.node_obj().await;
    let ready = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.last_heartbeat_time.unwrap().0),
        ("True", c.ts(310))
    );
    assert_eq!(ready.last_transition_time.unwrap().0, c.ts(310));
    let ev = c.events("NodeReady").await;
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].message.as_deref(),
        Some("Node n1 status is now: NodeReady")
    );
    // The Unknown→False transition repeats the registration-time event: one object, count 2
    // (`kubectl describe`: "(x2 over 5m10s)").
    let mem = c.events("NodeHasSufficientMemory").await;
    assert_eq!(mem.len(), 1);
    assert_eq!(mem[0].count, Some(2));
    assert_eq!(mem[0].first_timestamp.as_ref().unwrap().0, c.ts(0));
    assert_eq!(mem[0].last_timestamp.as_ref().unwrap().0, c.ts(310));
}

#[tokio::test(start_paused = true)]
async fn pod_runs_after_modelled_delays() {
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("web", "Always", &[]).await;
    c.at(13.5).await;
    assert_eq!(c.phase("web").await.as_deref(), Some("Pending"));
    let w = c.container("web").await.state.unwrap().waiting.unwrap();
    assert_eq!(w.reason.as_deref(), Some("ContainerCreating"));
    // sandbox 1 s + pull 2 s + start 1 s.
    c.at(14.0).await;
    assert_eq!(c.phase("web").await.as_deref(), Some("Running"));
    let cs = c.container("web").await;
    assert_eq!(
        cs.state.unwrap().running.unwrap().started_at.unwrap().0,
        c.ts(14)
    );
    assert!(cs.ready);
    let st = c.pod("web").await.unwrap().status.unwrap();
    assert_eq!(st.host_ip.as_deref(), Some("10.0.0.5"));
    assert!(st.conditions.unwrap().iter().all(|c| c.status == "True"));
    let started = c.events("Started").await;
    assert_eq!(started.len(), 1);
    assert_eq!(
        started[0].involved_object.field_path.as_deref(),
        Some("spec.containers{app}")
    );
}

#[tokio::test(start_paused = true)]
async fn graceful_deletion_ends_at_grace_or_at_sigterm_exit() {
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("ignores", "Always", &["sleep", "3600"]).await;
    c.create_pod("server", "Always", &[]).await;
    c.create_pod("tiny", "Always", &["sleep", "3600"]).await;
    c.at(20.0).await;
    let pods: Api<Pod> = Api::namespaced(c.admin.clone(), "default");
    let grace = |g: u32| DeleteParams {
        grace_period_seconds: Some(g),
        ..Default::default()
    };
    pods.delete("ignores", &grace(30)).await.unwrap();
    pods.delete("server", &grace(30)).await.unwrap();
    pods.delete("tiny", &grace(1)).await.unwrap();
    c.at(20.5).await;
    assert!(
        c.pod("server").await.is_none(),
        "exits on SIGTERM: gone at once"
    );
    assert!(c.pod("ignores").await.is_some());
    c.at(21.9).await;
    assert!(c.pod("tiny").await.is_some());
    c.at(22.1).await;
    assert!(
        c.pod("tiny").await.is_none(),
        "grace 1 → SIGKILL after the 2 s floor"
    );
    c.at(49.9).await;
    let p = c.pod("ignores").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    c.at(50.1).await;
    assert!(
        c.pod("ignores").await.is_none(),
        "SIGKILL at the end of the 30 s grace"
    );
    let killing = c.events("Killing").await;
    assert_eq!(killing.len(), 3);
    assert_eq!(
        killing[0].message.as_deref(),
        Some("Stopping container app")
    );
}

#[tokio::test(start_paused = true)]
async fn kubelet_stopped_for_two_minutes_restarts_nothing() {
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("web", "Always", &[]).await;
    c.at(20.0).await;
    let before = c.container("web").await;
    assert_eq!(before.restart_count, 0);
    c.node.apply(NodeFault::StopKubelet);
    c.at(60.0).await;
    assert_eq!(
        c.renew_time().await,
        Some(c.ts(20)),
        "no renewal while stopped"
    );
    assert_eq!(
        c.node.state().running_containers,
        vec!["default/web/app".to_string()]
    );
    c.at(140.0).await;
    c.node.apply(NodeFault::StartKubelet);
    c.at(145.0).await;
    assert_eq!(c.renew_time().await, Some(c.ts(140)));
    let after = c.container("web").await;
    assert_eq!(after.restart_count, 0);
    assert_eq!(after.state, before.state, "same container instance");
    assert_eq!(c.events("Started").await.len(), 1);
    assert_eq!(c.events("Starting").await.len(), 2);
    assert!(c.events("Rebooted").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn reboot_reports_new_boot_id_restarts_always_pods_and_fails_never_pods() {
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("web", "Always", &[]).await;
    c.create_pod("job", "Never", &["sleep", "3600"]).await;
    c.at(30.0).await;
    let old_boot = c
        .node_obj()
        .await
        .status
        .unwrap()
        .node_info
        .unwrap()
        .boot_id;
    c.node.apply(NodeFault::Reboot);
    let new_boot = c.node.state().boot_id;
    assert_ne!(old_boot, new_boot);
    c.at(40.0).await;
    let n = c.node_obj().await;
    assert_eq!(n.status.unwrap().node_info.unwrap().boot_id, new_boot);
    let rebooted = c.events("Rebooted").await;
    assert_eq!(rebooted.len(), 1);
    assert_eq!(rebooted[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        rebooted[0].message.clone().unwrap(),
        format!("Node n1 has been rebooted, boot id: {new_boot}")
    );
    let web = c.container("web").await;
    assert_eq!(web.restart_count, 1);
    let last = web.last_state.unwrap().terminated.unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (255, Some("Unknown"))
    );
    assert_eq!(c.phase("web").await.as_deref(), Some("Running"));
    assert_eq!(c.phase("job").await.as_deref(), Some("Failed"));
    assert_eq!(c.events("SandboxChanged").await.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn partition_freezes_the_lease_and_backoff_resumes_it_after_heal() {
    // N-13: renewals at 10, 20, 30 s; partitioned at 35 s; the sync at 40 s fails five PUTs, then
    // backoffEnsureLease retries GET after 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7, 7 … s (40.2 … 94.6,
    // 101.6 s). Healed at 95 s, the 101.6 s GET succeeds and the lease is renewed then.
    let mut c = cluster().await;
    c.node.start();
    c.at(35.0).await;
    assert_eq!(c.renew_time().await, Some(c.ts(30)));
    c.node.apply(NodeFault::Partition);
    c.at(95.0).await;
    assert_eq!(
        c.renew_time().await,
        Some(c.ts(30)),
        "renewTime frozen during the partition"
    );
    c.node.apply(NodeFault::Heal);
    c.at(101.5).await;
    assert_eq!(c.renew_time().await, Some(c.ts(30)));
    c.at(102.0).await;
    assert_eq!(
        c.renew_time().await,
        Some(c.ts(101) + SignedDuration::from_millis(600))
    );
    c.at(112.0).await;
    assert_eq!(
        c.renew_time().await,
        Some(c.ts(111) + SignedDuration::from_millis(600)),
        "normal cadence again"
    );
}

#[tokio::test(start_paused = true)]
async fn freeze_stops_heartbeats_and_containers_until_thaw() {
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("job", "Never", &["sleep", "100"]).await;
    c.at(35.0).await;
    c.node.apply(NodeFault::Freeze);
    assert!(c.node.state().frozen);
    c.at(95.0).await;
    assert_eq!(c.renew_time().await, Some(c.ts(30)));
    c.node.apply(NodeFault::Thaw);
    c.at(96.0).await;
    assert_eq!(
        c.renew_time().await,
        Some(c.ts(95)),
        "the lease loop resumes at thaw"
    );
    // Started at 14 s, `sleep 100` would exit at 114 s; the 60 s freeze moves that to 174 s.
    c.at(173.0).await;
    assert_eq!(c.phase("job").await.as_deref(), Some("Running"));
    c.at(175.0).await;
    assert_eq!(c.phase("job").await.as_deref(), Some("Succeeded"));
    let t = c.container("job").await.state.unwrap().terminated.unwrap();
    assert_eq!((t.exit_code, t.finished_at.unwrap().0), (0, c.ts(174)));
}

/// One scripted run with upstream's jitter; returns a trace of everything observable.
async fn scripted_run() -> (Vec<String>, Vec<Timestamp>) {
    let mut c = cluster_with(RuntimeModel::default()).await;
    c.node.start();
    let mut renewals = Vec::new();
    for s in 1..=120 {
        tokio::time::sleep_until(c.t0 + Duration::from_secs(s)).await;
        match s {
            5 => {
                c.create_pod("web", "Always", &["sh", "-c", "sleep 7; exit 1"])
                    .await
            }
            60 => c.node.apply(NodeFault::StopKubelet),
            80 => c.node.apply(NodeFault::StartKubelet),
            100 => c.node.apply(NodeFault::Reboot),
            _ => {}
        }
        if let Some(t) = c.renew_time().await
            && renewals.last() != Some(&t)
        {
            renewals.push(t);
        }
    }
    let mut trace: Vec<String> = Api::<Event>::namespaced(c.admin.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            format!(
                "{} {} {:?} {:?}",
                e.metadata.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.count,
                e.message
            )
        })
        .collect();
    trace.sort();
    trace.push(serde_json::to_string(&c.pod("web").await.unwrap().status).unwrap());
    (trace, renewals)
}

#[test]
fn runs_are_deterministic_and_jitter_stays_within_four_percent() {
    let run = || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(scripted_run())
    };
    let (a, renew_a) = run();
    let (b, renew_b) = run();
    assert_eq!(a, b);
    assert_eq!(renew_a, renew_b);
    assert!(
        a.iter().any(|l| l.contains("BackOff")),
        "the crash loop happened: {a:?}"
    );
    assert!(a.iter().any(|l| l.contains("Rebooted")));
    // Renewals before the stop (t < 60 s) are 10.0–10.4 s apart (N-08).
    let before: Vec<&Timestamp> = renew_a
        .iter()
        .filter(|t| t.duration_since(renew_a[0]).as_secs() < 40)
        .collect();
    assert!(before.len() >= 4);
    for w in before.windows(2) {
        let d = w[1].duration_since(*w[0]);
        assert!(
            d >= SignedDuration::from_secs(10) && d < SignedDuration::from_millis(10_400),
            "{d:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn deletion_while_kubelet_down_is_finished_with_full_grace_after_start() {
    // N-44: the API object stays Terminating while the kubelet is down; on start the kubelet
    // kills with the full 30 s budget (sleep ignores SIGTERM), then DELETEs.
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("web", "Always", &["sleep", "3600"]).await;
    c.at(20.0).await;
    c.node.apply(NodeFault::StopKubelet);
    c.at(30.0).await;
    let grace = DeleteParams {
        grace_period_seconds: Some(30),
        ..Default::default()
    };
    Api::<Pod>::namespaced(c.admin.clone(), "default")
        .delete("web", &grace)
        .await
        .unwrap();
    c.at(300.0).await;
    assert!(
        c.pod("web").await.is_some(),
        "Terminating while the kubelet is down"
    );
    assert_eq!(
        c.node.state().running_containers,
        vec!["default/web/app".to_string()]
    );
    c.node.apply(NodeFault::StartKubelet);
    c.at(329.9).await;
    assert!(c.pod("web").await.is_some());
    c.at(330.1).await;
    assert!(c.pod("web").await.is_none());
    assert!(c.node.state().running_containers.is_empty());
}

#[tokio::test(start_paused = true)]
async fn status_computations_read_the_node_watch_and_see_a_controller_s_change() {
    let mut c = cluster().await;
    c.node.start();
    c.at(62.0).await;
    assert_eq!(
        c.requests_at("GET /api/v1/nodes?&fieldSelector=metadata.name%3Dn1"),
        vec![Duration::ZERO],
        "one list of the node"
    );
    assert_eq!(
        c.requests_at(
            "GET /api/v1/nodes?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Dn1&"
        ),
        vec![Duration::ZERO],
        "and one watch"
    );
    // The Node is read at 0.1 s (the computation right after registration, before the watch
    // saw the Node) and at 10 s (the Lease's owner reference, as upstream's hook GETs); the
    // computations at 10.1 … 60.1 s read the watch's copy.
    let node_gets = |c: &Cluster| c.requests_at("GET /api/v1/nodes/n1");
    let at = |ms: u64| Duration::from_millis(ms);
    assert_eq!(node_gets(&c), vec![at(0), at(100), at(10_000)]);
    // The controller's change reaches the watch's copy, so the next computation (70.1 s) sees
    // Ready Unknown and reports Ready True.
    c.mark_ready_unknown().await;
    c.at(70.0).await;
    assert_eq!(c.ready().await.0, "Unknown");
    c.at(70.2).await;
    assert_eq!(c.ready().await.0, "True");
    assert_eq!(node_gets(&c), vec![at(0), at(100), at(10_000)]);
}

#[tokio::test(start_paused = true)]
async fn after_a_partition_the_node_is_read_from_the_api_server_until_the_watch_has_relisted() {
    // Partitioned, the kubelet misses the controller's Unknown, and its watch's copy still shows
    // Ready True. Its watch retries every second (36, 37 … s); healed at 100.05 s, it relists at
    // 101 s. The computation at 100.1 s finds the watch down, GETs the Node and reports at once.
    let mut c = cluster().await;
    c.marked_unknown_during(NodeFault::Partition, NodeFault::Heal, 100.05)
        .await;
    let late_node_gets = |c: &Cluster| {
        let mut v = c.requests_at("GET /api/v1/nodes/n1");
        v.retain(|t| *t > Duration::from_secs(10));
        v
    };
    c.at(100.2).await;
    assert_eq!(
        c.ready().await.0,
        "True",
        "reported at the first computation"
    );
    assert_eq!(late_node_gets(&c), vec![Duration::from_millis(100_100)]);
    c.at(130.0).await;
    assert_eq!(
        c.requests_at("GET /api/v1/nodes?&fieldSelector=metadata.name%3Dn1"),
        vec![Duration::ZERO, Duration::from_secs(101)],
        "listed at the start and after the heal"
    );
    assert_eq!(
        late_node_gets(&c),
        vec![Duration::from_millis(100_100)],
        "the computations at 110.1 … read the watch again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_thawed_kubelet_relists_its_node_before_its_first_computation() {
    // Frozen, the kubelet misses the controller's Unknown. At the thaw its watch's relist (held
    // since the freeze broke the watch) is answered before the status computation runs, which
    // therefore sees Unknown and reports at once.
    let mut c = cluster().await;
    c.marked_unknown_during(NodeFault::Freeze, NodeFault::Thaw, 95.0)
        .await;
    c.at(95.1).await;
    assert_eq!(c.ready().await.0, "True", "reported at the thaw");
    assert_eq!(
        c.requests_at("GET /api/v1/nodes?&fieldSelector=metadata.name%3Dn1"),
        vec![Duration::ZERO, Duration::from_secs(95)],
        "listed at the start and at the thaw"
    );
}

#[tokio::test(start_paused = true)]
async fn cordon_is_noticed_at_the_next_status_computation() {
    let mut c = cluster().await;
    c.node.start();
    c.at(12.0).await;
    let cordon = serde_json::json!({"spec": {"unschedulable": true}});
    Api::<Node>::all(c.admin.clone())
        .patch("n1", &PatchParams::default(), &Patch::Merge(&cordon))
        .await
        .unwrap();
    c.at(20.0).await;
    assert!(c.events("NodeNotSchedulable").await.is_empty());
    // Status computations at 0.1, 10.1, 20.1 s …
    c.at(20.2).await;
    let ev = c.events("NodeNotSchedulable").await;
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].message.as_deref(),
        Some("Node n1 status is now: NodeNotSchedulable")
    );
    assert_eq!(ev[0].first_timestamp.as_ref().unwrap().0, c.ts(20));
}

#[tokio::test(start_paused = true)]
async fn pod_ready_reasserted_after_controller_marked_it_not_ready() {
    // N-13 / N-25: while the node is cut off, the node lifecycle controller marks its pods
    // Ready=False; once the kubelet reaches the API again, its status manager's next 10 s sync
    // (ticks at 10, 20, … from the kubelet's start at 0) writes its own status back, with the
    // transition time it holds.
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("web", "Always", &[]).await;
    c.at(20.0).await;
    let ready_since = |p: Pod| {
        p.status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_transition_time
    };
    let since = ready_since(c.pod("web").await.unwrap());
    c.node.apply(NodeFault::Partition);
    c.at(30.0).await;
    let not_ready = serde_json::json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:30Z"}
    ]}});
    let pods: Api<Pod> = Api::namespaced(c.admin.clone(), "default");
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Strategic(&not_ready),
    )
    .await
    .unwrap();
    let ready = |p: Pod| {
        p.status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .status
    };
    assert_eq!(ready(c.pod("web").await.unwrap()), "False");
    c.at(41.0).await;
    c.node.apply(NodeFault::Heal);
    // The kubelet sees the pod again, but a pod update alone does not re-send a status it
    // already sent.
    c.at(49.0).await;
    assert_eq!(ready(c.pod("web").await.unwrap()), "False");
    c.at(50.5).await;
    let p = c.pod("web").await.unwrap();
    assert_eq!(ready(p.clone()), "True");
    assert_eq!(ready_since(p), since);
    assert_eq!(c.container("web").await.restart_count, 0);
}

#[tokio::test(start_paused = true)]
async fn a_pod_that_ends_while_the_api_is_unreachable_is_reported_at_the_next_status_sync() {
    // Two `Never` pods end at about 43.5 s, while the node is cut off: their final status
    // PATCHes fail. `b` is deleted meanwhile; the kubelet learns of it on the heal at 60.5 s, but
    // its final DELETE must wait for the terminal status. The status manager's sync at 70 s
    // (ticks every 10 s from the kubelet's start at 0) sends both statuses, then `b`'s DELETE.
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    c.create_pod("a", "Never", &["sleep", "30"]).await;
    c.create_pod("b", "Never", &["sleep", "30"]).await;
    c.at(20.0).await;
    let phase = |p: Option<Pod>| p.and_then(|p| p.status).and_then(|s| s.phase);
    assert_eq!(phase(c.pod("a").await).as_deref(), Some("Running"));
    c.node.apply(NodeFault::Partition);
    c.at(50.0).await;
    Api::<Pod>::namespaced(c.admin.clone(), "default")
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
    c.at(60.5).await;
    c.node.apply(NodeFault::Heal);
    c.at(69.5).await;
    assert_eq!(phase(c.pod("a").await).as_deref(), Some("Running"));
    let b = c.pod("b").await.expect("b waits for its terminal status");
    assert!(b.metadata.deletion_timestamp.is_some());
    assert_eq!(phase(Some(b)).as_deref(), Some("Running"));
    c.at(70.5).await;
    assert_eq!(phase(c.pod("a").await).as_deref(), Some("Succeeded"));
    assert!(
        c.pod("b").await.is_none(),
        "b deleted after its terminal status"
    );
}

fn shutdown_cfg(total: u64, critical: u64) -> KubeletConfig {
    KubeletConfig {
        shutdown: crate::shutdown::ShutdownConfig {
            grace_period: Duration::from_secs(total),
            grace_period_critical_pods: Duration::from_secs(critical),
            ..Default::default()
        },
        ..KubeletConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_reports_not_ready_kills_groups_then_powers_off() {
    // N-55 with 30 s / 10 s, shutdown at 20 s: the NodeShutdown event and Ready=False `node is
    // shutting down` at once; the normal pod (busybox sleep ignores SIGTERM) gets override 20 →
    // SIGKILL at 40 s; the critical group starts then (override 10 → 50 s); the lock is released
    // and the machine powers off at 50 s.
    let mut c = cluster_cfg(model(), shutdown_cfg(30, 10)).await;
    c.node.start();
    c.at(1.0).await;
    c.create_pod("web", "Always", &["sleep", "3600"]).await;
    c.create_pod("dns", "Always", &["sleep", "3600"]).await;
    c.set_priority_class("dns", "system-cluster-critical").await;
    c.at(20.0).await;
    assert_eq!(c.phase("dns").await.as_deref(), Some("Running"));
    assert_eq!(c.ready().await.0, "True");
    c.node.apply(NodeFault::Shutdown);
    assert!(c.node.state().shutting_down);
    c.at(30.0).await;
    c.node.apply(NodeFault::Shutdown); // a second signal changes nothing
    c.at(30.5).await;
    let ev = c.events("NodeShutdown").await;
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].message.as_deref(),
        Some("Shutdown manager detected shutdown event")
    );
    assert_eq!(ev[0].first_timestamp.as_ref().unwrap().0, c.ts(20));
    assert_eq!(
        c.ready().await,
        ("False".into(), Some("node is shutting down".into()))
    );
    let web = c.pod("web").await.unwrap().status.unwrap();
    assert_eq!(web.phase.as_deref(), Some("Failed"));
    assert_eq!(web.reason.as_deref(), Some("Terminated"));
    assert_eq!(c.phase("dns").await.as_deref(), Some("Running"));
    // A pod bound now is rejected.
    c.create_pod("late", "Always", &[]).await;
    c.at(31.0).await;
    let late = c.pod("late").await.unwrap().status.unwrap();
    assert_eq!(late.reason.as_deref(), Some("NodeShutdown"));
    c.at(40.5).await;
    assert!(c.node.state().powered);
    let w = c.container("web").await;
    assert_eq!(
        w.state.unwrap().terminated.unwrap().finished_at.unwrap().0,
        c.ts(40)
    );
    c.at(49.5).await;
    assert!(c.node.state().powered, "critical group still running");
    // Killed at 40 s (its status says so from then on), its container not stopped yet.
    assert_eq!(c.phase("dns").await.as_deref(), Some("Failed"));
    assert!(c.container("dns").await.state.unwrap().running.is_some());
    c.at(50.5).await;
    assert!(
        !c.node.state().powered,
        "powered off once the lock is released"
    );
    let dns = c.pod("dns").await.unwrap().status.unwrap();
    assert_eq!(dns.phase.as_deref(), Some("Failed"));
    assert_eq!(dns.reason.as_deref(), Some("Terminated"));
    // logind's delay (the 30 s the kubelet asked for) ends at 50 s too, the instant of the
    // critical pod's SIGKILL: as upstream's #110755, the machine may go down before the final
    // container status is sent; the pod keeps the Failed/Terminated status of its kill.
}

#[tokio::test(start_paused = true)]
async fn shutdown_without_the_feature_is_a_power_off() {
    // N-53: shutdownGracePeriod 0 (the default) holds no inhibitor lock: the machine goes down at
    // once and the pods keep their last reported status.
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    c.create_pod("web", "Always", &["sleep", "3600"]).await;
    c.at(20.0).await;
    c.node.apply(NodeFault::Shutdown);
    assert!(!c.node.state().powered);
    c.at(30.0).await;
    assert_eq!(c.phase("web").await.as_deref(), Some("Running"));
    assert!(c.events("NodeShutdown").await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancelled_shutdown_is_taken_in_after_the_groups_and_ready_returns() {
    // N-56: cancelled at 21 s while the normal group (20 s) is being killed: upstream's loop only
    // reads the cancellation once the groups are done (40 s): the pod is killed all the same, the
    // machine stays up, the cancellation event is recorded and Ready is True at the next status
    // update.
    let mut c = cluster_cfg(model(), shutdown_cfg(30, 10)).await;
    c.node.start();
    c.at(1.0).await;
    c.create_pod("web", "Always", &["sleep", "3600"]).await;
    c.at(20.0).await;
    c.node.apply(NodeFault::Shutdown);
    c.at(21.0).await;
    c.node.apply(NodeFault::ShutdownCancel);
    assert!(!c.node.state().shutting_down);
    c.at(39.5).await;
    assert_eq!(c.events("NodeShutdown").await.len(), 1);
    c.at(40.5).await;
    assert!(c.node.state().powered);
    let ev = c.events("NodeShutdown").await;
    assert_eq!(ev.len(), 2);
    assert_eq!(
        ev[1].message.as_deref(),
        Some("Shutdown manager detected shutdown cancellation")
    );
    assert_eq!(c.phase("web").await.as_deref(), Some("Failed"));
    c.at(51.0).await;
    assert_eq!(c.ready().await.0, "True");
    // The lock is held again: a new shutdown is graceful again.
    c.node.apply(NodeFault::Shutdown);
    assert!(c.node.state().powered);
    c.at(52.0).await;
    assert!(!c.node.state().powered, "no pods left: released at once");
}

async fn create_pod_with(c: &Cluster, name: &str, patch: serde_json::Value) {
    let mut p = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox:1.36",
                 "command": ["sleep", "3600"]}]}
    });
    json_merge(&mut p, patch);
    let p: Pod = serde_json::from_value(p).unwrap();
    Api::<Pod>::namespaced(c.admin.clone(), "default")
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

fn json_merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                json_merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[tokio::test(start_paused = true)]
async fn memory_pressure_evicts_one_pod_per_round_and_reports_the_condition() {
    // N-67 with the default `memory.available<100Mi`: a host process drives the node to 80Mi at
    // 30 s. The eviction manager synchronizes every 10 s from the kubelet's first pod sync
    // (≈0 s here: at 10, 20, 30 … s), so the breach is acted on at 30 s: EvictionThresholdMet,
    // the BestEffort pod using the most memory evicted with override 1 (SIGKILL 2 s later),
    // Failed/Evicted with the upstream message. MemoryPressure is reported at the next status
    // update (40 s); new BestEffort pods are rejected. Relieved at 60 s, the condition stays
    // for the 5 m transition period after the last breach.
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    create_pod_with(
        &c,
        "be-big",
        serde_json::json!({"metadata": {"annotations": {"usage.klab.dev/app": "memory=1536Mi"}}}),
    )
    .await;
    create_pod_with(
        &c,
        "be-small",
        serde_json::json!({"metadata": {"annotations": {"usage.klab.dev/app": "memory=100Mi"}}}),
    )
    .await;
    create_pod_with(
        &c,
        "guar",
        serde_json::json!({"spec": {"containers": [{"name": "app", "image": "busybox:1.36",
            "command": ["sleep", "3600"],
            "resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]}}),
    )
    .await;
    c.at(20.0).await;
    assert_eq!(c.phase("be-big").await.as_deref(), Some("Running"));
    assert!(
        c.node
            .set_available("memory.free", Some(80 << 20))
            .unwrap_err()
            .contains("unsupported eviction signal memory.free")
    );
    c.node
        .set_available("memory.available", Some(80 << 20))
        .unwrap();
    c.at(29.5).await;
    assert!(c.events("EvictionThresholdMet").await.is_empty());
    c.at(30.5).await;
    let met = c.events("EvictionThresholdMet").await;
    assert_eq!(met.len(), 1);
    assert_eq!(
        met[0].message.as_deref(),
        Some("Attempting to reclaim memory")
    );
    assert_eq!(met[0].first_timestamp.as_ref().unwrap().0, c.ts(30));
    let msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. \
               Container app was using 1536Mi, request is 0, has larger consumption of memory. ";
    let evicted = c.events("Evicted").await;
    assert_eq!(evicted.len(), 1);
    assert_eq!(evicted[0].involved_object.name.as_deref(), Some("be-big"));
    assert_eq!(evicted[0].message.as_deref(), Some(msg));
    c.at(33.0).await;
    let st = c.pod("be-big").await.unwrap().status.unwrap();
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("Evicted"));
    assert_eq!(st.message.as_deref(), Some(msg));
    let dt = st
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(dt.reason.as_deref(), Some("TerminationByKubelet"));
    let t = st.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!((t.exit_code, t.finished_at.unwrap().0), (137, c.ts(32)));
    // The node reports MemoryPressure at its next status update.
    let mem = |n: Node| {
        n.status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "MemoryPressure")
            .unwrap()
    };
    c.at(40.5).await;
    let m = mem(c.node_obj().await);
    assert_eq!(
        (m.status.as_str(), m.reason.as_deref()),
        ("True", Some("KubeletHasInsufficientMemory"))
    );
    // Next round: be-small (over its request of 0).
    c.at(41.0).await;
    let evicted = c.events("Evicted").await;
    assert_eq!(evicted.len(), 2);
    assert_eq!(evicted[1].involved_object.name.as_deref(), Some("be-small"));
    // A new BestEffort pod is rejected while under memory pressure.
    create_pod_with(&c, "late", serde_json::json!({})).await;
    c.at(42.0).await;
    let late = c.pod("late").await.unwrap().status.unwrap();
    assert_eq!(late.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        late.message.as_deref(),
        Some("Pod was rejected: The node had condition: [MemoryPressure]. ")
    );
    // The rejection is recorded as an `Evicted` event too (upstream's admission event).
    let evicted: Vec<_> = c
        .events("Evicted")
        .await
        .into_iter()
        .filter_map(|e| e.involved_object.name)
        .collect();
    assert_eq!(evicted, vec!["be-big", "be-small", "late"]);
    // Relieved at 42 s: no more evictions; the condition stays until 5 m after the last breach
    // (40 s), i.e. it is gone at the first status update after 340 s.
    c.node.set_available("memory.available", None).unwrap();
    c.at(335.5).await;
    assert_eq!(c.events("Evicted").await.len(), 3);
    assert_eq!(c.phase("guar").await.as_deref(), Some("Running"));
    assert_eq!(mem(c.node_obj().await).status, "True");
    c.at(351.0).await;
    let m = mem(c.node_obj().await);
    assert_eq!(
        (m.status.as_str(), m.reason.as_deref()),
        ("False", Some("KubeletHasSufficientMemory"))
    );
}

/// A machine saved by an earlier `klab up` (before the usage model had system daemons, or under
/// another reservation) gets this start's daemons, their CPU counted from the restore.
#[tokio::test(start_paused = true)]
async fn a_restored_machine_gets_the_system_daemons_of_this_start() {
    let cfg = KubeletConfig {
        reserved_memory: 512 << 20,
        ..Default::default()
    };
    let mut c = cluster_cfg(model(), cfg).await;
    let mut saved = c.node.machine_snapshot();
    assert_eq!(saved.system.total().memory, 512 << 20);
    assert_eq!(saved.booted_at, Some(c.ts(0)));
    saved.system = Default::default();
    saved.booted_at = None;
    c.at(30.0).await;
    c.node.restore_machine(saved);
    let m = c.node.machine_snapshot();
    assert_eq!(
        (m.system.total().cpu_millis, m.system.total().memory),
        (crate::usage::SYSTEM_CPU_MILLIS, 512 << 20)
    );
    assert_eq!(m.booted_at, Some(c.ts(30)));
    assert_eq!(m.system_cpu_ns_at(c.ts(40)), 500_000_000);
}

/// Saving the machines (`klab up` snapshots every one as often as every second) and reading a
/// node's state are reads: counted as changes, they made every kubelet's next pass sync all its
/// pods. A fault is a change.
#[tokio::test(start_paused = true)]
async fn reading_the_machine_is_not_a_change() {
    let mut c = cluster().await;
    c.at(30.0).await;
    let changes = |c: &Cluster| {
        c.node
            .machine_handle()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .changes
    };
    let before = changes(&c);
    let _ = c.node.machine_snapshot();
    let _ = c.node.state();
    assert_eq!(changes(&c), before);
    c.node.set_pull_failure("app", Some("boom".into()));
    assert_ne!(changes(&c), before);
}

/// The kubelet registers its CSINode (owned by its Node, with the csi.klab.dev entry) and the
/// Node's `csi.volume.kubernetes.io/nodeid` annotation right after the Node; a CSINode left by an
/// earlier Node of the same name is taken over rather than left to the garbage collector.
#[tokio::test(start_paused = true)]
async fn registers_its_csinode_after_the_node() {
    use k8s_openapi::api::storage::v1::CSINode;
    let mut c = cluster().await;
    let csinodes: Api<CSINode> = Api::all(c.admin.clone());
    let mut stale = crate::csi_node::new_csi_node(
        &serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "uid": "deleted-node-uid"}}))
        .unwrap(),
    );
    stale.spec.drivers.clear();
    csinodes
        .create(&PostParams::default(), &stale)
        .await
        .unwrap();
    c.node.start();
    c.at(1.0).await;
    let n = c.node_obj().await;
    let csi = csinodes.get("n1").await.unwrap();
    let owner = &csi.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), &owner.uid),
        ("Node", n.metadata.uid.as_ref().unwrap())
    );
    let d = &csi.spec.drivers[0];
    assert_eq!(
        (d.name.as_str(), d.node_id.as_str()),
        ("csi.klab.dev", "n1")
    );
    assert_eq!(d.allocatable.as_ref().and_then(|a| a.count), Some(39));
    assert_eq!(
        n.metadata.annotations.unwrap()["csi.volume.kubernetes.io/nodeid"],
        "{\"csi.klab.dev\":\"n1\"}"
    );
    assert_eq!(
        csi.metadata.annotations.unwrap()["storage.alpha.kubernetes.io/migrated-plugins"],
        crate::csi_node::MIGRATED_PLUGINS
    );
}

/// `(startedAt, finishedAt, exitCode, reason)` of a terminated state.
fn terminated_of(
    s: Option<&k8s_openapi::api::core::v1::ContainerState>,
) -> Option<(Timestamp, Timestamp, i32, String)> {
    let t = s?.terminated.as_ref()?;
    Some((
        t.started_at.as_ref()?.0,
        t.finished_at.as_ref()?.0,
        t.exit_code,
        t.reason.clone().unwrap_or_default(),
    ))
}

#[tokio::test(start_paused = true)]
async fn a_leaking_container_is_oom_killed_at_its_limit_and_restarted_with_backoff() {
    // 28Mi + 50Mi/min under a 128Mi limit: each instance reaches its limit 2 minutes after it
    // started and is OOM-killed (137, OOMKilled); the kubelet restarts it as any crashed
    // container: at once the first time (start latency only), then after the crash-loop backoff
    // (10 s), waiting in CrashLoopBackOff meanwhile. (An instance that ran over 10 minutes, twice
    // the 5 m maximum backoff, would reset the backoff: a slow leak restarts at once each time.)
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    create_pod_with(
        &c,
        "leaky",
        serde_json::json!({
            "metadata": {"annotations": {"usage.klab.dev/app": "memory=28Mi,memory-growth=50Mi/min"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36",
                "command": ["sleep", "infinity"],
                "resources": {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}}]}}),
    )
    .await;
    c.at(30.0).await;
    let cs = c.container("leaky").await;
    let started = cs
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .clone()
        .unwrap()
        .0;
    let s0 = started.duration_since(c.ts(0)).as_secs();
    assert!(cs.last_state.is_none_or(|s| s.terminated.is_none()));
    // Just before the limit: still running.
    c.at((s0 + 119) as f64 + 0.5).await;
    assert_eq!(c.container("leaky").await.restart_count, 0);
    c.at((s0 + 120) as f64 + 0.5).await;
    let cs = c.container("leaky").await;
    let first = terminated_of(cs.state.as_ref()).or(terminated_of(cs.last_state.as_ref()));
    assert_eq!(
        first,
        Some((started, c.ts(s0 + 120), 137, "OOMKilled".into())),
        "OOM-killed exactly at the limit"
    );
    // Restarted at once (the start latency only).
    c.at((s0 + 130) as f64).await;
    let cs = c.container("leaky").await;
    assert_eq!(cs.restart_count, 1);
    assert_eq!(
        terminated_of(cs.last_state.as_ref()),
        Some((started, c.ts(s0 + 120), 137, "OOMKilled".into()))
    );
    let started2 = cs
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .clone()
        .unwrap()
        .0;
    let s1 = started2.duration_since(c.ts(0)).as_secs();
    assert!(s1 > s0 + 120 && s1 <= s0 + 122, "restarted at once: {s1}");
    // The second instance leaks from its own start.
    c.at((s1 + 120) as f64 + 0.5).await;
    let cs = c.container("leaky").await;
    // Already waiting in CrashLoopBackOff: the kill is the last state.
    let second = terminated_of(cs.last_state.as_ref());
    assert_eq!(
        second,
        Some((started2, c.ts(s1 + 120), 137, "OOMKilled".into()))
    );
    // Waiting in CrashLoopBackOff (10 s now) until the next start.
    c.at((s1 + 125) as f64).await;
    let cs = c.container("leaky").await;
    assert_eq!(
        cs.state.unwrap().waiting.unwrap().reason.as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        terminated_of(cs.last_state.as_ref()).map(|t| (t.2, t.3)),
        Some((137, "OOMKilled".into()))
    );
    assert!(!c.events("BackOff").await.is_empty());
    c.at((s1 + 135) as f64).await;
    let cs = c.container("leaky").await;
    assert_eq!(cs.restart_count, 2);
    assert!(cs.state.unwrap().running.is_some());
}

#[tokio::test(start_paused = true)]
async fn usage_annotation_changes_live_and_bad_values_change_nothing() {
    let mut c = cluster().await;
    c.node.start();
    c.at(1.0).await;
    create_pod_with(
        &c,
        "app",
        serde_json::json!({
            "metadata": {"annotations": {"usage.klab.dev/app": "memory=28Mi"}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36",
                "command": ["sleep", "infinity"],
                "resources": {"limits": {"memory": "128Mi"}}}]}}),
    )
    .await;
    c.at(60.0).await;
    let api = Api::<Pod>::namespaced(c.admin.clone(), "default");
    let annotate =
        |v: &str| serde_json::json!({"metadata": {"annotations": {"usage.klab.dev/app": v}}});
    // A value that does not parse: one Warning event, the model unchanged (no leak, no OOM).
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&annotate("memory-growth=lots/min")),
    )
    .await
    .unwrap();
    c.at(61.0).await;
    let bad = c.events("InvalidUsage").await;
    assert_eq!(bad.len(), 1);
    assert_eq!(
        bad[0].message.as_deref(),
        Some(
            "usage.klab.dev/app: invalid memory-growth \"lots/min\": a rate is a quantity per s, min or h (10Mi/min); the usage model is unchanged"
        )
    );
    c.at(400.0).await;
    assert_eq!(c.container("app").await.restart_count, 0);
    assert_eq!(c.events("InvalidUsage").await.len(), 1, "reported once");
    // A leak set live at 400 s: 100Mi from now on, 1Mi/s: the 128Mi limit is reached 28 s later.
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&annotate("memory=100Mi,memory-growth=1Mi/s")),
    )
    .await
    .unwrap();
    c.at(427.5).await;
    assert_eq!(c.container("app").await.restart_count, 0);
    c.at(428.5).await;
    let cs = c.container("app").await;
    assert_eq!(
        terminated_of(cs.state.as_ref()).map(|t| (t.1, t.2, t.3)),
        Some((c.ts(428), 137, "OOMKilled".into()))
    );
}

/// A crash-looping pod's events go through client-go's correlator as on a real kubelet: its
/// repeats are counted on one Event each, and the kubelet writes at most 25 Events about the
/// pod, then one every 5 minutes (the spam filter) — every write carrying the occurrences
/// counted meanwhile. Each Event names the node as its source host and reporting instance.
#[tokio::test(start_paused = true)]
async fn a_crash_loop_s_events_are_counted_and_throttled_per_pod() {
    use futures::StreamExt;
    let mut c = cluster().await;
    c.node.start();
    c.at(10.0).await;
    // Every write of an Event about the pod, seen on a watch opened before the pod exists (and
    // opened again from where it stopped when the server ends it).
    let writes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let events: Api<Event> = Api::namespaced(c.admin.clone(), "default");
    let counted = writes.clone();
    let watched = events.clone();
    tokio::spawn(async move {
        let mut rv = "0".to_string();
        loop {
            let Ok(stream) = watched.watch(&kube::api::WatchParams::default(), &rv).await else {
                return;
            };
            let mut stream = stream.boxed();
            while let Some(Ok(e)) = stream.next().await {
                match e {
                    kube::api::WatchEvent::Added(ev) | kube::api::WatchEvent::Modified(ev) => {
                        rv = ev.metadata.resource_version.clone().unwrap_or_default();
                        if ev.involved_object.name.as_deref() == Some("crash") {
                            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                    kube::api::WatchEvent::Deleted(ev) => {
                        rv = ev.metadata.resource_version.clone().unwrap_or_default();
                    }
                    _ => {}
                }
            }
        }
    });
    c.create_pod("crash", "Always", &["false"]).await;
    let end = 10.0 + 2.0 * 3600.0;
    c.at(end).await;
    let restarts = c.container("crash").await.restart_count;
    // Back-off caps at 5 minutes: about two dozen restarts in two hours.
    assert!(restarts >= 20, "restarts {restarts}");
    let written = writes.load(std::sync::atomic::Ordering::SeqCst);
    // 25 at once, then one per 300 s of the 7 200 s since the pod's first event.
    assert!(written <= 25 + 7200 / 300 + 1, "{written} writes");
    assert!(
        written > 25,
        "writes resume as the bucket refills: {written}"
    );
    // Each restart's first event ("already present") takes the token the bucket refilled, and
    // carries every occurrence; the events after it in the cycle are counted but not written,
    // so their Events stall where the burst ran out — what `kubectl describe pod` shows of a
    // crash loop on a real cluster.
    let pulled: Vec<Event> = c
        .events("Pulled")
        .await
        .into_iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.contains("already present"))
        })
        .collect();
    assert_eq!(pulled.len(), 1);
    let pulls = pulled[0].count.unwrap_or_default();
    assert!(
        pulls >= restarts - 1 && pulls <= restarts,
        "{pulls} of {restarts}"
    );
    let started = c.events("Started").await;
    assert_eq!(started.len(), 1, "one Event counts the starts");
    let e = &started[0];
    let count = e.count.unwrap_or_default();
    assert!(count > 1 && count < restarts / 2, "count {count} stalls");
    assert_eq!(
        e.source.as_ref().and_then(|s| s.host.as_deref()),
        Some("n1")
    );
    assert_eq!(e.reporting_instance.as_deref(), Some("n1"));
    assert_eq!(e.reporting_component.as_deref(), Some("kubelet"));
}
