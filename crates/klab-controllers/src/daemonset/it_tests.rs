//! Virtual-time tests of the DaemonSet controller against klab's in-process API server (no
//! scheduler or kubelet: pods are pinned by affinity, their status is PATCHed by the test).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::{Clock, DetRng};
use klab_apiserver::identity::Identity;

use super::decide::target_node_name;
use super::{DaemonSetControllerConfig, run};
use crate::events::EventRecorder;

async fn add_node(admin: &kube::Client, name: &str) {
    let nodes: Api<Node> = Api::all(admin.clone());
    let n: Node = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let st = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
}

async fn ds_pods(admin: &kube::Client) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn targets(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().filter_map(target_node_name).collect()
}

async fn make_ready(admin: &kube::Client, clock: &Clock, pods: &[Pod]) {
    let api: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    let now = klab_api::clock::format_time(clock.now());
    for p in pods {
        let st = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
        api.patch_status(
            p.metadata.name.as_deref().unwrap(),
            &PatchParams::default(),
            &Patch::Merge(&st),
        )
        .await
        .unwrap();
    }
}

async fn status(admin: &kube::Client) -> k8s_openapi::api::apps::v1::DaemonSetStatus {
    let api: Api<DaemonSet> = Api::namespaced(admin.clone(), "kube-system");
    api.get("agent").await.unwrap().status.unwrap()
}

#[tokio::test(start_paused = true)]
async fn one_pod_per_node_and_a_dead_node_keeps_its_pod() {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    for n in ["n1", "n2", "n3"] {
        add_node(&admin, n).await;
    }
    let ctl = kube::Client::new(server.router_as(Identity::admin()), "default");
    let recorder = EventRecorder::new(
        ctl.clone(),
        clock.clone(),
        DetRng::seeded(2),
        super::CONTROLLER_NAME,
    );
    tokio::spawn(run(
        ctl.clone(),
        klab_runtime::Informers::new(ctl, clock.clone()),
        clock.clone(),
        DaemonSetControllerConfig::default(),
        recorder,
    ));
    let dss: Api<DaemonSet> = Api::namespaced(admin.clone(), "kube-system");
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}],
                    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}}}}))
    .unwrap();
    dss.create(&PostParams::default(), &ds).await.unwrap();
    let t0 = clock.elapsed();
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(clock.elapsed() - t0, Duration::from_secs(1));

    let pods = ds_pods(&admin).await;
    assert_eq!(pods.len(), 3);
    assert_eq!(
        targets(&pods),
        BTreeSet::from(["n1".into(), "n2".into(), "n3".into()])
    );
    for p in &pods {
        assert!(p.metadata.name.as_deref().unwrap().starts_with("agent-"));
        let labels = p.metadata.labels.as_ref().unwrap();
        assert!(
            labels.contains_key("controller-revision-hash")
                && labels.contains_key("pod-template-generation")
        );
        let o = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.controller, o.block_owner_deletion),
            ("DaemonSet", Some(true), Some(true))
        );
        let tols = p.spec.as_ref().unwrap().tolerations.as_ref().unwrap();
        let nr = tols
            .iter()
            .find(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready"))
            .unwrap();
        assert_eq!(
            nr.toleration_seconds, None,
            "CP-46: the user's 30 s toleration is replaced by the infinite one"
        );
    }
    let st = status(&admin).await;
    assert_eq!(
        (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_ready
        ),
        (3, 3, 0)
    );
    make_ready(&admin, &clock, &pods).await;
    clock.sleep(Duration::from_secs(1)).await;
    let st = status(&admin).await;
    assert_eq!(
        (
            st.number_ready,
            st.number_available,
            st.updated_number_scheduled
        ),
        (3, Some(3), Some(3))
    );

    // n2 becomes unreachable: its pod stays, the node leaves desiredNumberScheduled.
    let nodes: Api<Node> = Api::all(admin.clone());
    let taints = json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}});
    nodes
        .patch("n2", &PatchParams::default(), &Patch::Merge(&taints))
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(60)).await;
    let pods = ds_pods(&admin).await;
    assert_eq!(targets(&pods).len(), 3, "the pod on the dead node is kept");
    let st = status(&admin).await;
    assert_eq!(
        (
            st.desired_number_scheduled,
            st.current_number_scheduled,
            st.number_misscheduled
        ),
        (2, 2, 1)
    );
    // Deleted by hand: not recreated while the node is unreachable.
    let on_n2 = pods
        .iter()
        .find(|p| target_node_name(p).as_deref() == Some("n2"))
        .unwrap()
        .metadata
        .name
        .clone()
        .unwrap();
    let api: Api<Pod> = Api::namespaced(admin.clone(), "kube-system");
    api.delete(
        &on_n2,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    clock.sleep(Duration::from_secs(30)).await;
    assert_eq!(
        targets(&ds_pods(&admin).await),
        BTreeSet::from(["n1".into(), "n3".into()])
    );
    // The node heals: the daemon pod comes back.
    nodes
        .patch(
            "n2",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(targets(&ds_pods(&admin).await).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn rolling_update_replaces_one_pod_at_a_time() {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
    for n in ["n1", "n2", "n3"] {
        add_node(&admin, n).await;
    }
    let ctl = kube::Client::new(server.router_as(Identity::admin()), "default");
    let recorder = EventRecorder::new(
        ctl.clone(),
        clock.clone(),
        DetRng::seeded(2),
        super::CONTROLLER_NAME,
    );
    tokio::spawn(run(
        ctl.clone(),
        klab_runtime::Informers::new(ctl, clock.clone()),
        clock.clone(),
        DaemonSetControllerConfig::default(),
        recorder,
    ));
    let dss: Api<DaemonSet> = Api::namespaced(admin.clone(), "kube-system");
    let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:1"}]}}}}))
    .unwrap();
    dss.create(&PostParams::default(), &ds).await.unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    make_ready(&admin, &clock, &ds_pods(&admin).await).await;
    clock.sleep(Duration::from_secs(1)).await;
    let image = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap_or_default()
    };

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "agent:2"}]}}}});
    dss.patch("agent", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // Each round: exactly one old pod is replaced (maxUnavailable 1) until the new one is Ready.
    for round in 1..=3 {
        clock.sleep(Duration::from_secs(1)).await;
        let pods = ds_pods(&admin).await;
        let new: Vec<&Pod> = pods.iter().filter(|p| image(p) == "agent:2").collect();
        assert_eq!(new.len(), round, "round {round}");
        assert_eq!(pods.len(), 3, "round {round}: one pod per node");
        let st = status(&admin).await;
        assert_eq!(st.updated_number_scheduled, Some(round as i32));
        assert_eq!(st.number_available, Some(2));
        let unready: Vec<Pod> = new
            .into_iter()
            .filter(|p| !crate::replicaset::util::is_pod_ready(p))
            .cloned()
            .collect();
        make_ready(&admin, &clock, &unready).await;
    }
    clock.sleep(Duration::from_secs(1)).await;
    let st = status(&admin).await;
    assert_eq!(
        (
            st.updated_number_scheduled,
            st.number_available,
            st.desired_number_scheduled
        ),
        (Some(3), Some(3), 3)
    );
    assert_eq!(
        st.observed_generation,
        dss.get("agent").await.unwrap().metadata.generation
    );
}
