//! Property tests: every comparator the controllers sort with is a total order (Rust's sorts may
//! panic on one that is not), and sorting any permutation of an input gives the same order.
//! Inputs collide on purpose: a few names, a few timestamps, missing fields.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use klab_api::order::{check_total_order, same_order};
use proptest::prelude::*;

use crate::{daemonset, deployment, job, pod_gc, replicaset, statefulset};

fn ts(i: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + i).unwrap()
}

/// A time among a few (so that many collide), or none.
fn arb_time() -> impl Strategy<Value = Option<Timestamp>> {
    prop::option::of((0..3i64).prop_map(ts))
}

fn arb_pod() -> impl Strategy<Value = Pod> {
    (
        (0..4u8, 0..3u8, arb_time()),
        (
            prop::sample::select(vec![None, Some(""), Some("n1"), Some("n2")]),
            prop::sample::select(vec!["Pending", "Running", "Unknown", "", "Succeeded"]),
        ),
        (any::<bool>(), arb_time(), 0..3i32),
        prop::option::of(-1..2i32),
    )
        .prop_map(
            |((name, uid, created), (node, phase), (ready, ready_at, restarts), cost)| Pod {
                metadata: ObjectMeta {
                    name: Some(format!("p{name}")),
                    uid: Some(format!("u{uid}")),
                    creation_timestamp: created.map(Time),
                    annotations: cost.map(|c| {
                        BTreeMap::from([(
                            replicaset::decide::POD_DELETION_COST.to_string(),
                            c.to_string(),
                        )])
                    }),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    node_name: node.map(str::to_string),
                    ..Default::default()
                }),
                status: Some(PodStatus {
                    phase: Some(phase.into()),
                    conditions: Some(vec![PodCondition {
                        type_: "Ready".into(),
                        status: if ready { "True" } else { "False" }.into(),
                        last_transition_time: ready_at.map(Time),
                        ..Default::default()
                    }]),
                    container_statuses: Some(vec![ContainerStatus {
                        name: "c".into(),
                        restart_count: restarts,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
        )
}

fn arb_rs() -> impl Strategy<Value = ReplicaSet> {
    (
        0..4u8,
        arb_time(),
        prop::option::of(0..3i32),
        prop::sample::select(vec![None, Some("1"), Some("2"), Some("x"), Some("")]),
    )
        .prop_map(|(name, created, replicas, revision)| ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("rs{name}")),
                creation_timestamp: created.map(Time),
                annotations: revision.map(|r| {
                    BTreeMap::from([(
                        klab_api::names::ANN_DEPLOYMENT_REVISION.to_string(),
                        r.to_string(),
                    )])
                }),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas,
                ..Default::default()
            }),
            status: None,
        })
}

/// A vector and a shuffled copy of it.
fn with_shuffle<T: Clone + std::fmt::Debug>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = (Vec<T>, Vec<T>)> {
    prop::collection::vec(s, 0..10).prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
}

/// Total on `items`, and the same order from both permutations.
fn assert_total<T: std::fmt::Debug>(
    items: &[T],
    shuffled: &[T],
    cmp: impl Fn(&T, &T) -> Ordering + Copy,
) -> Result<(), TestCaseError> {
    check_total_order(items, cmp).map_err(TestCaseError::fail)?;
    let mut a: Vec<&T> = items.iter().collect();
    let mut b: Vec<&T> = shuffled.iter().collect();
    a.sort_by(|x, y| cmp(x, y));
    b.sort_by(|x, y| cmp(x, y));
    prop_assert!(same_order(&a, &b, |x, y| cmp(x, y)), "{a:?} vs {b:?}");
    Ok(())
}

proptest! {
    #[test]
    fn daemon_pods_oldest_first((v, s) in with_shuffle(arb_pod())) {
        let member = |v: &[Pod]| -> Vec<daemonset::decide::Member> {
            v.iter().map(daemonset::decide::Member::of).collect()
        };
        assert_total(&member(&v), &member(&s), daemonset::decide::oldest_first)?;
    }

    #[test]
    fn job_pod_orders((v, s) in with_shuffle(arb_pod())) {
        assert_total(&v, &s, job::decide::creation_order)?;
        assert_total(&v, &s, |a, b| job::decide::removal_key(a).cmp(&job::decide::removal_key(b)))?;
    }

    #[test]
    fn replicaset_deletion_keys((v, s) in with_shuffle(arb_pod())) {
        // Keys are computed once for the candidate set; sorting any permutation of the set by
        // them gives the same pods in the same order.
        let now = ts(10);
        let rank = |p: &Pod| usize::from(p.metadata.name.as_deref() == Some("p0"));
        fn keyed(
            pods: &[Pod],
            rank: impl Fn(&Pod) -> usize,
            now: Timestamp,
        ) -> Vec<(replicaset::decide::DeletionKey, &Pod)> {
            let ranked: Vec<(&Pod, usize)> = pods.iter().map(|p| (p, rank(p))).collect();
            let keys = replicaset::decide::deletion_keys(&ranked, now);
            let mut order: Vec<(replicaset::decide::DeletionKey, &Pod)> =
                keys.into_iter().zip(pods).collect();
            order.sort_by(|a, b| a.0.cmp(&b.0));
            order
        }
        let (a, b) = (keyed(&v, rank, now), keyed(&s, rank, now));
        prop_assert!(same_order(&a, &b, |x, y| x.0.cmp(&y.0)));
        let keys: Vec<_> = a.into_iter().map(|(k, _)| k).collect();
        check_total_order(&keys, Ord::cmp).map_err(TestCaseError::fail)?;
        let active: Vec<&Pod> = v.iter().collect();
        let shuffled: Vec<&Pod> = s.iter().collect();
        let names = |ps: Vec<&Pod>| -> Vec<Option<String>> {
            ps.into_iter().map(|p| p.metadata.name.clone()).collect()
        };
        // Equal keys name the same pod (the name is part of the key): the victims are the same.
        prop_assert_eq!(
            names(replicaset::decide::pods_to_delete(&active, &active, 3, now)),
            names(replicaset::decide::pods_to_delete(&shuffled, &shuffled, 3, now))
        );
    }

    #[test]
    fn pod_gc_orders((v, s) in with_shuffle(arb_pod())) {
        assert_total(&v, &s, |a, b| pod_gc::decide::by_eviction_and_creation(&a, &b))?;
    }

    #[test]
    fn deployment_replicaset_orders((v, s) in with_shuffle(arb_rs())) {
        assert_total(&v, &s, deployment::decide::by_creation)?;
        assert_total(&v, &s, deployment::decide::by_size_newer)?;
        assert_total(&v, &s, deployment::decide::by_size_older)?;
        assert_total(&v, &s, deployment::decide::by_revision)?;
    }

    #[test]
    fn statefulset_history_pruning_ignores_input_order(
        (v, s) in with_shuffle((0..4u8, 0..3i64)),
        limit in -1..4i32,
    ) {
        let named = |v: &[(u8, i64)]| -> Vec<(String, i64)> {
            v.iter().map(|(n, r)| (format!("r{n}"), *r)).collect()
        };
        let live = vec!["r0".to_string()];
        let mut a = statefulset::decide::revisions_to_prune(limit, &named(&v), &live);
        let mut b = statefulset::decide::revisions_to_prune(limit, &named(&s), &live);
        // Duplicated (name, revision) pairs may be picked in either order; the multiset is fixed.
        a.sort();
        b.sort();
        prop_assert_eq!(a, b);
    }
}
