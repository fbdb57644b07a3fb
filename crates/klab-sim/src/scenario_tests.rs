//! End-to-end tests of `klab sim` (a unit-test module, so the workspace keeps one integration-test binary): the runner on real clusters (API actions, expectations, failure
//! reports, bad input), determinism of every shipped scenario, and the shipped scenarios' golden
//! traces and expectations (`KLAB_UPDATE_GOLDEN=1` rewrites the goldens).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Format, RunOptions, run_blocking, scenario, trace};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

/// Every `scenarios/<area>/<behaviour>.yaml`, sorted.
fn shipped() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = repo_root().join("scenarios");
    for area in std::fs::read_dir(&root).expect("scenarios/ exists") {
        let area = area.unwrap().path();
        if !area.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&area).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "yaml") {
                out.push(f);
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 12,
        "expected the shipped scenarios, found {out:?}"
    );
    out
}

// ---- the runner on today's cluster -------------------------------------------------------------

#[test]
fn api_actions_are_traced_at_their_virtual_times() {
    let sc = scenario::load(&fixture("actions.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(
        o.verdict.failures,
        vec![],
        "{}",
        trace::format_text(&o.lines)
    );
    assert_eq!((o.verdict.passed, o.verdict.skipped), (11, 0));
    assert_eq!(o.end, Duration::from_secs(90));
    assert_eq!(o.seed, 3);
    let plain: Vec<String> = o.lines.iter().map(|l| l.plain()).collect();
    for want in [
        "0.000s kubectl Pod default/solo created 0/1 Pending 0 n1",
        "10.000s sim  Node n2 kubectl cordon",
        "10.000s kubectl Node n2 STATUS Ready,SchedulingDisabled",
        "20.000s kubectl Node n1 taint+ k=v:NoSchedule",
        "25.000s kubectl Node n1 taint- k=v:NoSchedule",
        "30.000s kubectl Pod default/victim 1/1 Terminating 0 n2 (grace 5s)",
        "40.000s kubectl Pod default/solo deleted",
        "60.000s kubectl Node n2 STATUS Ready",
    ] {
        assert!(
            plain.iter().any(|l| l == want),
            "missing {want:?} in\n{}",
            plain.join("\n")
        );
    }
    // The scale is the runner's write (whatever the controllers do next).
    assert!(
        plain.iter().any(
            |l| l.starts_with("50.000s kubectl Deployment default/web READY ") && l.contains("/3 ")
        ),
        "{}",
        plain.join("\n")
    );
    // The kubelet kills the SIGTERM-ignoring `sleep` at the end of the 5s grace period and then
    // removes the pod: virtual time really advanced through the grace period.
    let gone = o
        .lines
        .iter()
        .find(|l| l.object == "Pod default/victim" && l.text == "deleted")
        .expect("victim deleted");
    assert_eq!(
        (gone.component.as_str(), gone.t),
        ("kubelet", Duration::from_secs(35))
    );
    // Trace order is revision order, so time never goes backwards.
    assert!(o.lines.windows(2).all(|w| w[0].t <= w[1].t));
    assert!(
        o.summary
            .contains("default/victim on n2: marked for deletion at 30.000s, gone at 35.000s"),
        "{}",
        o.summary
    );
}

/// The language's actions on any object (eviction against a budget, deletion with propagation,
/// status, strategic and JSON patches), `wait-for` and the expectations on anything (objects by
/// JSONPath and condition, write counts from the API server's own log), on a real cluster.
#[test]
fn actions_on_any_object_waits_and_expectations_on_anything() {
    let sc = scenario::load(&fixture("language.yaml")).unwrap();
    let a = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(
        a.verdict.failures,
        vec![],
        "{}",
        trace::format_text(&a.lines)
    );
    assert_eq!((a.verdict.passed, a.verdict.skipped), (18, 0));
    let b = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(a.trace_hash(), b.trace_hash(), "deterministic");
    let at = |s: &str| {
        a.lines
            .iter()
            .find(|l| l.plain().contains(s))
            .unwrap_or_else(|| panic!("no {s:?} in\n{}", trace::format_text(&a.lines)))
            .t
    };
    // The wait held the moment n2 went NotReady, and the step after it ran right then.
    let held = at("wait-for held after");
    assert!(held > Duration::from_secs(61), "{held:?}");
    assert_eq!(held, at("Node n2 STATUS NotReady"));
    assert_eq!(held, at("Node n2 kubectl taint waited=yes:NoSchedule"));
}

/// A `wait-for` on a trace line waits for the cluster to print it: the step's own echo, which
/// quotes the pattern, does not count (nor does it for other trace expectations).
#[test]
fn a_wait_for_on_a_trace_line_waits_for_the_cluster_to_print_it() {
    let text = r#"run-for: 2m
cluster:
  nodes:
    - name: n1
faults:
  - {at: 10s, fault: stop-kubelet, node: n1}
  - {at: 11s, timeout: 100s, wait-for: {trace: "node-lifecycle-controller Node n1 STATUS NotReady"}}
  - {at: 12s, fault: start-kubelet, node: n1}
expect:
  - {from: 11s, at: 11s, trace: "STATUS NotReady", absent: true}
"#;
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(
        o.verdict.failures,
        vec![],
        "{}",
        trace::format_text(&o.lines)
    );
    let at = |s: &str| {
        o.lines
            .iter()
            .find(|l| !l.is_wait_for_echo() && l.plain().contains(s))
            .unwrap_or_else(|| panic!("no {s:?} in\n{}", trace::format_text(&o.lines)))
            .t
    };
    let not_ready = at("node-lifecycle-controller Node n1 STATUS NotReady");
    assert!(not_ready > Duration::from_secs(50), "{not_ready:?}");
    assert_eq!(at("wait-for held after"), not_ready);
    // The step after it keeps its 1 s distance from the moment the wait held.
    assert_eq!(
        at("Node n1 fault start-kubelet"),
        not_ready + Duration::from_secs(1)
    );
}

/// What each new expectation says when it does not hold, and a wait-for that times out (the
/// plan goes on, later steps shifted by the timeout).
#[test]
fn failed_waits_objects_and_write_counts_say_what_was_found() {
    let text = "run-for: 2m
cluster:
  nodes:
    - name: n1
faults:
  - {at: 10s, timeout: 20s, wait-for: {node: n1, status: NotReady}}
  - {at: 15s, fault: cordon, node: n1}
expect:
  - {at: 20s, object: {kind: Node, name: n1}, jsonpath: '{.spec.unschedulable}', equals: 'true'}
  - {at: 40s, object: {kind: Node, name: n1}, jsonpath: '{.spec.unschedulable}', equals: 'true'}
  - {from: 0s, at: 1m, writes: {component: kubelet, verb: PUT, resource: leases}, max-count: 2}
  - {at: 1m, object: {kind: Lease, name: n1, namespace: kube-node-lease}, condition: Ready=True}
  - {at: 1m, object: {kind: Lease, name: n9, namespace: kube-node-lease}, exists: true}
";
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let got: Vec<(u64, u64, String)> = o
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.at.as_secs(), f.detail.clone()))
        .collect();
    assert_eq!(got.len(), 5, "{got:#?}");
    assert_eq!(
        got[0],
        (
            9,
            20,
            "Node n1: {.spec.unschedulable} is \"\", expected \"true\"".into()
        )
    );
    assert_eq!(
        got[1],
        (
            6,
            30,
            "wait-for did not hold within 20.000s: node n1 STATUS is Ready, expected NotReady"
                .into()
        )
    );
    assert!(
        // The Lease is created at the first renewal after the Node registered (10 s), then
        // renewed every 10-10.4 s.
        got[2]
            .2
            .starts_with("4 writes by kubelet between 0.000s and 60.000s, expected at most 2: [")
            && got[2].2.contains("system:node:n1 PUT leases n1 200"),
        "{got:#?}"
    );
    assert_eq!(
        got[3].2,
        "Lease kube-node-lease/n1 has no condition Ready, expected Ready=True"
    );
    assert_eq!(got[4].2, "Lease kube-node-lease/n9 does not exist");
    // The cordon planned 5 s after the wait ran 5 s after it timed out.
    let cordon = o
        .lines
        .iter()
        .find(|l| l.text.contains("kubectl cordon"))
        .unwrap();
    assert_eq!(cordon.t, Duration::from_secs(35));
    assert!(
        o.lines
            .iter()
            .any(|l| l.t == Duration::from_secs(30) && l.text == "wait-for timed out after 20.000s"),
        "{}",
        trace::format_text(&o.lines)
    );
}

/// Every node fault and action of the language next to an expectation that does not hold: each
/// failure says what the cluster showed instead (a user reads these when a scenario fails).
#[test]
fn faults_and_actions_with_expectations_that_do_not_hold_say_what_was_found() {
    let text = r#"run-for: 2m
cluster:
  nodes:
    - name: n1
    - name: n2
    - name: n3
manifests:
  - inline: |
      apiVersion: v1
      kind: Pod
      metadata: {name: guarded, labels: {app: g}}
      spec:
        nodeName: n1
        containers: [{name: c, image: "busybox:1.36", command: [sleep, "3600"]}]
      ---
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: g}
      spec:
        minAvailable: 1
        selector: {matchLabels: {app: g}}
      ---
      apiVersion: v1
      kind: Pod
      metadata: {name: app}
      spec:
        nodeName: n2
        containers: [{name: c, image: "example.com/app:v9", command: [sleep, "3600"]}]
faults:
  - {at: 0s, fault: image-pull-fail, node: n2, image: "example.com/app:v9", message: "registry down"}
  - {at: 10s, fault: fail-lease-updates, node: n1}
  - {at: 10s, fault: fail-status-updates, node: n2}
  - {at: 10s, fault: runtime-down, node: n3}
  - {at: 20s, fault: node-condition, node: n3, condition: NetworkUnavailable=True, reason: NoRouteCreated, message: no route}
  - {at: 30s, fault: evict, pod: guarded}
  - {at: 40s, fault: delete, target: lease/nope, namespace: kube-node-lease}
  - {at: 50s, fault: patch, target: node/n2, patch: {metadata: {labels: {team: a}}}}
expect:
  - {from: 20s, at: 90s, writes: {component: kubelet/n1, resource: leases}, min-count: 1}
  - {from: 20s, at: 90s, writes: {component: kubelet/n2, verb: PATCH, resource: nodes, subresource: status}, min-count: 1}
  - {at: 90s, node: n3, condition: Ready=True, reason: KubeletReady}
  - {at: 90s, object: {kind: Node, name: n3}, condition: NetworkUnavailable=False}
  - {at: 90s, pod: app, status: Running}
  - {at: 35s, pod: guarded, exists: false}
  - {from: 40s, at: 45s, trace: "Error from server (NotFound)", absent: true}
  - {at: 55s, object: {kind: Node, name: n2}, jsonpath: '{.metadata.labels.team}', equals: b}
  - {at: 55s, object: {kind: Node, name: n2}, jsonpath: '{.metadata.labels.team}', matches: '^b+$'}
  - {at: 55s, object: {kind: Node, name: n2}, jsonpath: '{.metadata.labels.team}', exists: false}
  - {at: 55s, pods: {selector: app=g}, count: 2}
  - {at: 30s, trace: "never printed"}
"#;
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let got: Vec<(u64, String)> = o
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.detail.clone()))
        .collect();
    // In the order they were checked (by time, then line).
    let want: Vec<(u64, &str)> = vec![
        (
            50,
            "no trace line matching \"never printed\" between 0.000s and 30.000s",
        ),
        // evict: the budget refused (429 in the trace), the pod is still there.
        (44, "pod default/guarded exists (Running on n1)"),
        // delete: kubectl's NotFound is a trace line, not a failed run.
        (
            45,
            "unexpected trace line matching \"Error from server (NotFound)\": 40.000s kubectl Lease kube-node-lease/nope Error from server (NotFound): leases.coordination.k8s.io \"nope\" not found",
        ),
        // patch: the label it set, read back three ways.
        (
            46,
            "Node n2: {.metadata.labels.team} is \"a\", expected \"b\"",
        ),
        (
            47,
            "Node n2: {.metadata.labels.team} is \"a\", which does not match /^b+$/",
        ),
        (
            48,
            "Node n2: {.metadata.labels.team} is \"a\", expected nothing",
        ),
        (
            49,
            "1 matching pods, expected 2: [default/guarded Running n1]",
        ),
        // fail-lease-updates and fail-status-updates: the API server saw no such write.
        (
            39,
            "0 writes by kubelet/n1 between 20.000s and 90.000s, expected at least 1: []",
        ),
        (
            40,
            "0 writes by kubelet/n2 between 20.000s and 90.000s, expected at least 1: []",
        ),
        (
            41,
            "node n3 condition is Ready=False (KubeletNotReady: container runtime is down), expected Ready=True (KubeletReady)",
        ),
        (
            42,
            "Node n3 condition is NetworkUnavailable=True (NoRouteCreated: no route), expected NetworkUnavailable=False",
        ),
        (
            43,
            "pod default/app STATUS is ImagePullBackOff, expected Running",
        ),
    ];
    assert!(
        o.lines.iter().any(|l| l.plain().contains(
            "Pod default/guarded Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget."
        )),
        "{}",
        trace::format_text(&o.lines)
    );
    assert_eq!(
        got.iter()
            .map(|(l, d)| (*l, d.as_str()))
            .collect::<Vec<_>>(),
        want,
        "{}",
        trace::format_text(&o.lines)
    );
}

#[test]
fn probe_expectations_that_do_not_hold_say_what_was_found() {
    // A startup probe scripted (in the pod's own annotations) to fail: with period 5 s and
    // failureThreshold 3 the container is killed at its third failure and restarted; it never
    // starts and is never ready, and no liveness probe runs. Expectations claiming otherwise fail
    // with what the cluster shows.
    let text = r#"run-for: 1m
cluster:
  nodes:
    - name: n1
manifests:
  - inline: |
      apiVersion: v1
      kind: Pod
      metadata:
        name: p
        annotations: {probe.klab.dev/c.startup: "http: 500"}
      spec:
        terminationGracePeriodSeconds: 1
        containers:
          - name: c
            image: "nginx:1.27"
            startupProbe: {httpGet: {path: /started, port: 80}, periodSeconds: 5, failureThreshold: 3}
            livenessProbe: {httpGet: {path: /healthz, port: 80}, periodSeconds: 5}
expect:
  - {at: 40s, pod: p, ready: 1/1}
  - {at: 40s, pod: p, restarts: 0}
  - {at: 40s, object: {kind: Pod, name: p}, jsonpath: '{.status.containerStatuses[0].started}', equals: "true"}
  - {at: 40s, trace: "Liveness probe failed"}
  - {trace: "Startup probe failed: HTTP probe failed with statuscode: 500", absent: true}
"#;
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let got: Vec<(u64, String)> = o
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.detail.clone()))
        .collect();
    let trace = trace::format_text(&o.lines);
    let first = o
        .lines
        .iter()
        .map(|l| l.plain())
        .find(|l| l.contains("Startup probe failed"))
        .unwrap_or_default();
    assert_eq!(got.len(), 5, "{got:?}\n{trace}");
    // How many restarts 40 s hold depends on where the probe's jittered first tick fell; the
    // failure names the count the pod shows.
    let restarts = o
        .lines
        .iter()
        .filter(|l| l.t <= Duration::from_secs(40) && l.object == "Pod default/p")
        .filter(|l| l.text.contains(" Running "))
        .filter_map(|l| l.text.rsplit(' ').nth(1)?.parse::<u32>().ok())
        .next_back();
    assert!(restarts.is_some_and(|n| n >= 1), "{trace}");
    assert_eq!(
        got[..3],
        [
            (20, "pod default/p READY is 0/1, expected 1/1".to_string()),
            (
                21,
                format!(
                    "pod default/p RESTARTS is {}, expected 0",
                    restarts.unwrap_or_default()
                )
            ),
            (
                22,
                "Pod default/p: {.status.containerStatuses[0].started} is \"false\", expected \"true\""
                    .to_string()
            ),
        ],
        "{trace}"
    );
    assert_eq!(
        got[3],
        (
            23,
            "no trace line matching \"Liveness probe failed\" between 0.000s and 40.000s"
                .to_string()
        ),
        "{trace}"
    );
    assert_eq!(
        got[4],
        (
            24,
            format!(
                "unexpected trace line matching \"Startup probe failed: HTTP probe failed with statuscode: 500\": {first}"
            )
        ),
        "{trace}"
    );
}

#[test]
fn until_stops_early_and_skips_later_expectations() {
    let sc = scenario::load(&fixture("actions.yaml")).unwrap();
    let o = run_blocking(
        &sc,
        &RunOptions {
            seed: Some(9),
            until: Some(Duration::from_secs(27)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(o.end, Duration::from_secs(27));
    assert_eq!(o.seed, 9);
    assert_eq!(
        (
            o.verdict.passed,
            o.verdict.skipped,
            o.verdict.failures.len()
        ),
        (4, 7, 0)
    );
    assert!(o.lines.iter().all(|l| l.t <= Duration::from_secs(27)));
    assert!(o.lines.iter().any(|l| l.text == "taint- k=v:NoSchedule"));
    assert!(
        !o.lines
            .iter()
            .any(|l| l.text.contains("kubectl delete pod"))
    );
}

#[test]
fn a_broken_expectation_names_itself_the_time_and_the_seed() {
    let path = fixture("actions.yaml");
    let text = std::fs::read_to_string(&path).unwrap() + "  - {at: 15s, node: n2, status: Ready}\n";
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("broken.yaml");
    std::fs::write(&copy, &text).unwrap();
    let line = text.lines().count() as u64;

    let sc = scenario::load(&copy).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(o.verdict.failures.len(), 1);
    let f = &o.verdict.failures[0];
    assert_eq!((f.line, f.at), (line, Duration::from_secs(15)));
    assert_eq!(
        f.detail,
        "node n2 STATUS is Ready,SchedulingDisabled, expected Ready"
    );

    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = crate::cli(&copy, None, Format::Text, None, &mut out, &mut err);
    assert_eq!(code, 1);
    let err = String::from_utf8(err).unwrap();
    let want = format!(
        "FAILED {}:{line}: `{{at: 15s, node: n2, status: Ready}}` at 15.000s (seed 3): node n2 STATUS is Ready,SchedulingDisabled, expected Ready\nreplay: klab sim {} --seed 3\n",
        copy.display(),
        copy.display()
    );
    assert_eq!(err, want);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("expectations: 11 passed, 1 failed, 0 skipped (seed 3"),
        "{out}"
    );
}

#[test]
fn cli_exit_codes_and_formats() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        crate::cli(
            &fixture("actions.yaml"),
            None,
            Format::Json,
            Some("12s"),
            &mut out,
            &mut err
        ),
        0
    );
    let out = String::from_utf8(out).unwrap();
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["t"], "0.000s");
    assert!(
        out.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "stdout must be JSON lines only"
    );
    assert!(
        String::from_utf8(err)
            .unwrap()
            .contains("Summary at 12.000s")
    );

    // Bad input never starts a run: exit 2 and the line.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "run-for: 1m\ncluster:\n  nodes:\n    - name: n1\nfaults:\n  - {at: 5s, fault: stop-kublet, node: n1}\n").unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        crate::cli(&bad, None, Format::Text, None, &mut out, &mut err),
        2
    );
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.starts_with(&format!(
            "error: {}:6: unknown fault \"stop-kublet\"",
            bad.display()
        )),
        "{err}"
    );
    assert!(out.is_empty());

    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        crate::cli(
            &fixture("actions.yaml"),
            None,
            Format::Text,
            Some("soon"),
            &mut out,
            &mut err
        ),
        2
    );
    assert!(
        String::from_utf8(err)
            .unwrap()
            .contains("--until: invalid duration \"soon\"")
    );
}

#[test]
fn a_failing_step_stops_the_run_naming_its_line() {
    let text = "run-for: 1m\ncluster:\n  nodes:\n    - name: n1\nfaults:\n  - {at: 5s, fault: delete-pod, pod: nope}\n";
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let e = run_blocking(&sc, &RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.yaml:6: step at 5.000s failed:"), "{e}");
    assert!(e.contains("not found"), "{e}");
}

/// A component that panics fails the run (the CLI's exit 2 with the replay command), naming the
/// component, its message and the virtual time — even though the supervisor restarted it.
#[test]
fn a_component_panic_fails_the_run() {
    use klab_api::supervise::{RestartPolicy, supervise};
    let text = "run-for: 1m\ncluster:\n  nodes:\n    - name: n1\n";
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let hook: crate::StartHook = std::sync::Arc::new(|cluster: &klab_cluster::Cluster| {
        let clock = cluster.clock().clone();
        tokio::spawn(supervise(
            cluster.health().clone(),
            "kube-controller-manager/flaky-controller",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                let clock = clock.clone();
                async move {
                    clock.sleep(Duration::from_secs(7)).await;
                    let ranked: Vec<u8> = Vec::new();
                    Err(format!("ranked {} pods", ranked[3]))
                }
            },
        ));
    });
    let e = run_blocking(
        &sc,
        &RunOptions {
            on_start: Some(hook),
            ..RunOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("component failure at 7.000s: kube-controller-manager/flaky-controller panicked: index out of bounds"),
        "{e}"
    );
}

/// Work that never lets virtual time advance fails the run naming the object that loops, instead
/// of hanging: here a client that rewrites a Deployment's spec in a loop without ever waiting.
#[test]
fn a_zero_time_loop_fails_the_run_as_a_livelock() {
    let text = "run-for: 1m\ncluster:\n  nodes:\n    - name: n1\nmanifests:\n  - inline: |\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: {name: web}\n      spec:\n        replicas: 0\n        selector: {matchLabels: {app: web}}\n        template:\n          metadata: {labels: {app: web}}\n          spec: {containers: [{name: c, image: nginx}]}\nfaults:\n  - {at: 5s, fault: scale, target: deployment/web, replicas: 0}\n";
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let hook: crate::StartHook = std::sync::Arc::new(|cluster: &klab_cluster::Cluster| {
        let client = cluster.admin_client();
        let clock = cluster.clock().clone();
        tokio::spawn(async move {
            use k8s_openapi::api::apps::v1::Deployment;
            use kube::api::{Api, Patch, PatchParams};
            let api: Api<Deployment> = Api::namespaced(client, "default");
            clock.sleep(Duration::from_secs(5)).await;
            for i in 0u64.. {
                let p = serde_json::json!({"spec": {"minReadySeconds": i % 7}});
                let _ = api
                    .patch("web", &PatchParams::default(), &Patch::Merge(&p))
                    .await;
            }
        });
    });
    let e = run_blocking(
        &sc,
        &RunOptions {
            on_start: Some(hook),
            livelock_changes: Some(200),
            ..RunOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "livelock at 5.000s: Deployment default/web changed 200 times without virtual time advancing"
    );
}

/// The run keeps every change with its view, so views share their labels: the changes of the
/// pods of one ReplicaSet (and of one node) hold one map, however many there are.
#[test]
fn the_views_of_a_run_share_their_label_sets() {
    let text = "run-for: 40s\ncluster:\n  nodes:\n    - name: n1\n    - name: n2\nmanifests:\n  - inline: |\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: {name: web}\n      spec:\n        replicas: 4\n        selector: {matchLabels: {app: web}}\n        template:\n          metadata: {labels: {app: web}}\n          spec: {containers: [{name: c, image: nginx}]}\n";
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let mut pods: Vec<&trace::Labels> = Vec::new();
    let mut nodes: Vec<&trace::Labels> = Vec::new();
    for r in &o.records {
        match &r.change {
            trace::Change::Pod { view: Some(v), .. } => pods.push(&v.labels),
            trace::Change::Node { view: Some(v), .. }
                if v.labels.get("kubernetes.io/hostname").map(String::as_str) == Some("n1") =>
            {
                nodes.push(&v.labels)
            }
            _ => {}
        }
    }
    // every change of the 4 pods (created, scheduled, started, ready: well over 4)
    assert!(pods.len() > 8, "{} pod changes", pods.len());
    assert_eq!(pods[0].get("app").map(String::as_str), Some("web"));
    assert!(pods[0].contains_key("pod-template-hash"));
    assert!(
        pods.iter().all(|l| std::sync::Arc::ptr_eq(l, pods[0])),
        "one map for all"
    );
    assert!(nodes.len() > 1, "{} node changes", nodes.len());
    assert!(nodes.iter().all(|l| std::sync::Arc::ptr_eq(l, nodes[0])));
}

// ---- shipped scenarios ---------------------------------------------------------------------------

/// Every shipped scenario runs twice with its seed: the two traces must be identical (hash and
/// lines); the first run must also meet the scenario's expectations and match its golden trace
/// (`KLAB_UPDATE_GOLDEN=1` rewrites the goldens).
#[test]
fn shipped_scenarios_are_deterministic_meet_expectations_and_match_goldens() {
    let update = std::env::var_os("KLAB_UPDATE_GOLDEN").is_some_and(|v| v == "1");
    // `KLAB_SCENARIOS=vectors/` checks (or rewrites) only the scenarios whose path contains it.
    let only = std::env::var("KLAB_SCENARIOS").ok();
    let mut problems = Vec::new();
    for path in shipped() {
        if only
            .as_deref()
            .is_some_and(|f| !path.to_string_lossy().contains(f))
        {
            continue;
        }
        let sc = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let (a, b) = match (
            run_blocking(&sc, &RunOptions::default()),
            run_blocking(&sc, &RunOptions::default()),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => panic!(
                "{}: {:?} / {:?}",
                path.display(),
                a.err().map(|e| e.to_string()),
                b.err().map(|e| e.to_string())
            ),
        };
        assert!(!a.lines.is_empty(), "{}: empty trace", path.display());
        assert_eq!(
            a.trace_hash(),
            b.trace_hash(),
            "{}: two runs with seed {} differ",
            path.display(),
            a.seed
        );
        assert_eq!(a.lines, b.lines);
        let text = trace::format_text(&a.lines);
        let golden = path.with_extension("trace");
        if update {
            std::fs::write(&golden, &text).unwrap();
        } else {
            match std::fs::read_to_string(&golden) {
                Ok(g) if g == text => {}
                Ok(_) => problems.push(format!(
                    "{}: trace differs from {} (KLAB_UPDATE_GOLDEN=1 rewrites it)",
                    path.display(),
                    golden.display()
                )),
                Err(_) => problems.push(format!(
                    "{}: no golden trace (run with KLAB_UPDATE_GOLDEN=1)",
                    path.display()
                )),
            }
        }
        if !a.verdict.failures.is_empty() {
            problems.push(crate::failure_report(&sc, &a));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every shipped scenario under `--authorization-mode AlwaysAllow`. The goldens are written under
/// the default `Node,RBAC` (where a refused component fails the run), so an equal trace here says
/// that no component's behaviour hangs on an authorization decision: each does under its
/// upstream role exactly what it does when everything is allowed.
#[test]
fn shipped_scenarios_under_always_allow_match_goldens() {
    // `KLAB_SCENARIOS=vectors/` checks only the scenarios whose path contains it.
    let only = std::env::var("KLAB_SCENARIOS").ok();
    let mut problems = Vec::new();
    for path in shipped() {
        if only
            .as_deref()
            .is_some_and(|f| !path.to_string_lossy().contains(f))
        {
            continue;
        }
        let mut sc = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        klab_cluster::Cluster::set_flag(&mut sc.cluster, "authorization-mode", "AlwaysAllow")
            .unwrap();
        let o = match run_blocking(&sc, &RunOptions::default()) {
            Ok(o) => o,
            Err(e) => {
                problems.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let text = trace::format_text(&o.lines);
        let golden = std::fs::read_to_string(path.with_extension("trace")).unwrap_or_default();
        if text != golden {
            let first = text
                .lines()
                .zip(golden.lines())
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("\n  AlwaysAllow: {a}\n  golden:      {b}"))
                .unwrap_or_default();
            problems.push(format!(
                "{}: trace under AlwaysAllow differs from the golden{first}",
                path.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
