//! Virtual-time tests of the Job controller against klab's in-process API server (pod phases are
//! PATCHed by the test, as a kubelet would).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use klab_api::{Clock, DetRng};
use klab_apiserver::identity::Identity;

use super::{JobControllerConfig, run};
use crate::events::EventRecorder;

async fn job_pods(admin: &kube::Client) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let mut v = api
        .list(&ListParams::default().labels("job-name=pi"))
        .await
        .unwrap()
        .items;
    v.sort_by_key(|p| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    });
    v
}

async fn fail(admin: &kube::Client, clock: &Clock, p: &Pod) {
    let api: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let now = klab_api::clock::format_time(clock.now());
    let st = json!({"status": {"phase": "Failed", "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": now}}}]}});
    api.patch_status(
        p.metadata.name.as_deref().unwrap(),
        &PatchParams::default(),
        &Patch::Merge(&st),
    )
    .await
    .unwrap();
}

#[tokio::test(start_paused = true)]
async fn restart_never_replaces_failed_pods_until_the_backoff_limit() {
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
        JobControllerConfig::default(),
        recorder,
    ));
    let jobs: Api<Job> = Api::namespaced(admin.clone(), "default");
    let job: Job = serde_json::from_value(json!({"metadata": {"name": "pi", "namespace": "default"},
        "spec": {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    clock.sleep(Duration::from_secs(1)).await;
    let pods = job_pods(&admin).await;
    assert_eq!(pods.len(), 1);
    assert_eq!(
        pods[0].metadata.finalizers.as_deref(),
        Some(&["batch.kubernetes.io/job-tracking".to_string()][..])
    );
    let st = jobs.get("pi").await.unwrap().status.unwrap();
    assert_eq!(st.active, Some(1));
    assert!(st.start_time.is_some());

    // Failure 1 at t=1 s: replacement after the 10 s pod-failure back-off (t=11 s).
    let t_fail = clock.now();
    fail(&admin, &clock, &pods[0]).await;
    clock.sleep(Duration::from_secs(9)).await;
    assert_eq!(job_pods(&admin).await.len(), 1, "still backing off");
    clock.sleep(Duration::from_secs(2)).await;
    let pods = job_pods(&admin).await;
    assert_eq!(pods.len(), 2);
    let created = pods[1].metadata.creation_timestamp.as_ref().unwrap().0;
    assert_eq!(created.duration_since(t_fail).as_secs(), 10);
    assert!(
        pods[0]
            .metadata
            .finalizers
            .as_ref()
            .is_none_or(|f| f.is_empty()),
        "counted pod released"
    );
    let st = jobs.get("pi").await.unwrap().status.unwrap();
    assert_eq!((st.failed, st.active), (Some(1), Some(1)));

    // Failure 2: 20 s back-off; failure 3 exceeds backoffLimit 2.
    fail(&admin, &clock, &pods[1]).await;
    clock.sleep(Duration::from_secs(21)).await;
    let pods = job_pods(&admin).await;
    assert_eq!(pods.len(), 3);
    fail(&admin, &clock, &pods[2]).await;
    clock.sleep(Duration::from_secs(60)).await;
    assert_eq!(
        job_pods(&admin).await.len(),
        3,
        "no pod after the backoff limit"
    );
    let st = jobs.get("pi").await.unwrap().status.unwrap();
    assert_eq!(st.failed, Some(3));
    let conds: Vec<(String, String)> = st
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.reason.unwrap_or_default()))
        .collect();
    assert_eq!(
        conds,
        vec![
            (
                "FailureTarget".to_string(),
                "BackoffLimitExceeded".to_string()
            ),
            ("Failed".to_string(), "BackoffLimitExceeded".to_string())
        ]
    );
}
