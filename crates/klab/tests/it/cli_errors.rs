//! The real binary refuses bad command lines clearly (one line naming the flag once, exit 1)
//! before it starts anything, and `klab node` finds the cluster through `$KUBECONFIG`.

use std::process::Command;

fn klab(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_klab"));
    cmd.args(args).env_remove("KUBECONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("klab runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_up_flags_are_refused_naming_the_flag_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let cases: [(&[&str], &str, &str); 6] = [
        (
            &["--nodes", "0"],
            "error: --nodes must be at least 1",
            "--nodes",
        ),
        (
            &["--zones", "a,,b"],
            "error: --zones has an empty zone name (\"a,,b\")",
            "--zones",
        ),
        (
            &["--zones", ""],
            "error: --zones has an empty zone name",
            "--zones",
        ),
        (
            &["--speed", "-1"],
            "error: --speed must be a positive number, got -1",
            "--speed",
        ),
        (
            &["--speed", "NaN"],
            "error: --speed must be a positive number, got NaN",
            "--speed",
        ),
        (
            &["--node-monitor-grace-period", "soon"],
            "error: invalid value \"soon\" for --node-monitor-grace-period",
            "--node-monitor-grace-period",
        ),
    ];
    for (flags, want, flag) in cases {
        let mut args = vec!["up", "--data-dir", data, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        let (ok, err) = klab(&args, &[]);
        assert!(!ok, "{flags:?} must fail");
        assert!(err.starts_with(want), "{flags:?}: {err}");
        assert_eq!(
            err.matches(flag).count(),
            1,
            "{flags:?} names {flag} once: {err}"
        );
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{flags:?}: one line: {err}"
        );
    }
    assert!(
        !std::path::Path::new(data).join("store.redb").exists(),
        "nothing was started"
    );
}

/// Kubelet eviction and log-rotation settings that do not parse or are out of range: `klab up`
/// refuses them with upstream's texts (spec node.md §7.1) and starts nothing.
#[test]
fn bad_kubelet_eviction_and_log_flags_are_refused_with_upstreams_texts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (
            &["--eviction-hard", "memory.available<150%"],
            "error: invalid value \"memory.available<150%\" for --eviction-hard: eviction percentage threshold memory.available must be <= 100%: 150%",
        ),
        (
            &["--eviction-hard", "nodefs.available<-5%"],
            "error: invalid value \"nodefs.available<-5%\" for --eviction-hard: eviction percentage threshold nodefs.available must be >= 0%: -5%",
        ),
        (
            &["--eviction-hard", "memory.available<lots"],
            "error: invalid value \"memory.available<lots\" for --eviction-hard: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        (
            &["--eviction-hard", "memory.free<1Gi"],
            "error: invalid value \"memory.free<1Gi\" for --eviction-hard: unsupported eviction signal memory.free",
        ),
        (
            &["--eviction-soft", "memory.available<500Mi"],
            "error: invalid value \"memory.available<500Mi\" for --eviction-soft: grace period must be specified for the soft eviction threshold memory.available",
        ),
        (
            &["--container-log-max-files", "1"],
            "error: invalid value \"1\" for --container-log-max-files: invalid configuration: containerLogMaxFiles must be greater than 1",
        ),
        (
            &["--container-log-max-size", "big"],
            "error: invalid value \"big\" for --container-log-max-size: failed to parse container log max size \"big\": quantities must match the regular expression",
        ),
        (
            &["--image-gc-high-threshold", "101"],
            "error: invalid value \"101\" for --image-gc-high-threshold: invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["up", "--data-dir", data, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        let (ok, err) = klab(&args, &[]);
        assert!(!ok, "{flags:?} must fail");
        assert!(err.starts_with(want), "{flags:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{flags:?}: one line: {err}"
        );
    }
    assert!(
        !std::path::Path::new(data).join("store.redb").exists(),
        "nothing was started"
    );
}

#[test]
fn klab_node_reads_kubeconfig_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let from_env = dir.path().join("from-env.kubeconfig");
    let env_value = format!("{}:/elsewhere/config", from_env.display());
    let (ok, err) = klab(
        &["node", "list", "--data-dir", dir.path().to_str().unwrap()],
        &[("KUBECONFIG", &env_value)],
    );
    assert!(!ok);
    assert!(
        err.contains(&format!("reading {}", from_env.display())),
        "uses the first file of $KUBECONFIG: {err}"
    );
}
