//! The end-of-run summary per workload: desired vs available over time, which pods were marked
//! for deletion and when, their replacements — computed by replaying the recorded history (pure)
//! — and why the pods still stuck at the end are stuck, in `klab why`'s words (the explanations
//! of the end-of-run snapshot, so the two always agree).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use klab_api::clock::format_elapsed;

use crate::trace::{Attribution, Change, Record, World};

type WorkloadKey = (String, String, String); // kind, namespace, name

#[derive(Debug, Default, Clone)]
struct PodLife {
    workload: Option<WorkloadKey>,
    created: Duration,
    first_node: String,
    running_at: Option<Duration>,
    deleting_at: Option<(Duration, String)>,
    deleted_at: Option<Duration>,
}

/// Runs of more changes than this in one direction at one desired count are shortened.
const RUN_SHOWN: usize = 6;

/// A workload's `available/desired@time` changes joined by ` -> `. A long run in which
/// `available` only rises (or only falls) while `desired` stays — a big Deployment coming up one
/// pod at a time — keeps its first and last change and says how many it left out, so that the
/// summary of a 10 000-replica Deployment stays one readable line.
fn availability_history(changes: &[(Duration, i64, i64)]) -> String {
    let one = |(at, d, a): &(Duration, i64, i64)| format!("{a}/{d}@{}", format_elapsed(*at));
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        // The run starting at i: same desired, available moving one way.
        let mut j = i + 1;
        if j < changes.len() && changes[j].1 == changes[i].1 {
            let up = changes[j].2 > changes[i].2;
            while j + 1 < changes.len()
                && changes[j + 1].1 == changes[i].1
                && (changes[j + 1].2 > changes[j].2) == up
            {
                j += 1;
            }
            j += 1;
        }
        let run = &changes[i..j];
        if run.len() > RUN_SHOWN {
            parts.push(one(&run[0]));
            parts.push(format!("… {} more …", run.len() - 2));
            parts.push(one(&run[run.len() - 1]));
        } else {
            parts.extend(run.iter().map(one));
        }
        i = j;
    }
    parts.join(" -> ")
}

/// At most this many disturbed pods of one workload get a line of their own.
const POD_LINES_SHOWN: usize = 20;

/// Appends a workload's pod lines: all of them up to [`POD_LINES_SHOWN`], else that many and
/// one line counting the rest, with how many of those are stuck — in a zone outage a workload
/// can have thousands, and the pods still Terminating must not disappear from view.
fn push_pod_lines(out: &mut String, lines: &[(String, bool, bool)]) {
    for (line, _, _) in lines.iter().take(POD_LINES_SHOWN) {
        out.push_str(line);
        out.push('\n');
    }
    let rest = lines.get(POD_LINES_SHOWN..).unwrap_or_default();
    if rest.is_empty() {
        return;
    }
    let terminating = rest.iter().filter(|l| l.1).count();
    let not_running = rest.iter().filter(|l| l.2).count();
    let noun = if rest.len() == 1 { "pod" } else { "pods" };
    let _ = write!(out, "    … and {} more {noun}", rest.len());
    let mut stuck = Vec::new();
    if terminating > 0 {
        stuck.push(format!("{terminating} still Terminating at the end"));
    }
    if not_running > 0 {
        let noun = if not_running == 1 {
            "replacement"
        } else {
            "replacements"
        };
        stuck.push(format!("{not_running} {noun} not Running at the end"));
    }
    if !stuck.is_empty() {
        let _ = write!(out, " ({})", stuck.join(", "));
    }
    out.push('\n');
}

/// Builds the summary text; `stuck` are `klab why`'s explanations of the pods stuck at the end.
pub fn summarize(
    records: &[Record],
    attr: &Attribution,
    end: Duration,
    stuck: &[klab_why::Explanation],
) -> String {
    let mut world = World::default();
    let mut sink = Vec::new();
    let mut timeline: BTreeMap<WorkloadKey, Vec<(Duration, i64, i64)>> = BTreeMap::new();
    let mut rs_owner: BTreeMap<(String, String), WorkloadKey> = BTreeMap::new();
    let mut pods: BTreeMap<(String, String), PodLife> = BTreeMap::new();

    for r in records {
        match &r.change {
            Change::Workload {
                kind,
                namespace,
                name,
                view: Some(v),
            } => {
                if kind == "ReplicaSet"
                    && let Some((ok, on)) = &v.owner
                {
                    rs_owner.insert(
                        (namespace.clone(), name.clone()),
                        (ok.clone(), namespace.clone(), on.clone()),
                    );
                } else {
                    let t = timeline
                        .entry((kind.clone(), namespace.clone(), name.clone()))
                        .or_default();
                    // One entry per instant (its last state), and only on change.
                    if t.last().is_some_and(|(at, _, _)| *at == r.t) {
                        t.pop();
                    }
                    if t.last()
                        .is_none_or(|(_, d, a)| (*d, *a) != (v.desired, v.available))
                    {
                        t.push((r.t, v.desired, v.available));
                    }
                }
            }
            Change::Pod {
                namespace,
                name,
                view,
            } => {
                let key = (namespace.clone(), name.clone());
                match view {
                    Some(v) => {
                        let life = pods.entry(key).or_insert_with(|| PodLife {
                            workload: v.owner.as_ref().map(|(k, n)| {
                                let (k, n) = (k.to_string(), n.to_string());
                                if k == "ReplicaSet" {
                                    rs_owner
                                        .get(&(namespace.clone(), n.clone()))
                                        .cloned()
                                        .unwrap_or((k, namespace.clone(), n))
                                } else {
                                    (k, namespace.clone(), n)
                                }
                            }),
                            created: r.t,
                            ..Default::default()
                        });
                        if life.first_node.is_empty() {
                            life.first_node = v.node.to_string();
                        }
                        if life.running_at.is_none() && v.status == "Running" && !v.deleting {
                            life.running_at = Some(r.t);
                        }
                        if life.deleting_at.is_none() && v.deleting {
                            life.deleting_at =
                                Some((r.t, v.disruption.clone().unwrap_or_default()));
                        }
                    }
                    None => {
                        if let Some(l) = pods.get_mut(&key) {
                            l.deleted_at = Some(r.t);
                        }
                    }
                }
            }
            _ => {}
        }
        world.apply(r, attr, &mut sink);
    }

    let mut out = String::new();
    let _ = writeln!(out, "Summary at {}:", format_elapsed(end));
    let mut keys: Vec<WorkloadKey> = timeline.keys().cloned().collect();
    // Pods without a known workload (bare pods) are grouped under their own heading.
    if pods.values().any(|p| p.workload.is_none()) {
        keys.push(("Pod".into(), String::new(), String::new()));
    }
    for key in keys {
        let (kind, ns, name) = &key;
        let is_bare = kind == "Pod";
        if is_bare {
            let _ = writeln!(out, "  bare pods:");
        } else {
            let _ = writeln!(
                out,
                "  {kind} {ns}/{name}: available/desired {}",
                availability_history(&timeline[&key])
            );
        }
        let members: Vec<(&(String, String), &PodLife)> = pods
            .iter()
            .filter(|(_, l)| {
                if is_bare {
                    l.workload.is_none()
                } else {
                    l.workload.as_ref() == Some(&key)
                }
            })
            .collect();
        let first_eviction = members
            .iter()
            .filter_map(|(_, l)| l.deleting_at.as_ref().map(|d| d.0))
            .min();
        // (line, still Terminating, not Running at the end)
        let mut lines: Vec<(String, bool, bool)> = Vec::new();
        for ((pns, pname), l) in &members {
            let (mut terminating, mut not_running) = (false, false);
            let node = if l.first_node.is_empty() {
                "<none>".to_string()
            } else {
                l.first_node.clone()
            };
            let mut line = format!("    {pns}/{pname} on {node}");
            if let Some((t, reason)) = &l.deleting_at {
                let why = if reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({reason})")
                };
                let _ = write!(line, ": marked for deletion at {}{why}", format_elapsed(*t));
                match l.deleted_at {
                    Some(d) => {
                        let _ = write!(line, ", gone at {}", format_elapsed(d));
                    }
                    None => {
                        terminating = true;
                        line.push_str(", still Terminating at the end");
                    }
                }
            } else if first_eviction.is_some_and(|f| l.created >= f) {
                let _ = write!(
                    line,
                    ": replacement created at {}",
                    format_elapsed(l.created)
                );
                match l.running_at {
                    Some(r) => {
                        let _ = write!(line, ", Running at {}", format_elapsed(r));
                    }
                    None => {
                        not_running = true;
                        let status = world
                            .pods
                            .get(&((*pns).clone(), (*pname).clone()))
                            .map(|p| p.status.clone())
                            .unwrap_or_else(|| "gone".into());
                        let _ = write!(line, ", not Running at the end ({status})");
                    }
                }
            } else if let Some(d) = l.deleted_at {
                let _ = write!(line, ": gone at {}", format_elapsed(d));
            } else {
                continue; // undisturbed: not worth a line
            }
            lines.push((line, terminating, not_running));
        }
        push_pod_lines(&mut out, &lines);
    }

    if !stuck.is_empty() {
        let _ = writeln!(out, "  stuck at the end (klab why):");
        for e in stuck {
            for l in klab_why::render_text(e).lines() {
                let _ = writeln!(out, "    {l}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{NodeView, PodView, WorkloadView};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn statefulset_pod_stuck_on_a_dead_node() {
        let pod = |status: &str, deleting: bool| PodView {
            ready: "1/1".into(),
            status: status.into(),
            node: "n2".into(),
            deleting,
            grace: deleting.then_some(30),
            disruption: deleting.then(|| "DeletionByTaintManager".to_string()),
            owner: Some(("StatefulSet".into(), "web".into())),
            ..Default::default()
        };
        let sts = |avail| Change::Workload {
            kind: "StatefulSet".into(),
            namespace: "default".into(),
            name: "web".into(),
            view: Some(Box::new(WorkloadView {
                desired: 2,
                available: avail,
                columns: format!("READY {avail}/2"),
                ..Default::default()
            })),
        };
        let p = |v| Change::Pod {
            namespace: "default".into(),
            name: "web-1".into(),
            view: Some(Box::new(v)),
        };
        let records = vec![
            Record {
                t: secs(0),
                rv: 1,
                change: Change::Node {
                    name: "n2".into(),
                    view: Some(Box::new(NodeView {
                        status: "Ready".into(),
                        ..Default::default()
                    })),
                },
            },
            Record {
                t: secs(0),
                rv: 2,
                change: sts(0),
            },
            Record {
                t: secs(0),
                rv: 3,
                change: p(pod("Pending", false)),
            },
            Record {
                t: secs(2),
                rv: 4,
                change: p(pod("Running", false)),
            },
            Record {
                t: secs(2),
                rv: 5,
                change: sts(2),
            },
            Record {
                t: secs(55),
                rv: 6,
                change: Change::Node {
                    name: "n2".into(),
                    view: Some(Box::new(NodeView {
                        status: "NotReady".into(),
                        ..Default::default()
                    })),
                },
            },
            Record {
                t: secs(55),
                rv: 7,
                change: sts(1),
            },
            Record {
                t: secs(360),
                rv: 8,
                change: p(pod("Terminating", true)),
            },
        ];
        // The stuck pods' explanations come from klab why, indented under their heading.
        let why = klab_why::Explanation {
            kind: klab_why::Kind::Pod,
            namespace: "default".into(),
            name: "web-1".into(),
            state: "Terminating on n2".into(),
            stuck: true,
            causes: vec![klab_why::Cause {
                about: klab_why::About::Owner,
                text: "StatefulSet web cannot create web-1 elsewhere: the old web-1 still exists"
                    .into(),
                since: None,
                due: None,
            }],
            parts: Vec::new(),
            unreadable: Vec::new(),
        };
        let s = summarize(&records, &Attribution::default(), secs(600), &[why]);
        assert_eq!(
            s,
            "Summary at 600.000s:\n  StatefulSet default/web: available/desired 0/2@0.000s -> 2/2@2.000s -> 1/2@55.000s\n    default/web-1 on n2: marked for deletion at 360.000s (DeletionByTaintManager), still Terminating at the end\n  stuck at the end (klab why):\n    Pod default/web-1: Terminating on n2 (stuck)\n      - StatefulSet web cannot create web-1 elsewhere: the old web-1 still exists\n"
        );
    }

    #[test]
    fn a_long_one_way_run_of_availability_is_shortened() {
        let at = |a: i64, d: i64, t: u64| (secs(t), d, a);
        // Short runs stay whole.
        let few: Vec<_> = (0..=3).map(|a| at(a, 3, a as u64)).collect();
        assert_eq!(
            availability_history(&few),
            "0/3@0.000s -> 1/3@1.000s -> 2/3@2.000s -> 3/3@3.000s"
        );
        // 0..=100 rising at 100 desired, then falling all the way (one run however its steps
        // are spaced), then a new desired count.
        let mut long: Vec<_> = (0..=100).map(|a| at(a, 100, a as u64)).collect();
        long.extend((97..100).rev().map(|a| at(a, 100, 200 - a as u64)));
        long.extend((0..97).rev().map(|a| at(a, 100, 300 - a as u64)));
        long.push(at(0, 5, 400));
        let text = availability_history(&long);
        assert_eq!(
            text,
            "0/100@0.000s -> … 99 more … -> 100/100@100.000s -> 99/100@101.000s -> … 98 more … -> 0/100@300.000s -> 0/5@400.000s"
        );
        // Exactly RUN_SHOWN changes are all shown; one more is shortened.
        let edge: Vec<_> = (0..RUN_SHOWN as i64).map(|a| at(a, 9, a as u64)).collect();
        assert_eq!(
            availability_history(&edge).matches(" -> ").count(),
            RUN_SHOWN - 1
        );
        let over: Vec<_> = (0..=RUN_SHOWN as i64).map(|a| at(a, 9, a as u64)).collect();
        assert!(availability_history(&over).contains(&format!("… {} more …", RUN_SHOWN - 1)));
    }

    #[test]
    fn a_workload_with_many_disturbed_pods_shows_some_and_counts_the_rest() {
        let line = |i: usize, t: bool, n: bool| (format!("    d/p{i:02}: …"), t, n);
        // Up to the limit every pod has its line.
        let few: Vec<_> = (0..POD_LINES_SHOWN).map(|i| line(i, true, false)).collect();
        let mut out = String::new();
        push_pod_lines(&mut out, &few);
        assert_eq!(out.lines().count(), POD_LINES_SHOWN);
        assert!(!out.contains("more pods"));
        // Past it, the rest are counted, stuck ones by kind.
        let mut many: Vec<_> = (0..POD_LINES_SHOWN)
            .map(|i| line(i, false, false))
            .collect();
        many.extend((0..5).map(|i| line(100 + i, true, false)));
        many.extend((0..2).map(|i| line(200 + i, false, true)));
        many.push(line(300, false, false));
        let mut out = String::new();
        push_pod_lines(&mut out, &many);
        assert_eq!(out.lines().count(), POD_LINES_SHOWN + 1);
        assert_eq!(
            out.lines().last().unwrap(),
            "    … and 8 more pods (5 still Terminating at the end, 2 replacements not Running at the end)"
        );
        // One of a kind is said in the singular.
        let mut one: Vec<_> = (0..POD_LINES_SHOWN)
            .map(|i| line(i, false, false))
            .collect();
        one.push(line(400, false, true));
        let mut out = String::new();
        push_pod_lines(&mut out, &one);
        assert_eq!(
            out.lines().last().unwrap(),
            "    … and 1 more pod (1 replacement not Running at the end)"
        );
        // A rest with nothing stuck: no parenthesis.
        let calm: Vec<_> = (0..=POD_LINES_SHOWN)
            .map(|i| line(i, false, false))
            .collect();
        let mut out = String::new();
        push_pod_lines(&mut out, &calm);
        assert_eq!(out.lines().last().unwrap(), "    … and 1 more pod");
    }

    #[test]
    fn deployment_replacements_resolve_through_the_replicaset() {
        let rs = Change::Workload {
            kind: "ReplicaSet".into(),
            namespace: "d".into(),
            name: "web-5b".into(),
            view: Some(Box::new(WorkloadView {
                owner: Some(("Deployment".into(), "web".into())),
                ..Default::default()
            })),
        };
        let dep = |a| Change::Workload {
            kind: "Deployment".into(),
            namespace: "d".into(),
            name: "web".into(),
            view: Some(Box::new(WorkloadView {
                desired: 1,
                available: a,
                strategy: Some("Recreate".into()),
                ..Default::default()
            })),
        };
        let pod = |name: &str, status: &str, node: &str, deleting: bool| Change::Pod {
            namespace: "d".into(),
            name: name.into(),
            view: Some(Box::new(PodView {
                status: status.into(),
                node: node.into(),
                deleting,
                owner: Some(("ReplicaSet".into(), "web-5b".into())),
                ..Default::default()
            })),
        };
        let records = vec![
            Record {
                t: secs(0),
                rv: 1,
                change: rs,
            },
            Record {
                t: secs(0),
                rv: 2,
                change: dep(1),
            },
            Record {
                t: secs(0),
                rv: 3,
                change: pod("web-a", "Running", "n1", false),
            },
            Record {
                t: secs(360),
                rv: 4,
                change: pod("web-a", "Terminating", "n1", true),
            },
            Record {
                t: secs(400),
                rv: 5,
                change: Change::Pod {
                    namespace: "d".into(),
                    name: "web-a".into(),
                    view: None,
                },
            },
            Record {
                t: secs(400),
                rv: 6,
                change: pod("web-b", "Pending", "", false),
            },
            Record {
                t: secs(402),
                rv: 7,
                change: pod("web-b", "Running", "n2", false),
            },
        ];
        let s = summarize(&records, &Attribution::default(), secs(500), &[]);
        assert!(
            s.contains("  Deployment d/web: available/desired 1/1@0.000s\n"),
            "{s}"
        );
        assert!(
            s.contains("    d/web-a on n1: marked for deletion at 360.000s, gone at 400.000s\n"),
            "{s}"
        );
        assert!(
            s.contains("    d/web-b on n2: replacement created at 400.000s, Running at 402.000s\n"),
            "{s}"
        );
        assert!(
            !s.contains("still Terminating") && !s.contains("stuck"),
            "{s}"
        );
    }
}
