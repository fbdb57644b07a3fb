//! `klab sim --report FILE.html`: one self-contained HTML page (no network, no script) with an
//! SVG timeline drawn from the recorded history — a swim lane per node (Ready / NotReady /
//! Unknown, taints) and per pod (Pending, ContainerCreating, Running, Terminating, finished,
//! gone), Events as markers, evictions linked to their replacements, the scenario's steps, the
//! expectations as pass/fail marks and the summary. Hovering (`<title>`) shows the trace lines.
//! A pure function of the scenario and the run's outcome.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use klab_api::clock::format_elapsed;

use crate::runner::RunOutcome;
use crate::scenario::Scenario;
use crate::trace::{Change, TraceLine};

const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 1100.0;
const LANE_H: f64 = 20.0;
const BAR_H: f64 = 12.0;

/// One stretch of a lane in one state.
#[derive(Debug, Clone, PartialEq)]
struct Segment {
    from: Duration,
    to: Option<Duration>,
    state: &'static str,
    /// The node's taints (node lanes) or the pod's node (pod lanes), for the hover text.
    detail: String,
}

#[derive(Debug, Default)]
struct Lane {
    segments: Vec<Segment>,
    /// Event markers: time, Warning?, text.
    events: Vec<(Duration, bool, String)>,
    /// Pods: when it was created and when its deletion was requested, and its owner.
    created: Duration,
    deleting_at: Option<Duration>,
    owner: Option<(crate::trace::Sym, crate::trace::Sym)>,
}

impl Lane {
    fn set(&mut self, t: Duration, state: &'static str, detail: String) {
        if let Some(last) = self.segments.last_mut() {
            if last.to.is_none() && last.state == state && last.detail == detail {
                return;
            }
            // Several changes within one instant: only the last state of the instant is drawn.
            if last.to.is_none() && last.from == t {
                self.segments.pop();
                if let Some(prev) = self.segments.last_mut()
                    && prev.to == Some(t)
                    && prev.state == state
                    && prev.detail == detail
                {
                    prev.to = None; // the instant's changes came back to where they started
                    return;
                }
                return self.set(t, state, detail);
            }
            if last.to.is_none() {
                last.to = Some(t);
            }
        }
        self.segments.push(Segment {
            from: t,
            to: None,
            state,
            detail,
        });
    }

    fn end(&mut self, t: Duration) {
        if let Some(last) = self.segments.last_mut()
            && last.to.is_none()
        {
            last.to = Some(t);
        }
    }
}

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn node_state(status: &str, ready: Option<&str>) -> &'static str {
    match ready {
        _ if status.starts_with("Ready") => "Ready",
        Some("Unknown") => "Unknown",
        _ => "NotReady",
    }
}

fn pod_state(status: &str, deleting: bool) -> &'static str {
    if deleting {
        return "Terminating";
    }
    match status {
        "Pending" => "Pending",
        "ContainerCreating" | "PodInitializing" => "ContainerCreating",
        "Running" => "Running",
        s if s.starts_with("Init:") => "ContainerCreating",
        "Completed" | "Succeeded" => "Succeeded",
        _ => "Failed",
    }
}

const COLORS: &[(&str, &str)] = &[
    ("Ready", "#3a9a4a"),
    ("NotReady", "#d0453a"),
    ("Unknown", "#e08a2c"),
    ("Pending", "#9aa3ad"),
    ("ContainerCreating", "#6a8fd0"),
    ("Running", "#3a9a4a"),
    ("Terminating", "#8a4fb0"),
    ("Succeeded", "#2f6f80"),
    ("Failed", "#b03a5a"),
];

fn color(state: &str) -> &'static str {
    COLORS
        .iter()
        .find(|(s, _)| *s == state)
        .map_or("#999", |(_, c)| c)
}

/// Builds the HTML page.
pub fn html(sc: &Scenario, o: &RunOutcome) -> String {
    let end = o.end.max(Duration::from_millis(1));
    let x = |t: Duration| LABEL_W + PLOT_W * (t.as_secs_f64() / end.as_secs_f64()).min(1.0);

    let mut nodes: BTreeMap<String, Lane> = BTreeMap::new();
    let mut pods: BTreeMap<(String, String), Lane> = BTreeMap::new();
    let mut pod_order: Vec<(String, String)> = Vec::new();
    let mut actions: Vec<(Duration, String)> = Vec::new();
    for r in &o.records {
        match &r.change {
            Change::Node { name, view } => {
                let lane = nodes.entry(name.clone()).or_default();
                match view {
                    Some(v) => {
                        let ready = v.conditions.get("Ready").map(|c| c.0.as_str());
                        let taints: Vec<&str> = v.taints.iter().map(String::as_str).collect();
                        lane.set(r.t, node_state(&v.status, ready), taints.join(", "));
                    }
                    None => lane.end(r.t),
                }
            }
            Change::Pod {
                namespace,
                name,
                view,
            } => {
                let key = (namespace.clone(), name.clone());
                if !pods.contains_key(&key) {
                    pod_order.push(key.clone());
                }
                let lane = pods.entry(key).or_insert_with(|| Lane {
                    created: r.t,
                    ..Lane::default()
                });
                match view {
                    Some(v) => {
                        if v.deleting && lane.deleting_at.is_none() {
                            lane.deleting_at = Some(r.t);
                        }
                        if lane.owner.is_none() {
                            lane.owner = v.owner.clone();
                        }
                        let node = if v.node.is_empty() {
                            "unscheduled".to_string()
                        } else {
                            format!("on {}", v.node)
                        };
                        lane.set(r.t, pod_state(&v.status, v.deleting), node);
                    }
                    None => lane.end(r.t),
                }
            }
            Change::Event(e) => {
                let warning = e.type_ == "Warning";
                let text = format!(
                    "{} {} {} {}: {}",
                    format_elapsed(r.t),
                    e.component,
                    e.type_,
                    e.reason,
                    e.message
                );
                if let Some(n) = e.object.strip_prefix("Node ") {
                    nodes
                        .entry(n.to_string())
                        .or_default()
                        .events
                        .push((r.t, warning, text));
                } else if let Some((ns, name)) = e
                    .object
                    .strip_prefix("Pod ")
                    .and_then(|p| p.split_once('/'))
                    && let Some(l) = pods.get_mut(&(ns.to_string(), name.to_string()))
                {
                    l.events.push((r.t, warning, text));
                }
            }
            Change::Action(text) => actions.push((r.t, text.clone())),
            _ => {}
        }
    }

    // Trace lines per object, for the hover text of segments and markers.
    let mut lines_of: BTreeMap<&str, Vec<&TraceLine>> = BTreeMap::new();
    for l in &o.lines {
        lines_of.entry(l.object.as_str()).or_default().push(l);
    }
    let hover = |object: &str, from: Duration, to: Option<Duration>| -> String {
        let mut s = String::new();
        for l in lines_of.get(object).into_iter().flatten() {
            if l.t >= from && to.is_none_or(|t| l.t < t) {
                let _ = writeln!(s, "{}", l.plain());
                if s.len() > 1500 {
                    s.push_str("…\n");
                    break;
                }
            }
        }
        s
    };

    let lanes = nodes.len().saturating_add(pods.len());
    let top = 60.0;
    let height = top + LANE_H * (lanes as f64 + 3.0);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
        LABEL_W + PLOT_W + 20.0
    );
    // Time axis: about ten ticks at a round step.
    let step = [1u64, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600]
        .into_iter()
        .find(|s| end.as_secs() / s <= 12)
        .unwrap_or(7200);
    let mut t = 0u64;
    while t <= end.as_secs() {
        let xx = x(Duration::from_secs(t));
        let _ = writeln!(
            svg,
            r##"<line class="tick" x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{height}" stroke="#e4e4e4"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}s</text>"##,
            top - 8.0,
            top - 12.0,
            t
        );
        t = t.saturating_add(step);
    }
    // Scenario steps: dashed verticals.
    for (t, text) in &actions {
        let xx = x(*t);
        let _ = writeln!(
            svg,
            r##"<g class="action"><line x1="{xx:.1}" y1="14" x2="{xx:.1}" y2="{height}" stroke="#444" stroke-dasharray="4 3"/><text x="{:.1}" y="12">{}</text><title>{} {}</title></g>"##,
            xx + 3.0,
            esc(text),
            format_elapsed(*t),
            esc(text)
        );
    }
    // Expectations: one mark each at the instant it was checked.
    let failed: BTreeMap<u64, &crate::expect::Failure> =
        o.verdict.failures.iter().map(|f| (f.line, f)).collect();
    let ey = top - 30.0;
    for e in &sc.expectations {
        let at = e.at.unwrap_or(sc.run_for);
        let (class, mark, fill, detail) = if let Some(f) = failed.get(&e.line) {
            ("expect fail", "✗", "#c0392b", format!(": {}", f.detail))
        } else if at > o.end {
            (
                "expect skipped",
                "–",
                "#999",
                " (skipped: after the end of the run)".into(),
            )
        } else {
            ("expect pass", "✓", "#2e8b57", String::new())
        };
        let _ = writeln!(
            svg,
            r#"<g class="{class}"><text x="{:.1}" y="{ey}" fill="{fill}" font-size="14" text-anchor="middle">{mark}</text><title>{} line {}: {}{}</title></g>"#,
            x(at.min(o.end)),
            format_elapsed(at),
            e.line,
            esc(&e.text),
            esc(&detail)
        );
    }

    let mut y = top;
    let mut lane_y: BTreeMap<(String, String), f64> = BTreeMap::new();
    let draw_lane = |svg: &mut String,
                     class: &str,
                     label: &str,
                     object: &str,
                     lane: &Lane,
                     y: f64| {
        let _ = writeln!(
            svg,
            r#"<g class="lane {class}" data-object="{}"><text x="4" y="{:.1}">{}</text>"#,
            esc(object),
            y + BAR_H - 2.0,
            esc(label)
        );
        for s in &lane.segments {
            let (x1, x2) = (x(s.from), x(s.to.unwrap_or(o.end)));
            let w = (x2 - x1).max(1.0);
            let _ = writeln!(
                svg,
                r#"<rect class="seg {}" x="{x1:.1}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="{}"><title>{} {} {}–{} {}
{}</title></rect>"#,
                s.state,
                color(s.state),
                esc(object),
                s.state,
                format_elapsed(s.from),
                s.to.map(format_elapsed).unwrap_or_else(|| "end".into()),
                esc(&s.detail),
                esc(&hover(object, s.from, s.to))
            );
            if class == "node" && !s.detail.is_empty() {
                // Taints: a hatch line under the bar.
                let _ = writeln!(
                    svg,
                    r##"<rect class="taint" x="{x1:.1}" y="{:.1}" width="{w:.1}" height="3" fill="#222"><title>taints: {}</title></rect>"##,
                    y + BAR_H + 1.0,
                    esc(&s.detail)
                );
            }
        }
        for (t, warning, text) in &lane.events {
            let _ = writeln!(
                svg,
                r##"<circle class="event{}" cx="{:.1}" cy="{:.1}" r="3" fill="{}" stroke="#fff"><title>{}</title></circle>"##,
                if *warning { " warning" } else { "" },
                x(*t),
                y + BAR_H / 2.0,
                if *warning { "#ffcc00" } else { "#ffffff" },
                esc(text)
            );
        }
        let _ = writeln!(svg, "</g>");
    };
    for (name, lane) in &nodes {
        draw_lane(
            &mut svg,
            "node",
            &format!("Node {name}"),
            &format!("Node {name}"),
            lane,
            y,
        );
        y += LANE_H;
    }
    y += LANE_H / 2.0;
    for key in &pod_order {
        let lane = &pods[key];
        let object = format!("Pod {}/{}", key.0, key.1);
        draw_lane(&mut svg, "pod", &object, &object, lane, y);
        lane_y.insert(key.clone(), y);
        y += LANE_H;
    }
    // Evictions linked to replacements: the first pod of the same owner created at or after the
    // deletion was requested.
    for key in &pod_order {
        let lane = &pods[key];
        let (Some(del), Some(owner)) = (lane.deleting_at, lane.owner.as_ref()) else {
            continue;
        };
        let replacement = pod_order.iter().find(|k| {
            *k != key
                && k.0 == key.0
                && pods[*k].owner.as_ref() == Some(owner)
                && pods[*k].created >= del
        });
        if let Some(r) = replacement {
            let (y1, y2) = (lane_y[key] + BAR_H / 2.0, lane_y[r] + BAR_H / 2.0);
            let _ = writeln!(
                svg,
                r##"<path class="link" d="M{:.1},{y1:.1} C{:.1},{y1:.1} {:.1},{y2:.1} {:.1},{y2:.1}" fill="none" stroke="#8a4fb0" stroke-width="1.5" marker-end="url(#arrow)"><title>{}/{} replaced by {}/{} ({} {})</title></path>"##,
                x(del),
                x(del) + 20.0,
                x(pods[r].created) - 20.0,
                x(pods[r].created),
                esc(&key.0),
                esc(&key.1),
                esc(&r.0),
                esc(&r.1),
                esc(&owner.0),
                esc(&owner.1)
            );
        }
    }
    let _ = writeln!(
        svg,
        r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#8a4fb0"/></marker></defs>"##
    );
    svg.push_str("</svg>\n");

    let legend: String = COLORS
        .iter()
        .map(|(s, c)| {
            format!(
                r#"<span class="key"><span class="sw" style="background:{c}"></span>{s}</span>"#
            )
        })
        .collect();
    let v = &o.verdict;
    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>klab sim — {name}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #222; }}
.key {{ margin-right: 12px; white-space: nowrap; }}
.sw {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
pre {{ background: #f6f6f6; padding: 8px; overflow-x: auto; }}
.scroll {{ overflow-x: auto; border: 1px solid #ddd; }}
</style></head>
<body>
<h1>{name}</h1>
<p id="description">{description}</p>
<p id="verdict">seed {seed}, run for {end}: expectations {passed} passed, {failed} failed, {skipped} skipped; trace hash {hash:016x}</p>
<p id="legend">{legend} <span class="key">▁ taints</span> <span class="key">○ Event</span> <span class="key">● Warning</span> <span class="key">✓/✗ expectation</span></p>
<div class="scroll">
{svg}</div>
<h2>Summary</h2>
<pre id="summary">{summary}</pre>
</body></html>
"#,
        name = esc(&sc.name),
        description = esc(&sc.description),
        seed = o.seed,
        end = format_elapsed(o.end),
        passed = v.passed,
        failed = v.failures.len(),
        skipped = v.skipped,
        hash = o.trace_hash(),
        summary = esc(&o.summary),
    );
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_escaping() {
        assert_eq!(
            node_state("Ready,SchedulingDisabled", Some("True")),
            "Ready"
        );
        assert_eq!(node_state("NotReady", Some("Unknown")), "Unknown");
        assert_eq!(node_state("NotReady", Some("False")), "NotReady");
        assert_eq!(pod_state("Running", true), "Terminating");
        assert_eq!(pod_state("Init:0/1", false), "ContainerCreating");
        assert_eq!(pod_state("Evicted", false), "Failed");
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    /// The headline failover: lanes, states, the eviction link, markers, expectations, summary.
    #[test]
    fn report_of_the_power_off_scenario() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/node/power-off-over-5m.yaml");
        let sc = crate::scenario::load(&path).unwrap();
        let o = crate::run_blocking(&sc, &crate::RunOptions::default()).unwrap();
        let page = html(&sc, &o);
        // Self-contained: no scripts, no fetched resources.
        for banned in ["<script", "src=", "href=\"http", "@import", "url(http"] {
            assert!(!page.contains(banned), "{banned}");
        }
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<h1>node-power-off-over-5m</h1>"));
        // One lane per node, one per pod.
        for n in ["n1", "n2", "n3"] {
            assert!(
                page.contains(&format!(r#"<g class="lane node" data-object="Node {n}">"#)),
                "{n}"
            );
        }
        let pod_lanes = page.matches(r#"<g class="lane pod""#).count();
        assert_eq!(pod_lanes, 4, "three pods and one replacement");
        // n2 goes Unknown (the node lifecycle controller's NotReady) and back to Ready.
        let n2 = &page[page.find(r#"data-object="Node n2""#).unwrap()..];
        let n2 = &n2[..n2.find("</g>").unwrap()];
        let mut states: Vec<&str> = n2
            .split(r#"class="seg "#)
            .skip(1)
            .map(|s| &s[..s.find('"').unwrap()])
            .collect();
        states.dedup();
        assert_eq!(states, ["Ready", "Unknown", "Ready"], "{n2}");
        assert!(
            !n2.contains(r#"width="1.0""#),
            "no zero-length stretch: {n2}"
        );
        assert!(
            n2.contains("taints: node.kubernetes.io/unreachable:NoExecute"),
            "{n2}"
        );
        // The evicted pod is Terminating and linked to its replacement.
        assert!(page.contains(r#"class="seg Terminating""#));
        assert_eq!(page.matches(r#"<path class="link""#).count(), 1);
        assert!(page.contains("replaced by default/nginx-"));
        // Hover shows the trace lines.
        assert!(page.contains("taint-eviction-controller Pod default/nginx-"));
        // Markers: Events and the two scenario steps.
        assert!(page.matches(r#"<circle class="event"#).count() > 10);
        assert_eq!(page.matches(r#"<g class="action">"#).count(), 2);
        // Every expectation has its mark, all passed.
        assert_eq!(
            page.matches(r#"<g class="expect pass">"#).count(),
            sc.expectations.len()
        );
        assert!(page.contains("expectations 12 passed, 0 failed, 0 skipped"));
        assert!(page.contains(r#"<pre id="summary">Summary at 480.000s:"#));
        // Deterministic: the same run gives the same page.
        let again = crate::run_blocking(&sc, &crate::RunOptions::default()).unwrap();
        assert_eq!(html(&sc, &again), page);
    }

    #[test]
    fn a_lane_merges_unchanged_states() {
        let mut l = Lane::default();
        l.set(Duration::from_secs(0), "Pending", "unscheduled".into());
        l.set(Duration::from_secs(1), "Pending", "unscheduled".into());
        l.set(Duration::from_secs(2), "Running", "on n1".into());
        // A flicker within one instant leaves nothing behind.
        l.set(Duration::from_secs(5), "Failed", "on n1".into());
        l.set(Duration::from_secs(5), "Running", "on n1".into());
        l.set(Duration::from_secs(9), "Terminating", "on n1".into());
        l.set(Duration::from_secs(9), "Failed", "on n1".into());
        l.end(Duration::from_secs(9));
        assert_eq!(l.segments.len(), 3);
        assert_eq!(l.segments[2].state, "Failed");
        assert_eq!(l.segments[0].to, Some(Duration::from_secs(2)));
        assert_eq!(l.segments[1].to, Some(Duration::from_secs(9)));
        assert_eq!(l.segments[2].to, Some(Duration::from_secs(9)));
    }
}
