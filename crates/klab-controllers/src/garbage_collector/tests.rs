//! Virtual-time tests of the garbage collector (with the Deployment and ReplicaSet controllers)
//! against the in-process API server.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use super::{GarbageCollectorConfig, run};
use crate::deployment::{self, DeploymentControllerConfig};
use crate::replicaset::testkit::{Harness, harness, template};
use crate::replicaset::{self, ReplicaSetControllerConfig};
use klab_api::names;

async fn setup(replicas: i32) -> Harness {
    let h = harness().await;
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template("web", "nginx")},
    }))
    .expect("deployment");
    deploys(&h)
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    tokio::spawn(replicaset::run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        ReplicaSetControllerConfig::default(),
        h.recorder(names::CONTROLLER_REPLICASET),
    ));
    tokio::spawn(deployment::run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        DeploymentControllerConfig::default(),
        h.recorder(names::CONTROLLER_DEPLOYMENT),
    ));
    tokio::spawn(run(
        h.client.clone(),
        h.clock.clone(),
        GarbageCollectorConfig::default(),
    ));
    h.wait_until(Duration::from_secs(5), "pods", || async {
        h.active_pods().await.len() == replicas as usize
    })
    .await;
    h
}

fn deploys(h: &Harness) -> Api<Deployment> {
    Api::namespaced(h.client.clone(), "default")
}

fn rss(h: &Harness) -> Api<ReplicaSet> {
    Api::namespaced(h.client.clone(), "default")
}

async fn count_rs(h: &Harness) -> usize {
    rss(h)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .len()
}

#[tokio::test(start_paused = true)]
async fn background_delete_of_a_deployment_removes_its_replicasets_and_pods() {
    let h = setup(2).await;
    h.clock.sleep(Duration::from_secs(1)).await;
    let before = h.clock.elapsed();
    deploys(&h)
        .delete("web", &DeleteParams::background())
        .await
        .expect("delete");
    let t = h
        .wait_until(Duration::from_secs(5), "everything gone", || async {
            count_rs(&h).await == 0 && h.pod_names().await.is_empty()
        })
        .await;
    // unscheduled pods have no grace period, so the whole cascade happens in one instant
    assert_eq!(t, before);
}

#[tokio::test(start_paused = true)]
async fn foreground_delete_waits_for_blocking_dependents() {
    let h = setup(1).await;
    let pod = h.active_pods().await.remove(0);
    h.bind(&pod, "n1").await;
    h.make_ready(&pod).await;
    deploys(&h)
        .delete("web", &DeleteParams::foreground())
        .await
        .expect("delete");
    // The ReplicaSet is deleted in the foreground too; the bound pod is Terminating (no kubelet),
    // so both owners wait with their foregroundDeletion finalizers.
    h.wait_until(Duration::from_secs(5), "pod terminating", || async {
        h.pod_names().await == vec![(pod.clone(), true)]
    })
    .await;
    h.clock.sleep(Duration::from_secs(30)).await;
    let d = deploys(&h)
        .get("web")
        .await
        .expect("deployment still there");
    assert!(d.metadata.deletion_timestamp.is_some());
    assert_eq!(
        d.metadata.finalizers,
        Some(vec![names::FINALIZER_FOREGROUND_DELETION.to_string()])
    );
    assert_eq!(count_rs(&h).await, 1);
    let before = h.clock.elapsed();
    h.force_delete(&pod).await;
    let t = h
        .wait_until(Duration::from_secs(5), "owners gone", || async {
            count_rs(&h).await == 0 && deploys(&h).get("web").await.is_err()
        })
        .await;
    assert_eq!(t, before);
}

#[tokio::test(start_paused = true)]
async fn orphan_delete_keeps_pods_and_removes_their_owner_reference() {
    let h = setup(2).await;
    let pods = h.active_pods().await;
    // Orphan the Deployment's ReplicaSet first, then the ReplicaSet's pods.
    deploys(&h)
        .delete("web", &DeleteParams::orphan())
        .await
        .expect("delete deployment");
    h.wait_until(Duration::from_secs(5), "deployment gone", || async {
        deploys(&h).get("web").await.is_err()
    })
    .await;
    let rs = rss(&h)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    assert!(rs.metadata.owner_references.unwrap_or_default().is_empty());
    rss(&h)
        .delete(&rs.metadata.name.unwrap(), &DeleteParams::orphan())
        .await
        .expect("delete rs");
    h.wait_until(Duration::from_secs(5), "rs gone", || async {
        count_rs(&h).await == 0
    })
    .await;
    h.clock.sleep(Duration::from_secs(5)).await;
    assert_eq!(h.active_pods().await, pods);
    for p in &pods {
        let pod = h.pods().get(p).await.unwrap();
        assert!(
            pod.metadata.owner_references.unwrap_or_default().is_empty(),
            "{p} released"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn deleting_a_node_removes_its_lease() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let h = harness().await;
    tokio::spawn(run(
        h.client.clone(),
        h.clock.clone(),
        GarbageCollectorConfig::default(),
    ));
    let nodes: Api<Node> = Api::all(h.client.clone());
    let node: Node = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
    )
    .unwrap();
    let node = nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), names::NS_NODE_LEASE);
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n1", "namespace": names::NS_NODE_LEASE, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": node.metadata.uid},
        ]},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40},
    }))
    .unwrap();
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");
    h.clock.sleep(Duration::from_secs(5)).await;
    assert!(leases.get("n1").await.is_ok(), "owner alive: kept");
    let before = h.clock.elapsed();
    nodes
        .delete("n1", &DeleteParams::default())
        .await
        .expect("delete node");
    let t = h
        .wait_until(Duration::from_secs(5), "lease gone", || async {
            leases.get("n1").await.is_err()
        })
        .await;
    assert_eq!(t, before);
}

/// Upstream's graph builder verifies an object's owners when they appear or change, not on
/// every update: a Lease renewal or a pod's status write queues no attempt to delete.
#[tokio::test(start_paused = true)]
async fn only_an_update_that_changes_owners_queues_an_attempt() {
    use super::{ATTEMPT, Gc};
    use kube::api::{ObjectMeta, PartialObjectMetaExt};
    use std::collections::BTreeMap;
    let h = harness().await;
    let mut gc = Gc {
        client: h.client.clone(),
        clock: h.clock.clone(),
        resources: Vec::new(),
        caches: Vec::new(),
        synced: Vec::new(),
        items: BTreeMap::new(),
        dependents: BTreeMap::new(),
        queue: Default::default(),
    };
    let owner = |uid: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: "n1".into(),
        uid: uid.into(),
        ..Default::default()
    };
    let lease = |rv: &str, owners: Vec<_>| {
        std::sync::Arc::new(
            ObjectMeta {
                name: Some("n1".into()),
                namespace: Some("kube-node-lease".into()),
                uid: Some("lease-uid".into()),
                resource_version: Some(rv.into()),
                owner_references: Some(owners),
                ..Default::default()
            }
            .into_response_partial::<kube::api::DynamicObject>(),
        )
    };
    let drain = |gc: &mut Gc| {
        let mut out = Vec::new();
        while let Some(k) = gc.queue.pop() {
            gc.queue.done(&k);
            out.push(k);
        }
        out
    };
    let attempt = vec![(ATTEMPT.to_string(), "lease-uid".to_string())];
    gc.upsert(0, lease("1", vec![owner("node-a")]));
    assert_eq!(drain(&mut gc), attempt, "a new dependent is verified");
    gc.upsert(0, lease("2", vec![owner("node-a")]));
    assert_eq!(drain(&mut gc), vec![], "a renewal changes no owner");
    assert_eq!(
        gc.items["lease-uid"].meta().resource_version.as_deref(),
        Some("2")
    );
    gc.upsert(0, lease("3", vec![owner("node-b")]));
    assert_eq!(drain(&mut gc), attempt, "a changed owner is verified");
    assert!(!gc.dependents.contains_key("node-a"));
    assert!(gc.dependents["node-b"].contains("lease-uid"));
}
