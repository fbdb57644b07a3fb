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
//!
//! A component can also be stopped and started again on purpose ([`Health::control`]: `klab
//! component stop|start|restart`, a scenario's `component-stop` fault), as an administrator stops
//! a static pod by moving its manifest away or `systemctl stop`s a service. That is not a failure:
//! the run is dropped (its in-memory state with it, as a process that exits loses its own), the
//! component is reported stopped — not ready, with the reason — and nothing is started until it
//! is started again; a restart drops the run and starts a fresh one at once.

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
    /// Stopped on purpose at `since`; it runs again only when started.
    Stopped { since: Timestamp },
}

/// What an administrator asks of a supervised component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentOp {
    /// Drop the running component and keep it down.
    Stop,
    /// Start a stopped component.
    Start,
    /// Drop the running (or stopped, or backing-off) component and start a fresh one at once.
    Restart,
}

impl ComponentOp {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "stop" => Some(ComponentOp::Stop),
            "start" => Some(ComponentOp::Start),
            "restart" => Some(ComponentOp::Restart),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ComponentOp::Stop => "stop",
            ComponentOp::Start => "start",
            ComponentOp::Restart => "restart",
        }
    }
}

/// What the administrator wants of one component: whether it is stopped, and a generation every
/// restart bumps (a run started under an older generation is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wanted {
    pub stopped: bool,
    pub generation: u64,
}

/// The pure transition of [`Health::control`]: stopping a stopped component or starting one that
/// is not stopped is refused (like starting a running kubelet), a restart always goes through.
pub fn next_wanted(name: &str, w: Wanted, op: ComponentOp) -> Result<Wanted, String> {
    match (op, w.stopped) {
        (ComponentOp::Stop, true) => Err(format!("component {name} is already stopped")),
        (ComponentOp::Stop, false) => Ok(Wanted { stopped: true, ..w }),
        (ComponentOp::Start, false) => {
            Err(format!("component {name} is not stopped (use restart)"))
        }
        (ComponentOp::Start, true) => Ok(Wanted {
            stopped: false,
            ..w
        }),
        (ComponentOp::Restart, _) => Ok(Wanted {
            stopped: false,
            generation: w.generation.saturating_add(1),
        }),
    }
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
    /// What the administrator wants of each supervised component (stop, start, restart).
    control: BTreeMap<String, tokio::sync::watch::Sender<Wanted>>,
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
        // Only a start after a failure is a restart; a start after a stop is the administrator's.
        if matches!(c.state, ComponentState::BackingOff { .. }) {
            c.restarts = c.restarts.saturating_add(1);
        }
        c.state = ComponentState::Running;
    }

    fn set_stopped(&self, name: &str, since: Timestamp) {
        if let Some(c) = self.lock().components.get_mut(name) {
            c.state = ComponentState::Stopped { since };
        }
    }

    fn controller(&self, name: &str) -> tokio::sync::watch::Receiver<Wanted> {
        self.lock()
            .control
            .entry(name.to_string())
            .or_insert_with(|| tokio::sync::watch::Sender::new(Wanted::default()))
            .subscribe()
    }

    /// Stops, starts or restarts supervised components, all or none: every name must be
    /// supervised and every transition allowed ([`next_wanted`]) before any is applied. The
    /// components act on it at their next poll, in the same instant.
    pub fn control(&self, names: &[String], op: ComponentOp) -> Result<(), String> {
        let g = self.lock();
        let mut next = Vec::with_capacity(names.len());
        for name in names {
            let tx = g
                .control
                .get(name)
                .ok_or_else(|| format!("no supervised component {name:?}"))?;
            next.push((tx, next_wanted(name, *tx.borrow(), op)?));
        }
        for (tx, w) in next {
            tx.send_replace(w);
        }
        Ok(())
    }

    /// Whether a component was stopped on purpose and not started since.
    pub fn is_stopped(&self, name: &str) -> bool {
        self.lock()
            .control
            .get(name)
            .is_some_and(|tx| tx.borrow().stopped)
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
    let mut wanted = health.controller(&name);
    let mut delay: Option<Duration> = None;
    loop {
        if wanted.borrow_and_update().stopped {
            health.set_stopped(&name, clock.now());
            tracing::info!("{name} stopped");
            while wanted.borrow_and_update().stopped {
                if wanted.changed().await.is_err() {
                    return;
                }
            }
            tracing::info!("{name} started");
        }
        let generation = wanted.borrow().generation;
        health.set_running(&name);
        let started = clock.now();
        let run = start();
        let injected = injected.clone();
        let label = name.clone();
        let mut interrupt = wanted.clone();
        let outcome = CatchPanic::new(async move {
            tokio::select! {
                biased;
                _ = injected.notified() => panic!("panic injected into {label}"),
                _ = interrupted(&mut interrupt, generation) => None,
                r = run => Some(r),
            }
        })
        .await;
        let now = clock.now();
        let (kind, message, backtrace) = match outcome {
            // Stopped or restarted on purpose: the run is gone with its state, no failure.
            Ok(None) => {
                delay = None;
                continue;
            }
            Ok(Some(Ok(()))) => (
                FailureKind::Exited,
                "the component returned; it is meant to run until stopped".to_string(),
                None,
            ),
            Ok(Some(Err(e))) => (FailureKind::Error, e, None),
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
        // A stop or restart while backing off takes effect at once.
        let generation = wanted.borrow().generation;
        tokio::select! {
            biased;
            _ = interrupted(&mut wanted, generation) => {}
            _ = clock.sleep(next) => {}
        }
    }
}

/// Resolves once the component is to be stopped, or restarted past `generation`.
async fn interrupted(wanted: &mut tokio::sync::watch::Receiver<Wanted>, generation: u64) {
    loop {
        let w = *wanted.borrow_and_update();
        if w.stopped || w.generation != generation {
            return;
        }
        if wanted.changed().await.is_err() {
            // The registry is gone: nothing can stop this run any more.
            std::future::pending::<()>().await;
        }
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

    #[test]
    fn stop_start_restart_transitions() {
        let up = Wanted::default();
        let down = Wanted {
            stopped: true,
            generation: 0,
        };
        let cases: &[(Wanted, ComponentOp, Result<Wanted, &str>)] = &[
            (up, ComponentOp::Stop, Ok(down)),
            (
                down,
                ComponentOp::Stop,
                Err("component c is already stopped"),
            ),
            (down, ComponentOp::Start, Ok(up)),
            (
                up,
                ComponentOp::Start,
                Err("component c is not stopped (use restart)"),
            ),
            (
                up,
                ComponentOp::Restart,
                Ok(Wanted {
                    stopped: false,
                    generation: 1,
                }),
            ),
            (
                down,
                ComponentOp::Restart,
                Ok(Wanted {
                    stopped: false,
                    generation: 1,
                }),
            ),
            (
                Wanted {
                    stopped: false,
                    generation: u64::MAX,
                },
                ComponentOp::Restart,
                Ok(Wanted {
                    stopped: false,
                    generation: u64::MAX,
                }),
            ),
        ];
        for (w, op, want) in cases {
            let got = next_wanted("c", *w, *op);
            assert_eq!(got, (*want).map_err(str::to_string), "{w:?} {op:?}");
        }
        for op in ["stop", "start", "restart"] {
            assert_eq!(ComponentOp::parse(op).map(ComponentOp::name), Some(op));
        }
        assert_eq!(ComponentOp::parse("kill"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_component_is_dropped_and_started_fresh_without_a_failure() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let runs = Arc::new(AtomicU32::new(0));
        let live = Arc::new(AtomicU32::new(0));
        let (r, l) = (runs.clone(), live.clone());
        let task = tokio::spawn(supervise(
            health.clone(),
            "kube-scheduler",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                let guard = LiveGuard(l.clone());
                guard.0.fetch_add(1, Ordering::SeqCst);
                async move {
                    let _guard = guard;
                    std::future::pending::<Result<(), String>>().await
                }
            },
        ));
        tokio::task::yield_now().await;
        let names = vec!["kube-scheduler".to_string()];
        assert_eq!(
            health.control(&["nope".to_string()], ComponentOp::Stop),
            Err("no supervised component \"nope\"".to_string())
        );
        health.control(&names, ComponentOp::Stop).unwrap();
        clock.sleep(Duration::from_secs(30)).await;
        // Dropped (its state gone), reported stopped, not restarted, not a failure.
        assert_eq!(live.load(Ordering::SeqCst), 0);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(matches!(
            health.components()["kube-scheduler"].state,
            ComponentState::Stopped { .. }
        ));
        assert!(health.is_stopped("kube-scheduler"));
        assert!(health.failures().is_empty());
        assert_eq!(
            health.control(&names, ComponentOp::Stop),
            Err("component kube-scheduler is already stopped".to_string())
        );
        health.control(&names, ComponentOp::Start).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(
            (runs.load(Ordering::SeqCst), live.load(Ordering::SeqCst)),
            (2, 1)
        );
        // A restart drops the run and starts a fresh one in the same instant.
        health.control(&names, ComponentOp::Restart).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(
            (runs.load(Ordering::SeqCst), live.load(Ordering::SeqCst)),
            (3, 1)
        );
        let h = &health.components()["kube-scheduler"];
        assert_eq!((h.state.clone(), h.restarts), (ComponentState::Running, 0));
        assert!(health.failures().is_empty());
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_while_backing_off_keeps_it_down_and_a_restart_starts_it_at_once() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        let task = tokio::spawn(supervise(
            health.clone(),
            "c",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                r.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>("boom".to_string()) }
            },
        ));
        clock.sleep(Duration::from_secs(1)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        let names = vec!["c".to_string()];
        health.control(&names, ComponentOp::Stop).unwrap();
        clock.sleep(Duration::from_secs(60)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        health.control(&names, ComponentOp::Restart).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        task.abort();
    }

    /// Counts live runs: dropped with the run's future.
    struct LiveGuard(Arc<AtomicU32>);

    impl Drop for LiveGuard {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
