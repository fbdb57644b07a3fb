//! Other real clients over TLS (kube-rs, the Python `kubernetes` client) and restarts of a real
//! `klab up` on the same data directory.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::harness::Klab;

async fn kube_client(k: &Klab) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(&k.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_over_tls_lists_watches_and_patches() {
    let k = Klab::start(&[]);
    let client = kube_client(&k).await;
    let ns: Api<Namespace> = Api::all(client.clone());
    assert_eq!(
        ns.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let created = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    // Only `a`: the root CA publisher may create `kube-root-ca.crt` here at any moment.
    let mut w = cms
        .watch(
            &WatchParams::default().fields("metadata.name=a").timeout(10),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    match tokio::time::timeout(Duration::from_secs(10), w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Modified(c) => assert_eq!(c.data.unwrap()["k"], "w"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn python_kubernetes_client_lists_watches_and_patches() {
    let k = Klab::start(&[]);
    let script = r#"
import sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
names = [n.metadata.name for n in v1.list_namespace().items]
assert names == ["default", "kube-node-lease", "kube-public", "kube-system"], names
cm = v1.create_namespaced_config_map("default", {"metadata": {"name": "py"}, "data": {"a": "1"}})
rv = cm.metadata.resource_version
v1.patch_namespaced_config_map("py", "default", {"data": {"a": "2"}})
w = watch.Watch()
# Only `py`: the root CA publisher may create `kube-root-ca.crt` here at any moment.
for ev in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5, field_selector="metadata.name=py"):
    assert ev["type"] == "MODIFIED", ev["type"]
    assert ev["object"].data["a"] == "2"
    w.stop()
    break
else:
    raise SystemExit("no watch event")
# Typed clients of another group, and the version endpoint as VersionApi asks for it.
apps = client.AppsV1Api()
apps.create_namespaced_deployment("default", {
    "metadata": {"name": "py"},
    "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "py"}},
             "template": {"metadata": {"labels": {"app": "py"}},
                          "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
assert apps.read_namespaced_deployment("py", "default").spec.replicas == 1
assert client.VersionApi().get_code().major == "1"
# The Python client has no protobuf codec; asked for protobuf, the server answers in the
# `k8s\0` envelope (what a protobuf-speaking client would decode).
# (The client's own connection pool, with its TLS client certificate: call_api's signature
# differs between client releases.)
api = v1.api_client
resp = api.rest_client.pool_manager.request(
    "GET", api.configuration.host + "/api/v1/namespaces/default/configmaps/py",
    headers={"Accept": "application/vnd.kubernetes.protobuf"})
assert resp.status == 200, resp.status
assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf", resp.headers
assert resp.data.startswith(b"k8s\x00"), resp.data[:8]
print("ok")
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&k.kubeconfig)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python client failed (is the `kubernetes` package installed? .ci/run installs it):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

#[test]
fn restart_keeps_objects_and_resource_versions() {
    let k = Klab::start(&[]);
    let manifest =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"},"data":{"a":"1"}}"#;
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(manifest));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = k.ok(
        33,
        &[
            "get",
            "configmap",
            "keep",
            "-o",
            "jsonpath={.metadata.resourceVersion} {.metadata.uid}",
        ],
    );
    let dir = k.stop();
    let k = Klab::start_in(dir, &[]);
    let after = k.ok(
        33,
        &[
            "get",
            "configmap",
            "keep",
            "-o",
            "jsonpath={.metadata.resourceVersion} {.metadata.uid}",
        ],
    );
    assert_eq!(
        before, after,
        "same object, same resourceVersion after a restart"
    );
    // A watch from the old resourceVersion resumes (the change log survived the restart).
    let rv: u64 = before.split(' ').next().unwrap().parse().unwrap();
    let out = k.kubectl_stdin(
        33,
        &[
            "patch",
            "configmap",
            "keep",
            "--type=merge",
            "-p",
            r#"{"data":{"a":"2"}}"#,
        ],
        None,
    );
    assert!(out.status.success());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cms: Api<ConfigMap> = Api::default_namespaced(kube_client(&k).await);
        let mut w = cms
            .watch(&WatchParams::default().timeout(5), &rv.to_string())
            .await
            .unwrap()
            .boxed();
        match tokio::time::timeout(Duration::from_secs(10), w.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Modified(c) => assert_eq!(c.data.unwrap()["a"], "2"),
            other => panic!("expected the change made after the restart, got {other:?}"),
        }
    });
}

#[test]
fn restart_is_a_control_plane_restart_and_cold_start_a_power_loss() {
    let k = Klab::start(&["--speed", "10"]);
    let (_, pod, _) = crate::kubectl_verbs::manifests("default");
    let out = k.kubectl_stdin(33, &["create", "-f", "-"], Some(&pod));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let running = |k: &Klab| {
        k.ok(
            33,
            &["get", "pod", "bare", "-o", "jsonpath={.status.phase}"],
        ) == "Running"
    };
    let restarts = |k: &Klab| {
        k.ok(
            33,
            &[
                "get",
                "pod",
                "bare",
                "-o",
                "jsonpath={.status.containerStatuses[0].restartCount}",
            ],
        )
    };
    let boot_ids = |k: &Klab| {
        k.ok(
            33,
            &[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[*].status.nodeInfo.bootID}",
            ],
        )
    };
    let all_ready = |k: &Klab| {
        let nodes = k.ok(33, &["get", "nodes", "--no-headers"]);
        nodes.lines().count() == 3
            && nodes
                .lines()
                .all(|l| l.split_whitespace().nth(1) == Some("Ready"))
    };
    k.wait_for("bare Running", Duration::from_secs(60), || {
        running(&k).then_some(())
    });
    let boots = boot_ids(&k);
    // The machines' state is saved every second: wait until it has the running container.
    let saved = k.dir.path().join("data/machines.json");
    k.wait_for("machine state saved", Duration::from_secs(30), || {
        std::fs::read_to_string(&saved)
            .ok()
            .filter(|t| t.contains("\"bare\"") && t.contains("\"Running\""))
    });
    let dir = k.stop();
    // A restart of `klab up` restarts the control plane only: the machines kept running, so the
    // container was never restarted and the boot IDs are the same.
    let k = Klab::start_in(dir, &["--speed", "10"]);
    k.wait_for(
        "nodes Ready again, bare Running",
        Duration::from_secs(90),
        || (all_ready(&k) && running(&k)).then_some(()),
    );
    assert_eq!(restarts(&k), "0");
    assert_eq!(boot_ids(&k), boots);
    let dir = k.stop();
    // --cold-start: every node lost power while klab was down; the kubelet starts the pod again
    // (restartCount + 1), on new boot IDs.
    let k = Klab::start_in(dir, &["--speed", "10", "--cold-start"]);
    k.wait_for(
        "nodes Ready again and bare Running with a restart",
        Duration::from_secs(90),
        || (all_ready(&k) && running(&k) && restarts(&k) == "1").then_some(()),
    );
    assert_ne!(boot_ids(&k), boots);
}

/// kube-rs's typed `Api` speaks JSON only (k8s-openapi types carry no protobuf codec), but its
/// TLS transport carries whatever a request says: a ConfigMap created with a protobuf body and
/// read back as protobuf, as client-go's typed clients do, answers in the `k8s\0` envelope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_transport_carries_protobuf_bodies() {
    use http_body_util::BodyExt;
    use klab_apiserver::protobuf::{MEDIA_TYPE, decode_envelope, encode_envelope};

    let k = Klab::start(&[]);
    let client = kube_client(&k).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "pb", "namespace": "default"}, "data": {"k": "v"}});
    let body = encode_envelope("v1", "ConfigMap", &cm).expect("encode");
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", MEDIA_TYPE)
        .header("accept", format!("{MEDIA_TYPE}, application/json"))
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.expect("send");
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["content-type"], MEDIA_TYPE);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let (api_version, kind, obj) = decode_envelope(&bytes).expect("a protobuf envelope");
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    assert_eq!(obj["data"]["k"], "v");
    assert!(
        obj["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );

    // And the typed JSON client sees the same object.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let got = cms.get("pb").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
    assert_eq!(got.metadata.uid.as_deref(), obj["metadata"]["uid"].as_str());
}
