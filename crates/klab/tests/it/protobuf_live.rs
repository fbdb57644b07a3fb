//! kubectl's generator commands against a live `klab up` with kubectl 1.27, 1.30 and 1.33:
//! from 1.32 on, `kubectl create namespace|deployment|job|configmap|secret|serviceaccount|
//! service|pdb|quota|priorityclass` and `kubectl run` send protobuf bodies (and ask for
//! protobuf answers); older versions send JSON. Every version must print what a real cluster
//! prints and store the same objects.

use crate::harness::Klab;

fn generators(ns: &str) -> Vec<(String, String)> {
    let n = format!("-n {ns}");
    [
        (
            format!("create namespace {ns}"),
            format!("namespace/{ns} created"),
        ),
        (
            format!("create deployment web --image=nginx:1.27 --replicas=0 --port=80 {n}"),
            "deployment.apps/web created".into(),
        ),
        (
            format!("create job once --image=busybox:1.36 {n} -- sleep 1"),
            "job.batch/once created".into(),
        ),
        (
            format!("create configmap cfg --from-literal=a=1 --from-literal=b=two {n}"),
            "configmap/cfg created".into(),
        ),
        (
            format!("create secret generic pw --from-literal=password=s3cr3t {n}"),
            "secret/pw created".into(),
        ),
        (
            format!("create serviceaccount robot {n}"),
            "serviceaccount/robot created".into(),
        ),
        (
            format!("create service clusterip api --tcp=80:8080 {n}"),
            "service/api created".into(),
        ),
        (
            format!("create pdb budget --selector=app=web --min-available=1 {n}"),
            "poddisruptionbudget.policy/budget created".into(),
        ),
        (
            format!("create quota q --hard=pods=3,requests.cpu=2 {n}"),
            "resourcequota/q created".into(),
        ),
        (
            format!("run solo --image=nginx:1.27 --restart=Never --labels=app=solo {n}"),
            "pod/solo created".into(),
        ),
    ]
    .into_iter()
    .collect()
}

fn get(k: &Klab, minor: u32, ns: &str, what: &str, path: &str) -> String {
    k.ok(
        minor,
        &["get", what, "-n", ns, "-o", &format!("jsonpath={path}")],
    )
}

/// An object as stored, without what differs by namespace, identity, time or allocation.
fn stored(k: &Klab, ns: &str, what: &str) -> serde_json::Value {
    let out = k.ok(33, &["get", what, "-n", ns, "-o", "json"]);
    let mut v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let o = v.as_object_mut().expect("object");
    o.remove("status");
    if let Some(meta) = o.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "namespace",
            "managedFields",
            "generation",
        ] {
            meta.remove(key);
        }
        if let Some(labels) = meta.get_mut("labels").and_then(|l| l.as_object_mut()) {
            labels.retain(|k, _| !k.contains("controller-uid"));
        }
    }
    mask(&mut v);
    v
}

/// Masks what varies between two equal requests: allocated cluster IPs, the scheduled node,
/// UIDs (a Job's selector names its controller's) and the random suffix of the projected
/// service-account volume (`kube-api-access-xxxxx`).
fn mask(v: &mut serde_json::Value) {
    let is_uid = |s: &str| {
        s.len() == 36
            && s.char_indices().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if matches!(k.as_str(), "clusterIP" | "clusterIPs" | "nodeName") {
                    *x = serde_json::Value::String("MASKED".into());
                } else {
                    mask(x);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(mask),
        serde_json::Value::String(s) if is_uid(s) => *s = "MASKED".into(),
        serde_json::Value::String(s) if s.starts_with("kube-api-access-") => {
            *s = "kube-api-access-MASKED".into()
        }
        _ => {}
    }
}

#[test]
fn generator_commands_work_with_protobuf_and_json_kubectl() {
    let k = Klab::start(&[]);
    for minor in [27, 30, 33] {
        let ns = format!("gen{minor}");
        for (args, expect) in generators(&ns) {
            let argv: Vec<&str> = args.split_whitespace().collect();
            assert_eq!(
                k.ok(minor, &argv).trim_end(),
                expect,
                "kubectl 1.{minor} {args}"
            );
        }
        // What was stored is what the generator meant, whichever encoding carried it.
        assert_eq!(
            get(&k, minor, &ns, "deployment/web", "{.spec.replicas}"),
            "0"
        );
        assert_eq!(
            get(
                &k,
                minor,
                &ns,
                "deployment/web",
                "{.spec.revisionHistoryLimit} {.spec.template.spec.containers[0].image}"
            ),
            "10 nginx:1.27"
        );
        assert_eq!(
            get(&k, minor, &ns, "configmap/cfg", "{.data.a} {.data.b}"),
            "1 two"
        );
        assert_eq!(
            get(&k, minor, &ns, "secret/pw", "{.data.password}"),
            "czNjcjN0"
        );
        assert_eq!(
            get(
                &k,
                minor,
                &ns,
                "service/api",
                "{.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.type}"
            ),
            "80 8080 ClusterIP"
        );
        assert_eq!(
            get(&k, minor, &ns, "pdb/budget", "{.spec.minAvailable}"),
            "1"
        );
        assert_eq!(
            get(
                &k,
                minor,
                &ns,
                "quota/q",
                "{.spec.hard.pods} {.spec.hard.requests\\.cpu}"
            ),
            "3 2"
        );
        assert_eq!(
            get(
                &k,
                minor,
                &ns,
                "job/once",
                "{.spec.template.spec.containers[0].command}"
            ),
            "[\"sleep\",\"1\"]"
        );
        // Zero values Go writes for unset fields stay unset, as upstream's JSON omits them.
        let pod = k.ok(minor, &["get", "pod", "solo", "-n", &ns, "-o", "yaml"]);
        for absent in ["stdin:", "tty:", "hostNetwork:", "healthCheckNodePort"] {
            assert!(
                !pod.contains(absent),
                "kubectl 1.{minor}: {absent} in\n{pod}"
            );
        }
        let deploy = k.ok(
            minor,
            &["get", "deployment", "web", "-n", &ns, "-o", "yaml"],
        );
        assert!(deploy.contains("containerPort: 80"), "{deploy}");
        assert!(!deploy.contains("hostPort"), "kubectl 1.{minor}:\n{deploy}");
        let svc = k.ok(minor, &["get", "service", "api", "-n", &ns, "-o", "yaml"]);
        assert!(!svc.contains("healthCheckNodePort"), "{svc}");
        // describe reads through the typed (protobuf-asking) client.
        let d = k.ok(minor, &["describe", "deployment", "web", "-n", &ns]);
        assert!(
            d.contains("Replicas:               0 desired"),
            "kubectl 1.{minor}:\n{d}"
        );
        // Delete through the typed client too.
        assert_eq!(
            k.ok(minor, &["delete", "configmap", "cfg", "-n", &ns])
                .trim_end(),
            "configmap \"cfg\" deleted"
        );
    }
    // kubectl 1.30 sent JSON and 1.33 protobuf: what was stored is the same.
    for what in [
        "deployment/web",
        "job/once",
        "secret/pw",
        "serviceaccount/robot",
        "service/api",
        "pdb/budget",
        "quota/q",
        "pod/solo",
    ] {
        assert_eq!(
            stored(&k, "gen30", what),
            stored(&k, "gen33", what),
            "{what} differs between kubectl 1.30 (JSON) and 1.33 (protobuf)"
        );
    }
    // kubectl 1.33 sends `create priorityclass` as protobuf as well.
    assert_eq!(
        k.ok(
            33,
            &[
                "create",
                "priorityclass",
                "batch",
                "--value=10",
                "--preemption-policy=Never"
            ]
        )
        .trim_end(),
        "priorityclass.scheduling.k8s.io/batch created"
    );
    assert_eq!(
        k.ok(
            33,
            &[
                "get",
                "pc",
                "batch",
                "-o",
                "jsonpath={.value} {.preemptionPolicy}"
            ]
        ),
        "10 Never"
    );
}
