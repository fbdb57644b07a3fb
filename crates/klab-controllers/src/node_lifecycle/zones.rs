//! Zones and disruption handling of the node lifecycle controller (spec §1.8): the zone key, zone
//! state classification, per-zone limiter rates, and `handleDisruption` over the per-zone tainting
//! queues — pure, driven by `now`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use klab_api::names;

use super::config::NodeLifecycleConfig;
use super::queue::RateLimitedTimedQueue;

/// The zone key (`GetZoneKey`): `region + ":\x00:" + zone`, beta labels first (even when empty),
/// `""` when both are empty.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |beta: &str, ga: &str| -> String {
        labels
            .and_then(|l| l.get(beta).or_else(|| l.get(ga)))
            .cloned()
            .unwrap_or_default()
    };
    let zone = get(names::LABEL_ZONE_BETA, names::LABEL_ZONE);
    let region = get(names::LABEL_REGION_BETA, names::LABEL_REGION);
    if zone.is_empty() && region.is_empty() {
        String::new()
    } else {
        format!("{region}:\x00:{zone}")
    }
}

/// Whether the node is excluded from zone accounting (label presence only).
pub fn excluded_from_disruption(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(names::LABEL_EXCLUDE_DISRUPTION))
}

/// The disruption state of a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ZoneState {
    /// Seen for the first time; no limiter decision yet (counts as "not Full").
    Initial,
    /// Healthy enough: normal eviction rate.
    Normal,
    /// Every counted node is not Ready.
    FullDisruption,
    /// At least 3 and at least the threshold fraction of nodes not Ready.
    PartialDisruption,
}

/// `ComputeZoneState`: `(notReady count, state)` from the Ready statuses of the zone's counted
/// nodes (`None` = no Ready condition, counts as not ready). The ratio is computed in f32.
pub fn compute_zone_state(
    statuses: &[Option<&str>],
    unhealthy_zone_threshold: f32,
) -> (usize, ZoneState) {
    let ready = statuses.iter().filter(|s| **s == Some("True")).count();
    let not_ready = statuses.len().saturating_sub(ready);
    let state = if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2
        && (not_ready as f32) / (statuses.len() as f32) >= unhealthy_zone_threshold
    {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    };
    (not_ready, state)
}

/// The limiter rate for a zone in `state` (`setLimiterInZone`); None for Initial (no swap).
pub fn zone_rate(state: ZoneState, zone_size: usize, cfg: &NodeLifecycleConfig) -> Option<f32> {
    match state {
        ZoneState::Initial => None,
        ZoneState::Normal | ZoneState::FullDisruption => Some(cfg.node_eviction_rate),
        ZoneState::PartialDisruption => {
            let large = i64::try_from(zone_size).unwrap_or(i64::MAX)
                > i64::from(cfg.large_cluster_size_threshold);
            Some(if large {
                cfg.secondary_node_eviction_rate
            } else {
                0.0
            })
        }
    }
}

/// What `handle_disruption` asks the shell to do besides the limiter changes it made itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DisruptionOutcome {
    /// Nothing beyond (possibly) per-zone limiter changes, listed with their new state.
    Changed(Vec<(String, ZoneState)>),
    /// "Entering master disruption mode": run `markNodeAsReachable` on every node.
    EnteredMasterDisruption,
    /// "Exiting master disruption mode": reset every node's probe and transition timestamps to now.
    ExitedMasterDisruption,
}

/// Per-zone states and NoExecute tainting queues.
#[derive(Clone, Debug, Default)]
pub struct Zones {
    pub states: BTreeMap<String, ZoneState>,
    pub tainters: BTreeMap<String, RateLimitedTimedQueue>,
}

impl Zones {
    /// `addPodEvictorForNewZone`: a zone without a state entry gets state Initial and a new queue
    /// (replacing any old one, discarding its contents). Returns true if the zone was (re)created.
    pub fn ensure_zone(&mut self, zone: &str, cfg: &NodeLifecycleConfig) -> bool {
        if self.states.contains_key(zone) {
            return false;
        }
        self.states.insert(zone.to_string(), ZoneState::Initial);
        self.tainters.insert(
            zone.to_string(),
            RateLimitedTimedQueue::new(cfg.node_eviction_rate),
        );
        true
    }

    /// The queue of a zone, created on demand (upstream would crash on a missing zone; a node whose
    /// zone labels changed between passes lands here).
    pub fn tainter(&mut self, zone: &str, cfg: &NodeLifecycleConfig) -> &mut RateLimitedTimedQueue {
        self.tainters
            .entry(zone.to_string())
            .or_insert_with(|| RateLimitedTimedQueue::new(cfg.node_eviction_rate))
    }

    /// Removes a node from every zone queue (`markNodeAsReachable` removes it from its own zone's;
    /// removing it everywhere also covers a node whose zone changed).
    pub fn remove_node(&mut self, node: &str) {
        for q in self.tainters.values_mut() {
            q.remove(node);
        }
    }

    fn set_limiter(
        &mut self,
        zone: &str,
        size: usize,
        state: ZoneState,
        now: Timestamp,
        cfg: &NodeLifecycleConfig,
    ) {
        if let Some(rate) = zone_rate(state, size, cfg) {
            self.tainter(zone, cfg).swap_limiter(rate, now);
        }
    }

    /// `handleDisruption` (end of every pass). `zone_statuses` maps each zone seen in this pass to the
    /// Ready statuses of its counted nodes. The stored-zone scan runs in key order (upstream: Go map
    /// order) and stops at the first non-Full zone.
    pub fn handle_disruption(
        &mut self,
        zone_statuses: &BTreeMap<String, Vec<Option<String>>>,
        now: Timestamp,
        cfg: &NodeLifecycleConfig,
    ) -> DisruptionOutcome {
        let mut new_states: BTreeMap<String, ZoneState> = BTreeMap::new();
        let mut all_are_full = true;
        for (zone, statuses) in zone_statuses {
            let st: Vec<Option<&str>> = statuses.iter().map(|s| s.as_deref()).collect();
            let (_, state) = compute_zone_state(&st, cfg.unhealthy_zone_threshold);
            if state != ZoneState::FullDisruption {
                all_are_full = false;
            }
            new_states.insert(zone.clone(), state);
            self.states
                .entry(zone.clone())
                .or_insert(ZoneState::Initial);
        }

        let mut all_was_full = true;
        let stored: Vec<(String, ZoneState)> =
            self.states.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (zone, state) in stored {
            if !zone_statuses.contains_key(&zone) {
                self.states.remove(&zone);
                continue;
            }
            if state != ZoneState::FullDisruption {
                all_was_full = false;
                break;
            }
        }

        if all_are_full && all_was_full {
            return DisruptionOutcome::Changed(Vec::new());
        }
        let size = |zone: &str| zone_statuses.get(zone).map_or(0, Vec::len);
        let zones: Vec<String> = self.states.keys().cloned().collect();
        if all_are_full {
            tracing::info!(
                "Controller detected that all Nodes are not-Ready. Entering master disruption mode"
            );
            for zone in &zones {
                self.tainter(zone, cfg).swap_limiter(0.0, now);
                self.states.insert(zone.clone(), ZoneState::FullDisruption);
            }
            return DisruptionOutcome::EnteredMasterDisruption;
        }
        if all_was_full {
            tracing::info!(
                "Controller detected that some Nodes are Ready. Exiting master disruption mode"
            );
            for zone in &zones {
                // A stored zone absent from this pass has no new state: upstream's map lookup then
                // yields the zero value, which is stateInitial (no limiter change).
                let state = new_states.get(zone).copied().unwrap_or(ZoneState::Initial);
                self.set_limiter(zone, size(zone), state, now, cfg);
                self.states.insert(zone.clone(), state);
            }
            return DisruptionOutcome::ExitedMasterDisruption;
        }
        let mut changed = Vec::new();
        for zone in &zones {
            let old = self.states.get(zone).copied().unwrap_or(ZoneState::Initial);
            let state = new_states.get(zone).copied().unwrap_or(ZoneState::Initial);
            if old == state {
                continue;
            }
            tracing::info!(zone = zone.as_str(), new_state = ?state, "Controller detected that zone is now in new state");
            self.set_limiter(zone, size(zone), state, now, cfg);
            self.states.insert(zone.clone(), state);
            changed.push((zone.clone(), state));
        }
        DisruptionOutcome::Changed(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node_with_labels(labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn cp37_zone_key_composition() {
        let cases: [(&[(&str, &str)], &str); 5] = [
            (
                &[(names::LABEL_REGION, "r1"), (names::LABEL_ZONE, "z1")],
                "r1:\x00:z1",
            ),
            (
                &[(names::LABEL_ZONE_BETA, "a"), (names::LABEL_ZONE, "b")],
                ":\x00:a",
            ),
            (&[(names::LABEL_REGION, "r1")], "r1:\x00:"),
            (&[], ""),
            (
                &[(names::LABEL_ZONE_BETA, ""), (names::LABEL_ZONE, "z1")],
                "",
            ),
        ];
        for (labels, want) in cases {
            assert_eq!(zone_key(&node_with_labels(labels)), want, "{labels:?}");
        }
    }

    #[test]
    fn cp28_compute_zone_state() {
        use ZoneState::*;
        let cases = [
            (0, 1, FullDisruption),
            (0, 5, FullDisruption),
            (1, 2, Normal),
            (3, 2, Normal),
            (2, 3, PartialDisruption),
            (1, 3, PartialDisruption),
            (3, 3, Normal),
            (9, 11, PartialDisruption),
            (10, 11, Normal),
            (97, 3, Normal),
            (0, 0, Normal),
        ];
        for (ready, not_ready, want) in cases {
            let mut v: Vec<Option<&str>> = vec![Some("True"); ready];
            // Mix the kinds of "not ready": False, Unknown and a missing condition.
            for i in 0..not_ready {
                v.push([Some("False"), Some("Unknown"), None][i % 3]);
            }
            assert_eq!(
                compute_zone_state(&v, 0.55),
                (not_ready, want),
                "ready {ready}, notReady {not_ready}"
            );
        }
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_420_113_600 + s).unwrap()
    }

    fn statuses(zones: &[(&str, &[Option<&str>])]) -> BTreeMap<String, Vec<Option<String>>> {
        zones
            .iter()
            .map(|(z, s)| {
                (
                    z.to_string(),
                    s.iter().map(|x| x.map(str::to_string)).collect(),
                )
            })
            .collect()
    }

    /// Runs the two passes of a CP-29 row and returns the stored states after each.
    fn two_passes(
        first: &[(&str, &[Option<&str>])],
        second: &[(&str, &[Option<&str>])],
    ) -> (BTreeMap<String, ZoneState>, BTreeMap<String, ZoneState>) {
        let cfg = NodeLifecycleConfig::default();
        let mut z = Zones::default();
        for (zone, _) in first {
            z.ensure_zone(zone, &cfg);
        }
        z.handle_disruption(&statuses(first), t(0), &cfg);
        let after_first = z.states.clone();
        for (zone, _) in second {
            z.ensure_zone(zone, &cfg);
        }
        z.handle_disruption(&statuses(second), t(3600), &cfg);
        (after_first, z.states.clone())
    }

    fn states(v: &[(&str, ZoneState)]) -> BTreeMap<String, ZoneState> {
        v.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    #[test]
    fn cp29_zone_transitions() {
        use ZoneState::*;
        let (u, r) = (Some("Unknown"), Some("True"));
        // 1. one Ready node, no zone labels.
        let (a, b) = two_passes(&[("", &[r])], &[("", &[r])]);
        assert_eq!((a, b), (states(&[("", Normal)]), states(&[("", Normal)])));
        // 2. two zones each Unknown; then zone2 heart-beats.
        let (a, b) = two_passes(&[("z1", &[u]), ("z2", &[u])], &[("z1", &[u]), ("z2", &[r])]);
        assert_eq!(a, states(&[("z1", FullDisruption), ("z2", FullDisruption)]));
        assert_eq!(b, states(&[("z1", FullDisruption), ("z2", Normal)]));
        // 3. 4 nodes without conditions; then 3 unhealthy + 1 healthy.
        let (a, b) = two_passes(
            &[("z1", &[None, None, None, None])],
            &[("z1", &[u, u, u, r])],
        );
        assert_eq!(
            (a, b),
            (
                states(&[("z1", FullDisruption)]),
                states(&[("z1", PartialDisruption)])
            )
        );
        // 4. 2 Unknown + 3 Ready; then 3 Unknown + 2 Ready.
        let (a, b) = two_passes(&[("z1", &[u, u, r, r, r])], &[("z1", &[u, u, u, r, r])]);
        assert_eq!(
            (a, b),
            (
                states(&[("z1", Normal)]),
                states(&[("z1", PartialDisruption)])
            )
        );
        // 5. 2 Unknown + 1 Ready; then all Unknown.
        let (a, b) = two_passes(&[("z1", &[u, u, r])], &[("z1", &[u, u, u])]);
        assert_eq!(
            (a, b),
            (states(&[("z1", Normal)]), states(&[("z1", FullDisruption)]))
        );
        // 6. zone1 Unknown, zone2 Ready.
        let (a, b) = two_passes(&[("z1", &[u]), ("z2", &[r])], &[("z1", &[u]), ("z2", &[r])]);
        assert_eq!(a, states(&[("z1", FullDisruption), ("z2", Normal)]));
        assert_eq!(b, a);
        // 7. two zones each with one Unknown node.
        let (a, b) = two_passes(&[("z1", &[u]), ("z2", &[u])], &[("z1", &[u]), ("z2", &[u])]);
        assert_eq!(a, states(&[("z1", FullDisruption), ("z2", FullDisruption)]));
        assert_eq!(b, a);
        // 8. one Ready node whose Ready condition is then removed.
        let (a, b) = two_passes(&[("", &[r])], &[("", &[None])]);
        assert_eq!(
            (a, b),
            (states(&[("", Normal)]), states(&[("", FullDisruption)]))
        );
        // 9. the excluded master is not counted: zone1 holds only the Unknown node.
        let (a, b) = two_passes(&[("z1", &[u])], &[("z1", &[u])]);
        assert_eq!(
            (a, b),
            (
                states(&[("z1", FullDisruption)]),
                states(&[("z1", FullDisruption)])
            )
        );
    }

    #[test]
    fn cp33_single_zone_all_down_enters_master_disruption_and_stops_tainting() {
        let cfg = NodeLifecycleConfig::default();
        let mut z = Zones::default();
        z.ensure_zone("", &cfg);
        let out = z.handle_disruption(&statuses(&[("", &[Some("True")])]), t(0), &cfg);
        assert_eq!(
            out,
            DisruptionOutcome::Changed(vec![("".into(), ZoneState::Normal)])
        );
        let out = z.handle_disruption(&statuses(&[("", &[Some("Unknown")])]), t(55), &cfg);
        assert_eq!(out, DisruptionOutcome::EnteredMasterDisruption);
        assert_eq!(
            z.tainters[""].limiter(),
            &super::super::queue::Limiter::Never
        );
        // Steady: nothing more.
        let out = z.handle_disruption(&statuses(&[("", &[Some("Unknown")])]), t(60), &cfg);
        assert_eq!(out, DisruptionOutcome::Changed(vec![]));
        // Recovery exits and restores the normal rate.
        let out = z.handle_disruption(&statuses(&[("", &[Some("True")])]), t(65), &cfg);
        assert_eq!(out, DisruptionOutcome::ExitedMasterDisruption);
        assert_eq!(z.tainters[""].limiter().qps(), 0.1);
        assert_eq!(z.states[""], ZoneState::Normal);
    }

    #[test]
    fn first_pass_all_full_enters_master_disruption_from_initial() {
        let cfg = NodeLifecycleConfig::default();
        let mut z = Zones::default();
        z.ensure_zone("a", &cfg);
        let out = z.handle_disruption(&statuses(&[("a", &[Some("Unknown")])]), t(0), &cfg);
        assert_eq!(out, DisruptionOutcome::EnteredMasterDisruption);
    }

    #[test]
    fn cp31_large_partial_zone_uses_secondary_rate_small_zone_stops() {
        let cfg = NodeLifecycleConfig::default();
        for (size, want) in [(51usize, 0.01f32), (50, 0.0)] {
            let mut z = Zones::default();
            z.ensure_zone("", &cfg);
            let healthy = vec![Some("True"); size];
            z.handle_disruption(&statuses(&[("", &healthy)]), t(0), &cfg);
            let mut sick: Vec<Option<&str>> = vec![Some("Unknown"); 30];
            sick.extend(vec![Some("True"); size - 30]);
            let out = z.handle_disruption(&statuses(&[("", &sick)]), t(55), &cfg);
            assert_eq!(
                out,
                DisruptionOutcome::Changed(vec![("".into(), ZoneState::PartialDisruption)])
            );
            let qps = z.tainters[""].limiter().qps();
            if want == 0.0 {
                assert_eq!(
                    z.tainters[""].limiter(),
                    &super::super::queue::Limiter::Never,
                    "size {size}"
                );
            } else {
                assert_eq!(qps, want, "size {size}");
            }
        }
    }

    #[test]
    fn cp34_one_full_zone_among_healthy_keeps_normal_rate() {
        let cfg = NodeLifecycleConfig::default();
        let mut z = Zones::default();
        z.ensure_zone("a", &cfg);
        z.ensure_zone("b", &cfg);
        let r = Some("True");
        let u = Some("Unknown");
        z.handle_disruption(&statuses(&[("a", &[r, r]), ("b", &[r, r])]), t(0), &cfg);
        let out = z.handle_disruption(&statuses(&[("a", &[u, u]), ("b", &[r, r])]), t(55), &cfg);
        assert_eq!(
            out,
            DisruptionOutcome::Changed(vec![("a".into(), ZoneState::FullDisruption)])
        );
        assert_eq!(z.tainters["a"].limiter().qps(), 0.1);
    }

    #[test]
    fn absent_zone_state_is_dropped_and_recreated_with_fresh_queue() {
        let cfg = NodeLifecycleConfig::default();
        let mut z = Zones::default();
        z.ensure_zone("a", &cfg);
        z.ensure_zone("b", &cfg);
        z.tainter("a", &cfg).add("x", "", t(0));
        z.handle_disruption(
            &statuses(&[("a", &[Some("True")]), ("b", &[Some("True")])]),
            t(0),
            &cfg,
        );
        // Zone "a" is absent from the second pass: the scan (key order) drops it before stopping
        // at the first non-Full zone "b".
        z.handle_disruption(&statuses(&[("b", &[Some("True")])]), t(5), &cfg);
        assert!(!z.states.contains_key("a"));
        assert!(z.ensure_zone("a", &cfg));
        assert!(
            z.tainters["a"].items().is_empty(),
            "a new queue replaces the old one"
        );
    }
}
