//! Property tests: the scheduler's orders are total and do not depend on input order where
//! upstream's do not (colliding names, priorities and times included).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use klab_api::order::check_total_order;
use proptest::prelude::*;

use crate::nodeinfo::NodeInfo;
use crate::queue::{QueueConfig, SchedulingQueue};

fn pod(ns: Option<u8>, name: Option<u8>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: ns.map(|n| format!("ns{n}")),
            name: name.map(|n| format!("p{n}")),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn names(ni: &NodeInfo) -> Vec<(Option<String>, Option<String>)> {
    ni.pods
        .iter()
        .map(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()))
        .collect()
}

proptest! {
    /// A node's pods are kept in one order whatever order the cache hands them over in.
    #[test]
    fn node_pods_order_is_total(
        (v, s) in prop::collection::vec((prop::option::of(0..2u8), prop::option::of(0..3u8)), 0..10)
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        let build = |v: &[(Option<u8>, Option<u8>)]| {
            NodeInfo::new(Node::default(), v.iter().map(|(n, p)| pod(*n, *p)).collect())
        };
        let (a, b) = (build(&v), build(&s));
        prop_assert_eq!(names(&a), names(&b));
        let keys = names(&a);
        check_total_order(&keys, Ord::cmp).map_err(TestCaseError::fail)?;
        prop_assert!(keys.windows(2).all(|w| w[0] <= w[1]));
    }

    /// activeQ pops by priority (highest first), then by the time the pod was queued, then in
    /// arrival order — a total order over the queued pods, equal priorities and times included.
    #[test]
    fn active_queue_pops_by_priority_then_time_then_arrival(
        pods in prop::collection::vec((prop::sample::select(vec![i32::MIN, -1, 0, 7, i32::MAX]), 0..3u64), 0..12)
    ) {
        let mut q = SchedulingQueue::new(QueueConfig::default());
        let mut added: Vec<(i32, u64, usize)> = Vec::new();
        let mut now = 0;
        for (i, (prio, dt)) in pods.iter().enumerate() {
            now += dt;
            q.add(&format!("ns/p{i}"), *prio, Duration::from_secs(now));
            added.push((*prio, now, i));
        }
        let mut want = added.clone();
        want.sort_by_key(|(p, t, i)| (std::cmp::Reverse(*p), *t, *i));
        let mut got = Vec::new();
        while let Some(k) = q.pop(Duration::from_secs(now)) {
            got.push(k);
        }
        let want: Vec<String> = want.iter().map(|(_, _, i)| format!("ns/p{i}")).collect();
        prop_assert_eq!(got, want);
    }
}

/// Quantities and durations at their extremes: scores and fits saturate instead of overflowing
/// (`(capacity - requested) * 100` overflowed for a node of 1E memory), queue ticks saturate
/// instead of wrapping into the past.
#[test]
fn extreme_quantities_and_durations() {
    use crate::nodeinfo::Resources;
    use crate::plugins;
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "9223372036854775807", "memory": "9223372036854775807", "pods": "110"}}
    }))
    .unwrap();
    let big: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "big", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "9223372036854775807", "memory": "9E"}}},
                                {"name": "d", "resources": {"requests": {"cpu": "9223372036854775807", "memory": "9E"}}}]}
    }))
    .unwrap();
    let ni = NodeInfo::new(node.clone(), vec![big.clone(), big.clone()]);
    let req = Resources {
        milli_cpu: i64::MAX,
        memory: i64::MAX,
    };
    assert!(plugins::filter_node_resources_fit(req, &ni).is_some());
    let empty = NodeInfo::new(node, vec![]);
    let small = Resources {
        milli_cpu: 1,
        memory: 1,
    };
    assert_eq!(
        plugins::score_least_allocated(small, &empty),
        plugins::MAX_NODE_SCORE - 1
    );
    assert_eq!(plugins::score_least_allocated(req, &ni), 0);
    assert!(plugins::score_balanced_allocation(req, &ni).is_some());
    let mut scores = [i64::MAX, 1, 0];
    plugins::default_normalize(&mut scores, true);
    assert_eq!(scores[2], plugins::MAX_NODE_SCORE);
    let _ = crate::framework::score_nodes(
        &big,
        std::slice::from_ref(&ni),
        &[0],
        &crate::nodeinfo::ZoneSpread::of(std::slice::from_ref(&ni)),
    );
    // A queue configured with the longest backoffs.
    let mut q = SchedulingQueue::new(QueueConfig {
        pod_initial_backoff: Duration::MAX,
        pod_max_backoff: Duration::MAX,
        pod_max_in_unschedulable_pods_duration: Duration::MAX,
        pop_from_backoff_q: true,
    });
    assert_eq!(q.backoff_duration(u32::MAX), Duration::MAX);
    q.add("ns/p", 0, Duration::from_secs(5));
    assert_eq!(q.pop(Duration::from_secs(5)).as_deref(), Some("ns/p"));
    q.failed(
        "ns/p",
        [crate::plugins::Plugin::NodeResourcesFit].into(),
        Duration::from_secs(6),
    );
    let wake = q.next_wakeup().unwrap_or(Duration::MAX);
    assert!(wake >= Duration::from_secs(6), "{wake:?}");
    q.flush(Duration::MAX);
    // An error sends a pod to backoffQ: its expiry is the end of time, not an overflow.
    q.add("ns/e", 0, Duration::from_secs(7));
    assert!(q.pop(Duration::from_secs(7)).is_some());
    q.failed("ns/e", Default::default(), Duration::from_secs(7));
    assert!(q.next_wakeup().is_some());
    q.flush(Duration::from_secs(8));
}
