//! `klab why`'s explanations on the shipped scenarios at chosen instants: each case runs a
//! scenario up to an instant (`--until`), explains one object of the end-of-run snapshot and
//! compares the text with `testdata/why.golden` (generated suffixes masked;
//! `KLAB_UPDATE_GOLDEN=1` rewrites it). The instants are the phases the seeds' readers ask about.

use std::path::Path;
use std::time::Duration;

use klab_why::{Target, TimeStyle};

use crate::{RunOptions, run_blocking, scenario};

/// Which object: by name, or the first pod whose name starts with a prefix on a node.
enum Pick {
    Named(&'static str),
    PodOn(&'static str, &'static str),
}

const CASES: &[(&str, u64, &[Pick])] = &[
    // Seed 000: n2 powered off at 30s — silent, NotReady with countdown, Terminating, back.
    ("node/power-off-over-5m", 60, &[Pick::PodOn("nginx-", "n2")]),
    (
        "node/power-off-over-5m",
        200,
        &[Pick::PodOn("nginx-", "n2"), Pick::Named("node/n2")],
    ),
    (
        "node/power-off-over-5m",
        400,
        &[
            Pick::PodOn("nginx-", "n2"),
            Pick::Named("deployment/nginx"),
            Pick::Named("node/n2"),
        ],
    ),
    (
        "node/power-off-over-5m",
        480,
        &[Pick::Named("deployment/nginx")],
    ),
    // Seed 003: the StatefulSet cannot replace web pods on the dead node until the taint.
    (
        "statefulset/out-of-service-taint",
        400,
        &[Pick::Named("statefulset/web"), Pick::PodOn("web-", "n2")],
    ),
    (
        "volumes/statefulset-no-taint",
        500,
        &[Pick::Named("statefulset/web")],
    ),
    // The node deleted: pod GC.
    ("node/delete-node-gc", 430, &[Pick::PodOn("nginx-", "n2")]),
    // Recreate waits for every old pod.
    (
        "deployment/recreate-force-delete",
        450,
        &[Pick::Named("deployment/web")],
    ),
    // DaemonSet pods tolerate without a limit.
    (
        "daemonset/unaffected",
        400,
        &[Pick::Named("daemonset/router")],
    ),
    // A Job pod bound to a dead node after its taint.
    (
        "job/tolerating-job-stuck-pending",
        200,
        &[Pick::PodOn("job-demo-", "n2")],
    ),
    // Unschedulable claims: the scheduler's words.
    (
        "volumes/bad-claims",
        60,
        &[Pick::Named("pod/orphan"), Pick::Named("pod/classless")],
    ),
    // The kubelet's own eviction.
    ("eviction/memory-pressure", 100, &[Pick::Named("node/n2")]),
    // A drain under a budget.
    (
        "maintenance/drain-with-pdb",
        32,
        &[Pick::Named("deployment/web")],
    ),
];

/// Masks generated name suffixes (upstream's alphabet has no vowels, so `--force` and
/// `not-ready` stay).
fn mask(s: &str) -> String {
    let suffix = regex::Regex::new(r"-[bcdfghjklmnpqrstvwxz2456789]{5}\b").expect("regex");
    suffix.replace_all(s, "-xxxxx").into_owned()
}

#[test]
fn explanations_of_shipped_scenarios_at_chosen_instants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut got = String::new();
    for (file, until, picks) in CASES {
        let path = root.join("../../scenarios").join(format!("{file}.yaml"));
        let sc = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let o = run_blocking(
            &sc,
            &RunOptions {
                until: Some(Duration::from_secs(*until)),
                ..RunOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        for pick in *picks {
            let spec = match pick {
                Pick::Named(s) => s.to_string(),
                Pick::PodOn(prefix, node) => {
                    let p = o
                        .snapshot
                        .pods
                        .iter()
                        .find(|p| {
                            p.metadata
                                .name
                                .as_deref()
                                .is_some_and(|n| n.starts_with(prefix))
                                && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                                    == Some(node)
                        })
                        .unwrap_or_else(|| panic!("{file}@{until}s: no {prefix}* pod on {node}"));
                    format!("pod/{}", p.metadata.name.as_deref().unwrap_or_default())
                }
            };
            let target = Target::parse(&spec, "default").expect("target");
            let e = klab_why::explain(&o.snapshot, &target, TimeStyle::Elapsed(o.epoch))
                .unwrap_or_else(|e| panic!("{file}@{until}s {spec}: {e}"));
            got.push_str(&format!(
                "### {file} @ {until}s: klab why {}\n{}\n",
                mask(&spec),
                mask(&klab_why::render_text(&e))
            ));
        }
    }
    let golden = root.join("testdata/why.golden");
    if std::env::var_os("KLAB_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&golden, &got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        want == got,
        "explanations differ from {} (KLAB_UPDATE_GOLDEN=1 rewrites it):\n{got}",
        golden.display()
    );
}
