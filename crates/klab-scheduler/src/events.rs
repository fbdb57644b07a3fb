//! The scheduler's event recorder. kube-scheduler writes `events.k8s.io/v1` Events (reason
//! `Scheduled`/`FailedScheduling`, action `Binding`/`Scheduling`, reportingController
//! `default-scheduler`) with the new-API series semantics: an isomorphic event (same regarding
//! object incl. resourceVersion, reason, action, reporting controller) becomes a series — the first
//! repeat PATCHes `series.count = 2`, later repeats are counted in memory and written when the
//! series is finished (no repeat for 6 min) or refreshed (every 30 min).
//!
//! klab's API server stores events.k8s.io/v1 Events in the core/v1 form (as upstream), so
//! `kubectl describe` shows them. [`EventsApi::CoreV1`] writes the same event directly in its core/v1
//! shape, for API servers that keep the two apart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use klab_api::Clock;
use klab_api::clock::format_micro_time;

/// Which Events API the recorder writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EventsApi {
    /// `events.k8s.io/v1`, as upstream kube-scheduler.
    #[default]
    EventsV1,
    /// core/v1 Events shaped like the core/v1 view of an events.k8s.io event.
    CoreV1,
}

/// Upstream `finishTime`: a series with no repeat for this long is finished.
const FINISH_TIME: Duration = Duration::from_secs(6 * 60);
/// Upstream `refreshTime`: ongoing series are written out this often.
const REFRESH_TIME: Duration = Duration::from_secs(30 * 60);
/// Upstream note length limit of events.k8s.io.
const NOTE_LENGTH_LIMIT: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct IsoKey {
    regarding: String,
    reason: String,
    action: String,
}

#[derive(Clone, Debug)]
struct Series {
    name: String,
    namespace: String,
    count: i32,
    event_time: jiff::Timestamp,
    last_observed: jiff::Timestamp,
    written_count: i32,
    last_refresh: jiff::Timestamp,
    /// `due_at()` as filed in `SeriesCache::due`.
    filed_due: jiff::Timestamp,
}

/// What recording one event requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeriesDecision {
    Create,
    /// PATCH the series of an existing event to this count.
    PatchSeries {
        name: String,
        namespace: String,
        count: i32,
    },
    /// Counted in memory only.
    Nothing,
}

/// Pure series bookkeeping.
#[derive(Debug, Default)]
pub struct SeriesCache {
    entries: BTreeMap<IsoKey, Series>,
    /// Every series by the first instant `maintain` has something to do with it: `maintain`,
    /// called on every pass of the scheduler, visits only the series due (with one singleton
    /// per scheduled pod, a scan of them all on each pass cost the square of the pods).
    due: BTreeSet<(jiff::Timestamp, IsoKey)>,
}

impl Series {
    /// The first instant at which `maintain` has something to do with this series: drop a
    /// singleton, write out a count not yet written (finished or due for refresh), or drop a
    /// finished series.
    fn due_at(&self) -> jiff::Timestamp {
        let after = klab_api::clock::saturating_add;
        if self.count == 1 {
            return after(self.event_time, FINISH_TIME);
        }
        let finished = after(self.last_observed, FINISH_TIME);
        if self.count == self.written_count {
            finished
        } else {
            finished.min(after(self.last_refresh, REFRESH_TIME))
        }
    }
}

fn ref_key(r: &ObjectReference) -> String {
    format!(
        "{}/{}/{}/{}/{}/{}",
        r.api_version.as_deref().unwrap_or(""),
        r.kind.as_deref().unwrap_or(""),
        r.namespace.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or(""),
        r.uid.as_deref().unwrap_or(""),
        r.resource_version.as_deref().unwrap_or("")
    )
}

impl SeriesCache {
    /// Observes one event at `now`; `name` is the name a new event would get.
    pub fn observe(
        &mut self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        name: &str,
        namespace: &str,
        now: jiff::Timestamp,
    ) -> SeriesDecision {
        let key = IsoKey {
            regarding: ref_key(regarding),
            reason: reason.into(),
            action: action.into(),
        };
        if let Some(s) = self.entries.get_mut(&key) {
            s.count = s.count.saturating_add(1);
            s.last_observed = now;
            let decision = if s.count == 2 {
                s.written_count = 2;
                SeriesDecision::PatchSeries {
                    name: s.name.clone(),
                    namespace: s.namespace.clone(),
                    count: 2,
                }
            } else {
                SeriesDecision::Nothing
            };
            self.refile(&key);
            return decision;
        }
        let series = Series {
            name: name.into(),
            namespace: namespace.into(),
            count: 1,
            event_time: now,
            last_observed: now,
            written_count: 1,
            last_refresh: now,
            filed_due: now,
        };
        self.entries.insert(key.clone(), series);
        self.refile(&key);
        SeriesDecision::Create
    }

    /// Files a series under its current due instant.
    fn refile(&mut self, key: &IsoKey) {
        let Some(s) = self.entries.get_mut(key) else {
            return;
        };
        let due = s.due_at();
        let old = std::mem::replace(&mut s.filed_due, due);
        self.due.remove(&(old, key.clone()));
        self.due.insert((due, key.clone()));
    }

    /// Series to write out at `now` (finished or due for refresh), as `(name, namespace, count,
    /// lastObservedTime)`; finished entries (and singletons older than 6 min) are dropped.
    pub fn maintain(
        &mut self,
        now: jiff::Timestamp,
    ) -> Vec<(String, String, i32, jiff::Timestamp)> {
        let mut due: Vec<IsoKey> = self
            .due
            .iter()
            .take_while(|(t, _)| *t <= now)
            .map(|(_, k)| k.clone())
            .collect();
        // In key order, as a scan of every series writes them.
        due.sort();
        self.maintain_keys(now, due)
    }

    /// `maintain` over `keys` (in the order given): a series not yet due is left as it is.
    fn maintain_keys(
        &mut self,
        now: jiff::Timestamp,
        keys: Vec<IsoKey>,
    ) -> Vec<(String, String, i32, jiff::Timestamp)> {
        let mut out = Vec::new();
        let finish = jiff::SignedDuration::try_from(FINISH_TIME).unwrap_or_default();
        let refresh = jiff::SignedDuration::try_from(REFRESH_TIME).unwrap_or_default();
        for key in keys {
            let Some(s) = self.entries.get_mut(&key) else {
                continue;
            };
            let keep = if s.count == 1 {
                now.duration_since(s.event_time) < finish
            } else {
                let finished = now.duration_since(s.last_observed) >= finish;
                let due = now.duration_since(s.last_refresh) >= refresh;
                if (finished || due) && s.count != s.written_count {
                    out.push((
                        s.name.clone(),
                        s.namespace.clone(),
                        s.count,
                        s.last_observed,
                    ));
                    s.written_count = s.count;
                    s.last_refresh = now;
                }
                !finished
            };
            if keep {
                self.refile(&key);
            } else if let Some(s) = self.entries.remove(&key) {
                self.due.remove(&(s.filed_due, key));
            }
        }
        out
    }

    /// Test support: `maintain` visiting every series.
    #[cfg(test)]
    fn maintain_all(
        &mut self,
        now: jiff::Timestamp,
    ) -> Vec<(String, String, i32, jiff::Timestamp)> {
        let keys: Vec<IsoKey> = self.entries.keys().cloned().collect();
        self.maintain_keys(now, keys)
    }
}

/// Truncates a note to the events.k8s.io limit the way upstream does.
pub fn truncate_note(note: &str) -> String {
    if note.len() <= NOTE_LENGTH_LIMIT {
        return note.to_string();
    }
    let mut cut = NOTE_LENGTH_LIMIT - 3;
    while !note.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    format!("{}...", &note[..cut])
}

/// One event to record.
pub struct EventSpec<'a> {
    pub regarding: &'a ObjectReference,
    pub type_: &'a str,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

/// The event object as JSON for the chosen API.
pub fn build_event(
    api: EventsApi,
    controller: &str,
    instance: &str,
    name: &str,
    ev: &EventSpec<'_>,
    now: jiff::Timestamp,
) -> Value {
    let ns = ev
        .regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let regarding = serde_json::to_value(ev.regarding).unwrap_or(Value::Null);
    let note = truncate_note(ev.note);
    let event_time = format_micro_time(klab_api::clock::truncate_to_micro(now));
    match api {
        EventsApi::EventsV1 => json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "eventTime": event_time,
            "reportingController": controller, "reportingInstance": instance,
            "action": ev.action, "reason": ev.reason, "regarding": regarding,
            "note": note, "type": ev.type_,
        }),
        EventsApi::CoreV1 => json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "eventTime": event_time,
            "reportingComponent": controller, "reportingInstance": instance,
            "action": ev.action, "reason": ev.reason, "involvedObject": regarding,
            "message": note, "type": ev.type_, "source": {},
        }),
    }
}

/// Records events through the API.
pub struct EventRecorder {
    client: kube::Client,
    clock: Clock,
    api: EventsApi,
    controller: String,
    instance: String,
    series: SeriesCache,
}

impl EventRecorder {
    pub fn new(
        client: kube::Client,
        clock: Clock,
        api: EventsApi,
        controller: &str,
        instance: &str,
    ) -> Self {
        EventRecorder {
            client,
            clock,
            api,
            controller: controller.into(),
            instance: instance.into(),
            series: SeriesCache::default(),
        }
    }

    fn dyn_api(&self, ns: &str) -> Api<kube::api::DynamicObject> {
        let ar = match self.api {
            EventsApi::EventsV1 => kube::api::ApiResource {
                group: "events.k8s.io".into(),
                version: "v1".into(),
                api_version: "events.k8s.io/v1".into(),
                kind: "Event".into(),
                plural: "events".into(),
            },
            EventsApi::CoreV1 => kube::api::ApiResource {
                group: "".into(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "Event".into(),
                plural: "events".into(),
            },
        };
        Api::namespaced_with(self.client.clone(), ns, &ar)
    }

    /// Records one event; failures are logged, never fatal (upstream drops them too).
    pub async fn record(&mut self, ev: EventSpec<'_>) {
        if let Some(write) = self.prepare(ev) {
            write.await;
        }
    }

    /// Decides what recording one event writes (the series bookkeeping happens now) and returns
    /// that write, to be awaited later or beside other work: upstream's broadcaster writes
    /// events in the background, so the scheduling loop never waits for them.
    pub fn prepare(&mut self, ev: EventSpec<'_>) -> Option<BoxFuture<'static, ()>> {
        let now = self.clock.now();
        let ns = ev
            .regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let base = ev.regarding.name.clone().unwrap_or_default();
        let nanos = now.as_nanosecond();
        let name = format!("{base}.{nanos:x}");
        match self
            .series
            .observe(ev.regarding, ev.reason, ev.action, &name, &ns, now)
        {
            SeriesDecision::Nothing => None,
            SeriesDecision::PatchSeries {
                name,
                namespace,
                count,
            } => Some(patch_series(self.dyn_api(&namespace), name, count, now).boxed()),
            SeriesDecision::Create => {
                // Two events about one object at the same virtual instant would collide on the
                // name (upstream uses wall-clock nanoseconds); bump until free.
                let body = build_event(self.api, &self.controller, &self.instance, &name, &ev, now);
                let mut obj = match serde_json::from_value::<kube::api::DynamicObject>(body) {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::warn!(error = %e, "building event");
                        return None;
                    }
                };
                let (api, reason) = (self.dyn_api(&ns), ev.reason.to_string());
                Some(
                    async move {
                        for bump in 1..=8i128 {
                            // The reply is not read: only whether the create succeeded.
                            match klab_runtime::create::create_unread(
                                &api,
                                &PostParams::default(),
                                &obj,
                            )
                            .await
                            {
                                Ok(_) => return,
                                Err(kube::Error::Api(s)) if s.code == 409 => {
                                    obj.metadata.name =
                                        Some(format!("{base}.{:x}", nanos.saturating_add(bump)));
                                }
                                Err(e) => {
                                    tracing::warn!(error = %e, reason = %reason, "recording event");
                                    return;
                                }
                            }
                        }
                    }
                    .boxed(),
                )
            }
        }
    }

    /// Writes finished / due series (call periodically).
    pub async fn maintain(&mut self) {
        for (name, ns, count, last) in self.series.maintain(self.clock.now()) {
            patch_series(self.dyn_api(&ns), name, count, last).await;
        }
    }
}

/// PATCHes a series' count and last observation onto its Event.
async fn patch_series(
    api: Api<kube::api::DynamicObject>,
    name: String,
    count: i32,
    last: jiff::Timestamp,
) {
    let patch = json!({"series": {"count": count, "lastObservedTime": format_micro_time(klab_api::clock::truncate_to_micro(last))}});
    if let Err(e) = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(error = %e, "patching event series");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(rv: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some("p".into()),
            uid: Some("u".into()),
            resource_version: Some(rv.into()),
            field_path: None,
        }
    }

    #[test]
    fn series_table() {
        let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + jiff::SignedDuration::from_secs(s);
        let mut c = SeriesCache::default();
        assert_eq!(
            c.observe(
                &r("1"),
                "FailedScheduling",
                "Scheduling",
                "p.1",
                "default",
                at(0)
            ),
            SeriesDecision::Create
        );
        assert_eq!(
            c.observe(
                &r("1"),
                "FailedScheduling",
                "Scheduling",
                "p.2",
                "default",
                at(10)
            ),
            SeriesDecision::PatchSeries {
                name: "p.1".into(),
                namespace: "default".into(),
                count: 2
            }
        );
        assert_eq!(
            c.observe(
                &r("1"),
                "FailedScheduling",
                "Scheduling",
                "p.3",
                "default",
                at(20)
            ),
            SeriesDecision::Nothing
        );
        // another resourceVersion of the pod is a different object reference: a new event
        assert_eq!(
            c.observe(
                &r("2"),
                "FailedScheduling",
                "Scheduling",
                "p.4",
                "default",
                at(20)
            ),
            SeriesDecision::Create
        );
        assert_eq!(
            c.observe(&r("1"), "Scheduled", "Binding", "p.5", "default", at(20)),
            SeriesDecision::Create
        );
        assert!(c.maintain(at(300)).is_empty());
        // 6 min after the last repeat the series finishes with its final count
        let out = c.maintain(at(380));
        assert_eq!(
            out,
            vec![("p.1".to_string(), "default".to_string(), 3, at(20))]
        );
        assert_eq!(
            c.observe(
                &r("1"),
                "FailedScheduling",
                "Scheduling",
                "p.6",
                "default",
                at(400)
            ),
            SeriesDecision::Create
        );
    }

    #[test]
    fn note_truncation() {
        assert_eq!(truncate_note("short"), "short");
        let long = "x".repeat(2000);
        let t = truncate_note(&long);
        assert_eq!(t.len(), 1024);
        assert!(t.ends_with("..."));
    }

    proptest::proptest! {
        /// Visiting only the series due changes nothing: every write-out and drop is the one a
        /// visit of every series makes, at the same call, and the index stays exact.
        #[test]
        fn visiting_only_due_series_writes_and_drops_the_same(
            ops in proptest::collection::vec((0u8..4, 0i64..400), 1..80),
        ) {
            let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
            let (mut fast, mut every) = (SeriesCache::default(), SeriesCache::default());
            let mut now = t0;
            for (i, (op, dt)) in ops.into_iter().enumerate() {
                now += jiff::SignedDuration::from_secs(dt);
                if op < 3 {
                    let (name, rv) = (format!("e.{i}"), format!("{op}"));
                    let a = fast.observe(&r(&rv), "FailedScheduling", "Scheduling", &name, "ns", now);
                    let b = every.observe(&r(&rv), "FailedScheduling", "Scheduling", &name, "ns", now);
                    proptest::prop_assert_eq!(a, b);
                } else {
                    proptest::prop_assert_eq!(fast.maintain(now), every.maintain_all(now));
                    let keys = |c: &SeriesCache| c.entries.keys().cloned().collect::<Vec<_>>();
                    proptest::prop_assert_eq!(keys(&fast), keys(&every));
                    let filed: BTreeSet<_> = fast
                        .entries
                        .iter()
                        .map(|(k, s)| (s.due_at(), k.clone()))
                        .collect();
                    proptest::prop_assert_eq!(&fast.due, &filed);
                }
            }
        }
    }
}
