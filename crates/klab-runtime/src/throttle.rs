//! Client-side rate limiting, as client-go's token bucket (`--kube-api-qps` / `--kube-api-burst`):
//! every request of one component's client, except watches, waits for a token in cluster time.
//!
//! Why a simulator needs it: upstream components are throttled by their own clients (the
//! controller manager at 20 QPS with a burst of 30, the scheduler and the kubelet at 50 / 100),
//! and that is what bounds feedback loops between components. The best known is a kubelet that
//! rejects every pod at admission (memory pressure, not yet reported) while a ReplicaSet
//! replaces each rejected pod at once: on a real cluster the loop runs at the ReplicaSet
//! controller's QPS until the node's condition and taint stop it ten seconds later; without a
//! limit it would run forever at one virtual instant. The limiter is a reservation queue, like
//! `golang.org/x/time/rate`'s `Wait`: the first `burst` requests pass at once, then one every
//! `1/qps`, in the order they were made, so a sim run stays a function of its seed.
//!
//! Watches are not throttled (client-go: "We specifically don't want to rate limit watches").

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use klab_api::Clock;

/// A client's limits: requests per second and the bucket's size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub qps: f32,
    pub burst: u32,
}

impl Rate {
    /// kube-controller-manager's defaults (`--kube-api-qps=20 --kube-api-burst=30`).
    pub const CONTROLLER_MANAGER: Rate = Rate {
        qps: 20.0,
        burst: 30,
    };
    /// kube-scheduler's `clientConnection` defaults (qps 50, burst 100).
    pub const SCHEDULER: Rate = Rate {
        qps: 50.0,
        burst: 100,
    };
    /// The kubelet's `kubeAPIQPS` / `kubeAPIBurst` defaults (50 / 100 since 1.27).
    pub const KUBELET: Rate = Rate {
        qps: 50.0,
        burst: 100,
    };

    /// No client-side limit: client-go's negative QPS, as the kubelet's heartbeat client has.
    pub const UNLIMITED: Rate = Rate {
        qps: -1.0,
        burst: 0,
    };
    /// The kubelet's `eventRecordQPS` / `eventBurst` defaults (`--event-qps=50`,
    /// `--event-burst=100`), the rate of its event client.
    pub const KUBELET_EVENTS: Rate = Rate {
        qps: 50.0,
        burst: 100,
    };

    /// The spacing between tokens; `None` when the rate cannot limit anything (qps not a
    /// positive number).
    fn interval(self) -> Option<Duration> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return None;
        }
        Duration::try_from_secs_f64(1.0 / f64::from(self.qps)).ok()
    }

    /// Checks a value given on a command line or in a scenario: upstream refuses neither zero
    /// nor negative QPS outright, but klab's limiter needs a positive rate and a bucket of at
    /// least one token.
    pub fn validate(self) -> Result<(), String> {
        if self.interval().is_none() {
            return Err(format!("qps must be a positive number, got {}", self.qps));
        }
        if self.burst == 0 {
            return Err("burst must be at least 1".into());
        }
        Ok(())
    }
}

/// The limiter's state (a generic cell rate algorithm): the theoretical arrival time of the next
/// request, as cluster time elapsed since start.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Bucket {
    tat: Duration,
}

impl Bucket {
    /// Reserves a token for a request made at `now`; returns how long it must wait.
    pub fn reserve(&mut self, rate: Rate, now: Duration) -> Duration {
        let Some(interval) = rate.interval() else {
            return Duration::ZERO;
        };
        let tolerance = interval.saturating_mul(rate.burst.saturating_sub(1));
        let tat = self.tat.max(now);
        let allowed_at = tat.saturating_sub(tolerance);
        self.tat = tat.saturating_add(interval);
        allowed_at.saturating_sub(now)
    }
}

/// Whether a request is a watch (`?watch=true` / `?watch=1`), which client-go never throttles.
fn is_watch<B>(req: &http::Request<B>) -> bool {
    req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"))
    })
}

/// A tower service that holds each request until its token is due.
#[derive(Clone)]
pub struct Throttled<S> {
    inner: S,
    rate: Rate,
    bucket: Arc<Mutex<Bucket>>,
    clock: Clock,
    name: Arc<str>,
}

impl<S> Throttled<S> {
    /// `name` is the component the client belongs to, for the "waited due to client-side
    /// throttling" log line.
    pub fn new(inner: S, rate: Rate, clock: Clock, name: &str) -> Self {
        Throttled {
            inner,
            rate,
            bucket: Arc::default(),
            clock,
            name: name.into(),
        }
    }
}

/// client-go logs a wait longer than this (`longThrottleLatency`).
const LONG_THROTTLE_LATENCY: Duration = Duration::from_millis(50);

impl<S, B> tower::Service<http::Request<B>> for Throttled<S>
where
    S: tower::Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The service that was polled ready serves this request; a fresh clone waits for the
        // next (tower's usual take-the-ready-one pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let wait = if is_watch(&req) {
            Duration::ZERO
        } else {
            self.bucket
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .reserve(self.rate, self.clock.elapsed())
        };
        if wait >= LONG_THROTTLE_LATENCY {
            tracing::debug!(
                component = %self.name,
                "Waited for {wait:?} due to client-side throttling, not priority and fairness, request: {}:{}",
                req.method(),
                req.uri()
            );
        }
        let clock = self.clock.clone();
        Box::pin(async move {
            if !wait.is_zero() {
                clock.sleep(wait).await;
            }
            inner.call(req).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_passes_then_one_request_per_interval() {
        let rate = Rate {
            qps: 20.0,
            burst: 30,
        };
        let mut b = Bucket::default();
        let waits: Vec<Duration> = (0..33).map(|_| b.reserve(rate, ms(0))).collect();
        assert!(waits[..30].iter().all(|w| w.is_zero()), "{waits:?}");
        assert_eq!(&waits[30..], &[ms(50), ms(100), ms(150)]);
    }

    #[test]
    fn the_unlimited_rate_never_waits() {
        let mut b = Bucket::default();
        assert!((0..1000).all(|_| b.reserve(Rate::UNLIMITED, ms(0)).is_zero()));
        assert!(Rate::UNLIMITED.validate().is_err(), "not a flag value");
    }

    #[test]
    fn tokens_refill_while_idle_but_never_beyond_the_burst() {
        let rate = Rate {
            qps: 10.0,
            burst: 2,
        };
        let mut b = Bucket::default();
        assert_eq!(b.reserve(rate, ms(0)), ms(0));
        assert_eq!(b.reserve(rate, ms(0)), ms(0));
        assert_eq!(b.reserve(rate, ms(0)), ms(100));
        // A long pause refills two tokens, not more.
        assert_eq!(b.reserve(rate, ms(10_000)), ms(0));
        assert_eq!(b.reserve(rate, ms(10_000)), ms(0));
        assert_eq!(b.reserve(rate, ms(10_000)), ms(100));
        // Half an interval later, the queue still holds the earlier reservation.
        assert_eq!(b.reserve(rate, ms(10_050)), ms(150));
    }

    #[test]
    fn a_steady_rate_below_the_limit_never_waits() {
        let rate = Rate::CONTROLLER_MANAGER;
        let mut b = Bucket::default();
        for i in 0..1000 {
            assert_eq!(b.reserve(rate, ms(i * 60)), Duration::ZERO);
        }
    }

    #[test]
    fn rates_that_cannot_limit_are_refused_and_never_block() {
        for qps in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let rate = Rate { qps, burst: 1 };
            assert!(rate.validate().is_err(), "{qps}");
            assert_eq!(Bucket::default().reserve(rate, ms(0)), Duration::ZERO);
        }
        assert!(Rate { qps: 1.0, burst: 0 }.validate().is_err());
        assert!(Rate::KUBELET.validate().is_ok());
        // A tiny rate saturates instead of overflowing.
        let slow = Rate {
            qps: 1e-6,
            burst: u32::MAX,
        };
        let mut b = Bucket::default();
        let _ = b.reserve(slow, Duration::MAX);
        let _ = b.reserve(slow, Duration::MAX);
    }

    #[test]
    fn watches_are_recognised_by_their_query() {
        let req = |uri: &str| http::Request::get(uri).body(()).unwrap();
        assert!(is_watch(&req("/api/v1/pods?watch=true&resourceVersion=1")));
        assert!(is_watch(&req("/api/v1/pods?labelSelector=a&watch=1")));
        assert!(!is_watch(&req("/api/v1/pods?limit=500")));
        assert!(!is_watch(&req("/api/v1/namespaces/watch/pods")));
    }
}
