//! Table tests of metrics-server's decoding and two-point storage.

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn ms_of(secs: i64) -> i64 {
    t(secs).as_millisecond()
}

/// A kubelet's `/metrics/resource` at `at`: one node and the given containers
/// (namespace, pod, container, cumulative CPU seconds, memory, start).
fn page(at: i64, node_cpu: f64, node_mem: u64, cs: &[(&str, &str, &str, f64, u64, i64)]) -> String {
    let ts = ms_of(at);
    let mut s = String::from(
        "# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds\n# TYPE container_cpu_usage_seconds_total counter\n",
    );
    for (ns, pod, c, cpu, _, _) in cs {
        s.push_str(&format!(
            "container_cpu_usage_seconds_total{{container=\"{c}\",namespace=\"{ns}\",pod=\"{pod}\"}} {cpu} {ts}\n"
        ));
    }
    for (ns, pod, c, _, mem, _) in cs {
        s.push_str(&format!(
            "container_memory_working_set_bytes{{container=\"{c}\",namespace=\"{ns}\",pod=\"{pod}\"}} {mem} {ts}\n"
        ));
    }
    for (ns, pod, c, _, _, start) in cs {
        s.push_str(&format!(
            "container_start_time_seconds{{container=\"{c}\",namespace=\"{ns}\",pod=\"{pod}\"}} {} {}\n",
            t(*start).as_second(),
            ms_of(*start)
        ));
    }
    s.push_str(&format!(
        "node_cpu_usage_seconds_total {node_cpu} {ts}\nnode_memory_working_set_bytes {node_mem} {ts}\nresource_scrape_error 0\n"
    ));
    s
}

#[test]
fn series_lines_parse_as_prometheus_text() {
    let s = parse_series(r#"container_cpu_usage_seconds_total{container="a",namespace="n\"s",pod="p"} 1.5e+01 1700000000123"#).unwrap();
    assert_eq!(s.name, "container_cpu_usage_seconds_total");
    assert_eq!(s.label("namespace"), "n\"s");
    assert_eq!(s.label("pod"), "p");
    assert_eq!(s.value, 15.0);
    assert_eq!(s.timestamp_ms, Some(1_700_000_000_123));
    let s = parse_series(r#"x{a="",b="l1\nl2",c="plain"} 1"#).unwrap();
    assert_eq!(s.label("a"), "");
    assert_eq!(s.label("b"), "l1\nl2");
    assert_eq!(s.label("c"), "plain");
    assert_eq!(s.label("missing"), "");
    assert!(
        matches!(s.labels[2].1, Cow::Borrowed(_)),
        "no copy without escapes"
    );
    let s = parse_series(r#"x{ a ="1" , a="2",b="x\\y\"z"} 3"#).unwrap();
    assert_eq!(
        (s.label("a"), s.label("b")),
        ("2", "x\\y\"z"),
        "the last of a repeated label"
    );
    let s = parse_series("resource_scrape_error 0").unwrap();
    assert!(s.labels.is_empty());
    assert_eq!(s.timestamp_ms, None);
    for bad in [
        "# HELP x y",
        "",
        "x{a=\"b\" 1",
        "x{a=b} 1",
        "x notanumber",
        "x 1 notatime",
    ] {
        assert_eq!(parse_series(bad), None, "{bad:?}");
    }
}

#[test]
fn decode_keeps_complete_points_only() {
    let text = page(
        30,
        12.5,
        300 << 20,
        &[
            ("default", "web", "app", 2.5, 100 << 20, 0),
            ("default", "web", "sidecar", 0.5, 10 << 20, 0),
            // A container with no CPU used drops its whole pod, as upstream's decoder does.
            ("default", "idle", "app", 0.0, 10 << 20, 0),
            ("default", "idle", "other", 1.0, 10 << 20, 0),
            ("kube-system", "nomem", "c", 1.0, 0, 0),
        ],
    );
    let b = decode(&text, "n1", t(999));
    assert_eq!(
        b.nodes["n1"],
        Point {
            start: None,
            timestamp: t(30),
            cpu_ns: 12_500_000_000,
            memory: 300 << 20
        }
    );
    assert_eq!(
        b.pods.keys().cloned().collect::<Vec<_>>(),
        vec![("default".to_string(), "web".to_string())]
    );
    let web = &b.pods[&("default".to_string(), "web".to_string())];
    assert_eq!(web["app"].cpu_ns, 2_500_000_000);
    assert_eq!(web["app"].memory, 100 << 20);
    assert_eq!(web["app"].start, Some(t(0)));
    assert_eq!(web["sidecar"].timestamp, t(30));

    // A node reporting no memory (or no CPU) is incomplete: no node point.
    let b = decode(&page(30, 1.0, 0, &[]), "n1", t(30));
    assert!(b.nodes.is_empty());
    let b = decode(&page(30, 0.0, 5, &[]), "n1", t(30));
    assert!(b.nodes.is_empty());
    // Samples without a timestamp take the scrape's time.
    let b = decode(
        "node_cpu_usage_seconds_total 3\nnode_memory_working_set_bytes 4\n",
        "n2",
        t(7),
    );
    assert_eq!(b.nodes["n2"].timestamp, t(7));
    // Garbage is ignored, never a panic.
    let b = decode(
        "\u{0}{{{\n}}} 1 2 3\nnode_cpu_usage_seconds_total -5 1\n",
        "n",
        t(0),
    );
    assert!(b.nodes.is_empty());
}

fn batch(texts: &[(&str, String)]) -> Batch {
    let mut b = Batch::default();
    for (node, text) in texts {
        b.merge(decode(text, node, t(0)));
    }
    b
}

const RES: Duration = DEFAULT_METRIC_RESOLUTION;

#[test]
fn cpu_is_a_rate_over_two_scrapes() {
    let mut s = Storage::default();
    // 250m of CPU: 0.25 core-seconds per second; the container started at 0.
    let c = |at: i64| ("default", "web", "app", 0.25 * at as f64, 64u64 << 20, 0i64);
    s.store(batch(&[("n1", page(60, 60.0, 1 << 30, &[c(60)]))]), RES);
    assert_eq!(s.node("n1"), None, "one point is not a rate");
    assert_eq!(s.pod("default", "web"), None);
    assert!(!s.ready());
    s.store(batch(&[("n1", page(75, 75.0, 1 << 30, &[c(75)]))]), RES);
    assert!(s.ready());
    assert_eq!(
        s.node("n1"),
        Some(NodeUsage {
            timestamp: t(75),
            window: Duration::from_secs(15),
            usage: Usage {
                cpu_nanocores: 1_000_000_000,
                memory_bytes: 1 << 30
            }
        })
    );
    let p = s.pod("default", "web").unwrap();
    assert_eq!(p.timestamp, t(75));
    assert_eq!(p.window, Duration::from_secs(15));
    assert_eq!(
        p.containers,
        vec![(
            "app".to_string(),
            Usage {
                cpu_nanocores: 250_000_000,
                memory_bytes: 64 << 20
            }
        )]
    );
    // The same sample again (a kubelet that did not move on) keeps the previous point.
    s.store(batch(&[("n1", page(75, 75.0, 1 << 30, &[c(75)]))]), RES);
    assert_eq!(s.node("n1").unwrap().window, Duration::from_secs(15));
    assert!(s.pod("default", "web").is_some());
}

#[test]
fn a_node_that_does_not_answer_is_forgotten() {
    let mut s = Storage::default();
    let c = |at: i64| ("default", "web", "app", 0.1 * at as f64, 1u64 << 20, 0i64);
    for at in [15, 30] {
        s.store(
            batch(&[
                ("n1", page(at, at as f64, 1 << 30, &[c(at)])),
                ("n2", page(at, at as f64, 1 << 30, &[])),
            ]),
            RES,
        );
    }
    assert!(s.node("n1").is_some() && s.node("n2").is_some());
    // n1 misses one scrape: its node and pods are gone at once …
    s.store(batch(&[("n2", page(45, 45.0, 1 << 30, &[]))]), RES);
    assert_eq!(s.node("n1"), None);
    assert_eq!(s.pod("default", "web"), None);
    assert!(s.node("n2").is_some());
    // … and it needs two answers to have a rate again.
    s.store(batch(&[("n1", page(60, 60.0, 1 << 30, &[c(60)]))]), RES);
    assert_eq!(s.node("n1"), None);
    s.store(batch(&[("n1", page(75, 75.0, 1 << 30, &[c(75)]))]), RES);
    assert!(s.node("n1").is_some());
    assert!(s.pod("default", "web").is_some());
}

#[test]
fn restarts_and_young_containers() {
    let mut s = Storage::default();
    s.store(
        batch(&[(
            "n1",
            page(30, 30.0, 1 << 30, &[("d", "p", "app", 3.0, 1 << 20, 0)]),
        )]),
        RES,
    );
    // Restarted at 40: the new instance's counter starts again; the old point cannot be used.
    s.store(
        batch(&[(
            "n1",
            page(45, 45.0, 1 << 30, &[("d", "p", "app", 0.5, 1 << 20, 40)]),
        )]),
        RES,
    );
    assert_eq!(
        s.pod("d", "p"),
        None,
        "5 s old: too young for a first point"
    );
    // Started 12 s before the scrape (between 10 s and the resolution): its start is a first
    // point with no CPU, so one scrape is enough.
    let mut s = Storage::default();
    s.store(
        batch(&[(
            "n1",
            page(52, 52.0, 1 << 30, &[("d", "p", "app", 1.2, 1 << 20, 40)]),
        )]),
        RES,
    );
    let p = s.pod("d", "p").unwrap();
    assert_eq!(p.window, Duration::from_secs(12));
    assert_eq!(p.containers[0].1.cpu_nanocores, 100_000_000);
    // A counter going down (an impossible sample) gives no usage for that container.
    let last = Point {
        start: None,
        timestamp: t(30),
        cpu_ns: 5,
        memory: 1,
    };
    let prev = Point {
        cpu_ns: 6,
        timestamp: t(15),
        ..last
    };
    assert_eq!(resource_usage(&last, &prev), None);
    assert_eq!(resource_usage(&last, &last), None, "no time passed");
    // A quarter of a core over a window whose float division rounds below the exact value
    // (3 521 250 000 ns / 14.085 s is 249 999 999.99999997 in float64): exactly 250m.
    let prev = Point {
        start: None,
        timestamp: t(15),
        cpu_ns: 1_000,
        memory: 1,
    };
    let last = Point {
        timestamp: t(15) + jiff::SignedDuration::from_millis(14_085),
        cpu_ns: 1_000 + 3_521_250_000,
        ..prev
    };
    let (u, _, window) = resource_usage(&last, &prev).unwrap();
    assert_eq!(window, Duration::from_millis(14_085));
    assert_eq!(u.cpu_nanocores, 250_000_000);
    // A counter that grew by more than fits a u64 of nanocores over 1 ns saturates.
    let last = Point {
        timestamp: t(15) + jiff::SignedDuration::from_nanos(1),
        cpu_ns: u64::MAX,
        ..prev
    };
    assert_eq!(
        resource_usage(&last, &prev).unwrap().0.cpu_nanocores,
        u64::MAX
    );
}

#[test]
fn a_pod_waits_for_all_its_containers() {
    let mut s = Storage::default();
    s.store(
        batch(&[(
            "n1",
            page(30, 30.0, 1 << 30, &[("d", "p", "a", 3.0, 1 << 20, 0)]),
        )]),
        RES,
    );
    // A second container appears (started long ago per its start time, but unseen before).
    s.store(
        batch(&[(
            "n1",
            page(
                45,
                45.0,
                1 << 30,
                &[
                    ("d", "p", "a", 4.5, 1 << 20, 0),
                    ("d", "p", "b", 9.0, 2 << 20, 0),
                ],
            ),
        )]),
        RES,
    );
    assert_eq!(s.pod("d", "p"), None);
    s.store(
        batch(&[(
            "n1",
            page(
                60,
                60.0,
                1 << 30,
                &[
                    ("d", "p", "a", 6.0, 1 << 20, 0),
                    ("d", "p", "b", 10.5, 2 << 20, 0),
                ],
            ),
        )]),
        RES,
    );
    let p = s.pod("d", "p").unwrap();
    let names: Vec<&str> = p.containers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(p.containers[1].1.cpu_nanocores, 100_000_000);
    assert_eq!(p.containers[1].1.memory_bytes, 2 << 20);
}

#[test]
fn scrape_timeout_is_ninety_percent_of_the_resolution() {
    assert_eq!(
        MetricsServerConfig::default().scrape_timeout(),
        Duration::from_millis(13_500)
    );
}

/// A pod's container points are kept in name order, one per name, the last one set winning,
/// in a vector no larger than its contents.
#[test]
fn container_points_keep_name_order_and_their_size() {
    let point = |cpu_ns| Point {
        start: None,
        timestamp: t(0),
        cpu_ns,
        memory: 1,
    };
    let mut c = ContainerPoints::default();
    assert!(c.is_empty());
    for (name, cpu) in [("web", 1), ("app", 2), ("sidecar", 3), ("app", 4)] {
        c.insert(name.to_string(), point(cpu));
    }
    let got: Vec<(&str, u64)> = c.iter().map(|(n, p)| (n.as_str(), p.cpu_ns)).collect();
    assert_eq!(got, [("app", 4), ("sidecar", 3), ("web", 1)]);
    assert_eq!(c.get("sidecar"), Some(&point(3)));
    assert_eq!(c.get("db"), None);
    assert_eq!(c.0.capacity(), 3);
}

#[test]
fn scrapes_are_staggered_over_8_ms_per_node_up_to_4_s() {
    for (nodes, ms) in [
        (0, 0),
        (1, 8),
        (3, 24),
        (499, 3992),
        (500, 4000),
        (5000, 4000),
        (usize::MAX, 4000),
    ] {
        assert_eq!(stagger_window(nodes), Duration::from_millis(ms), "{nodes}");
    }
}

#[test]
fn a_nodes_request_ends_at_the_scrape_timeout_or_the_ticks_end() {
    let c = MetricsServerConfig::default();
    // 15 s resolution: 13.5 s for a request that starts at once or up to 1.5 s late, then
    // whatever is left of the 15 s.
    for (stagger, want) in [(0, 13_500), (1_500, 13_500), (3_999, 11_001)] {
        assert_eq!(
            c.node_timeout(Duration::from_millis(stagger)),
            Duration::from_millis(want),
            "{stagger}"
        );
    }
    let short = MetricsServerConfig {
        metric_resolution: Duration::from_secs(2),
    };
    assert_eq!(short.node_timeout(Duration::from_secs(3)), Duration::ZERO);
}

#[test]
fn a_scrape_plan_staggers_each_node_below_the_window_and_bounds_its_request() {
    let c = MetricsServerConfig::default();
    // 1 000 nodes: a 4 s window; the draws are used as given (clamped below the window).
    let mut draws = [0u64, 1_499, 3_999, 10_000].into_iter().cycle();
    let plan = scrape_plan(&c, 1000, |window| {
        assert_eq!(window, 4000);
        draws.next().unwrap()
    });
    assert_eq!(plan.len(), 1000);
    let ms = Duration::from_millis;
    assert_eq!(plan[0], (ms(0), ms(13_500)));
    assert_eq!(plan[1], (ms(1_499), ms(13_500)));
    assert_eq!(plan[2], (ms(3_999), ms(11_001)));
    assert_eq!(
        plan[3],
        (ms(3_999), ms(11_001)),
        "a draw past the window is clamped"
    );
    // Two nodes: a 16 ms window. No nodes: no draw at all.
    assert!(
        scrape_plan(&c, 2, |w| w - 1)
            .iter()
            .all(|p| *p == (ms(15), ms(13_500)))
    );
    assert!(scrape_plan(&c, 0, |_| unreachable!("no draw")).is_empty());
}
