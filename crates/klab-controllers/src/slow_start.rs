//! Upstream's `slowStartBatch` as one async runner for the controllers that create pods in
//! batches (ReplicaSet, DaemonSet, Job): the calls of each batch run concurrently, batches one
//! after the other, and a batch with a failure ends the run. Beside it, the one creation those
//! controllers batch (POST and its event) and what their expectations make of the results.
//!
//! Why concurrently: each pod creation is a POST and its `SuccessfulCreate` Event another, and a
//! controller that awaited them one by one was bounded by request latency (about 70 pods/s live
//! at 5 000 nodes) rather than by its client's rate limit, as upstream is. Determinism in sim
//! holds: the batch's futures are polled in item order on the one current-thread runtime, and
//! the client's rate limiter hands out tokens in the order they are asked for.

use std::future::Future;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, PostParams};

use klab_api::names;
use klab_runtime::create::create_for_name;

use crate::events::EventRecorder;
use crate::replicaset::api_error_text;
use crate::replicaset::decide::slow_start_batches;

/// Runs `op` on each item in slow-start batches of `initial`, doubling: the calls of one batch
/// run concurrently; after a batch in which any call failed no further item is attempted.
/// Returns the outcome of each attempted item, in item order (shorter than `items` when a
/// failure stopped the run).
pub async fn slow_start<T, O, E, F, Fut>(
    items: Vec<T>,
    initial: usize,
    mut op: F,
) -> Vec<Result<O, E>>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = Result<O, E>>,
{
    let mut out = Vec::with_capacity(items.len());
    let batches = slow_start_batches(items.len(), initial);
    let mut items = items.into_iter();
    for batch in batches {
        let calls: Vec<Fut> = items.by_ref().take(batch).map(&mut op).collect();
        let results = futures::future::join_all(calls).await;
        let failed = results.iter().any(Result::is_err);
        out.extend(results);
        if failed {
            break;
        }
    }
    out
}

/// How many of `planned` creations will never be observed in the informer: each failed one, and
/// each one of the batches not attempted (what the creator's expectations must stop waiting for).
pub fn never_observed<O, E>(results: &[Result<O, E>], planned: usize) -> i64 {
    let n = results
        .iter()
        .filter(|r| r.is_err())
        .count()
        .saturating_add(planned.saturating_sub(results.len()));
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// One creation of a batch: POSTs the pod and records upstream's `SuccessfulCreate`
/// ("Created pod: NAME") or `FailedCreate` ("Error creating: MESSAGE") about its owner.
/// Returns the created pod's name, or the failure's message.
pub async fn create_pod_recorded(
    api: &Api<Pod>,
    pod: &Pod,
    recorder: &EventRecorder,
    owner: &ObjectReference,
) -> Result<String, String> {
    match create_for_name(api, &PostParams::default(), pod).await {
        Ok(name) => {
            let msg = format!("Created pod: {name}");
            recorder
                .record(
                    owner,
                    names::EVENT_NORMAL,
                    names::EVENT_SUCCESSFUL_CREATE,
                    msg,
                )
                .await;
            Ok(name)
        }
        Err(e) => {
            let text = api_error_text(&e);
            let msg = format!("Error creating: {text}");
            recorder
                .record(owner, names::EVENT_WARNING, names::EVENT_FAILED_CREATE, msg)
                .await;
            Err(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::time::Duration;

    use super::*;

    /// Failures and the planned creations a failure kept from being attempted are never
    /// observed; successes are.
    #[test]
    fn never_observed_counts_failures_and_unattempted_items() {
        let r: Vec<Result<(), ()>> = vec![Ok(()), Err(()), Ok(()), Err(())];
        assert_eq!(never_observed(&r, 4), 2);
        assert_eq!(never_observed(&r, 7), 5);
        assert_eq!(never_observed::<(), ()>(&[], 3), 3);
        assert_eq!(never_observed(&[Ok::<(), ()>(())], 1), 0);
        // More results than planned cannot happen; it must still not underflow.
        assert_eq!(never_observed(&r, 0), 2);
    }

    /// Each call records when it started and ended; calls of one batch overlap in time, calls
    /// of different batches do not, and a failure stops the run after its batch.
    #[tokio::test(start_paused = true)]
    async fn batches_run_concurrently_and_stop_after_a_failing_one() {
        let log = RefCell::new(Vec::new());
        let t0 = tokio::time::Instant::now();
        let results = slow_start((0..20).collect(), 1, |i: u32| {
            let log = &log;
            async move {
                log.borrow_mut().push(("start", i, t0.elapsed()));
                tokio::time::sleep(Duration::from_secs(1)).await;
                log.borrow_mut().push(("end", i, t0.elapsed()));
                if i == 4 { Err(i) } else { Ok(i * 10) }
            }
        })
        .await;
        // Batches 1, 2, 4: item 4 fails in the third batch (items 3..=6), so 8..20 never start.
        assert_eq!(
            results,
            vec![Ok(0), Ok(10), Ok(20), Ok(30), Err(4), Ok(50), Ok(60)]
        );
        let log = log.into_inner();
        let starts: Vec<(u32, u64)> = log
            .iter()
            .filter(|e| e.0 == "start")
            .map(|e| (e.1, e.2.as_secs()))
            .collect();
        assert_eq!(
            starts,
            vec![(0, 0), (1, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 2)],
            "one batch per virtual second, its calls started together, in item order"
        );
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test]
    async fn nothing_to_do_and_all_succeeding() {
        let none: Vec<Result<u8, ()>> =
            slow_start(Vec::<u8>::new(), 1, |i| async move { Ok(i) }).await;
        assert!(none.is_empty());
        let all: Vec<Result<usize, ()>> =
            slow_start((0..100).collect(), 1, |i: usize| async move { Ok(i) }).await;
        assert_eq!(all, (0..100).map(Ok).collect::<Vec<_>>());
    }
}
