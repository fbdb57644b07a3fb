//! `node_collector_*` metrics of the node lifecycle controller, with upstream names, kept as plain
//! shared counters/gauges and rendered in the Prometheus text format on demand.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetricsSnapshot {
    /// `node_collector_evictions_total{zone}` (STABLE): successful NoExecute taint swaps.
    pub evictions_total: BTreeMap<String, u64>,
    /// `node_collector_zone_health{zone}`: percentage of healthy nodes.
    pub zone_health: BTreeMap<String, f64>,
    /// `node_collector_zone_size{zone}`.
    pub zone_size: BTreeMap<String, f64>,
    /// `node_collector_unhealthy_nodes_in_zone{zone}`.
    pub unhealthy_nodes_in_zone: BTreeMap<String, f64>,
}

/// Shared handle; clones see the same values.
#[derive(Debug, Default, Clone)]
pub struct NodeLifecycleMetrics {
    inner: Arc<Mutex<MetricsSnapshot>>,
}

impl NodeLifecycleMetrics {
    fn with<T>(&self, f: impl FnOnce(&mut MetricsSnapshot) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    /// A copy of the current values.
    pub fn snapshot(&self) -> MetricsSnapshot {
        self.with(|m| m.clone())
    }

    /// Initialises the eviction counter of a new zone at 0 (upstream `Add(0)`).
    pub fn init_zone(&self, zone: &str) {
        self.with(|m| {
            m.evictions_total.entry(zone.to_string()).or_insert(0);
        });
    }

    pub fn inc_evictions(&self, zone: &str) {
        self.with(|m| {
            let n = m.evictions_total.entry(zone.to_string()).or_insert(0);
            *n = n.saturating_add(1);
        });
    }

    /// Sets the zone gauges from a pass: `size` counted nodes of which `unhealthy` are not Ready.
    pub fn set_zone(&self, zone: &str, size: usize, unhealthy: usize) {
        self.with(|m| {
            m.zone_size.insert(zone.to_string(), size as f64);
            let health = if size == 0 {
                100.0
            } else {
                100.0 * size.saturating_sub(unhealthy) as f64 / size as f64
            };
            m.zone_health.insert(zone.to_string(), health);
            m.unhealthy_nodes_in_zone
                .insert(zone.to_string(), unhealthy as f64);
        });
    }

    /// The gauges of a zone no longer seen (size 0, health 100, unhealthy 0).
    pub fn reset_zone(&self, zone: &str) {
        self.set_zone(zone, 0, 0);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.snapshot();
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, values: Vec<(String, String)>| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (zone, v) in values {
                let zone = zone
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\0', "\\x00");
                let _ = writeln!(out, "{name}{{zone=\"{zone}\"}} {v}");
            }
        };
        family(
            "node_collector_evictions_total",
            "counter",
            "[STABLE] Number of Node evictions that happened since current instance of NodeController started.",
            m.evictions_total
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        );
        family(
            "node_collector_evictions_number",
            "counter",
            "(Deprecated since 1.24.0) Number of Node evictions that happened since current instance of NodeController started.",
            m.evictions_total
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        );
        family(
            "node_collector_zone_health",
            "gauge",
            "[ALPHA] Gauge measuring percentage of healthy nodes per zone.",
            m.zone_health
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        );
        family(
            "node_collector_zone_size",
            "gauge",
            "[ALPHA] Gauge measuring number of registered Nodes per zones.",
            m.zone_size
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        );
        family(
            "node_collector_unhealthy_nodes_in_zone",
            "gauge",
            "[ALPHA] Gauge measuring number of not Ready Nodes per zones.",
            m.unhealthy_nodes_in_zone
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_renders() {
        let m = NodeLifecycleMetrics::default();
        m.init_zone("");
        m.inc_evictions("");
        m.set_zone("", 3, 1);
        let s = m.snapshot();
        assert_eq!(s.evictions_total[""], 1);
        assert!((s.zone_health[""] - 66.666).abs() < 0.01);
        let text = m.render();
        assert!(
            text.contains("node_collector_evictions_total{zone=\"\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("node_collector_zone_size{zone=\"\"} 3\n"));
    }
}
