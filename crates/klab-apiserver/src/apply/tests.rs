//! Table tests of field management: Update records, Apply merges, conflicts, force, removal of
//! dropped fields, the client-side apply upgrade, and the managedFields wire format.

use super::*;
use crate::registry;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-01T00:01:00Z";

fn deployments() -> &'static ResourceInfo {
    registry::lookup("apps", "v1", "deployments").unwrap()
}

fn pods() -> &'static ResourceInfo {
    registry::lookup("", "v1", "pods").unwrap()
}

fn mgr(name: &str) -> FieldManager {
    FieldManager::new(name, None)
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": image}]}}}})
}

fn entries(obj: &Value) -> Vec<(String, String, String)> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().to_string(),
                        e["operation"].as_str().unwrap().to_string(),
                        e.get("subresource")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn fields_of(obj: &Value, manager: &str) -> Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager)
        .map(|e| e["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn manager_names_follow_upstream_defaults() {
    let cases = [
        (
            Some("kubectl-edit"),
            Some("kubectl/v1.33.0 (linux/amd64)"),
            None,
            "kubectl-edit",
        ),
        (
            None,
            Some("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
            None,
            "kubectl",
        ),
        (
            Some(""),
            Some("kube-controller-manager/v1.33.0"),
            None,
            "kube-controller-manager",
        ),
        (None, Some("py\u{7}thon/1"), None, "python"),
        (None, None, Some("system:node:n1"), "kubelet"),
        (
            None,
            None,
            Some("system:serviceaccount:kube-system:replicaset-controller"),
            "kube-controller-manager",
        ),
        (None, None, Some("system:kube-scheduler"), "kube-scheduler"),
        (None, None, None, ""),
    ];
    for (fm, ua, user, want) in cases {
        assert_eq!(manager_name(fm, ua, user), want, "{fm:?} {ua:?} {user:?}");
    }
    let long = "x".repeat(200);
    assert_eq!(
        manager_name(None, Some(&long), None).len(),
        FIELD_MANAGER_MAX_LENGTH
    );
    assert!(validate_field_manager(&long).is_some());
    assert!(validate_field_manager("a\u{1}").is_some());
    assert!(validate_field_manager("kubectl").is_none());
}

#[test]
fn create_records_an_update_entry_like_upstream() {
    let ri = deployments();
    let mut obj = deployment(1, "nginx:1");
    record_update(ri, &mgr("kubectl-create"), None, None, &mut obj, T0);
    assert_eq!(
        entries(&obj),
        [("kubectl-create".into(), "Update".into(), "".into())]
    );
    let e = &obj["metadata"]["managedFields"][0];
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], T0);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {}, "f:image": {}, "f:name": {}}}}}}
        })
    );
}

#[test]
fn an_update_takes_changed_fields_from_other_managers() {
    let ri = deployments();
    let mut live = deployment(1, "nginx:1");
    record_update(ri, &mgr("kubectl-create"), None, None, &mut live, T0);
    let mut next = deployment(3, "nginx:1");
    next["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
    let requested = next["metadata"]["managedFields"].clone();
    record_update(
        ri,
        &mgr("kubectl-scale"),
        Some(&live),
        Some(requested.clone()),
        &mut next,
        T1,
    );
    assert_eq!(
        fields_of(&next, "kubectl-scale"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(
        fields_of(&next, "kubectl-create")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    // A no-op keeps the times.
    let mut again = next.clone();
    record_update(
        ri,
        &mgr("kubectl-scale"),
        Some(&next),
        next.pointer("/metadata/managedFields").cloned(),
        &mut again,
        "2030-01-01T00:00:00Z",
    );
    assert_eq!(again, next);
}

#[test]
fn subresource_writes_are_recorded_with_their_subresource() {
    let ri = pods();
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let mut next = live.clone();
    next["status"] =
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    record_update(
        ri,
        &FieldManager::new("kubelet", Some("status")),
        Some(&live),
        None,
        &mut next,
        T0,
    );
    assert_eq!(
        entries(&next),
        [("kubelet".into(), "Update".into(), "status".into())]
    );
    assert_eq!(
        fields_of(&next, "kubelet"),
        json!({"f:status": {"f:conditions": {".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:phase": {}}})
    );
}

#[test]
fn requested_managed_fields_replace_reset_or_fall_back() {
    let ri = deployments();
    let mut live = deployment(1, "nginx:1");
    record_update(ri, &mgr("a"), None, None, &mut live, T0);
    let live_fields = live["metadata"]["managedFields"].clone();
    // Invalid sets (bad operation, undecodable fieldsV1) are ignored: the live entries stay.
    for bad in [
        json!([{"manager": "x", "operation": "Bogus", "fieldsType": "FieldsV1", "fieldsV1": {}}]),
        json!([{"manager": "x", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"q:1": {}}}]),
        json!([{"manager": "x", "operation": "Update", "fieldsType": "FieldsV2", "fieldsV1": {}}]),
        json!("nonsense"),
    ] {
        let mut next = live.clone();
        record_update(ri, &mgr("a"), Some(&live), Some(bad.clone()), &mut next, T1);
        assert_eq!(next["metadata"]["managedFields"], live_fields, "{bad}");
    }
    // `[{}]` clears them; the writer then owns only what it changed.
    let mut next = deployment(2, "nginx:1");
    record_update(ri, &mgr("b"), Some(&live), Some(json!([{}])), &mut next, T1);
    assert_eq!(entries(&next), [("b".into(), "Update".into(), "".into())]);
    assert_eq!(fields_of(&next, "b"), json!({"f:spec": {"f:replicas": {}}}));
    // A valid replacement is taken as sent.
    let replacement = json!([{"manager": "c", "operation": "Apply", "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
    let mut next = live.clone();
    record_update(
        ri,
        &mgr("a"),
        Some(&live),
        Some(replacement.clone()),
        &mut next,
        T1,
    );
    assert_eq!(entries(&next), [("c".into(), "Apply".into(), "".into())]);
}

#[test]
fn apply_creates_owns_what_it_sets_and_is_idempotent() {
    let ri = deployments();
    let cfg = deployment(2, "nginx:1");
    let obj = apply(ri, "web", &mgr("kubectl"), None, &cfg, false, T0).unwrap();
    assert_eq!(
        entries(&obj),
        [("kubectl".into(), "Apply".into(), "".into())]
    );
    assert_eq!(
        fields_of(&obj, "kubectl"),
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                    ".": {}, "f:image": {}, "f:name": {}}}}}}
        })
    );
    assert_eq!(obj["spec"]["replicas"], 2);
    let again = apply(ri, "web", &mgr("kubectl"), Some(&obj), &cfg, false, T1).unwrap();
    assert_eq!(again, obj, "same config: same object, same times");
}

#[test]
fn apply_conflicts_with_an_updater_that_changed_the_field() {
    let ri = deployments();
    let cfg = deployment(2, "nginx:1");
    let applied = apply(ri, "web", &mgr("kubectl"), None, &cfg, false, T0).unwrap();
    // A controller scales it.
    let mut scaled = applied.clone();
    scaled["spec"]["replicas"] = json!(5);
    let requested = scaled["metadata"]["managedFields"].clone();
    record_update(
        ri,
        &mgr("kube-controller-manager"),
        Some(&applied),
        Some(requested.clone()),
        &mut scaled,
        T1,
    );
    assert!(
        fields_of(&scaled, "kubectl")["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    // Re-applying the same config now changes a field the controller owns.
    let err = apply(ri, "web", &mgr("kubectl"), Some(&scaled), &cfg, false, T1).unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kube-controller-manager\" using apps/v1: .spec.replicas"
    );
    let d = err.details.unwrap();
    assert_eq!(
        d["causes"],
        json!([{"reason": "FieldManagerConflict",
        "message": "conflict with \"kube-controller-manager\" using apps/v1", "field": ".spec.replicas"}])
    );
    assert_eq!(d["group"], "apps");
    assert_eq!(d["kind"], "deployments");
    assert_eq!(d["name"], "web");
    // Applying the live value shares ownership without conflict.
    let same = apply(
        ri,
        "web",
        &mgr("kubectl"),
        Some(&scaled),
        &deployment(5, "nginx:1"),
        false,
        T1,
    )
    .unwrap();
    assert!(
        fields_of(&same, "kubectl")["f:spec"]
            .get("f:replicas")
            .is_some()
    );
    assert!(
        fields_of(&same, "kube-controller-manager")["f:spec"]
            .get("f:replicas")
            .is_some()
    );
    // Force takes it over.
    let forced = apply(ri, "web", &mgr("kubectl"), Some(&scaled), &cfg, true, T1).unwrap();
    assert_eq!(forced["spec"]["replicas"], 2);
    assert_eq!(
        entries(&forced),
        [("kubectl".into(), "Apply".into(), "".into())]
    );
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let ri = deployments();
    let a = apply(
        ri,
        "web",
        &mgr("alice"),
        None,
        &deployment(1, "img:1"),
        false,
        T0,
    )
    .unwrap();
    let err = apply(
        ri,
        "web",
        &mgr("bob"),
        Some(&a),
        &deployment(2, "img:2"),
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
}

#[test]
fn apply_removes_fields_it_stopped_specifying_unless_another_applier_owns_them() {
    let ri = deployments();
    let mut cfg = deployment(2, "nginx:1");
    cfg["metadata"]["labels"]["tier"] = json!("front");
    cfg["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "sidecar", "image": "envoy"}));
    let obj = apply(ri, "web", &mgr("kubectl"), None, &cfg, false, T0).unwrap();
    // Another applier also specifies the sidecar.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}});
    let obj = apply(ri, "web", &mgr("mesh"), Some(&obj), &other, false, T0).unwrap();
    // kubectl drops the label, the sidecar and replicas.
    let mut smaller = deployment(2, "nginx:1");
    smaller["spec"].as_object_mut().unwrap().remove("replicas");
    let out = apply(ri, "web", &mgr("kubectl"), Some(&obj), &smaller, false, T1).unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    assert!(out["spec"].get("replicas").is_none());
    let names: Vec<&str> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["nginx", "sidecar"],
        "the sidecar stays: mesh applies it"
    );
}

#[test]
fn kubectl_takes_over_fields_from_client_side_apply() {
    let ri = deployments();
    // What `kubectl apply` (client-side) leaves: the annotation, and an Update entry.
    let mut csa = deployment(2, "nginx:1");
    let last = last_applied_text(&csa);
    csa["metadata"]["annotations"] = json!({LAST_APPLIED: last});
    record_update(
        ri,
        &mgr("kubectl-client-side-apply"),
        None,
        None,
        &mut csa,
        T0,
    );
    // `kubectl apply --server-side` with a changed image: no conflict, the annotation follows.
    let cfg = deployment(2, "nginx:2");
    let out = apply(ri, "web", &mgr("kubectl"), Some(&csa), &cfg, false, T1).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    let ann: Value = serde_json::from_str(
        out["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ann["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    // Another manager name gets the conflict.
    let err = apply(ri, "web", &mgr("other"), Some(&csa), &cfg, false, T1).unwrap_err();
    assert!(
        err.message
            .contains("conflict with \"kubectl-client-side-apply\" using apps/v1"),
        "{}",
        err.message
    );
    // A field changed since the last client-side apply is still a conflict for kubectl.
    let mut edited = csa.clone();
    edited["spec"]["replicas"] = json!(7);
    record_update(ri, &mgr("kubectl-edit"), Some(&csa), None, &mut edited, T1);
    let err = apply(
        ri,
        "web",
        &mgr("kubectl"),
        Some(&edited),
        &deployment(3, "nginx:1"),
        false,
        T1,
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas"
    );
}

#[test]
fn managed_fields_round_trip_in_upstream_order() {
    let ri = deployments();
    let a = apply(
        ri,
        "web",
        &mgr("z-applier"),
        None,
        &deployment(1, "i"),
        false,
        T1,
    )
    .unwrap();
    let mut b = a.clone();
    b["metadata"]["labels"]["x"] = json!("y");
    record_update(ri, &mgr("a-updater"), Some(&a), None, &mut b, T0);
    let list = b["metadata"]["managedFields"].as_array().unwrap();
    // Apply entries first, then by time.
    assert_eq!(list[0]["operation"], "Apply");
    assert_eq!(list[1]["manager"], "a-updater");
    let decoded = decode(b.pointer("/metadata/managedFields")).unwrap();
    assert_eq!(encode(&decoded), b["metadata"]["managedFields"]);
}

#[test]
fn a_map_owned_whole_by_an_upgraded_entry_keeps_what_is_still_applied() {
    let ri = registry::lookup("", "v1", "configmaps").unwrap();
    // kubectl's upgrade turned the client-side apply entry (which owns `data` whole) into
    // kubectl's Apply entry.
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {LAST_APPLIED: "{}"},
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {
                    "f:data": {".": {}, "f:a": {}, "f:b": {}},
                    "f:metadata": {"f:annotations": {".": {}, (format!("f:{LAST_APPLIED}")): {}}}}}]},
        "data": {"a": "1", "b": "2"}});
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
        "data": {"a": "9"}});
    let out = apply(ri, "c", &mgr("kubectl"), Some(&live), &cfg, false, T1).unwrap();
    assert_eq!(out["data"], json!({"a": "9"}), "b is dropped, a is kept");
    assert_eq!(
        out["metadata"]["annotations"][LAST_APPLIED],
        r#"{"apiVersion":"v1","data":{"a":"9"},"kind":"ConfigMap","metadata":{"name":"c"}}"#
    );
    // Another manager name does not keep the annotation it stops applying.
    let mut other = live.clone();
    other["metadata"]["managedFields"][0]["manager"] = json!("tool");
    let out = apply(ri, "c", &mgr("tool"), Some(&other), &cfg, false, T1).unwrap();
    assert!(out["metadata"].get("annotations").is_none(), "{out}");
}

#[test]
fn more_than_ten_updaters_are_merged_into_ancient_changes() {
    let ri = registry::lookup("", "v1", "configmaps").unwrap();
    let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    for i in 0..12 {
        let live = obj.clone();
        obj["data"][format!("k{i:02}")] = json!("v");
        let requested = obj["metadata"]["managedFields"].clone();
        let now = format!("2026-01-01T00:00:{i:02}Z");
        record_update(
            ri,
            &mgr(&format!("m{i:02}")),
            Some(&live),
            Some(requested.clone()),
            &mut obj,
            &now,
        );
    }
    let names: Vec<String> = entries(&obj).into_iter().map(|(m, _, _)| m).collect();
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "ancient-changes");
    assert_eq!(names[1], "m03");
    assert_eq!(
        fields_of(&obj, "ancient-changes"),
        json!({"f:data": {".": {}, "f:k00": {}, "f:k01": {}, "f:k02": {}}})
    );
    assert_eq!(
        obj["metadata"]["managedFields"][0]["time"],
        "2026-01-01T00:00:02Z"
    );
}

mod filled {
    //! `typed::compare_filled` against trimming and filling copies of both objects.
    use super::*;
    use proptest::prelude::*;

    /// JSON values from a small vocabulary of pod-like field names, so that random objects hit
    /// the zero value's structs, the fields management leaves out and the schema's lists.
    fn value(depth: u32) -> BoxedStrategy<Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            Just(json!({})),
            Just(json!([])),
            (0i64..3).prop_map(|n| json!(n)),
            prop::sample::select(vec!["a", "b"]).prop_map(|s| json!(s)),
        ];
        if depth == 0 {
            return leaf.boxed();
        }
        let names = prop::sample::select(vec![
            "metadata",
            "spec",
            "status",
            "managedFields",
            "labels",
            "name",
            "containers",
            "template",
            "conditions",
            "type",
            "image",
            "nodeSelector",
            "strategy",
            "involvedObject",
            "kind",
            "apiVersion",
        ]);
        prop_oneof![
            leaf,
            prop::collection::vec((names, value(depth - 1)), 0..5).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
            prop::collection::vec(value(depth - 1), 0..3).prop_map(Value::Array),
        ]
        .boxed()
    }

    /// One of the kinds the random objects are compared as (`i` in `0..4`).
    fn kind_at(i: usize) -> &'static ResourceInfo {
        [
            pods(),
            deployments(),
            registry::lookup("", "v1", "events").unwrap(),
            registry::lookup("", "v1", "configmaps").unwrap(),
        ][i]
    }

    fn object() -> impl Strategy<Value = Value> {
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    "metadata",
                    "spec",
                    "status",
                    "kind",
                    "involvedObject",
                    "source",
                    "data",
                ]),
                value(3),
            ),
            0..5,
        )
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn compare_filled_is_the_comparison_of_filled_copies(
            live in object(),
            new in object(),
            kind in 0usize..4,
            status in any::<bool>(),
        ) {
            let ri = kind_at(kind);
            let sub = status.then_some("status");
            prop_assert_eq!(
                compare_managed(ri, sub, &live, &new),
                compare_managed_by_copies(ri, sub, &live, &new)
            );
        }
    }

    /// `patch`'s fields set on `obj`, one level further down where both hold an object there:
    /// an object that shares most of its parts with the one it came from.
    fn overlay(obj: &mut Value, patch: &Value, deep: bool) {
        let (Some(o), Some(p)) = (obj.as_object_mut(), patch.as_object()) else {
            return;
        };
        for (k, v) in p {
            match (o.get_mut(k), v) {
                (Some(Value::Object(inner)), Value::Object(pv)) if deep => {
                    for (k2, v2) in pv {
                        inner.insert(k2.clone(), v2.clone());
                    }
                }
                _ => {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// The comparison skips the parts both objects hold alike; walking them too finds
        /// nothing more, whichever way round and whatever is left out.
        #[test]
        fn skipping_identical_parts_changes_no_comparison(
            live in object(),
            patch in object(),
            deep in any::<bool>(),
            kind in 0usize..4,
            status in any::<bool>(),
        ) {
            let ri = kind_at(kind);
            let sub = status.then_some("status");
            let mut new = live.clone();
            overlay(&mut new, &patch, deep);
            let zero = schema::zero_object(ri);
            let skip = top_level_ignored(ri, sub);
            for (l, r) in [(&live, &new), (&new, &live), (&live, &live)] {
                prop_assert_eq!(
                    typed::compare_filled(ri, l, r, zero, &skip),
                    typed::filled_comparison(ri, l, r, zero, &skip, false)
                );
            }
        }
    }

    /// `v` with every scalar outside lists (`inside` false) or inside them (true) changed to
    /// another of its type: the first keeps the shape, the second changes it where lists are.
    fn rescalar(v: &Value, inside: bool, in_list: bool) -> Value {
        match v {
            _ if in_list != inside && !v.is_array() && !v.is_object() => v.clone(),
            Value::Bool(b) => json!(!b),
            Value::Number(n) => json!(n.as_i64().map_or(0, |i| i.wrapping_add(1))),
            Value::String(s) => json!(format!("{s}x")),
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| rescalar(i, inside, true)).collect())
            }
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), rescalar(v, inside, in_list)))
                    .collect(),
            ),
            Value::Null => Value::Null,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// A create's entry is the one computed the whole way, whether its set was computed
        /// for it or remembered from an object of the same shape.
        #[test]
        fn a_created_objects_set_is_its_shapes(
            obj in object(),
            kind in 0usize..4,
            status in any::<bool>(),
        ) {
            let ri = kind_at(kind);
            let m = FieldManager::new("creator", status.then_some("status"));
            let variants = [
                obj.clone(),
                rescalar(&obj, false, false),
                rescalar(&obj, true, false),
            ];
            for next in variants {
                let mut created = next.clone();
                record_update(ri, &m, None, None, &mut created, T0);
                let mut decoded = next;
                record_update_decoded(ri, &m, None, None, &mut decoded, T0);
                prop_assert_eq!(created, decoded);
            }
        }
    }

    /// Two pods alike but for their containers' names (list-map keys) and finalizers (set
    /// values) have different sets, each the one computed the whole way: created one after the
    /// other, the second is not given the first's.
    #[test]
    fn created_sets_follow_the_values_in_lists() {
        let ri = pods();
        let m = FieldManager::new("creator", None);
        for (c, f) in [("a", "x"), ("b", "x"), ("b", "y")] {
            let next = json!({"metadata": {"name": "p", "finalizers": [f]},
                "spec": {"containers": [{"name": c, "image": "i"}]}});
            let mut created = next.clone();
            record_update(ri, &m, None, None, &mut created, T0);
            let mut decoded = next;
            record_update_decoded(ri, &m, None, None, &mut decoded, T0);
            assert_eq!(created, decoded, "{c} {f}");
            let fields = &created["metadata"]["managedFields"][0]["fieldsV1"];
            assert!(
                fields["f:spec"]["f:containers"]
                    .get(format!("k:{{\"name\":\"{c}\"}}"))
                    .is_some(),
                "{fields}"
            );
            assert!(
                fields["f:metadata"]["f:finalizers"]
                    .get(format!("v:\"{f}\""))
                    .is_some(),
                "{fields}"
            );
        }
    }

    /// The shape of a created object leaves out its scalars' values only where the zero object
    /// it is compared with cannot hold a scalar: every kind's zero object is objects and nulls.
    #[test]
    fn zero_objects_hold_only_objects_and_nulls() {
        fn objects_and_nulls(v: &Value) -> bool {
            match v {
                Value::Null => true,
                Value::Object(m) => m.values().all(objects_and_nulls),
                _ => false,
            }
        }
        for ri in registry::RESOURCES {
            assert!(objects_and_nulls(schema::zero_object(ri)), "{}", ri.kind);
        }
    }

    /// Objects equal only once trimmed or filled, or only as copies would be.
    #[test]
    fn compare_filled_on_objects_equal_once_filled() {
        let cases = [
            (
                json!({"metadata": {"managedFields": [1]}}),
                json!({"metadata": {}}),
            ),
            (
                json!({"metadata": {"managedFields": [1]}}),
                json!({"metadata": null}),
            ),
            (json!({"metadata": {"managedFields": [1]}}), json!({})),
            (json!({"spec": {}}), json!({"spec": {"containers": null}})),
            (json!({"spec": null}), json!({})),
            (json!({"spec": []}), json!({"spec": {}})),
            (json!({"status": {}}), json!({})),
            (
                json!({"metadata": {"managedFields": [1]}, "spec": {"template": {}}}),
                json!({"spec": {"template": {"metadata": {}, "spec": {"containers": null}}}}),
            ),
            (
                json!({"involvedObject": {}, "source": null}),
                json!({"source": {}}),
            ),
        ];
        for ri in [
            pods(),
            deployments(),
            registry::lookup("", "v1", "events").unwrap(),
            registry::lookup("", "v1", "configmaps").unwrap(),
        ] {
            for sub in [None, Some("status")] {
                for (a, b) in &cases {
                    for (l, r) in [(a, b), (b, a)] {
                        assert_eq!(
                            compare_managed(ri, sub, l, r),
                            compare_managed_by_copies(ri, sub, l, r),
                            "{} {sub:?}: {l} -> {r}",
                            ri.kind
                        );
                    }
                }
            }
        }
    }

    /// Objects shaped as a pod's writes: a kubelet's status update and a create from nothing.
    #[test]
    fn compare_filled_on_pods() {
        let ri = pods();
        let live = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "managedFields": [{"manager": "x"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}});
        let mut new = live.clone();
        new["status"] = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]});
        for sub in [None, Some("status")] {
            let c = compare_managed(ri, sub, &live, &new);
            assert_eq!(c, compare_managed_by_copies(ri, sub, &live, &new));
            let zero = schema::zero_object(ri);
            let created = compare_managed(ri, sub, zero, &new);
            assert_eq!(created, compare_managed_by_copies(ri, sub, zero, &new));
            assert_eq!(c.changed().is_empty(), sub.is_none(), "{c:?}");
            assert!(!created.changed().is_empty());
        }
    }
}

/// A pod as a sequence of writers leaves it: `step` picks the writer and what it changes.
fn pod_write(live: &Value, step: u8) -> (FieldManager, Value) {
    let mut next = live.clone();
    let n = u64::from(step / 8);
    match step % 8 {
        0 => {
            next["metadata"]["labels"]["l"] = json!(format!("v{n}"));
            (mgr("kubectl-label"), next)
        }
        1 => {
            if let Some(l) = next["metadata"]["labels"].as_object_mut() {
                l.remove("l");
            }
            (mgr("kubectl-edit"), next)
        }
        2 => {
            next["metadata"]["annotations"]["a"] = json!(format!("{n}"));
            (mgr("kube-controller-manager"), next)
        }
        3 => {
            next["status"]["phase"] = json!(if n % 2 == 0 { "Running" } else { "Pending" });
            (FieldManager::new("kubelet", Some("status")), next)
        }
        4 => {
            let status = if n % 2 == 0 { "True" } else { "False" };
            next["status"]["conditions"] = json!([{"type": "Ready", "status": status},
                                                   {"type": "PodScheduled", "status": "True"}]);
            (FieldManager::new("kubelet", Some("status")), next)
        }
        5 => {
            next["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]);
            (FieldManager::new("kube-scheduler", Some("status")), next)
        }
        6 => {
            next["spec"]["activeDeadlineSeconds"] = json!(n + 1);
            (mgr("kubectl-patch"), next)
        }
        _ => (mgr("kubectl-label"), next), // a no-op write
    }
}

proptest::proptest! {
    /// Keeping the entries a write does not touch as they are stored gives exactly what
    /// decoding, changing and encoding every entry gives, for any sequence of writers.
    #[test]
    fn entries_kept_in_place_are_the_entries_decoded_and_encoded(
        steps in proptest::collection::vec(0u8..64, 1..24),
    ) {
        let ri = pods();
        let mut live = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        record_update(ri, &mgr("kubectl-create"), None, None, &mut live, T0);
        for (i, step) in steps.into_iter().enumerate() {
            let now = format!("2026-01-01T00:{:02}:00Z", i + 1);
            let (m, proposed) = pod_write(&live, step);
            // A main-resource write sends the stored entries back, as a patch leaves them.
            let requested = live.pointer("/metadata/managedFields").cloned();
            let requested = if m.subresource.is_some() { None } else { requested };
            let mut in_place = proposed.clone();
            let took = record_update_in_place(ri, &m, Some(&live), &mut requested.clone(), &mut in_place, &now);
            proptest::prop_assert!(took, "the stored entries are kept in place");
            let mut decoded = proposed;
            record_update_decoded(ri, &m, Some(&live), requested.as_ref(), &mut decoded, &now);
            proptest::prop_assert_eq!(&in_place, &decoded);
            live = in_place;
        }
    }
}

#[test]
fn entries_sent_anew_or_reset_are_not_kept_in_place() {
    let ri = pods();
    let mut live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    record_update(ri, &mgr("a"), None, None, &mut live, T0);
    let mut next = live.clone();
    next["metadata"]["labels"] = json!({"x": "1"});
    let reset = json!([{}]);
    assert!(!record_update_in_place(
        ri,
        &mgr("b"),
        Some(&live),
        &mut Some(reset.clone()),
        &mut next.clone(),
        T1
    ));
    let other = json!([{"manager": "z", "operation": "Update", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]);
    assert!(!record_update_in_place(
        ri,
        &mgr("b"),
        Some(&live),
        &mut Some(other.clone()),
        &mut next.clone(),
        T1
    ));
    // On create there is nothing stored to keep.
    assert!(!record_update_in_place(
        ri,
        &mgr("b"),
        None,
        &mut None,
        &mut next.clone(),
        T1
    ));
    // The same request through `record_update`: the client's entries replace the stored ones.
    record_update(
        ri,
        &mgr("b"),
        Some(&live),
        Some(other.clone()),
        &mut next,
        T1,
    );
    assert_eq!(entries(&next).len(), 2);
    assert!(entries(&next).iter().any(|e| e.0 == "z"));
}

/// A created object's field set is kept at its shape's second create: shapes seen once (a pod's
/// own projected volume name, a Node's addresses) keep only their hash.
#[test]
fn created_sets_keep_a_shapes_fields_from_its_second_create() {
    let mut c = CreatedSets::default();
    let mut computed = 0;
    let mut fields = |v: u64| {
        computed += 1;
        Some(json!({ "f:metadata": { "f:n": v } }))
    };
    for key in 0..100u128 {
        c.created(key, || fields(0));
    }
    assert!(c.sets.is_empty(), "no shape was seen twice");
    assert_eq!(c.seen.len(), 100);
    c.created(7, || fields(7));
    assert_eq!(c.sets.get(&7), Some(&json!({ "f:metadata": { "f:n": 7 } })));
    assert!(!c.seen.contains(&7));
    assert_eq!(computed, 1, "fields are computed only to be kept");
}

/// The same shape created again and again gets the same managed fields as the first time,
/// whether they were computed or remembered.
#[test]
fn creates_of_one_shape_record_the_same_fields_each_time() {
    let ri = registry::lookup("", "v1", "configmaps").unwrap();
    let manager = FieldManager::new("created-sets-test", None);
    let sets: Vec<Value> = (0..4)
        .map(|i| {
            let mut obj = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "default",
                             "labels": {"created-sets-test": "x"}},
                "data": {"k": format!("v{i}")},
            });
            record_update(ri, &manager, None, None, &mut obj, "2026-01-01T00:00:00Z");
            obj["metadata"]["managedFields"].clone()
        })
        .collect();
    assert!(sets.windows(2).all(|w| w[0] == w[1]), "{sets:?}");
    assert_eq!(
        sets[0][0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}},
               "f:metadata": {"f:labels": {".": {}, "f:created-sets-test": {}}}})
    );
}
