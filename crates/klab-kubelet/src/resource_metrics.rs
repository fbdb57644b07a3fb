//! The kubelet's `/metrics/resource` (the resource metrics endpoint metrics-server scrapes):
//! upstream's stable families — `container_cpu_usage_seconds_total`,
//! `container_memory_working_set_bytes`, `container_start_time_seconds`,
//! `node_cpu_usage_seconds_total`, `node_memory_working_set_bytes`, `pod_cpu_usage_seconds_total`,
//! `pod_memory_working_set_bytes`, `resource_scrape_error` (and the deprecated `scrape_error`) —
//! rendered from the machine's usage model in Prometheus text format with Go's float formatting
//! and a sample timestamp in milliseconds, as the kubelet writes them; and `/stats/summary`
//! (the Summary API, `stats/v1alpha1`) from the same samples.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::Timestamp;
use klab_api::prom_text::push_float;

use crate::runtime::{Machine, RtState};

/// One running container's sample.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerSample {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    /// Cumulative CPU of the instance, nanoseconds.
    pub cpu_ns: u64,
    /// Working set, bytes.
    pub memory: u64,
    pub started_at: Timestamp,
}

/// The node's and its running containers' samples at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Samples {
    pub at: Timestamp,
    /// Cumulative CPU of every container instance the machine ran and of its system daemons,
    /// nanoseconds.
    pub node_cpu_ns: u64,
    /// The node's working set: Σ running containers' and the system daemons'.
    pub node_memory: u64,
    /// Sorted by namespace, pod, container.
    pub containers: Vec<ContainerSample>,
}

/// Reads the samples from the machine at `now` (its transitions applied first).
pub fn samples(machine: &mut Machine, now: Timestamp) -> Samples {
    machine.advance(now);
    let mut containers = Vec::new();
    let mut running_cpu = 0u64;
    for p in machine.pods.values() {
        for c in p.containers.values() {
            let RtState::Running { started_at, .. } = &c.state else {
                continue;
            };
            let (cpu_ns, memory) = c
                .usage
                .as_ref()
                .map_or((0, 0), |u| (u.cpu_ns_at(now), u.memory_at(now)));
            running_cpu = running_cpu.saturating_add(cpu_ns);
            containers.push(ContainerSample {
                namespace: p.namespace.clone(),
                pod: p.name.clone(),
                container: c.name.clone(),
                cpu_ns,
                memory,
                started_at: *started_at,
            });
        }
    }
    containers.sort_by(|a, b| {
        (&a.namespace, &a.pod, &a.container).cmp(&(&b.namespace, &b.pod, &b.container))
    });
    // The system daemons run while the machine is up, pods or not: a node always has usage.
    let system_memory = if machine.powered {
        machine.system.total().memory
    } else {
        0
    };
    let node_memory = containers
        .iter()
        .fold(system_memory, |a, c| a.saturating_add(c.memory));
    Samples {
        at: now,
        node_cpu_ns: machine
            .cpu_ns_retired
            .saturating_add(running_cpu)
            .saturating_add(machine.system_cpu_ns_at(now)),
        node_memory,
        containers,
    }
}

/// What `/stats/summary` needs to know of the node beside the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
}

/// The Summary API document: the node (CPU, memory, filesystem, PIDs, with the system daemons'
/// usage in its totals and its `systemContainers` `kubelet`, `runtime` and `pods` as a kubeadm
/// node reports them) and each pod with a running container (its containers' CPU, memory and
/// ephemeral storage, its totals). CPU is constant in the model, so `usageNanoCores` is the
/// modelled rate.
pub fn summary(node: &NodeInfo, machine: &Machine, s: &Samples) -> serde_json::Value {
    use serde_json::json;
    let time = s.at.to_string();
    let mut pods: BTreeMap<(String, String), Vec<serde_json::Value>> = BTreeMap::new();
    // Per pod: UID, then totals of nanocores, CPU ns, memory, storage, PIDs.
    type PodTotals = (String, u64, u64, u64, u64, u64);
    let mut pod_meta: BTreeMap<(String, String), PodTotals> = BTreeMap::new();
    let (mut node_storage, mut node_pids, mut node_nanocores) = (0u64, 0u64, 0u64);
    for p in machine.pods.values() {
        for c in p.containers.values() {
            let (RtState::Running { started_at, .. }, Some(u)) = (&c.state, c.usage.as_ref())
            else {
                continue;
            };
            let memory = u.memory_at(s.at);
            let rootfs = u.rootfs_at(s.at);
            let logs = u.logs_at(s.at);
            let storage = rootfs.saturating_add(logs);
            let cpu_ns = u.cpu_ns_at(s.at);
            let nanocores = u.spec.cpu_millis.saturating_mul(1_000_000);
            node_storage = node_storage.saturating_add(storage);
            node_pids = node_pids.saturating_add(u.spec.pids);
            node_nanocores = node_nanocores.saturating_add(nanocores);
            let key = (p.namespace.clone(), p.name.clone());
            pods.entry(key.clone()).or_default().push(json!({
                "name": c.name,
                "startTime": started_at.to_string(),
                "cpu": {"time": time, "usageNanoCores": nanocores, "usageCoreNanoSeconds": cpu_ns},
                "memory": {"time": time, "usageBytes": memory, "workingSetBytes": memory,
                           "rssBytes": memory, "pageFaults": 0, "majorPageFaults": 0},
                "rootfs": {"time": time, "usedBytes": rootfs},
                "logs": {"time": time, "usedBytes": logs},
            }));
            let e = pod_meta
                .entry(key)
                .or_insert((p.uid.clone(), 0, 0, 0, 0, 0));
            e.1 = e.1.saturating_add(nanocores);
            e.2 = e.2.saturating_add(cpu_ns);
            e.3 = e.3.saturating_add(memory);
            e.4 = e.4.saturating_add(storage);
            e.5 = e.5.saturating_add(u.spec.pids);
        }
    }
    // emptyDir contents (`usage.klab.dev/volume.<name>`): the pod's `volume` stats, counted in
    // its ephemeral storage and on the node's disk.
    let mut volumes: BTreeMap<(String, String), (u64, Vec<serde_json::Value>)> = BTreeMap::new();
    for p in machine.pods.values() {
        for (vol, m) in &p.volume_usage {
            let used = m.ephemeral_storage_at(s.at);
            let e = volumes
                .entry((p.namespace.clone(), p.name.clone()))
                .or_default();
            e.0 = e.0.saturating_add(used);
            e.1.push(json!({"time": time, "name": vol, "usedBytes": used}));
            node_storage = node_storage.saturating_add(used);
        }
    }
    let pods: Vec<serde_json::Value> = pods
        .into_iter()
        .map(|((ns, name), containers)| {
            let (uid, nanocores, cpu_ns, memory, storage, pids) = pod_meta
                .get(&(ns.clone(), name.clone()))
                .cloned()
                .unwrap_or_default();
            let (volume_bytes, volume_stats) = volumes
                .get(&(ns.clone(), name.clone()))
                .cloned()
                .unwrap_or_default();
            let storage = storage.saturating_add(volume_bytes);
            let mut pod = json!({
                "podRef": {"name": name, "namespace": ns, "uid": uid},
                "containers": containers,
                "cpu": {"time": time, "usageNanoCores": nanocores, "usageCoreNanoSeconds": cpu_ns},
                "memory": {"time": time, "usageBytes": memory, "workingSetBytes": memory,
                           "rssBytes": memory, "pageFaults": 0, "majorPageFaults": 0},
                "ephemeral-storage": {"time": time, "usedBytes": storage},
                "process_stats": {"process_count": pids},
            });
            if !volume_stats.is_empty() {
                pod["volume"] = serde_json::Value::Array(volume_stats);
            }
            pod
        })
        .collect();
    let node_ws = s.node_memory;
    // The system daemons' share of the node's totals, and the `pods` cgroup (kubepods): Σ pods.
    let (system, booted) = match machine.booted_at.filter(|_| machine.powered) {
        Some(b) => (machine.system, b),
        None => (Default::default(), s.at),
    };
    let up_ms = u64::try_from(s.at.duration_since(booted).as_millis().max(0)).unwrap_or(u64::MAX);
    let pods_nanocores = node_nanocores;
    node_nanocores =
        node_nanocores.saturating_add(system.total().cpu_millis.saturating_mul(1_000_000));
    let (pods_cpu_ns, pods_memory) = pod_meta.values().fold((0u64, 0u64), |(c, m), p| {
        (c.saturating_add(p.2), m.saturating_add(p.3))
    });
    let system_container = |name: &str, nanocores: u64, cpu_ns: u64, memory: u64| {
        json!({
            "name": name,
            "startTime": booted.to_string(),
            "cpu": {"time": time, "usageNanoCores": nanocores, "usageCoreNanoSeconds": cpu_ns},
            "memory": {"time": time, "usageBytes": memory, "workingSetBytes": memory,
                       "rssBytes": memory, "pageFaults": 0, "majorPageFaults": 0},
        })
    };
    let daemon = |name: &str, d: crate::usage::DaemonUsage| {
        system_container(
            name,
            d.cpu_millis.saturating_mul(1_000_000),
            crate::usage::SystemDaemons::cpu_ns(d, up_ms),
            d.memory,
        )
    };
    let system_containers = vec![
        daemon("kubelet", system.kubelet),
        daemon("runtime", system.runtime),
        system_container("pods", pods_nanocores, pods_cpu_ns, pods_memory),
    ];
    // One disk holds the containers' storage and the images: both filesystems report its
    // capacity and what is free on it; the image filesystem's used bytes are the images'.
    let images = machine.images.total_bytes();
    let disk_used = node_storage.saturating_add(images);
    let fs_with = |used: u64| {
        json!({
            "time": time,
            "availableBytes": node.ephemeral_storage_bytes.saturating_sub(disk_used),
            "capacityBytes": node.ephemeral_storage_bytes,
            "usedBytes": used,
            "inodesFree": crate::eviction::MODEL_INODES,
            "inodes": crate::eviction::MODEL_INODES,
            "inodesUsed": 0,
        })
    };
    let fs = fs_with(disk_used);
    let image_fs = fs_with(images);
    json!({
        "node": {
            "nodeName": node.name,
            "systemContainers": system_containers,
            "startTime": booted.to_string(),
            "cpu": {"time": time, "usageNanoCores": node_nanocores, "usageCoreNanoSeconds": s.node_cpu_ns},
            "memory": {"time": time,
                       "availableBytes": node.memory_bytes.saturating_sub(node_ws),
                       "usageBytes": node_ws, "workingSetBytes": node_ws, "rssBytes": node_ws,
                       "pageFaults": 0, "majorPageFaults": 0},
            "fs": fs,
            "runtime": {"imageFs": image_fs},
            "rlimit": {"time": time, "maxpid": crate::eviction::MODEL_PID_MAX, "curproc": node_pids},
        },
        "pods": pods,
    })
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Renders `/metrics/resource`. A scrape renders every running container of the node: the
/// lines are written straight into one buffer.
pub fn render(s: &Samples) -> String {
    let ts = s.at.as_millisecond();
    let mut out = String::new();
    let family = |out: &mut String, name: &str, help: &str, kind: &str| {
        let _ = write!(out, "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}\n");
    };
    // `name{labels} value timestamp`
    let sample = |out: &mut String, name: &str, labels: &[(&str, &str)], value: f64, ts: i64| {
        out.push_str(name);
        if !labels.is_empty() {
            out.push('{');
            for (k, (key, v)) in labels.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{key}=\"{v}\"");
            }
            out.push('}');
        }
        out.push(' ');
        push_float(out, value);
        let _ = writeln!(out, " {ts}");
    };
    fn container_labels(c: &ContainerSample) -> [(&'static str, &str); 3] {
        [
            ("container", c.container.as_str()),
            ("namespace", c.namespace.as_str()),
            ("pod", c.pod.as_str()),
        ]
    }
    family(
        &mut out,
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the container in core-seconds",
        "counter",
    );
    for c in &s.containers {
        sample(
            &mut out,
            "container_cpu_usage_seconds_total",
            &container_labels(c),
            seconds(c.cpu_ns),
            ts,
        );
    }
    family(
        &mut out,
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
        "gauge",
    );
    for c in &s.containers {
        sample(
            &mut out,
            "container_memory_working_set_bytes",
            &container_labels(c),
            c.memory as f64,
            ts,
        );
    }
    family(
        &mut out,
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
        "gauge",
    );
    for c in &s.containers {
        sample(
            &mut out,
            "container_start_time_seconds",
            &container_labels(c),
            // Upstream writes the start with its fraction (UnixNano / 1e9).
            c.started_at.as_nanosecond() as f64 / 1e9,
            c.started_at.as_millisecond(),
        );
    }
    family(
        &mut out,
        "node_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the node in core-seconds",
        "counter",
    );
    sample(
        &mut out,
        "node_cpu_usage_seconds_total",
        &[],
        seconds(s.node_cpu_ns),
        ts,
    );
    family(
        &mut out,
        "node_memory_working_set_bytes",
        "Current working set of the node in bytes",
        "gauge",
    );
    sample(
        &mut out,
        "node_memory_working_set_bytes",
        &[],
        s.node_memory as f64,
        ts,
    );
    // Pods: the sums of their running containers.
    let mut pods: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for c in &s.containers {
        let e = pods.entry((&c.namespace, &c.pod)).or_default();
        e.0 = e.0.saturating_add(c.cpu_ns);
        e.1 = e.1.saturating_add(c.memory);
    }
    family(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "Cumulative cpu time consumed by the pod in core-seconds",
        "counter",
    );
    for ((ns, pod), (cpu, _)) in &pods {
        sample(
            &mut out,
            "pod_cpu_usage_seconds_total",
            &[("namespace", ns), ("pod", pod)],
            seconds(*cpu),
            ts,
        );
    }
    family(
        &mut out,
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
        "gauge",
    );
    for ((ns, pod), (_, mem)) in &pods {
        sample(
            &mut out,
            "pod_memory_working_set_bytes",
            &[("namespace", ns), ("pod", pod)],
            *mem as f64,
            ts,
        );
    }
    family(
        &mut out,
        "resource_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        "gauge",
    );
    out.push_str("resource_scrape_error 0\n");
    out.push_str("# HELP scrape_error [ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE scrape_error gauge\nscrape_error 0\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::{Model, UsageSpec, parse_rate};

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_767_225_600_000 + ms).unwrap()
    }

    #[test]
    fn renders_the_stable_families_from_the_usage_model() {
        let mut m = Machine::new("b".into(), "m".into(), "s".into(), "10.244.1".into());
        m.run_sandbox("u", "ns", "web", t(0), std::time::Duration::ZERO);
        let p = crate::program::Program::from_command(&[], &[]);
        m.start_container("u", "app", "nginx", p, 1, "id".into(), t(1000));
        m.set_usage(
            "u",
            "app",
            Model::new(
                UsageSpec {
                    memory: 40 << 20,
                    memory_growth: parse_rate("1Mi/min"),
                    cpu_millis: 250,
                    ..Default::default()
                },
                t(1000),
                None,
            ),
        );
        let s = samples(&mut m, t(61_000));
        assert_eq!(s.node_memory, 41 << 20);
        assert_eq!(s.node_cpu_ns, 15_000_000_000);
        let text = render(&s);
        for line in [
            "container_cpu_usage_seconds_total{container=\"app\",namespace=\"ns\",pod=\"web\"} 15 1767225661000\n",
            "container_memory_working_set_bytes{container=\"app\",namespace=\"ns\",pod=\"web\"} 4.2991616e+07 1767225661000\n",
            "container_start_time_seconds{container=\"app\",namespace=\"ns\",pod=\"web\"} 1.767225601e+09 1767225601000\n",
            "node_cpu_usage_seconds_total 15 1767225661000\n",
            "node_memory_working_set_bytes 4.2991616e+07 1767225661000\n",
            "pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"web\"} 15 1767225661000\n",
            "pod_memory_working_set_bytes{namespace=\"ns\",pod=\"web\"} 4.2991616e+07 1767225661000\n",
            "resource_scrape_error 0\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        let info = NodeInfo {
            name: "n1".into(),
            memory_bytes: 1 << 30,
            ephemeral_storage_bytes: 10 << 30,
        };
        let sum = summary(&info, &m, &s);
        assert_eq!(sum["node"]["nodeName"], "n1");
        assert_eq!(sum["node"]["memory"]["workingSetBytes"], 41u64 << 20);
        assert_eq!(
            sum["node"]["memory"]["availableBytes"],
            (1u64 << 30) - (41 << 20)
        );
        assert_eq!(sum["node"]["cpu"]["usageNanoCores"], 250_000_000u64);
        assert_eq!(sum["node"]["rlimit"]["curproc"], 0u64);
        let pod = &sum["pods"][0];
        assert_eq!(pod["podRef"]["name"], "web");
        assert_eq!(pod["containers"][0]["name"], "app");
        assert_eq!(
            pod["containers"][0]["memory"]["workingSetBytes"],
            41u64 << 20
        );
        assert_eq!(pod["cpu"]["usageCoreNanoSeconds"], 15_000_000_000u64);
        // A container that ends keeps its CPU in the node's counter.
        m.stop_container(
            "u",
            "app",
            std::time::Duration::ZERO,
            std::time::Duration::ZERO,
            t(61_000),
        );
        let s = samples(&mut m, t(100_000));
        assert!(s.containers.is_empty());
        assert_eq!(s.node_cpu_ns, 15_000_000_000);
        assert_eq!(s.node_memory, 0);
    }

    #[test]
    fn the_system_daemons_are_in_the_node_totals() {
        const MI: u64 = 1 << 20;
        let mut m = Machine::new("b".into(), "m".into(), "s".into(), "10.244.1".into());
        m.system = crate::usage::SystemDaemons::from_reserved(0, 0);
        m.booted_at = Some(t(0));
        let info = NodeInfo {
            name: "n1".into(),
            memory_bytes: 2048 * MI,
            ephemeral_storage_bytes: 10 << 30,
        };
        // No pod at all: 50m for a minute and 256Mi, so metrics-server keeps the node point.
        let s = samples(&mut m, t(60_000));
        assert!(s.containers.is_empty());
        assert_eq!((s.node_cpu_ns, s.node_memory), (3_000_000_000, 256 * MI));
        let text = render(&s);
        assert!(text.contains("node_cpu_usage_seconds_total 3 1767225660000\n"));
        assert!(text.contains("node_memory_working_set_bytes 2.68435456e+08 1767225660000\n"));
        let sum = summary(&info, &m, &s);
        assert_eq!(sum["node"]["memory"]["workingSetBytes"], 256 * MI);
        assert_eq!(sum["node"]["memory"]["availableBytes"], 1792 * MI);
        assert_eq!(sum["node"]["cpu"]["usageNanoCores"], 50_000_000u64);
        assert_eq!(sum["node"]["startTime"], t(0).to_string());
        let names: Vec<&str> = sum["node"]["systemContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["kubelet", "runtime", "pods"]);
        let sc = &sum["node"]["systemContainers"];
        assert_eq!(sc[0]["memory"]["workingSetBytes"], 64 * MI);
        assert_eq!(sc[0]["cpu"]["usageNanoCores"], 25_000_000u64);
        assert_eq!(sc[0]["cpu"]["usageCoreNanoSeconds"], 1_500_000_000u64);
        assert_eq!(sc[1]["memory"]["workingSetBytes"], 48 * MI);
        assert_eq!(sc[2]["memory"]["workingSetBytes"], 0u64);

        // A pod: in the node's totals and in the `pods` cgroup, beside the daemons.
        m.run_sandbox("u", "ns", "web", t(60_000), std::time::Duration::ZERO);
        let p = crate::program::Program::from_command(&[], &[]);
        m.start_container("u", "app", "nginx", p, 1, "id".into(), t(60_000));
        m.set_usage(
            "u",
            "app",
            Model::new(
                UsageSpec {
                    memory: 100 * MI,
                    cpu_millis: 250,
                    ..Default::default()
                },
                t(60_000),
                None,
            ),
        );
        let s = samples(&mut m, t(120_000));
        assert_eq!(s.node_memory, 356 * MI);
        assert_eq!(s.node_cpu_ns, 6_000_000_000 + 15_000_000_000);
        let sum = summary(&info, &m, &s);
        assert_eq!(sum["node"]["cpu"]["usageNanoCores"], 300_000_000u64);
        assert_eq!(sum["node"]["memory"]["availableBytes"], 1692 * MI);
        let pods = &sum["node"]["systemContainers"][2];
        assert_eq!(pods["memory"]["workingSetBytes"], 100 * MI);
        assert_eq!(pods["cpu"]["usageNanoCores"], 250_000_000u64);
        assert_eq!(pods["cpu"]["usageCoreNanoSeconds"], 15_000_000_000u64);

        // Powered off: nothing runs, the counter keeps what was used and never goes back.
        m.power_off(t(180_000));
        let s = samples(&mut m, t(240_000));
        assert_eq!(s.node_memory, 0);
        assert_eq!(s.node_cpu_ns, 9_000_000_000 + 30_000_000_000);
        // Booted again: the daemons count from the boot on.
        m.power_on("b-2".into());
        m.booted_at = Some(t(300_000));
        let s = samples(&mut m, t(360_000));
        assert_eq!(s.node_memory, 256 * MI);
        assert_eq!(s.node_cpu_ns, 12_000_000_000 + 30_000_000_000);
    }

    #[test]
    fn summary_counts_images_and_empty_dirs_on_the_disk() {
        const GI: u64 = 1 << 30;
        let mut m = Machine::new("b".into(), "m".into(), "s".into(), "10.244.1".into());
        m.run_sandbox("u", "ns", "web", t(0), std::time::Duration::ZERO);
        let p = crate::program::Program::from_command(&[], &[]);
        m.start_container("u", "app", "nginx", p, 1, "id".into(), t(1000));
        let storage = |b: u64| UsageSpec {
            ephemeral_storage: b,
            ..Default::default()
        };
        m.set_usage("u", "app", Model::new(storage(GI), t(1000), None));
        m.pods
            .get_mut("u")
            .unwrap()
            .volume_usage
            .insert("cache".into(), Model::new(storage(2 * GI), t(1000), None));
        m.images.pulled("nginx", 300 << 20, t(500));
        let info = NodeInfo {
            name: "n1".into(),
            memory_bytes: GI,
            ephemeral_storage_bytes: 10 * GI,
        };
        let s = samples(&mut m, t(2000));
        let sum = summary(&info, &m, &s);
        let used = 3 * GI + (300 << 20);
        assert_eq!(sum["node"]["fs"]["usedBytes"], used);
        assert_eq!(sum["node"]["fs"]["availableBytes"], 10 * GI - used);
        assert_eq!(sum["node"]["runtime"]["imageFs"]["usedBytes"], 300u64 << 20);
        assert_eq!(
            sum["node"]["runtime"]["imageFs"]["availableBytes"],
            10 * GI - used
        );
        let pod = &sum["pods"][0];
        assert_eq!(pod["ephemeral-storage"]["usedBytes"], 3 * GI);
        assert_eq!(pod["volume"][0]["name"], "cache");
        assert_eq!(pod["volume"][0]["usedBytes"], 2 * GI);
        assert_eq!(pod["containers"][0]["rootfs"]["usedBytes"], GI);
        // The machine's own total agrees.
        assert_eq!(m.disk_used(t(2000)), used);
    }

    #[test]
    fn summary_shows_container_logs_in_storage_and_on_the_disk() {
        const MI: u64 = 1 << 20;
        let mut m = Machine::new("b".into(), "m".into(), "s".into(), "10.244.1".into());
        m.run_sandbox("u", "ns", "chatty", t(0), std::time::Duration::ZERO);
        let p = crate::program::Program::from_command(&[], &[]);
        m.start_container("u", "app", "busybox", p, 1, "id".into(), t(0));
        m.set_usage(
            "u",
            "app",
            Model::new(
                UsageSpec {
                    ephemeral_storage: 4 * MI,
                    log_growth: crate::usage::parse_rate("1Mi/s"),
                    ..Default::default()
                },
                t(0),
                None,
            ),
        );
        let info = NodeInfo {
            name: "n1".into(),
            memory_bytes: 1 << 30,
            ephemeral_storage_bytes: 1 << 30,
        };
        // Passes of the log manager every 10 s for 2 minutes: 4 rotated 10Mi files are kept,
        // three of them gzipped (1Mi each), and 5Mi of the current file.
        for pass in 1..=12 {
            m.rotate_logs(t(pass * 10_000), crate::usage::LogRotation::default());
        }
        let s = samples(&mut m, t(125_000));
        let sum = summary(&info, &m, &s);
        let c = &sum["pods"][0]["containers"][0];
        assert_eq!(c["rootfs"]["usedBytes"], 4 * MI);
        assert_eq!(c["logs"]["usedBytes"], 18 * MI);
        assert_eq!(sum["pods"][0]["ephemeral-storage"]["usedBytes"], 22 * MI);
        assert_eq!(sum["node"]["fs"]["usedBytes"], 22 * MI);
        assert_eq!(m.disk_used(t(125_000)), 22 * MI);
    }
}
