//! The resource-usage model of a simulated container over virtual time: memory working set,
//! CPU, ephemeral storage and PIDs, derived from the container's requests unless its pod's
//! `usage.klab.dev/<container>` annotation says otherwise, with optional linear growth (a leak),
//! and when the kernel's memory cgroup would OOM-kill it.
//!
//! Defaults (documented in `docs/usage.md`): a container's working set is its memory request,
//! its CPU usage its CPU request, its ephemeral storage its ephemeral-storage request, and it runs
//! one process; nothing grows. A container without a memory or CPU request still runs: it uses
//! the idle baseline ([`IDLE_MEMORY_BYTES`], [`IDLE_CPU_MILLIS`]), as a real running container
//! always has some working set and has used some CPU (metrics-server leaves out a pod with a
//! container at zero, so without it such pods would be missing from `kubectl top pods`).
//!
//! The annotation is a comma-separated list of `key=value`: `memory`, `cpu`, `ephemeral-storage`
//! and `pids` set the amount at the container's start (and at every change of the annotation:
//! the model is re-anchored then), `memory-growth` and `ephemeral-storage-growth` a rate such as
//! `10Mi/min` (per `s`, `min` or `h`); `log-growth` the rate at which the container writes to
//! its stdout/stderr log (see [`LogRotation`]); `image-size` is the size of the container's image
//! when the kubelet pulls it ([`crate::images`]). A value that does not parse refuses the whole
//! annotation with a message naming it; the kubelet then keeps the model it had.
//!
//! Container logs: upstream's kubelet counts a container's log files in its ephemeral storage
//! (`containers[].logs` of the Summary API, the pod's `ephemeral-storage`, the local-storage limit
//! checks and the node filesystem) and rotates them (the container log manager, every 10 s: a log
//! at `containerLogMaxSize` or more becomes a rotated file, and only `containerLogMaxFiles` files
//! are kept). The model writes `log-growth` bytes per unit of time and keeps the files' sizes.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::quantity::{bytes, cpu_millis};

/// Annotation prefix of a container's modelled usage: `usage.klab.dev/<container>:
/// "memory=100Mi,memory-growth=10Mi/min"`.
pub const USAGE_ANNOTATION_PREFIX: &str = "usage.klab.dev/";

/// Annotation prefix of an emptyDir volume's modelled contents: `usage.klab.dev/volume.<name>:
/// "ephemeral-storage=2Gi,ephemeral-storage-growth=10Mi/s"` (container names cannot hold a dot,
/// so the two never meet).
pub const VOLUME_ANNOTATION_PREFIX: &str = "usage.klab.dev/volume.";

/// Parses a volume's usage annotation: only `ephemeral-storage` and `ephemeral-storage-growth`.
pub fn parse_volume_annotation(v: &str) -> Result<UsageSpec, String> {
    let o = parse_annotation(v)?;
    if o.memory.is_some()
        || o.memory_growth.is_some()
        || o.log_growth.is_some()
        || o.cpu_millis.is_some()
        || o.pids.is_some()
        || o.image_size.is_some()
    {
        return Err(
            "a volume's usage takes only ephemeral-storage and ephemeral-storage-growth".into(),
        );
    }
    Ok(UsageSpec {
        ephemeral_storage: o.ephemeral_storage.unwrap_or(0),
        ephemeral_storage_growth: o.ephemeral_storage_growth,
        ..Default::default()
    })
}

/// Reason of a container killed by the memory cgroup's OOM killer (`state.terminated.reason`).
pub const REASON_OOM_KILLED: &str = "OOMKilled";

/// Reason of the Warning event on a pod whose usage annotation is refused.
pub const REASON_INVALID_USAGE: &str = "InvalidUsage";

/// The annotation keys, in the order error messages list them.
pub const KEYS: [&str; 8] = [
    "memory",
    "memory-growth",
    "cpu",
    "ephemeral-storage",
    "ephemeral-storage-growth",
    "log-growth",
    "pids",
    "image-size",
];

/// A linear growth: `amount` bytes every `per_ms` milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    pub amount: u64,
    pub per_ms: u64,
}

impl Rate {
    /// Growth over `elapsed_ms`, rounded down, saturating.
    pub fn over(self, elapsed_ms: u64) -> u64 {
        if self.per_ms == 0 {
            return 0;
        }
        let v = u128::from(self.amount).saturating_mul(u128::from(elapsed_ms))
            / u128::from(self.per_ms);
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// Milliseconds until the growth reaches `gap` (rounded up); `None` when it never does.
    pub fn time_to(self, gap: u64) -> Option<u64> {
        if self.amount == 0 {
            return None;
        }
        let num = u128::from(gap).saturating_mul(u128::from(self.per_ms));
        let ms = num.div_ceil(u128::from(self.amount));
        u64::try_from(ms).ok()
    }
}

/// What a container uses at its anchor (start, or the last change of its annotation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSpec {
    /// Memory working set, bytes.
    pub memory: u64,
    pub memory_growth: Option<Rate>,
    /// CPU, millicores.
    pub cpu_millis: u64,
    /// Writable layer, bytes.
    pub ephemeral_storage: u64,
    pub ephemeral_storage_growth: Option<Rate>,
    /// What the container writes to its log (stdout and stderr).
    #[serde(default)]
    pub log_growth: Option<Rate>,
    pub pids: u64,
}

/// The annotation's values; absent keys keep the default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub memory: Option<u64>,
    pub memory_growth: Option<Rate>,
    pub cpu_millis: Option<u64>,
    pub ephemeral_storage: Option<u64>,
    pub ephemeral_storage_growth: Option<Rate>,
    pub log_growth: Option<Rate>,
    pub pids: Option<u64>,
    /// The size of the container's image when the kubelet pulls it (see [`crate::images`]).
    pub image_size: Option<u64>,
}

/// Parses a rate `10Mi/min` (per `s`, `min` or `h`).
pub fn parse_rate(v: &str) -> Option<Rate> {
    let (q, unit) = v.trim().rsplit_once('/')?;
    let per_ms = match unit.trim() {
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    Some(Rate {
        amount: bytes(q.trim())?,
        per_ms,
    })
}

/// Parses an annotation value strictly: every item must be a known `key=value` whose value
/// parses; the first that does not refuses the whole value.
pub fn parse_annotation(v: &str) -> Result<Overrides, String> {
    let mut o = Overrides::default();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, val)) = item.split_once('=') else {
            return Err(format!("invalid usage {item:?}: expected key=value"));
        };
        let (k, val) = (k.trim(), val.trim());
        let bad_quantity = || format!("invalid {k} {val:?}: not a quantity");
        let bad_rate =
            || format!("invalid {k} {val:?}: a rate is a quantity per s, min or h (10Mi/min)");
        match k {
            "memory" => o.memory = Some(bytes(val).ok_or_else(bad_quantity)?),
            "ephemeral-storage" => o.ephemeral_storage = Some(bytes(val).ok_or_else(bad_quantity)?),
            "cpu" => o.cpu_millis = Some(cpu_millis(val).ok_or_else(bad_quantity)?),
            "pids" => {
                o.pids = Some(
                    val.parse::<u64>()
                        .map_err(|_| format!("invalid pids {val:?}: not a count"))?,
                )
            }
            "image-size" => o.image_size = Some(bytes(val).ok_or_else(bad_quantity)?),
            "memory-growth" => o.memory_growth = Some(parse_rate(val).ok_or_else(bad_rate)?),
            "ephemeral-storage-growth" => {
                o.ephemeral_storage_growth = Some(parse_rate(val).ok_or_else(bad_rate)?)
            }
            "log-growth" => o.log_growth = Some(parse_rate(val).ok_or_else(bad_rate)?),
            _ => {
                return Err(format!(
                    "unknown usage key {k:?} (known: {})",
                    KEYS.join(", ")
                ));
            }
        }
    }
    Ok(o)
}

/// A container's requests and limits as the model needs them (bytes, millicores).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub memory_request: Option<u64>,
    pub memory_limit: Option<u64>,
    pub cpu_request: Option<u64>,
    pub ephemeral_storage_request: Option<u64>,
    pub ephemeral_storage_limit: Option<u64>,
}

impl Resources {
    /// Reads a container spec's resources (unparsable quantities count as absent: validation
    /// refused them before the pod was stored).
    pub fn of(c: &k8s_openapi::api::core::v1::Container) -> Resources {
        let r = c.resources.as_ref();
        let get = |limits: bool, name: &str, parse: fn(&str) -> Option<u64>| {
            r.and_then(|r| {
                if limits {
                    r.limits.as_ref()
                } else {
                    r.requests.as_ref()
                }
            })
            .and_then(|m| m.get(name))
            .and_then(|q| parse(&q.0))
        };
        // A limit without a request defaults the request to the limit (API defaulting).
        let memory_limit = get(true, "memory", bytes);
        let storage_limit = get(true, "ephemeral-storage", bytes);
        Resources {
            memory_request: get(false, "memory", bytes).or(memory_limit),
            memory_limit,
            cpu_request: get(false, "cpu", cpu_millis).or(get(true, "cpu", cpu_millis)),
            ephemeral_storage_request: get(false, "ephemeral-storage", bytes).or(storage_limit),
            ephemeral_storage_limit: storage_limit,
        }
    }
}

/// Working set of a running container without a memory request (nor annotation): an idle
/// process's resident pages and the runtime's page cache for it, about what `kubectl top` shows
/// for an idle busybox or pause container.
pub const IDLE_MEMORY_BYTES: u64 = 1 << 20;
/// CPU of a running container without a CPU request (nor annotation): 1m, the smallest rate
/// `kubectl top` prints above zero.
pub const IDLE_CPU_MILLIS: u64 = 1;

/// Memory the system daemons of a node use when the kubelet reserves none (`kubeReserved` and
/// `systemReserved` unset): 256Mi, the order of an idle kubeadm or kind worker's root-cgroup
/// working set with no pods (the kubelet and containerd some tens of MiB each, systemd, journald
/// and the rest of the OS, plus the kernel's active page cache), and what managed offerings
/// reserve for the kubelet on small machines (GKE: 255Mi).
pub const SYSTEM_MEMORY_BYTES: u64 = 256 << 20;
/// CPU the system daemons use when none is reserved: 50m (the kubelet's housekeeping, status
/// and probe loops, the runtime and the OS on an idle node).
pub const SYSTEM_CPU_MILLIS: u64 = 50;

/// One system daemon's (or group's) constant usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonUsage {
    pub cpu_millis: u64,
    pub memory: u64,
}

/// What a node's system daemons use, outside every pod, for as long as the machine is up: the
/// Summary API's `systemContainers` `kubelet` and `runtime`, and the rest of the OS (systemd,
/// journald, sshd, the kernel's page cache), which upstream's summary shows only in the node's
/// totals (`misc` needs `--system-cgroups`, which kubeadm does not set). It counts in the node's
/// working set and cumulative CPU (`/stats/summary`, `/metrics/resource`, so `kubectl top
/// nodes` shows a node without pods) and in `memory.available`, as the root cgroup's working set
/// does on a real node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemDaemons {
    pub kubelet: DaemonUsage,
    pub runtime: DaemonUsage,
    pub other: DaemonUsage,
}

impl SystemDaemons {
    /// From the kubelet's reservation (`kubeReserved` + `systemReserved`), taken as what its
    /// daemons use — an operator sizes a reservation to that — each of CPU and memory on its own,
    /// else [`SYSTEM_CPU_MILLIS`] / [`SYSTEM_MEMORY_BYTES`]. Split in fixed shares: CPU half to
    /// the kubelet, a fifth to the runtime, the rest to the OS; memory a quarter to the kubelet,
    /// three sixteenths to the runtime, the rest to the OS (64Mi, 48Mi and 144Mi of the default).
    pub fn from_reserved(reserved_cpu_millis: u64, reserved_memory: u64) -> SystemDaemons {
        let cpu = if reserved_cpu_millis > 0 {
            reserved_cpu_millis
        } else {
            SYSTEM_CPU_MILLIS
        };
        let memory = if reserved_memory > 0 {
            reserved_memory
        } else {
            SYSTEM_MEMORY_BYTES
        };
        let kubelet = DaemonUsage {
            cpu_millis: cpu / 2,
            memory: memory / 4,
        };
        let runtime = DaemonUsage {
            cpu_millis: cpu / 5,
            memory: (memory / 16).saturating_mul(3),
        };
        let other = DaemonUsage {
            cpu_millis: cpu
                .saturating_sub(kubelet.cpu_millis)
                .saturating_sub(runtime.cpu_millis),
            memory: memory
                .saturating_sub(kubelet.memory)
                .saturating_sub(runtime.memory),
        };
        SystemDaemons {
            kubelet,
            runtime,
            other,
        }
    }

    /// Σ of the three: the node's usage outside its pods.
    pub fn total(&self) -> DaemonUsage {
        let all = [self.kubelet, self.runtime, self.other];
        DaemonUsage {
            cpu_millis: all.iter().fold(0u64, |a, d| a.saturating_add(d.cpu_millis)),
            memory: all.iter().fold(0u64, |a, d| a.saturating_add(d.memory)),
        }
    }

    /// Cumulative CPU of a daemon that has run `elapsed_ms`, nanoseconds (millicores × ms =
    /// 1000 ns, as a container's).
    pub fn cpu_ns(d: DaemonUsage, elapsed_ms: u64) -> u64 {
        d.cpu_millis.saturating_mul(elapsed_ms).saturating_mul(1000)
    }
}

/// The documented defaults plus the annotation's values. A request of zero counts as none (the
/// container still runs, so it uses the idle baseline); a memory limit below the baseline caps
/// it, so the default never starts a container above its limit.
pub fn spec(res: &Resources, o: &Overrides) -> UsageSpec {
    let idle_memory = res
        .memory_limit
        .map_or(IDLE_MEMORY_BYTES, |l| l.min(IDLE_MEMORY_BYTES));
    UsageSpec {
        memory: o
            .memory
            .or(res.memory_request.filter(|r| *r > 0))
            .unwrap_or(idle_memory),
        memory_growth: o.memory_growth,
        cpu_millis: o
            .cpu_millis
            .or(res.cpu_request.filter(|r| *r > 0))
            .unwrap_or(IDLE_CPU_MILLIS),
        ephemeral_storage: o
            .ephemeral_storage
            .or(res.ephemeral_storage_request)
            .unwrap_or(0),
        ephemeral_storage_growth: o.ephemeral_storage_growth,
        log_growth: o.log_growth,
        pids: o.pids.unwrap_or(1),
    }
}

/// `containerLogMaxSize` default.
pub const CONTAINER_LOG_MAX_SIZE: i64 = 10 << 20;
/// `containerLogMaxFiles` default.
pub const CONTAINER_LOG_MAX_FILES: u32 = 5;

/// The container log manager's policy (`containerLogMaxSize`, `containerLogMaxFiles`): a log
/// file at `max_size` bytes or more is rotated at the next 10 s pass; a negative `max_size`
/// turns rotation off (upstream then runs a stub manager).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRotation {
    pub max_size: i64,
    pub max_files: u32,
}

impl Default for LogRotation {
    fn default() -> Self {
        LogRotation {
            max_size: CONTAINER_LOG_MAX_SIZE,
            max_files: CONTAINER_LOG_MAX_FILES,
        }
    }
}

impl LogRotation {
    /// Parses `containerLogMaxSize` as the kubelet does when it builds its log manager (a
    /// quantity, possibly negative), with its error text.
    pub fn parse_max_size(v: &str) -> Result<i64, String> {
        let t = v.trim();
        let (neg, q) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let b = bytes(q)
            .filter(|_| !q.starts_with(['-', '+']))
            .ok_or_else(|| {
                format!(
                    "failed to parse container log max size {v:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                )
            })?;
        let b = i64::try_from(b).map_err(|_| {
            format!("failed to parse container log max size {v:?}: invalid max log size")
        })?;
        Ok(if neg { b.saturating_neg() } else { b })
    }

    /// Validates `containerLogMaxFiles` with upstream's configuration text.
    pub fn parse_max_files(v: &str) -> Result<u32, String> {
        let n: i64 = v
            .trim()
            .parse()
            .map_err(|e: std::num::ParseIntError| e.to_string())?;
        if n <= 1 {
            return Err(
                "invalid configuration: containerLogMaxFiles must be greater than 1".into(),
            );
        }
        u32::try_from(n).map_err(|e| e.to_string())
    }

    pub fn enabled(self) -> bool {
        self.max_size >= 0
    }
}

/// How much smaller gzip makes a rotated log file: container logs are repetitive text (the
/// same lines with new timestamps, JSON with the same keys), which gzip's default level commonly
/// shrinks 5 to 20 times; the model takes 10 (a 10Mi file keeps 1Mi on disk).
pub const LOG_COMPRESSION_RATIO: u64 = 10;

/// A rotated file's size on disk once the log manager has gzipped it (`<log>.<timestamp>.gz`).
pub fn compressed_size(bytes: u64) -> u64 {
    bytes / LOG_COMPRESSION_RATIO
}

/// A container instance's log files: the current file began when `current_start` bytes had been
/// written; `rotated` are the sizes on disk of the rotated files kept, oldest first — every one
/// gzipped but the newest, as the log manager leaves them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFiles {
    pub current_start: u64,
    pub rotated: Vec<u64>,
}

impl LogFiles {
    /// Bytes on disk when `written` bytes have been written in all.
    pub fn used(&self, written: u64) -> u64 {
        self.rotated
            .iter()
            .fold(written.saturating_sub(self.current_start), |a, b| {
                a.saturating_add(*b)
            })
    }

    /// One pass of the log manager over this container (`processContainer` then `rotateLog`): a
    /// current file of `max_size` or more is rotated after the oldest rotated files beyond
    /// `max_files − 2` are removed (the new current file and the one just rotated make up the
    /// rest) and the rotated ones left uncompressed — the newest, rotated at the previous
    /// rotation — are gzipped; the file just rotated stays uncompressed until the next
    /// rotation. Returns whether it rotated.
    pub fn rotate(&mut self, written: u64, policy: LogRotation) -> bool {
        if !policy.enabled() {
            return false;
        }
        let current = written.saturating_sub(self.current_start);
        if i64::try_from(current).unwrap_or(i64::MAX) < policy.max_size {
            return false;
        }
        let keep = usize::try_from(policy.max_files.saturating_sub(2)).unwrap_or(usize::MAX);
        let excess = self.rotated.len().saturating_sub(keep);
        self.rotated.drain(..excess);
        // Only the newest rotated file is still uncompressed: the others were gzipped at the
        // rotations that followed them.
        if let Some(newest) = self.rotated.last_mut() {
            *newest = compressed_size(*newest);
        }
        self.rotated.push(current);
        self.current_start = written;
        true
    }
}

/// A running instance's usage model: `spec` from `since` on, killed by the OOM killer once its
/// working set reaches `memory_limit` while growing (or at once if it starts above it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    pub spec: UsageSpec,
    pub since: Timestamp,
    pub memory_limit: Option<u64>,
    /// CPU nanoseconds used before `since` by this instance (re-anchoring keeps the counter).
    #[serde(default)]
    pub cpu_ns_before: u64,
    /// Log bytes written before `since` by this instance (re-anchoring keeps them).
    #[serde(default)]
    pub log_written_before: u64,
    /// The instance's log files as the log manager left them.
    #[serde(default)]
    pub logs: LogFiles,
}

fn elapsed_ms(since: Timestamp, now: Timestamp) -> u64 {
    let d = now.duration_since(since);
    if d.is_negative() {
        0
    } else {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Model {
    pub fn new(spec: UsageSpec, since: Timestamp, memory_limit: Option<u64>) -> Model {
        Model {
            spec,
            since,
            memory_limit,
            cpu_ns_before: 0,
            log_written_before: 0,
            logs: LogFiles::default(),
        }
    }

    /// Memory working set at `now` (bytes).
    pub fn memory_at(&self, now: Timestamp) -> u64 {
        let grown = self
            .spec
            .memory_growth
            .map_or(0, |r| r.over(elapsed_ms(self.since, now)));
        self.spec.memory.saturating_add(grown)
    }

    /// The writable layer at `now` (bytes): the Summary API's `rootfs`.
    pub fn rootfs_at(&self, now: Timestamp) -> u64 {
        let grown = self
            .spec
            .ephemeral_storage_growth
            .map_or(0, |r| r.over(elapsed_ms(self.since, now)));
        self.spec.ephemeral_storage.saturating_add(grown)
    }

    /// Log bytes the instance has written by `now`, rotated away or not.
    pub fn log_written_at(&self, now: Timestamp) -> u64 {
        let grown = self
            .spec
            .log_growth
            .map_or(0, |r| r.over(elapsed_ms(self.since, now)));
        self.log_written_before.saturating_add(grown)
    }

    /// The log files on disk at `now` (bytes): the Summary API's `logs`.
    pub fn logs_at(&self, now: Timestamp) -> u64 {
        self.logs.used(self.log_written_at(now))
    }

    /// Ephemeral storage used at `now` (bytes): the writable layer and the logs, as the eviction
    /// manager counts a container (`fsStatsRoot` and `fsStatsLogs`).
    pub fn ephemeral_storage_at(&self, now: Timestamp) -> u64 {
        self.rootfs_at(now).saturating_add(self.logs_at(now))
    }

    /// The log manager's pass at `now`; whether it rotated.
    pub fn rotate_logs(&mut self, now: Timestamp, policy: LogRotation) -> bool {
        let written = self.log_written_at(now);
        self.logs.rotate(written, policy)
    }

    /// Cumulative CPU time of the instance at `now`, nanoseconds.
    pub fn cpu_ns_at(&self, now: Timestamp) -> u64 {
        // millicores × ms = 1e-6 core-seconds = 1000 ns.
        let used = self
            .spec
            .cpu_millis
            .saturating_mul(elapsed_ms(self.since, now))
            .saturating_mul(1000);
        self.cpu_ns_before.saturating_add(used)
    }

    /// When the OOM killer ends this instance: at `since` if it starts above its limit, else when
    /// a growing working set reaches the limit; `None` without a limit or growth.
    pub fn oom_at(&self) -> Option<Timestamp> {
        let limit = self.memory_limit?;
        if self.spec.memory > limit {
            return Some(self.since);
        }
        let rate = self.spec.memory_growth?;
        let ms = rate.time_to(limit.saturating_sub(self.spec.memory))?;
        let span = jiff::SignedDuration::from_millis(i64::try_from(ms).ok()?);
        self.since.checked_add(span).ok()
    }

    /// The model with a new spec from `now` on (the annotation changed); the CPU counter goes on.
    pub fn reanchor(&self, spec: UsageSpec, now: Timestamp) -> Model {
        Model {
            spec,
            since: now,
            memory_limit: self.memory_limit,
            cpu_ns_before: self.cpu_ns_at(now),
            log_written_before: self.log_written_at(now),
            logs: self.logs.clone(),
        }
    }
}

/// What an eviction signal observes on a node from the usage model: memory is the capacity less
/// the system daemons' working set ([`SystemDaemons`]) and the containers' working sets — the
/// root cgroup's working set, as upstream's `makeSignalObservations` reads it from the summary's
/// node memory; the node filesystem (which also
/// holds the image filesystem in klab's single-disk model) less the containers' writable layers
/// and logs; PIDs less the containers' processes. Inodes are not used by the model.
pub fn available(
    signal: crate::eviction::Signal,
    capacity: u64,
    system_memory: u64,
    memory_used: u64,
    storage_used: u64,
    pids_used: u64,
) -> u64 {
    use crate::eviction::Signal;
    match signal {
        Signal::MemoryAvailable => capacity
            .saturating_sub(system_memory)
            .saturating_sub(memory_used),
        Signal::NodeFsAvailable | Signal::ImageFsAvailable => capacity.saturating_sub(storage_used),
        Signal::PidAvailable => capacity.saturating_sub(pids_used),
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => capacity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_767_225_600_000 + ms).unwrap()
    }

    #[test]
    fn annotation_parsing() {
        let cases: &[(&str, Result<Overrides, &str>)] = &[
            ("", Ok(Overrides::default())),
            (
                "memory=1536Mi, pids=600",
                Ok(Overrides {
                    memory: Some(1536 * MI),
                    pids: Some(600),
                    ..Default::default()
                }),
            ),
            (
                "memory=28Mi,memory-growth=10Mi/min,cpu=250m,ephemeral-storage=1Gi,ephemeral-storage-growth=1Mi/s",
                Ok(Overrides {
                    memory: Some(28 * MI),
                    memory_growth: Some(Rate {
                        amount: 10 * MI,
                        per_ms: 60_000,
                    }),
                    cpu_millis: Some(250),
                    ephemeral_storage: Some(1 << 30),
                    ephemeral_storage_growth: Some(Rate {
                        amount: MI,
                        per_ms: 1000,
                    }),
                    ..Default::default()
                }),
            ),
            (
                "memory=lots",
                Err("invalid memory \"lots\": not a quantity"),
            ),
            (
                "memory=-1Mi",
                Err("invalid memory \"-1Mi\": not a quantity"),
            ),
            (
                "memory-growth=10Mi",
                Err(
                    "invalid memory-growth \"10Mi\": a rate is a quantity per s, min or h (10Mi/min)",
                ),
            ),
            (
                "memory-growth=10Mi/day",
                Err(
                    "invalid memory-growth \"10Mi/day\": a rate is a quantity per s, min or h (10Mi/min)",
                ),
            ),
            ("pids=1.5", Err("invalid pids \"1.5\": not a count")),
            ("junk", Err("invalid usage \"junk\": expected key=value")),
            (
                "memroy=1Gi",
                Err(
                    "unknown usage key \"memroy\" (known: memory, memory-growth, cpu, ephemeral-storage, ephemeral-storage-growth, log-growth, pids, image-size)",
                ),
            ),
            (
                "log-growth=1Mi/s",
                Ok(Overrides {
                    log_growth: Some(Rate {
                        amount: MI,
                        per_ms: 1000,
                    }),
                    ..Default::default()
                }),
            ),
            (
                "log-growth=lots/s",
                Err(
                    "invalid log-growth \"lots/s\": a rate is a quantity per s, min or h (10Mi/min)",
                ),
            ),
            // One bad item refuses the whole value, good ones included.
            ("memory=1Gi,cpu=x", Err("invalid cpu \"x\": not a quantity")),
        ];
        for (v, want) in cases {
            assert_eq!(
                parse_annotation(v),
                want.clone().map_err(String::from),
                "{v}"
            );
        }
    }

    #[test]
    fn volume_annotations() {
        assert_eq!(
            parse_volume_annotation("ephemeral-storage=2Gi,ephemeral-storage-growth=1Mi/s"),
            Ok(UsageSpec {
                ephemeral_storage: 2 << 30,
                ephemeral_storage_growth: Some(Rate {
                    amount: MI,
                    per_ms: 1000
                }),
                ..Default::default()
            })
        );
        assert_eq!(
            parse_volume_annotation("memory=1Gi").unwrap_err(),
            "a volume's usage takes only ephemeral-storage and ephemeral-storage-growth"
        );
        assert_eq!(
            parse_volume_annotation("ephemeral-storage=x").unwrap_err(),
            "invalid ephemeral-storage \"x\": not a quantity"
        );
    }

    #[test]
    fn defaults_come_from_requests() {
        let res = Resources {
            memory_request: Some(64 * MI),
            memory_limit: Some(128 * MI),
            cpu_request: Some(100),
            ephemeral_storage_request: None,
            ephemeral_storage_limit: None,
        };
        assert_eq!(
            spec(&res, &Overrides::default()),
            UsageSpec {
                memory: 64 * MI,
                cpu_millis: 100,
                pids: 1,
                ..Default::default()
            }
        );
        // BestEffort: the idle baseline and its one process.
        assert_eq!(
            spec(&Resources::default(), &Overrides::default()),
            UsageSpec {
                memory: IDLE_MEMORY_BYTES,
                cpu_millis: IDLE_CPU_MILLIS,
                pids: 1,
                ..Default::default()
            }
        );
        // A memory request without a CPU request (and requests of zero): baseline CPU, memory
        // from the request or the baseline.
        let mem_only = Resources {
            memory_request: Some(64 * MI),
            ..Default::default()
        };
        let s = spec(&mem_only, &Overrides::default());
        assert_eq!((s.memory, s.cpu_millis), (64 * MI, 1));
        let zeros = Resources {
            memory_request: Some(0),
            cpu_request: Some(0),
            ..Default::default()
        };
        let s = spec(&zeros, &Overrides::default());
        assert_eq!((s.memory, s.cpu_millis), (MI, 1));
        // A limit below the baseline caps it: the default never starts over its limit.
        let tiny = Resources {
            memory_request: Some(0),
            memory_limit: Some(512 * 1024),
            ..Default::default()
        };
        let s = spec(&tiny, &Overrides::default());
        assert_eq!(s.memory, 512 * 1024);
        assert_eq!(Model::new(s, t(0), tiny.memory_limit).oom_at(), None);
        // An explicit zero in the annotation is what the user asked for.
        let s = spec(
            &Resources::default(),
            &parse_annotation("memory=0,cpu=0").unwrap(),
        );
        assert_eq!((s.memory, s.cpu_millis), (0, 0));
        // The annotation wins over the request.
        let o = parse_annotation("memory=300Mi,pids=7").unwrap();
        let s = spec(&res, &o);
        assert_eq!((s.memory, s.cpu_millis, s.pids), (300 * MI, 100, 7));
    }

    #[test]
    fn growth_and_oom_times() {
        let leak = |base: u64, rate: &str, limit: Option<u64>| {
            Model::new(
                UsageSpec {
                    memory: base,
                    memory_growth: parse_rate(rate),
                    ..Default::default()
                },
                t(0),
                limit,
            )
        };
        // 28Mi + 10Mi/min under 128Mi: reaches the limit after exactly 10 minutes.
        let m = leak(28 * MI, "10Mi/min", Some(128 * MI));
        assert_eq!(m.memory_at(t(60_000)), 38 * MI);
        assert_eq!(m.memory_at(t(30_000)), 33 * MI);
        assert_eq!(m.oom_at(), Some(t(600_000)));
        // Not a whole number of milliseconds: rounded up to the first instant at the limit.
        let m = leak(0, "3/s", Some(10));
        assert_eq!(m.oom_at(), Some(t(3334)));
        assert!(m.memory_at(t(3334)) >= 10 && m.memory_at(t(3333)) < 10);
        // No limit, no growth, or at the limit without growth: never.
        assert_eq!(leak(28 * MI, "10Mi/min", None).oom_at(), None);
        assert_eq!(leak(128 * MI, "0/min", Some(128 * MI)).oom_at(), None);
        assert_eq!(
            Model::new(
                UsageSpec {
                    memory: 128 * MI,
                    ..Default::default()
                },
                t(0),
                Some(128 * MI)
            )
            .oom_at(),
            None
        );
        // Starting above the limit: killed at once.
        assert_eq!(leak(200 * MI, "0/min", Some(128 * MI)).oom_at(), Some(t(0)));
        // Absurd values saturate instead of overflowing.
        let m = leak(u64::MAX - 1, &format!("{}/s", u64::MAX), None);
        assert_eq!(m.memory_at(t(1_000_000)), u64::MAX);
        let m = leak(0, "1/h", Some(u64::MAX));
        assert!(m.oom_at().is_none() || m.oom_at().unwrap() > t(0));
    }

    #[test]
    fn system_daemons_from_the_reservation_or_the_default() {
        let d = |cpu, memory| DaemonUsage {
            cpu_millis: cpu,
            memory,
        };
        // (reserved cpu, reserved memory) → (kubelet, runtime, other).
        type Split = (DaemonUsage, DaemonUsage, DaemonUsage);
        let cases: &[((u64, u64), Split)] = &[
            // Nothing reserved: 50m and 256Mi.
            ((0, 0), (d(25, 64 * MI), d(10, 48 * MI), d(15, 144 * MI))),
            // kubeReserved {cpu: 500m, memory: 1Gi} + systemReserved {memory: 512Mi}.
            (
                (500, 1536 * MI),
                (d(250, 384 * MI), d(100, 288 * MI), d(150, 864 * MI)),
            ),
            // Only memory reserved: CPU keeps its default, and the other way round.
            (
                (0, 512 * MI),
                (d(25, 128 * MI), d(10, 96 * MI), d(15, 288 * MI)),
            ),
            (
                (1000, 0),
                (d(500, 64 * MI), d(200, 48 * MI), d(300, 144 * MI)),
            ),
            // Amounts that do not divide: the OS takes the remainder, nothing is lost.
            ((7, 10), (d(3, 2), d(1, 0), d(3, 8))),
            // The largest reservation saturates instead of overflowing.
            (
                (u64::MAX, u64::MAX),
                (
                    d(u64::MAX / 2, u64::MAX / 4),
                    d(u64::MAX / 5, (u64::MAX / 16) * 3),
                    d(
                        u64::MAX - u64::MAX / 2 - u64::MAX / 5,
                        u64::MAX - u64::MAX / 4 - (u64::MAX / 16) * 3,
                    ),
                ),
            ),
        ];
        for ((cpu, memory), (kubelet, runtime, other)) in cases {
            let s = SystemDaemons::from_reserved(*cpu, *memory);
            assert_eq!(
                (s.kubelet, s.runtime, s.other),
                (*kubelet, *runtime, *other),
                "{cpu} {memory}"
            );
            let total = s.total();
            if *cpu > 0 && *memory > 0 {
                assert_eq!((total.cpu_millis, total.memory), (*cpu, *memory));
            }
        }
        let default = SystemDaemons::from_reserved(0, 0).total();
        assert_eq!(
            (default.cpu_millis, default.memory),
            (SYSTEM_CPU_MILLIS, SYSTEM_MEMORY_BYTES)
        );
        // 50m for a minute: 3 core-seconds.
        assert_eq!(SystemDaemons::cpu_ns(default, 60_000), 3_000_000_000);
        assert_eq!(SystemDaemons::cpu_ns(d(u64::MAX, 0), 2), u64::MAX);
    }

    #[test]
    fn node_signals_from_usage() {
        use crate::eviction::Signal;
        let gi = 1u64 << 30;
        // 8Gi, 512Mi of system daemons, 7Gi of working sets: 512Mi available.
        assert_eq!(
            available(Signal::MemoryAvailable, 8 * gi, 512 * MI, 7 * gi, 0, 0),
            512 * MI
        );
        // More used than there is: nothing available, no underflow.
        assert_eq!(
            available(Signal::MemoryAvailable, gi, 512 * MI, gi, 0, 0),
            0
        );
        assert_eq!(
            available(Signal::NodeFsAvailable, 100 * gi, 0, 0, 30 * gi, 0),
            70 * gi
        );
        assert_eq!(
            available(Signal::ImageFsAvailable, 100 * gi, 0, 0, 30 * gi, 0),
            70 * gi
        );
        assert_eq!(
            available(Signal::PidAvailable, 4_194_304, 0, 0, 0, 4),
            4_194_300
        );
        assert_eq!(
            available(Signal::NodeFsInodesFree, 1000, 0, gi, gi, 9),
            1000
        );
    }

    #[test]
    fn log_rotation_policy_flags() {
        assert_eq!(LogRotation::default().max_size, 10 * 1024 * 1024);
        assert_eq!(LogRotation::default().max_files, 5);
        assert_eq!(LogRotation::parse_max_size("10Mi"), Ok(10 * 1024 * 1024));
        assert_eq!(LogRotation::parse_max_size("100M"), Ok(100_000_000));
        assert_eq!(LogRotation::parse_max_size("0"), Ok(0));
        // Negative: rotation off.
        assert_eq!(LogRotation::parse_max_size("-1"), Ok(-1));
        assert!(
            !LogRotation {
                max_size: -1,
                max_files: 5
            }
            .enabled()
        );
        for bad in ["lots", "", "--1", "10Mb"] {
            assert_eq!(
                LogRotation::parse_max_size(bad).unwrap_err(),
                format!(
                    "failed to parse container log max size {bad:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                )
            );
        }
        assert!(
            LogRotation::parse_max_size("100Ei")
                .unwrap_err()
                .ends_with("invalid max log size")
        );
        assert_eq!(LogRotation::parse_max_files("2"), Ok(2));
        for bad in ["1", "0", "-3"] {
            assert_eq!(
                LogRotation::parse_max_files(bad).unwrap_err(),
                "invalid configuration: containerLogMaxFiles must be greater than 1"
            );
        }
        assert!(LogRotation::parse_max_files("five").is_err());
    }

    #[test]
    fn log_files_rotate_as_the_log_manager() {
        let policy = LogRotation {
            max_size: 10 * MI as i64,
            max_files: 3,
        };
        let mut f = LogFiles::default();
        // Below the size: nothing rotates.
        assert!(!f.rotate(9 * MI, policy));
        assert_eq!(f.used(9 * MI), 9 * MI);
        // At the size (or beyond, the pass is every 10 s): rotated as it is.
        assert!(f.rotate(12 * MI, policy));
        assert_eq!(f.rotated, vec![12 * MI]);
        assert_eq!(f.used(13 * MI), 13 * MI);
        // The next rotation gzips the file rotated before (a tenth of it on disk).
        let gz = 12 * MI / 10;
        assert!(f.rotate(24 * MI, policy));
        assert_eq!(f.rotated, vec![gz, 12 * MI]);
        assert_eq!(f.used(24 * MI), gz + 12 * MI);
        // max_files 3: one old rotated file kept (3 − 2) before the current one is rotated; it
        // is the newest, so it is gzipped now.
        assert!(f.rotate(36 * MI, policy));
        assert_eq!(f.rotated, vec![gz, 12 * MI]);
        assert_eq!(f.used(40 * MI), gz + 16 * MI);
        // A file already gzipped is not compressed again.
        let mut five = LogFiles::default();
        let policy5 = LogRotation {
            max_size: 10 * MI as i64,
            max_files: 5,
        };
        for w in [10, 20, 30] {
            assert!(five.rotate(w * MI, policy5));
        }
        assert_eq!(five.rotated, vec![MI, MI, 10 * MI]);
        assert_eq!(compressed_size(0), 0);
        assert_eq!(compressed_size(9), 0);
        assert_eq!(compressed_size(u64::MAX), u64::MAX / 10);
        // Rotation off: the log only grows.
        let mut off = LogFiles::default();
        let no = LogRotation {
            max_size: -1,
            max_files: 5,
        };
        assert!(!off.rotate(u64::MAX, no));
        assert_eq!(off.used(u64::MAX), u64::MAX);
        // Two files at most: every pass past the size leaves only the file just rotated.
        let two = LogRotation {
            max_size: MI as i64,
            max_files: 2,
        };
        let mut f = LogFiles::default();
        for w in [2, 4, 6] {
            assert!(f.rotate(w * MI, two));
            assert_eq!(f.rotated, vec![2 * MI]);
        }
    }

    #[test]
    fn chatty_container_logs_over_time() {
        // 1Mi/s with the default policy: each 10 s pass rotates a 10Mi file; the usage levels
        // off at four rotated files — three gzipped to 1Mi, the newest 10Mi — and the growing
        // current one.
        let mut m = Model::new(
            UsageSpec {
                ephemeral_storage: 5 * MI,
                log_growth: parse_rate("1Mi/s"),
                ..Default::default()
            },
            t(0),
            None,
        );
        assert_eq!(m.logs_at(t(9_000)), 9 * MI);
        assert_eq!(m.ephemeral_storage_at(t(9_000)), 14 * MI);
        let mut peak = 0;
        for pass in 1..=30 {
            let at = t(pass * 10_000);
            m.rotate_logs(at, LogRotation::default());
            peak = peak.max(m.logs_at(t(pass * 10_000 + 9_999)));
        }
        assert_eq!(m.logs.rotated, vec![MI, MI, MI, 10 * MI]);
        assert_eq!(m.logs_at(t(300_000)), 13 * MI);
        assert!(peak < 23 * MI, "{peak}");
        assert_eq!(m.rootfs_at(t(300_000)), 5 * MI);
        // Rotation off: 5 minutes at 1Mi/s all kept.
        let mut off = m.clone();
        off.logs = LogFiles::default();
        off.rotate_logs(
            t(300_000),
            LogRotation {
                max_size: -1,
                max_files: 5,
            },
        );
        assert_eq!(off.logs_at(t(300_000)), 300 * MI);
        // Re-anchoring keeps what was written and the files.
        let mut s = m.spec.clone();
        s.log_growth = None;
        let r = m.reanchor(s, t(300_000));
        assert_eq!(r.logs_at(t(900_000)), 13 * MI);
        assert_eq!(r.log_written_at(t(900_000)), 300 * MI);
    }

    #[test]
    fn cpu_counter_and_reanchoring() {
        let m = Model::new(
            UsageSpec {
                cpu_millis: 250,
                memory: 10 * MI,
                memory_growth: parse_rate("1Mi/s"),
                ..Default::default()
            },
            t(0),
            Some(100 * MI),
        );
        // 250m for 4 s = 1 core-second.
        assert_eq!(m.cpu_ns_at(t(4000)), 1_000_000_000);
        assert_eq!(m.oom_at(), Some(t(90_000)));
        // At 10 s the annotation stops the leak at 50Mi: no OOM any more, CPU counter goes on.
        let mut s = m.spec.clone();
        s.memory = 50 * MI;
        s.memory_growth = None;
        let r = m.reanchor(s, t(10_000));
        assert_eq!(r.oom_at(), None);
        assert_eq!(r.memory_at(t(500_000)), 50 * MI);
        assert_eq!(r.cpu_ns_at(t(14_000)), 3_500_000_000);
    }
}
