//! `Slim` decodes exactly what serde decodes, less `metadata.managedFields`.

use super::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use proptest::prelude::*;
use serde_json::{Value, json};

/// `K` from JSON text through `Slim`.
fn from_str<K: de::DeserializeOwned>(s: &str) -> serde_json::Result<K> {
    serde_json::from_str::<Slim<K>>(s).map(Slim::into_inner)
}

fn pod_json() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "labels": {"app": "web", "managedFields": "a label, kept"},
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-29T12:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                              "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}}}}}},
                {"manager": "kubelet", "operation": "Update", "subresource": "status",
                 "apiVersion": "v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:status": {"f:phase": {}}}}
            ],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                 "uid": "u1", "controller": true}]
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx",
                 "resources": {"requests": {"cpu": "250m"}}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn plain<K: de::DeserializeOwned>(v: &Value) -> K {
    serde_json::from_value(v.clone()).expect("decodes")
}

#[test]
fn a_pod_decodes_as_serde_decodes_it_without_managed_fields() {
    let text = pod_json().to_string();
    let slim: Pod = from_str(&text).expect("decodes");
    let mut full: Pod = plain(&pod_json());
    assert_eq!(full.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
    full.metadata.managed_fields = None;
    assert_eq!(slim, full);
    // Other keys of that name are data: a label called managedFields stays.
    assert_eq!(
        slim.metadata.labels.unwrap()["managedFields"],
        "a label, kept"
    );
}

#[test]
fn only_metadata_maps_lose_the_key() {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "managedFields": [{"manager": "kubectl"}]},
        "data": {"managedFields": "x", "metadata": "y"}
    });
    let slim: ConfigMap = from_str(&cm.to_string()).unwrap();
    assert_eq!(slim.metadata.managed_fields, None);
    let data = slim.data.unwrap();
    assert_eq!(
        (data["managedFields"].as_str(), data["metadata"].as_str()),
        ("x", "y")
    );
}

#[test]
fn templates_items_and_watch_events_are_slim_too() {
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"},
                                           "managedFields": [{"manager": "odd"}]},
                              "spec": {"containers": [{"name": "c"}]}}}
    });
    let slim: Deployment = from_str(&d.to_string()).unwrap();
    assert_eq!(slim.metadata.managed_fields, None);
    let template = slim.spec.unwrap().template;
    assert_eq!(template.metadata.unwrap().managed_fields, None);

    let list = json!({"apiVersion": "v1", "kind": "PodList",
                      "metadata": {"resourceVersion": "7"}, "items": [pod_json(), pod_json()]});
    let list: kube_core::ObjectList<Slim<Pod>> = serde_json::from_str(&list.to_string()).unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(
        list.items
            .iter()
            .all(|p| p.metadata.managed_fields.is_none())
    );
    assert_eq!(list.metadata.resource_version.as_deref(), Some("7"));

    // The object may come before the event's type (an adjacently tagged enum buffers it).
    for ev in [
        json!({"type": "MODIFIED", "object": pod_json()}),
        json!({"object": pod_json(), "type": "MODIFIED"}),
    ] {
        let ev: kube_core::WatchEvent<Slim<Pod>> = serde_json::from_str(&ev.to_string()).unwrap();
        let kube_core::WatchEvent::Modified(p) = ev else {
            panic!("a MODIFIED event")
        };
        assert_eq!(p.metadata.managed_fields, None);
        assert_eq!(p.metadata.name.as_deref(), Some("web-1"));
    }
}

#[test]
fn metadata_only_objects_are_slim_too() {
    // What a metadata watch (`as=PartialObjectMetadata`) sends: type fields (flattened) and
    // metadata.
    let meta = json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                      "metadata": {"name": "m", "uid": "u",
                                   "managedFields": [{"manager": "kubectl"}]}});
    type Meta = kube_core::PartialObjectMeta<kube_core::DynamicObject>;
    let slim: Meta = from_str(&meta.to_string()).unwrap();
    assert_eq!(slim.metadata.managed_fields, None);
    assert_eq!(slim.metadata.uid.as_deref(), Some("u"));
    assert_eq!(slim.types.unwrap().kind, "PartialObjectMetadata");
}

#[test]
fn escaped_keys_are_read_as_their_text() {
    let text =
        r#"{"metadata":{"name":"e","manag\u0065dFields":[{"manager":"x"}],"n\u0061mespace":"ns"}}"#;
    let slim: Pod = from_str(text).unwrap();
    assert_eq!(slim.metadata.managed_fields, None);
    assert_eq!(slim.metadata.namespace.as_deref(), Some("ns"));
}

#[test]
fn bad_input_is_an_error_as_serde_gives() {
    for text in [
        "",
        "{",
        r#"{"metadata": 3}"#,
        r#"{"metadata": {"managedFields": [}}"#,
        r#"{"metadata": {"name": 3}}"#,
        r#"{"spec": {"containers": "no"}}"#,
    ] {
        assert!(from_str::<Pod>(text).is_err(), "{text}");
        assert!(serde_json::from_str::<Pod>(text).is_err(), "{text}");
    }
    // Deep nesting hits serde_json's recursion limit, not the stack.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(from_str::<Value>(&deep).is_err());
}

/// The reference: serde's decode, less the `managedFields` of every `metadata` map.
fn strip(v: &mut Value, metadata: bool) {
    match v {
        Value::Object(m) => {
            if metadata {
                m.shift_remove("managedFields");
            }
            for (k, v) in m.iter_mut() {
                strip(v, k == "metadata");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| strip(v, false)),
        _ => {}
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("metadata".to_string()),
        Just("managedFields".to_string()),
        "[a-z]{1,3}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z\"\\\\]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_document_decodes_as_serde_decodes_it_less_managed_fields(doc in any_json()) {
        let text = doc.to_string();
        let mut want: Value = serde_json::from_str(&text).unwrap();
        strip(&mut want, false);
        let got: Value = from_str(&text).unwrap();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn any_pod_shaped_document_decodes_or_fails_as_serde_does(
        name in prop_oneof![Just(json!("p")), Just(json!(3)), Just(json!(null))],
        managed in prop_oneof![Just(json!([])), Just(json!("junk")), Just(json!([{"manager": 1}]))],
        phase in prop_oneof![Just(json!("Running")), Just(json!({}))],
    ) {
        let doc = json!({"metadata": {"name": name, "managedFields": managed},
                         "status": {"phase": phase}});
        let mut stripped = doc.clone();
        strip(&mut stripped, false);
        let want = serde_json::from_value::<Pod>(stripped).ok();
        let got = from_str::<Pod>(&doc.to_string()).ok();
        prop_assert_eq!(got, want);
    }
}
