//! Node-pressure eviction (upstream `pkg/kubelet/eviction`), the pure decisions: eviction signals
//! and thresholds (the kubelet configuration's `evictionHard` / `evictionSoft` /
//! `evictionSoftGracePeriod` / `evictionMinimumReclaim`, parsed with upstream's error texts),
//! which thresholds are met (min-reclaim keeps a met threshold met), the node conditions reported
//! (kept for `evictionPressureTransitionPeriod` after the last breach), which thresholds may act
//! (grace periods), the ranking of pods, which pods may be evicted, the grace of an eviction, the
//! eviction message, and admission under pressure.
//!
//! The kubelet's pod loop runs [`synchronize`] every 10 s ([`MONITORING_PERIOD`]); observations
//! come from klab's usage model ([`crate::usage`]: capacity less the reservation and what the
//! containers use) unless a node fault (`Machine::available_override`) says otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use klab_api::names;

use crate::quantity::{bytes, format_bytes};
use crate::shutdown::SYSTEM_CRITICAL_PRIORITY;

/// `evictionPressureTransitionPeriod` default.
pub const PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);
/// `evictionMonitoringPeriod`: how often `synchronize` runs.
pub const MONITORING_PERIOD: Duration = Duration::from_secs(10);
/// `immediateEvictionGracePeriodSeconds`: the kill override of a hard-threshold eviction.
pub const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS: i64 = 1;
/// klab's model of a filesystem's inodes (`nodefs.inodesFree` capacity): nothing uses them unless
/// a node fault says so.
pub const MODEL_INODES: u64 = 6_553_600;
/// klab's model of the kernel's `pid_max` (`pid.available` capacity; 64-bit default).
pub const MODEL_PID_MAX: u64 = 4_194_304;
/// Pod status reason (and admission rejection reason) of an eviction.
pub const REASON_EVICTED: &str = "Evicted";
/// Node event of a synchronize round that acts.
pub const EVENT_EVICTION_THRESHOLD_MET: &str = "EvictionThresholdMet";

/// An eviction signal (Linux).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

/// A node condition an eviction signal drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pressure {
    Memory,
    Disk,
    Pid,
}

impl Pressure {
    /// The condition type (`MemoryPressure`, …).
    pub fn condition(self) -> &'static str {
        match self {
            Pressure::Memory => names::COND_MEMORY_PRESSURE,
            Pressure::Disk => names::COND_DISK_PRESSURE,
            Pressure::Pid => names::COND_PID_PRESSURE,
        }
    }
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|x| x.name() == s)
    }

    pub fn pressure(self) -> Pressure {
        match self {
            Signal::MemoryAvailable => Pressure::Memory,
            Signal::PidAvailable => Pressure::Pid,
            _ => Pressure::Disk,
        }
    }

    /// The resource an eviction for this signal reclaims (the eviction message's name).
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }

    /// Whether quantities of this signal print as bytes (`100Mi`) or as plain counts (`1200`).
    fn is_bytes(self) -> bool {
        matches!(
            self,
            Signal::MemoryAvailable | Signal::NodeFsAvailable | Signal::ImageFsAvailable
        )
    }

    /// Ordering of eligible thresholds: memory first, then the others.
    fn rank(self) -> u8 {
        match self {
            Signal::MemoryAvailable => 0,
            _ => 1,
        }
    }
}

/// A threshold value: a quantity, or a fraction of the signal's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThresholdValue {
    Quantity(u64),
    /// 0 < fraction < 1 (`10%` = 0.1).
    Percentage(f64),
}

impl ThresholdValue {
    /// The value in the signal's units for a given capacity.
    pub fn resolve(self, capacity: u64) -> u64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            ThresholdValue::Percentage(p) => {
                let v = (capacity as f64) * p;
                if v.is_finite() && v > 0.0 {
                    v.ceil().min(u64::MAX as f64) as u64
                } else {
                    0
                }
            }
        }
    }
}

/// One eviction threshold: `signal < value`, hard when `grace_period` is zero.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    pub grace_period: Duration,
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }
}

/// Upstream's `unsupportedEvictionSignal`.
fn unsupported(signal: &str) -> String {
    format!("unsupported eviction signal {signal}")
}

/// Parses a threshold or min-reclaim value as `parseThresholdStatement` does; `Ok(None)` for the
/// ignored `0%` and `100%`.
pub fn parse_value(signal: Signal, val: &str) -> Result<Option<ThresholdValue>, String> {
    let s = signal.name();
    if let Some(pct) = val.strip_suffix('%') {
        if val == "0%" || val == "100%" {
            return Ok(None);
        }
        let f: f64 = pct
            .parse()
            .map_err(|_| format!("strconv.ParseFloat: parsing {pct:?}: invalid syntax"))?;
        if f.is_nan() {
            return Err(format!(
                "eviction percentage threshold {s} is not a number: {val}"
            ));
        }
        let fraction = f / 100.0;
        if fraction < 0.0 {
            return Err(format!(
                "eviction percentage threshold {s} must be >= 0%: {val}"
            ));
        }
        if fraction > 1.0 {
            return Err(format!(
                "eviction percentage threshold {s} must be <= 100%: {val}"
            ));
        }
        return Ok(Some(ThresholdValue::Percentage(fraction)));
    }
    if let Some(rest) = val.strip_prefix('-')
        && bytes(rest).is_some()
    {
        return Err(format!("eviction threshold {s} must be positive: {val}"));
    }
    let q = bytes(val).ok_or_else(|| {
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            .to_string()
    })?;
    if q == 0 {
        return Err(format!("eviction threshold {s} must be positive: 0"));
    }
    Ok(Some(ThresholdValue::Quantity(q)))
}

/// The eviction part of the kubelet configuration, as upstream's maps of signal → value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionConfig {
    /// `evictionHard` (default: the Linux defaults, see [`Self::default`]).
    pub hard: BTreeMap<String, String>,
    /// `evictionSoft`.
    pub soft: BTreeMap<String, String>,
    /// `evictionSoftGracePeriod` (Go durations).
    pub soft_grace_period: BTreeMap<String, String>,
    /// `evictionMinimumReclaim`.
    pub minimum_reclaim: BTreeMap<String, String>,
    /// `evictionPressureTransitionPeriod` (0 is defaulted to 5m).
    pub pressure_transition_period: Duration,
    /// `evictionMaxPodGracePeriod` (seconds).
    pub max_pod_grace_period: i64,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        let hard = [
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
            ("imagefs.inodesFree", "5%"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        EvictionConfig {
            hard,
            soft: BTreeMap::new(),
            soft_grace_period: BTreeMap::new(),
            minimum_reclaim: BTreeMap::new(),
            pressure_transition_period: PRESSURE_TRANSITION_PERIOD,
            max_pod_grace_period: 0,
        }
    }
}

impl EvictionConfig {
    /// `ParseThresholdConfig`: every threshold, hard ones first, in signal order.
    pub fn thresholds(&self) -> Result<Vec<Threshold>, String> {
        let mut min_reclaim = BTreeMap::new();
        for (k, v) in &self.minimum_reclaim {
            let signal = Signal::parse(k).ok_or_else(|| unsupported(k))?;
            if v.starts_with('-') {
                return Err(format!("negative reclaim defined for {k}: {v}"));
            }
            if let Some(v) = parse_value(signal, v)? {
                min_reclaim.insert(signal, v);
            }
        }
        let mut grace = BTreeMap::new();
        for (k, v) in &self.soft_grace_period {
            let signal = Signal::parse(k).ok_or_else(|| unsupported(k))?;
            let d = klab_api::duration::parse_duration(v)?;
            grace.insert(signal, d);
        }
        let mut out = Vec::new();
        for (map, soft) in [(&self.hard, false), (&self.soft, true)] {
            let mut parsed: Vec<(Signal, ThresholdValue)> = Vec::new();
            for (k, v) in map {
                let signal = Signal::parse(k).ok_or_else(|| unsupported(k))?;
                if let Some(value) = parse_value(signal, v)? {
                    parsed.push((signal, value));
                }
            }
            parsed.sort_by_key(|(s, _)| *s);
            for (signal, value) in parsed {
                let grace_period = if soft {
                    match grace.get(&signal) {
                        Some(d) if !d.is_zero() => *d,
                        _ => {
                            return Err(format!(
                                "grace period must be specified for the soft eviction threshold {}",
                                signal.name()
                            ));
                        }
                    }
                } else {
                    Duration::ZERO
                };
                out.push(Threshold {
                    signal,
                    value,
                    grace_period,
                    min_reclaim: min_reclaim.get(&signal).copied(),
                });
            }
        }
        Ok(out)
    }

    /// The transition period after defaulting.
    pub fn transition_period(&self) -> Duration {
        if self.pressure_transition_period.is_zero() {
            PRESSURE_TRANSITION_PERIOD
        } else {
            self.pressure_transition_period
        }
    }
}

/// Parses a kubelet flag in upstream's flag syntax into a signal → value map:
/// `--eviction-hard`/`--eviction-soft` as `memory.available<100Mi,nodefs.available<10%`,
/// `--eviction-soft-grace-period`/`--eviction-minimum-reclaim` as `memory.available=1m30s`.
pub fn parse_flag_map(value: &str, operator: char) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for statement in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = statement.split(operator).collect();
        let [signal, v] = parts.as_slice() else {
            return Err(if operator == '<' {
                format!(
                    "invalid eviction threshold syntax {statement}, expected <signal><operator><value>"
                )
            } else {
                format!(
                    "invalid eviction grace period syntax {statement}, expected <signal>=<duration>"
                )
            });
        };
        out.insert(signal.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// One signal as observed: what is available and the capacity percentages refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// Whether `t` is met by `obs`: `available < value` (+ min-reclaim when `enforce_min_reclaim`,
/// so a threshold stays met until min-reclaim is satisfied).
pub fn threshold_met(t: &Threshold, obs: &Observation, enforce_min_reclaim: bool) -> bool {
    let mut value = t.value.resolve(obs.capacity);
    if enforce_min_reclaim && let Some(r) = t.min_reclaim {
        value = value.saturating_add(r.resolve(obs.capacity));
    }
    obs.available < value
}

/// The eviction manager's memory between `synchronize` rounds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvictionState {
    /// Met thresholds (index into the threshold list) → when first observed met.
    pub first_observed: BTreeMap<usize, Timestamp>,
    /// Pressure → last time a threshold of it was met.
    pub last_observed: BTreeMap<Pressure, Timestamp>,
}

/// One `synchronize` decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// Conditions to report (met now, or within the transition period).
    pub pressures: Vec<Pressure>,
    /// The threshold to act on (met past its grace period), memory first.
    pub act_on: Option<usize>,
}

/// `synchronize` steps 3–8 at `now`: updates `state` and says what to report and act on.
/// `observe` gives the observation of a signal (`None`: no stats, the threshold is skipped).
pub fn synchronize(
    thresholds: &[Threshold],
    observe: impl Fn(Signal) -> Option<Observation>,
    state: &mut EvictionState,
    now: Timestamp,
    transition_period: Duration,
) -> Round {
    let mut met = Vec::new();
    for (i, t) in thresholds.iter().enumerate() {
        let Some(obs) = observe(t.signal) else {
            continue;
        };
        let was_met = state.first_observed.contains_key(&i);
        if threshold_met(t, &obs, was_met) {
            met.push(i);
        }
    }
    state.first_observed.retain(|i, _| met.contains(i));
    for &i in &met {
        state.first_observed.entry(i).or_insert(now);
        state
            .last_observed
            .insert(thresholds[i].signal.pressure(), now);
    }
    // A condition is reported while a threshold of it was met within the transition period
    // (met now: observed at `now`, so always).
    let pressures: Vec<Pressure> = state
        .last_observed
        .iter()
        .filter(|(_, at)| {
            let since = now.duration_since(**at);
            since.is_negative() || Duration::try_from(since).is_ok_and(|d| d < transition_period)
        })
        .map(|(p, _)| *p)
        .collect();
    let mut eligible: Vec<usize> = met
        .into_iter()
        .filter(|i| {
            let first = state.first_observed[i];
            Duration::try_from(now.duration_since(first))
                .is_ok_and(|d| d >= thresholds[*i].grace_period)
        })
        .collect();
    eligible.sort_by_key(|i| (thresholds[*i].signal.rank(), *i));
    Round {
        pressures,
        act_on: eligible.first().copied(),
    }
}

/// What the ranking and the eviction message need to know about one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodUsage {
    pub name: String,
    /// `spec.priority` (nil = 0).
    pub priority: i32,
    /// Static or mirror pod.
    pub is_static: bool,
    /// Per container: (name, usage, request) of the signal's resource; `None` usage = no stats.
    /// For the disk signals a container's usage is its writable layer and its logs.
    pub containers: Vec<(String, Option<u64>, u64)>,
    /// Disk signals: the pod's emptyDir contents, which the ranking counts with its containers'
    /// (upstream's `fsStatsLocalVolumeSource`) and the message names nowhere. 0 otherwise.
    pub local_volumes: u64,
}

impl PodUsage {
    fn usage(&self) -> Option<u64> {
        self.containers
            .iter()
            .try_fold(self.local_volumes, |acc, (_, u, _)| {
                u.map(|u| acc.saturating_add(u))
            })
    }
    fn request(&self) -> u64 {
        self.containers
            .iter()
            .fold(0u64, |acc, (_, _, r)| acc.saturating_add(*r))
    }
}

/// `IsCriticalPod`: static/mirror pods and priority ≥ `SystemCriticalPriority` are never evicted.
pub fn is_critical(p: &PodUsage) -> bool {
    p.is_static || p.priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Ranks pods for eviction (first = evicted first). Memory and disk: usage above request first
/// (pods without stats first of all), then lower priority, then larger `usage − request`. PIDs:
/// lower priority, then more processes. Ties keep the input order (the caller sorts by name).
pub fn rank(signal: Signal, pods: &[PodUsage]) -> Vec<usize> {
    let mut keyed: Vec<((u8, i32, i128), usize)> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let usage = p.usage();
            let request = p.request();
            let key = match signal {
                Signal::PidAvailable => (0, p.priority, -i128::from(usage.unwrap_or(0))),
                _ => {
                    let exceeds = match usage {
                        None => 0,
                        Some(u) if u > request => 1,
                        Some(_) => 2,
                    };
                    let over = i128::from(usage.unwrap_or(0)) - i128::from(request);
                    (exceeds, p.priority, -over)
                }
            };
            (key, i)
        })
        .collect();
    keyed.sort_by_key(|(k, i)| (*k, *i));
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// The kill override of an eviction: 1 s for a hard threshold; for a soft one
/// `evictionMaxPodGracePeriod`, shortened by the pod's own `terminationGracePeriodSeconds`.
pub fn eviction_grace(hard: bool, max_pod_grace_period: i64, tgps: Option<i64>) -> i64 {
    if hard {
        return IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS;
    }
    match tgps {
        Some(t) if t < max_pod_grace_period => t,
        _ => max_pod_grace_period,
    }
}

fn format_quantity(signal: Signal, v: u64) -> String {
    if signal.is_bytes() {
        format_bytes(v)
    } else {
        v.to_string()
    }
}

/// The eviction message (`evictionMessage`), trailing space included.
pub fn eviction_message(signal: Signal, threshold: u64, available: u64, pod: &PodUsage) -> String {
    let resource = signal.resource();
    let mut m = format!(
        "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
        format_quantity(signal, threshold),
        format_quantity(signal, available)
    );
    for (name, usage, request) in &pod.containers {
        if let Some(u) = usage
            && u > request
        {
            m.push_str(&format!(
                "Container {name} was using {}, request is {}, has larger consumption of {resource}. ",
                format_quantity(signal, *u),
                format_quantity(signal, *request)
            ));
        }
    }
    m
}

/// Admission under pressure: `Ok` to admit, else the rejection message
/// (`The node had condition: [DiskPressure]. `). Critical pods are always admitted; under
/// memory pressure alone only BestEffort pods that do not tolerate
/// `node.kubernetes.io/memory-pressure:NoSchedule` are rejected.
pub fn admit(
    pressures: &[Pressure],
    critical: bool,
    best_effort: bool,
    tolerates_memory_pressure: bool,
) -> Result<(), String> {
    if pressures.is_empty() || critical {
        return Ok(());
    }
    if pressures == [Pressure::Memory] && (!best_effort || tolerates_memory_pressure) {
        return Ok(());
    }
    let conds: Vec<&str> = pressures.iter().map(|p| p.condition()).collect();
    Err(format!("The node had condition: [{}]. ", conds.join(" ")))
}

/// A quantity as `resource.Quantity.String()` prints it after a round trip through the API:
/// binary-suffixed values in the largest binary unit that divides them (`2048Mi` → `2Gi`),
/// others in the largest decimal one (`1000M` → `1G`). `None` for a value that does not parse.
pub fn canonical_quantity(spec: &str) -> Option<String> {
    let b = bytes(spec)?;
    if spec.trim_end().ends_with('i') {
        return Some(format_bytes(b));
    }
    if b == 0 {
        return Some("0".into());
    }
    for (suffix, unit) in [
        ("E", 1_000_000_000_000_000_000u64),
        ("P", 1_000_000_000_000_000),
        ("T", 1_000_000_000_000),
        ("G", 1_000_000_000),
        ("M", 1_000_000),
        ("k", 1_000),
    ] {
        if b.is_multiple_of(unit) {
            return Some(format!("{}{suffix}", b / unit));
        }
    }
    Some(b.to_string())
}

/// One pod's local ephemeral storage as `localStorageEviction` reads it: each container's use
/// (writable layer and logs) against its `ephemeral-storage` limit, each emptyDir's use against
/// its `sizeLimit`, and the pod's total (containers and local volumes) against the sum of its
/// containers' limits. Limits are (bytes, the quantity as written).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodStorage {
    pub containers: Vec<StorageUse>,
    /// emptyDir volumes, against their `sizeLimit`.
    pub empty_dirs: Vec<StorageUse>,
}

/// (container or volume name, bytes used, limit as (bytes, the quantity as written)).
pub type StorageUse = (String, u64, Option<(u64, String)>);

/// The message of a local-storage eviction, when the pod breaks a limit; checked in upstream's
/// order: an emptyDir over its size limit, the pod over its containers' total limit, a
/// container over its own limit. Usage equal to a limit is within it.
pub fn local_storage_violation(p: &PodStorage) -> Option<String> {
    for (name, used, limit) in &p.empty_dirs {
        if let Some((limit, text)) = limit
            && *limit > 0
            && used > limit
        {
            return Some(format!(
                "Usage of EmptyDir volume {name:?} exceeds the limit {:?}. ",
                canonical_quantity(text).unwrap_or_else(|| text.clone())
            ));
        }
    }
    let limits: Vec<u64> = p
        .containers
        .iter()
        .filter_map(|(_, _, l)| l.as_ref().map(|(b, _)| *b))
        .collect();
    if !limits.is_empty() {
        let total_limit = limits.iter().fold(0u64, |a, b| a.saturating_add(*b));
        let used = p
            .containers
            .iter()
            .map(|(_, u, _)| *u)
            .chain(p.empty_dirs.iter().map(|(_, u, _)| *u))
            .fold(0u64, |a, b| a.saturating_add(b));
        if used > total_limit {
            return Some(format!(
                "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
                format_bytes(total_limit)
            ));
        }
    }
    for (name, used, limit) in &p.containers {
        if let Some((limit, text)) = limit
            && used > limit
        {
            return Some(format!(
                "Container {name} exceeded its local ephemeral storage limit {:?}. ",
                canonical_quantity(text).unwrap_or_else(|| text.clone())
            ));
        }
    }
    None
}

/// Whether a signal's pressure can be relieved at node level first (deleting unused images
/// and dead containers): the disk signals, on a node whose one disk holds both filesystems.
pub fn reclaims_at_node_level(signal: Signal) -> bool {
    signal.pressure() == Pressure::Disk
}

/// After node-level reclaim: whether pods must still be evicted — some threshold is still met
/// (met thresholds compared with their minimum reclaim added).
pub fn still_needs_eviction(
    thresholds: &[Threshold],
    observe: impl Fn(Signal) -> Option<Observation>,
) -> bool {
    thresholds
        .iter()
        .any(|t| observe(t.signal).is_some_and(|o| threshold_met(t, &o, true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    #[test]
    fn default_thresholds_are_upstreams_linux_ones() {
        let t = EvictionConfig::default().thresholds().unwrap();
        let got: Vec<(&str, ThresholdValue, bool)> = t
            .iter()
            .map(|t| (t.signal.name(), t.value, t.is_hard()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("memory.available", ThresholdValue::Quantity(100 * MI), true),
                ("nodefs.available", ThresholdValue::Percentage(0.1), true),
                ("nodefs.inodesFree", ThresholdValue::Percentage(0.05), true),
                ("imagefs.available", ThresholdValue::Percentage(0.15), true),
                ("imagefs.inodesFree", ThresholdValue::Percentage(0.05), true),
            ]
        );
    }

    #[test]
    fn bad_thresholds_get_upstreams_errors() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "memory.available",
                "-5%",
                "eviction percentage threshold memory.available must be >= 0%: -5%",
            ),
            (
                "memory.available",
                "150%",
                "eviction percentage threshold memory.available must be <= 100%: 150%",
            ),
            (
                "memory.available",
                "ten%",
                "strconv.ParseFloat: parsing \"ten\": invalid syntax",
            ),
            (
                "memory.available",
                "0",
                "eviction threshold memory.available must be positive: 0",
            ),
            (
                "memory.available",
                "-1Gi",
                "eviction threshold memory.available must be positive: -1Gi",
            ),
            (
                "memory.available",
                "lots",
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                "memory.free",
                "1Gi",
                "unsupported eviction signal memory.free",
            ),
        ];
        for (k, v, want) in cases {
            let c = EvictionConfig {
                hard: [(k.to_string(), v.to_string())].into(),
                ..Default::default()
            };
            assert_eq!(c.thresholds().unwrap_err(), *want, "{k}={v}");
        }
        // 0% and 100% disable a signal.
        let c = EvictionConfig {
            hard: [("nodefs.available".to_string(), "0%".to_string())].into(),
            ..Default::default()
        };
        assert!(c.thresholds().unwrap().is_empty());
        // A soft threshold needs its grace period.
        let c = EvictionConfig {
            hard: BTreeMap::new(),
            soft: [("memory.available".to_string(), "500Mi".to_string())].into(),
            ..Default::default()
        };
        assert_eq!(
            c.thresholds().unwrap_err(),
            "grace period must be specified for the soft eviction threshold memory.available"
        );
    }

    fn pid_config() -> Vec<Threshold> {
        // N-59: hard pid.available<1200, soft <1500 with 2m.
        EvictionConfig {
            hard: [("pid.available".to_string(), "1200".to_string())].into(),
            soft: [("pid.available".to_string(), "1500".to_string())].into(),
            soft_grace_period: [("pid.available".to_string(), "2m".to_string())].into(),
            ..Default::default()
        }
        .thresholds()
        .unwrap()
    }

    #[test]
    fn pid_pressure_timeline_of_n59() {
        let t = pid_config();
        let mut st = EvictionState::default();
        let round = |avail: u64, s: i64, st: &mut EvictionState| {
            synchronize(
                &t,
                |_| {
                    Some(Observation {
                        available: avail,
                        capacity: 2000,
                    })
                },
                st,
                at(s),
                PRESSURE_TRANSITION_PERIOD,
            )
        };
        // t=0: 1700 available, nothing.
        let r = round(1700, 0, &mut st);
        assert_eq!((r.pressures.clone(), r.act_on), (vec![], None));
        // 1m: 1300 < 1500 soft: pressure, no action before the 2m grace.
        let r = round(1300, 60, &mut st);
        assert_eq!((r.pressures.clone(), r.act_on), (vec![Pressure::Pid], None));
        let r = round(1300, 179, &mut st);
        assert_eq!(r.act_on, None);
        // 3m after first observed at 1m: the soft threshold acts.
        let r = round(1300, 180, &mut st);
        assert_eq!(r.act_on, Some(1));
        assert!(!t[1].is_hard());
        // 24m: relieved for long: no pressure.
        let r = round(1700, 24 * 60, &mut st);
        assert_eq!((r.pressures.clone(), r.act_on), (vec![], None));
        // 25m: 800 < 1200: the hard one acts at once.
        let r = round(800, 25 * 60, &mut st);
        assert_eq!(r.act_on, Some(0));
        assert!(t[0].is_hard());
        // 26m: relieved, still reported for 5m after the last breach (25m); not at 30m, 31m.
        let r = round(1700, 26 * 60, &mut st);
        assert_eq!((r.pressures.clone(), r.act_on), (vec![Pressure::Pid], None));
        let r = round(1700, 29 * 60 + 59, &mut st);
        assert_eq!(r.pressures, vec![Pressure::Pid]);
        let r = round(1700, 30 * 60, &mut st);
        assert_eq!(r.pressures, vec![]);
        let r = round(1700, 31 * 60, &mut st);
        assert_eq!(r.pressures, vec![]);
    }

    #[test]
    fn min_reclaim_keeps_a_met_threshold_met() {
        let t = [Threshold {
            signal: Signal::NodeFsAvailable,
            value: ThresholdValue::Quantity(GI),
            grace_period: Duration::ZERO,
            min_reclaim: Some(ThresholdValue::Quantity(500 * MI)),
        }];
        let obs = |a: u64| Observation {
            available: a,
            capacity: 100 * GI,
        };
        assert!(!threshold_met(&t[0], &obs(1100 * MI), false));
        assert!(threshold_met(&t[0], &obs(1100 * MI), true));
        assert!(!threshold_met(&t[0], &obs(1600 * MI), true));
        // Percentages are of the capacity: 10% of 100Gi.
        let pct = Threshold {
            value: ThresholdValue::Percentage(0.1),
            min_reclaim: None,
            ..t[0].clone()
        };
        assert!(threshold_met(&pct, &obs(10 * GI - 1), false));
        assert!(!threshold_met(&pct, &obs(10 * GI), false));
    }

    fn pu(name: &str, priority: i32, usage: u64, request: u64) -> PodUsage {
        PodUsage {
            name: name.into(),
            priority,
            is_static: false,
            containers: vec![(name.into(), Some(usage), request)],
            local_volumes: 0,
        }
    }

    #[test]
    fn ranking_of_n59_n62_and_n67() {
        let names = |s: Signal, pods: &[PodUsage]| -> Vec<String> {
            rank(s, pods)
                .into_iter()
                .map(|i| pods[i].name.clone())
                .collect()
        };
        // N-59 (PIDs): lower priority first, then more processes.
        let pods = vec![
            pu("high-priority-high-usage", 1, 900, 0),
            pu("default-priority-low-usage", 0, 100, 0),
            pu("default-priority-medium-usage", 0, 400, 0),
            pu("low-priority-high-usage", -1, 600, 0),
            pu("low-priority-low-usage", -1, 50, 0),
        ];
        assert_eq!(
            names(Signal::PidAvailable, &pods),
            vec![
                "low-priority-high-usage",
                "low-priority-low-usage",
                "default-priority-medium-usage",
                "default-priority-low-usage",
                "high-priority-high-usage"
            ]
        );
        // N-67 (memory): over request first, then priority, then usage − request.
        let pods = vec![
            pu("guar", 0, 900 * MI, GI),
            pu("be-small", 0, 100 * MI, 0),
            pu("burst", 0, 600 * MI, 512 * MI),
            pu("be-big", 0, 1536 * MI, 0),
        ];
        assert_eq!(
            names(Signal::MemoryAvailable, &pods),
            vec!["be-big", "be-small", "burst", "guar"]
        );
        // N-62 (nodefs): no ephemeral-storage requests, so every pod exceeds its request; then
        // lower priority, then more usage — the writable layer, the logs and the local volumes
        // all count. `low-priority-high-usage` is the victim.
        let logs_only = pu("below-requests", 0, 50 * MI, 0);
        let mut volume_only = pu("high-priority-high-usage", 1, 0, 0);
        volume_only.local_volumes = 400 * MI;
        let pods = vec![
            pu("low-priority-high-usage", -1, 900 * MI, 0),
            logs_only,
            pu("above-requests", 0, 400 * MI, 0),
            volume_only,
            pu("low-priority-low-usage", -1, 100 * MI, 0),
        ];
        assert_eq!(
            names(Signal::NodeFsAvailable, &pods),
            vec![
                "low-priority-high-usage",
                "low-priority-low-usage",
                "above-requests",
                "below-requests",
                "high-priority-high-usage"
            ]
        );
        // A pod whose only use is a local volume still exceeds a zero request, and its volume
        // orders it among its priority: 400Mi of emptyDir before 50Mi of logs.
        let mut vol = pu("vol", 0, 0, 0);
        vol.local_volumes = 400 * MI;
        let pods = vec![pu("logs", 0, 50 * MI, 0), vol];
        assert_eq!(names(Signal::NodeFsAvailable, &pods), vec!["vol", "logs"]);
        // ... but the message names only containers over their requests.
        assert_eq!(
            eviction_message(Signal::NodeFsAvailable, GI, 200 * MI, &pods[1]),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 200Mi. "
        );
        // Pods without stats come first of all.
        let mut nostats = pu("nostats", 5, 0, 0);
        nostats.containers[0].1 = None;
        let pods = vec![pu("be-big", 0, 1536 * MI, 0), nostats];
        assert_eq!(names(Signal::MemoryAvailable, &pods)[0], "nostats");
    }

    #[test]
    fn critical_pods_grace_and_messages() {
        // N-64: static pods and priority ≥ 2000000000 are never evicted.
        assert!(is_critical(&pu("c", SYSTEM_CRITICAL_PRIORITY, 0, 0)));
        let mut s = pu("kube-proxy-n1", 0, 0, 0);
        s.is_static = true;
        assert!(is_critical(&s));
        assert!(!is_critical(&pu("web", 1_000_000_000, 0, 0)));
        // N-68 / §7.6.
        assert_eq!(eviction_grace(true, 60, Some(30)), 1);
        assert_eq!(eviction_grace(false, 0, Some(30)), 0);
        assert_eq!(eviction_grace(false, 60, Some(30)), 30);
        assert_eq!(eviction_grace(false, 20, Some(30)), 20);
        assert_eq!(eviction_grace(false, 20, None), 20);
        // N-58 texts.
        let none = PodUsage {
            containers: vec![],
            ..pu("p", 0, 0, 0)
        };
        assert_eq!(
            eviction_message(Signal::MemoryAvailable, 2 * GI, 1500 * MI, &none),
            "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. "
        );
        assert_eq!(
            eviction_message(Signal::PidAvailable, 1200, 500, &none),
            "The node was low on resource: pids. Threshold quantity: 1200, available: 500. "
        );
        assert_eq!(
            eviction_message(
                Signal::NodeFsAvailable,
                2 * GI,
                1536 * MI,
                &pu("above-requests", 0, 700 * MI, 100 * MI)
            ),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1536Mi. Container above-requests was using 700Mi, request is 100Mi, has larger consumption of ephemeral-storage. "
        );
        // N-67: the default threshold, a BestEffort container.
        let mut be = pu("be-big", 0, 1536 * MI, 0);
        be.containers[0].0 = "app".into();
        assert_eq!(
            eviction_message(Signal::MemoryAvailable, 100 * MI, 80 * MI, &be),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container app was using 1536Mi, request is 0, has larger consumption of memory. "
        );
    }

    #[test]
    fn flag_syntax() {
        assert_eq!(
            parse_flag_map("memory.available<500Mi, nodefs.available<10%", '<').unwrap(),
            [
                ("memory.available".to_string(), "500Mi".to_string()),
                ("nodefs.available".to_string(), "10%".to_string())
            ]
            .into()
        );
        assert_eq!(
            parse_flag_map("memory.available>500Mi", '<').unwrap_err(),
            "invalid eviction threshold syntax memory.available>500Mi, expected <signal><operator><value>"
        );
        assert!(parse_flag_map("memory.available=1m30s", '=').is_ok());
    }

    #[test]
    fn admission_under_pressure() {
        use Pressure::*;
        assert!(admit(&[], false, true, false).is_ok());
        // Memory pressure alone: only BestEffort pods that do not tolerate it are refused.
        assert!(admit(&[Memory], false, false, false).is_ok());
        assert!(admit(&[Memory], false, true, true).is_ok());
        assert_eq!(
            admit(&[Memory], false, true, false).unwrap_err(),
            "The node had condition: [MemoryPressure]. "
        );
        // Any other pressure refuses every non-critical pod.
        assert_eq!(
            admit(&[Disk], false, false, false).unwrap_err(),
            "The node had condition: [DiskPressure]. "
        );
        assert_eq!(
            admit(&[Memory, Pid], false, false, true).unwrap_err(),
            "The node had condition: [MemoryPressure PIDPressure]. "
        );
        assert!(admit(&[Disk, Pid], true, true, false).is_ok());
    }

    #[test]
    fn local_storage_limits_of_n65() {
        let lim = |q: &str| Some((bytes(q).unwrap(), q.to_string()));
        // One container over its 1Gi limit: the pod total (the same 1Gi) is checked first.
        let rootfs = PodStorage {
            containers: vec![("app".into(), 2 * GI, lim("1Gi"))],
            empty_dirs: vec![],
        };
        assert_eq!(
            local_storage_violation(&rootfs).as_deref(),
            Some("Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. ")
        );
        // An emptyDir over its sizeLimit comes first of all.
        let vol = PodStorage {
            containers: vec![("app".into(), 10 * MI, lim("1Gi"))],
            empty_dirs: vec![("emptyDirVolume".into(), 2 * GI, lim("1Gi"))],
        };
        assert_eq!(
            local_storage_violation(&vol).as_deref(),
            Some("Usage of EmptyDir volume \"emptyDirVolume\" exceeds the limit \"1Gi\". ")
        );
        // Several containers: the pod total holds, one container is over its own limit.
        let multi = PodStorage {
            containers: vec![
                ("idle".into(), 0, lim("3Gi")),
                ("writer".into(), 1536 * MI, lim("1024Mi")),
            ],
            empty_dirs: vec![],
        };
        assert_eq!(
            local_storage_violation(&multi).as_deref(),
            Some("Container writer exceeded its local ephemeral storage limit \"1Gi\". ")
        );
        // A container without a limit, the emptyDir without sizeLimit, usage at the limit: fine.
        let ok = PodStorage {
            containers: vec![
                ("free".into(), 50 * GI, None),
                ("capped".into(), GI, lim("1Gi")),
            ],
            empty_dirs: vec![
                ("scratch".into(), 9 * GI, None),
                ("zero".into(), GI, lim("0")),
            ],
        };
        // The pod total counts the unlimited container too: 51Gi + 10Gi over the 1Gi sum.
        assert_eq!(
            local_storage_violation(&ok).as_deref(),
            Some("Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. ")
        );
        let ok = PodStorage {
            containers: vec![("capped".into(), GI, lim("1Gi"))],
            empty_dirs: vec![("zero".into(), 0, lim("0"))],
        };
        assert_eq!(local_storage_violation(&ok), None);
        assert_eq!(local_storage_violation(&PodStorage::default()), None);
        // Decimal limits print in decimal units.
        let dec = PodStorage {
            containers: vec![
                ("a".into(), 0, lim("5G")),
                ("b".into(), 2_000_000_000, lim("1000M")),
            ],
            empty_dirs: vec![],
        };
        assert_eq!(
            local_storage_violation(&dec).as_deref(),
            Some("Container b exceeded its local ephemeral storage limit \"1G\". ")
        );
    }

    #[test]
    fn canonical_quantities() {
        for (q, want) in [
            ("1Gi", "1Gi"),
            ("2048Mi", "2Gi"),
            ("1536Mi", "1536Mi"),
            ("1000M", "1G"),
            ("1500M", "1500M"),
            ("500", "500"),
            ("2000000000", "2G"),
            ("0", "0"),
        ] {
            assert_eq!(canonical_quantity(q).as_deref(), Some(want), "{q}");
        }
        assert_eq!(canonical_quantity("lots"), None);
    }

    #[test]
    fn reclaim_first_then_evict_only_if_still_met_n61() {
        // hard nodefs.available<1Gi, minimum reclaim 500Mi.
        let t = [Threshold {
            signal: Signal::NodeFsAvailable,
            value: ThresholdValue::Quantity(GI),
            grace_period: Duration::ZERO,
            min_reclaim: Some(ThresholdValue::Quantity(500 * MI)),
        }];
        let obs = |a: u64| {
            move |_| {
                Some(Observation {
                    available: a,
                    capacity: 100 * GI,
                })
            }
        };
        assert!(reclaims_at_node_level(Signal::NodeFsAvailable));
        assert!(reclaims_at_node_level(Signal::ImageFsInodesFree));
        assert!(!reclaims_at_node_level(Signal::MemoryAvailable));
        assert!(!reclaims_at_node_level(Signal::PidAvailable));
        // GC brought 16Gi back: no pod evicted.
        assert!(!still_needs_eviction(&t, obs(16 * GI)));
        // GC reached 1.1Gi: above 1Gi but below 1Gi + 500Mi: still evict.
        assert!(still_needs_eviction(&t, obs(1126 * MI)));
        // GC freed nothing.
        assert!(still_needs_eviction(&t, obs(750 * MI)));
        // No stats: nothing is met.
        assert!(!still_needs_eviction(&t, |_| None));
    }
}
