//! Virtual-time tests of the StatefulSet controller against the in-process API server.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{StatefulSetControllerConfig, run};
use crate::replicaset::testkit::{Harness, harness, template};
use klab_api::names;

async fn create_sts(h: &Harness, replicas: i32, policy: &str) {
    let s: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "mysql:8"),
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }))
    .expect("sts");
    sets(h)
        .create(&PostParams::default(), &s)
        .await
        .expect("create sts");
    tokio::spawn(run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        StatefulSetControllerConfig::default(),
        h.recorder(names::CONTROLLER_STATEFULSET),
    ));
}

fn sets(h: &Harness) -> Api<StatefulSet> {
    Api::namespaced(h.client.clone(), "default")
}

async fn run_pod(h: &Harness, name: &str) {
    h.bind(name, "n1").await;
    h.make_ready(name).await;
}

fn names_of(v: &[&str]) -> Vec<(String, bool)> {
    v.iter().map(|n| (n.to_string(), false)).collect()
}

#[tokio::test(start_paused = true)]
async fn ordered_ready_creates_in_order_and_a_terminating_pod_blocks_until_force_deleted() {
    let h = harness().await;
    create_sts(&h, 3, "OrderedReady").await;
    h.wait_until(Duration::from_secs(5), "web-0", || async {
        h.pod_names().await == names_of(&["web-0"])
    })
    .await;
    h.clock.sleep(Duration::from_secs(10)).await;
    assert_eq!(
        h.pod_names().await,
        names_of(&["web-0"]),
        "web-1 waits for web-0 to be Running and Ready"
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), "default");
    assert!(
        pvcs.get("data-web-0").await.is_ok(),
        "claim <template>-<set>-<ordinal>"
    );

    let before = h.clock.elapsed();
    run_pod(&h, "web-0").await;
    let t = h
        .wait_until(Duration::from_secs(5), "web-1", || async {
            h.pod_names().await.len() == 2
        })
        .await;
    assert_eq!(t, before);
    run_pod(&h, "web-1").await;
    h.wait_until(Duration::from_secs(5), "web-2", || async {
        h.pod_names().await.len() == 3
    })
    .await;
    run_pod(&h, "web-2").await;
    h.wait_until(Duration::from_secs(5), "status", || async {
        sets(&h)
            .get("web")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.ready_replicas == Some(3))
    })
    .await;
    let s = sets(&h).get("web").await.unwrap().status.unwrap();
    assert_eq!(
        (
            s.replicas,
            s.current_replicas,
            s.updated_replicas,
            s.available_replicas
        ),
        (3, Some(3), Some(3), Some(3))
    );
    assert!(
        s.update_revision
            .as_deref()
            .is_some_and(|r| r.starts_with("web-"))
    );
    assert_eq!(s.current_revision, s.update_revision);
    let p = h.pods().get("web-1").await.unwrap();
    let l = p.metadata.labels.unwrap();
    assert_eq!(l[names::LABEL_STS_POD_NAME], "web-1");
    assert_eq!(l[names::LABEL_POD_INDEX], "1");
    assert_eq!(
        Some(&l[names::LABEL_CONTROLLER_REVISION_HASH]),
        s.update_revision.as_ref()
    );
    assert_eq!(p.spec.unwrap().hostname.as_deref(), Some("web-1"));

    // CP-59: web-1 is evicted on a dead node and stays Terminating; nothing replaces it and a
    // scale-up to 4 is not processed either.
    h.delete("web-1").await;
    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
    h.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        h.pod_names().await,
        vec![
            ("web-0".into(), false),
            ("web-1".into(), true),
            ("web-2".into(), false)
        ]
    );

    let before = h.clock.elapsed();
    h.force_delete("web-1").await;
    let t = h
        .wait_until(Duration::from_secs(5), "web-1 recreated", || async {
            h.pod_names().await == names_of(&["web-0", "web-1", "web-2"])
        })
        .await;
    assert_eq!(
        t, before,
        "recreated with the same name as soon as the old object is gone"
    );
    run_pod(&h, "web-1").await;
    h.wait_until(Duration::from_secs(5), "web-3", || async {
        h.pod_names().await.len() == 4
    })
    .await;
    let ev = h.event_messages().await;
    assert!(
        ev.contains(&"create Pod web-1 in StatefulSet web successful".to_string()),
        "{ev:?}"
    );
    assert!(
        ev.contains(&"create Claim data-web-0 Pod web-0 in StatefulSet web success".to_string()),
        "{ev:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn parallel_processes_other_ordinals_but_never_duplicates_an_identity() {
    let h = harness().await;
    create_sts(&h, 3, "Parallel").await;
    let t = h
        .wait_until(Duration::from_secs(5), "3 pods", || async {
            h.pod_names().await.len() == 3
        })
        .await;
    assert_eq!(t, Duration::ZERO, "Parallel creates all at once");
    for p in ["web-0", "web-1", "web-2"] {
        run_pod(&h, p).await;
    }
    h.delete("web-1").await;
    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("scale");
    h.wait_until(Duration::from_secs(5), "web-3", || async {
        h.pod_names().await.len() == 4
    })
    .await;
    h.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        h.pod_names().await,
        vec![
            ("web-0".into(), false),
            ("web-1".into(), true),
            ("web-2".into(), false),
            ("web-3".into(), false)
        ]
    );
    h.force_delete("web-1").await;
    h.wait_until(Duration::from_secs(5), "web-1 back", || async {
        h.pod_names().await == names_of(&["web-0", "web-1", "web-2", "web-3"])
    })
    .await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(h.client.clone(), "default");
    let n = pvcs.list(&ListParams::default()).await.unwrap().items.len();
    assert_eq!(n, 4, "one claim per ordinal, reused by the recreated web-1");
}
