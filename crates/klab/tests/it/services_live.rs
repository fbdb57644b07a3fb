//! Services and their endpoints on a live `klab up` with real kubectl 1.27, 1.30 and 1.33: a
//! NodePort Service gets its cluster IP and node port, EndpointSlices and Endpoints list its
//! pods, bad Services are refused with upstream's 422 texts, and when a kubelet stops, the
//! endpoint of its pod turns `ready: false` at the node's grace period — seen by a running
//! `kubectl get endpointslices -w`. Waits are for conditions, with bounds.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::{Klab, kubectl_binary};

fn manifests(ns: &str, node_port: u32) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: nginx, image: nginx, ports: [{{name: http, containerPort: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {ns}}}
spec:
  type: NodePort
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: http, nodePort: {node_port}}}]
"#
    )
}

fn stderr_of(k: &Klab, minor: u32, args: &[&str], stdin: Option<&str>) -> String {
    let out = k.kubectl_stdin(minor, args, stdin);
    assert!(!out.status.success(), "1.{minor} {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn services_and_endpoints_with_real_kubectl() {
    let k = Klab::start(&["--speed", "20"]);
    let bound = Duration::from_secs(90);
    for (minor, node_port) in [(27, 30027), (30, 30030), (33, 30033)] {
        let ns = format!("svc-{minor}");
        k.kubectl_stdin(
            minor,
            &["apply", "-f", "-"],
            Some(&manifests(&ns, node_port)),
        );
        let svc = k.ok(minor, &["get", "svc", "web", "-n", &ns, "--no-headers"]);
        let cells: Vec<&str> = svc.split_whitespace().collect();
        assert_eq!(cells[1], "NodePort", "{svc}");
        assert!(
            cells[2].starts_with("10.") && cells[2] != "10.96.0.1",
            "{svc}"
        );
        assert_eq!(cells[4], format!("80:{node_port}/TCP"), "{svc}");
        // Both pods' IPs with the resolved target port, once they are Ready.
        let ep = k.wait_for("two endpoints", bound, || {
            let out = k.ok(minor, &["get", "endpointslices", "-n", &ns, "--no-headers"]);
            let c: Vec<&str> = out.split_whitespace().collect();
            (c.len() == 5 && c[1] == "IPv4" && c[2] == "80" && c[3].split(',').count() == 2)
                .then(|| c[3].to_string())
        });
        // The Endpoints controller is a separate controller, as upstream: it may publish a
        // moment after the slice controller, so wait for it too.
        let mut want: Vec<String> = ep.split(',').map(|ip| format!("{ip}:80")).collect();
        want.sort();
        let out = k.wait_for("both addresses in Endpoints", bound, || {
            let out = k.kubectl(
                minor,
                &["get", "endpoints", "web", "-n", &ns, "--no-headers"],
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            let mut got: Vec<String> = stdout
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .split(',')
                .map(str::to_string)
                .collect();
            got.sort();
            (got == want).then_some(out)
        });
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(
                "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
            ),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        // Bad Services change nothing and say why, as upstream.
        let dup = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: bad, namespace: {ns}}}\nspec:\n  ports: [{{name: a, port: 80}}, {{name: b, port: 80}}]\n"
        );
        let err = stderr_of(&k, minor, &["create", "-f", "-"], Some(&dup));
        assert!(
            err.contains("The Service \"bad\" is invalid: spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}"),
            "{err}"
        );
        let far = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: bad, namespace: {ns}}}\nspec:\n  type: NodePort\n  ports: [{{port: 80, nodePort: 40000}}]\n"
        );
        let err = stderr_of(&k, minor, &["create", "-f", "-"], Some(&far));
        assert!(
            err.contains("The Service \"bad\" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767"),
            "{err}"
        );
        let taken = format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: bad, namespace: {ns}}}\nspec:\n  type: NodePort\n  ports: [{{port: 80, nodePort: {node_port}}}]\n"
        );
        let err = stderr_of(&k, minor, &["create", "-f", "-"], Some(&taken));
        assert!(
            err.contains(&format!("spec.ports[0].nodePort: Invalid value: {node_port}: provided port is already allocated")),
            "{err}"
        );
        let out = k.kubectl(minor, &["get", "svc", "bad", "-n", &ns]);
        assert!(!out.status.success(), "a refused Service was stored");
    }

    // A kubelet stops: a running watch sees the slice change when the pod goes not ready.
    let ns = "svc-33";
    let mut watch = Command::new(kubectl_binary(33))
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .args([
            "get",
            "endpointslices",
            "-n",
            ns,
            "-w",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kubectl watch");
    let pods = k.ok(33, &["get", "pods", "-n", ns, "-o", "wide", "--no-headers"]);
    let node = pods
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(6))
        .expect("a pod with a node")
        .to_string();
    k.klab(&["node", "stop-kubelet", &node]);
    let jsonpath =
        "jsonpath={range .items[*].endpoints[*]}{.nodeName}={.conditions.ready}{\"\\n\"}{end}";
    k.wait_for("the stopped node's endpoint not ready", bound, || {
        let out = k.ok(33, &["get", "endpointslices", "-n", ns, "-o", jsonpath]);
        out.lines()
            .any(|l| l == format!("{node}=false"))
            .then_some(())
    });
    let _ = watch.kill();
    let out = watch.wait_with_output().expect("watch output");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().next().is_some_and(|l| l.starts_with("EVENT")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("MODIFIED ")), "{text}");
    // A pod on a healthy node is still ready: traffic goes there only.
    let out = k.ok(33, &["get", "endpointslices", "-n", ns, "-o", jsonpath]);
    for l in out.lines() {
        let ready = l.ends_with("=true");
        assert_eq!(ready, !l.starts_with(&format!("{node}=")), "{out}");
    }
}
