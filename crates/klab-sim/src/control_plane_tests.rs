//! Control-plane faults in the scenario language: `component-stop|start|restart`, `brownout`
//! and `clock-skew` — validation with the line of the bad input, their runs on a real cluster,
//! and what a failing expectation about them says.

use std::path::Path;
use std::time::Duration;

use crate::{RunOptions, run_blocking, scenario, trace};

const BASE: &str = "run-for: 3m\ncluster:\n  nodes:\n    - name: n1\n    - name: n2\n";

/// Runs scenario text (as `s.yaml`): the outcome and its failed expectations (line, detail).
fn run_for_failures(text: &str) -> (crate::RunOutcome, Vec<(u64, String)>) {
    let sc = scenario::parse(text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let got = o
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.detail.clone()))
        .collect();
    (o, got)
}

#[test]
fn bad_control_plane_faults_are_rejected_with_their_line() {
    let cases: &[(&str, &str)] = &[
        (
            "faults:\n  - {at: 10s, fault: component-stop, component: etcd}\n",
            "s.yaml:7: unknown component \"etcd\": one of kube-apiserver, kube-controller-manager, kube-scheduler, metrics-server, or a controller (",
        ),
        (
            "faults:\n  - {at: 10s, fault: component-restart}\n",
            "s.yaml:7: component-restart needs `component: NAME`",
        ),
        (
            "faults:\n  - at: 10s\n    fault: component-start\n    component: taint-eviction\n",
            "s.yaml:9: unknown component \"taint-eviction\"",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n1, error-rate: 1.5}\n",
            "s.yaml:7: brownout: error-rate must be between 0 and 1, got 1.5",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n1, error-rate: -0.5}\n",
            "s.yaml:7: brownout: error-rate must be between 0 and 1, got -0.5",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n1, latency: -2s}\n",
            "s.yaml:7: invalid duration \"-2s\"",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n1, latency: 2h}\n",
            "s.yaml:7: brownout: latency must be at most 3600s, got 7200s",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n1, error-rate: 1, code: 404}\n",
            "s.yaml:7: brownout code must be 500, 503 or 429, got 404",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kubelet/n9, error-rate: 1}\n",
            "s.yaml:7: unknown node \"n9\"",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kube-apiserver, error-rate: 1}\n",
            "s.yaml:7: a brownout acts on a client: kubelet/NODE, kube-controller-manager, kube-scheduler or metrics-server, not \"kube-apiserver\"",
        ),
        (
            "faults:\n  - {at: 10s, fault: brownout, component: kube-scheduler}\n",
            "s.yaml:7: brownout needs `latency` or a positive `error-rate`",
        ),
        (
            "faults:\n  - {at: 10s, fault: stop-kubelet, node: n1, duration: 1m}\n",
            "s.yaml:7: `duration` is only for brownout",
        ),
        (
            "faults:\n  - {at: 10s, fault: clock-skew, node: n1}\n",
            "s.yaml:7: clock-skew needs `offset: DURATION` (e.g. 2m or -2m)",
        ),
        (
            "faults:\n  - {at: 10s, fault: clock-skew, node: n1, offset: 2 minutes}\n",
            "s.yaml:7: invalid duration",
        ),
        (
            "faults:\n  - {at: 10s, fault: clock-skew, node: n1, offset: 9000h}\n",
            "s.yaml:7: invalid offset \"9000h\": a clock skew is at most 8784h either way",
        ),
        (
            "faults:\n  - {at: 10s, fault: clock-skew, node: n7, offset: 1m}\n",
            "s.yaml:7: ",
        ),
    ];
    for (extra, want) in cases {
        let text = format!("{BASE}{extra}");
        let err = scenario::parse(&text, Path::new("s.yaml"))
            .expect_err(extra)
            .to_string();
        assert!(
            err.starts_with(want),
            "{extra:?}\n got: {err}\nwant: {want}"
        );
    }
    // The unknown node of a clock-skew is named like any other step's.
    let err = scenario::parse(
        &format!("{BASE}faults:\n  - {{at: 10s, fault: clock-skew, node: n7, offset: 1m}}\n"),
        Path::new("s.yaml"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("n7"), "{err}");
}

#[test]
fn a_brownout_with_a_duration_ends_by_itself_and_names_parse_to_their_components() {
    let text = format!(
        "{BASE}faults:
  - {{at: 10s, fault: brownout, component: kubelet/n1, latency: 1s, error-rate: 0.25, code: 429, duration: 30s}}
  - {{at: 20s, fault: component-restart, component: nodelifecycle}}
  - {{at: 20s, fault: component-stop, component: controller-manager}}
  - {{at: 25s, fault: clock-skew, node: n2, offset: -90s}}
"
    );
    let sc = scenario::parse(&text, Path::new("s.yaml")).unwrap();
    let described: Vec<(u64, String)> = sc
        .steps
        .iter()
        .map(|s| (s.at.as_secs(), s.action.describe()))
        .collect();
    assert_eq!(
        described,
        vec![
            (
                10,
                "Component kubelet/n1 brownout latency 1s error-rate 0.25 code 429".into()
            ),
            (
                20,
                "Component kube-controller-manager/node-lifecycle-controller klab component restart"
                    .into()
            ),
            (
                20,
                "Component kube-controller-manager klab component stop".into()
            ),
            (25, "Node n2 clock-skew -1m30s".into()),
            (40, "Component kubelet/n1 brownout ends".into()),
        ]
    );
}

/// Starting a component that runs, or stopping one twice, fails the run at that step's line.
#[test]
fn an_impossible_component_transition_fails_the_run_naming_its_line() {
    let text = format!(
        "{BASE}faults:\n  - {{at: 10s, fault: component-start, component: kube-scheduler}}\n"
    );
    let sc = scenario::parse(&text, Path::new("s.yaml")).unwrap();
    let err = match run_blocking(&sc, &RunOptions::default()) {
        Ok(_) => panic!("the run fails"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("s.yaml:7")
            && err.contains("component kube-scheduler is not stopped (use restart)"),
        "{err}"
    );
    let text = format!(
        "{BASE}faults:\n  - {{at: 10s, fault: component-stop, component: apiserver}}\n  - {{at: 20s, fault: component-stop, component: kube-apiserver}}\n"
    );
    let sc = scenario::parse(&text, Path::new("s.yaml")).unwrap();
    let err = match run_blocking(&sc, &RunOptions::default()) {
        Ok(_) => panic!("the run fails"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("s.yaml:8") && err.contains("component kube-apiserver is already stopped"),
        "{err}"
    );
}

/// A stopped scheduler leaves pods Pending: an expectation that they run says what it found.
#[test]
fn a_failing_expectation_under_a_stopped_scheduler_says_what_it_found() {
    let text = format!(
        "{BASE}manifests:
  - inline: |
      apiVersion: v1
      kind: Pod
      metadata: {{name: solo}}
      spec:
        containers:
          - {{name: c, image: nginx}}
faults:
  - {{at: 0s, fault: component-stop, component: scheduler}}
expect:
  - {{at: 1m, pod: solo, status: Running}}
  - {{at: 1m, pod: solo, status: Pending}}
"
    );
    let (o, got) = run_for_failures(&text);
    assert_eq!(
        got,
        vec![(
            17,
            "pod default/solo STATUS is Pending, expected Running".into()
        )],
        "{}",
        trace::format_text(&o.lines)
    );
    assert_eq!(o.verdict.passed, 1);
}

/// A restarted node lifecycle controller gives a node already down the full grace period from
/// the restart: an expectation of the un-restarted timing fails and says so.
#[test]
fn a_failing_expectation_after_a_controller_restart_says_what_it_found() {
    let text = format!(
        "{BASE}faults:
  - {{at: 30s, fault: stop-kubelet, node: n2}}
  - {{at: 60s, fault: component-restart, component: nodelifecycle}}
expect:
  - {{at: 90s, node: n2, status: NotReady}}
"
    );
    let sc = scenario::parse(&text, Path::new("s.yaml")).unwrap();
    let o = run_blocking(&sc, &RunOptions::default()).unwrap();
    let got: Vec<(u64, u64, String)> = o
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.at.as_secs(), f.detail.clone()))
        .collect();
    assert_eq!(
        got,
        vec![(10, 90, "node n2 STATUS is Ready, expected NotReady".into())],
        "{}",
        trace::format_text(&o.lines)
    );
    let plain: Vec<String> = o.lines.iter().map(|l| l.plain()).collect();
    assert!(
        plain.iter().any(|l| l
            == "60.000s sim  Component kube-controller-manager/node-lifecycle-controller klab component restart"),
        "{}",
        plain.join("\n")
    );
    // NotReady one grace period (50 s) after the restart, at the next 5 s monitor pass.
    let not_ready = o
        .lines
        .iter()
        .find(|l| l.object == "Node n2" && l.text == "STATUS NotReady")
        .expect("n2 goes NotReady");
    assert!(
        (Duration::from_secs(110)..=Duration::from_secs(116)).contains(&not_ready.t),
        "{:?}",
        not_ready.t
    );
}

/// A brownout's failures are drawn from the seed: the same run twice gives the same trace. At a
/// 90% error rate some of the kubelet's Lease renewals still get through (the API server counts
/// only those); an expectation that none did fails and lists the ones it found.
#[test]
fn a_kubelet_brownout_is_deterministic_and_a_failing_expectation_lists_the_writes() {
    let text = format!(
        "{BASE}faults:
  - {{at: 30s, fault: brownout, component: kubelet/n2, error-rate: 0.9, code: 500, duration: 100s}}
expect:
  - {{from: 30s, at: 129s, writes: {{component: kubelet/n2, verb: PUT, resource: leases}}, max-count: 0}}
  - {{from: 30s, at: 129s, writes: {{component: kubelet/n1, verb: PUT, resource: leases}}, min-count: 9}}
"
    );
    let sc = scenario::parse(&text, Path::new("s.yaml")).unwrap();
    let a = run_blocking(&sc, &RunOptions::default()).unwrap();
    let b = run_blocking(&sc, &RunOptions::default()).unwrap();
    assert_eq!(trace::format_text(&a.lines), trace::format_text(&b.lines));
    let plain: Vec<String> = a.lines.iter().map(|l| l.plain()).collect();
    for want in [
        "30.000s sim  Component kubelet/n2 brownout latency 0s error-rate 0.9 code 500",
        "130.000s sim  Component kubelet/n2 brownout ends",
    ] {
        assert!(
            plain.iter().any(|l| l == want),
            "missing {want:?} in\n{}",
            plain.join("\n")
        );
    }
    let got: Vec<(u64, String)> = a
        .verdict
        .failures
        .iter()
        .map(|f| (f.line, f.detail.clone()))
        .collect();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].0, 9);
    assert!(
        got[0]
            .1
            .contains("writes by kubelet/n2 between 30.000s and 129.000s, expected at most 0: [")
            && got[0].1.contains("system:node:n2 PUT leases n2 200"),
        "{got:#?}"
    );
    assert_eq!(a.verdict.passed, 1);
}

/// A kubectl step while the API server is stopped would be refused, as kubectl is by a stopped
/// kube-apiserver: the plan is refused when it loads, at the step's line, naming the stop.
/// Machine and component faults and a `wait-for` still run; a start or restart (by any alias)
/// lets kubectl in again, and a step in the stop's instant but before it in the file runs first.
#[test]
fn kubectl_steps_while_the_api_server_is_stopped_are_refused_with_their_line() {
    let refused: &[(&str, &str)] = &[
        (
            "faults:\n  - {at: 30s, fault: component-stop, component: kube-apiserver}\n  - {at: 40s, fault: cordon, node: n1}\n",
            "s.yaml:8: \"Node n1 kubectl cordon\" needs the API server, which is stopped at 30.000s (line 7): kubectl would fail with \"The connection to the server was refused\"; start kube-apiserver first (component-start)",
        ),
        (
            "faults:\n  - {at: 30s, fault: component-stop, component: apiserver}\n  - {at: 30s, fault: delete-pod, selector: app=web}\n",
            "s.yaml:8: \"",
        ),
        (
            "faults:\n  - {at: 30s, fault: component-stop, component: kube-apiserver}\n  - {at: 35s, fault: stop-kubelet, node: n2}\n  - {at: 40s, fault: drain, node: n2}\n  - {at: 50s, fault: component-start, component: kube-apiserver}\n",
            "s.yaml:9: \"Node n2 kubectl drain n2\" needs the API server, which is stopped at 30.000s (line 7)",
        ),
    ];
    for (extra, want) in refused {
        let text = format!("{BASE}{extra}");
        let err = scenario::parse(&text, Path::new("s.yaml"))
            .expect_err(extra)
            .to_string();
        assert!(
            err.starts_with(want),
            "{extra:?}\n got: {err}\nwant: {want}"
        );
    }
    let allowed = [
        "faults:\n  - {at: 30s, fault: cordon, node: n1}\n  - {at: 30s, fault: component-stop, component: kube-apiserver}\n  - {at: 40s, fault: stop-kubelet, node: n2}\n  - {at: 41s, fault: node-condition, node: n1, condition: Ready=False}\n  - {at: 42s, fault: image-pull-fail, image: x}\n  - {at: 43s, fault: brownout, component: kube-scheduler, latency: 1s}\n  - {at: 50s, fault: component-start, component: apiserver}\n  - {at: 50s, fault: uncordon, node: n1}\n",
        "faults:\n  - {at: 30s, fault: component-stop, component: kube-apiserver}\n  - {at: 40s, fault: component-restart, component: kube-apiserver}\n  - {at: 41s, fault: cordon, node: n1}\n",
    ];
    for extra in allowed {
        let text = format!("{BASE}{extra}");
        scenario::parse(&text, Path::new("s.yaml")).unwrap_or_else(|e| panic!("{extra:?}: {e}"));
    }
}

/// The API server stopped from 10 s to 40 s and a cordon in the instant it starts: the cordon
/// lands only then; an expectation that it held before says what the node showed.
#[test]
fn a_cordon_waits_for_the_api_server_and_a_failing_expectation_shows_the_node_before() {
    let text = format!(
        "{BASE}faults:
  - {{at: 10s, fault: component-stop, component: kube-apiserver}}
  - {{at: 40s, fault: component-start, component: kube-apiserver}}
  - {{at: 40s, fault: cordon, node: n1}}
expect:
  - {{at: 39s, node: n1, status: \"Ready,SchedulingDisabled\"}}
  - {{at: 41s, node: n1, status: \"Ready,SchedulingDisabled\"}}
"
    );
    let (o, got) = run_for_failures(&text);
    assert_eq!(
        got,
        vec![(
            11,
            "node n1 STATUS is Ready, expected Ready,SchedulingDisabled".into()
        )],
        "{}",
        trace::format_text(&o.lines)
    );
    assert_eq!(o.verdict.passed, 1);
}

#[test]
fn services_converged_sees_stale_endpoints_and_budgets_while_their_controllers_are_stopped() {
    // Two pods behind a Service and a budget. With the EndpointSlice and disruption controllers
    // stopped, a scale-down leaves an endpoint of a deleted pod and a budget counting two
    // healthy pods: `services: converged` fails and says so. Started again, both catch up.
    let text = format!(
        "{BASE}manifests:
  - inline: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: web}}
      spec:
        replicas: 2
        selector: {{matchLabels: {{app: web}}}}
        template:
          metadata: {{labels: {{app: web}}}}
          spec: {{containers: [{{name: nginx, image: nginx}}]}}
      ---
      apiVersion: v1
      kind: Service
      metadata: {{name: web}}
      spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
      ---
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {{name: web}}
      spec: {{minAvailable: 1, selector: {{matchLabels: {{app: web}}}}}}
faults:
  - {{at: 20s, fault: component-stop, component: endpointslice}}
  - {{at: 20s, fault: component-stop, component: disruption}}
  - {{at: 30s, fault: scale, target: deployment/web, replicas: 1}}
  - {{at: 90s, fault: component-start, component: endpointslice}}
  - {{at: 90s, fault: component-start, component: disruption}}
expect:
  - {{at: 19s, services: converged}}
  - {{at: 80s, services: converged}}
  - {{at: 2m, services: {{converged: true, namespace: default}}}}
  - {{at: 80s, services: {{converged: true, namespace: other}}}}
"
    );
    let (_, got) = run_for_failures(&text);
    assert_eq!(got.len(), 1, "{got:?}");
    let (line, detail) = &got[0];
    assert_eq!(*line, 35, "{detail}");
    assert!(
        detail.starts_with("not converged: PodDisruptionBudget default/web: currentHealthy 2, 1 pods ready; Service default/web: endpoints of pods that are gone [\"web-")
            && detail.ends_with("\"]"),
        "{detail}"
    );
}

#[test]
fn a_replicaset_whose_writes_failed_retries_them_without_another_event() {
    // Every request of the controller manager fails for 10 s, across a scale-down of a bare
    // ReplicaSet: its pod deletion fails, and after the scale-down nothing else happens to the
    // set. The controller retries on its own, so the set converges once the brownout is over.
    let text = format!(
        "{BASE}manifests:
  - inline: |
      apiVersion: apps/v1
      kind: ReplicaSet
      metadata: {{name: web}}
      spec:
        replicas: 2
        selector: {{matchLabels: {{app: web}}}}
        template:
          metadata: {{labels: {{app: web}}}}
          spec: {{containers: [{{name: nginx, image: nginx}}]}}
faults:
  - {{at: 20s, fault: brownout, component: kube-controller-manager, error-rate: 1, code: 503, duration: 10s}}
  - {{at: 21s, fault: scale, target: replicaset/web, replicas: 1}}
expect:
  - {{at: 29s, pods: {{selector: app=web}}, status: Running, count: 2}}
  - {{at: 45s, workloads: converged}}
  - {{at: 45s, pods: {{selector: app=web}}, count: 1}}
"
    );
    let (_, got) = run_for_failures(&text);
    assert!(got.is_empty(), "{got:?}");
}
