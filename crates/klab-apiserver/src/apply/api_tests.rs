//! Server-side apply and managedFields through the Router: kube-rs `Patch::Apply` and raw
//! requests for what a typed client cannot send.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::ApiServer;
use crate::identity::Identity;
use crate::testing::memory_server;

fn client(api: &ApiServer) -> kube::Client {
    kube::Client::new(api.router_as(Identity::admin()), "default")
}

async fn raw(
    api: &ApiServer,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    use tower::ServiceExt;
    let mut req = axum::http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(axum::body::Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const APPLY: (&str, &str) = ("content-type", "application/apply-patch+yaml");

fn deployment(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": image}]}}}})
}

fn managers(obj: &Value) -> Vec<(String, String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["operation"].as_str().unwrap_or("").to_string(),
                        e["subresource"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

const DEPLOY_URL: &str = "/apis/apps/v1/namespaces/default/deployments/web";

#[tokio::test(start_paused = true)]
async fn apply_creates_then_conflicts_then_forces() {
    let api = memory_server().await;
    // Create via apply: 201, owned by the applier.
    let (code, created) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}?fieldManager=kubectl&fieldValidation=Strict&force=false"),
        &[APPLY],
        deployment(2, "nginx:1"),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        managers(&created),
        [("kubectl".into(), "Apply".into(), "".into())]
    );
    // Defaults are filled in but not owned by the applier.
    assert_eq!(created["spec"]["revisionHistoryLimit"], 10);
    assert!(
        created["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]
            .get("f:revisionHistoryLimit")
            .is_none()
    );
    // Scaled through the scale subresource by another manager.
    let (code, _) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}/scale"),
        &[
            ("content-type", "application/merge-patch+json"),
            (
                "user-agent",
                "kubectl/v1.33.0 (linux/amd64) kubernetes/8adc0f0",
            ),
        ],
        json!({"spec": {"replicas": 4}}),
    )
    .await;
    assert_eq!(code, 200);
    // Re-applying replicas: 2 conflicts with the scaler.
    let (code, err) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}?fieldManager=kubectl&force=false"),
        &[APPLY],
        deployment(2, "nginx:1"),
    )
    .await;
    assert_eq!(code, 409, "{err}");
    assert_eq!(
        err["message"],
        "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using apps/v1: .spec.replicas"
    );
    assert_eq!(
        err["details"]["causes"][0]["reason"],
        "FieldManagerConflict"
    );
    assert_eq!(err["details"]["causes"][0]["field"], ".spec.replicas");
    // Nothing was stored by the refused apply.
    let (_, live) = raw(&api, "GET", DEPLOY_URL, &[], Value::Null).await;
    assert_eq!(live["spec"]["replicas"], 4);
    // Force takes the field over.
    let (code, forced) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}?fieldManager=kubectl&force=true"),
        &[APPLY],
        deployment(2, "nginx:1"),
    )
    .await;
    assert_eq!(code, 200, "{forced}");
    assert_eq!(forced["spec"]["replicas"], 2);
    assert_eq!(
        managers(&forced),
        [("kubectl".into(), "Apply".into(), "".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn kube_rs_apply_and_dropped_fields() {
    let api = memory_server().await;
    let cms: Api<ConfigMap> = Api::namespaced(client(&api), "default");
    let pp = PatchParams::apply("operator");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
        "data": {"a": "1", "b": "2"}});
    cms.patch("cfg", &pp, &Patch::Apply(&cm)).await.unwrap();
    let smaller = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
        "data": {"a": "1"}});
    let out = cms
        .patch("cfg", &pp, &Patch::Apply(&smaller))
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(
        data.len(),
        1,
        "b was applied before and dropped now: removed"
    );
    let mf = out.metadata.managed_fields.unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("operator"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
}

#[tokio::test(start_paused = true)]
async fn writes_record_their_managers() {
    let api = memory_server().await;
    let deps: Api<Deployment> = Api::namespaced(client(&api), "default");
    let d: Deployment = serde_json::from_value(deployment(1, "nginx:1")).unwrap();
    let pp = PostParams {
        field_manager: Some("kubectl-create".into()),
        ..Default::default()
    };
    let created = deps.create(&pp, &d).await.unwrap();
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("kubectl-create"));
    assert_eq!(mf[0].operation.as_deref(), Some("Update"));
    assert_eq!(mf[0].api_version.as_deref(), Some("apps/v1"));
    // The User-Agent names the manager when no fieldManager is given.
    let (code, patched) = raw(
        &api,
        "PATCH",
        DEPLOY_URL,
        &[
            ("content-type", "application/strategic-merge-patch+json"),
            ("user-agent", "kubectl-edit/v1.33.0"),
        ],
        json!({"metadata": {"labels": {"team": "a"}}}),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        managers(&patched),
        [
            ("kubectl-create".into(), "Update".into(), "".into()),
            ("kubectl-edit".into(), "Update".into(), "".into())
        ]
    );
    let edit = &patched["metadata"]["managedFields"][1];
    assert_eq!(
        edit["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:team": {}}}})
    );
    // Status writes are recorded with their subresource.
    let (code, st) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}/status?fieldManager=kube-controller-manager"),
        &[("content-type", "application/merge-patch+json")],
        json!({"status": {"observedGeneration": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{st}");
    assert!(managers(&st).contains(&(
        "kube-controller-manager".into(),
        "Update".into(),
        "status".into()
    )));
}

#[tokio::test(start_paused = true)]
async fn bad_apply_requests_are_refused_and_store_nothing() {
    let api = memory_server().await;
    let cases: Vec<(String, Value, u16, &str)> = vec![
        (
            DEPLOY_URL.to_string(),
            deployment(1, "x"),
            422,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ),
        (
            format!("{DEPLOY_URL}?fieldManager={}", "m".repeat(129)),
            deployment(1, "x"),
            422,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes",
        ),
        (
            format!("{DEPLOY_URL}?fieldManager=a"),
            {
                let mut d = deployment(1, "x");
                d["spec"]["replicaz"] = json!(3);
                d["spec"]["template"]["spec"]["containers"][0]["imagee"] = json!("y");
                d
            },
            500,
            "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): .spec.replicaz: field not declared in schema\n.spec.template.spec.containers[name=\"nginx\"].imagee: field not declared in schema",
        ),
        (
            format!("{DEPLOY_URL}?fieldManager=a"),
            {
                let mut d = deployment(1, "x");
                d["apiVersion"] = json!("apps/v2");
                d
            },
            400,
            "Incorrect version specified in apply patch. Specified patch version: apps/v2, expected: apps/v1",
        ),
        (
            format!("{DEPLOY_URL}?fieldManager=a"),
            {
                let mut d = deployment(1, "x");
                d["kind"] = json!("ReplicaSet");
                d
            },
            400,
            "Incorrect kind specified in apply patch. Specified patch kind: ReplicaSet, expected: Deployment",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments/other?fieldManager=a".to_string(),
            deployment(1, "x"),
            400,
            "the name of the object (web) does not match the name on the URL (other)",
        ),
    ];
    for (uri, body, code, message) in cases {
        let (got, err) = raw(&api, "PATCH", &uri, &[APPLY], body).await;
        assert_eq!(got, code, "{uri}: {err}");
        assert_eq!(err["message"], message, "{uri}");
        assert_eq!(err["kind"], "Status");
    }
    let (code, _) = raw(&api, "GET", DEPLOY_URL, &[], Value::Null).await;
    assert_eq!(code, 404, "no bad apply created the object");
    // `force` on a non-apply patch.
    let (code, err) = raw(
        &api,
        "PATCH",
        &format!("{DEPLOY_URL}?force=true"),
        &[("content-type", "application/merge-patch+json")],
        json!({}),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        err["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
}

#[tokio::test(start_paused = true)]
async fn managed_fields_in_an_update_are_taken_reset_or_ignored() {
    let api = memory_server().await;
    let url = "/api/v1/namespaces/default/configmaps/cfg";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
        "data": {"a": "1"}});
    let (code, created) = raw(
        &api,
        "PATCH",
        &format!("{url}?fieldManager=op"),
        &[APPLY],
        cm.clone(),
    )
    .await;
    assert_eq!(code, 201);
    // The same apply again is a no-op: no new revision.
    let (code, again) = raw(
        &api,
        "PATCH",
        &format!("{url}?fieldManager=op"),
        &[APPLY],
        cm,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    // A PUT carrying an undecodable set keeps the stored entries (upstream ignores it).
    let mut bad = created.clone();
    bad["metadata"]["managedFields"][0]["fieldsV1"] = json!({"x:bogus": {}});
    bad["data"]["b"] = json!("2");
    let (code, put) = raw(
        &api,
        "PUT",
        &format!("{url}?fieldManager=editor"),
        &[("content-type", "application/json")],
        bad,
    )
    .await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(
        managers(&put),
        [
            ("op".into(), "Apply".into(), "".into()),
            ("editor".into(), "Update".into(), "".into())
        ]
    );
    assert_eq!(
        put["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    // `[{}]` clears them all; a no-op write then records nobody.
    let mut reset = put.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    let (code, cleared) = raw(
        &api,
        "PUT",
        &format!("{url}?fieldManager=editor"),
        &[("content-type", "application/json")],
        reset,
    )
    .await;
    assert_eq!(code, 200, "{cleared}");
    assert!(
        cleared["metadata"].get("managedFields").is_none(),
        "{cleared}"
    );
    // A dry-run apply answers the would-be object and stores nothing.
    let (code, dry) = raw(
        &api,
        "PATCH",
        &format!("{url}?fieldManager=op&dryRun=All"),
        &[APPLY],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
               "data": {"a": "9"}}),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(dry["data"]["a"], "9");
    let (_, live) = raw(&api, "GET", url, &[], Value::Null).await;
    assert_eq!(live["data"]["a"], "1");
}

/// An update that omits managedFields is the update that sends the stored ones back: the
/// kubelet renews its Lease from a copy decoded without them. Two leases written alike, one
/// renewed each way (by its writer and by another), end with the same entries.
#[tokio::test(start_paused = true)]
async fn an_update_without_managed_fields_is_one_that_sends_them_back() {
    let api = memory_server().await;
    let url = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = |name: &str, renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": renew}})
    };
    let mut stored = Vec::new();
    for name in ["sent-back", "omitted"] {
        let (code, created) = raw(
            &api,
            "POST",
            &format!("{url}?fieldManager=kubelet"),
            &[("content-type", "application/json")],
            lease(name, "2026-01-01T00:00:00.000000Z"),
        )
        .await;
        assert_eq!(code, 201, "{created}");
        stored.push(created);
    }
    for (manager, renew) in [
        ("kubelet", "2026-01-01T00:00:10.000000Z"),
        ("other", "2026-01-01T00:00:20.000000Z"),
    ] {
        for (i, name) in ["sent-back", "omitted"].into_iter().enumerate() {
            let mut next = stored[i].clone();
            next["spec"]["renewTime"] = json!(renew);
            if name == "omitted" {
                next["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("managedFields");
            }
            let (code, put) = raw(
                &api,
                "PUT",
                &format!("{url}/{name}?fieldManager={manager}"),
                &[("content-type", "application/json")],
                next,
            )
            .await;
            assert_eq!(code, 200, "{put}");
            stored[i] = put;
        }
        assert_eq!(
            stored[0]["metadata"]["managedFields"], stored[1]["metadata"]["managedFields"],
            "after a renewal by {manager}"
        );
    }
    assert_eq!(
        managers(&stored[1]),
        [
            ("kubelet".into(), "Update".into(), "".into()),
            ("other".into(), "Update".into(), "".into())
        ]
    );
}
