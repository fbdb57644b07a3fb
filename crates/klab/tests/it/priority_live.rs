//! PriorityClasses with real kubectl 1.27 and 1.33 on a live `klab up`: the two system classes
//! as `kubectl get priorityclass` prints them, `kubectl create priorityclass` with upstream's
//! refusals, and the Priority admission plugin's answer to a pod naming an unknown class.

use crate::harness::{Klab, mask_ages};

fn stderr(k: &Klab, minor: u32, args: &[&str]) -> String {
    let out = k.kubectl(minor, args);
    assert!(
        !out.status.success(),
        "kubectl 1.{minor} {args:?} succeeded"
    );
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn priority_classes_with_kubectl_1_27_and_1_33() {
    let k = Klab::start(&[]);
    for minor in [27, 33] {
        assert_eq!(
            mask_ages(&k.ok(minor, &["get", "priorityclass"])),
            "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY\n\
             system-cluster-critical 2000000000 false AGE PreemptLowerPriority\n\
             system-node-critical 2000001000 false AGE PreemptLowerPriority",
            "kubectl 1.{minor}"
        );
    }
    // kubectl 1.27 sends JSON; 1.33 sends protobuf (covered by protobuf_live).
    k.ok(
        27,
        &[
            "create",
            "priorityclass",
            "batch",
            "--value=10",
            "--global-default",
            "--preemption-policy=Never",
        ],
    );
    assert_eq!(
        mask_ages(&k.ok(33, &["get", "pc", "batch"])),
        "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY\nbatch 10 true AGE Never"
    );
    assert_eq!(
        stderr(
            &k,
            27,
            &["create", "priorityclass", "system-x", "--value=5"]
        ),
        "error: failed to create priorityclass: PriorityClass.scheduling.k8s.io \"system-x\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-x is not a known system priority class"
    );
    assert_eq!(
        stderr(
            &k,
            27,
            &[
                "create",
                "priorityclass",
                "other",
                "--value=1",
                "--global-default"
            ]
        ),
        "error: failed to create priorityclass: priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass batch is already marked as default. Only one default can exist"
    );
    assert_eq!(
        stderr(
            &k,
            33,
            &[
                "run",
                "p",
                "--image=nginx",
                "--overrides={\"spec\":{\"priorityClassName\":\"nope\"}}"
            ]
        ),
        "Error from server (Forbidden): pods \"p\" is forbidden: no PriorityClass with name nope was found"
    );
    // The global default names itself in new pods.
    k.ok(33, &["run", "q", "--image=nginx"]);
    assert_eq!(
        k.ok(
            33,
            &[
                "get",
                "pod",
                "q",
                "-o",
                "jsonpath={.spec.priorityClassName} {.spec.priority} {.spec.preemptionPolicy}"
            ]
        ),
        "batch 10 Never"
    );
}
