//! End-to-end tests of the Router through unmodified kube-rs clients over the in-process
//! transport: every verb, the write rules, graceful deletion, watch semantics and bad input.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use serde_json::{Value, json};

use crate::ApiServer;
use crate::identity::Identity;
use crate::testing::memory_server;

fn client(api: &ApiServer) -> kube::Client {
    kube::Client::new(api.router_as(Identity::admin()), "default")
}

fn api_err(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}
    }))
    .unwrap()
}

fn bound_pod(name: &str, node: &str) -> Pod {
    let mut p = pod(name);
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    p
}

/// POSTs `body` as JSON to `uri`.
async fn post_json(api: &ApiServer, uri: &str, body: &Value) -> (u16, Value) {
    raw(
        api,
        "POST",
        uri,
        "application/json",
        serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// Raw request through the Router, for what typed clients cannot send.
async fn raw(
    api: &ApiServer,
    method: &str,
    uri: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(axum::body::Body::from(body))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()));
    (code, v)
}

#[tokio::test(start_paused = true)]
async fn bootstrap_namespaces_exist() {
    let api = memory_server().await;
    let nss: Api<Namespace> = Api::all(client(&api));
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let d = nss.get("default").await.unwrap();
    assert_eq!(d.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        d.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "default"
    );
}

#[tokio::test(start_paused = true)]
async fn create_sets_server_fields_and_defaults() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    tokio::time::sleep(Duration::from_secs(7)).await;
    let p = pods
        .create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let m = &p.metadata;
    assert_eq!(m.namespace.as_deref(), Some("default"));
    assert_eq!(m.uid.as_ref().unwrap().len(), 36);
    assert_eq!(
        m.creation_timestamp.as_ref().unwrap().0.to_string(),
        "2026-01-01T00:00:07Z"
    );
    assert!(m.resource_version.as_ref().unwrap().parse::<u64>().unwrap() > 0);
    let status = p.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let spec = p.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    // DefaultTolerationSeconds admission.
    let tol = spec.tolerations.unwrap();
    assert_eq!(tol.len(), 2);
    assert_eq!(tol[0].key.as_deref(), Some("node.kubernetes.io/not-ready"));
    assert_eq!(
        tol[1].key.as_deref(),
        Some("node.kubernetes.io/unreachable")
    );
    assert_eq!(tol[1].toleration_seconds, Some(300));
    // Name taken.
    let e = api_err(
        pods.create(&PostParams::default(), &pod("web"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "pods \"web\" already exists");
}

#[tokio::test(start_paused = true)]
async fn generate_name_and_missing_namespace() {
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let mut p = pod("");
    p.metadata.name = None;
    p.metadata.generate_name = Some("web-".into());
    let a = pods.create(&PostParams::default(), &p).await.unwrap();
    let b = pods.create(&PostParams::default(), &p).await.unwrap();
    let (an, bn) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(an.starts_with("web-") && an.len() == 9, "{an}");
    assert_ne!(an, bn);
    let missing: Api<Pod> = Api::namespaced(c, "nope");
    let e = api_err(
        missing
            .create(&PostParams::default(), &pod("x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nope\" not found")
    );
}

#[tokio::test(start_paused = true)]
async fn update_conflict_noop_and_status_split() {
    let api = memory_server().await;
    let nodes: Api<Node> = Api::all(client(&api));
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})).unwrap();
    let created = nodes.create(&PostParams::default(), &n).await.unwrap();
    let rv0 = created.metadata.resource_version.clone().unwrap();
    // A write that changes nothing keeps the resourceVersion.
    let same = nodes
        .replace("n1", &PostParams::default(), &created)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version.as_deref(),
        Some(rv0.as_str())
    );
    // Main-resource writes ignore status.
    let mut changed = created.clone();
    changed.metadata.labels = Some([("zone".to_string(), "a".to_string())].into());
    changed
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    let upd = nodes
        .replace("n1", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(upd.metadata.resource_version.as_deref(), Some(rv0.as_str()));
    assert_eq!(
        upd.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].status,
        "True"
    );
    assert_eq!(upd.metadata.labels.as_ref().unwrap()["zone"], "a");
    // Stale resourceVersion → 409 Conflict with the upstream message.
    let e = api_err(
        nodes
            .replace("n1", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on nodes \"n1\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // The status subresource changes only status.
    let st = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"zone": "b"}}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}})))
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().conditions.unwrap()[0].status, "False");
    assert_eq!(st.metadata.labels.unwrap()["zone"], "a");
}

#[tokio::test(start_paused = true)]
async fn generation_bumps_only_on_spec_change() {
    let api = memory_server().await;
    let deps: Api<Deployment> = Api::default_namespaced(client(&api));
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    })).unwrap();
    let c = deps.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(c.metadata.generation, Some(1));
    let spec = c.spec.as_ref().unwrap();
    assert_eq!(
        spec.strategy.as_ref().unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    assert_eq!(spec.revision_history_limit, Some(10));
    let l = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(l.metadata.generation, Some(1));
    let s = deps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(s.metadata.generation, Some(2));
    // The scale subresource.
    let scale = deps.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    deps.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    let after = deps.get("web").await.unwrap();
    assert_eq!(after.spec.unwrap().replicas, Some(5));
    assert_eq!(after.metadata.generation, Some(3));
}

#[tokio::test(start_paused = true)]
async fn patches_json_merge_strategic() {
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let mut p = pod("web");
    p.spec
        .as_mut()
        .unwrap()
        .containers
        .push(serde_json::from_value(json!({"name": "side", "image": "busybox"})).unwrap());
    pods.create(&PostParams::default(), &p).await.unwrap();
    // Strategic: containers merge by name.
    let s = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}),
            ),
        )
        .await
        .unwrap();
    let cs = s.spec.unwrap().containers;
    assert_eq!(cs.len(), 2);
    assert_eq!(cs[0].image.as_deref(), Some("nginx:1.27"));
    assert_eq!(cs[1].image.as_deref(), Some("busybox:2"));
    // Strategic on pod status conditions (by type) through the status subresource.
    pods.patch_status("web", &PatchParams::default(), &Patch::Strategic(json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}}))).await.unwrap();
    let st = pods
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
        )
        .await
        .unwrap();
    let conds = st.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 2);
    assert_eq!(
        conds.iter().find(|c| c.type_ == "Ready").unwrap().status,
        "True"
    );
    // JSON patch, with a failing test op → 422.
    let j = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "add", "path": "/metadata/labels/tier", "value": "fe"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(j.metadata.labels.unwrap()["tier"], "fe");
    let e = api_err(
        pods.patch(
            "web",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "test", "path": "/metadata/name", "value": "other"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    // Taints and tolerations are replaced wholesale by strategic merge patch.
    let nodes: Api<Node> = Api::all(c);
    nodes.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}})).unwrap()).await.unwrap();
    let n = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})),
        )
        .await
        .unwrap();
    let taints = n.spec.unwrap().taints.unwrap();
    assert_eq!(taints.len(), 1);
    assert_eq!(taints[0].key, "b");
    // Cordon / uncordon bodies as kubectl sends them.
    let n = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.unwrap().unschedulable, Some(true));
    let n = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"unschedulable": null}})),
        )
        .await
        .unwrap();
    assert_eq!(n.spec.unwrap().unschedulable, None);
}

#[tokio::test(start_paused = true)]
async fn graceful_pod_deletion() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &bound_pod("bound", "n1"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("unbound"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Unbound: gone at once (pods return the deleted object).
    let r = pods
        .delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert!(r.is_left());
    assert!(pods.get_opt("unbound").await.unwrap().is_none());
    // Bound: marked with deletionTimestamp = now + 30 s.
    let marked = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        marked.metadata.deletion_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:40Z"
    );
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("bound").await.unwrap().is_some());
    // A shorter grace shortens it.
    let shorter = pods
        .delete(
            "bound",
            &DeleteParams {
                grace_period_seconds: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        shorter.metadata.deletion_timestamp.unwrap().0.to_string(),
        "2026-01-01T00:00:15Z"
    );
    // A uid precondition mismatch is refused.
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let e = api_err(pods.delete("bound", &wrong).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition: nope"),
        "{}",
        e.message
    );
    // The kubelet's final delete: grace 0.
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(pods.get_opt("bound").await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn finalizers_hold_deletion() {
    let api = memory_server().await;
    let deps: Api<Deployment> = Api::default_namespaced(client(&api));
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "finalizers": ["example.com/hold"]},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    })).unwrap();
    deps.create(&PostParams::default(), &d).await.unwrap();
    let r = deps.delete("web", &DeleteParams::default()).await.unwrap();
    let marked = r.left().expect("object returned while finalizers hold it");
    assert!(marked.metadata.deletion_timestamp.is_some());
    deps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(deps.get_opt("web").await.unwrap().is_none());
    // Without finalizers, other kinds answer a Status.
    deps.create(&PostParams::default(), &{
        let mut d = d.clone();
        d.metadata.finalizers = None;
        d
    })
    .await
    .unwrap();
    let r = deps.delete("web", &DeleteParams::default()).await.unwrap();
    let status = r.right().expect("Status for a removed deployment");
    assert_eq!(status.details.unwrap().kind, "deployments");
}

#[tokio::test(start_paused = true)]
async fn list_selectors_and_pagination() {
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for (i, node) in ["n1", "n2", "n1", "n3", "n1"].iter().enumerate() {
        let mut p = bound_pod(&format!("p{i}"), node);
        p.metadata.labels = Some(
            [(
                "app".to_string(),
                if i % 2 == 0 { "a".into() } else { "b".into() },
            )]
            .into(),
        );
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("app=a"))
                .await
                .unwrap()
        ),
        vec!["p0", "p2", "p4"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("app in (b),app!=c"))
                .await
                .unwrap()
        ),
        vec!["p1", "p3"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        vec!["p0", "p2", "p4"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName!=n1,metadata.name!=p1"))
                .await
                .unwrap()
        ),
        vec!["p3"]
    );
    let e = api_err(
        pods.list(&ListParams::default().fields("spec.foo=bar"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    // Pagination: pages of 2, consistent at the first page's revision.
    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    pods.create(&PostParams::default(), &bound_pod("p9", "n1"))
        .await
        .unwrap();
    let second = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(second.clone()), vec!["p2", "p3"]);
    let third = pods
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(second.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        names(third.clone()),
        vec!["p4"],
        "the page sees the snapshot, not the later p9"
    );
    assert!(third.metadata.continue_.is_none() || third.metadata.continue_.as_deref() == Some(""));
    // All namespaces.
    let all: Api<Pod> = Api::all(c);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        6
    );
}

/// Pages of a filtered list follow upstream's etcd3 list: a page ends once it holds `limit`
/// matches, any key after that means a continue token (even when nothing further matches, so the
/// last page may be empty), and there is no `remainingItemCount` (a count of keys left would
/// include objects that do not match). A `spec.nodeName` list skips other nodes' pods without
/// decoding them, and still returns exactly the matching pods: not a pod that merely mentions
/// the node in an annotation, and, for `spec.nodeName=`, the pods no node has.
#[tokio::test(start_paused = true)]
async fn filtered_list_pages_and_node_name_lists() {
    node_name_lists(memory_server().await).await;
}

/// The same on the durable store, which lists one node's pods from its index of pods by node.
#[tokio::test]
async fn filtered_list_pages_and_node_name_lists_on_redb() {
    let dir = tempfile::tempdir().unwrap();
    let store = klab_store::RedbStore::open(dir.path().join("klab.redb")).unwrap();
    let api = crate::ApiServer::new(
        store,
        klab_api::Clock::scaled(1.0),
        klab_api::DetRng::seeded(1),
        Default::default(),
    )
    .await
    .unwrap();
    node_name_lists(api).await;
}

async fn node_name_lists(api: ApiServer) {
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    for (i, node) in ["n1", "n2", "n1", "n2", "n2", ""].iter().enumerate() {
        let mut p = bound_pod(&format!("p{i}"), node);
        if node.is_empty() {
            p.spec.as_mut().unwrap().node_name = None;
        }
        if i == 3 {
            p.metadata.annotations = Some([("nodeName".to_string(), "n1".to_string())].into());
        }
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let names = |l: &kube::core::ObjectList<Pod>| {
        l.items
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    let on = |f: &str| ListParams::default().fields(f);
    assert_eq!(
        names(&pods.list(&on("spec.nodeName=n1")).await.unwrap()),
        ["p0", "p2"]
    );
    assert_eq!(
        names(&pods.list(&on("spec.nodeName=n2")).await.unwrap()),
        ["p1", "p3", "p4"]
    );
    assert_eq!(
        names(&pods.list(&on("spec.nodeName=")).await.unwrap()),
        ["p5"]
    );
    assert_eq!(
        names(&pods.list(&on("spec.host=n1")).await.unwrap()),
        ["p0", "p2"]
    );
    assert!(
        pods.list(&on("spec.nodeName=n9"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        names(&pods.list(&on("metadata.name=p4")).await.unwrap()),
        ["p4"]
    );

    // n1 has two pods, p0 and p2: a page of two ends at p2 and, with keys after it, goes on.
    let first = pods.list(&on("spec.nodeName=n1").limit(2)).await.unwrap();
    assert_eq!(names(&first), ["p0", "p2"]);
    assert_eq!(first.metadata.remaining_item_count, None);
    let token = first.metadata.continue_.clone().expect("keys follow p2");
    let last = pods
        .list(&on("spec.nodeName=n1").limit(2).continue_token(&token))
        .await
        .unwrap();
    assert!(last.items.is_empty(), "{:?}", names(&last));
    assert!(last.metadata.continue_.as_deref().unwrap_or("").is_empty());
    // A page that is not full is the last one.
    let one = pods.list(&on("spec.nodeName=n2").limit(5)).await.unwrap();
    assert_eq!(names(&one), ["p1", "p3", "p4"]);
    assert!(one.metadata.continue_.as_deref().unwrap_or("").is_empty());
    // Unfiltered pages count what is left.
    let page = pods.list(&ListParams::default().limit(4)).await.unwrap();
    assert_eq!(names(&page), ["p0", "p1", "p2", "p3"]);
    assert_eq!(page.metadata.remaining_item_count, Some(2));
    let rest = pods
        .list(
            &ListParams::default()
                .limit(4)
                .continue_token(page.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(&rest), ["p4", "p5"]);
    assert_eq!(rest.metadata.remaining_item_count, None);
}

/// A status patch that touches only `status` (a kubelet's) is normalised through the status's
/// typed model alone, with the same results as the whole object's (debug builds check every such
/// write against it): unknown status fields are dropped, a wrong type is a 400 that stores
/// nothing, a null status removes it, and a patch that also touches other fields goes the whole
/// way (its labels ignored, as for any status write).
/// A write's `Warning` headers and status code, sent raw as JSON.
async fn warnings_of(
    api: &ApiServer,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>) {
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(axum::body::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let warnings = resp
        .headers()
        .get_all(axum::http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    (resp.status().as_u16(), warnings)
}

/// Unknown fields are dropped with a `Warning` per field under `fieldValidation=Warn`, which is
/// the default; silently under `Ignore`; and refuse the write under `Strict` (upstream's
/// field validation). A status patch's unknown status fields warn too.
#[tokio::test(start_paused = true)]
async fn unknown_fields_warn_by_default_and_as_asked() {
    let api = memory_server().await;
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "datta": {"a": "b"}, "data": {"k": "v"}, "x\"y": 1})
    };
    let uri = "/api/v1/namespaces/default/configmaps";
    let want = vec![
        r#"299 - "unknown field \"datta\"""#.to_string(),
        r#"299 - "unknown field \"x\"y\"""#.to_string(),
    ];
    let none = Vec::<String>::new();
    for (name, query, answer) in [
        ("a", "", (201, want.clone())),
        ("b", "?fieldValidation=Warn", (201, want.clone())),
        ("c", "?fieldValidation=Ignore", (201, none.clone())),
        ("d", "?fieldValidation=Strict", (400, none.clone())),
    ] {
        let uri = format!("{uri}{query}");
        let got = warnings_of(&api, "POST", &uri, "application/json", &cm(name)).await;
        assert_eq!(got, answer, "{query}");
    }
    // A write without unknown fields has no warning; a merge patch adding one has.
    let (code, warnings) = warnings_of(
        &api,
        "PATCH",
        &format!("{uri}/a"),
        "application/merge-patch+json",
        &json!({"data": {"k": "w"}}),
    )
    .await;
    assert_eq!((code, warnings), (200, Vec::<String>::new()));
    let (code, warnings) = warnings_of(
        &api,
        "PATCH",
        &format!("{uri}/a"),
        "application/merge-patch+json",
        &json!({"datta": 1}),
    )
    .await;
    assert_eq!((code, warnings), (200, vec![want[0].clone()]));
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &bound_pod("p", "n1"))
        .await
        .unwrap();
    let (code, warnings) = warnings_of(
        &api,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        "application/strategic-merge-patch+json",
        &json!({"status": {"phase": "Running", "bogus": 1,
            "conditions": [{"type": "Ready", "status": "True", "extra": "x"}]}}),
    )
    .await;
    assert_eq!(
        (code, warnings),
        (
            200,
            vec![
                r#"299 - "unknown field \"status.bogus\"""#.to_string(),
                r#"299 - "unknown field \"status.conditions[0].extra\"""#.to_string(),
            ]
        )
    );
}

#[tokio::test(start_paused = true)]
async fn status_only_patches_normalise_the_status() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &bound_pod("a", "n1"))
        .await
        .unwrap();
    let uid = pods.get("a").await.unwrap().metadata.uid.unwrap();
    let pp = PatchParams::default();
    let p = pods
        .patch_status(
            "a",
            &pp,
            &Patch::Strategic(json!({"metadata": {"uid": uid},
                "status": {"phase": "Running", "bogus": 1,
                    "conditions": [{"type": "Ready", "status": "True", "extra": "x"}]}})),
        )
        .await
        .unwrap();
    let status = serde_json::to_value(p.status.unwrap()).unwrap();
    assert_eq!(
        status,
        json!({"phase": "Running", "qosClass": "BestEffort",
            "conditions": [{"type": "Ready", "status": "True"}]})
    );
    let rv = pods.get("a").await.unwrap().metadata.resource_version;
    let e = api_err(
        pods.patch_status(
            "a",
            &pp,
            &Patch::Merge(json!({"status": {"containerStatuses": "x"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 400, "{e:?}");
    assert!(
        e.message
            .starts_with("Pod in version \"v1\" cannot be handled as a Pod:"),
        "{}",
        e.message
    );
    assert_eq!(pods.get("a").await.unwrap().metadata.resource_version, rv);
    let p = pods
        .patch_status(
            "a",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Failed"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Failed"));
    assert_eq!(p.metadata.labels.unwrap().get("x"), None);
    let p = pods
        .patch_status("a", &pp, &Patch::Merge(json!({"status": null})))
        .await
        .unwrap();
    assert!(
        p.status.as_ref().is_none_or(|s| s.phase.is_none()),
        "{:?}",
        p.status
    );
    assert!(crate::crud::touches_only_status(
        &json!({"metadata": {"uid": "u", "resourceVersion": "3"}, "status": {}})
    ));
    for doc in [
        json!({"metadata": {"labels": {}}, "status": {}}),
        json!({"metadata": {"uid": 1}, "status": {}}),
        json!({"spec": {}, "status": {}}),
        json!({"$patch": "replace", "status": {}}),
        json!([{"op": "add", "path": "/status", "value": {}}]),
    ] {
        assert!(!crate::crud::touches_only_status(&doc), "{doc}");
    }
}

#[tokio::test(start_paused = true)]
async fn watch_sees_changes_and_resumes_without_loss() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    // Watch from the list RV: only later changes.
    let mut w = pods
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    pods.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    let mut last_rv = rv.clone();
    for _ in 0..2 {
        match w.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => {
                last_rv = p.metadata.resource_version.clone().unwrap();
                seen.push(format!("ADDED {}", p.metadata.name.unwrap()))
            }
            WatchEvent::Modified(p) => {
                last_rv = p.metadata.resource_version.clone().unwrap();
                seen.push(format!("MODIFIED {}", p.metadata.name.unwrap()))
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, vec!["ADDED b", "MODIFIED b"]);
    // Drop the connection; changes happen while nobody watches; resume from the last RV.
    drop(w);
    pods.create(&PostParams::default(), &pod("c"))
        .await
        .unwrap();
    pods.delete("c", &DeleteParams::default()).await.unwrap();
    let mut w2 = pods
        .watch(&WatchParams::default().timeout(60), &last_rv)
        .await
        .unwrap()
        .boxed();
    let mut resumed = Vec::new();
    for _ in 0..3 {
        match w2.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => resumed.push(format!("ADDED {}", p.metadata.name.unwrap())),
            // An unbound pod is deleted gracefully with grace 0, in two writes as upstream.
            WatchEvent::Modified(p) => resumed.push(format!(
                "MODIFIED {} grace {:?}",
                p.metadata.name.unwrap(),
                p.metadata.deletion_grace_period_seconds
            )),
            WatchEvent::Deleted(p) => resumed.push(format!("DELETED {}", p.metadata.name.unwrap())),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        resumed,
        vec!["ADDED c", "MODIFIED c grace Some(0)", "DELETED c"]
    );
    // Timeout ends the stream after the virtual 60 s.
    // kube-rs asks for bookmarks: the last one comes 2 s before the deadline, as upstream's.
    let start = tokio::time::Instant::now();
    assert!(matches!(
        w2.try_next().await.unwrap(),
        Some(WatchEvent::Bookmark(_))
    ));
    assert_eq!(start.elapsed(), Duration::from_secs(58));
    assert!(w2.try_next().await.unwrap().is_none());
    assert_eq!(start.elapsed(), Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn watch_selector_transitions_and_initial_state() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    // resourceVersion 0: synthetic ADDED for the current state first.
    let mut w = pods
        .watch(&WatchParams::default().labels("tier=fe").timeout(30), "0")
        .await
        .unwrap()
        .boxed();
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "fe"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "be"}}})),
    )
    .await
    .unwrap();
    let e1 = w.try_next().await.unwrap().unwrap();
    assert!(
        matches!(e1, WatchEvent::Added(_)),
        "starts matching → ADDED: {e1:?}"
    );
    let e2 = w.try_next().await.unwrap().unwrap();
    assert!(
        matches!(e2, WatchEvent::Deleted(_)),
        "stops matching → DELETED: {e2:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn watch_from_compacted_revision_gets_410_in_stream() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let a = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let old_rv = a.metadata.resource_version.unwrap();
    for i in 0..3 {
        pods.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
        )
        .await
        .unwrap();
    }
    api.store()
        .compact(api.store().current_revision())
        .await
        .unwrap();
    let mut w = pods
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match w.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR 410, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn binding_assigns_once() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let (code, _) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/web/binding",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let p = pods.get("web").await.unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n1"));
    let sched = p
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(sched.status, "True");
    let (code, v) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/web/binding",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(code, 409, "{v}");
}

/// A binding as upstream's `BindingREST`: the name must match the URL, the target is checked as
/// `ValidatePodBinding` (a plain error there, hence an unknown 500), the binding's uid and
/// resourceVersion are preconditions, a gated pod is refused, and the binding's annotations are
/// merged into the pod. A refused binding changes nothing; an accepted one changes nodeName, the
/// annotations and the PodScheduled condition, and leaves managedFields as they were.
#[tokio::test(start_paused = true)]
async fn binding_follows_upstream() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let created = pods
        .create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let mut gated = pod("gated");
    gated.spec.as_mut().unwrap().scheduling_gates =
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: "example.com/wait".into(),
        }]);
    pods.create(&PostParams::default(), &gated).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let bind = |pod: &str, meta: Value, target: Value| {
        let body =
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": target});
        let uri = format!("/api/v1/namespaces/default/pods/{pod}/binding");
        let api = api.clone();
        async move { post_json(&api, &uri, &body).await }
    };
    let node = json!({"kind": "Node", "name": "n1"});
    let before = api.store().current_revision();
    let unsupported =
        r#"target.kind: Unsupported value: "Pod": supported values: "Node", "<empty>""#;
    let refused: Vec<(&str, Value, Value, u16, String)> = vec![
        ("web", json!({"name": "other"}), node.clone(), 400,
         "name in URL does not match name in Binding object".into()),
        ("web", json!({"name": "web"}), json!({"kind": "Node"}), 500,
         "target.name: Required value".into()),
        ("web", json!({"name": "web"}), json!({"kind": "Pod", "name": "n1"}), 500,
         unsupported.into()),
        ("web", json!({"name": "web"}), json!({"kind": "Pod"}), 500,
         format!("[{unsupported}, target.name: Required value]")),
        ("web", json!({"name": "web", "uid": "not-it"}), node.clone(), 409,
         format!("Operation cannot be fulfilled on pods \"web\": Precondition failed: UID in precondition: not-it, UID in object meta: {uid}")),
        ("web", json!({"name": "web", "resourceVersion": "1"}), node.clone(), 409,
         format!("Operation cannot be fulfilled on pods \"web\": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}")),
        ("gated", json!({"name": "gated"}), node.clone(), 409,
         "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates".into()),
    ];
    for (pod, meta, target, code, message) in refused {
        let (got, v) = bind(pod, meta.clone(), target.clone()).await;
        assert_eq!(
            (got, v["message"].as_str()),
            (code, Some(message.as_str())),
            "{meta} {target}: {v}"
        );
        assert_eq!(v["kind"], "Status", "{v}");
    }
    assert_eq!(
        api.store().current_revision(),
        before,
        "a refused binding stores nothing"
    );

    let (code, v) = bind(
        "web",
        json!({"name": "web", "uid": uid, "resourceVersion": rv,
               "annotations": {"example.com/placed-by": "test"}}),
        node.clone(),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    let bound = pods.get("web").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("n1")
    );
    assert_eq!(
        bound.metadata.annotations.as_ref().unwrap()["example.com/placed-by"],
        "test"
    );
    assert_eq!(
        bound.metadata.managed_fields,
        created.metadata.managed_fields
    );
    let conditions = bound.status.as_ref().unwrap().conditions.clone().unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True"),
        "{conditions:?}"
    );
    let (code, v) = bind("web", json!({"name": "web"}), node).await;
    assert_eq!(
        (code, v["message"].as_str()),
        (
            409,
            Some(
                "Operation cannot be fulfilled on pods/binding \"web\": pod web is already assigned to node \"n1\""
            )
        ),
        "{v}"
    );
}

#[tokio::test(start_paused = true)]
async fn bad_input_gets_status_and_changes_nothing() {
    let api = memory_server().await;
    let before = api.store().current_revision();
    let cases: Vec<(&str, &str, &str, Vec<u8>, u16)> = vec![
        ("POST", "/api/v1/namespaces/default/pods", "application/json", b"{not json".to_vec(), 400),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", b"[1,2]".to_vec(), 400),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", br#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"x"}}"#.to_vec(), 400),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", br#"{"metadata":{"name":"x"},"spec":{"containers":[{"image":"nginx"}]}}"#.to_vec(), 422),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", br#"{"metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#.to_vec(), 422),
        ("POST", "/api/v1/namespaces/default/pods", "application/vnd.kubernetes.protobuf", b"k8s\0".to_vec(), 400),
        ("POST", "/api/v1/namespaces/default/widgets", "application/json", b"{}".to_vec(), 404),
        ("POST", "/api/v1/namespaces/default/pods", "application/json", vec![b' '; 3 * 1024 * 1024 + 10], 413),
        ("PATCH", "/api/v1/namespaces/default/pods/none", "application/merge-patch+json", b"{}".to_vec(), 404),
        ("PATCH", "/api/v1/nodes/none", "text/plain", b"{}".to_vec(), 415),
    ];
    for (method, uri, ct, body, want) in cases {
        let (code, v) = raw(&api, method, uri, ct, body).await;
        assert_eq!(code, want, "{method} {uri} {ct}: {v}");
        assert_eq!(v["kind"], "Status", "{v}");
        assert_eq!(v["code"], want);
    }
    assert_eq!(api.store().current_revision(), before, "nothing stored");
    // Invalid object: causes name the field.
    let (_, v) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        br#"{"metadata":{"name":"x"},"spec":{"containers":[{"image":"nginx"}]}}"#.to_vec(),
    )
    .await;
    assert_eq!(v["reason"], "Invalid");
    assert_eq!(
        v["details"]["causes"][0]["field"],
        "spec.containers[0].name"
    );
}

/// Random bytes and random JSON thrown at create, patch and protobuf create/update: always a
/// Status, never a panic, and the store is unchanged.
#[tokio::test(start_paused = true)]
async fn fuzzed_bodies_never_panic_or_store() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("target"))
        .await
        .unwrap();
    let before = api.store().current_revision();
    let rng = klab_api::DetRng::seeded(42);
    let fragments = [
        "{",
        "}",
        "[",
        "]",
        "\"metadata\"",
        ":",
        ",",
        "null",
        "1e999",
        "\"spec\"",
        "{\"containers\":",
        "\"$patch\"",
        "\"delete\"",
        "\"\\u0000\"",
        "-0",
        "true",
        "\"name\"",
        "\"tolerations\"",
    ];
    for i in 0..400 {
        let body: Vec<u8> = if i % 2 == 0 {
            (0..rng.range(0, 64))
                .map(|_| rng.range(0, 256) as u8)
                .collect()
        } else {
            (0..rng.range(1, 12))
                .map(|_| fragments[rng.range(0, fragments.len() as u64) as usize])
                .collect::<String>()
                .into_bytes()
        };
        for (method, uri, ct) in [
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                "application/json",
            ),
            (
                "PATCH",
                "/api/v1/namespaces/default/pods/target",
                "application/strategic-merge-patch+json",
            ),
            (
                "PATCH",
                "/api/v1/namespaces/default/pods/target",
                "application/json-patch+json",
            ),
            (
                "PATCH",
                "/api/v1/namespaces/default/pods/target",
                "application/merge-patch+json",
            ),
            (
                "POST",
                "/api/v1/namespaces/default/pods",
                "application/vnd.kubernetes.protobuf",
            ),
            (
                "PUT",
                "/api/v1/namespaces/default/pods/target",
                "application/vnd.kubernetes.protobuf",
            ),
        ] {
            // Protobuf bodies get the magic so that the envelope decoder is what is exercised.
            let body = if ct.contains("protobuf") {
                [crate::protobuf::MAGIC, body.as_slice()].concat()
            } else {
                body.clone()
            };
            let (code, v) = raw(&api, method, uri, ct, body).await;
            if code >= 400 {
                assert_eq!(v["kind"], "Status", "{method} {uri}: {v}");
            }
        }
    }
    // Random bodies may by chance be valid no-op patches, but none may have created or changed data.
    let after = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(after.items.len(), 1);
    assert_eq!(api.store().current_revision(), before);
}

#[tokio::test(start_paused = true)]
async fn events_are_one_resource_in_two_versions() {
    let api = memory_server().await;
    let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.1"},
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web"}, "note": "Successfully assigned default/web to n1",
        "reason": "Scheduled", "type": "Normal", "action": "Binding", "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-klab", "eventTime": "2026-01-01T00:00:00.000000Z"});
    let (code, v) = raw(
        &api,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "application/json",
        serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["note"], "Successfully assigned default/web to n1");
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client(&api));
    let core = events.get("web.1").await.unwrap();
    assert_eq!(
        core.message.as_deref(),
        Some("Successfully assigned default/web to n1")
    );
    assert_eq!(core.involved_object.name.as_deref(), Some("web"));
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("default-scheduler")
    );
    let listed = events
        .list(&ListParams::default().fields("involvedObject.name=web"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    // events.k8s.io/v1 selects by its own field names (`regarding.*`, `reportingController`),
    // and refuses the core spellings as upstream's conversion does.
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(client(&api));
    for (sel, want) in [
        ("reason=Scheduled,regarding.name=web", 1),
        (
            "reportingController=default-scheduler,source=default-scheduler",
            1,
        ),
        ("regarding.name=other", 0),
    ] {
        let got = v1.list(&ListParams::default().fields(sel)).await.unwrap();
        assert_eq!(got.items.len(), want, "{sel}");
    }
    match v1
        .list(&ListParams::default().fields("involvedObject.name=web"))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400);
            assert_eq!(s.message, "field label not supported: involvedObject.name");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn history_is_compacted_every_five_minutes() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let first = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    // First tick (5 min) compacts to the revision seen at start; the second (10 min) to the one
    // seen at 5 min, which is after `first`.
    tokio::time::sleep(Duration::from_secs(301)).await;
    let recent = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(api.store().compacted_revision() >= first.parse::<u64>().unwrap());
    // Resuming from before `first` needs the compacted creation event: 410.
    let before_first = (first.parse::<u64>().unwrap() - 1).to_string();
    let mut w = pods
        .watch(&WatchParams::default().timeout(5), &before_first)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(w.try_next().await.unwrap().unwrap(), WatchEvent::Error(e) if e.code == 410));
    // The change after the last tick is still resumable.
    let before_recent = (recent.parse::<u64>().unwrap() - 1).to_string();
    let mut w = pods
        .watch(&WatchParams::default().timeout(5), &before_recent)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        w.try_next().await.unwrap().unwrap(),
        WatchEvent::Modified(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn patch_resource_version_preconditions() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let p = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let rv = p.metadata.resource_version.unwrap();
    // A JSON patch may test the current resourceVersion.
    let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, {"op": "add", "path": "/metadata/labels/t", "value": "1"}]);
    let p2 = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(ops.clone()).unwrap()),
        )
        .await
        .unwrap();
    // The same test against the now-stale version fails.
    let e = api_err(
        pods.patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(ops).unwrap()),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    // A merge patch carrying a stale resourceVersion is a Conflict; a current one succeeds.
    let stale = json!({"metadata": {"resourceVersion": rv, "labels": {"u": "1"}}});
    assert_eq!(
        api_err(
            pods.patch("a", &PatchParams::default(), &Patch::Merge(stale))
                .await
                .unwrap_err()
        )
        .code,
        409
    );
    let fresh = json!({"metadata": {"resourceVersion": p2.metadata.resource_version.unwrap(), "labels": {"u": "1"}}});
    pods.patch("a", &PatchParams::default(), &Patch::Merge(fresh))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn uid_in_a_patch_is_a_precondition() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let p = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let uid = p.metadata.uid.unwrap();
    let ok = json!({"metadata": {"uid": uid}, "status": {"phase": "Running"}});
    pods.patch_status("a", &PatchParams::default(), &Patch::Merge(ok))
        .await
        .unwrap();
    let stale = json!({"metadata": {"uid": "00000000-0000-4000-8000-000000000000"}, "status": {"phase": "Failed"}});
    let e = api_err(
        pods.patch_status("a", &PatchParams::default(), &Patch::Merge(stale))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition"),
        "{}",
        e.message
    );
    assert_eq!(
        pods.get("a")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );
}

#[tokio::test(start_paused = true)]
async fn eviction_respects_pod_disruption_budgets() {
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &bound_pod(name, "n1"))
            .await
            .unwrap();
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap();
    }
    let evict = |name: &str| {
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
        let uri = format!("/api/v1/namespaces/default/pods/{name}/eviction");
        let api = api.clone();
        async move { post_json(&api, &uri, &body).await }
    };
    // A budget whose status the disruption controller has not processed yet blocks evictions.
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::default_namespaced(c.clone());
    let pdb = json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
    pdbs.create(
        &PostParams::default(),
        &serde_json::from_value(pdb).unwrap(),
    )
    .await
    .unwrap();
    let (code, v) = evict("a").await;
    assert_eq!(code, 429, "{v}");
    assert_eq!(
        v["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(
        v["details"]["causes"][0]["message"],
        "The disruption budget web is still being processed by the server."
    );
    // Processed, no disruption allowed.
    let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": 0, "desiredHealthy": 2, "currentHealthy": 2, "expectedPods": 2}});
    pdbs.patch_status("web", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    let (code, v) = evict("a").await;
    assert_eq!(code, 429);
    assert_eq!(
        v["details"]["causes"][0]["message"],
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(
        pods.get("a")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "nothing changed"
    );
    // One disruption allowed: the eviction marks the pod and deletes it gracefully.
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"disruptionsAllowed": 1}})),
    )
    .await
    .unwrap();
    let (code, v) = evict("a").await;
    assert_eq!(code, 201, "{v}");
    let a = pods.get("a").await.unwrap();
    assert_eq!(a.metadata.deletion_grace_period_seconds, Some(30));
    let cond = a
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(
        (cond.reason.as_deref(), cond.message.as_deref()),
        (
            Some("EvictionByEvictionAPI"),
            Some("Eviction API: evicting")
        )
    );
    let pdb = pdbs.get("web").await.unwrap().status.unwrap();
    assert_eq!(pdb.disruptions_allowed, 0);
    assert!(pdb.disrupted_pods.unwrap().contains_key("a"));
    // The budget is now spent, and the controller's condition says so.
    let (code, v) = evict("b").await;
    assert_eq!(code, 429);
    assert!(v["details"].get("retryAfterSeconds").is_none(), "{v}");
    let cond = &pdb.conditions.unwrap()[0];
    assert_eq!(
        (
            cond.type_.as_str(),
            cond.status.as_str(),
            cond.reason.as_str()
        ),
        ("DisruptionAllowed", "False", "InsufficientPods")
    );

    // A pod that is not Ready goes without consuming the budget while the budget is met ...
    pods.patch_status(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})),
    )
    .await
    .unwrap();
    let (code, v) = evict("b").await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(
        pdbs.get("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        0
    );
    // ... but not while it is not (2 desired, 1 healthy), unless the policy is AlwaysAllow.
    pods.create(&PostParams::default(), &bound_pod("c", "n1"))
        .await
        .unwrap();
    pods.patch_status(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}})),
    )
    .await
    .unwrap();
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"currentHealthy": 1}})),
    )
    .await
    .unwrap();
    assert_eq!(evict("c").await.0, 429);
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})),
    )
    .await
    .unwrap();
    // The new generation is not processed yet, but AlwaysAllow does not look at the numbers.
    assert_eq!(evict("c").await.0, 201);

    // A negative budget is refused outright.
    pods.create(&PostParams::default(), &bound_pod("d", "n1"))
        .await
        .unwrap();
    pods.patch_status(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
    pdbs.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"observedGeneration": 2, "disruptionsAllowed": -1}})),
    )
    .await
    .unwrap();
    let (code, v) = evict("d").await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        v["message"],
        "poddisruptionbudget.policy \"web\" is forbidden: pdb disruptions allowed is negative"
    );
    // A body naming another pod is a bad request.
    let (code, v) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/d/eviction",
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "x"}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(code, 400, "{v}");
    assert_eq!(
        v["message"],
        "name in URL does not match name in Eviction object"
    );
}

#[tokio::test(start_paused = true)]
async fn delete_collection_by_selector() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        let mut p = pod(name);
        p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=web"),
    )
    .await
    .unwrap();
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test(start_paused = true)]
async fn send_initial_events_ends_with_a_bookmark_and_bookmarks_follow() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let (code, v) = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true",
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 422, "{v}");
    // Real watch: streaming list then the initial-events-end bookmark, then a periodic bookmark.
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .uri("/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=90")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let start = tokio::time::Instant::now();
    let mut body = resp.into_body().into_data_stream();
    let mut lines: Vec<Value> = Vec::new();
    let mut at = Vec::new();
    let mut buf = Vec::new();
    while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk.unwrap());
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            lines.push(serde_json::from_slice(&buf[..i]).unwrap());
            at.push(start.elapsed().as_secs());
            buf.drain(..=i);
        }
    }
    // The stream ends at its 90 s deadline; its bookmarks came every minute and 2 s before it.
    assert_eq!(start.elapsed().as_secs(), 90);
    assert_eq!(at, vec![0, 0, 60, 88], "{lines:?}");
    assert_eq!(lines[3]["type"], "BOOKMARK");
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(lines[1]["object"]["kind"], "Pod");
    assert_eq!(
        lines[2]["type"], "BOOKMARK",
        "periodic bookmark after the interval"
    );
}

/// Grace periods are user input up to `i64::MAX` seconds: a DELETE with one answers (the
/// deletionTimestamp saturates at the latest representable time, 9999-12-30T22:00:00Z) instead of aborting the connection, and
/// a pod whose spec carries one can be deleted normally, shortened and force-deleted.
#[tokio::test(start_paused = true)]
async fn huge_grace_periods_never_panic() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::namespaced(client(&api), "default");
    pods.create(&PostParams::default(), &bound_pod("a", "n1"))
        .await
        .unwrap();
    let (code, body) = raw(
        &api,
        "DELETE",
        "/api/v1/namespaces/default/pods/a?gracePeriodSeconds=9223372036854775807",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["metadata"]["deletionTimestamp"],
        "9999-12-30T22:00:00Z"
    );
    assert_eq!(
        body["metadata"]["deletionGracePeriodSeconds"],
        9223372036854775807i64
    );
    // A shorter grace moves the deadline back from the saturated one without overflowing.
    let dp = DeleteParams {
        grace_period_seconds: Some(30),
        ..Default::default()
    };
    let p = pods.delete("a", &dp).await.unwrap().left().unwrap();
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(1));

    let mut b = bound_pod("b", "n1");
    b.spec.as_mut().unwrap().termination_grace_period_seconds = Some(i64::MAX);
    pods.create(&PostParams::default(), &b).await.unwrap();
    let p = pods
        .delete("b", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(i64::MAX));
    pods.delete("b", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("b").await.unwrap().is_none());
    // The server is still healthy.
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

/// A StatefulSet's template may mount its volumeClaimTemplates (upstream validates the template's
/// labels, restart policy and activeDeadlineSeconds only; the pods carry the claim volumes).
#[tokio::test(start_paused = true)]
async fn statefulset_mounts_its_volume_claim_templates() {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let api = memory_server().await;
    let sts: Api<StatefulSet> = Api::namespaced(client(&api), "default");
    let mut obj: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "serviceName": "nginx", "replicas": 2,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{
                    "name": "nginx", "image": "nginx:1.27",
                    "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]
                }]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .unwrap();
    sts.create(&PostParams::default(), &obj).await.unwrap();
    // What upstream does check in the template still holds.
    obj.metadata.name = Some("bad".into());
    obj.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .active_deadline_seconds = Some(5);
    let e = api_err(sts.create(&PostParams::default(), &obj).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"),
        "{}",
        e.message
    );
}

/// A handler that panics answers 500 with a Status carrying upstream's message, and the server
/// (and, in process, the caller) goes on.
#[tokio::test(start_paused = true)]
async fn a_panicking_request_answers_500_and_the_server_goes_on() {
    let api = memory_server().await;
    let (code, body) = raw(&api, "GET", "/debug/panic", "application/json", Vec::new()).await;
    assert_eq!(code, 500);
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "InternalError");
    assert_eq!(
        body["message"],
        "Internal error occurred: This request caused apiserver to panic. Look in the logs for details."
    );
    let (code, _) = raw(
        &api,
        "GET",
        "/api/v1/namespaces",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
}

/// The audit log under a policy giving each kind of request its own level: a handler's panic is
/// a `Panic` event with upstream's Status, the 500 goes out as without auditing; Metadata keeps no
/// bodies, Request the request's, RequestResponse both.
#[tokio::test(start_paused = true)]
async fn audit_levels_and_the_panic_stage() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("audit.log");
    let policy = crate::audit::Policy::parse(
        "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  resources: [{resources: [configmaps]}]
- level: Request
  resources: [{resources: [secrets]}]
- level: RequestResponse
  resources: [{resources: [serviceaccounts]}]
- level: Metadata
  nonResourceURLs: [/debug/*]
",
    )
    .unwrap();
    let config = crate::server::ApiServerConfig {
        audit: Some(crate::audit::AuditConfig {
            log_path: log_path.clone(),
            policy,
        }),
        ..Default::default()
    };
    let api = crate::testing::memory_server_with(
        klab_api::Clock::virtual_default(),
        klab_api::DetRng::seeded(1),
        config,
    )
    .await;
    let (code, body) = raw(&api, "GET", "/debug/panic", "application/json", Vec::new()).await;
    assert_eq!(code, 500);
    assert_eq!(
        body["message"],
        "Internal error occurred: This request caused apiserver to panic. Look in the logs for details."
    );
    for (plural, name) in [
        ("configmaps", "cm"),
        ("secrets", "s"),
        ("serviceaccounts", "sa"),
    ] {
        let body = json!({"metadata": {"name": name}});
        let (code, _) = raw(
            &api,
            "POST",
            &format!("/api/v1/namespaces/default/{plural}"),
            "application/json",
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
        assert_eq!(code, 201, "{plural}");
    }
    let events: Vec<Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stages: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["requestURI"].as_str().unwrap(),
                e["stage"].as_str().unwrap(),
                e["level"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        stages,
        [
            ("/debug/panic", "RequestReceived", "Metadata"),
            ("/debug/panic", "Panic", "Metadata"),
            (
                "/api/v1/namespaces/default/configmaps",
                "RequestReceived",
                "Metadata"
            ),
            (
                "/api/v1/namespaces/default/configmaps",
                "ResponseComplete",
                "Metadata"
            ),
            (
                "/api/v1/namespaces/default/secrets",
                "RequestReceived",
                "Request"
            ),
            (
                "/api/v1/namespaces/default/secrets",
                "ResponseComplete",
                "Request"
            ),
            (
                "/api/v1/namespaces/default/serviceaccounts",
                "RequestReceived",
                "RequestResponse"
            ),
            (
                "/api/v1/namespaces/default/serviceaccounts",
                "ResponseComplete",
                "RequestResponse"
            ),
        ]
    );
    let status = &events[1]["responseStatus"];
    assert_eq!(status["code"], 500);
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "InternalError");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("APIServer panic'd: "),
        "{status}"
    );
    let has = |i: usize, k: &str| events[i].get(k).is_some();
    // Metadata: no bodies.
    assert!(!has(3, "requestObject") && !has(3, "responseObject"));
    // Request: the request's body only.
    assert_eq!(events[5]["requestObject"]["metadata"]["name"], "s");
    assert!(!has(5, "responseObject"));
    // RequestResponse: both, the response as stored.
    assert_eq!(events[7]["requestObject"]["metadata"]["name"], "sa");
    assert_eq!(events[7]["responseObject"]["kind"], "ServiceAccount");
    assert!(events[7]["responseObject"]["metadata"]["uid"].is_string());
    // The server went on.
    let (code, _) = raw(
        &api,
        "GET",
        "/api/v1/namespaces",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
}

/// An idle watch keeps up with compaction: its bookmarks advance to the store's current revision
/// although nothing it watches changed, so resuming from the last bookmark after compaction works
/// (no 410, no relist), as with upstream's watch cache — and no event is skipped.
#[tokio::test(start_paused = true)]
async fn idle_watch_bookmarks_advance_past_compaction() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api = memory_server().await;
    let c = client(&api);
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let start = cms.list(&ListParams::default()).await.unwrap();
    let start_rv = start.metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(3600); // bookmarks are on by default
    let mut stream = cms.watch(&wp, &start_rv).await.unwrap().boxed();
    // Much happens elsewhere; the configmaps stay idle.
    for i in 0..20 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}")))
            .await
            .unwrap();
    }
    let current = api.store().current_revision();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let bookmark_rv = match stream.try_next().await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => b.metadata.resource_version,
        other => panic!("expected a bookmark, got {other:?}"),
    };
    assert_eq!(bookmark_rv, current.to_string());
    drop(stream);
    // History before the bookmark is compacted away; the watch resumes from the bookmark.
    api.store().compact(current).await.unwrap();
    let mut stream = cms.watch(&wp, &bookmark_rv).await.unwrap().boxed();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("late")),
        other => panic!("expected the new configmap, got {other:?}"),
    }
    // The old starting revision is gone for good: that is what the bookmark saved us from.
    let e = cms
        .watch(&wp, &start_rv)
        .await
        .unwrap()
        .boxed()
        .try_next()
        .await;
    assert!(
        matches!(e, Ok(Some(WatchEvent::Error(ref s))) if s.code == 410),
        "{e:?}"
    );
}

/// Input handling as kube-apiserver: each bad request answers the stated Status, stores nothing,
/// and the server goes on serving.
#[tokio::test(start_paused = true)]
async fn malformed_parameters_and_bodies_answer_upstreams_status() {
    let api = memory_server().await;
    let before = api.store().current_revision();
    let pod_json =
        br#"{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}"#;
    let big = "x".repeat(1024 * 1024 + 1);
    // (method, uri, content type, body, code, message)
    type Case<'a> = (&'a str, String, &'a str, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "GET",
            "/api/v1/namespaces/default/pods?resourceVersion=abc".into(),
            "",
            vec![],
            400,
            "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?resourceVersion=-1".into(),
            "",
            vec![],
            400,
            "resourceVersion: Invalid value: \"-1\": strconv.ParseUint: parsing \"-1\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?resourceVersion=1.5".into(),
            "",
            vec![],
            400,
            "resourceVersion: Invalid value: \"1.5\": strconv.ParseUint: parsing \"1.5\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=abc".into(),
            "",
            vec![],
            400,
            "resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default?resourceVersion=x1".into(),
            "",
            vec![],
            400,
            "resourceVersion: Invalid value: \"x1\": strconv.ParseUint: parsing \"x1\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?limit=abc".into(),
            "",
            vec![],
            400,
            "strconv.ParseInt: parsing \"abc\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=soon".into(),
            "",
            vec![],
            400,
            "strconv.ParseInt: parsing \"soon\": invalid syntax",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?labelSelector=app%20notin%20()".into(),
            "",
            vec![],
            400,
            "unable to parse requirement: values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps/a%zz".into(),
            "",
            vec![],
            400,
            "invalid URL escape \"%zz\"",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps/a%2Fb".into(),
            "",
            vec![],
            404,
            "",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default".into(),
            "application/json",
            br#"{"metadata":{"name":"default","resourceVersion":"abc"}}"#.to_vec(),
            400,
            "metadata.resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/configmaps".into(),
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "big"}, "data": {"k": big}})).unwrap(),
            422,
            "ConfigMap \"big\" is invalid: : Too long: must have at most 1048576 bytes",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/secrets".into(),
            "application/json",
            serde_json::to_vec(&json!({"metadata": {"name": "big"}, "stringData": {"k": big}}))
                .unwrap(),
            422,
            "Secret \"big\" is invalid: data: Too long: must have at most 1048576 bytes",
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods".into(),
            "application/yaml",
            crate::yaml::tests::BILLION_LAUGHS.as_bytes().to_vec(),
            400,
            "",
        ),
    ];
    for (method, uri, ct, body, want, msg) in cases {
        let (code, v) = raw(&api, method, &uri, ct, body).await;
        assert_eq!(code, want, "{method} {uri}: {v}");
        assert_eq!(v["kind"], "Status", "{method} {uri}: {v}");
        if !msg.is_empty() {
            assert_eq!(v["message"], msg, "{method} {uri}");
        }
    }
    assert_eq!(api.store().current_revision(), before, "nothing stored");

    // A body that breaks off is the client's error (400), not an oversized one (413).
    use tower::ServiceExt;
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
        Ok(bytes::Bytes::from_static(b"{\"metadata\":")),
        Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        )),
    ];
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/pods")
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);

    // A read far ahead of the store waits 3 s (virtual) for it, then answers 504.
    let start = tokio::time::Instant::now();
    let (code, v) = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/pods?resourceVersion=999999",
        "",
        vec![],
    )
    .await;
    assert_eq!(code, 504, "{v}");
    assert_eq!(v["reason"], "Timeout");
    assert_eq!(
        v["message"],
        format!("Too large resource version: 999999, current: {before}")
    );
    assert_eq!(
        v["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(v["details"]["retryAfterSeconds"], 1);
    assert!(start.elapsed() >= Duration::from_secs(3));

    // Ordinary requests still work: a Secret's stringData lands in data; escaped names decode.
    let (code, v) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        br#"{"metadata":{"name":"s"},"data":{"a":"b2xk","b":"a2VlcA=="},"stringData":{"a":"new"}}"#
            .to_vec(),
    )
    .await;
    assert_eq!(code, 201, "{v}");
    assert_eq!(v["data"], json!({"a": "bmV3", "b": "a2VlcA=="}));
    assert!(v.get("stringData").is_none(), "{v}");
    let (code, _) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        br#"{"metadata":{"name":"a.b"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 201);
    let (code, v) = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/configmaps/a%2Eb",
        "",
        vec![],
    )
    .await;
    assert_eq!((code, v["metadata"]["name"].as_str()), (200, Some("a.b")));
    let (code, _) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        pod_json.to_vec(),
    )
    .await;
    assert_eq!(code, 201);
}

/// A client that stops sending its body holds nothing for ever: after 60 s the request answers
/// 504 as a timed-out request, and nothing is stored.
#[tokio::test(start_paused = true)]
async fn a_stalled_body_times_out() {
    use tower::ServiceExt;
    let api = memory_server().await;
    let before = api.store().current_revision();
    let stalled = futures::stream::once(async {
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(br#"{"metadata":"#))
    })
    .chain(futures::stream::pending());
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(axum::body::Body::from_stream(stalled))
        .unwrap();
    let start = tokio::time::Instant::now();
    let resp = api.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 504);
    assert_eq!(start.elapsed(), Duration::from_secs(60));
    assert_eq!(api.store().current_revision(), before);
}

/// Twenty watches of pods by node (as kubelets watch) and one of every pod: each watch sees only
/// its node's pods, and no change is decoded at all (the shared state of the watch cache, kept
/// by the write that stored it), let alone once per watch.
#[tokio::test(start_paused = true)]
async fn node_watches_see_only_their_pods_and_each_change_is_decoded_once() {
    let api = crate::testing::memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let mut by_node = Vec::new();
    for n in 0..20 {
        let w = pods
            .watch(
                &WatchParams::default()
                    .fields(&format!("spec.nodeName=n{n}"))
                    .timeout(60),
                "0",
            )
            .await
            .unwrap()
            .boxed();
        by_node.push(w);
    }
    let mut all = pods
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let before = api.inner.decoded.decodes();
    let examined = api.inner.decoded.examined();
    for i in 0..10 {
        pods.create(
            &PostParams::default(),
            &bound_pod(&format!("p{i}"), &format!("n{}", i % 4)),
        )
        .await
        .unwrap();
    }
    let names = |w: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>| {
        let mut out = Vec::new();
        while let Some(Some(Ok(WatchEvent::Added(p)))) = futures::FutureExt::now_or_never(w.next())
        {
            out.push(p.metadata.name.unwrap_or_default());
        }
        out
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(names(&mut all).len(), 10);
    assert_eq!(names(&mut by_node[1]), ["p1", "p5", "p9"]);
    assert_eq!(names(&mut by_node[3]), ["p3", "p7"]);
    assert!(names(&mut by_node[7]).is_empty());
    assert_eq!(
        api.inner.decoded.decodes() - before,
        0,
        "each created pod kept as written, for 21 watches"
    );
    // The store offers a pod change only to its node's watch (and the unfiltered one): 20
    // examinations, not one per watch per change (210).
    assert_eq!(
        api.inner.decoded.examined() - examined,
        20,
        "no node watch examined another node's pod"
    );
}

/// Writes pod `p{i}` straight into the store, as no API write does: its change reaches the
/// watches with nothing decoded.
async fn store_pod(api: &ApiServer, i: usize) {
    let mut p = pod(&format!("p{i}"));
    p.metadata.namespace = Some("default".into());
    p.metadata.uid = Some(format!("uid-{i}"));
    let key = format!("/registry/core/pods/default/p{i}");
    api.store()
        .create(&key, serde_json::to_vec(&p).unwrap().into())
        .await
        .unwrap();
}

/// A burst of writes larger than the window of decoded changes, which one watch reads long
/// after the other (its client reads only once the burst is over, as a watch behind a long
/// queue of other tasks does): each change is still decoded once for both watches, the late
/// one reading it from the memo the first left in the change.
#[tokio::test(start_paused = true)]
async fn a_burst_longer_than_the_window_is_decoded_once_for_every_watch() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let mut counts = Vec::new();
    let mut late = None;
    for labels in ["", "app=web"] {
        let mut w = pods
            .watch(&WatchParams::default().labels(labels).timeout(60), "0")
            .await
            .unwrap()
            .boxed();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = seen.clone();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            // The first watch's sender is dropped at once: it reads from the start.
            let _ = wait.await;
            while let Some(Ok(ev)) = w.next().await {
                if matches!(ev, WatchEvent::Added(_)) {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        if labels.is_empty() {
            drop(go);
        } else {
            late = Some(go);
        }
        counts.push(seen);
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (decodes, hits) = (api.inner.decoded.decodes(), api.inner.decoded.memo_hits());
    let n = crate::watch::DECODED_EVENTS_KEPT * 2;
    for i in 0..n {
        store_pod(&api, i).await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(counts[1].load(std::sync::atomic::Ordering::Relaxed), 0);
    // The late watch's server side took the first few into its client's buffer; the rest
    // wait in its queue, decoded.
    let held = api.inner.decoded.memos_held();
    assert!(held > n / 2 && held <= n, "{held}");
    late.take().unwrap().send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    for c in &counts {
        assert_eq!(c.load(std::sync::atomic::Ordering::Relaxed), n);
    }
    assert_eq!(
        api.inner.decoded.decodes() - decodes,
        n as u64,
        "each change decoded once"
    );
    assert_eq!(
        api.inner.decoded.memo_hits() - hits,
        n as u64,
        "the second watch read every change from its memo"
    );
    assert_eq!(
        api.inner.decoded.memos_held(),
        0,
        "read, the memos are gone"
    );
}

/// A small object that is updated (a node's Lease) keeps its decoded state after its change has
/// left the window, so its next update reads it instead of decoding the stored bytes; an object
/// that was only created, or a large one, is forgotten with its change.
#[tokio::test(start_paused = true)]
async fn an_updated_lease_stays_decoded_beyond_the_window() {
    use k8s_openapi::api::coordination::v1::Lease;
    let api = memory_server().await;
    let c = client(&api);
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::default_namespaced(c);
    // Two watches of each, as a cluster has: with one, nothing is kept.
    let (mut lease_watches, mut pod_watches) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let wp = WatchParams::default().timeout(60);
        lease_watches.push(leases.watch(&wp, "0").await.unwrap().boxed());
        pod_watches.push(pods.watch(&wp, "0").await.unwrap().boxed());
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let lease = |t: &str| -> Lease {
        serde_json::from_value(json!({"metadata": {"name": "n1"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": t}}))
        .unwrap()
    };
    let pp = PostParams::default();
    leases
        .create(&pp, &lease("2026-01-01T00:00:00.000000Z"))
        .await
        .unwrap();
    let mut l = leases.get("n1").await.unwrap();
    l.spec = lease("2026-01-01T00:00:10.000000Z").spec;
    leases.replace("n1", &pp, &l).await.unwrap();
    pods.create(&pp, &pod("first")).await.unwrap();
    for i in 0..crate::watch::DECODED_EVENTS_KEPT + 10 {
        pods.create(&pp, &pod(&format!("p{i}"))).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let kept = |group: &str, resource: &str, key: &str| {
        let ri = crate::registry::lookup(group, "v1", resource).unwrap();
        let store = api.store().clone();
        let key = key.to_string();
        let decoded = api.inner.decoded.clone();
        async move {
            let kv = store.get(&key).await.unwrap().unwrap();
            decoded.current(ri, &key, &kv).map(|s| s.value().clone())
        }
    };
    let state = kept(
        "coordination.k8s.io",
        "leases",
        "/registry/coordination.k8s.io/leases/kube-node-lease/n1",
    )
    .await
    .expect("the updated lease is still kept");
    assert_eq!(
        state["spec"]["renewTime"],
        json!("2026-01-01T00:00:10.000000Z")
    );
    assert!(
        kept("", "pods", "/registry/core/pods/default/first")
            .await
            .is_none(),
        "a created pod left with its change"
    );
}

/// A write hands the object it stored to the watches through its change's memo: a resource
/// with one watch (Events, read by one recorder) is not decoded by that watch either, and
/// neither is a write that a burst pushed out of the window before any watch read it.
#[tokio::test(start_paused = true)]
async fn a_write_hands_its_object_to_the_watches_through_its_change() {
    use k8s_openapi::api::core::v1::Event;
    let api = memory_server().await;
    let c = client(&api);
    let events: Api<Event> = Api::default_namespaced(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c);
    let count = |w: futures::stream::BoxStream<'static, kube::Result<WatchEvent<Event>>>| {
        tokio::spawn(
            w.filter(|e| std::future::ready(matches!(e, Ok(WatchEvent::Added(_)))))
                .count(),
        )
    };
    let one = count(
        events
            .watch(&WatchParams::default().timeout(5), "0")
            .await
            .unwrap()
            .boxed(),
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let decodes = api.inner.decoded.decodes();
    let event = |i: usize| -> Event {
        serde_json::from_value(json!({"metadata": {"name": format!("e{i}")},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Started", "message": "Started container c", "type": "Normal"}))
        .unwrap()
    };
    let burst = crate::watch::DECODED_EVENTS_KEPT + 100;
    let creates = (0..burst).map(|i| {
        let events = events.clone();
        async move { events.create(&PostParams::default(), &event(i)).await }
    });
    for r in futures::future::join_all(creates).await {
        r.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(one.await.unwrap(), burst);
    assert_eq!(
        api.inner.decoded.decodes() - decodes,
        0,
        "the one watch of events decoded none of them"
    );
    // Pods with two watches: written all at once, the window keeps 512 of them; the memos
    // serve the rest.
    let mut two = Vec::new();
    for _ in 0..2 {
        let w = pods
            .watch(&WatchParams::default().timeout(5), "0")
            .await
            .unwrap()
            .boxed();
        two.push(tokio::spawn(
            w.filter(|e| std::future::ready(matches!(e, Ok(WatchEvent::Added(_)))))
                .count(),
        ));
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let decodes = api.inner.decoded.decodes();
    let creates = (0..burst).map(|i| {
        let pods = pods.clone();
        async move {
            pods.create(&PostParams::default(), &pod(&format!("p{i}")))
                .await
        }
    });
    for r in futures::future::join_all(creates).await {
        r.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    for w in two {
        assert_eq!(w.await.unwrap(), burst);
    }
    assert_eq!(api.inner.decoded.decodes() - decodes, 0, "no pod decoded");
    assert_eq!(api.inner.decoded.memos_held(), 0);
}

/// A watch whose client stops reading keeps the changes queued for it, but not more than
/// `MEMOS_KEPT` of them decoded: the others keep only their bytes, as without memos.
#[tokio::test(start_paused = true)]
async fn a_stalled_watch_holds_a_bounded_number_of_decoded_changes() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let reading = pods
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    let read = tokio::spawn(reading.filter_map(|e| async move { e.ok() }).count());
    let stalled = pods
        .watch(&WatchParams::default().labels("app=web").timeout(60), "0")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let n = crate::watch::MEMOS_KEPT + 500;
    for i in 0..n {
        store_pod(&api, i).await;
        assert!(api.inner.decoded.memos_held() <= crate::watch::MEMOS_KEPT);
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let held = api.inner.decoded.memos_held();
    assert!(
        held > crate::watch::MEMOS_KEPT / 2 && held <= crate::watch::MEMOS_KEPT,
        "{held}"
    );
    drop(stalled);
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(read.await.unwrap() >= n);
    assert_eq!(api.inner.decoded.memos_held(), 0);
}

/// The watch events already delivered on `w`, as (type, object); bookmarks and errors left out.
fn ready_events(
    w: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>>,
) -> Vec<(&'static str, Pod)> {
    let mut out = Vec::new();
    while let Some(Some(Ok(ev))) = futures::FutureExt::now_or_never(w.next()) {
        out.push(match ev {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            _ => continue,
        });
    }
    out
}

/// A change's previous state is the kept state of the key's last change, not decoded again: an
/// update's for matching only, a deletion's stamped with the deletion's revision. Watches see
/// exactly what they saw before: a pod leaving a label selector is DELETED, one entering it
/// ADDED, and the DELETED object of a deletion carries the deletion's resourceVersion.
#[tokio::test(start_paused = true)]
async fn previous_states_come_from_the_last_change() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let watch = |labels: &str| {
        let pods = pods.clone();
        let wp = WatchParams::default().labels(labels).timeout(60);
        async move { pods.watch(&wp, "0").await.unwrap().boxed() }
    };
    let mut web = watch("app=web").await;
    let mut all = watch("").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let before = api.inner.decoded.reused();
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let relabel = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    pods.patch("a", &PatchParams::default(), &relabel("db"))
        .await
        .unwrap();
    pods.patch("a", &PatchParams::default(), &relabel("web"))
        .await
        .unwrap();
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let events = |w: &mut _| {
        ready_events(w)
            .into_iter()
            .map(|(ty, p)| (ty, p.metadata.resource_version.unwrap_or_default()))
            .collect::<Vec<_>>()
    };
    let web = events(&mut web);
    let all = events(&mut all);
    fn types(e: &[(&'static str, String)]) -> Vec<&'static str> {
        e.iter().map(|(t, _)| *t).collect()
    }
    // The deletion first sets deletionTimestamp (MODIFIED), then removes the pod.
    assert_eq!(
        types(&web),
        ["ADDED", "DELETED", "ADDED", "MODIFIED", "DELETED"]
    );
    assert_eq!(
        types(&all),
        ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]
    );
    let rvs: Vec<u64> = all.iter().map(|(_, rv)| rv.parse().unwrap()).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    assert_eq!(web[4].1, all[4].1, "the deletion's revision");
    assert_eq!(
        api.inner.decoded.reused() - before,
        4,
        "three updates and the deletion reused the previous change's state"
    );
}

/// The state a write keeps for the watches is the stored change's decoding: with two watches of
/// pods open, a create, status and metadata patches, a graceful and a final deletion are each
/// sent exactly as decoding the store's own change feed and encoding it gives (byte for byte),
/// none of them decoded by a watch, and a write's current object taken from the kept state.
#[tokio::test(start_paused = true)]
async fn written_changes_reach_watches_as_their_stored_decoding() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let mut open = Vec::new();
    for labels in ["", "app=web"] {
        let wp = WatchParams::default().labels(labels).timeout(60);
        open.push(pods.watch(&wp, "0").await.unwrap().boxed());
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let from = api.store().current_revision();
    let uri =
        format!("/api/v1/namespaces/default/pods?watch=1&resourceVersion={from}&timeoutSeconds=5");
    // As JSON objects (written from the stored bytes) and as metadata (from the decoded state).
    const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let raw_watches: Vec<_> = ["application/json", METADATA]
        .into_iter()
        .map(|accept| {
            let req = axum::http::Request::builder()
                .uri(&uri)
                .header("accept", accept)
                .body(axum::body::Body::empty())
                .unwrap();
            let router = api.router();
            tokio::spawn(async move {
                let resp = tower::ServiceExt::oneshot(router, req).await.unwrap();
                axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let decodes = api.inner.decoded.decodes();
    let mut p = bound_pod("a", "n1");
    p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let status =
        Patch::Merge(json!({"status": {"phase": "Running", "message": "caf\u{e9} \"q\"\n"}}));
    pods.patch_status("a", &PatchParams::default(), &status)
        .await
        .unwrap();
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"app": "db", "x": "1"}}}));
    pods.patch("a", &PatchParams::default(), &relabel)
        .await
        .unwrap();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert_eq!(
        api.inner.decoded.decodes() - decodes,
        0,
        "no watch decoded a change written through the API"
    );
    // What decoding the store's change feed gives: each change's new state, or a deletion's last
    // state stamped with the deletion's revision.
    let ri = crate::registry::lookup("", "v1", "pods").unwrap();
    let mut feed = api.store().watch("/registry/core/pods/", from).unwrap();
    let (mut want, mut want_meta) = (Vec::new(), Vec::new());
    while let Some(Some(Ok(ev))) = futures::FutureExt::now_or_never(feed.next()) {
        let (ty, bytes) = match ev.kind {
            klab_store::EventKind::Create => ("ADDED", ev.value.unwrap()),
            klab_store::EventKind::Update => ("MODIFIED", ev.value.unwrap()),
            klab_store::EventKind::Delete => ("DELETED", ev.prev_value.unwrap()),
        };
        let kv = klab_store::KeyValue {
            key: ev.key,
            value: bytes,
            create_revision: 0,
            mod_revision: ev.revision,
        };
        let obj = crate::crud::decode_kv(ri, &kv).unwrap();
        let meta = crate::table::partial_object_metadata(&obj);
        for (out, o) in [(&mut want, obj), (&mut want_meta, meta)] {
            out.extend(serde_json::to_vec(&json!({"type": ty, "object": o})).unwrap());
            out.push(b'\n');
        }
    }
    let mut got = Vec::new();
    for w in raw_watches {
        got.push(String::from_utf8(w.await.unwrap().to_vec()).unwrap());
    }
    assert!(got[0].lines().count() >= 5, "{}", got[0]);
    assert_eq!(got[0], String::from_utf8(want).unwrap());
    assert_eq!(got[1], String::from_utf8(want_meta).unwrap());
}

/// A metadata watch and list (`as=PartialObjectMetadata`, a metadata informer's, as the garbage
/// collector's) get each object as a `meta.k8s.io/v1` PartialObjectMetadata with its full
/// metadata and nothing else.
#[tokio::test(start_paused = true)]
async fn metadata_watches_send_partial_object_metadata() {
    use kube::core::PartialObjectMeta;
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let meta: Api<PartialObjectMeta<Pod>> = Api::default_namespaced(c);
    pods.create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    let list = meta.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
    let mut w = meta
        .watch(&WatchParams::default().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("b"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        match w.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => {
                let t = o.types.clone().unwrap();
                assert_eq!(
                    (t.kind.as_str(), t.api_version.as_str()),
                    ("PartialObjectMetadata", "meta.k8s.io/v1")
                );
                assert_eq!(o.metadata.labels.unwrap()["app"], "web");
                assert!(o.metadata.uid.is_some() && o.metadata.resource_version.is_some());
                seen.push(o.metadata.name.unwrap());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["a", "b"]);
    // The raw line carries no spec or status.
    let (code, _) = raw(
        &api,
        "GET",
        "/api/v1/namespaces/default/pods",
        "",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    let req = axum::http::Request::builder()
        .uri("/api/v1/namespaces/default/pods?watch=true&resourceVersion=0&timeoutSeconds=1")
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = tower::ServiceExt::oneshot(api.router(), req).await.unwrap();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let first: Value = serde_json::from_slice(body.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["object"]["kind"], "PartialObjectMetadata");
    assert!(first["object"].get("spec").is_none() && first["object"].get("status").is_none());
}

/// A watch from an older resourceVersion replays the history through the same selector, but
/// skips unread the changes whose stored bytes cannot be on its node: a kubelet re-watching its
/// node's pods sees its own pods (a binding onto the node as ADDED), and an unscheduled-pods
/// watch sees the binding take the pod away (DELETED), without decoding the other nodes' pods.
#[tokio::test(start_paused = true)]
async fn a_replayed_history_skips_other_nodes_changes_unread() {
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c", "n2"), ("d", "n1")] {
        pods.create(&PostParams::default(), &bound_pod(name, node))
            .await
            .unwrap();
    }
    pods.create(&PostParams::default(), &pod("e"))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "e"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let (code, body) = raw(
        &api,
        "POST",
        "/api/v1/namespaces/default/pods/e/binding",
        "application/json",
        serde_json::to_vec(&binding).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let replay = |fields: &'static str| {
        let pods = pods.clone();
        let rv = rv.clone();
        async move {
            let mut w = pods
                .watch(&WatchParams::default().fields(fields).timeout(1), &rv)
                .await
                .unwrap()
                .boxed();
            let mut out = Vec::new();
            while let Some(Ok(ev)) = w.next().await {
                match ev {
                    WatchEvent::Added(p) => out.push(format!("ADDED {}", p.metadata.name.unwrap())),
                    WatchEvent::Modified(p) => {
                        out.push(format!("MODIFIED {}", p.metadata.name.unwrap()))
                    }
                    WatchEvent::Deleted(p) => {
                        out.push(format!("DELETED {}", p.metadata.name.unwrap()))
                    }
                    _ => {}
                }
            }
            out
        }
    };
    let before = api.inner.decoded.skipped();
    assert_eq!(
        replay("spec.nodeName=n1").await,
        ["ADDED a", "ADDED d", "ADDED e"]
    );
    assert_eq!(
        api.inner.decoded.skipped() - before,
        3,
        "b, c and e's creation (on no node) were not read"
    );
    assert_eq!(replay("spec.nodeName=").await, ["ADDED e", "DELETED e"]);
    assert_eq!(replay("spec.nodeName=n2").await, ["ADDED b", "ADDED c"]);
}

/// A watch whose selector pins no node or name (here a label selector) has no trigger and
/// examines every pod change: the counter the trigger tests rely on does count examinations.
#[tokio::test(start_paused = true)]
async fn a_watch_without_a_pinned_field_examines_every_pod_change() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let mut watches = Vec::new();
    for n in 0..3 {
        let w = pods
            .watch(
                &WatchParams::default()
                    .labels(&format!("app=a{n}"))
                    .timeout(60),
                "0",
            )
            .await
            .unwrap()
            .boxed();
        watches.push(w);
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let examined = api.inner.decoded.examined();
    for i in 0..5 {
        pods.create(&PostParams::default(), &bound_pod(&format!("p{i}"), "n9"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(api.inner.decoded.examined() - examined, 15);
}

/// A kubelet-style watch (`spec.nodeName=n1`) examines no change of another node's pods, yet
/// still gets its own pod's whole life: ADDED when the pod is bound to n1 (its selector starts
/// to match), MODIFIED, DELETED. A `metadata.name` watch examines only that object's changes.
#[tokio::test(start_paused = true)]
async fn a_node_watch_examines_only_its_nodes_pods() {
    let api = crate::testing::memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let mut n1 = pods
        .watch(
            &WatchParams::default()
                .fields("spec.nodeName=n1")
                .timeout(60),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    let mut named = pods
        .watch(
            &WatchParams::default()
                .fields("metadata.name=mine")
                .timeout(60),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let examined = api.inner.decoded.examined();
    for i in 0..30 {
        pods.create(&PostParams::default(), &bound_pod(&format!("o{i}"), "n2"))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        api.inner.decoded.examined() - examined,
        0,
        "n2's pods reach neither watch"
    );
    // An unbound pod, then bound to n1 through the binding subresource.
    let mut mine = bound_pod("mine", "n1");
    if let Some(spec) = mine.spec.as_mut() {
        spec.node_name = None;
    }
    pods.create(&PostParams::default(), &mine).await.unwrap();
    let binding = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "mine"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    });
    let _: serde_json::Value = pods
        .create_subresource("binding", "mine", &PostParams::default(), &binding)
        .await
        .unwrap();
    pods.patch(
        "mine",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    pods.delete("mine", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let kinds = |w: &mut _| {
        ready_events(w)
            .into_iter()
            .map(|(ty, _)| ty)
            .collect::<Vec<_>>()
    };
    let n1_kinds = kinds(&mut n1);
    assert_eq!(n1_kinds.first(), Some(&"ADDED"), "{n1_kinds:?}");
    assert_eq!(n1_kinds.last(), Some(&"DELETED"), "{n1_kinds:?}");
    assert!(
        n1_kinds[1..n1_kinds.len() - 1]
            .iter()
            .all(|k| *k == "MODIFIED")
    );
    let named_kinds = kinds(&mut named);
    assert_eq!(named_kinds.first(), Some(&"ADDED"), "{named_kinds:?}");
    assert_eq!(named_kinds.last(), Some(&"DELETED"), "{named_kinds:?}");
    // n1's watch examined the bind and what followed (not the unbound create); the named watch
    // every change of `mine`: nothing of the 30 others.
    let changes = u64::try_from(named_kinds.len()).unwrap();
    assert_eq!(
        api.inner.decoded.examined() - examined,
        changes + u64::try_from(n1_kinds.len()).unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn a_restart_on_the_same_store_keeps_the_kubernetes_service() {
    use klab_store::memory::MemoryStore;
    let store: klab_store::DynStorage =
        MemoryStore::new() as std::sync::Arc<dyn klab_store::Storage>;
    let clock = klab_api::Clock::virtual_default();
    let first = crate::ApiServer::new(
        store.clone(),
        clock.clone(),
        klab_api::DetRng::seeded(1),
        Default::default(),
    )
    .await
    .unwrap();
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::default_namespaced(client(&first));
    let uid = svcs.get("kubernetes").await.unwrap().metadata.uid;
    let again = crate::ApiServer::new(
        store,
        clock,
        klab_api::DetRng::seeded(2),
        Default::default(),
    )
    .await
    .expect("a restart bootstraps over what is there");
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::default_namespaced(client(&again));
    let k = svcs.get("kubernetes").await.unwrap();
    assert_eq!(k.metadata.uid, uid);
    assert_eq!(k.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.1"));
}

/// PriorityClasses: the two system classes exist from the start, validation and the Priority
/// admission plugin answer with upstream's codes and messages, and nothing refused is stored.
#[tokio::test(start_paused = true)]
async fn priority_classes_and_the_priority_admission_plugin() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let api = memory_server().await;
    let c = client(&api);
    let pcs: Api<PriorityClass> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pc = |v: Value| -> PriorityClass { serde_json::from_value(v).unwrap() };
    let pp = PostParams::default();

    let system: Vec<(String, i32, Option<String>)> = pcs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.metadata.name.unwrap(), p.value, p.preemption_policy))
        .collect();
    let lower = Some("PreemptLowerPriority".to_string());
    assert_eq!(
        system,
        vec![
            (
                "system-cluster-critical".into(),
                2_000_000_000,
                lower.clone()
            ),
            ("system-node-critical".into(), 2_000_001_000, lower.clone()),
        ]
    );

    // Without classes of its own a pod gets 0 and PreemptLowerPriority.
    let p = pods.create(&pp, &pod("plain")).await.unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(
        (spec.priority, spec.preemption_policy),
        (Some(0), lower.clone())
    );
    assert_eq!(spec.priority_class_name, None);

    // Validation (422) and admission (403), nothing stored.
    let cases = [
        (
            json!({"metadata": {"name": "system-mine"}, "value": 10}),
            422,
            "PriorityClass.scheduling.k8s.io \"system-mine\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class",
        ),
        (
            json!({"metadata": {"name": "huge"}, "value": 1_000_000_001}),
            422,
            "PriorityClass.scheduling.k8s.io \"huge\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            json!({"metadata": {"name": "odd"}, "value": 1, "preemptionPolicy": "Sometimes"}),
            422,
            "PriorityClass.scheduling.k8s.io \"odd\" is invalid: preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\"",
        ),
    ];
    for (body, code, message) in cases {
        let e = api_err(pcs.create(&pp, &pc(body.clone())).await.unwrap_err());
        assert_eq!((e.code, e.message.as_str()), (code, message), "{body}");
    }
    let e = api_err(
        pcs.create(
            &pp,
            &pc(json!({"metadata": {"name": "system-node-critical"}, "value": 5})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .ends_with("error: value of system-node-critical PriorityClass must be 2000001000"),
        "{}",
        e.message
    );

    let high = pcs
        .create(
            &pp,
            &pc(json!({"metadata": {"name": "high"}, "value": 1000, "description": "d"})),
        )
        .await
        .unwrap();
    assert_eq!(high.preemption_policy, lower);
    // The value is immutable.
    let e = api_err(
        pcs.patch(
            "high",
            &PatchParams::default(),
            &Patch::Merge(json!({"value": 7})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            "PriorityClass.scheduling.k8s.io \"high\" is invalid: value: Forbidden: may not be changed in an update."
        )
    );

    // A named class resolves; an unknown one and a pod's own priority are refused.
    let mut p = pod("important");
    p.spec.as_mut().unwrap().priority_class_name = Some("high".into());
    let spec = pods.create(&pp, &p).await.unwrap().spec.unwrap();
    assert_eq!(spec.priority, Some(1000));
    let mut p = pod("lost");
    p.spec.as_mut().unwrap().priority_class_name = Some("nope".into());
    let e = api_err(pods.create(&pp, &p).await.unwrap_err());
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            403,
            "Forbidden",
            "pods \"lost\" is forbidden: no PriorityClass with name nope was found"
        )
    );
    let mut p = pod("");
    p.metadata.name = None;
    p.metadata.generate_name = Some("web-".into());
    p.spec.as_mut().unwrap().priority = Some(5);
    let e = api_err(pods.create(&pp, &p).await.unwrap_err());
    assert_eq!(
        e.message,
        "pods \"web-\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
    );
    assert!(pods.get_opt("lost").await.unwrap().is_none());

    // One global default: it names itself in new pods; a second one is refused.
    pcs.create(
        &pp,
        &pc(json!({"metadata": {"name": "standard"}, "value": 100, "globalDefault": true, "preemptionPolicy": "Never"})),
    )
    .await
    .unwrap();
    let e = api_err(
        pcs.create(
            &pp,
            &pc(json!({"metadata": {"name": "other"}, "value": 1, "globalDefault": true})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass standard is already marked as default. Only one default can exist"
        )
    );
    assert!(pcs.get_opt("other").await.unwrap().is_none());
    let e = api_err(
        pcs.patch(
            "high",
            &PatchParams::default(),
            &Patch::Merge(json!({"globalDefault": true})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    let spec = pods
        .create(&pp, &pod("defaulted"))
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.priority_class_name.as_deref(), Some("standard"));
    assert_eq!(spec.priority, Some(100));
    assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));

    // The system classes cannot be deleted by name; others can.
    let e = api_err(
        pcs.delete("system-node-critical", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            403,
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"
        )
    );
    pcs.create(&pp, &pc(json!({"metadata": {"name": "gone"}, "value": 1})))
        .await
        .unwrap();
    // Admission reads the classes as they are when the request arrives: one created or deleted
    // just before is seen at once.
    let mut p = pod("while-there");
    p.spec.as_mut().unwrap().priority_class_name = Some("gone".into());
    assert_eq!(
        pods.create(&pp, &p).await.unwrap().spec.unwrap().priority,
        Some(1)
    );
    pcs.delete("gone", &DeleteParams::default()).await.unwrap();
    assert!(pcs.get_opt("gone").await.unwrap().is_none());
    let mut p = pod("after-gone");
    p.spec.as_mut().unwrap().priority_class_name = Some("gone".into());
    assert_eq!(api_err(pods.create(&pp, &p).await.unwrap_err()).code, 403);

    // A pod update that leaves the priority out keeps it.
    let mut cur = pods.get("important").await.unwrap();
    let s = cur.spec.as_mut().unwrap();
    s.priority = None;
    s.preemption_policy = None;
    cur.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
    let updated = pods.replace("important", &pp, &cur).await.unwrap();
    assert_eq!(updated.spec.unwrap().priority, Some(1000));

    // The Table kubectl prints: NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY.
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .uri("/apis/scheduling.k8s.io/v1/priorityclasses")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let table: Value = serde_json::from_slice(&bytes).unwrap();
    let cols: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        cols,
        ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    );
    let rows: Vec<Value> = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let c = &r["cells"];
            json!([c[0], c[1], c[2], c[4]])
        })
        .collect();
    assert_eq!(
        rows,
        [
            json!(["high", 1000, false, "PreemptLowerPriority"]),
            json!(["standard", 100, true, "Never"]),
            json!([
                "system-cluster-critical",
                2_000_000_000,
                false,
                "PreemptLowerPriority"
            ]),
            json!([
                "system-node-critical",
                2_000_001_000,
                false,
                "PreemptLowerPriority"
            ]),
        ]
    );
}

/// The ServiceAccount admission plugin: bootstrap namespaces have their `default` account, a
/// pod gets the projected API credentials, and a pod whose account does not exist is refused
/// as upstream refuses it (nothing stored).
#[tokio::test(start_paused = true)]
async fn pods_need_their_service_account_and_get_its_credentials() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::namespaced(client(&api), "default");
    let created = pods
        .create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    let spec = created.spec.unwrap();
    let vol = &spec.volumes.as_ref().unwrap()[0];
    assert!(vol.name.starts_with("kube-api-access-"), "{}", vol.name);
    assert!(vol.projected.is_some());
    let mounts = spec.containers[0].volume_mounts.as_ref().unwrap();
    assert_eq!(
        mounts[0].mount_path,
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(mounts[0].name, vol.name);
    let mut robot = pod("robot");
    robot.spec.as_mut().unwrap().service_account_name = Some("robot".into());
    let err = api_err(
        pods.create(&PostParams::default(), &robot)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "pods \"robot\" is forbidden: error looking up service account default/robot: serviceaccount \"robot\" not found"
    );
    assert!(pods.get_opt("robot").await.unwrap().is_none());
}

/// A Table request through the Router: (column names, rows of cells).
async fn table_of(api: &ApiServer, uri: &str) -> (Vec<String>, Vec<Value>) {
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .uri(uri)
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let table: Value = serde_json::from_slice(&bytes).unwrap();
    let cols = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let rows = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].clone())
        .collect();
    (cols, rows)
}

#[tokio::test]
async fn storage_bootstrap_default_class_protection_and_validation() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    let api = memory_server().await;
    let c = client(&api);
    let pp = PostParams::default();

    // The bootstrap driver and default class, as kubectl prints them (Age masked).
    let (cols, rows) = table_of(&api, "/apis/storage.k8s.io/v1/storageclasses").await;
    assert_eq!(
        cols,
        [
            "Name",
            "Provisioner",
            "ReclaimPolicy",
            "VolumeBindingMode",
            "AllowVolumeExpansion",
            "Age"
        ]
    );
    assert_eq!(rows.len(), 1);
    assert_eq!(
        json!(rows[0].as_array().unwrap()[..5]),
        json!([
            "standard (default)",
            "csi.klab.dev",
            "Delete",
            "WaitForFirstConsumer",
            true
        ])
    );
    let (cols, rows) = table_of(&api, "/apis/storage.k8s.io/v1/csidrivers").await;
    assert_eq!(
        cols,
        [
            "Name",
            "AttachRequired",
            "PodInfoOnMount",
            "StorageCapacity",
            "TokenRequests",
            "RequiresRepublish",
            "Modes",
            "Age"
        ]
    );
    assert_eq!(
        json!(rows[0].as_array().unwrap()[..7]),
        json!([
            "csi.klab.dev",
            true,
            false,
            false,
            "<unset>",
            false,
            "Persistent"
        ])
    );

    // A claim without a class gets `standard` and the protection finalizer.
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), "default");
    let claim = |v: Value| -> PersistentVolumeClaim { serde_json::from_value(v).unwrap() };
    let created = pvcs
        .create(
            &pp,
            &claim(json!({"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        created.spec.unwrap().storage_class_name.as_deref(),
        Some("standard")
    );
    assert_eq!(
        created.metadata.finalizers,
        Some(vec!["kubernetes.io/pvc-protection".to_string()])
    );
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));

    // Impossible sizes are refused with upstream's message and store nothing.
    for (size, want) in [
        (
            "0",
            "PersistentVolumeClaim \"zero\" is invalid: spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
        ),
        (
            "-1Gi",
            "PersistentVolumeClaim \"zero\" is invalid: spec.resources[storage]: Invalid value: \"-1Gi\": must be greater than zero",
        ),
    ] {
        let (code, body) = raw(
            &api,
            "POST",
            "/api/v1/namespaces/default/persistentvolumeclaims",
            "application/json",
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "zero"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": size}}}}))
            .unwrap(),
        )
        .await;
        assert_eq!((code, body["message"].as_str().unwrap()), (422, want));
        assert!(pvcs.get_opt("zero").await.unwrap().is_none());
    }

    // A volume: validation first, then the finalizer.
    let pvs: Api<PersistentVolume> = Api::all(c.clone());
    let vol = |v: Value| -> PersistentVolume { serde_json::from_value(v).unwrap() };
    let bad = pvs
        .create(
            &pp,
            &vol(json!({"metadata": {"name": "pv-bad"},
                "spec": {"accessModes": ["ReadWriteSometimes"], "capacity": {"storage": "1Gi"}}})),
        )
        .await
        .map(|_| ())
        .map_err(api_err)
        .unwrap_err();
    assert_eq!(bad.code, 422);
    assert_eq!(
        bad.message,
        "PersistentVolume \"pv-bad\" is invalid: [spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\", spec: Required value: must specify a volume type]"
    );
    assert!(pvs.get_opt("pv-bad").await.unwrap().is_none());
    let pv = pvs
        .create(
            &pp,
            &vol(json!({"metadata": {"name": "pv-1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"},
                         "csi": {"driver": "csi.klab.dev", "volumeHandle": "h1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        pv.metadata.finalizers,
        Some(vec!["kubernetes.io/pv-protection".to_string()])
    );
    let (_, rows) = table_of(&api, "/api/v1/persistentvolumes").await;
    assert_eq!(
        json!(rows[0].as_array().unwrap()[..9]),
        json!([
            "pv-1", "10Gi", "RWO", "Retain", "Pending", "", "", "<unset>", ""
        ])
    );
    // The source is immutable.
    let mut changed = pv.clone();
    changed
        .spec
        .as_mut()
        .unwrap()
        .csi
        .as_mut()
        .unwrap()
        .volume_handle = "h2".into();
    let err = pvs
        .replace("pv-1", &pp, &changed)
        .await
        .map(|_| ())
        .map_err(api_err)
        .unwrap_err();
    assert_eq!(
        err.message,
        "PersistentVolume \"pv-1\" is invalid: spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
    );
}

/// GETs and LISTs in plain JSON write stored objects without decoding them: byte for byte what
/// decoding them gives, encoded (checked against `decode_kv` on the same stored bytes), for a
/// resource served as stored and for events.k8s.io Events (converted, so decoded), whole and
/// paginated.
#[tokio::test(start_paused = true)]
async fn plain_json_reads_are_the_decoded_objects_encoded() {
    use tower::ServiceExt;
    let api = memory_server().await;
    let c = client(&api);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for (name, node) in [("a", "n1"), ("b", "n2"), ("c\u{e9}", "n1")] {
        let mut p = bound_pod(name.trim_end_matches('\u{e9}'), node);
        if name.ends_with('\u{e9}') {
            p.metadata.annotations = Some(
                [(
                    "note".to_string(),
                    "caf\u{e9} \"q\" \\ \n \u{1}".to_string(),
                )]
                .into(),
            );
        }
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "regarding": {"kind": "Pod", "name": "a", "namespace": "default"},
        "note": "Successfully assigned default/a to n1", "reason": "Scheduled", "type": "Normal",
        "action": "Binding", "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-x", "eventTime": "2026-01-01T00:00:00.000000Z"});
    let (code, body) = raw(
        &api,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "application/json",
        serde_json::to_vec(&event).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let get = |uri: String| {
        let api = &api;
        async move {
            let req = axum::http::Request::builder()
                .uri(uri)
                .header("accept", "application/json")
                .body(axum::body::Body::empty())
                .unwrap();
            let resp = api.router().oneshot(req).await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            assert_eq!(ct, "application/json");
            axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap()
        }
    };
    let decoded = |group: &str, plural: &str, key: String| {
        let api = &api;
        let ri = crate::registry::lookup(group, "v1", plural).unwrap();
        async move {
            let kv = api.store().get(&key).await.unwrap().unwrap();
            serde_json::to_vec(&crate::crud::decode_kv(ri, &kv).unwrap()).unwrap()
        }
    };
    let mut items = Vec::new();
    for name in ["a", "b", "c"] {
        let got = get(format!("/api/v1/namespaces/default/pods/{name}")).await;
        let want = decoded("", "pods", format!("/registry/core/pods/default/{name}")).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        items.push(serde_json::from_slice::<Value>(&got).unwrap());
    }
    for (group, prefix) in [("", "/api/v1"), ("events.k8s.io", "/apis/events.k8s.io/v1")] {
        let got = get(format!("{prefix}/namespaces/default/events/e1")).await;
        let want = decoded(group, "events", "/registry/core/events/default/e1".into()).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    let rv = api.store().current_revision().to_string();
    let list: Value =
        serde_json::from_slice(&get("/api/v1/namespaces/default/pods".into()).await).unwrap();
    assert_eq!(
        list,
        json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
            "items": items})
    );
    // Two pages: the continue token and the remaining count, then the last item.
    let page: Value =
        serde_json::from_slice(&get("/api/v1/namespaces/default/pods?limit=2".into()).await)
            .unwrap();
    assert_eq!(page["items"], json!(items[..2]));
    assert_eq!(page["metadata"]["remainingItemCount"], json!(1));
    let token = page["metadata"]["continue"].as_str().unwrap();
    let rest: Value = serde_json::from_slice(
        &get(format!(
            "/api/v1/namespaces/default/pods?limit=2&continue={token}"
        ))
        .await,
    )
    .unwrap();
    assert_eq!(rest["items"], json!(items[2..]));
    assert_eq!(rest["metadata"], json!({"resourceVersion": rv}));
    let typed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(typed.items.len(), 3);
}

/// Every answer about one revision of an object is the same bytes — a write's response, the
/// watch event of the write, a get and a list — so that a process of components decodes each
/// revision once (`klab_api::shared`): the status write of a kubelet and its echo included.
#[tokio::test(start_paused = true)]
async fn every_answer_about_one_revision_is_the_same_document() {
    use klab_api::shared::Shared;
    use std::sync::Arc;
    let api = memory_server().await;
    let pods: Api<Shared<Pod>> = Api::default_namespaced(client(&api));
    let created = pods
        .create(&PostParams::default(), &Shared(Arc::new(pod("a"))))
        .await
        .unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert!(
        Arc::ptr_eq(&created.0, &list.items[0].0),
        "create response and list"
    );
    let rv = list.metadata.resource_version.unwrap();
    let mut w = pods
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    let status = pods
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"uid": created.metadata.uid}, "status": {"phase": "Running"}}),
            ),
        )
        .await
        .unwrap();
    let labelled = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .unwrap();
    for (what, written) in [("status patch", &status), ("patch", &labelled)] {
        match w.try_next().await.unwrap().unwrap() {
            WatchEvent::Modified(p) => {
                assert!(Arc::ptr_eq(&p.0, &written.0), "{what} and its watch event")
            }
            other => panic!("{other:?}"),
        }
    }
    let got = pods.get("a").await.unwrap();
    assert!(
        Arc::ptr_eq(&got.0, &labelled.0),
        "get and the last write's response"
    );
    assert_eq!(
        got.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
}

/// A watch whose field selector can be read from stored bytes (a kubelet's `spec.nodeName`,
/// here also `status.phase`) matches a change's previous object without decoding it when the
/// object's last change has left the window: its events are the ones a decoding would give
/// (MODIFIED, ADDED when the new object starts to match, DELETED when it stops), and no
/// previous object is decoded. A label selector cannot be read from the bytes: there the
/// previous object is decoded, as before.
#[tokio::test(start_paused = true)]
async fn a_previous_object_out_of_the_window_is_matched_from_its_bytes() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &bound_pod(name, "n1"))
            .await
            .unwrap();
    }
    let collect = |fields: &str, labels: &str| {
        let pods = pods.clone();
        let wp = WatchParams::default()
            .fields(fields)
            .labels(labels)
            .timeout(30);
        tokio::spawn(async move {
            let w = pods.watch(&wp, "0").await.unwrap().boxed();
            w.filter_map(|e| {
                std::future::ready(match e {
                    Ok(WatchEvent::Added(p)) => {
                        Some(format!("ADDED {}", kube::ResourceExt::name_any(&p)))
                    }
                    Ok(WatchEvent::Modified(p)) => {
                        Some(format!("MODIFIED {}", kube::ResourceExt::name_any(&p)))
                    }
                    Ok(WatchEvent::Deleted(p)) => {
                        Some(format!("DELETED {}", kube::ResourceExt::name_any(&p)))
                    }
                    _ => None,
                })
            })
            .collect::<Vec<_>>()
            .await
        })
    };
    let on_node = collect("spec.nodeName=n1", "");
    let running = collect("spec.nodeName=n1,status.phase=Running", "");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let past_the_window = |prefix: &'static str| {
        let pods = pods.clone();
        async move {
            for i in 0..crate::watch::DECODED_EVENTS_KEPT + 10 {
                pods.create(
                    &PostParams::default(),
                    &bound_pod(&format!("{prefix}{i}"), "n2"),
                )
                .await
                .unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    past_the_window("o").await;
    let before = api.watch_decodes();
    let phase = |p: &str| Patch::Merge(json!({"status": {"phase": p}}));
    for (name, p) in [("a", "Running"), ("b", "Running")] {
        pods.patch_status(name, &PatchParams::default(), &phase(p))
            .await
            .unwrap();
    }
    // Past the window again: `a` stops running, its previous object read from its bytes.
    past_the_window("q").await;
    pods.patch_status("a", &PatchParams::default(), &phase("Succeeded"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        api.watch_decodes().objects_decoded - before.objects_decoded,
        0,
        "no previous object decoded"
    );
    // A label selector cannot be read from the bytes.
    let labelled = collect("", "app=web");
    past_the_window("r").await;
    pods.patch_status("b", &PatchParams::default(), &phase("Failed"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(31)).await;
    let mine = |v: Vec<String>| {
        v.into_iter()
            .filter(|e| e.ends_with(" a") || e.ends_with(" b"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        mine(on_node.await.unwrap()),
        [
            "ADDED a",
            "ADDED b",
            "MODIFIED a",
            "MODIFIED b",
            "MODIFIED a",
            "MODIFIED b"
        ]
    );
    assert_eq!(
        mine(running.await.unwrap()),
        ["ADDED a", "ADDED b", "DELETED a", "DELETED b"]
    );
    assert_eq!(
        api.watch_decodes().objects_decoded - before.objects_decoded,
        1,
        "the labelled watch decoded b's previous object"
    );
    assert_eq!(mine(labelled.await.unwrap()).last().unwrap(), "MODIFIED b");
}

/// A change that no writer's object or memo decoded (here a replay from an old revision) is
/// sent to a JSON watch as its stored bytes: a watch of everything, or one whose field selector
/// is read from the bytes, decodes nothing; a label selector decodes each object it matches
/// against, once for all such watches. The lines are the same either way.
#[tokio::test(start_paused = true)]
async fn a_watch_sends_stored_changes_without_decoding_them() {
    let api = memory_server().await;
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let first = pods
        .create(&PostParams::default(), &bound_pod("p0", "n1"))
        .await
        .unwrap();
    let from = first.metadata.resource_version.unwrap();
    for i in 1..20 {
        pods.create(&PostParams::default(), &bound_pod(&format!("p{i}"), "n1"))
            .await
            .unwrap();
    }
    let lines = |fields: &str, labels: &str| {
        let (api, from) = (api.clone(), from.clone());
        let q = format!("fieldSelector={fields}&labelSelector={labels}&resourceVersion={from}");
        async move {
            let uri = format!("/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1&{q}");
            let (status, body) = raw(&api, "GET", &uri, "application/json", Vec::new()).await;
            assert_eq!(status, 200);
            body.as_str().unwrap_or_default().to_string()
        }
    };
    let before = api.watch_decodes();
    let everything = lines("", "").await;
    let on_node = lines("spec.nodeName%3Dn1", "").await;
    let decoded = || api.watch_decodes().objects_decoded - before.objects_decoded;
    assert_eq!(
        decoded(),
        0,
        "nothing decoded for JSON watches read from bytes"
    );
    assert_eq!(everything.lines().count(), 19, "{everything}");
    assert_eq!(on_node, everything);
    let labelled = lines("", "app%3Dweb").await;
    assert_eq!(labelled, everything);
    let read = api.watch_decodes().from_bytes - before.from_bytes;
    assert!(
        decoded() > 0 && decoded() <= read,
        "{} of {read}",
        decoded()
    );
}
