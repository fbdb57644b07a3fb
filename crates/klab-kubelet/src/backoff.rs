//! Backoff arithmetic: the registration and lease-ensure retry sleeps, jittered sliding periods,
//! and the crash-loop backoff of restarting containers (`client-go/util/flowcontrol.Backoff`).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use crate::config::{CONTAINER_BACKOFF_PERIOD, MAX_CONTAINER_BACKOFF};

/// Registration retry: the first sleep (before the first attempt) is 100 ms, doubling, capped at 7 s.
pub const REGISTRATION_INITIAL: Duration = Duration::from_millis(100);
/// Lease `backoffEnsureLease`: the first sleep after a failure is 200 ms, doubling, capped at 7 s.
pub const LEASE_ENSURE_INITIAL: Duration = Duration::from_millis(200);
/// Cap of both sequences above.
pub const RETRY_CAP: Duration = Duration::from_secs(7);

/// A doubling sleep sequence with a cap that never gives up.
#[derive(Clone, Debug)]
pub struct Doubling {
    next: Duration,
    cap: Duration,
}

impl Doubling {
    pub fn new(initial: Duration, cap: Duration) -> Self {
        Doubling { next: initial, cap }
    }

    /// The next sleep; advances the sequence.
    pub fn next_sleep(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.cap);
        d
    }
}

/// `period × (1 + jitter × u)` with `u ∈ [0, 1)` (upstream `wait.Jitter`).
pub fn jittered(period: Duration, jitter: f64, u: f64) -> Duration {
    if jitter <= 0.0 {
        period
    } else {
        period.mul_f64(1.0 + jitter * u)
    }
}

/// One crash-loop entry: the current delay and when it was last advanced (the container's start).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffEntry {
    pub backoff: Duration,
    pub last_update: Timestamp,
}

/// Crash-loop backoff keyed by container identity (pod UID + container name + spec hash).
/// Lives in the kubelet process: a kubelet restart forgets it, as upstream.
#[derive(Clone, Debug, Default)]
pub struct CrashLoopBackoff {
    entries: BTreeMap<String, BackoffEntry>,
}

/// What to do with an exited container that the restart policy wants restarted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RestartDecision {
    /// Start it now (and the entry was advanced).
    StartNow,
    /// Still in back-off: wait until `until`; `delay` is the current backoff (for the message).
    Wait { until: Timestamp, delay: Duration },
}

impl CrashLoopBackoff {
    /// Whether an entry is expired: the container ran more than 2 × max (10 min) after its last start.
    fn expired(entry: &BackoffEntry, finished_at: Timestamp) -> bool {
        finished_at.duration_since(entry.last_update)
            > jiff::SignedDuration::try_from(MAX_CONTAINER_BACKOFF * 2).unwrap_or_default()
    }

    /// Decide for a container that exited at `finished_at`, at time `now`. On `StartNow` the entry
    /// is advanced: new or expired → 10 s, else doubled up to 5 min; `last_update = now`.
    pub fn decide(&mut self, key: &str, finished_at: Timestamp, now: Timestamp) -> RestartDecision {
        if let Some(e) = self.entries.get(key)
            && !Self::expired(e, finished_at)
        {
            let until = finished_at + jiff::SignedDuration::try_from(e.backoff).unwrap_or_default();
            if now < until {
                return RestartDecision::Wait {
                    until,
                    delay: e.backoff,
                };
            }
        }
        let next = match self.entries.get(key) {
            Some(e) if !Self::expired(e, finished_at) => (e.backoff * 2).min(MAX_CONTAINER_BACKOFF),
            _ => CONTAINER_BACKOFF_PERIOD,
        };
        self.entries.insert(
            key.to_string(),
            BackoffEntry {
                backoff: next,
                last_update: now,
            },
        );
        RestartDecision::StartNow
    }

    pub fn entry(&self, key: &str) -> Option<&BackoffEntry> {
        self.entries.get(key)
    }

    /// Drops entries of a pod that is gone.
    pub fn forget_prefix(&mut self, prefix: &str) {
        self.entries.retain(|k, _| !k.starts_with(prefix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &[Duration]) -> Vec<f64> {
        v.iter().map(|d| d.as_secs_f64()).collect()
    }

    #[test]
    fn registration_and_lease_sequences() {
        // N-04 / N-76: 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7, 7 …
        let mut r = Doubling::new(REGISTRATION_INITIAL, RETRY_CAP);
        let v: Vec<_> = (0..9).map(|_| r.next_sleep()).collect();
        assert_eq!(secs(&v), vec![0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0, 7.0]);
        // N-13: 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7, 7 …
        let mut l = Doubling::new(LEASE_ENSURE_INITIAL, RETRY_CAP);
        let v: Vec<_> = (0..8).map(|_| l.next_sleep()).collect();
        assert_eq!(secs(&v), vec![0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 7.0, 7.0]);
    }

    #[test]
    fn jitter_bounds() {
        let p = Duration::from_secs(10);
        assert_eq!(jittered(p, 0.04, 0.0), p);
        assert_eq!(jittered(p, 0.0, 0.9), p);
        let j = jittered(p, 0.04, 0.999);
        assert!(j > p && j < Duration::from_millis(10_400));
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    #[test]
    fn crash_loop_delays_double_to_five_minutes() {
        // A container that exits immediately every time it starts: first restart immediate,
        // then 10, 20, 40, 80, 160, 300, 300 s.
        let mut b = CrashLoopBackoff::default();
        let mut now = t(0);
        let mut delays = Vec::new();
        for _ in 0..8 {
            let finished = now; // exits at once
            match b.decide("k", finished, now) {
                RestartDecision::StartNow => delays.push(0),
                RestartDecision::Wait { until, delay } => {
                    delays.push(delay.as_secs());
                    assert_eq!(
                        until,
                        finished + jiff::SignedDuration::try_from(delay).unwrap()
                    );
                    now = until;
                    assert_eq!(b.decide("k", finished, now), RestartDecision::StartNow);
                }
            }
        }
        assert_eq!(delays, vec![0, 10, 20, 40, 80, 160, 300, 300]);
    }

    #[test]
    fn backoff_resets_after_ten_minutes_of_running() {
        // N-28: at 5m0s backoff; restarted at t=0; runs 11 min → restart immediately, next 10 s.
        let mut b = CrashLoopBackoff::default();
        b.entries.insert(
            "k".into(),
            BackoffEntry {
                backoff: MAX_CONTAINER_BACKOFF,
                last_update: t(0),
            },
        );
        assert_eq!(b.decide("k", t(660), t(660)), RestartDecision::StartNow);
        assert_eq!(b.entry("k").unwrap().backoff, Duration::from_secs(10));
        // A 9-minute run waits the full 5m0s.
        let mut b = CrashLoopBackoff::default();
        b.entries.insert(
            "k".into(),
            BackoffEntry {
                backoff: MAX_CONTAINER_BACKOFF,
                last_update: t(0),
            },
        );
        assert_eq!(
            b.decide("k", t(540), t(540)),
            RestartDecision::Wait {
                until: t(840),
                delay: MAX_CONTAINER_BACKOFF
            }
        );
    }
}
