//! Accounts, access reviews, tokens, CronJobs and `/metrics` on a live `klab up` with the real
//! kubectl: `auth can-i [--list]`, `auth whoami` (as the admin and with a requested token),
//! `create token` and its bounds, the `default` ServiceAccount of a new namespace and the pods'
//! projected credentials, a CronJob that starts Jobs on its schedule, and the metric families.

use std::time::Duration;

use crate::harness::{Klab, mask_ages};

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n";

#[test]
fn accounts_reviews_tokens_cronjobs_and_metrics() {
    let k = Klab::start(&["--speed", "30", "--nodes", "1"]);
    for minor in [27, 30, 33] {
        assert_eq!(
            k.ok(minor, &["auth", "can-i", "delete", "nodes"]).trim(),
            "yes"
        );
        let list = mask_ages(&k.ok(minor, &["auth", "can-i", "--list"]));
        assert!(
            list.starts_with("Resources Non-Resource URLs Resource Names Verbs\n*.* [] [] [*]\n"),
            "{list}"
        );
    }
    let who = mask_ages(&k.ok(33, &["auth", "whoami"]));
    assert_eq!(
        who,
        "ATTRIBUTE VALUE\nUsername kubernetes-admin\nGroups [system:masters system:authenticated]"
    );

    // A new namespace gets its default account; a pod in it gets the projected credentials.
    let out = k.kubectl_stdin(30, &["apply", "-f", "-"], Some(NS));
    assert!(out.status.success(), "{out:?}");
    k.wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || {
            k.kubectl(30, &["get", "sa", "default", "-n", "team"])
                .status
                .success()
                .then_some(())
        },
    );
    k.ok(30, &["run", "web", "-n", "team", "--image=nginx"]);
    let vols = k.ok(
        30,
        &[
            "get",
            "pod",
            "web",
            "-n",
            "team",
            "-o",
            "jsonpath={.spec.volumes[0].name} {.spec.containers[0].volumeMounts[0].mountPath}",
        ],
    );
    assert!(vols.starts_with("kube-api-access-"), "{vols}");
    assert!(
        vols.ends_with(" /var/run/secrets/kubernetes.io/serviceaccount"),
        "{vols}"
    );
    let out = k.kubectl(
        30,
        &[
            "run",
            "x",
            "-n",
            "team",
            "--image=nginx",
            "--overrides",
            r#"{"spec":{"serviceAccountName":"nobody"}}"#,
        ],
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (Forbidden): pods \"x\" is forbidden: error looking up service account team/nobody: serviceaccount \"nobody\" not found"
    );

    // A requested token authenticates as its account.
    k.ok(30, &["create", "sa", "robot", "-n", "team"]);
    let token = k
        .ok(30, &["create", "token", "robot", "-n", "team"])
        .trim()
        .to_string();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let server = k.ok(
        30,
        &[
            "config",
            "view",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ],
    );
    let out = std::process::Command::new(crate::harness::kubectl_binary(30))
        .args([
            "--kubeconfig=/dev/null",
            "--server",
            &server,
            "--insecure-skip-tls-verify",
            "--token",
            &token,
            "auth",
            "whoami",
        ])
        .output()
        .unwrap();
    assert_eq!(
        mask_ages(&String::from_utf8_lossy(&out.stdout)),
        "ATTRIBUTE VALUE\nUsername system:serviceaccount:team:robot\nGroups [system:serviceaccounts system:serviceaccounts:team system:authenticated]",
        "{out:?}"
    );
    let out = k.kubectl(
        30,
        &["create", "token", "robot", "-n", "team", "--duration=5m"],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: failed to create token: TokenRequest.authentication.k8s.io \"robot\" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"
    );

    // A CronJob every minute: at --speed 30 a minute is two seconds.
    k.ok(
        30,
        &[
            "create",
            "cronjob",
            "tick",
            "--image=busybox",
            "--schedule=* * * * *",
            "--",
            "echo",
            "hi",
        ],
    );
    let header = mask_ages(&k.ok(30, &["get", "cronjob", "tick"]));
    assert!(
        header.starts_with(
            "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE\ntick * * * * * <none> False"
        ),
        "{header}"
    );
    k.wait_for("a Job of the CronJob", Duration::from_secs(60), || {
        let jobs = k.ok(30, &["get", "jobs", "-o", "name"]);
        jobs.lines()
            .any(|l| l.starts_with("job.batch/tick-"))
            .then_some(())
    });
    let out = k.kubectl(
        30,
        &[
            "create",
            "cronjob",
            "bad",
            "--image=busybox",
            "--schedule=61 * * * *",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: failed to create cronjob: CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
    );

    // spec.timeZone: an IANA zone is taken and the schedule runs in it (the scheduled-timestamp
    // annotation of its Jobs carries the zone's offset); an unknown zone is refused.
    k.ok(
        33,
        &[
            "create",
            "cronjob",
            "zoned",
            "--image=busybox",
            "--schedule=* * * * *",
        ],
    );
    let out = k.kubectl(
        33,
        &[
            "patch",
            "cronjob",
            "zoned",
            "-p",
            r#"{"spec":{"timeZone":"Mars/Olympus"}}"#,
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    k.ok(
        33,
        &[
            "patch",
            "cronjob",
            "zoned",
            "-p",
            r#"{"spec":{"timeZone":"Asia/Kolkata"}}"#,
        ],
    );
    let row = mask_ages(&k.ok(33, &["get", "cronjob", "zoned", "--no-headers"]));
    assert!(
        row.starts_with("zoned * * * * * Asia/Kolkata False"),
        "{row}"
    );
    k.wait_for("a Job in Asia/Kolkata time", Duration::from_secs(60), || {
        let stamps = k.ok(
            33,
            &[
                "get",
                "jobs",
                "-o",
                r#"jsonpath={range .items[*]}{.metadata.annotations.batch\.kubernetes\.io/cronjob-scheduled-timestamp}{"\n"}{end}"#,
            ],
        );
        stamps
            .lines()
            .any(|l| l.ends_with(":00+05:30"))
            .then_some(())
    });

    let metrics = k.ok(30, &["get", "--raw", "/metrics"]);
    for family in [
        "apiserver_request_total{",
        "apiserver_request_duration_seconds_bucket{",
        "apiserver_watch_events_total{",
        "apiserver_storage_objects{resource=\"cronjobs.batch\"} 2",
        "node_collector_zone_size{",
    ] {
        assert!(metrics.contains(family), "{family} missing");
    }
    assert!(metrics.contains(
        "resource=\"serviceaccounts\",scope=\"resource\",subresource=\"token\",verb=\"POST\""
    ));

    // client-go's workqueue families, one series per controller queue under upstream's name
    // (`kubectl get --raw /metrics | grep workqueue_`).
    let wq: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("workqueue_"))
        .collect();
    for line in [
        "# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue",
        "# TYPE workqueue_depth gauge",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# TYPE workqueue_work_duration_seconds histogram",
        "# TYPE workqueue_retries_total counter",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
        "workqueue_queue_duration_seconds_bucket{name=\"cronjob\",le=\"9.999999999999999e-06\"}",
    ] {
        assert!(
            wq.iter().any(|l| l.starts_with(line)),
            "{line} missing from\n{}",
            wq.join("\n")
        );
    }
    let value = |series: &str| -> f64 {
        wq.iter()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{}", wq.join("\n")))
    };
    for name in [
        "cronjob",
        "deployment",
        "endpoint",
        "endpoint_slice",
        "job",
        "replicaset",
        "serviceaccount",
        "statefulset",
        "daemonset",
        "disruption",
        "stale_pod_disruption",
    ] {
        value(&format!("workqueue_depth{{name=\"{name}\"}}"));
    }
    // The CronJob, its Job and the new namespace went through their queues and were processed.
    for name in ["cronjob", "job", "serviceaccount"] {
        assert!(value(&format!("workqueue_adds_total{{name=\"{name}\"}}")) >= 1.0);
        assert!(
            value(&format!(
                "workqueue_work_duration_seconds_count{{name=\"{name}\"}}"
            )) >= 1.0
        );
    }
}
