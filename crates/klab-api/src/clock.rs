//! The one clock of a klab cluster: object timestamps and component timers both come from here.
//!
//! `now = epoch + speed × (tokio::time::Instant::now() − start)`. Under a paused tokio runtime (sim)
//! `Instant::now()` is virtual, so timestamps written into objects are virtual too; `sleep(d)`
//! sleeps `d / speed` of runtime time so that `--speed 20` makes every timer 20× faster while the
//! objects' timeline (creationTimestamp, Lease renewTime, conditions) advances at 20× as well.
#![allow(clippy::disallowed_methods)] // this module is the one place allowed to read the OS clock

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration as StdDuration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

/// How the clock relates to the machine's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ClockMode {
    /// Deterministic virtual time on a paused tokio runtime; the epoch is fixed by the caller.
    Virtual,
    /// Wall-clock epoch, runtime time scaled by `speed` (1.0 = real time).
    Scaled,
}

#[derive(Debug)]
struct Inner {
    mode: ClockMode,
    epoch: Timestamp,
    start: tokio::time::Instant,
    speed: f64,
}

/// Shared, cheap to clone. Build it inside the runtime whose timers it drives.
#[derive(Clone, Debug)]
pub struct Clock {
    inner: Arc<Inner>,
    /// The offset of a skewed clock (a machine whose clock is off), in nanoseconds; `None` for
    /// the cluster's true time.
    skew: Option<Arc<AtomicI64>>,
}

/// The adjustable offset of a clock made by [`Clock::skewed`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClockSkew(Arc<AtomicI64>);

/// The largest clock offset a skewed clock takes (a year): enough for any incident, and far from
/// the ends of the timestamp range.
pub const MAX_SKEW: SignedDuration = SignedDuration::from_secs(366 * 86_400);

impl ClockSkew {
    /// Sets the offset; refused beyond ±[`MAX_SKEW`].
    pub fn set(&self, offset: SignedDuration) -> Result<(), String> {
        let min = MAX_SKEW.checked_neg().unwrap_or(SignedDuration::MIN);
        if offset > MAX_SKEW || offset < min {
            return Err(format!(
                "clock skew must be within ±{}h, got {}s",
                MAX_SKEW.as_hours(),
                offset.as_secs()
            ));
        }
        let nanos = i64::try_from(offset.as_nanos()).map_err(|e| e.to_string())?;
        self.0.store(nanos, Ordering::Relaxed);
        Ok(())
    }

    pub fn get(&self) -> SignedDuration {
        SignedDuration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// What "never" is in runtime time when a deadline does not fit in an `Instant` (tokio's own
/// far future is 30 years).
const FAR_FUTURE: StdDuration = StdDuration::from_secs(100 * 365 * 86_400);

/// The default epoch of virtual runs: a fixed instant so that sim traces are reproducible.
pub const DEFAULT_VIRTUAL_EPOCH: &str = "2026-01-01T00:00:00Z";

impl Clock {
    /// A virtual clock starting at `epoch`. Use on a paused runtime (`start_paused(true)`).
    pub fn virtual_at(epoch: Timestamp) -> Self {
        Self::build(ClockMode::Virtual, epoch, 1.0)
    }

    /// A virtual clock at [`DEFAULT_VIRTUAL_EPOCH`].
    pub fn virtual_default() -> Self {
        Self::virtual_at(DEFAULT_VIRTUAL_EPOCH.parse().expect("valid epoch"))
    }

    /// Real time (`speed == 1.0`) or sped-up time, starting from the machine's current time.
    pub fn scaled(speed: f64) -> Self {
        assert!(speed > 0.0 && speed.is_finite(), "speed must be positive");
        Self::build(ClockMode::Scaled, Timestamp::now(), speed)
    }

    /// Sped-up time starting at a given epoch (a restarted `klab up` continues its timeline).
    pub fn scaled_from(epoch: Timestamp, speed: f64) -> Self {
        assert!(speed > 0.0 && speed.is_finite(), "speed must be positive");
        Self::build(ClockMode::Scaled, epoch, speed)
    }

    fn build(mode: ClockMode, epoch: Timestamp, speed: f64) -> Self {
        Clock {
            inner: Arc::new(Inner {
                mode,
                epoch,
                start: tokio::time::Instant::now(),
                speed,
            }),
            skew: None,
        }
    }

    /// The same clock read with an adjustable offset (initially zero): what a machine whose clock
    /// is off sees. Timers are not affected (a duration is a duration on any clock); timestamps
    /// read with `now` and deadlines given as timestamps are in the skewed timeline.
    pub fn skewed(&self) -> (Clock, ClockSkew) {
        let cell = Arc::new(AtomicI64::new(0));
        let clock = Clock {
            inner: self.inner.clone(),
            skew: Some(cell.clone()),
        };
        (clock, ClockSkew(cell))
    }

    fn skew(&self) -> SignedDuration {
        self.skew
            .as_ref()
            .map(|s| SignedDuration::from_nanos(s.load(Ordering::Relaxed)))
            .unwrap_or(SignedDuration::ZERO)
    }

    pub fn mode(&self) -> ClockMode {
        self.inner.mode
    }

    pub fn speed(&self) -> f64 {
        self.inner.speed
    }

    /// The instant the clock started, in the objects' timeline.
    pub fn epoch(&self) -> Timestamp {
        self.inner.epoch
    }

    /// Time elapsed since the clock started, in the objects' timeline.
    pub fn elapsed(&self) -> StdDuration {
        let runtime = tokio::time::Instant::now().saturating_duration_since(self.inner.start);
        if self.inner.speed == 1.0 {
            runtime
        } else {
            runtime.mul_f64(self.inner.speed)
        }
    }

    /// Now, in the objects' timeline.
    pub fn now(&self) -> Timestamp {
        let d = SignedDuration::try_from(self.elapsed()).expect("elapsed fits");
        let t = self.inner.epoch.checked_add(d).expect("timestamp in range");
        // The offset is bounded by MAX_SKEW; the true time stands in where it cannot apply.
        t.checked_add(self.skew()).unwrap_or(t)
    }

    /// Now as a `metav1.Time` (serialized to the second).
    pub fn now_time(&self) -> Time {
        Time(truncate_to_second(self.now()))
    }

    /// Now as a `metav1.MicroTime` (serialized with 6 fractional digits).
    pub fn now_micro(&self) -> MicroTime {
        MicroTime(truncate_to_micro(self.now()))
    }

    /// Converts a span of the objects' timeline into runtime time.
    pub fn to_runtime(&self, d: StdDuration) -> StdDuration {
        if self.inner.speed == 1.0 {
            d
        } else {
            // Saturating: a user's timeout of centuries at --speed 0.5 must not overflow.
            StdDuration::try_from_secs_f64(d.as_secs_f64() / self.inner.speed)
                .unwrap_or(StdDuration::MAX)
        }
    }

    /// Sleeps `d` of the objects' timeline.
    pub async fn sleep(&self, d: StdDuration) {
        tokio::time::sleep(self.to_runtime(d)).await
    }

    /// Sleeps until the objects' timeline reaches `t` (returns at once if it already has).
    pub async fn sleep_until(&self, t: Timestamp) {
        let now = self.now();
        if t > now {
            let d = StdDuration::try_from(t.duration_since(now)).unwrap_or_default();
            self.sleep(d).await
        }
    }

    /// The runtime instant at which the objects' timeline reaches `t` (for `tokio::time::sleep_until`).
    pub fn runtime_instant_at(&self, t: Timestamp) -> tokio::time::Instant {
        // A deadline in a skewed timeline is that much earlier or later in the true one.
        let t = t.checked_sub(self.skew()).unwrap_or(t);
        let since = t.duration_since(self.inner.epoch);
        let since = StdDuration::try_from(since).unwrap_or_default();
        // Saturating: a deadline at the end of time (a toleration or grace period of i64::MAX
        // seconds) at a slow --speed must not overflow the runtime's Instant.
        let start = self.inner.start;
        start
            .checked_add(self.to_runtime(since))
            .or_else(|| start.checked_add(FAR_FUTURE))
            .unwrap_or(start)
    }

    /// Seconds since the epoch with millisecond precision, as printed in sim traces.
    pub fn elapsed_label(&self) -> String {
        format_elapsed(self.elapsed())
    }
}

/// `t + secs`, saturating at the ends of the representable range (years -9999 and 9999) instead
/// of panicking (the latest is 9999-12-30T22:00:00Z): grace periods, tolerations and deadlines come from users and may be `i64::MAX`.
pub fn saturating_add_secs(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs))
        .unwrap_or(if secs < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        })
}

/// `t + d` for a span of the objects' timeline, saturating like [`saturating_add_secs`].
pub fn saturating_add(t: Timestamp, d: StdDuration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// `12.345s` style label of a span since the start of a run.
pub fn format_elapsed(d: StdDuration) -> String {
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

/// Drops sub-second precision (what a `metav1.Time` round trip keeps).
pub fn truncate_to_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).expect("in range")
}

/// Drops sub-microsecond precision (what a `metav1.MicroTime` round trip keeps).
pub fn truncate_to_micro(t: Timestamp) -> Timestamp {
    Timestamp::from_microsecond(t.as_microsecond()).expect("in range")
}

/// Formats a `metav1.Time` string: RFC 3339, UTC, seconds.
pub fn format_time(t: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).expect("formattable")
}

/// Formats a `metav1.MicroTime` string: RFC 3339, UTC, exactly 6 fractional digits.
pub fn format_micro_time(t: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S%.6fZ", t).expect("formattable")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_arithmetic_on_extreme_values() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            format_time(saturating_add_secs(t, 30)),
            "2026-01-01T00:00:30Z"
        );
        assert_eq!(saturating_add_secs(t, i64::MAX), Timestamp::MAX);
        assert_eq!(saturating_add_secs(t, i64::MIN), Timestamp::MIN);
        assert_eq!(
            format_time(truncate_to_second(Timestamp::MAX)),
            "9999-12-30T22:00:00Z"
        );
        assert_eq!(saturating_add(t, StdDuration::MAX), Timestamp::MAX);
        assert_eq!(
            format_time(saturating_add(t, StdDuration::from_secs(60))),
            "2026-01-01T00:01:00Z"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn virtual_clock_follows_paused_time() {
        let c = Clock::virtual_default();
        assert_eq!(format_time(c.now()), "2026-01-01T00:00:00Z");
        c.sleep(StdDuration::from_millis(55_250)).await;
        assert_eq!(format_time(c.now()), "2026-01-01T00:00:55Z");
        assert_eq!(format_micro_time(c.now()), "2026-01-01T00:00:55.250000Z");
        assert_eq!(c.elapsed_label(), "55.250s");
        assert_eq!(
            serde_json::to_string(&c.now_time()).unwrap(),
            "\"2026-01-01T00:00:55Z\""
        );
        assert_eq!(
            serde_json::to_string(&c.now_micro()).unwrap(),
            "\"2026-01-01T00:00:55.250000Z\""
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scaled_clock_runs_faster_than_runtime_time() {
        let c = Clock::scaled_from("2026-01-01T00:00:00Z".parse().unwrap(), 20.0);
        let before = tokio::time::Instant::now();
        c.sleep(StdDuration::from_secs(300)).await;
        assert_eq!(
            tokio::time::Instant::now() - before,
            StdDuration::from_secs(15)
        );
        assert_eq!(format_time(c.now()), "2026-01-01T00:05:00Z");
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_until_and_runtime_instant_agree() {
        let c = Clock::scaled_from("2026-01-01T00:00:00Z".parse().unwrap(), 2.0);
        let t: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert_eq!(
            c.runtime_instant_at(t) - tokio::time::Instant::now(),
            StdDuration::from_secs(30)
        );
        c.sleep_until(t).await;
        assert_eq!(c.now(), t);
        c.sleep_until("2025-01-01T00:00:00Z".parse().unwrap()).await; // past: returns at once
        assert_eq!(c.now(), t);
    }

    /// The end of time at a slow speed does not fit in an `Instant`: the runtime deadline
    /// saturates to the far future instead of panicking (a taint eviction or pod GC timer for a
    /// toleration of i64::MAX seconds used to).
    #[tokio::test(start_paused = true)]
    async fn runtime_instant_at_the_end_of_time_saturates() {
        let now = tokio::time::Instant::now();
        for speed in [1.0, 1e-12] {
            let c = Clock::scaled_from("2026-01-01T00:00:00Z".parse().unwrap(), speed);
            let at = c.runtime_instant_at(Timestamp::MAX);
            assert!(at - now >= FAR_FUTURE, "speed {speed}");
            // Before the epoch: now.
            assert_eq!(c.runtime_instant_at(Timestamp::MIN), now);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_skewed_clock_reads_its_offset_but_keeps_the_true_timers() {
        let c = Clock::virtual_default();
        let (skewed, skew) = c.skewed();
        skew.set(SignedDuration::from_secs(120)).unwrap();
        assert_eq!(format_time(skewed.now()), "2026-01-01T00:02:00Z");
        assert_eq!(format_time(c.now()), "2026-01-01T00:00:00Z");
        // A deadline in the skewed timeline is the same instant of the runtime.
        assert_eq!(
            skewed.runtime_instant_at(skewed.now()),
            c.runtime_instant_at(c.now())
        );
        skewed.sleep(StdDuration::from_secs(10)).await;
        assert_eq!(format_time(c.now()), "2026-01-01T00:00:10Z");
        assert_eq!(format_time(skewed.now()), "2026-01-01T00:02:10Z");
        skew.set(SignedDuration::from_secs(-30)).unwrap();
        assert_eq!(format_time(skewed.now()), "2025-12-31T23:59:40Z");
        assert_eq!(skew.get(), SignedDuration::from_secs(-30));
        assert!(skew.set(SignedDuration::from_secs(367 * 86_400)).is_err());
        assert!(skew.set(SignedDuration::MIN).is_err());
        assert_eq!(skew.get(), SignedDuration::from_secs(-30));
        // Clones share the offset; the cluster's clock never has one.
        let again = skewed.clone();
        skew.set(SignedDuration::ZERO).unwrap();
        assert_eq!(again.now(), c.now());
    }
}
