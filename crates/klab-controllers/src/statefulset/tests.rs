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
    create_sts_retaining(h, replicas, policy, json!(null)).await
}

async fn create_sts_retaining(
    h: &Harness,
    replicas: i32,
    policy: &str,
    retention: serde_json::Value,
) {
    let s: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": "web",
            "podManagementPolicy": policy,
            "persistentVolumeClaimRetentionPolicy": retention,
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

fn claims(h: &Harness) -> Api<PersistentVolumeClaim> {
    Api::namespaced(h.client.clone(), "default")
}

/// (kind, name) of a claim's owners, or None once it is gone.
async fn owners(h: &Harness, claim: &str) -> Option<Vec<(String, String)>> {
    let c = claims(h).get_opt(claim).await.expect("get claim")?;
    Some(
        c.metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                assert_eq!(r.controller, Some(true), "{r:?}");
                (r.kind, r.name)
            })
            .collect(),
    )
}

fn owned_by(kind: &str, name: &str) -> Option<Vec<(String, String)>> {
    Some(vec![(kind.to_string(), name.to_string())])
}

/// whenScaled Delete (whenDeleted Delete): claims of condemned ordinals are handed from the set to
/// their pod before the pod is deleted, so the garbage collector removes them once the pod object
/// is gone; a scale-up that comes back before then does not recreate the replica while its claim
/// still names the old pod, and the replica gets a fresh claim once the collector is done.
#[tokio::test(start_paused = true)]
async fn when_scaled_delete_hands_condemned_claims_to_their_pods() {
    let h = harness().await;
    create_sts_retaining(
        &h,
        3,
        "OrderedReady",
        json!({"whenDeleted": "Delete", "whenScaled": "Delete"}),
    )
    .await;
    for (i, p) in ["web-0", "web-1", "web-2"].into_iter().enumerate() {
        h.wait_until(Duration::from_secs(5), p, || async {
            h.pod_names().await.len() == i + 1
        })
        .await;
        run_pod(&h, p).await;
    }
    for c in ["data-web-0", "data-web-1", "data-web-2"] {
        assert_eq!(owners(&h, c).await, owned_by("StatefulSet", "web"), "{c}");
    }
    let old_uid = claims(&h).get("data-web-2").await.unwrap().metadata.uid;

    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    // both condemned claims change hands at once; only web-2 is deleted (OrderedReady)
    h.wait_until(Duration::from_secs(5), "web-2 Terminating", || async {
        h.pod_names().await.iter().any(|(n, t)| n == "web-2" && *t)
    })
    .await;
    assert_eq!(owners(&h, "data-web-2").await, owned_by("Pod", "web-2"));
    assert_eq!(owners(&h, "data-web-1").await, owned_by("Pod", "web-1"));
    assert_eq!(
        owners(&h, "data-web-0").await,
        owned_by("StatefulSet", "web")
    );

    // scaled back up while web-2 terminates: web-1, still Running, is in range again and its
    // claim goes back to the set (with upstream's update event)
    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale up");
    h.wait_until(
        Duration::from_secs(5),
        "data-web-1 back to the set",
        || async { owners(&h, "data-web-1").await == owned_by("StatefulSet", "web") },
    )
    .await;
    assert!(
        h.event_messages()
            .await
            .contains(&"update Pod web-1 in StatefulSet web successful".to_string())
    );
    // web-2's object goes: its claim still names it, so web-2 is not recreated
    h.force_delete("web-2").await;
    h.clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(h.pod_names().await, names_of(&["web-0", "web-1"]));
    assert_eq!(owners(&h, "data-web-2").await, owned_by("Pod", "web-2"));

    // the garbage collector deletes the claim of the vanished pod (its pvc-protection finalizer
    // removed, no pod using it); web-2 then comes back with a fresh claim owned by the set
    tokio::spawn(crate::garbage_collector::run(
        h.client.clone(),
        h.clock.clone(),
        crate::garbage_collector::GarbageCollectorConfig::default(),
    ));
    tokio::spawn(crate::volume_protection::run(
        h.client.clone(),
        h.client.clone(),
        h.informers.clone(),
        h.clock.clone(),
    ));
    h.wait_until(Duration::from_secs(10), "web-2 recreated", || async {
        h.pod_names().await == names_of(&["web-0", "web-1", "web-2"])
    })
    .await;
    let fresh = claims(&h).get("data-web-2").await.unwrap();
    assert_ne!(fresh.metadata.uid, old_uid, "a new claim, not the old one");
    assert_eq!(
        owners(&h, "data-web-2").await,
        owned_by("StatefulSet", "web")
    );
}

/// whenScaled Retain (the default): a scale-down leaves the claims as they were and a scale-up
/// reuses them.
#[tokio::test(start_paused = true)]
async fn when_scaled_retain_keeps_claims_for_the_next_scale_up() {
    let h = harness().await;
    create_sts(&h, 2, "Parallel").await;
    h.wait_until(Duration::from_secs(5), "2 pods", || async {
        h.pod_names().await.len() == 2
    })
    .await;
    run_pod(&h, "web-0").await;
    run_pod(&h, "web-1").await;
    let uid = claims(&h).get("data-web-1").await.unwrap().metadata.uid;
    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    h.wait_until(Duration::from_secs(5), "web-1 Terminating", || async {
        h.pod_names().await.iter().any(|(n, t)| n == "web-1" && *t)
    })
    .await;
    h.force_delete("web-1").await;
    assert_eq!(owners(&h, "data-web-1").await, Some(vec![]));
    sets(&h)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .expect("scale up");
    h.wait_until(Duration::from_secs(5), "web-1 back", || async {
        h.pod_names().await == names_of(&["web-0", "web-1"])
    })
    .await;
    assert_eq!(
        claims(&h).get("data-web-1").await.unwrap().metadata.uid,
        uid,
        "the same claim"
    );
}

/// Through random sequences of pod changes (members and non-members, pods of other namespaces
/// filed under the set's UID, controller references given up, phases, deletion, removal and
/// re-creation) and changes of the set's selector and deletion, the members kept across reads
/// are the members read from scratch.
#[test]
fn the_kept_members_are_the_members_read_from_scratch() {
    use k8s_openapi::api::core::v1::Pod;
    use klab_runtime::{SharedInformer, index};
    use kube::runtime::watcher;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    #[derive(Clone, Debug)]
    enum Op {
        Pod {
            i: u8,
            ns: bool,
            owned: bool,
            label: bool,
            phase: u8,
            deleting: bool,
        },
        Delete(u8),
        Set {
            selector: bool,
            deleting: bool,
        },
        Read,
    }
    let op = prop_oneof![
        4 => (0u8..7, any::<bool>(), any::<bool>(), any::<bool>(), 0u8..4, any::<bool>()).prop_map(
            |(i, ns, owned, label, phase, deleting)| Op::Pod { i, ns, owned, label, phase, deleting }
        ),
        1 => (0u8..7).prop_map(Op::Delete),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(selector, deleting)| Op::Set { selector, deleting }),
        2 => Just(Op::Read),
    ];
    // Pod names: members web-0..web-3, "web-01" (ordinal 1 again), and two that are not.
    let name =
        |i: u8| ["web-0", "web-1", "web-2", "web-3", "web-01", "web", "db-0"][usize::from(i)];
    let summary =
        |m: &std::collections::BTreeMap<String, (super::Claim, std::sync::Arc<super::Replica>)>| {
            m.iter()
                .map(|(n, (c, r))| {
                    (
                        n.clone(),
                        *c,
                        r.ordinal,
                        r.phase,
                        r.deleting,
                        r.revision.clone(),
                        r.pod.clone(),
                    )
                })
                .collect::<Vec<_>>()
        };
    TestRunner::new(Config {
        cases: 200,
        ..Config::default()
    })
    .run(&proptest::collection::vec(op, 1..40), |ops| {
        let pods: SharedInformer<Pod> = SharedInformer::default();
        pods.add_index(index::CONTROLLER_UID, index::controller_uid::<Pod>);
        let mut set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "serviceName": "web",
                "template": {"spec": {"containers": []}}}}))
        .unwrap();
        let mut seen = super::Seen::default();
        let last = ops.len().saturating_sub(1);
        for (at, op) in ops.into_iter().enumerate() {
            let check = matches!(op, Op::Read) || at == last;
            match op {
                Op::Pod { i, ns, owned, label, phase, deleting } => {
                    let ns = if ns { "default" } else { "other" };
                    let mut meta = json!({"name": name(i), "namespace": ns,
                        "labels": {"app": if label { "web" } else { "db" },
                            names::LABEL_CONTROLLER_REVISION_HASH: format!("web-r{phase}")}});
                    if owned {
                        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                            "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]);
                    }
                    if deleting {
                        meta["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
                    }
                    let phase = ["Pending", "Running", "Succeeded", "Failed"][usize::from(phase)];
                    let other = if ns == "default" { "other" } else { "default" };
                    if let Some(o) = pods.get(&(other.into(), name(i).into())) {
                        pods.apply(watcher::Event::Delete(o.as_ref().clone()));
                    }
                    pods.apply(watcher::Event::Apply(
                        serde_json::from_value(json!({"metadata": meta, "spec": {"containers": []},
                            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}}))
                        .unwrap(),
                    ));
                }
                Op::Delete(i) => {
                    for ns in ["default", "other"] {
                        if let Some(o) = pods.get(&(ns.into(), name(i).into())) {
                            pods.apply(watcher::Event::Delete(o.as_ref().clone()));
                        }
                    }
                }
                Op::Set { selector, deleting } => {
                    let app = if selector { "web" } else { "db" };
                    set.spec.as_mut().unwrap().selector.match_labels =
                        Some([("app".to_string(), app.to_string())].into());
                    set.metadata.deletion_timestamp = deleting.then(|| {
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            jiff::Timestamp::from_second(1_767_225_600).unwrap(),
                        )
                    });
                }
                Op::Read => {}
            }
            if check {
                let kept = summary(seen.read(&pods, &set));
                let fresh = summary(super::Seen::default().read(&pods, &set));
                prop_assert_eq!(kept, fresh);
            }
        }
        Ok(())
    })
    .unwrap();
}
