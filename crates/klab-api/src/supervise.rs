//! Supervision of long-running components: a component that panics or stops is restarted with
//! backoff, logged once with its backtrace, and reported in a shared `Health` registry that the API
//! server serves as `/readyz`, `/livez` and `/healthz` checks and as `/metrics` counters.
//!
//! Why: upstream components are processes. `HandleCrash` logs a panic and re-panics, the process
//! dies, and its supervisor restarts it — visibly (a static pod in CrashLoopBackOff, a kubelet
//! restarted by systemd). In one klab process a component is a task, and a panicking task would
//! otherwise vanish silently while the rest of the cluster looks healthy. This module gives a task
//! the same life as a supervised process:
//!
//! - control-plane components (controllers, the scheduler) restart as kubeadm's static pods do
//!   under the kubelet: crash-loop backoff 10 s, doubling, capped at 5 min, reset after 10 min of
//!   running without a failure ([`RestartPolicy::CrashLoop`]);
//! - kubelets restart as kubeadm's `kubelet.service` does under systemd: `Restart=always`,
//!   `RestartSec=10` ([`RestartPolicy::Fixed`]).
//!
//! While a component waits to restart, its health check fails. Every failure is kept in order, so
//! `klab sim` can fail a run on the first one (a panic there is a bug, never a simulated fault).
//! Backoff sleeps on the cluster's `Clock`, so it is virtual in sim and scaled in `klab up --speed`.

use std::any::Any;
use std::backtrace::Backtrace;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll};
use std::time::Duration;

use jiff::Timestamp;

use crate::Clock;

/// How a failed component comes back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RestartPolicy {
    /// The kubelet's crash-loop backoff for a static pod: 10 s, doubling, at most 5 min; a
    /// component that ran 10 min without failing starts again from 10 s.
    CrashLoop,
    /// Always after the same delay (systemd `Restart=always` with `RestartSec`).
    Fixed(Duration),
}

const CRASH_LOOP_INITIAL: Duration = Duration::from_secs(10);
const CRASH_LOOP_MAX: Duration = Duration::from_secs(300);
const CRASH_LOOP_RESET: Duration = Duration::from_secs(600);

impl RestartPolicy {
    /// The delay before the next start, given the previous delay (`None` before the first failure)
    /// and how long the component ran this time.
    pub fn next_delay(&self, previous: Option<Duration>, ran_for: Duration) -> Duration {
        match *self {
            RestartPolicy::Fixed(d) => d,
            RestartPolicy::CrashLoop => match previous {
                Some(p) if ran_for < CRASH_LOOP_RESET => p
                    .saturating_mul(2)
                    .clamp(CRASH_LOOP_INITIAL, CRASH_LOOP_MAX),
                _ => CRASH_LOOP_INITIAL,
            },
        }
    }
}

/// How a component run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// It panicked.
    Panic,
    /// It returned an error.
    Error,
    /// It returned although it is meant to run for ever.
    Exited,
}

/// One failure of one component.
#[derive(Debug, Clone)]
pub struct Failure {
    pub component: String,
    pub at: Timestamp,
    pub kind: FailureKind,
    /// The panic message with its location, or the error.
    pub message: String,
    /// The backtrace of a panic.
    pub backtrace: Option<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FailureKind::Panic => write!(f, "{} panicked: {}", self.component, self.message),
            FailureKind::Error => write!(f, "{} failed: {}", self.component, self.message),
            FailureKind::Exited => write!(f, "{} exited: {}", self.component, self.message),
        }
    }
}

/// Where a component is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentState {
    /// Running (possibly after restarts).
    Running,
    /// Failed; starts again at `until`.
    BackingOff { until: Timestamp },
}

/// The health of one supervised component.
#[derive(Debug, Clone)]
pub struct ComponentHealth {
    pub state: ComponentState,
    /// How many times it was started again after a failure.
    pub restarts: u64,
    pub panics: u64,
    pub last_failure: Option<Failure>,
}

#[derive(Default)]
struct Inner {
    components: BTreeMap<String, ComponentHealth>,
    failures: Vec<Failure>,
    /// One wake-up per supervised component, for injected panics.
    inject: BTreeMap<String, Arc<tokio::sync::Notify>>,
}

/// The health registry of one cluster. Cheap to clone; every clone is the same registry.
#[derive(Clone, Default)]
pub struct Health {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("components", &self.lock().components.len())
            .finish()
    }
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_running(&self, name: &str) {
        let mut g = self.lock();
        let c = g
            .components
            .entry(name.to_string())
            .or_insert(ComponentHealth {
                state: ComponentState::Running,
                restarts: 0,
                panics: 0,
                last_failure: None,
            });
        if c.state != ComponentState::Running {
            c.state = ComponentState::Running;
            c.restarts = c.restarts.saturating_add(1);
        }
    }

    fn record_failure(&self, failure: Failure, until: Timestamp) {
        let mut g = self.lock();
        if let Some(c) = g.components.get_mut(&failure.component) {
            c.state = ComponentState::BackingOff { until };
            if failure.kind == FailureKind::Panic {
                c.panics = c.panics.saturating_add(1);
            }
            c.last_failure = Some(failure.clone());
        }
        g.failures.push(failure);
    }

    /// Makes a running component panic at its next poll (a fault to see supervision at work:
    /// `klab component panic NAME`). `false` if no such component is supervised.
    pub fn inject_panic(&self, name: &str) -> bool {
        match self.lock().inject.get(name) {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }

    fn injector(&self, name: &str) -> Arc<tokio::sync::Notify> {
        self.lock()
            .inject
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// Every supervised component by name.
    pub fn components(&self) -> BTreeMap<String, ComponentHealth> {
        self.lock().components.clone()
    }

    /// Every failure so far, oldest first.
    pub fn failures(&self) -> Vec<Failure> {
        self.lock().failures.clone()
    }

    /// The first failure, if any.
    pub fn first_failure(&self) -> Option<Failure> {
        self.lock().failures.first().cloned()
    }
}

/// Runs a component for ever under `policy`: `start()` builds one run of it; when the run panics,
/// fails or returns, the failure is logged once and recorded in `health`, and after the policy's
/// delay a new run is started. Spawn the returned future; aborting it stops the component.
pub async fn supervise<F, Fut>(
    health: Health,
    name: impl Into<String>,
    clock: Clock,
    policy: RestartPolicy,
    mut start: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    install_panic_hook();
    let name = name.into();
    let injected = health.injector(&name);
    let mut delay: Option<Duration> = None;
    loop {
        health.set_running(&name);
        let started = clock.now();
        let run = start();
        let injected = injected.clone();
        let label = name.clone();
        let outcome = CatchPanic::new(async move {
            tokio::select! {
                biased;
                _ = injected.notified() => panic!("panic injected into {label}"),
                r = run => r,
            }
        })
        .await;
        let now = clock.now();
        let (kind, message, backtrace) = match outcome {
            Ok(Ok(())) => (
                FailureKind::Exited,
                "the component returned; it is meant to run until stopped".to_string(),
                None,
            ),
            Ok(Err(e)) => (FailureKind::Error, e, None),
            Err(p) => (FailureKind::Panic, p.message, p.backtrace),
        };
        let ran_for = now
            .duration_since(started)
            .unsigned_abs()
            .min(Duration::from_secs(u64::MAX / 4));
        let next = policy.next_delay(delay, ran_for);
        delay = Some(next);
        let failure = Failure {
            component: name.clone(),
            at: now,
            kind,
            message,
            backtrace,
        };
        match &failure.backtrace {
            Some(bt) => tracing::error!(
                "{failure}; restarting in {}s\nbacktrace:\n{bt}",
                next.as_secs()
            ),
            None => tracing::error!("{failure}; restarting in {}s", next.as_secs()),
        }
        let until = jiff::SignedDuration::try_from(next)
            .ok()
            .and_then(|d| now.checked_add(d).ok())
            .unwrap_or(Timestamp::MAX);
        health.record_failure(failure, until);
        clock.sleep(next).await;
    }
}

/// A caught panic: its message with location, and the backtrace taken where it happened.
#[derive(Debug)]
pub struct CaughtPanic {
    pub message: String,
    pub backtrace: Option<String>,
}

/// Runs `fut`, turning a panic in any of its polls into `Err` with the panic's message,
/// location and backtrace, which the panic hook then does not print (the caller logs it once).
/// The API server answers a request that panics with this.
pub async fn catch_panic<F: Future>(fut: F) -> Result<F::Output, CaughtPanic> {
    install_panic_hook();
    CatchPanic::new(fut).await
}

thread_local! {
    /// How many supervised polls are on this thread's stack: panics inside them are captured for
    /// the supervisor instead of printed by the default hook (so each is logged once).
    static SUPERVISED_DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Location and backtrace of the last panic inside a supervised poll on this thread.
    static LAST_PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if SUPERVISED_DEPTH.with(|d| d.get()) > 0 {
                let location = info
                    .location()
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "<unknown>".into());
                let bt = Backtrace::force_capture().to_string();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some((location, bt)));
            } else {
                previous(info)
            }
        }));
    });
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Polls a future and turns a panic in any poll into an `Err` (the future is dropped then).
struct CatchPanic<F> {
    inner: Option<Pin<Box<F>>>,
}

impl<F: Future> CatchPanic<F> {
    fn new(f: F) -> Self {
        CatchPanic {
            inner: Some(Box::pin(f)),
        }
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, CaughtPanic>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Pending;
        };
        SUPERVISED_DEPTH.with(|d| d.set(d.get().saturating_add(1)));
        let r = catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx)));
        SUPERVISED_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        match r {
            Ok(Poll::Ready(v)) => {
                self.inner = None;
                Poll::Ready(Ok(v))
            }
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => {
                self.inner = None;
                let (location, backtrace) = LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .map(|(l, b)| (Some(l), Some(b)))
                    .unwrap_or((None, None));
                let msg = panic_message(payload.as_ref());
                let message = match location {
                    Some(l) => format!("{msg} (at {l})"),
                    None => msg,
                };
                Poll::Ready(Err(CaughtPanic { message, backtrace }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn crash_loop_doubles_caps_and_resets() {
        let p = RestartPolicy::CrashLoop;
        let short = Duration::from_secs(1);
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..8 {
            let next = p.next_delay(d, short);
            seen.push(next.as_secs());
            d = Some(next);
        }
        assert_eq!(seen, [10, 20, 40, 80, 160, 300, 300, 300]);
        // Ten minutes of running without a failure start the backoff again.
        assert_eq!(p.next_delay(d, Duration::from_secs(600)).as_secs(), 10);
        assert_eq!(
            RestartPolicy::Fixed(Duration::from_secs(10))
                .next_delay(Some(Duration::from_secs(10)), short),
            Duration::from_secs(10)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_component_is_restarted_with_backoff_and_reported() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        let c = clock.clone();
        let task = tokio::spawn(supervise(
            health.clone(),
            "test-controller",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                let n = r.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                async move {
                    c.sleep(Duration::from_secs(1)).await;
                    if n < 2 {
                        let v: Vec<u32> = Vec::new();
                        let _ = v[n as usize]; // index out of bounds
                    }
                    c.sleep(Duration::from_secs(3600)).await;
                    Ok(())
                }
            },
        ));
        // First run panics at 1 s; restart at 11 s panics at 12 s; restart at 32 s runs.
        clock.sleep(Duration::from_millis(1500)).await;
        let h = &health.components()["test-controller"];
        assert!(matches!(h.state, ComponentState::BackingOff { .. }));
        assert_eq!(h.panics, 1);
        let f = h.last_failure.clone().unwrap();
        assert_eq!(f.kind, FailureKind::Panic);
        assert!(f.message.contains("index out of bounds"), "{}", f.message);
        assert!(f.message.contains("supervise.rs"), "{}", f.message);
        assert!(f.backtrace.is_some());
        clock.sleep(Duration::from_secs(20)).await; // 21.5 s: second backoff (20 s) running
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(matches!(
            health.components()["test-controller"].state,
            ComponentState::BackingOff { .. }
        ));
        clock.sleep(Duration::from_secs(11)).await; // 32.5 s: third run is up
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        let h = &health.components()["test-controller"];
        assert_eq!(h.state, ComponentState::Running);
        assert_eq!((h.restarts, h.panics), (2, 2));
        assert_eq!(health.failures().len(), 2);
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_injected_panic_restarts_the_component() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        assert!(!health.inject_panic("nope"));
        let task = tokio::spawn(supervise(
            health.clone(),
            "kube-scheduler",
            clock.clone(),
            RestartPolicy::CrashLoop,
            std::future::pending,
        ));
        tokio::task::yield_now().await;
        assert!(health.inject_panic("kube-scheduler"));
        clock.sleep(Duration::from_secs(1)).await;
        let f = health.first_failure().unwrap();
        assert_eq!(f.kind, FailureKind::Panic);
        assert!(
            f.message.starts_with("panic injected into kube-scheduler"),
            "{}",
            f.message
        );
        clock.sleep(Duration::from_secs(10)).await;
        let h = &health.components()["kube-scheduler"];
        assert_eq!((h.state.clone(), h.restarts), (ComponentState::Running, 1));
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn errors_and_returns_are_failures_too() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        let task = tokio::spawn(supervise(
            health.clone(),
            "kubelet/n1",
            clock.clone(),
            RestartPolicy::Fixed(Duration::from_secs(10)),
            move || {
                let n = r.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n == 0 {
                        Err("watch failed".to_string())
                    } else {
                        Ok(())
                    }
                }
            },
        ));
        clock.sleep(Duration::from_secs(15)).await;
        let f = health.failures();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].kind, FailureKind::Error);
        assert_eq!(f[0].to_string(), "kubelet/n1 failed: watch failed");
        assert_eq!(f[1].kind, FailureKind::Exited);
        assert_eq!(
            f[1].at.duration_since(f[0].at),
            jiff::SignedDuration::from_secs(10)
        );
        task.abort();
    }
}
