//! Expectations: checked against the recorded history after the run, as a pure replay, so an
//! expectation "at 55s" sees exactly the changes the API showed up to and including 55.000s,
//! regardless of how tasks were scheduled within that instant.

use std::collections::BTreeMap;
use std::time::Duration;

use klab_apiserver::metrics::RequestEntry;
use serde_json::Value;

use crate::scenario::{Check, ConditionSpec, Expectation, TaintSpec};
use crate::trace::{Attribution, NodeView, Record, TraceLine, World};

/// A failed expectation.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub line: u64,
    /// The expectation as written.
    pub text: String,
    /// The virtual time it was checked at.
    pub at: Duration,
    /// What was found instead.
    pub detail: String,
}

/// Result of checking every expectation.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    pub failures: Vec<Failure>,
    pub passed: usize,
    /// Expectations after the end of a shortened run (`--until`), not checked.
    pub skipped: usize,
}

/// Checks `expectations` against sorted `records` (and the trace they produced) and the API
/// server's request log. `end` is when the run stopped; expectations without a time are checked
/// there.
pub fn evaluate(
    records: &[Record],
    lines: &[TraceLine],
    requests: &[RequestEntry],
    attr: &Attribution,
    expectations: &[Expectation],
    end: Duration,
    run_for: Duration,
) -> Verdict {
    let mut order: Vec<(Duration, usize)> = expectations
        .iter()
        .enumerate()
        .map(|(i, e)| (e.at.unwrap_or(run_for), i))
        .collect();
    order.sort();
    let mut world = World::default();
    let mut sink = Vec::new();
    let mut next = 0usize;
    let mut verdict = Verdict::default();
    for (at, i) in order {
        let e = &expectations[i];
        if at > end {
            verdict.skipped += 1;
            continue;
        }
        while next < records.len() && records[next].t <= at {
            world.apply(&records[next], attr, &mut sink);
            next += 1;
        }
        match check(&world, lines, requests, e, at) {
            Ok(()) => verdict.passed += 1,
            Err(detail) => verdict.failures.push(Failure {
                line: e.line,
                text: e.text.clone(),
                at,
                detail,
            }),
        }
    }
    verdict
}

fn taint_matches(spec: &TaintSpec, taint: &str) -> bool {
    let (kv, effect) = taint.rsplit_once(':').unwrap_or((taint, ""));
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    key == spec.key
        && spec.value.as_deref().is_none_or(|v| v == value)
        && spec.effect.as_deref().is_none_or(|e| e == effect)
}

fn has_taint(n: &NodeView, spec: &TaintSpec) -> bool {
    n.taints.iter().any(|t| taint_matches(spec, t))
}

/// The world as a run has seen it so far, advanced as records arrive: what a `wait-for` step
/// checks its expectation against while the run goes on.
#[derive(Default)]
pub struct Live {
    world: World,
    lines: Vec<TraceLine>,
    applied: usize,
}

impl Live {
    /// Applies the records pushed since the last call (each batch in trace order).
    pub fn advance(&mut self, records: &[Record], attr: &Attribution) {
        let mut batch: Vec<Record> = records.get(self.applied..).unwrap_or_default().to_vec();
        self.applied = records.len();
        crate::trace::sort_records(&mut batch);
        for r in &batch {
            self.world.apply(r, attr, &mut self.lines);
        }
    }

    /// Whether `e` holds now (`at`), trace patterns counted from `from`.
    pub fn check(
        &self,
        requests: &[RequestEntry],
        e: &Expectation,
        from: Duration,
        at: Duration,
    ) -> Result<(), String> {
        let mut e = e.clone();
        e.from = Some(from);
        check(&self.world, &self.lines, requests, &e, at)
    }
}

/// How a condition compares with what is wanted; `None` when it matches.
fn condition_mismatch(
    what: &str,
    want: &ConditionSpec,
    got: Option<(&str, &str, &str)>,
) -> Option<String> {
    let Some((status, reason, message)) = got else {
        return Some(format!(
            "{what} has no condition {}, expected {want}",
            want.type_
        ));
    };
    let ok = status == want.status
        && want.reason.as_deref().is_none_or(|r| r == reason)
        && want.message.as_deref().is_none_or(|m| m == message);
    if ok {
        return None;
    }
    let mut found = format!("{}={status}", want.type_);
    if !reason.is_empty() || !message.is_empty() {
        found.push_str(&format!(" ({reason}: {message})"));
    }
    Some(format!("{what} condition is {found}, expected {want}"))
}

fn object_condition<'a>(obj: &'a Value, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    let c = obj
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
    Some((s("status"), s("reason"), s("message")))
}

fn check(
    world: &World,
    lines: &[TraceLine],
    requests: &[RequestEntry],
    e: &Expectation,
    at: Duration,
) -> Result<(), String> {
    match &e.check {
        Check::Node {
            name,
            exists,
            status,
            condition,
            has_taints,
            no_taints,
        } => {
            let node = world.nodes.get(name);
            match (exists, node) {
                (Some(false), None) => return Ok(()),
                (Some(false), Some(n)) => {
                    return Err(format!("node {name} exists (STATUS {})", n.status));
                }
                (_, None) => return Err(format!("node {name} does not exist")),
                _ => {}
            }
            let n = node.ok_or_else(|| format!("node {name} does not exist"))?;
            if let Some(s) = status
                && &n.status != s
            {
                return Err(format!("node {name} STATUS is {}, expected {s}", n.status));
            }
            if let Some(want) = condition {
                let got = n.conditions.get(&want.type_);
                if want.reason.is_none() && want.message.is_none() {
                    let got = got.map(|c| c.0.as_str()).unwrap_or("<absent>");
                    if got != want.status {
                        return Err(format!(
                            "node {name} condition {} is {got}, expected {}",
                            want.type_, want.status
                        ));
                    }
                } else if let Some(m) = condition_mismatch(
                    &format!("node {name}"),
                    want,
                    got.map(|c| (c.0.as_str(), c.1.as_str(), c.2.as_str())),
                ) {
                    return Err(m);
                }
            }
            let taints = || n.taints.iter().cloned().collect::<Vec<_>>().join(", ");
            for t in has_taints {
                if !has_taint(n, t) {
                    return Err(format!(
                        "node {name} lacks taint {t} (taints: [{}])",
                        taints()
                    ));
                }
            }
            for t in no_taints {
                if has_taint(n, t) {
                    return Err(format!(
                        "node {name} has taint {t} (taints: [{}])",
                        taints()
                    ));
                }
            }
            Ok(())
        }
        Check::Pod {
            namespace,
            name,
            exists,
            status,
            ready,
            restarts,
            node,
        } => {
            let pod = world.pods.get(&(namespace.clone(), name.clone()));
            match (exists, pod) {
                (Some(false), None) => return Ok(()),
                (Some(false), Some(p)) => {
                    return Err(format!(
                        "pod {namespace}/{name} exists ({} on {})",
                        p.status, p.node
                    ));
                }
                (_, None) => return Err(format!("pod {namespace}/{name} does not exist")),
                _ => {}
            }
            let p = pod.ok_or_else(|| format!("pod {namespace}/{name} does not exist"))?;
            if let Some(s) = status
                && &p.status != s
            {
                return Err(format!(
                    "pod {namespace}/{name} STATUS is {}, expected {s}",
                    p.status
                ));
            }
            if let Some(r) = ready
                && &p.ready != r
            {
                return Err(format!(
                    "pod {namespace}/{name} READY is {}, expected {r}",
                    p.ready
                ));
            }
            if let Some(r) = restarts
                && p.restarts != *r
            {
                return Err(format!(
                    "pod {namespace}/{name} RESTARTS is {}, expected {r}",
                    p.restarts
                ));
            }
            if let Some(n) = node
                && &p.node != n
            {
                return Err(format!(
                    "pod {namespace}/{name} is on {:?}, expected {n}",
                    p.node
                ));
            }
            Ok(())
        }
        Check::Pods {
            namespace,
            selector,
            on_node,
            status,
            count,
        } => {
            let matching: Vec<String> = world
                .pods
                .iter()
                .filter(|((ns, _), p)| {
                    namespace.as_ref().is_none_or(|n| n == ns)
                        && selector.as_ref().is_none_or(|s| s.matches(&p.labels))
                        && on_node.as_ref().is_none_or(|n| n == &p.node)
                        && status.as_ref().is_none_or(|s| s == &p.status)
                })
                .map(|((ns, name), p)| {
                    format!(
                        "{ns}/{name} {} {}",
                        p.status,
                        if p.node.is_empty() { "<none>" } else { &p.node }
                    )
                })
                .collect();
            if count.holds(matching.len()) {
                Ok(())
            } else {
                Err(format!(
                    "{} matching pods, expected {count}: [{}]",
                    matching.len(),
                    matching.join(", ")
                ))
            }
        }
        Check::WorkloadsConverged { namespace } => {
            let off: Vec<String> = world
                .workloads
                .iter()
                .filter(|((_, ns, _), _)| namespace.as_ref().is_none_or(|n| n == ns))
                .filter_map(|((kind, ns, name), w)| {
                    w.unconverged
                        .as_ref()
                        .map(|why| format!("{kind} {ns}/{name}: {why}"))
                })
                .collect();
            if off.is_empty() {
                Ok(())
            } else {
                Err(format!("not converged: {}", off.join("; ")))
            }
        }
        Check::ServicesConverged { namespace } => services_converged(world, namespace.as_deref()),
        Check::Object {
            resource,
            namespace,
            name,
            exists,
            path,
            equals,
            matches,
            condition,
        } => {
            let label = crate::scenario::object_label(resource, Some(namespace), name);
            let key = (resource.kind.to_string(), namespace.clone(), name.clone());
            let obj = world.objects.get(&key);
            let Some(obj) = obj else {
                // `exists: false` holds for a missing object, and for a path in one.
                return if *exists == Some(false) {
                    Ok(())
                } else {
                    Err(format!("{label} does not exist"))
                };
            };
            if *exists == Some(false) && path.is_none() {
                return Err(format!("{label} exists"));
            }
            if let Some(p) = path {
                let found = p.eval(obj);
                let text = p.render(obj);
                match exists {
                    Some(true) if found.is_empty() => {
                        return Err(format!("{label}: {p} finds nothing"));
                    }
                    Some(false) if !found.is_empty() => {
                        return Err(format!("{label}: {p} is {text:?}, expected nothing"));
                    }
                    _ => {}
                }
                if let Some(want) = equals
                    && &text != want
                {
                    return Err(format!("{label}: {p} is {text:?}, expected {want:?}"));
                }
                if let Some(re) = matches
                    && !re.is_match(&text)
                {
                    return Err(format!(
                        "{label}: {p} is {text:?}, which does not match /{}/",
                        re.as_str()
                    ));
                }
            }
            if let Some(want) = condition
                && let Some(m) =
                    condition_mismatch(&label, want, object_condition(obj, &want.type_))
            {
                return Err(m);
            }
            Ok(())
        }
        Check::Writes { filter, count } => {
            let from = e.from.unwrap_or_default();
            let hits: Vec<&RequestEntry> = requests
                .iter()
                .filter(|r| r.at >= from && r.at <= at)
                .filter(|r| {
                    filter.counts(
                        &r.user,
                        r.verb,
                        r.resource,
                        &r.subresource,
                        r.name.as_deref(),
                    )
                })
                .collect();
            if count.holds(hits.len()) {
                return Ok(());
            }
            // The first few, so a surprise says when and what.
            let shown: Vec<String> = hits
                .iter()
                .take(5)
                .map(|r| {
                    let sub = if r.subresource.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", r.subresource)
                    };
                    format!(
                        "{} {} {} {}{sub}{} {}",
                        klab_api::clock::format_elapsed(r.at),
                        r.user,
                        r.verb,
                        r.resource,
                        r.name
                            .as_deref()
                            .map(|n| format!(" {n}"))
                            .unwrap_or_default(),
                        r.code
                    )
                })
                .collect();
            let more = if hits.len() > shown.len() {
                ", …"
            } else {
                ""
            };
            Err(format!(
                "{} writes by {} between {} and {}, expected {count}: [{}{more}]",
                hits.len(),
                filter.component,
                klab_api::clock::format_elapsed(from),
                klab_api::clock::format_elapsed(at),
                shown.join(", ")
            ))
        }
        Check::Trace { pattern, present } => {
            let from = e.from.unwrap_or_default();
            let hits: Vec<&TraceLine> = lines
                .iter()
                .filter(|l| {
                    l.t >= from
                        && l.t <= at
                        && !l.is_wait_for_echo()
                        && pattern.is_match(&l.plain())
                })
                .collect();
            match (present, hits.first()) {
                (true, None) => Err(format!(
                    "no trace line matching {pattern} between {} and {}",
                    klab_api::clock::format_elapsed(from),
                    klab_api::clock::format_elapsed(at)
                )),
                (false, Some(l)) => Err(format!(
                    "unexpected trace line matching {pattern}: {}",
                    l.plain()
                )),
                _ => Ok(()),
            }
        }
    }
}

/// `services: converged`: each Service with a selector has as ready endpoints exactly the pods it
/// selects that are Ready and not being deleted (upstream's EndpointSlice controller without
/// `publishNotReadyAddresses`), and no endpoint names a pod that is gone; each
/// PodDisruptionBudget has observed its generation and counts as `currentHealthy` the pods it
/// selects that are Ready and not being deleted (the disruption controller's `countHealthyPods`).
fn services_converged(world: &World, namespace: Option<&str>) -> Result<(), String> {
    use klab_api::selector::LabelSelector;
    use std::collections::BTreeSet;
    let in_ns = |ns: &str| namespace.is_none_or(|n| n == ns);
    // Pods a selector picks that count as ready and healthy.
    let ready_pods = |ns: &str, selects: &dyn Fn(&BTreeMap<String, String>) -> bool| {
        world
            .pods
            .iter()
            .filter(|((pns, _), p)| {
                pns == ns
                    && !p.deleting
                    && p.ready_condition == "True"
                    && !p.node.is_empty()
                    && selects(&p.labels)
            })
            .map(|((_, name), _)| name.clone())
            .collect::<BTreeSet<String>>()
    };
    let mut off = Vec::new();
    for ((kind, ns, name), obj) in &world.objects {
        if !in_ns(ns) {
            continue;
        }
        match kind.as_str() {
            "Service" => {
                let Some(selector) = obj.pointer("/spec/selector").and_then(Value::as_object)
                else {
                    continue;
                };
                if selector.is_empty() {
                    continue;
                }
                let want = ready_pods(ns, &|labels| {
                    selector.iter().all(|(k, v)| {
                        v.as_str()
                            .is_some_and(|v| labels.get(k).map(String::as_str) == Some(v))
                    })
                });
                let mut have = BTreeSet::new();
                let mut stale = BTreeSet::new();
                for ((sns, _), slice) in &world.slices {
                    if sns != ns || slice.service != *name {
                        continue;
                    }
                    for (pod, e) in &slice.endpoints {
                        if !world.pods.contains_key(&(ns.clone(), pod.clone())) {
                            stale.insert(pod.clone());
                        } else if e.ready {
                            have.insert(pod.clone());
                        }
                    }
                }
                let missing: Vec<&String> = want.difference(&have).collect();
                let extra: Vec<&String> = have.difference(&want).collect();
                let stale: Vec<&String> = stale.iter().collect();
                let parts: Vec<String> = [
                    ("ready pods without a ready endpoint", missing),
                    ("ready endpoints of pods not ready or not selected", extra),
                    ("endpoints of pods that are gone", stale),
                ]
                .into_iter()
                .filter(|(_, pods)| !pods.is_empty())
                .map(|(what, pods)| format!("{what} {pods:?}"))
                .collect();
                if !parts.is_empty() {
                    off.push(format!("Service {ns}/{name}: {}", parts.join(", ")));
                }
            }
            "PodDisruptionBudget" => {
                let i = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
                let (generation, observed) =
                    (i("/metadata/generation"), i("/status/observedGeneration"));
                if observed < generation {
                    off.push(format!(
                        "PodDisruptionBudget {ns}/{name}: observedGeneration {observed} < generation {generation}"
                    ));
                    continue;
                }
                let selector = match obj.pointer("/spec/selector") {
                    Some(sel) => LabelSelector::from_json(sel),
                    None => Ok(LabelSelector::nothing()),
                };
                let selector = match selector {
                    Ok(s) => s,
                    Err(e) => {
                        off.push(format!("PodDisruptionBudget {ns}/{name}: {e}"));
                        continue;
                    }
                };
                let healthy = ready_pods(ns, &|labels| selector.matches(labels)).len();
                let current = i("/status/currentHealthy");
                if usize::try_from(current).ok() != Some(healthy) {
                    off.push(format!(
                        "PodDisruptionBudget {ns}/{name}: currentHealthy {current}, {healthy} pods ready"
                    ));
                }
            }
            _ => {}
        }
    }
    if off.is_empty() {
        Ok(())
    } else {
        Err(format!("not converged: {}", off.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Count, Pattern};
    use crate::trace::{Change, PodView, replay};

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn exp(at: Option<u64>, check: Check) -> Expectation {
        Expectation {
            at: at.map(secs),
            from: None,
            line: 7,
            text: "the expectation".into(),
            check,
        }
    }

    fn node_check(name: &str, status: Option<&str>) -> Check {
        Check::Node {
            name: name.into(),
            exists: None,
            status: status.map(Into::into),
            condition: None,
            has_taints: vec![],
            no_taints: vec![],
        }
    }

    fn history() -> Vec<Record> {
        let node = |status: &str, taints: &[&str]| Change::Node {
            name: "n1".into(),
            view: Some(Box::new(NodeView {
                status: status.into(),
                conditions: [(
                    "Ready".to_string(),
                    (
                        if status == "Ready" { "True" } else { "Unknown" }.to_string(),
                        String::new(),
                        String::new(),
                    ),
                )]
                .into(),
                taints: taints.iter().map(|t| t.to_string()).collect(),
                labels: Default::default(),
            })),
        };
        let pod = |name: &str, status: &str, node: &str| Change::Pod {
            namespace: "default".into(),
            name: name.into(),
            view: Some(Box::new(PodView {
                status: status.into(),
                ready: "1/1".into(),
                node: node.into(),
                labels: std::sync::Arc::new([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            })),
        };
        vec![
            Record {
                t: secs(0),
                rv: 1,
                change: node("Ready", &[]),
            },
            Record {
                t: secs(0),
                rv: 2,
                change: pod("a", "Running", "n1"),
            },
            Record {
                t: secs(0),
                rv: 3,
                change: pod("b", "Running", "n2"),
            },
            Record {
                t: secs(55),
                rv: 4,
                change: node("NotReady", &["node.kubernetes.io/unreachable:NoSchedule"]),
            },
            Record {
                t: secs(360),
                rv: 5,
                change: pod("a", "Terminating", "n1"),
            },
        ]
    }

    fn run(exps: &[Expectation], end: u64) -> Verdict {
        let records = history();
        let attr = Attribution::default();
        let lines = replay(&records, &attr);
        evaluate(&records, &lines, &[], &attr, exps, secs(end), secs(600))
    }

    #[test]
    fn state_checks_see_changes_up_to_and_including_their_time() {
        let taint = |s: &str| TaintSpec::parse(s).unwrap();
        let sel = Some(klab_api::selector::LabelSelector::parse("app=web").unwrap());
        let table: Vec<(Expectation, Option<&str>)> = vec![
            (exp(Some(54), node_check("n1", Some("Ready"))), None),
            (exp(Some(55), node_check("n1", Some("NotReady"))), None),
            (
                exp(Some(54), node_check("n1", Some("NotReady"))),
                Some("node n1 STATUS is Ready, expected NotReady"),
            ),
            (
                exp(Some(60), node_check("n2", None)),
                Some("node n2 does not exist"),
            ),
            (
                exp(
                    Some(60),
                    Check::Node {
                        name: "n1".into(),
                        exists: None,
                        status: None,
                        condition: Some(ConditionSpec {
                            type_: "Ready".into(),
                            status: "Unknown".into(),
                            reason: None,
                            message: None,
                        }),
                        has_taints: vec![taint("node.kubernetes.io/unreachable:NoSchedule")],
                        no_taints: vec![taint("node.kubernetes.io/unreachable:NoExecute")],
                    },
                ),
                None,
            ),
            (
                exp(
                    Some(60),
                    Check::Node {
                        name: "n1".into(),
                        exists: None,
                        status: None,
                        condition: None,
                        has_taints: vec![taint("node.kubernetes.io/unreachable:NoExecute")],
                        no_taints: vec![],
                    },
                ),
                Some(
                    "node n1 lacks taint node.kubernetes.io/unreachable:NoExecute (taints: [node.kubernetes.io/unreachable:NoSchedule])",
                ),
            ),
            (
                exp(
                    None,
                    Check::Pods {
                        namespace: Some("default".into()),
                        selector: sel.clone(),
                        on_node: None,
                        status: Some("Running".into()),
                        count: Count::Exactly(1),
                    },
                ),
                None,
            ),
            (
                exp(
                    Some(100),
                    Check::Pods {
                        namespace: None,
                        selector: sel,
                        on_node: Some("n1".into()),
                        status: None,
                        count: Count::AtLeast(2),
                    },
                ),
                Some("1 matching pods, expected at least 2: [default/a Running n1]"),
            ),
            (
                exp(
                    Some(360),
                    Check::Pod {
                        namespace: "default".into(),
                        name: "a".into(),
                        exists: None,
                        status: Some("Terminating".into()),
                        ready: Some("1/1".into()),
                        restarts: Some(0),
                        node: Some("n1".into()),
                    },
                ),
                None,
            ),
            (
                exp(
                    Some(360),
                    Check::Pod {
                        namespace: "default".into(),
                        name: "b".into(),
                        exists: Some(false),
                        status: None,
                        ready: None,
                        restarts: None,
                        node: None,
                    },
                ),
                Some("pod default/b exists (Running on n2)"),
            ),
        ];
        for (e, want) in table {
            let v = run(std::slice::from_ref(&e), 600);
            let got = v.failures.first().map(|f| f.detail.as_str());
            assert_eq!(got, want, "{:?}", e.check);
            if let Some(f) = v.failures.first() {
                assert_eq!((f.line, f.at), (7, e.at.unwrap_or(secs(600))));
            }
        }
    }

    fn object_check(
        path: Option<&str>,
        exists: Option<bool>,
        equals: Option<&str>,
        matches: Option<&str>,
        condition: Option<ConditionSpec>,
    ) -> Check {
        Check::Object {
            resource: klab_apiserver::registry::lookup_kind("apps/v1", "Deployment").unwrap(),
            namespace: "default".into(),
            name: "web".into(),
            exists,
            path: path.map(|p| crate::jsonpath::JsonPath::parse(p).unwrap()),
            equals: equals.map(Into::into),
            matches: matches.map(|m| regex::Regex::new(m).unwrap()),
            condition,
        }
    }

    fn progressing(status: &str, reason: &str) -> ConditionSpec {
        ConditionSpec {
            type_: "Progressing".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: None,
        }
    }

    #[test]
    fn object_checks_read_whole_objects_as_of_their_time() {
        let dep = |reason: &str, status: &str| Change::Object {
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "web".into(),
            value: Some(std::sync::Arc::new(serde_json::json!({
                "metadata": {"name": "web", "generation": 2},
                "status": {"conditions": [{"type": "Progressing", "status": status,
                    "reason": reason, "message": "ReplicaSet \"web-1\" has timed out progressing."}]}
            }))),
        };
        let records = vec![
            Record {
                t: secs(10),
                rv: 10,
                change: dep("NewReplicaSetAvailable", "True"),
            },
            Record {
                t: secs(700),
                rv: 20,
                change: dep("ProgressDeadlineExceeded", "False"),
            },
            Record {
                t: secs(900),
                rv: 30,
                change: Change::Object {
                    kind: "Deployment".into(),
                    namespace: "default".into(),
                    name: "web".into(),
                    value: None,
                },
            },
        ];
        let attr = Attribution::default();
        let lines = replay(&records, &attr);
        assert!(
            lines.is_empty(),
            "whole objects make no trace lines: {lines:?}"
        );
        let table: Vec<(Expectation, Option<&str>)> = vec![
            (
                exp(Some(5), object_check(None, Some(false), None, None, None)),
                None,
            ),
            (
                exp(Some(5), object_check(None, None, None, None, None)),
                Some("Deployment default/web does not exist"),
            ),
            (
                exp(Some(60), object_check(None, Some(false), None, None, None)),
                Some("Deployment default/web exists"),
            ),
            (
                exp(
                    Some(60),
                    object_check(Some("{.metadata.generation}"), None, Some("2"), None, None),
                ),
                None,
            ),
            (
                exp(
                    Some(60),
                    object_check(Some("{.metadata.generation}"), None, Some("3"), None, None),
                ),
                Some("Deployment default/web: {.metadata.generation} is \"2\", expected \"3\""),
            ),
            (
                exp(
                    Some(60),
                    object_check(
                        Some("{.status.observedGeneration}"),
                        Some(true),
                        None,
                        None,
                        None,
                    ),
                ),
                Some("Deployment default/web: {.status.observedGeneration} finds nothing"),
            ),
            (
                exp(
                    Some(60),
                    object_check(
                        Some("{.status.observedGeneration}"),
                        Some(false),
                        None,
                        None,
                        None,
                    ),
                ),
                None,
            ),
            (
                exp(
                    Some(60),
                    object_check(
                        Some("{.status.conditions[0].message}"),
                        None,
                        None,
                        Some("timed out"),
                        None,
                    ),
                ),
                None,
            ),
            (
                exp(
                    Some(60),
                    object_check(
                        Some("{.status.conditions[0].reason}"),
                        None,
                        None,
                        Some("^Progress"),
                        None,
                    ),
                ),
                Some(
                    "Deployment default/web: {.status.conditions[0].reason} is \"NewReplicaSetAvailable\", which does not match /^Progress/",
                ),
            ),
            (
                exp(
                    Some(600),
                    object_check(
                        None,
                        None,
                        None,
                        None,
                        Some(progressing("False", "ProgressDeadlineExceeded")),
                    ),
                ),
                Some(
                    "Deployment default/web condition is Progressing=True (NewReplicaSetAvailable: ReplicaSet \"web-1\" has timed out progressing.), expected Progressing=False (ProgressDeadlineExceeded)",
                ),
            ),
            (
                exp(
                    Some(700),
                    object_check(
                        None,
                        None,
                        None,
                        None,
                        Some(progressing("False", "ProgressDeadlineExceeded")),
                    ),
                ),
                None,
            ),
            (
                exp(
                    Some(700),
                    object_check(
                        None,
                        None,
                        None,
                        None,
                        Some(ConditionSpec {
                            type_: "Available".into(),
                            status: "True".into(),
                            reason: None,
                            message: None,
                        }),
                    ),
                ),
                Some("Deployment default/web has no condition Available, expected Available=True"),
            ),
            (
                exp(Some(900), object_check(None, Some(false), None, None, None)),
                None,
            ),
        ];
        for (e, want) in table {
            let v = evaluate(
                &records,
                &lines,
                &[],
                &attr,
                std::slice::from_ref(&e),
                secs(1000),
                secs(1000),
            );
            let got = v.failures.first().map(|f| f.detail.as_str());
            assert_eq!(got, want, "{:?}", e.check);
        }
    }

    #[test]
    fn write_counts_come_from_the_request_log_in_the_window() {
        use crate::scenario::WriteFilter;
        let req = |t: u64, user: &str, verb: &'static str, sub: &str| RequestEntry {
            at: secs(t),
            user: user.into(),
            verb,
            resource: "nodes",
            subresource: sub.into(),
            namespace: None,
            name: Some("n1".into()),
            code: 200,
        };
        let requests = vec![
            req(10, "system:node:n1", "PATCH", "status"),
            req(20, "system:node:n1", "GET", ""),
            req(70, "system:node:n1", "PATCH", "status"),
            req(80, "system:kube-controller-manager", "PATCH", "status"),
            req(400, "system:node:n1", "PATCH", "status"),
        ];
        let writes = |count| Check::Writes {
            filter: WriteFilter {
                component: "kubelet".into(),
                verb: Some("PATCH".into()),
                resource: Some("nodes".into()),
                subresource: Some("status".into()),
                name: None,
            },
            count,
        };
        let mut windowed = exp(Some(300), writes(Count::AtMost(1)));
        windowed.from = Some(secs(5));
        let mut late = exp(Some(300), writes(Count::AtMost(1)));
        late.from = Some(secs(60));
        let at_least = exp(None, writes(Count::AtLeast(3)));
        let v = evaluate(
            &[],
            &[],
            &requests,
            &Attribution::default(),
            &[windowed, late, at_least],
            secs(600),
            secs(600),
        );
        assert_eq!(v.passed, 2);
        let details: Vec<&str> = v.failures.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "2 writes by kubelet between 5.000s and 300.000s, expected at most 1: [10.000s system:node:n1 PATCH nodes/status n1 200, 70.000s system:node:n1 PATCH nodes/status n1 200]"
            ]
        );
    }

    #[test]
    fn node_conditions_can_name_their_reason_and_message() {
        let cond = |reason: &str, message: Option<&str>| Check::Node {
            name: "n1".into(),
            exists: None,
            status: None,
            condition: Some(ConditionSpec {
                type_: "Ready".into(),
                status: "Unknown".into(),
                reason: Some(reason.into()),
                message: message.map(Into::into),
            }),
            has_taints: vec![],
            no_taints: vec![],
        };
        let mut node = history();
        if let Change::Node { view: Some(v), .. } = &mut node[3].change {
            v.conditions.insert(
                "Ready".into(),
                (
                    "Unknown".into(),
                    "NodeStatusUnknown".into(),
                    "Kubelet stopped posting node status.".into(),
                ),
            );
        }
        let attr = Attribution::default();
        let lines = replay(&node, &attr);
        let check = |c: Check| {
            let v = evaluate(
                &node,
                &lines,
                &[],
                &attr,
                &[exp(Some(60), c)],
                secs(600),
                secs(600),
            );
            v.failures.first().map(|f| f.detail.clone())
        };
        assert_eq!(
            check(cond(
                "NodeStatusUnknown",
                Some("Kubelet stopped posting node status.")
            )),
            None
        );
        assert_eq!(
            check(cond("KubeletNotReady", None)),
            Some("node n1 condition is Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.), expected Ready=Unknown (KubeletNotReady)".into())
        );
    }

    #[test]
    fn trace_checks_use_a_time_window_and_skips_after_the_end() {
        let substr = |s: &str, present| Check::Trace {
            pattern: Pattern::Substring(s.into()),
            present,
        };
        let mut windowed = exp(Some(60), substr("STATUS NotReady", true));
        windowed.from = Some(secs(50));
        let mut too_early = exp(Some(60), substr("STATUS NotReady", true));
        too_early.from = Some(secs(56));
        let regex = exp(
            None,
            Check::Trace {
                pattern: Pattern::Regex(
                    regex::Regex::new(r"^360\.000s .* Pod default/a .*Terminating").unwrap(),
                ),
                present: true,
            },
        );
        let absent = exp(None, substr("Pod default/b deleted", false));
        let absent_fails = exp(None, substr("Terminating", false));
        let v = run(&[windowed, too_early, regex, absent, absent_fails], 600);
        assert_eq!(v.passed, 3);
        assert_eq!(v.skipped, 0);
        let details: Vec<&str> = v.failures.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(
            details,
            vec![
                "no trace line matching \"STATUS NotReady\" between 56.000s and 60.000s",
                "unexpected trace line matching \"Terminating\": 360.000s kubelet Pod default/a 1/1 Terminating 0 n1",
            ]
        );
        // After a run shortened with --until, later expectations are skipped, not failed.
        let v = run(
            &[
                exp(Some(500), node_check("n1", None)),
                exp(None, node_check("n1", None)),
            ],
            400,
        );
        assert_eq!((v.passed, v.skipped, v.failures.len()), (0, 2, 0));
    }
}
