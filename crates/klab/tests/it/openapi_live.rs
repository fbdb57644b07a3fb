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
