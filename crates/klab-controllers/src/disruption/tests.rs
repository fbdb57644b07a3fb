//! Table tests of the budget arithmetic (the upstream docs' examples) and a virtual-time test of
//! the controller with the eviction subresource of klab's API server.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::decide::*;
use crate::replicaset::util::testutil::{pod, ts};

struct Fake(Vec<(WorkloadKind, &'static str, Workload)>);

impl Workloads for Fake {
    fn get(&self, kind: WorkloadKind, _ns: &str, name: &str) -> Option<Workload> {
        self.0
            .iter()
            .find(|(k, n, _)| *k == kind && *n == name)
            .map(|(_, _, w)| w.clone())
    }
}

fn dep_ref(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A Deployment `web` (uid d1) with `replicas`, whose ReplicaSet `web-rs` (uid r1) owns the pods.
fn deployment(replicas: i32) -> Fake {
    Fake(vec![
        (
            WorkloadKind::Deployment,
            "web",
            Workload {
                uid: "d1".into(),
                replicas,
                controller: None,
            },
        ),
        (
            WorkloadKind::ReplicaSet,
            "web-rs",
            Workload {
                uid: "r1".into(),
                replicas,
                controller: Some(dep_ref("web", "d1")),
            },
        ),
    ])
}

fn pods(ready: usize, not_ready: usize) -> Vec<Pod> {
    (0..ready + not_ready)
        .map(|i| {
            pod(&format!("web-{i}"))
                .running_ready(0)
                .ready(i < ready, 0)
                .owned_by("ReplicaSet", "web-rs", "r1")
                .build()
        })
        .collect()
}

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web-pdb".into()),
            namespace: Some("default".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            unhealthy_pod_eviction_policy: None,
        }),
        status: None,
    }
}

fn int(n: i32) -> Option<IntOrString> {
    Some(IntOrString::Int(n))
}
fn pct(s: &str) -> Option<IntOrString> {
    Some(IntOrString::String(s.into()))
}

/// (expected, desired, healthy, allowed) of a budget over `replicas` pods of which `ready` are.
fn budget(
    min: Option<IntOrString>,
    max: Option<IntOrString>,
    replicas: i32,
    ready: usize,
) -> (i32, i32, i32, i32) {
    let w = deployment(replicas);
    let ps = pods(ready, replicas as usize - ready);
    let refs: Vec<&Pod> = ps.iter().collect();
    let b = pdb(min, max);
    let (expected, desired, unmanaged) = expected_pod_count(&b, &refs, &w).unwrap();
    assert!(unmanaged.is_empty());
    let healthy = count_healthy(&refs, &BTreeMap::new(), ts(0));
    let st = new_status(&b, healthy, desired, expected, BTreeMap::new(), ts(0)).unwrap();
    (expected, desired, healthy, st.disruptions_allowed)
}

#[test]
fn budget_arithmetic_follows_the_upstream_examples() {
    // The docs' rounding example: 7 pods, minAvailable 50% → 4 must stay (rounded up).
    assert_eq!(
        budget(None, pct("50%"), 7, 7).1,
        3,
        "maxUnavailable 50% of 7 is 4"
    );
    assert_eq!(budget(pct("50%"), None, 7, 7), (7, 4, 7, 3));
    // The zk-pdb example: minAvailable 2 over 3 Ready pods allows 1.
    assert_eq!(budget(int(2), None, 3, 3), (3, 2, 3, 1));
    // ... and none while only 2 are Ready.
    assert_eq!(budget(int(2), None, 3, 2), (3, 2, 2, 0));
    // maxUnavailable 1 over 3 (the alternative for a quorum of 3).
    assert_eq!(budget(None, int(1), 3, 3), (3, 2, 3, 1));
    // The case: 13 healthy pods over minAvailable 3.
    assert_eq!(budget(int(3), None, 13, 13), (13, 3, 13, 10));
    // Budgets that block every voluntary eviction.
    assert_eq!(budget(None, int(0), 3, 3).3, 0);
    assert_eq!(budget(None, pct("0%"), 3, 3).3, 0);
    assert_eq!(budget(pct("100%"), None, 3, 3).3, 0);
    // maxUnavailable 100% allows every pod to go; minAvailable 0 too.
    assert_eq!(budget(None, pct("100%"), 4, 4), (4, 0, 4, 4));
    assert_eq!(budget(int(0), None, 4, 4), (4, 0, 4, 4));
    // Percentages round up in both directions: 25% of 3 is 1.
    assert_eq!(budget(None, pct("25%"), 3, 3), (3, 2, 3, 1));
    assert_eq!(budget(pct("25%"), None, 3, 3), (3, 1, 3, 2));
    // A budget larger than what exists allows nothing, never a negative number.
    assert_eq!(budget(int(5), None, 3, 3), (3, 5, 3, 0));
}

#[test]
fn integer_min_available_counts_matching_pods_not_the_scale() {
    // The Deployment wants 5 but only 3 pods exist: an integer minAvailable uses the pods.
    let w = deployment(5);
    let ps = pods(3, 0);
    let refs: Vec<&Pod> = ps.iter().collect();
    assert_eq!(
        expected_pod_count(&pdb(int(2), None), &refs, &w).unwrap(),
        (3, 2, vec![])
    );
    // A percentage (or maxUnavailable) uses the controller's scale.
    assert_eq!(
        expected_pod_count(&pdb(None, int(1)), &refs, &w).unwrap(),
        (5, 4, vec![])
    );
}

#[test]
fn no_pods_means_no_disruptions_allowed() {
    let b = pdb(int(0), None);
    let st = new_status(&b, 0, 0, 0, BTreeMap::new(), ts(0)).unwrap();
    assert_eq!(st.disruptions_allowed, 0);
    assert_eq!(st.expected_pods, 0);
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("DisruptionAllowed", "False", "InsufficientPods")
    );
    assert_eq!(st.observed_generation, Some(1));
}

#[test]
fn unmanaged_pods_are_reported_and_controllers_without_scale_fail_the_sync() {
    let w = deployment(3);
    let bare = pod("bare").running_ready(0).build();
    let mut ps = pods(2, 0);
    ps.push(bare);
    let refs: Vec<&Pod> = ps.iter().collect();
    // An integer minAvailable does not look for controllers at all.
    assert_eq!(
        expected_pod_count(&pdb(int(1), None), &refs, &w).unwrap().2,
        Vec::<String>::new()
    );
    let (expected, _, unmanaged) = expected_pod_count(&pdb(None, int(1)), &refs, &w).unwrap();
    assert_eq!((expected, unmanaged), (3, vec!["bare".to_string()]));

    // Job pods: jobs have no scale subresource.
    let job_pod = {
        let mut p = pod("pi-abcde").running_ready(0).build();
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: "pi".into(),
            uid: "j1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        p
    };
    assert_eq!(
        expected_pod_count(&pdb(pct("50%"), None), &[&job_pod], &w).unwrap_err(),
        "jobs.batch does not implement the scale subresource"
    );
    // A ReplicaSet that is gone: no controller found.
    let orphan = pod("web-x")
        .running_ready(0)
        .owned_by("ReplicaSet", "gone", "r9")
        .build();
    assert_eq!(
        expected_pod_count(&pdb(None, int(1)), &[&orphan], &w).unwrap_err(),
        "found no controllers for pod \"web-x\""
    );
    // An unknown kind: the REST mapper's error.
    let mut custom = pod("db-0").running_ready(0).build();
    custom.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Database".into(),
        name: "db".into(),
        uid: "x1".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    assert_eq!(
        expected_pod_count(&pdb(None, int(1)), &[&custom], &w).unwrap_err(),
        "no matches for kind \"Database\" in version \"example.com/v1\""
    );
}

#[test]
fn scaled_values_round_and_reject_non_percentages() {
    let s = |v: &str, total, up| scaled_value(&IntOrString::String(v.into()), total, up);
    assert_eq!(s("50%", 7, true), Ok(4));
    assert_eq!(s("50%", 7, false), Ok(3));
    assert_eq!(s("0%", 7, true), Ok(0));
    assert_eq!(s("100%", i32::MAX, true), Ok(i32::MAX));
    assert_eq!(
        s("50", 7, true).unwrap_err(),
        "invalid value for IntOrString: invalid type: string is not a percentage"
    );
    assert_eq!(
        s("x%", 7, true).unwrap_err(),
        "invalid value for IntOrString: invalid value \"x%\": strconv.Atoi: parsing \"x\": invalid syntax"
    );
}

#[test]
fn disrupted_pods_hold_for_two_minutes_then_are_dropped() {
    let ps = pods(3, 0);
    let refs: Vec<&Pod> = ps.iter().collect();
    let mut b = pdb(int(1), None);
    b.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(
            [
                ("web-0".to_string(), Time(ts(100))),
                ("web-1".to_string(), Time(ts(10))),
                ("gone".to_string(), Time(ts(100))),
            ]
            .into(),
        ),
        ..Default::default()
    });
    let (map, recheck, not_deleted) = disrupted_pod_map(&refs, &b, ts(150));
    // web-1's entry is 140 s old: dropped with a NotDeleted warning; `gone` has no pod.
    assert_eq!(map.keys().collect::<Vec<_>>(), vec!["web-0"]);
    assert_eq!(not_deleted, vec!["web-1".to_string()]);
    // Sync again just after web-0's entry expires (100 + 120 s).
    assert_eq!(
        recheck,
        Some(
            ts(220)
                .checked_add(jiff::SignedDuration::from_millis(1))
                .unwrap()
        )
    );
    // web-0 does not count as healthy while its entry holds.
    assert_eq!(count_healthy(&refs, &map, ts(150)), 2);
    assert_eq!(count_healthy(&refs, &BTreeMap::new(), ts(150)), 3);
    // A deleting pod never counts, and its entry is not kept.
    let mut deleting = ps.clone();
    deleting[0].metadata.deletion_timestamp = Some(Time(ts(120)));
    let refs: Vec<&Pod> = deleting.iter().collect();
    let (map, _, _) = disrupted_pod_map(&refs, &b, ts(150));
    assert!(map.is_empty());
    assert_eq!(count_healthy(&refs, &map, ts(150)), 2);
}

#[test]
fn status_is_rewritten_only_when_something_changed() {
    let b0 = pdb(int(1), None);
    let st = new_status(&b0, 3, 1, 3, BTreeMap::new(), ts(5)).unwrap();
    assert_eq!(st.disruptions_allowed, 2);
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("True", "SufficientPods", "")
    );
    assert_eq!(c.last_transition_time, Time(ts(5)));
    let mut b1 = b0.clone();
    b1.status = Some(st);
    assert!(new_status(&b1, 3, 1, 3, BTreeMap::new(), ts(9)).is_none());
    // A new generation must be observed even when the numbers are equal.
    b1.metadata.generation = Some(2);
    let st = new_status(&b1, 3, 1, 3, BTreeMap::new(), ts(9)).unwrap();
    assert_eq!(st.observed_generation, Some(2));
    // The condition keeps its transition time while its status holds.
    assert_eq!(
        st.conditions.as_ref().unwrap()[0].last_transition_time,
        Time(ts(5))
    );
    // Going to 0 flips it.
    b1.status = Some(st);
    let st = new_status(&b1, 1, 1, 3, BTreeMap::new(), ts(20)).unwrap();
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InsufficientPods")
    );
    assert_eq!(c.last_transition_time, Time(ts(20)));
}

#[test]
fn fail_safe_allows_nothing_and_says_why() {
    let mut b = pdb(pct("50%"), None);
    b.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: 2,
        observed_generation: Some(1),
        conditions: Some(vec![Condition {
            type_: "DisruptionAllowed".into(),
            status: "True".into(),
            reason: "SufficientPods".into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(ts(0)),
        }]),
        ..Default::default()
    });
    let st = fail_safe_status(
        &b,
        "jobs.batch does not implement the scale subresource",
        ts(7),
    );
    assert_eq!(st.disruptions_allowed, 0);
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        (
            "False",
            "SyncFailed",
            "jobs.batch does not implement the scale subresource"
        )
    );
    assert_eq!(c.last_transition_time, Time(ts(7)));
    // Once the sync succeeds again the condition is not "up to date" and is rewritten.
    b.status = Some(st);
    assert!(new_status(&b, 3, 1, 3, BTreeMap::new(), ts(9)).is_some());
}

#[test]
fn stale_disruption_target_conditions() {
    use k8s_openapi::api::core::v1::PodCondition;
    let with = |status: &str, reason: &str| {
        let mut p = pod("web-0").running_ready(0).build();
        p.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: status.into(),
                reason: Some(reason.into()),
                last_transition_time: Some(Time(ts(30))),
                ..Default::default()
            });
        p
    };
    assert_eq!(
        stale_disruption_at(&with("True", "EvictionByEvictionAPI")),
        Some(ts(150))
    );
    assert_eq!(
        stale_disruption_at(&with("False", "EvictionByEvictionAPI")),
        None
    );
    assert_eq!(
        stale_disruption_at(&with("True", "TerminationByKubelet")),
        None
    );
    let mut deleting = with("True", "EvictionByEvictionAPI");
    deleting.metadata.deletion_timestamp = Some(Time(ts(40)));
    assert_eq!(stale_disruption_at(&deleting), None);
    let mut done = with("True", "EvictionByEvictionAPI");
    done.status.as_mut().unwrap().phase = Some("Failed".into());
    assert_eq!(stale_disruption_at(&done), None);
}

#[test]
fn selectors_follow_policy_v1() {
    let p = pod("web-0").build();
    let mut b = pdb(int(1), None);
    assert!(selects(&b, &p));
    // An empty selector selects every pod of the namespace, a missing one none.
    b.spec.as_mut().unwrap().selector = Some(LabelSelector::default());
    assert!(selects(&b, &p));
    b.spec.as_mut().unwrap().selector = None;
    assert!(!selects(&b, &p));
}

#[test]
fn selector_prints_as_go_does() {
    let sel = LabelSelector {
        match_labels: Some([("app".to_string(), "nginx".to_string())].into()),
        ..Default::default()
    };
    assert_eq!(
        go_selector(Some(&sel)),
        "&LabelSelector{MatchLabels:map[string]string{app: nginx,},MatchExpressions:[]LabelSelectorRequirement{},}"
    );
}

#[test]
fn served_kinds_agree_with_the_api_server() {
    for (group, kind, plural, has_scale) in SERVED_KINDS {
        let ri = klab_apiserver::registry::lookup(group, "v1", plural)
            .unwrap_or_else(|| panic!("{plural}.{group} is not served"));
        assert_eq!(ri.kind, *kind);
        assert_eq!(ri.has_subresource("scale"), *has_scale, "{kind}");
    }
    for ri in klab_apiserver::registry::RESOURCES {
        if ri.has_subresource("scale") {
            assert!(
                SERVED_KINDS
                    .iter()
                    .any(|(g, k, _, s)| *g == ri.group && *k == ri.kind && *s),
                "{} has a scale subresource but is not a known workload kind",
                ri.kind
            );
        }
    }
}

mod live {
    //! The controller against klab's in-process API server: budgets computed from real pods, and
    //! the eviction subresource consuming them.
    use super::*;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    use crate::replicaset::testkit::harness;

    async fn settle(clock: &klab_api::Clock) {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let _ = clock;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn budget_blocks_then_allows_evictions() {
        let h = harness().await;
        let deps: Api<Deployment> = Api::namespaced(h.client.clone(), "default");
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        }))
        .unwrap();
        let d = deps.create(&PostParams::default(), &d).await.unwrap();
        let rss: Api<ReplicaSet> = Api::namespaced(h.client.clone(), "default");
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web-rs", "namespace": "default",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": d.metadata.uid, "controller": true}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        }))
        .unwrap();
        let rs = rss.create(&PostParams::default(), &rs).await.unwrap();
        let pods: Api<Pod> = Api::namespaced(h.client.clone(), "default");
        for i in 0..3 {
            let p: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("web-{i}"), "labels": {"app": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                                                  "uid": rs.metadata.uid, "controller": true}]},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &p).await.unwrap();
            let now = klab_api::clock::format_time(h.clock.now());
            pods.patch_status(
                &format!("web-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})),
            )
            .await
            .unwrap();
        }
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(h.client.clone(), "default");
        let b: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "web-pdb"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}
        }))
        .unwrap();
        pdbs.create(&PostParams::default(), &b).await.unwrap();

        tokio::spawn(super::super::run(
            h.client.clone(),
            h.informers.clone(),
            h.clock.clone(),
            h.recorder(super::super::EVENT_COMPONENT),
        ));
        settle(&h.clock).await;
        let st = pdbs.get("web-pdb").await.unwrap().status.unwrap();
        assert_eq!(
            (
                st.current_healthy,
                st.desired_healthy,
                st.expected_pods,
                st.disruptions_allowed
            ),
            (3, 2, 3, 1)
        );
        assert_eq!(st.observed_generation, Some(1));

        // First eviction: allowed, consumes the budget and is recorded in disruptedPods.
        let evict = |name: &str| {
            let pods = pods.clone();
            let name = name.to_string();
            async move { pods.evict(&name, &Default::default()).await }
        };
        evict("web-0").await.unwrap();
        settle(&h.clock).await;
        let st = pdbs.get("web-pdb").await.unwrap().status.unwrap();
        // web-0 is Terminating (no kubelet here), so it no longer counts.
        assert_eq!((st.current_healthy, st.disruptions_allowed), (2, 0));
        // Second eviction: blocked by the budget with upstream's cause.
        let err = evict("web-1").await.unwrap_err();
        let kube::Error::Api(s) = err else {
            panic!("expected an API error, got {err:?}")
        };
        assert_eq!(s.code, 429);
        assert_eq!(
            s.message,
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        // The budget allows one more once the evicted pod's replacement is Ready.
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-3", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                                              "uid": rs.metadata.uid, "controller": true}]},
            "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "nginx"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
        let now = klab_api::clock::format_time(h.clock.now());
        pods.patch_status(
            "web-3",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})),
        )
        .await
        .unwrap();
        settle(&h.clock).await;
        let st = pdbs.get("web-pdb").await.unwrap().status.unwrap();
        assert_eq!((st.current_healthy, st.disruptions_allowed), (3, 1));
        evict("web-1").await.unwrap();
    }
}
