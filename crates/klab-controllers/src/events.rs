//! Event recording for controllers: core/v1 Events with upstream reasons, sources and aggregation.
//!
//! Modelled on client-go's legacy `record.EventRecorder` + `EventCorrelator`, kept simple and
//! deterministic:
//! - an Event is named `<object name>.<hex of the clock's unix nanoseconds>` (client-go's
//!   `fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())`), in the object's namespace or `default` for
//!   cluster-scoped objects (whose `involvedObject.namespace` stays empty);
//! - a repeat of the same (source, object, type, reason, message) PATCHes the existing Event's
//!   `count` and `lastTimestamp` instead of creating a new one (the correlator's de-duplication);
//!   client-go's "similar events" aggregation (10 events with different messages in 10 minutes) is
//!   not modelled;
//! - recording never fails the caller: errors are logged with `tracing` and swallowed, as client-go
//!   does (events are best effort).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use klab_api::slim::Slim;
use klab_api::{Clock, DetRng};
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How many distinct (object, reason, message) keys the de-duplication cache remembers. client-go
/// uses an LRU of 4096; we drop the oldest-recorded entry when full (deterministic).
const MAX_CACHE_ENTRIES: usize = 4096;

/// Attempts at finding a free event name when another recorder used the same nanosecond suffix.
const CREATE_ATTEMPTS: usize = 3;

/// Identity of an event for de-duplication (client-go `getEventKey` minus the source host).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EventKey {
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    api_version: String,
    type_: String,
    reason: String,
    message: String,
}

/// What the cache remembers about the last Event written for a key.
#[derive(Clone, Debug)]
struct Seen {
    namespace: String,
    event_name: String,
    count: i32,
    /// Monotone sequence number of the last use, to evict the oldest entry deterministically.
    seq: u64,
}

#[derive(Debug, Default)]
struct State {
    seen: BTreeMap<EventKey, Seen>,
    /// The keys of `seen` by their `seq`: the oldest is the first (found without a scan).
    order: BTreeMap<u64, EventKey>,
    /// The last nanosecond suffix used, so that two events recorded at the same virtual instant
    /// still get distinct names.
    last_nanos: i128,
    seq: u64,
}

/// Records core/v1 Events on behalf of one component (`source.component`). Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    clock: Clock,
    rng: DetRng,
    component: String,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish()
    }
}

impl EventRecorder {
    /// `component` is the event source, e.g. `node-controller`, `taint-eviction-controller`,
    /// `replicaset-controller`. `rng` is only used to pick a fresh name when a name collides.
    pub fn new(client: kube::Client, clock: Clock, rng: DetRng, component: &str) -> Self {
        EventRecorder {
            client,
            clock,
            rng,
            component: component.to_string(),
            state: Arc::default(),
        }
    }

    /// The event source component.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Records one event about `regarding`. Never fails: errors are logged.
    pub async fn record(
        &self,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        message: String,
    ) {
        let key = EventKey {
            kind: regarding.kind.clone().unwrap_or_default(),
            namespace: regarding.namespace.clone().unwrap_or_default(),
            name: regarding.name.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            api_version: regarding.api_version.clone().unwrap_or_default(),
            type_: type_.to_string(),
            reason: reason.to_string(),
            message: message.clone(),
        };
        let now = self.clock.now_time();
        let previous = self.lock().seen.get(&key).cloned();
        if let Some(prev) = previous {
            let count = prev.count.saturating_add(1);
            let api: Api<Slim<Event>> = Api::namespaced(self.client.clone(), &prev.namespace);
            let patch = serde_json::json!({ "count": count, "lastTimestamp": now });
            match api
                .patch(
                    &prev.event_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    self.remember(key, prev.namespace, prev.event_name, count);
                    return;
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    // The Event expired or was deleted: fall through and create a fresh one
                    // (client-go does the same when its PATCH finds nothing).
                }
                Err(e) => {
                    tracing::warn!(component = %self.component, reason, error = %e, "could not update event");
                    return;
                }
            }
        }
        self.create(key, regarding, type_, reason, message, now)
            .await;
    }

    async fn create(
        &self,
        key: EventKey,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        message: String,
        now: Time,
    ) {
        let object_name = regarding.name.clone().unwrap_or_default();
        let namespace = match regarding.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns.to_string(),
            _ => klab_api::names::NS_DEFAULT.to_string(),
        };
        let api: Api<Slim<Event>> = Api::namespaced(self.client.clone(), &namespace);
        let mut suffix = self.next_suffix();
        for attempt in 0..CREATE_ATTEMPTS {
            let name = format!("{object_name}.{suffix:x}");
            // The reply is decoded without its managed fields: it is not read.
            let ev = Slim(Event {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    ..Default::default()
                },
                involved_object: regarding.clone(),
                reason: Some(reason.to_string()),
                message: Some(message.clone()),
                source: Some(EventSource {
                    component: Some(self.component.clone()),
                    host: None,
                }),
                first_timestamp: Some(now.clone()),
                last_timestamp: Some(now.clone()),
                count: Some(1),
                type_: Some(type_.to_string()),
                reporting_component: Some(self.component.clone()),
                reporting_instance: None,
                ..Default::default()
            });
            match api.create(&PostParams::default(), &ev).await {
                Ok(_) => {
                    self.remember(key, namespace, name, 1);
                    return;
                }
                Err(kube::Error::Api(s))
                    if s.code == 409 && attempt.saturating_add(1) < CREATE_ATTEMPTS =>
                {
                    // Another recorder used this name (same object, same instant): move the
                    // suffix by a deterministic random amount and try again.
                    suffix = suffix
                        .saturating_add(1)
                        .saturating_add(i128::from(self.rng.range(0, 1 << 20)));
                }
                Err(e) => {
                    tracing::warn!(component = %self.component, reason, error = %e, "could not create event");
                    return;
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next_suffix(&self) -> i128 {
        let nanos = self.clock.now().as_nanosecond();
        let mut st = self.lock();
        let n = if nanos <= st.last_nanos {
            st.last_nanos.saturating_add(1)
        } else {
            nanos
        };
        st.last_nanos = n;
        n
    }

    fn remember(&self, key: EventKey, namespace: String, event_name: String, count: i32) {
        self.lock().remember(key, namespace, event_name, count);
    }
}

impl State {
    /// Files the last Event written for `key`, dropping the least recently written key when the
    /// cache is full.
    fn remember(&mut self, key: EventKey, namespace: String, event_name: String, count: i32) {
        self.seq = self.seq.saturating_add(1);
        let seq = self.seq;
        if let Some(prev) = self.seen.get(&key).map(|s| s.seq) {
            self.order.remove(&prev);
        } else if self.seen.len() >= MAX_CACHE_ENTRIES
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.seen.remove(&oldest);
        }
        self.order.insert(seq, key.clone());
        self.seen.insert(
            key,
            Seen {
                namespace,
                event_name,
                count,
                seq,
            },
        );
    }
}

/// The reference NLC uses for Node events (`RecordNodeEvent`): cluster-scoped, so no namespace.
pub fn object_ref_for_node(node: &Node) -> ObjectReference {
    node_ref(
        node.metadata.name.as_deref().unwrap_or_default(),
        node.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// A Node reference from a name and UID (for nodes no longer in the cache).
pub fn node_ref(name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.to_string()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        namespace: None,
        ..Default::default()
    }
}

/// The reference `ref.GetReference` builds for a Pod.
pub fn object_ref_for_pod(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_reference_is_cluster_scoped() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = object_ref_for_node(&node);
        assert_eq!(r.kind.as_deref(), Some("Node"));
        assert_eq!(r.name.as_deref(), Some("n1"));
        assert_eq!(r.uid.as_deref(), Some("u1"));
        assert_eq!(r.namespace, None);
    }

    #[test]
    fn pod_reference_carries_namespace() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = object_ref_for_pod(&pod);
        assert_eq!(
            (r.kind.as_deref(), r.namespace.as_deref(), r.name.as_deref()),
            (Some("Pod"), Some("ns"), Some("a"))
        );
    }

    #[test]
    fn a_full_cache_forgets_the_key_written_longest_ago() {
        let key = |i: usize| EventKey {
            kind: "Pod".into(),
            namespace: "default".into(),
            name: format!("p{i}"),
            uid: String::new(),
            api_version: "v1".into(),
            type_: "Normal".into(),
            reason: "R".into(),
            message: "m".into(),
        };
        let mut st = State::default();
        for i in 0..MAX_CACHE_ENTRIES {
            st.remember(key(i), "default".into(), format!("e{i}"), 1);
        }
        // Writing p0 again makes p1 the oldest.
        st.remember(key(0), "default".into(), "e0".into(), 2);
        st.remember(key(MAX_CACHE_ENTRIES), "default".into(), "new".into(), 1);
        assert_eq!(st.seen.len(), MAX_CACHE_ENTRIES);
        assert_eq!(st.order.len(), MAX_CACHE_ENTRIES);
        assert!(!st.seen.contains_key(&key(1)));
        assert_eq!(st.seen.get(&key(0)).map(|s| s.count), Some(2));
        assert!(st.seen.contains_key(&key(2)));
        assert!(st.seen.contains_key(&key(MAX_CACHE_ENTRIES)));
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_are_aggregated_and_names_are_unique() {
        let c = crate::node_lifecycle::tests::Cluster::new().await;
        let rec = EventRecorder::new(
            c.client.clone(),
            c.clock.clone(),
            DetRng::seeded(3),
            "node-controller",
        );
        let node = Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = object_ref_for_node(&node);
        rec.record(
            &r,
            "Normal",
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady".into(),
        )
        .await;
        // Same instant, other reason: a distinct name.
        rec.record(
            &r,
            "Normal",
            "RegisteredNode",
            "Node n1 event: Registered Node n1 in Controller".into(),
        )
        .await;
        c.at(7.0).await;
        rec.record(
            &r,
            "Normal",
            "NodeNotReady",
            "Node n1 status is now: NodeNotReady".into(),
        )
        .await;
        let events = c.events("default").await;
        assert_eq!(events.len(), 2);
        let e = events
            .iter()
            .find(|e| e.reason.as_deref() == Some("NodeNotReady"))
            .unwrap();
        assert_eq!(e.count, Some(2));
        assert_eq!(c.secs(e.first_timestamp.as_ref().unwrap().0), 0.0);
        assert_eq!(c.secs(e.last_timestamp.as_ref().unwrap().0), 7.0);
        assert!(e.metadata.name.as_deref().unwrap().starts_with("n1."));
        assert_eq!(e.involved_object.namespace, None);
        assert_eq!(
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            Some("node-controller")
        );
        assert_eq!(e.reporting_component.as_deref(), Some("node-controller"));
        assert_eq!(e.type_.as_deref(), Some("Normal"));
    }
}
