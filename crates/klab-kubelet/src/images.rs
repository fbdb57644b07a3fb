//! The images a simulated node holds and the kubelet's image garbage collection (upstream
//! `pkg/kubelet/images/image_gc_manager.go`), the pure decisions: the image records
//! (size, first detected, last used), `node.status.images` (sorted by size, at most
//! `nodeStatusMaxImages`), the GC policy and its validation with upstream's texts, how much a GC
//! pass must free, and which unused images it deletes (least recently used first, none younger
//! than `imageMinimumGCAge`).
//!
//! Sizes are deterministic: an image is as large as the pulling container's `image-size` usage
//! key says (`usage.klab.dev/<container>: image-size=3Gi`), else the runtime model's
//! `image_size_bytes` (25Mi), the size the `Pulled` event reports.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ContainerImage;
use serde::{Deserialize, Serialize};

use crate::pod_status::{image_id, normalize_image};

/// `nodeStatusMaxImages` default.
pub const NODE_STATUS_MAX_IMAGES: i32 = 50;
/// `MaxNamesPerImageInNodeStatus`: names listed per image in `node.status.images`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;
/// `ImageGCPeriod`: how often the kubelet runs image garbage collection.
pub const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);
/// Node event of a GC pass that could not free what the policy asks.
pub const REASON_FREE_DISK_SPACE_FAILED: &str = "FreeDiskSpaceFailed";
/// Node event of a GC pass failing a second time in a row (upstream records only repeats).
pub const REASON_IMAGE_GC_FAILED: &str = "ImageGCFailed";

/// What the image manager knows of one image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// Bytes on the image filesystem.
    pub size: u64,
    /// When the kubelet first saw it (its pull).
    pub first_detected: Timestamp,
    /// The last detection that found a container using it.
    pub last_used: Timestamp,
}

/// The images on a machine, by normalized reference (`docker.io/library/nginx:latest`). They
/// live with the machine, so a kubelet restart finds them again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ImageStore {
    records: BTreeMap<String, ImageRecord>,
}

/// Machines saved before image records existed hold a plain list of names: those images are
/// taken as 25Mi, pulled and last used at the Unix epoch.
impl<'de> Deserialize<'de> for ImageStore {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Records(BTreeMap<String, ImageRecord>),
            Names(BTreeSet<String>),
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Records(records) => ImageStore { records },
            Stored::Names(names) => ImageStore {
                records: names
                    .into_iter()
                    .map(|n| {
                        let r = ImageRecord {
                            size: crate::config::RuntimeModel::default().image_size_bytes,
                            first_detected: Timestamp::UNIX_EPOCH,
                            last_used: Timestamp::UNIX_EPOCH,
                        };
                        (n, r)
                    })
                    .collect(),
            },
        })
    }
}

impl ImageStore {
    /// Whether an image (any spelling of its reference) is present.
    pub fn contains(&self, image: &str) -> bool {
        self.records.contains_key(&normalize_image(image))
    }

    /// A completed pull at `now`: a new image is first detected now; an image pulled again
    /// keeps its first detection. Either way it is in use now.
    pub fn pulled(&mut self, image: &str, size: u64, now: Timestamp) {
        let r = self
            .records
            .entry(normalize_image(image))
            .or_insert(ImageRecord {
                size,
                first_detected: now,
                last_used: now,
            });
        r.size = size;
        r.last_used = now;
    }

    /// `detectImages`: every image a container uses is last used `now`.
    pub fn detect(&mut self, in_use: &BTreeSet<String>, now: Timestamp) {
        for (name, r) in self.records.iter_mut() {
            if in_use.contains(name) {
                r.last_used = now;
            }
        }
    }

    /// The size of an image, if present.
    pub fn size_of(&self, image: &str) -> Option<u64> {
        self.records.get(&normalize_image(image)).map(|r| r.size)
    }

    /// Bytes the images take on the image filesystem.
    pub fn total_bytes(&self) -> u64 {
        self.records
            .values()
            .fold(0u64, |acc, r| acc.saturating_add(r.size))
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn records(&self) -> &BTreeMap<String, ImageRecord> {
        &self.records
    }

    /// Deletes images (`RemoveImage`); returns the bytes freed.
    pub fn remove(&mut self, names: &[String]) -> u64 {
        names
            .iter()
            .filter_map(|n| self.records.remove(n))
            .fold(0u64, |acc, r| acc.saturating_add(r.size))
    }
}

/// `node.status.images`: each image under its digest and tag names, largest first (ties by
/// name, for a stable order), at most `max` (−1: all).
pub fn node_status_images(store: &ImageStore, max: i32) -> Vec<ContainerImage> {
    let mut images: Vec<(&String, &ImageRecord)> = store.records.iter().collect();
    images.sort_by(|a, b| b.1.size.cmp(&a.1.size).then_with(|| a.0.cmp(b.0)));
    if let Ok(max) = usize::try_from(max) {
        images.truncate(max);
    }
    images
        .into_iter()
        .map(|(name, r)| {
            // Repo digests first, then tags, as the runtime lists them.
            let mut names = vec![image_id(name), name.clone()];
            names.truncate(MAX_NAMES_PER_IMAGE);
            ContainerImage {
                names: Some(names),
                size_bytes: Some(i64::try_from(r.size).unwrap_or(i64::MAX)),
            }
        })
        .collect()
}

/// The kubelet's image GC policy (`imageGCHighThresholdPercent`, `imageGCLowThresholdPercent`,
/// `imageMinimumGCAge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageGcPolicy {
    pub high_threshold_percent: i32,
    pub low_threshold_percent: i32,
    pub minimum_gc_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            minimum_gc_age: Duration::from_secs(120),
        }
    }
}

impl ImageGcPolicy {
    /// The kubelet configuration's validation of the policy, upstream's texts.
    pub fn validate(&self) -> Result<(), String> {
        let (high, low) = (self.high_threshold_percent, self.low_threshold_percent);
        let mut errs = Vec::new();
        if !(0..=100).contains(&high) {
            errs.push(format!("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive"));
        }
        if !(0..=100).contains(&low) {
            errs.push(format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive"));
        }
        if low >= high {
            errs.push(format!("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"));
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            // An aggregate error prints as a bracketed list.
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}

/// What a periodic GC pass must free on a filesystem of `capacity` with `available` bytes free:
/// nothing below the high threshold, else enough to get back to the low one. `Err` for a
/// filesystem without capacity (upstream's `InvalidDiskCapacity`).
pub fn amount_to_free(
    policy: &ImageGcPolicy,
    capacity: u64,
    available: u64,
) -> Result<u64, String> {
    if capacity == 0 {
        return Err("invalid capacity 0 on image filesystem".into());
    }
    let available = available.min(capacity);
    let used_percent = 100u128.saturating_sub(u128::from(available) * 100 / u128::from(capacity));
    let high = u128::try_from(policy.high_threshold_percent.max(0)).unwrap_or(0);
    if used_percent < high {
        return Ok(0);
    }
    let keep_free_percent =
        100u128.saturating_sub(u128::try_from(policy.low_threshold_percent.max(0)).unwrap_or(0));
    let target = u128::from(capacity) * keep_free_percent / 100;
    Ok(u64::try_from(target.saturating_sub(u128::from(available))).unwrap_or(u64::MAX))
}

/// `freeSpace`: the unused images to delete, least recently used first (ties: first detected
/// first, then name), skipping images younger than the minimum age, until `bytes_to_free` is
/// reached. Returns the names and the bytes they free.
pub fn select_unused(
    store: &ImageStore,
    in_use: &BTreeSet<String>,
    bytes_to_free: u64,
    now: Timestamp,
    minimum_gc_age: Duration,
) -> (Vec<String>, u64) {
    let mut candidates: Vec<(&String, &ImageRecord)> = store
        .records
        .iter()
        .filter(|(n, _)| !in_use.contains(*n))
        .collect();
    candidates.sort_by(|a, b| {
        (a.1.last_used, a.1.first_detected, a.0).cmp(&(b.1.last_used, b.1.first_detected, b.0))
    });
    let mut freed = 0u64;
    let mut out = Vec::new();
    for (name, r) in candidates {
        // Used at or after this pass began: in use after all.
        if r.last_used >= now {
            continue;
        }
        let age = Duration::try_from(now.duration_since(r.first_detected)).unwrap_or_default();
        if age < minimum_gc_age {
            continue;
        }
        out.push(name.clone());
        freed = freed.saturating_add(r.size);
        if freed >= bytes_to_free {
            break;
        }
    }
    (out, freed)
}

/// The error of a GC pass that freed less than it had to (recorded as `FreeDiskSpaceFailed`).
pub fn free_failed_message(to_free: u64, freed: u64) -> String {
    format!(
        "Failed to garbage collect required amount of images. Attempted to free {to_free} bytes, but only found {freed} bytes eligible to free."
    )
}

/// One periodic GC pass's decision: the images to delete and, when they are not enough, the
/// failure message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcPass {
    pub delete: Vec<String>,
    pub freed: u64,
    pub failure: Option<String>,
}

/// `GarbageCollect` on the image filesystem at `now`.
pub fn gc_pass(
    policy: &ImageGcPolicy,
    store: &ImageStore,
    in_use: &BTreeSet<String>,
    capacity: u64,
    available: u64,
    now: Timestamp,
) -> GcPass {
    let to_free = match amount_to_free(policy, capacity, available) {
        Ok(0) => {
            return GcPass {
                delete: vec![],
                freed: 0,
                failure: None,
            };
        }
        Ok(n) => n,
        Err(e) => {
            return GcPass {
                delete: vec![],
                freed: 0,
                failure: Some(e),
            };
        }
    };
    let (delete, freed) = select_unused(store, in_use, to_free, now, policy.minimum_gc_age);
    let failure = (freed < to_free).then(|| free_failed_message(to_free, freed));
    GcPass {
        delete,
        freed,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;
    const GI: u64 = 1 << 30;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn store(images: &[(&str, u64, i64, i64)]) -> ImageStore {
        let mut s = ImageStore::default();
        for (name, size, first, last) in images {
            s.pulled(name, *size, at(*first));
            s.detect(&[normalize_image(name)].into(), at(*last));
        }
        s
    }

    fn used(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| normalize_image(n)).collect()
    }

    #[test]
    fn records_follow_pulls_and_detections() {
        let mut s = ImageStore::default();
        s.pulled("nginx", 70 * MI, at(0));
        assert!(s.contains("docker.io/library/nginx:latest"));
        assert!(!s.contains("nginx:1.27"));
        // Pulled again later: first detection kept, size refreshed.
        s.pulled("nginx:latest", 72 * MI, at(600));
        let r = &s.records()["docker.io/library/nginx:latest"];
        assert_eq!(
            (r.size, r.first_detected, r.last_used),
            (72 * MI, at(0), at(600))
        );
        s.detect(&used(&["busybox"]), at(900));
        assert_eq!(
            s.records()["docker.io/library/nginx:latest"].last_used,
            at(600)
        );
        s.pulled("busybox:1.36", 4 * MI, at(900));
        assert_eq!(s.total_bytes(), 76 * MI);
        assert_eq!(
            s.remove(&["docker.io/library/busybox:1.36".into(), "gone".into()]),
            4 * MI
        );
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_saved_list_of_names_still_loads() {
        let s: ImageStore = serde_json::from_str(r#"["docker.io/library/nginx:latest"]"#).unwrap();
        assert_eq!(s.size_of("nginx"), Some(25 * MI));
        let again: ImageStore = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn node_status_lists_largest_first_within_the_limit() {
        let s = store(&[
            ("nginx", 70 * MI, 0, 0),
            ("busybox", 4 * MI, 0, 0),
            ("registry.example/big:v1", 3 * GI, 0, 0),
            ("redis:7", 70 * MI, 0, 0),
        ]);
        let got: Vec<(Vec<String>, i64)> = node_status_images(&s, NODE_STATUS_MAX_IMAGES)
            .into_iter()
            .map(|i| (i.names.unwrap(), i.size_bytes.unwrap()))
            .collect();
        let names: Vec<&str> = got.iter().map(|(n, _)| n[1].as_str()).collect();
        assert_eq!(
            names,
            vec![
                "registry.example/big:v1",
                "docker.io/library/nginx:latest",
                "docker.io/library/redis:7",
                "docker.io/library/busybox:latest"
            ]
        );
        assert_eq!(got[0].1, 3 * 1024 * 1024 * 1024);
        // Digest form first.
        assert!(got[1].0[0].starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(node_status_images(&s, 2).len(), 2);
        assert_eq!(node_status_images(&s, 0).len(), 0);
        assert_eq!(node_status_images(&s, -1).len(), 4);
    }

    #[test]
    fn policy_validation_texts() {
        assert!(ImageGcPolicy::default().validate().is_ok());
        let p = |high, low| ImageGcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            ..Default::default()
        };
        assert_eq!(
            p(101, 80).validate().unwrap_err(),
            "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100, inclusive"
        );
        assert_eq!(
            p(85, 85).validate().unwrap_err(),
            "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 85"
        );
        assert_eq!(
            p(50, -1).validate().unwrap_err(),
            "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) -1 must be between 0 and 100, inclusive"
        );
        assert_eq!(
            p(-5, 80).validate().unwrap_err(),
            "[invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) -5 must be between 0 and 100, inclusive, invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) -5]"
        );
    }

    #[test]
    fn how_much_a_pass_frees() {
        let p = ImageGcPolicy::default();
        // 100Gi disk: 84% used is under the high threshold; 85% frees down to 80% (5Gi).
        assert_eq!(amount_to_free(&p, 100 * GI, 16 * GI), Ok(0));
        assert_eq!(amount_to_free(&p, 100 * GI, 15 * GI), Ok(5 * GI));
        assert_eq!(amount_to_free(&p, 100 * GI, 0), Ok(20 * GI));
        // Available above capacity counts as capacity.
        assert_eq!(amount_to_free(&p, 100 * GI, 200 * GI), Ok(0));
        assert_eq!(
            amount_to_free(&p, 0, 0),
            Err("invalid capacity 0 on image filesystem".into())
        );
        // Absurd sizes do not overflow.
        assert_eq!(amount_to_free(&p, u64::MAX, 0), Ok(u64::MAX / 100 * 20 + 3));
    }

    #[test]
    fn which_images_go_first() {
        // (name, size, first detected, last used)
        let s = store(&[
            ("old-unused:v1", 3 * GI, 0, 100),
            ("older-unused:v1", 2 * GI, 0, 50),
            ("fresh:v1", 5 * GI, 590, 590),
            ("running:v1", 8 * GI, 0, 600),
            ("tie-b:v1", GI, 10, 200),
            ("tie-a:v1", GI, 20, 200),
        ]);
        let in_use = used(&["running:v1"]);
        let now = at(600);
        let min_age = Duration::from_secs(120);
        let names = |v: Vec<String>| -> Vec<String> {
            v.into_iter()
                .map(|n| n.trim_start_matches("docker.io/library/").to_string())
                .collect()
        };
        // LRU first; `fresh` is younger than 2 minutes; the running image never goes.
        let (d, freed) = select_unused(&s, &in_use, 4 * GI, now, min_age);
        assert_eq!(names(d), vec!["older-unused:v1", "old-unused:v1"]);
        assert_eq!(freed, 5 * GI);
        // Everything that may go (reclaim under pressure): ties by first detection.
        let (d, freed) = select_unused(&s, &in_use, u64::MAX, now, min_age);
        assert_eq!(
            names(d),
            vec!["older-unused:v1", "old-unused:v1", "tie-b:v1", "tie-a:v1"]
        );
        assert_eq!(freed, 7 * GI);
        // Zero minimum age: the fresh image may go too.
        let (_, freed) = select_unused(&s, &in_use, u64::MAX, now, Duration::ZERO);
        assert_eq!(freed, 12 * GI);
    }

    #[test]
    fn a_pass_that_cannot_free_enough_fails_with_upstreams_text() {
        let p = ImageGcPolicy::default();
        let s = store(&[("a:v1", 2 * GI, 0, 0), ("b:v1", GI, 0, 0)]);
        let in_use = used(&["b:v1"]);
        // 90% used of 100Gi: free 10Gi, only 2Gi eligible.
        let pass = gc_pass(&p, &s, &in_use, 100 * GI, 10 * GI, at(600));
        assert_eq!(pass.delete, vec!["docker.io/library/a:v1".to_string()]);
        assert_eq!(pass.freed, 2 * GI);
        assert_eq!(
            pass.failure.as_deref(),
            Some(
                "Failed to garbage collect required amount of images. Attempted to free 10737418240 bytes, but only found 2147483648 bytes eligible to free."
            )
        );
        // Under the high threshold: nothing happens.
        let pass = gc_pass(&p, &s, &in_use, 100 * GI, 50 * GI, at(600));
        assert_eq!(
            pass,
            GcPass {
                delete: vec![],
                freed: 0,
                failure: None
            }
        );
        // Enough freed (85% used: 5Gi to free, the 6Gi image is enough): no failure.
        let s = store(&[("a:v1", 2 * GI, 0, 0), ("big:v1", 6 * GI, 0, 10)]);
        let pass = gc_pass(&p, &s, &BTreeSet::new(), 100 * GI, 15 * GI, at(600));
        assert_eq!((pass.freed, pass.failure), (8 * GI, None));
    }
}

/// The image manager's pull back-off (`pkg/kubelet/kubelet.go`: `imageBackOffPeriod` 10 s,
/// `MaxContainerBackOff` 300 s, a `flowcontrol.Backoff` keyed by pod UID and image).
pub const IMAGE_BACKOFF_PERIOD: Duration = Duration::from_secs(10);
/// The pull back-off's cap.
pub const MAX_IMAGE_BACKOFF: Duration = Duration::from_secs(300);
/// How soon the pod worker syncs a pod again after a failed sync (`backOffPeriod` of the pod
/// workers; upstream adds up to 50% jitter, klab none).
pub const POD_WORKER_BACKOFF: Duration = Duration::from_secs(10);

/// Waiting reason and event reasons of failed pulls (`images/types.go`, `events/event.go`).
pub const REASON_ERR_IMAGE_PULL: &str = "ErrImagePull";
pub const REASON_IMAGE_PULL_BACKOFF: &str = "ImagePullBackOff";
pub const EVENT_FAILED: &str = "Failed";
pub const EVENT_BACKOFF: &str = "BackOff";

/// One image's pull back-off entry (`flowcontrol.backoffEntry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullBackoff {
    pub backoff: Duration,
    pub last_update: Timestamp,
}

/// An entry not updated for twice the cap is forgotten (`hasExpired`).
fn expired(e: &PullBackoff, now: Timestamp) -> bool {
    let since: Duration = now
        .duration_since(e.last_update)
        .try_into()
        .unwrap_or(Duration::ZERO);
    since > MAX_IMAGE_BACKOFF.saturating_mul(2)
}

/// `Backoff.Next` after a failed pull at `now`: 10 s for a new or expired entry, else doubled up
/// to 300 s.
pub fn pull_backoff_next(prev: Option<PullBackoff>, now: Timestamp) -> PullBackoff {
    let backoff = match prev {
        Some(e) if !expired(&e, now) => e.backoff.saturating_mul(2).min(MAX_IMAGE_BACKOFF),
        _ => IMAGE_BACKOFF_PERIOD,
    };
    PullBackoff {
        backoff,
        last_update: now,
    }
}

/// `Backoff.IsInBackOffSinceUpdate`: whether a pull at `now` must wait.
pub fn pull_in_backoff(e: Option<&PullBackoff>, now: Timestamp) -> bool {
    let Some(e) = e else { return false };
    if expired(e, now) {
        return false;
    }
    let since: Duration = now
        .duration_since(e.last_update)
        .try_into()
        .unwrap_or(Duration::ZERO);
    since < e.backoff
}

/// What containerd answers for an image its registry does not have: the error an `image-pull-fail`
/// fault gives unless it names its own.
pub fn default_pull_error(image: &str) -> String {
    let full = normalize_image(image);
    format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
    )
}

/// The `Failed` event of a failed pull (`Failed to pull image "x": …`).
pub fn failed_to_pull_message(image: &str, err: &str) -> String {
    format!("Failed to pull image \"{image}\": {err}")
}

/// The `BackOff` event and waiting message while a pull waits.
pub fn backoff_pulling_message(image: &str) -> String {
    format!("Back-off pulling image \"{image}\"")
}

#[cfg(test)]
mod pull_backoff_tests {
    use super::*;

    fn at(s: u64) -> Timestamp {
        Timestamp::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn pull_backoff_doubles_to_300s_and_expires_after_10_minutes() {
        let mut e = None;
        let mut seen = Vec::new();
        for t in [0u64, 10, 30, 70, 150, 310, 610, 910] {
            let next = pull_backoff_next(e, at(t));
            seen.push(next.backoff.as_secs());
            e = Some(next);
        }
        assert_eq!(seen, [10, 20, 40, 80, 160, 300, 300, 300]);
        // 600 s without a failure is not yet expiry; over 600 s is.
        let e0 = PullBackoff {
            backoff: Duration::from_secs(300),
            last_update: at(0),
        };
        assert_eq!(pull_backoff_next(Some(e0), at(600)).backoff.as_secs(), 300);
        assert_eq!(pull_backoff_next(Some(e0), at(601)).backoff.as_secs(), 10);
    }

    #[test]
    fn a_pull_waits_while_its_backoff_runs() {
        let e = PullBackoff {
            backoff: Duration::from_secs(20),
            last_update: at(100),
        };
        let table = [
            (None, 0, false),
            (Some(e), 100, true),
            (Some(e), 119, true),
            (Some(e), 120, false),
            (Some(e), 701, false),
        ];
        for (entry, now, want) in table {
            assert_eq!(pull_in_backoff(entry.as_ref(), at(now)), want, "{now}");
        }
    }

    #[test]
    fn pull_failure_texts_are_upstreams() {
        assert_eq!(
            default_pull_error("nginx:nope"),
            "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:nope\": failed to resolve reference \"docker.io/library/nginx:nope\": docker.io/library/nginx:nope: not found"
        );
        assert_eq!(
            failed_to_pull_message("nginx:nope", "boom"),
            "Failed to pull image \"nginx:nope\": boom"
        );
        assert_eq!(
            backoff_pulling_message("nginx:nope"),
            "Back-off pulling image \"nginx:nope\""
        );
    }
}
