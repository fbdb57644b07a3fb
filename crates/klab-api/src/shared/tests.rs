//! Tests of the process-wide decode table: one `Arc` per document, Slim's trimming, and that
//! the table forgets what nobody holds.

use super::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube_core::ObjectList;
use kube_core::watch::WatchEvent;

/// A pod document unique to `name` (tests of this module run in parallel and share the table).
fn pod_json(name: &str, rv: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "resourceVersion": rv,
                     "managedFields": [{"manager": "kubectl", "operation": "Update",
                                        "apiVersion": "v1", "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:spec": {}}}]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "n1"},
        "status": {"phase": "Running"}
    })
    .to_string()
}

#[test]
fn the_same_bytes_decode_to_the_same_object_and_other_bytes_do_not() {
    let a: Shared<Pod> = serde_json::from_str(&pod_json("same-a", "1")).unwrap();
    let b: Shared<Pod> = serde_json::from_str(&pod_json("same-a", "1")).unwrap();
    assert!(
        Arc::ptr_eq(&a.0, &b.0),
        "a second decode of the same bytes is the first's object"
    );
    let newer: Shared<Pod> = serde_json::from_str(&pod_json("same-a", "2")).unwrap();
    assert!(!Arc::ptr_eq(&a.0, &newer.0));
    assert_eq!(newer.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(a.metadata.resource_version.as_deref(), Some("1"));
    // The same bytes read as another type are that type's own decode.
    let text = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "same-cm"}})
    .to_string();
    let cm: Shared<ConfigMap> = serde_json::from_str(&text).unwrap();
    let as_slim: Slim<ConfigMap> = serde_json::from_str(&text).unwrap();
    assert_eq!(*cm.0, as_slim.0);
}

#[test]
fn a_shared_object_is_decoded_without_its_managed_fields() {
    let p: Shared<Pod> = serde_json::from_str(&pod_json("slim-a", "7")).unwrap();
    assert_eq!(p.metadata.managed_fields, None);
    assert_eq!(p.metadata.name.as_deref(), Some("slim-a"));
    assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
}

#[test]
fn watch_events_and_lists_decode_their_objects_through_the_table() {
    let line = format!(
        r#"{{"type":"MODIFIED","object":{}}}"#,
        pod_json("watch-a", "3")
    );
    let ev: WatchEvent<Shared<Pod>> = serde_json::from_str(&line).unwrap();
    let WatchEvent::Modified(from_watch) = ev else {
        panic!("not a MODIFIED event");
    };
    let list = format!(
        r#"{{"apiVersion":"v1","kind":"PodList","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
        pod_json("watch-a", "3")
    );
    let list: ObjectList<Shared<Pod>> = serde_json::from_str(&list).unwrap();
    assert!(Arc::ptr_eq(&from_watch.0, &list.items[0].0));
    let from_value: Shared<Pod> =
        serde_json::from_value(serde_json::from_str(&pod_json("watch-a", "3")).unwrap()).unwrap();
    assert_eq!(*from_value.0, *from_watch.0);
}

#[test]
fn a_document_that_does_not_decode_is_an_error_every_time() {
    let bad = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}"#;
    for _ in 0..2 {
        let err = serde_json::from_str::<Shared<Pod>>(bad).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}

#[test]
fn an_object_nobody_holds_is_decoded_afresh_and_the_table_is_swept() {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let text = pod_json("gone-a", "1");
    let first: Shared<Pod> = serde_json::from_str(&text).unwrap();
    let copy = (*first.0).clone();
    drop(first);
    let again: Shared<Pod> = serde_json::from_str(&text).unwrap();
    assert_eq!(*again.0, copy);
    drop(again);
    // Thousands of decodes no one keeps: sweeps hold the table near what is alive.
    for i in 0..3 * MIN_SWEEP {
        let _: Shared<Pod> = serde_json::from_str(&pod_json(&format!("gone-{i}"), "1")).unwrap();
    }
    let n = remembered();
    assert!(n < 2 * MIN_SWEEP + 64, "the table remembers {n} decodes");
}

/// Counted by a kind no other test of the process decodes (the table is the process's).
#[test]
fn live_counts_the_decodes_still_held() {
    use k8s_openapi::api::core::v1::Secret;
    let doc = |name: &str| format!(r#"{{"metadata":{{"name":"{name}"}}}}"#);
    assert_eq!(live_of::<Secret>(), 0);
    let a: Shared<Secret> = serde_json::from_str(&doc("live-a")).unwrap();
    let b: Shared<Secret> = serde_json::from_str(&doc("live-b")).unwrap();
    let again: Shared<Secret> = serde_json::from_str(&doc("live-a")).unwrap();
    assert_eq!(live_of::<Secret>(), 2, "one decode per document");
    drop(a);
    assert_eq!(live_of::<Secret>(), 2, "the same decode is still held");
    drop(again);
    assert_eq!(
        live_of::<Secret>(),
        1,
        "a decode nobody holds is not counted"
    );
    drop(b);
    assert_eq!(live_of::<Secret>(), 0);
}

/// The tests that count the table's entries, one at a time (the table is the process's).
static COUNTING: Mutex<()> = Mutex::new(());

/// Dead decodes are swept after a sixteenth of the table's size of new ones, not when it has
/// doubled: each dead entry keeps its object's allocation (a pod's 2.2 KB).
#[test]
fn a_large_table_keeps_few_dead_decodes() {
    let _one = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let doc = |i: usize, rv: u32| {
        format!(r#"{{"metadata":{{"name":"big-{i}","resourceVersion":"{rv}"}}}}"#)
    };
    // Held, as an informer holds its objects.
    let live = 16 * MIN_SWEEP;
    let mut held: Vec<Shared<ConfigMap>> = (0..live)
        .map(|i| serde_json::from_str(&doc(i, 1)).unwrap())
        .collect();
    // Three in four replaced by their next version, the old one dropped. Sweeping only when
    // the table had doubled would remember all 28 672 decodes here.
    for (i, h) in held.iter_mut().enumerate().take(live / 4 * 3) {
        *h = serde_json::from_str(&doc(i, 2)).unwrap();
    }
    let n = remembered();
    assert!(
        n <= live + live / 8,
        "the table remembers {n} decodes for {live} alive"
    );
    drop(held);
}

#[test]
fn a_decoded_pod_keeps_no_spare_room_in_its_lists() {
    let text = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "room-a", "namespace": "default",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "rs", "uid": "u1"}]},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                 "tolerations": [{"key": "a", "operator": "Exists"},
                                 {"key": "b", "operator": "Exists"}],
                 "volumes": [{"name": "v", "projected": {"sources": [
                     {"configMap": {"name": "x"}}, {"configMap": {"name": "y"}},
                     {"configMap": {"name": "z"}}]}}]},
        "status": {"conditions": [
            {"type": "A", "status": "True"}, {"type": "B", "status": "True"},
            {"type": "C", "status": "True"}, {"type": "D", "status": "True"},
            {"type": "E", "status": "True"}],
            "containerStatuses": [{"name": "c", "image": "nginx", "imageID": "", "ready": true,
                                   "restartCount": 0}]}
    })
    .to_string();
    let p: Shared<Pod> = serde_json::from_str(&text).unwrap();
    let tight = |len: usize, cap: usize| assert_eq!(len, cap);
    let spec = p.spec.as_ref().unwrap();
    let status = p.status.as_ref().unwrap();
    let owners = p.metadata.owner_references.as_ref().unwrap();
    tight(owners.len(), owners.capacity());
    let mounts = spec.containers[0].volume_mounts.as_ref().unwrap();
    tight(mounts.len(), mounts.capacity());
    let tolerations = spec.tolerations.as_ref().unwrap();
    tight(tolerations.len(), tolerations.capacity());
    let sources = spec.volumes.as_ref().unwrap()[0]
        .projected
        .as_ref()
        .unwrap()
        .sources
        .as_ref()
        .unwrap();
    tight(sources.len(), sources.capacity());
    let conditions = status.conditions.as_ref().unwrap();
    assert_eq!(conditions.len(), 5);
    tight(conditions.len(), conditions.capacity());
    let statuses = status.container_statuses.as_ref().unwrap();
    tight(statuses.len(), statuses.capacity());
    // The same document as a plain Slim decode: equal contents.
    let slim: Slim<Pod> = serde_json::from_str(&text).unwrap();
    assert_eq!(*p.0, slim.0);
}
