//! Table tests of NodeRestriction: every rule of spec node.md §9.2 with upstream's text.

use serde_json::{Value, json};

use super::*;

fn req<'a>(op: Op, group: &'a str, resource: &'a str, sub: &'a str, name: &'a str) -> Request<'a> {
    Request {
        op,
        group,
        resource,
        subresource: sub,
        namespace: "",
        name,
        object: None,
        old: None,
        node_uid: Some("uid-n1"),
    }
}

fn node(name: &str, labels: Value, taints: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})
}

#[test]
fn nodes() {
    let base = node("n1", json!({"kubernetes.io/hostname": "n1"}), json!([]));
    let run = |op: Op, name: &str, obj: &Value, old: Option<&Value>| {
        let mut r = req(op, "", "nodes", "", name);
        r.object = Some(obj);
        r.old = old;
        admit("n1", &r)
    };
    assert_eq!(run(Op::Create, "", &base, None), Ok(()));
    assert_eq!(run(Op::Update, "n1", &base, Some(&base)), Ok(()));
    assert_eq!(
        run(
            Op::Update,
            "n2",
            &node("n2", json!({}), json!([])),
            Some(&base)
        ),
        Err(r#"node "n1" is not allowed to modify node "n2""#.into())
    );
    assert_eq!(
        run(Op::Create, "", &node("n2", json!({}), json!([])), None),
        Err(r#"node "n1" is not allowed to modify node "n2""#.into())
    );
    // Registration may carry taints; an update may not change them.
    let tainted = node(
        "n1",
        json!({"kubernetes.io/hostname": "n1"}),
        json!([{"key": "k", "effect": "NoSchedule"}]),
    );
    assert_eq!(run(Op::Create, "", &tainted, None), Ok(()));
    assert_eq!(
        run(Op::Update, "n1", &tainted, Some(&base)),
        Err(r#"node "n1" is not allowed to modify taints"#.into())
    );
    assert_eq!(
        run(Op::Update, "n1", &base, Some(&tainted)),
        Err(r#"node "n1" is not allowed to modify taints"#.into())
    );
    // Kubelet labels and labels outside kubernetes.io/k8s.io are fine; others are refused.
    let ok_labels = node(
        "n1",
        json!({"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a", "node.kubernetes.io/exclude-from-external-load-balancers": "",
            "kubelet.kubernetes.io/x": "1", "sub.node.kubernetes.io/y": "1", "example.com/team": "a", "plain": "b"}),
        json!([]),
    );
    assert_eq!(run(Op::Create, "", &ok_labels, None), Ok(()));
    assert_eq!(run(Op::Update, "n1", &ok_labels, Some(&base)), Ok(()));
    let bad = node(
        "n1",
        json!({"kubernetes.io/hostname": "n1", "node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a", "foo.k8s.io/x": "1"}),
        json!([]),
    );
    assert_eq!(
        run(Op::Create, "", &bad, None),
        Err(r#"node "n1" is not allowed to set the following labels: foo.k8s.io/x, node-restriction.kubernetes.io/pool, node-role.kubernetes.io/worker"#.into())
    );
    assert_eq!(
        run(Op::Update, "n1", &bad, Some(&base)),
        Err("is not allowed to modify labels: foo.k8s.io/x, node-restriction.kubernetes.io/pool, node-role.kubernetes.io/worker".into())
    );
    // Removing a forbidden label set by an admin is a modification too; leaving it alone is not.
    assert_eq!(
        run(Op::Update, "n1", &base, Some(&bad)),
        Err("is not allowed to modify labels: foo.k8s.io/x, node-restriction.kubernetes.io/pool, node-role.kubernetes.io/worker".into())
    );
    assert_eq!(run(Op::Update, "n1", &bad, Some(&bad)), Ok(()));
    let cs = json!({"metadata": {"name": "n1"}, "spec": {"configSource": {"configMap": {}}}});
    assert_eq!(
        run(Op::Create, "", &cs, None),
        Err(r#"node "n1" is not allowed to create pods with a non-nil configSource"#.into())
    );
    assert_eq!(
        run(Op::Update, "n1", &cs, Some(&base)),
        Err(
            r#"node "n1" is not allowed to update configSource to a new non-nil configSource"#
                .into()
        )
    );
    // Status writes go through the same checks.
    let mut r = req(Op::Update, "", "nodes", "status", "n2");
    r.object = Some(&base);
    r.old = Some(&base);
    assert_eq!(
        admit("n1", &r),
        Err(r#"node "n1" is not allowed to modify node "n2""#.into())
    );
}

fn pod(node: &str, labels: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "d", "labels": labels}, "spec": {"nodeName": node, "containers": [{"name": "c"}]}})
}

#[test]
fn pods() {
    let mine = pod("n1", json!({"app": "a"}));
    let theirs = pod("n2", json!({"app": "a"}));
    let run = |op: Op, sub: &str, obj: Option<&Value>, old: Option<&Value>| {
        let mut r = req(op, "", "pods", sub, "p");
        r.namespace = "d";
        r.object = obj;
        r.old = old;
        admit("n1", &r)
    };
    assert_eq!(run(Op::Delete, "", None, Some(&mine)), Ok(()));
    assert_eq!(
        run(Op::Delete, "", None, Some(&theirs)),
        Err(r#"node "n1" can only delete pods with spec.nodeName set to itself"#.into())
    );
    assert_eq!(
        run(Op::Update, "", Some(&mine), Some(&mine)),
        Err(
            r#"unexpected operation "UPDATE", node "n1" can only create and delete mirror pods"#
                .into()
        )
    );
    let mut status = mine.clone();
    status["status"] = json!({"phase": "Running"});
    assert_eq!(
        run(Op::Update, "status", Some(&status), Some(&mine)),
        Ok(())
    );
    assert_eq!(
        run(Op::Update, "status", Some(&theirs), Some(&theirs)),
        Err(
            r#"node "n1" can only update pod status for pods with spec.nodeName set to itself"#
                .into()
        )
    );
    assert_eq!(
        run(
            Op::Update,
            "status",
            Some(&pod("n1", json!({"app": "b"}))),
            Some(&mine)
        ),
        Err(r#"node "n1" cannot update labels through pod status"#.into())
    );
    let eviction = json!({"metadata": {"name": "p"}});
    assert_eq!(
        run(Op::Create, "eviction", Some(&eviction), Some(&mine)),
        Ok(())
    );
    assert_eq!(
        run(Op::Create, "eviction", Some(&eviction), Some(&theirs)),
        Err("node n1 can only evict pods with spec.nodeName set to itself".into())
    );
    assert_eq!(
        run(Op::Create, "binding", Some(&eviction), Some(&mine)),
        Err(
            r#"unexpected pod subresource "binding", only 'status' and 'eviction' are allowed"#
                .into()
        )
    );
}

#[test]
fn mirror_pods() {
    let owner = json!({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1", "controller": true});
    let mirror = |f: &dyn Fn(&mut Value)| {
        let mut p = json!({"metadata": {"name": "static-n1", "namespace": "kube-system",
            "annotations": {"kubernetes.io/config.mirror": "abc"}, "ownerReferences": [owner.clone()]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}});
        f(&mut p);
        let mut r = req(Op::Create, "", "pods", "", "");
        r.namespace = "kube-system";
        r.object = Some(&p);
        admit("n1", &r)
    };
    assert_eq!(mirror(&|_| {}), Ok(()));
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|p| p["metadata"]["annotations"] = json!({})),
            r#"pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods"#,
        ),
        (
            Box::new(|p| p["spec"]["nodeName"] = json!("n2")),
            r#"node "n1" can only create pods with spec.nodeName set to itself"#,
        ),
        (
            Box::new(|p| p["metadata"]["ownerReferences"] = json!([])),
            r#"node "n1" can only create pods with an owner reference set to itself"#,
        ),
        (
            Box::new(|p| p["metadata"]["ownerReferences"][0]["name"] = json!("n2")),
            r#"node "n1" can only create pods with an owner reference set to itself"#,
        ),
        (
            Box::new(|p| {
                let o = p["metadata"]["ownerReferences"][0].clone();
                p["metadata"]["ownerReferences"] = json!([o.clone(), o]);
            }),
            r#"node "n1" can only create pods with a single owner reference set to itself"#,
        ),
        (
            Box::new(|p| p["metadata"]["ownerReferences"][0]["controller"] = json!(false)),
            r#"node "n1" can only create pods with a controller owner reference set to itself"#,
        ),
        (
            Box::new(|p| p["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true)),
            r#"node "n1" must not set blockOwnerDeletion on an owner reference"#,
        ),
        (
            Box::new(|p| p["metadata"]["ownerReferences"][0]["uid"] = json!("other")),
            "node n1 UID mismatch: expected other got uid-n1",
        ),
        (
            Box::new(|p| p["spec"]["serviceAccountName"] = json!("default")),
            r#"node "n1" can not create pods that reference a service account"#,
        ),
        (
            Box::new(|p| {
                p["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}])
            }),
            r#"node "n1" can not create pods that reference secrets"#,
        ),
        (
            Box::new(|p| {
                p["spec"]["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "x"}}])
            }),
            r#"node "n1" can not create pods that reference configmaps"#,
        ),
        (
            Box::new(
                |p| p["spec"]["volumes"] = json!([{"name": "t", "projected": {"sources": [{"clusterTrustBundle": {"name": "b", "path": "p"}}]}}]),
            ),
            r#"node "n1" can not create pods that reference clustertrustbundles"#,
        ),
        (
            Box::new(|p| {
                p["spec"]["volumes"] =
                    json!([{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}])
            }),
            r#"node "n1" can not create pods that reference persistentvolumeclaims"#,
        ),
    ];
    for (f, want) in cases {
        assert_eq!(mirror(&*f), Err(want.to_string()));
    }
}

#[test]
fn leases_csinodes_claims() {
    let lease = |name: &str| json!({"metadata": {"name": name, "namespace": "kube-node-lease"}});
    let run = |op: Op,
               group: &str,
               resource: &str,
               sub: &str,
               ns: &str,
               name: &str,
               obj: Option<&Value>,
               old: Option<&Value>| {
        let mut r = req(op, group, resource, sub, name);
        r.namespace = ns;
        r.object = obj;
        r.old = old;
        admit("n1", &r)
    };
    let l1 = lease("n1");
    let l2 = lease("n2");
    assert_eq!(
        run(
            Op::Create,
            "coordination.k8s.io",
            "leases",
            "",
            "kube-node-lease",
            "",
            Some(&l1),
            None
        ),
        Ok(())
    );
    assert_eq!(
        run(
            Op::Create,
            "coordination.k8s.io",
            "leases",
            "",
            "kube-node-lease",
            "",
            Some(&l2),
            None
        ),
        Err("can only access node lease with the same name as the requesting node".into())
    );
    assert_eq!(
        run(
            Op::Update,
            "coordination.k8s.io",
            "leases",
            "",
            "kube-node-lease",
            "n2",
            Some(&l2),
            Some(&l2)
        ),
        Err("can only access node lease with the same name as the requesting node".into())
    );
    assert_eq!(
        run(
            Op::Update,
            "coordination.k8s.io",
            "leases",
            "",
            "default",
            "n1",
            Some(&l1),
            Some(&l1)
        ),
        Err("can only access leases in the \"kube-node-lease\" system namespace".into())
    );
    let c2 = json!({"metadata": {"name": "n2"}});
    assert_eq!(
        run(
            Op::Create,
            "storage.k8s.io",
            "csinodes",
            "",
            "",
            "",
            Some(&c2),
            None
        ),
        Err("can only access CSINode with the same name as the requesting node".into())
    );
    let claim = json!({"metadata": {"name": "c", "namespace": "d", "resourceVersion": "5"}, "spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}});
    let mut resized = claim.clone();
    resized["status"]["capacity"] = json!({"storage": "2Gi"});
    resized["metadata"]["resourceVersion"] = json!("6");
    assert_eq!(
        run(
            Op::Update,
            "",
            "persistentvolumeclaims",
            "status",
            "d",
            "c",
            Some(&resized),
            Some(&claim)
        ),
        Ok(())
    );
    let mut relabeled = claim.clone();
    relabeled["metadata"]["labels"] = json!({"a": "b"});
    assert_eq!(
        run(Op::Update, "", "persistentvolumeclaims", "status", "d", "c", Some(&relabeled), Some(&claim)),
        Err("node \"n1\" is not allowed to update fields other than status.quantity and status.conditions".into())
    );
    assert_eq!(
        run(
            Op::Update,
            "",
            "persistentvolumeclaims",
            "",
            "d",
            "c",
            Some(&claim),
            Some(&claim)
        ),
        Err("may only update PVC status".into())
    );
    // Other kinds are not this plugin's business.
    assert_eq!(
        run(Op::Create, "", "events", "", "d", "", Some(&claim), None),
        Ok(())
    );
}
