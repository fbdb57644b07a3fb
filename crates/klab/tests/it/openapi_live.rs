//! `kubectl explain` (OpenAPI v3 component schemas with upstream's documentation), strict
//! validation and `kubectl diff` against a live `klab up`, with kubectl 1.27, 1.30 and 1.33.

use crate::harness::Klab;

fn lines(s: &str) -> Vec<&str> {
    s.lines().map(str::trim_end).collect()
}

#[test]
fn explain_prints_upstream_documentation() {
    let k = Klab::start(&[]);
    for minor in [27, 30, 33] {
        let out = k.ok(minor, &["explain", "pod.spec.tolerations"]);
        let l = lines(&out);
        assert_eq!(l[0], "KIND:       Pod", "kubectl 1.{minor}:\n{out}");
        assert_eq!(l[1], "VERSION:    v1", "kubectl 1.{minor}:\n{out}");
        assert!(
            l.contains(&"FIELD: tolerations <[]Toleration>"),
            "kubectl 1.{minor}:\n{out}"
        );
        assert!(
            out.contains("If specified, the pod's tolerations."),
            "{out}"
        );
        assert!(
            out.contains("The pod this Toleration is attached to tolerates any taint that matches"),
            "{out}"
        );
        for field in [
            "  effect\t<string>",
            "  key\t<string>",
            "  operator\t<string>",
            "  tolerationSeconds\t<integer>",
            "  value\t<string>",
        ] {
            assert!(
                l.contains(&field),
                "kubectl 1.{minor}: {field:?} missing:\n{out}"
            );
        }

        let out = k.ok(minor, &["explain", "deployment", "--recursive"]);
        let l = lines(&out);
        assert_eq!(l[0], "GROUP:      apps", "kubectl 1.{minor}:\n{out}");
        assert_eq!(l[1], "KIND:       Deployment");
        assert_eq!(l[2], "VERSION:    v1");
        for field in [
            "  spec\t<DeploymentSpec>",
            "    replicas\t<integer>",
            "    selector\t<LabelSelector> -required-",
            "    template\t<PodTemplateSpec> -required-",
            "      spec\t<PodSpec>",
            "        containers\t<[]Container> -required-",
            "          name\t<string> -required-",
        ] {
            assert!(
                l.contains(&field),
                "kubectl 1.{minor}: {field:?} missing:\n{out}"
            );
        }

        // A field that does not exist: kubectl's own error, from the schema.
        let bad = k.kubectl(minor, &["explain", "pod.spec.nosuchfield"]);
        assert!(!bad.status.success());
        assert!(
            String::from_utf8_lossy(&bad.stderr).contains("field \"nosuchfield\" does not exist"),
            "{}",
            String::from_utf8_lossy(&bad.stderr)
        );
    }
}

#[test]
fn strict_validation_and_diff() {
    let k = Klab::start(&[]);
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: default\ndata:\n  a: \"1\"\n";
    for minor in [27, 30, 33] {
        let name = format!("cfg{minor}");
        let manifest = cm.replace("name: cfg", &format!("name: {name}"));
        // An unknown field is refused by --validate=strict.
        let bad = manifest.replace("data:", "bogus: 1\ndata:");
        let out = k.kubectl_stdin(
            minor,
            &["create", "--validate=strict", "-f", "-"],
            Some(&bad),
        );
        assert!(
            !out.status.success(),
            "kubectl 1.{minor} accepted an unknown field"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unknown field \"bogus\""),
            "kubectl 1.{minor}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = k.kubectl_stdin(
            minor,
            &["create", "--validate=strict", "-f", "-"],
            Some(&manifest),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // diff: nothing to show, then the changed line; exit 1 when there are differences.
        let same = k.kubectl_stdin(minor, &["diff", "-f", "-"], Some(&manifest));
        assert_eq!(
            same.status.code(),
            Some(0),
            "kubectl 1.{minor} diff: {}",
            String::from_utf8_lossy(&same.stderr)
        );
        assert!(same.stdout.is_empty());
        let changed = manifest.replace("a: \"1\"", "a: \"2\"");
        let out = k.kubectl_stdin(minor, &["diff", "-f", "-"], Some(&changed));
        assert_eq!(
            out.status.code(),
            Some(1),
            "kubectl 1.{minor} diff: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("-  a: \"1\"") && text.contains("+  a: \"2\""),
            "kubectl 1.{minor}:\n{text}"
        );
        // The dry run changed nothing.
        assert_eq!(
            k.ok(minor, &["get", "cm", &name, "-o", "jsonpath={.data.a}"]),
            "1"
        );
    }
}

/// What kubectl 1.30+ prints against a real v1.33 cluster for an `+enum` field: the `ENUM:`
/// lines from the schema's `enum`, and upstream's "Possible enum values" in the description.
const RESTART_POLICY: &str = "KIND:       Pod
VERSION:    v1

FIELD: restartPolicy <string>
ENUM:
    Always
    Never
    OnFailure

DESCRIPTION:
    Restart policy for all containers within the pod. One of Always, OnFailure,
    Never. In some contexts, only a subset of those values may be permitted.
    Default to Always. More info:
    https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#restart-policy
    
    Possible enum values:
     - `\"Always\"`
     - `\"Never\"`
     - `\"OnFailure\"`
    

";

const DEPLOY_TWO: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: two, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: two}}
  template:
    metadata: {labels: {app: two}}
    spec:
      containers:
      - {name: a, image: nginx:1.25}
      - {name: b, image: busybox:1.36}
";

#[test]
fn explain_enums_and_openapi_v2_as_upstream() {
    let k = Klab::start(&[]);
    for minor in [30, 33] {
        assert_eq!(
            k.ok(minor, &["explain", "pod.spec.restartPolicy"]),
            RESTART_POLICY,
            "kubectl 1.{minor}"
        );
        let out = k.ok(minor, &["explain", "pod.spec.tolerations"]);
        assert!(
            out.contains("  operator\t<string>\n  enum: Equal, Exists\n"),
            "kubectl 1.{minor}:\n{out}"
        );
        let out = k.ok(minor, &["explain", "service.spec"]);
        assert!(
            out.contains(
                "  type\t<string>\n  enum: ClusterIP, ExternalName, LoadBalancer, NodePort\n"
            ),
            "kubectl 1.{minor}:\n{out}"
        );
        let out = k.ok(minor, &["explain", "pod.spec.containers.imagePullPolicy"]);
        assert!(
            out.contains("ENUM:\n    Always\n    IfNotPresent\n    Never\n"),
            "kubectl 1.{minor}:\n{out}"
        );
    }

    // kubectl 1.27's v2 explain reads /openapi/v2's definitions (protobuf).
    let out = k.ok(
        27,
        &[
            "explain",
            "--output=plaintext-openapiv2",
            "deployment.spec.strategy",
        ],
    );
    assert!(
        out.starts_with("KIND:     Deployment\nVERSION:  apps/v1\n\nRESOURCE: strategy <Object>\n"),
        "{out}"
    );
    assert!(out.contains("   type\t<string>\n     Type of deployment. Can be \"Recreate\" or \"RollingUpdate\". Default is\n     RollingUpdate.\n\n     Possible enum values:\n     - `\"Recreate\"` Kill all existing pods before creating new ones.\n"), "{out}");
    let raw = k.ok(27, &["get", "--raw", "/openapi/v2"]);
    let doc: serde_json::Value = serde_json::from_str(&raw).expect("v2 as JSON");
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );

    // Client-side apply with 1.27 computes its strategic merge patch from /openapi/v2 (the
    // containers list merges by name): changing one container's image keeps the other.
    for minor in [27, 33] {
        let name = format!("two{minor}");
        let manifest = DEPLOY_TWO.replace("name: two,", &format!("name: {name},"));
        let out = k.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&manifest));
        assert!(out.status.success(), "{out:?}");
        let changed = manifest.replace("nginx:1.25", "nginx:1.27");
        let out = k.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&changed));
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "kubectl 1.{minor}: no OpenAPI warning"
        );
        assert_eq!(
            k.ok(
                minor,
                &[
                    "get",
                    "deploy",
                    &name,
                    "-o",
                    "jsonpath={.spec.template.spec.containers[*].image}"
                ]
            ),
            "nginx:1.27 busybox:1.36"
        );
        // Client-side validation (1.27's default when the server's v2 answers) still refuses
        // unknown fields.
        let bad = manifest.replace("replicas: 1", "replicas: 1\n  bogus: 1");
        let out = k.kubectl_stdin(
            minor,
            &["apply", "--validate=strict", "-f", "-"],
            Some(&bad),
        );
        assert!(!out.status.success(), "kubectl 1.{minor} accepted bogus");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unknown field \"spec.bogus\""),
            "kubectl 1.{minor}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
