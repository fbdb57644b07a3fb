//! Everyday kubectl commands beyond the seed experiments, with kubectl 1.27, 1.30 and 1.33 on a
//! live `klab up`: `create deployment`, `set image` and `rollout status|history|undo|restart`,
//! `label` with and without `--overwrite`, `edit` (an editor that rewrites the replicas),
//! `patch --subresource=status`, `get --chunk-size` and `wait --for=condition`.

use std::process::Command;
use std::time::Duration;

use crate::harness::{Klab, kubectl_binary, mask_ages};

#[test]
fn rollouts_labels_edit_status_patches_and_chunked_lists() {
    let k = Klab::start(&["--speed", "20", "--nodes", "2"]);
    for minor in [27, 30, 33] {
        let d = format!("web{minor}");
        let dep = format!("deployment/{d}");
        assert_eq!(
            k.ok(
                minor,
                &[
                    "create",
                    "deployment",
                    &d,
                    "--image=nginx:1.27",
                    "--replicas=2"
                ]
            )
            .trim(),
            format!("deployment.apps/{d} created")
        );
        k.ok(minor, &["rollout", "status", &dep, "--timeout=60s"]);
        assert_eq!(
            k.ok(minor, &["set", "image", &dep, "nginx=nginx:1.28"])
                .trim(),
            format!("deployment.apps/{d} image updated")
        );
        let done = k.ok(minor, &["rollout", "status", &dep, "--timeout=60s"]);
        assert!(
            done.ends_with(&format!("deployment \"{d}\" successfully rolled out\n")),
            "{done}"
        );
        let history = mask_ages(k.ok(minor, &["rollout", "history", &dep]).trim_end());
        assert_eq!(
            history,
            format!("deployment.apps/{d}\nREVISION CHANGE-CAUSE\n1 <none>\n2 <none>"),
            "kubectl 1.{minor}"
        );
        let rev1 = k.ok(minor, &["rollout", "history", &dep, "--revision=1"]);
        assert!(rev1.contains("Image:\tnginx:1.27"), "{rev1}");
        assert_eq!(
            k.ok(minor, &["rollout", "undo", &dep]).trim(),
            format!("deployment.apps/{d} rolled back")
        );
        k.ok(minor, &["rollout", "status", &dep, "--timeout=60s"]);
        let image = k.ok(
            minor,
            &[
                "get",
                &dep,
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image}",
            ],
        );
        assert_eq!(image, "nginx:1.27");
        assert_eq!(
            k.ok(minor, &["rollout", "restart", &dep]).trim(),
            format!("deployment.apps/{d} restarted")
        );
        let restarted = k.ok(
            minor,
            &[
                "get",
                &dep,
                "-o",
                "jsonpath={.spec.template.metadata.annotations}",
            ],
        );
        assert!(
            restarted.contains("kubectl.kubernetes.io/restartedAt"),
            "{restarted}"
        );
        k.ok(
            minor,
            &["wait", "--for=condition=Available", &dep, "--timeout=60s"],
        );

        // Labels: a new one, a changed one refused without --overwrite, then overwritten.
        k.ok(minor, &["label", &dep, "tier=a"]);
        let out = k.kubectl(minor, &["label", &dep, "tier=b"]);
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim(),
            "error: 'tier' already has a value (a), and --overwrite is false"
        );
        k.ok(minor, &["label", &dep, "tier=b", "--overwrite"]);
        let labels = k.ok(
            minor,
            &["get", &dep, "-o", "jsonpath={.metadata.labels.tier}"],
        );
        assert_eq!(labels, "b");

        // edit: the editor rewrites the replicas in the file kubectl hands it.
        let out = Command::new(kubectl_binary(minor))
            .arg("--kubeconfig")
            .arg(&k.kubeconfig)
            .args(["edit", &dep])
            .env("EDITOR", "sed -i s/replicas:\\ 2/replicas:\\ 3/")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("deployment.apps/{d} edited"),
            "{out:?}"
        );
        let replicas = k.ok(minor, &["get", &dep, "-o", "jsonpath={.spec.replicas}"]);
        assert_eq!(replicas, "3");

        // A status patch through the subresource leaves the spec alone.
        assert_eq!(
            k.ok(
                minor,
                &[
                    "patch",
                    &dep,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"observedGeneration":1}}"#
                ]
            )
            .trim(),
            format!("deployment.apps/{d} patched")
        );
    }
    // A chunked list returns every row once, in order (compared with a plain list taken just
    // before; retried while rollouts still change the pods).
    for minor in [27, 30, 33] {
        k.wait_for(
            "a chunked list equal to the full one",
            Duration::from_secs(60),
            || {
                let all = k.ok(33, &["get", "pods", "-o", "name"]);
                let chunked = k.ok(minor, &["get", "pods", "-o", "name", "--chunk-size=2"]);
                (all.lines().count() >= 7 && chunked == all).then_some(())
            },
        );
    }
}
