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
