//! Probes as a user sees them with kubectl 1.33 on a live `klab up --speed 10`: `kubectl describe
//! pod` prints the probe lines and the `Unhealthy` events as upstream's kubectl does, `kubectl get
//! pods` shows READY 0/1 while a startup probe holds the container back (containerStatuses
//! started false), and `kubectl annotate pod … probe.klab.dev/<container>.<probe>=…` scripts a
//! probe live: success on the startup probe makes the pod ready, a timeout on the exec liveness
//! probe restarts the container (RESTARTS 1) with upstream's `command "…" timed out`.

use std::time::Duration;

use crate::harness::{Klab, mask_ages};

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: slow
  annotations:
    probe.klab.dev/app.startup: \"http: 503\"
spec:
  nodeName: klab-worker
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: nginx:1.27
    ports: [{name: http, containerPort: 8080}]
    startupProbe: {httpGet: {path: /started, port: http}, periodSeconds: 2, failureThreshold: 1000}
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 2}
    livenessProbe: {exec: {command: [cat, /tmp/healthy]}, periodSeconds: 2, timeoutSeconds: 3}
";

fn get(k: &Klab, path: &str) -> String {
    k.ok(
        33,
        &["get", "pod", "slow", "-o", &format!("jsonpath={path}")],
    )
}

#[test]
fn probes_in_describe_and_get_scripted_live_by_annotation() {
    let k = Klab::start(&["--speed", "10"]);
    k.kubectl_stdin(33, &["apply", "-f", "-"], Some(POD));
    k.wait_for("the container running", Duration::from_secs(60), || {
        (!get(&k, "{.status.containerStatuses[0].state.running.startedAt}").is_empty())
            .then_some(())
    });
    // The startup probe answers 503: running, not started, not ready, no restart.
    k.wait_for(
        "three startup probe failures",
        Duration::from_secs(60),
        || {
            let d = k.ok(33, &["describe", "pod", "slow"]);
            d.contains("Startup probe failed: HTTP probe failed with statuscode: 503")
                .then_some(())
        },
    );
    assert_eq!(get(&k, "{.status.containerStatuses[0].started}"), "false");
    let table = mask_ages(&k.ok(33, &["get", "pod", "slow"]));
    assert_eq!(
        table, "NAME READY STATUS RESTARTS AGE\nslow 0/1 Running 0 AGE",
        "{table}"
    );
    let d = k.ok(33, &["describe", "pod", "slow"]);
    for line in [
        "Liveness:       exec [cat /tmp/healthy] delay=0s timeout=3s period=2s #success=1 #failure=3",
        "Readiness:      tcp-socket :8080 delay=0s timeout=1s period=2s #success=1 #failure=3",
        "Startup:        http-get http://:http/started delay=0s timeout=1s period=2s #success=1 #failure=1000",
        "Ready:          False",
        "Restart Count:  0",
    ] {
        let l = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let got = d
            .lines()
            .map(|x| x.split_whitespace().collect::<Vec<_>>().join(" "))
            .any(|x| x == l);
        assert!(got, "{line:?} not in\n{d}");
    }
    assert!(
        !d.contains("Liveness probe failed") && !d.contains("Readiness probe failed"),
        "liveness and readiness wait for the startup probe:\n{d}"
    );

    // Success, scripted live: started at the next startup probe, then ready.
    k.ok(
        33,
        &[
            "annotate",
            "pod",
            "slow",
            "--overwrite",
            "probe.klab.dev/app.startup=success",
        ],
    );
    k.wait_for("started and ready", Duration::from_secs(60), || {
        (get(&k, "{.status.containerStatuses[0].started}") == "true"
            && get(&k, "{.status.containerStatuses[0].ready}") == "true")
            .then_some(())
    });
    let table = mask_ages(&k.ok(33, &["get", "pod", "slow"]));
    assert_eq!(
        table, "NAME READY STATUS RESTARTS AGE\nslow 1/1 Running 0 AGE",
        "{table}"
    );

    // The exec liveness probe scripted to time out: `command "cat /tmp/healthy" timed out`
    // three times, then the kill and a restart.
    k.ok(
        33,
        &[
            "annotate",
            "pod",
            "slow",
            "--overwrite",
            "probe.klab.dev/app.liveness=timeout",
        ],
    );
    k.wait_for("a restart", Duration::from_secs(90), || {
        (get(&k, "{.status.containerStatuses[0].restartCount}") == "1").then_some(())
    });
    let d = k.ok(33, &["describe", "pod", "slow"]);
    for want in [
        "Liveness probe failed: command \"cat /tmp/healthy\" timed out",
        "Container app failed liveness probe, will be restarted",
    ] {
        assert!(d.contains(want), "{want:?} not in\n{d}");
    }
    let events = k.ok(
        33,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=slow,reason=Unhealthy",
            "-o",
            "jsonpath={range .items[*]}{.type} {.source.component} {.involvedObject.fieldPath}{\"\\n\"}{end}",
        ],
    );
    assert!(
        events
            .lines()
            .all(|l| l == "Warning kubelet spec.containers{app}"),
        "{events}"
    );
}
