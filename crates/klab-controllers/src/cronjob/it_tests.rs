//! Virtual-time tests of the CronJob controller against klab's in-process API server (Job
//! completion is PATCHed by the test, as the Job controller would write it).

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::{Clock, DetRng};
use klab_apiserver::identity::Identity;

use super::run;
use crate::events::EventRecorder;

async fn job_names(admin: &kube::Client) -> Vec<String> {
    let api: Api<Job> = Api::namespaced(admin.clone(), "default");
    let mut v: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect();
    v.sort();
    v
}

async fn complete(admin: &kube::Client, clock: &Clock, name: &str) {
    let api: Api<Job> = Api::namespaced(admin.clone(), "default");
    let now = klab_api::clock::format_time(clock.now());
    let st = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                       {"type": "Complete", "status": "True", "lastTransitionTime": now}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
}

async fn reasons(admin: &kube::Client) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), "default");
    let mut evs = api.list(&ListParams::default()).await.unwrap().items;
    evs.sort_by_key(|e| {
        (
            e.last_timestamp.as_ref().map(|t| t.0),
            e.metadata.name.clone(),
        )
    });
    evs.into_iter().filter_map(|e| e.reason).collect()
}

#[tokio::test(start_paused = true)]
async fn jobs_start_on_schedule_forbid_waits_and_history_is_trimmed() {
    let server = klab_apiserver::testing::memory_server().await;
    let clock = server.clock().clone();
    let admin = kube::Client::new(server.router_as(Identity::admin()), "default");
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
        recorder,
    ));
    // Start just after a minute boundary, so the schedule's times are whole minutes ahead.
    let now = clock.now().as_second();
    clock
        .sleep(Duration::from_secs(
            u64::try_from(60 - now.rem_euclid(60) + 1).unwrap(),
        ))
        .await;
    let cjs: Api<CronJob> = Api::namespaced(admin.clone(), "default");
    let cj: CronJob = serde_json::from_value(json!({"metadata": {"name": "tick"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
                 "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "busybox"}]}}}}}}))
    .unwrap();
    cjs.create(&PostParams::default(), &cj).await.unwrap();
    let minute = |offset: i64| format!("tick-{}", (clock.now().as_second() / 60) + offset);
    // Nothing before the first minute.
    clock.sleep(Duration::from_secs(30)).await;
    assert!(job_names(&admin).await.is_empty());
    clock.sleep(Duration::from_secs(31)).await;
    let first = minute(0);
    assert_eq!(job_names(&admin).await, std::slice::from_ref(&first));
    let st = cjs.get("tick").await.unwrap().status.unwrap();
    assert_eq!(st.active.unwrap().len(), 1);
    assert_eq!(st.last_schedule_time.unwrap().0.as_second() % 60, 0);
    // Forbid: the next minute passes without a second Job while the first runs.
    clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(job_names(&admin).await, std::slice::from_ref(&first));
    assert!(
        reasons(&admin)
            .await
            .contains(&"JobAlreadyActive".to_string())
    );
    // Once it completes, the missed time of this minute starts at once (as upstream: the most
    // recent unmet time); the history then keeps only the newest success.
    complete(&admin, &clock, &first).await;
    let second = minute(0);
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(job_names(&admin).await, [first.clone(), second.clone()]);
    complete(&admin, &clock, &second).await;
    clock.sleep(Duration::from_secs(1)).await;
    assert_eq!(job_names(&admin).await, std::slice::from_ref(&second));
    let st = cjs.get("tick").await.unwrap().status.unwrap();
    assert!(st.active.is_none());
    assert!(st.last_successful_time.is_some());
    let r = reasons(&admin).await;
    for want in ["SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"] {
        assert!(r.contains(&want.to_string()), "{want} in {r:?}");
    }
    assert!(!r.contains(&"UnexpectedJob".to_string()), "{r:?}");
    // Suspended: no more Jobs.
    cjs.patch(
        "tick",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    clock.sleep(Duration::from_secs(180)).await;
    assert_eq!(job_names(&admin).await, [second]);
}
