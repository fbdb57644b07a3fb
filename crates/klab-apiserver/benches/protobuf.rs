//! The protobuf codec's cost beside JSON's: encode and decode of a full Pod (spec and status)
//! and a 100-pod list, per operation, and the sizes on the wire.
//! Run: `cargo bench -p klab-apiserver --bench protobuf`.
#![allow(clippy::disallowed_methods)] // a benchmark measures wall time on purpose

use std::time::Instant;

use klab_apiserver::protobuf::{decode_envelope, encode_envelope};
use serde_json::{Value, json};

fn pod(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "default", "uid": "0b1c2d3e-0000-4000-8000-000000000001",
            "resourceVersion": "42", "creationTimestamp": "2026-11-22T08:00:00Z", "labels": {"app": "web", "pod-template-hash": "7995b8d97d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7995b8d97d", "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m"}}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "podIP": "10.244.1.5", "startTime": "2026-11-22T08:00:01Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T08:00:02Z"}],
            "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "image": "nginx:1.27", "imageID": "", "started": true,
                "state": {"running": {"startedAt": "2026-11-22T08:00:02Z"}}}]}})
}

fn measure(label: &str, n: usize, obj: &Value, kind: &str) {
    let json_bytes = serde_json::to_vec(obj).unwrap();
    let pb = encode_envelope("v1", kind, obj).unwrap();
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(encode_envelope("v1", kind, obj).unwrap());
    }
    let enc = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(decode_envelope(&pb).unwrap());
    }
    let dec = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(serde_json::to_vec(obj).unwrap());
    }
    let jenc = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(serde_json::from_slice::<Value>(&json_bytes).unwrap());
    }
    let jdec = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!(
        "{label}: protobuf {} bytes, encode {enc:.1} µs, decode {dec:.1} µs | JSON {} bytes, encode {jenc:.1} µs, decode {jdec:.1} µs",
        pb.len(),
        json_bytes.len()
    );
}

fn main() {
    measure("pod", 2000, &pod(0), "Pod");
    let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "42"},
        "items": (0..100).map(pod).collect::<Vec<_>>()});
    measure("100-pod list", 50, &list, "PodList");
}
