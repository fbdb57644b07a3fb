//! Virtual-time tests of the Deployment controller (with the ReplicaSet controller) against the
//! in-process API server.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::decide::get_condition;
use super::{DeploymentControllerConfig, run};
use crate::replicaset::testkit::{Harness, harness, template};
use crate::replicaset::{self, ReplicaSetControllerConfig};
use klab_api::names;

fn start(h: &Harness) {
    tokio::spawn(replicaset::run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        ReplicaSetControllerConfig::default(),
        h.recorder(names::CONTROLLER_REPLICASET),
    ));
    tokio::spawn(run(
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
        DeploymentControllerConfig::default(),
        h.recorder(names::CONTROLLER_DEPLOYMENT),
    ));
}

async fn create_deploy(h: &Harness, name: &str, replicas: i32, strategy: &str) {
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "strategy": {"type": strategy},
            "selector": {"matchLabels": {"app": name}},
            "template": template(name, "nginx:1.25"),
        },
    }))
    .expect("deployment");
    deploys(h)
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
}

fn deploys(h: &Harness) -> Api<Deployment> {
    Api::namespaced(h.client.clone(), "default")
}

async fn replica_sets(h: &Harness) -> Vec<ReplicaSet> {
    let mut v = Api::<ReplicaSet>::namespaced(h.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list rs")
        .items;
    v.sort_by_key(|r| r.metadata.name.clone());
    v
}

/// Plays scheduler and kubelet: binds every pending pod to n1 and reports it Running/Ready.
async fn run_pending_pods(h: &Harness) {
    for p in h
        .pods()
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
            h.bind(&name, "n1").await;
        }
        if p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
            h.make_ready(&name).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn rolling_update_rolls_out_and_reports_status_like_a_real_cluster() {
    let h = harness().await;
    create_deploy(&h, "web", 3, "RollingUpdate").await;
    start(&h);
    h.wait_until(Duration::from_secs(5), "3 pods", || async {
        h.active_pods().await.len() == 3
    })
    .await;
    let rss = replica_sets(&h).await;
    assert_eq!(rss.len(), 1);
    let rs_name = rss[0].metadata.name.clone().unwrap();
    let hash = rss[0].metadata.labels.as_ref().unwrap()[names::LABEL_POD_TEMPLATE_HASH].clone();
    assert_eq!(rs_name, format!("web-{hash}"));
    assert!(
        h.active_pods()
            .await
            .iter()
            .all(|p| p.starts_with(&format!("{rs_name}-")))
    );
    assert_eq!(
        rss[0].metadata.annotations.as_ref().unwrap()[names::ANN_DEPLOYMENT_REVISION],
        "1"
    );

    h.clock.sleep(Duration::from_secs(2)).await;
    run_pending_pods(&h).await;
    let complete = || async {
        let d = deploys(&h).get("web").await.expect("get");
        let s = d.status.unwrap_or_default();
        s.available_replicas == Some(3)
            && get_condition(&s, names::DEPLOY_COND_PROGRESSING)
                .is_some_and(|c| c.reason.as_deref() == Some(names::REASON_NEW_RS_AVAILABLE))
    };
    let t = h
        .wait_until(Duration::from_secs(5), "rollout complete", complete)
        .await;
    assert_eq!(t, Duration::from_secs(2));
    let d = deploys(&h).get("web").await.unwrap();
    assert_eq!(
        d.metadata.annotations.as_ref().unwrap()[names::ANN_DEPLOYMENT_REVISION],
        "1"
    );
    let s = d.status.unwrap();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.unavailable_replicas
        ),
        (Some(3), Some(3), Some(3), None)
    );
    assert_eq!(s.observed_generation, Some(1));
    let av = get_condition(&s, names::DEPLOY_COND_AVAILABLE).unwrap();
    assert_eq!(
        (av.status.as_str(), av.message.as_deref()),
        ("True", Some("Deployment has minimum availability."))
    );
    let pr = get_condition(&s, names::DEPLOY_COND_PROGRESSING).unwrap();
    assert_eq!(
        pr.message.as_deref(),
        Some(format!("ReplicaSet \"{rs_name}\" has successfully progressed.").as_str())
    );
    let ev = h.event_messages().await;
    assert!(
        ev.contains(&format!("Scaled up replica set {rs_name} to 3")),
        "{ev:?}"
    );

    // `kubectl scale deployment web --replicas=5`
    deploys(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("scale");
    h.wait_until(Duration::from_secs(5), "5 pods", || async {
        h.active_pods().await.len() == 5
    })
    .await;
    assert!(
        h.event_messages()
            .await
            .contains(&format!("Scaled up replica set {rs_name} to 5 from 3"))
    );
    run_pending_pods(&h).await;

    // New image: a second ReplicaSet takes over step by step (maxSurge 2, maxUnavailable 1).
    deploys(&h)
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.26"}]}}}})))
        .await
        .expect("new image");
    let done = || async {
        run_pending_pods(&h).await;
        let s = deploys(&h)
            .get("web")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        s.updated_replicas == Some(5)
            && s.available_replicas == Some(5)
            && s.replicas == Some(5)
            && s.observed_generation == Some(3)
    };
    h.wait_until(Duration::from_secs(30), "second rollout", done)
        .await;
    let rss = replica_sets(&h).await;
    assert_eq!(rss.len(), 2);
    let old = rss
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(rs_name.as_str()))
        .unwrap();
    assert_eq!(old.spec.as_ref().unwrap().replicas, Some(0));
    let new = rss
        .iter()
        .find(|r| r.metadata.name.as_deref() != Some(rs_name.as_str()))
        .unwrap();
    assert_eq!(
        new.metadata.annotations.as_ref().unwrap()[names::ANN_DEPLOYMENT_REVISION],
        "2"
    );
    assert_eq!(new.spec.as_ref().unwrap().replicas, Some(5));
}

#[tokio::test(start_paused = true)]
async fn recreate_waits_while_an_old_pod_is_terminating_then_proceeds_after_force_delete() {
    let h = harness().await;
    create_deploy(&h, "db", 1, "Recreate").await;
    start(&h);
    h.wait_until(Duration::from_secs(5), "pod", || async {
        h.active_pods().await.len() == 1
    })
    .await;
    run_pending_pods(&h).await;
    let old_pod = h.active_pods().await.remove(0);
    h.wait_until(Duration::from_secs(5), "available", || async {
        deploys(&h)
            .get("db")
            .await
            .unwrap()
            .status
            .and_then(|s| s.available_replicas)
            == Some(1)
    })
    .await;

    // Template change: the old RS is scaled to 0 and its pod deleted gracefully; on a dead node
    // nothing finishes the deletion, so the pod stays Terminating.
    deploys(&h)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})),
        )
        .await
        .expect("template change");
    h.wait_until(Duration::from_secs(5), "old pod terminating", || async {
        h.pod_names().await == vec![(old_pod.clone(), true)]
    })
    .await;
    h.clock.sleep(Duration::from_secs(20)).await;
    assert_eq!(
        replica_sets(&h).await.len(),
        1,
        "no new ReplicaSet while the old pod object exists"
    );
    assert_eq!(h.pod_names().await, vec![(old_pod.clone(), true)]);
    let s = deploys(&h).get("db").await.unwrap().status.unwrap();
    assert_eq!(
        (s.replicas, s.updated_replicas, s.observed_generation),
        (None, None, Some(2))
    );

    // Upstream's syncRolloutStatus skips progress estimation while replicas == updatedReplicas
    // (0 == 0 here) and the last reason is NewReplicaSetAvailable: the stuck Recreate keeps that
    // Progressing condition (no ProgressDeadlineExceeded); Available drops to False.
    let pr = get_condition(&s, names::DEPLOY_COND_PROGRESSING).unwrap();
    assert_eq!(pr.reason.as_deref(), Some(names::REASON_NEW_RS_AVAILABLE));
    let av = get_condition(&s, names::DEPLOY_COND_AVAILABLE).unwrap();
    assert_eq!(
        (av.status.as_str(), av.reason.as_deref()),
        ("False", Some(names::REASON_MINIMUM_REPLICAS_UNAVAILABLE))
    );

    let before = h.clock.elapsed();
    h.force_delete(&old_pod).await;
    let t = h
        .wait_until(Duration::from_secs(5), "new RS and pod", || async {
            replica_sets(&h).await.len() == 2 && h.active_pods().await.len() == 1
        })
        .await;
    assert_eq!(
        t, before,
        "the new ReplicaSet follows the removal in the same instant"
    );
    assert_ne!(h.active_pods().await[0], old_pod);
}

#[tokio::test(start_paused = true)]
async fn progress_deadline_exceeded_is_reported_on_time() {
    let h = harness().await;
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "progressDeadlineSeconds": 30,
            "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "nginx"),
        },
    }))
    .expect("deployment");
    deploys(&h)
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    start(&h);
    // The pods never become Ready (no kubelet): the rollout stalls.
    let timed_out = || async {
        let s = deploys(&h)
            .get("web")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        get_condition(&s, names::DEPLOY_COND_PROGRESSING)
            .is_some_and(|c| c.reason.as_deref() == Some(names::REASON_PROGRESS_DEADLINE_EXCEEDED))
    };
    let t = h
        .wait_until(
            Duration::from_secs(60),
            "ProgressDeadlineExceeded",
            timed_out,
        )
        .await;
    // last progress at t=0 (ReplicaSet created); timed out strictly after 30s: woken at 30.001s
    assert_eq!(t, Duration::from_millis(30_010));
    let s = deploys(&h).get("web").await.unwrap().status.unwrap();
    let c = get_condition(&s, names::DEPLOY_COND_PROGRESSING).unwrap();
    assert_eq!(c.status, "False");
    let rs_name = replica_sets(&h).await[0].metadata.name.clone().unwrap();
    assert_eq!(
        c.message.as_deref(),
        Some(format!("ReplicaSet \"{rs_name}\" has timed out progressing.").as_str())
    );
}

/// Runs a rollout and returns what a trace would show: pod names, ReplicaSet names, events.
async fn rollout_trace() -> (Vec<(String, bool)>, Vec<String>, Vec<String>) {
    let h = harness().await;
    create_deploy(&h, "web", 3, "RollingUpdate").await;
    start(&h);
    h.wait_until(Duration::from_secs(5), "pods", || async {
        h.active_pods().await.len() == 3
    })
    .await;
    run_pending_pods(&h).await;
    deploys(&h)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})),
        )
        .await
        .expect("patch");
    h.wait_until(Duration::from_secs(30), "rollout", || async {
        run_pending_pods(&h).await;
        deploys(&h)
            .get("web")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.updated_replicas == Some(3) && s.replicas == Some(3))
    })
    .await;
    let rs: Vec<String> = replica_sets(&h)
        .await
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    (h.pod_names().await, rs, h.event_messages().await)
}

#[tokio::test(start_paused = true)]
async fn same_seed_same_rollout() {
    let a = rollout_trace().await;
    let b = rollout_trace().await;
    assert_eq!(a, b);
    assert_eq!(a.1.len(), 2);
}

/// A Deployment's sync reads its pods only for a Recreate rollout, the one that looks at them
/// (upstream reads them at every sync and drops them unused otherwise): a spec change that
/// touches no ReplicaSet (the history limit) syncs a RollingUpdate Deployment without reading a
/// pod, and a Recreate one with its pods.
#[tokio::test(start_paused = true)]
async fn only_a_recreate_sync_reads_the_pods() {
    let h = harness().await;
    create_deploy(&h, "roll", 3, "RollingUpdate").await;
    create_deploy(&h, "again", 2, "Recreate").await;
    start(&h);
    h.wait_until(Duration::from_secs(5), "5 pods", || async {
        h.active_pods().await.len() == 5
    })
    .await;
    run_pending_pods(&h).await;
    h.clock.sleep(Duration::from_secs(5)).await;
    let pods = h.informers.get::<k8s_openapi::api::core::v1::Pod>();
    for (name, reads_pods) in [("roll", false), ("again", true)] {
        let before = pods.stats();
        deploys(&h)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"revisionHistoryLimit": 3}})),
            )
            .await
            .expect("history limit");
        h.wait_until(Duration::from_secs(5), "generation observed", || async {
            deploys(&h)
                .get(name)
                .await
                .ok()
                .and_then(|d| d.status)
                .and_then(|s| s.observed_generation)
                == Some(2)
        })
        .await;
        h.clock.sleep(Duration::from_secs(2)).await;
        let read = pods.stats().since(&before);
        if reads_pods {
            assert!(read.indexed >= 2, "{name}: {read:?}");
        } else {
            assert_eq!(read.total(), 0, "{name}: {read:?}");
        }
    }
}
