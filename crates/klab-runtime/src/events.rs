//! Event recording for every component that writes core/v1 Events (controllers and kubelets):
//! upstream reasons, sources and client-go's correlation.
//!
//! Modelled on client-go's legacy `record.EventRecorder` and its `EventCorrelator`, which
//! kube-controller-manager and the kubelet both use with its default options; deterministic:
//! - an Event is named `<object name>.<hex of the clock's unix nanoseconds>` (client-go's
//!   `fmt.Sprintf("%v.%x", ref.Name, t.UnixNano())`; a recorder on a host — a kubelet — adds a
//!   fixed offset under a millisecond, so that two recorders at one virtual instant seldom pick
//!   one name), in the object's namespace or `default` for cluster-scoped objects (whose
//!   `involvedObject.namespace` stays empty);
//! - aggregation: the 10th distinct message with the same (source, object, type, reason) within
//!   10 minutes of the previous one turns into one Event "(combined from similar events): <latest
//!   message>", whose count later ones raise;
//! - de-duplication: a repeat of the same (source, object, type, reason, message) PATCHes the
//!   existing Event's `count`, `lastTimestamp` and `message` instead of creating a new one;
//! - spam filter: a source may write 25 Events about one object, then one every 5 minutes (a
//!   token bucket per object); a filtered Event is still counted, so the next one written
//!   carries the whole count;
//! - each of the three remembers at most 4 096 keys, forgetting the one used longest ago; a key
//!   is held as the 128-bit XXH3 digest of its fields (a kubelet remembers a few keys for each of
//!   its pods: held whole, they were kilobytes per pod);
//! - recording never fails the caller: errors are logged with `tracing` and swallowed, as client-go
//!   does (events are best effort).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use klab_api::slim::Slim;
use klab_api::{Clock, DetRng};
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How many keys each of the correlator's caches remembers (client-go's `maxLruCacheEntries`).
const MAX_CACHE_ENTRIES: usize = 4096;

/// client-go's `defaultAggregateMaxEvents`: distinct messages before similar events aggregate.
const AGGREGATE_MAX_EVENTS: usize = 10;

/// client-go's `defaultAggregateIntervalInSeconds`: a similar event this long after the last one
/// starts a fresh count.
const AGGREGATE_INTERVAL: jiff::SignedDuration = jiff::SignedDuration::from_secs(600);

/// client-go's `EventAggregatorByReasonMessageFunc` prefix.
const AGGREGATE_PREFIX: &str = "(combined from similar events): ";

/// client-go's `defaultSpamBurst` and the refill period of `defaultSpamQPS` (1/300).
const SPAM_BURST: i128 = 25;
const SPAM_REFILL_NANOS: i128 = 300_000_000_000;

/// Attempts at finding a free event name when another recorder used the same nanosecond suffix.
const CREATE_ATTEMPTS: usize = 3;

/// Identity of an event for de-duplication (client-go `getEventKey`; the source is the
/// recorder's). An aggregate's key has no message (`aggregate`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EventKey {
    kind: String,
    namespace: String,
    name: String,
    field_path: String,
    uid: String,
    api_version: String,
    type_: String,
    reason: String,
    message: String,
    aggregate: bool,
}

/// What the de-duplication cache remembers about the last Event written (or counted) for a key.
#[derive(Clone, Debug)]
struct Seen {
    namespace: String,
    event_name: String,
    count: i32,
    first: Time,
}

impl EventKey {
    /// The key's identity as the caches hold it: the XXH3-128 digest of its fields, each
    /// length-prefixed so that no two keys encode alike.
    fn digest(&self) -> u128 {
        digest(
            &[
                &self.kind,
                &self.namespace,
                &self.name,
                &self.field_path,
                &self.uid,
                &self.api_version,
                &self.type_,
                &self.reason,
                &self.message,
            ],
            self.aggregate,
        )
    }
}

/// XXH3-128 of length-prefixed fields and a flag.
fn digest(fields: &[&str], flag: bool) -> u128 {
    let len = fields
        .iter()
        .map(|f| f.len().saturating_add(8))
        .sum::<usize>();
    let mut bytes = Vec::with_capacity(len.saturating_add(1));
    for f in fields {
        bytes.extend_from_slice(&(f.len() as u64).to_le_bytes());
        bytes.extend_from_slice(f.as_bytes());
    }
    bytes.push(u8::from(flag));
    xxhash_rust::xxh3::xxh3_128(&bytes)
}

/// The distinct messages of similar events (client-go's `aggregateRecord`), sorted: nearly
/// always one, so a vector rather than a tree's node.
#[derive(Clone, Debug)]
struct Similar {
    messages: Vec<String>,
    last: Timestamp,
}

/// A source's token bucket for one object, in nanoseconds of credit (one event costs
/// [`SPAM_REFILL_NANOS`]; the credit grows with time up to the burst).
#[derive(Clone, Debug)]
struct Bucket {
    credit: i128,
    at: Timestamp,
}

impl Bucket {
    fn full(now: Timestamp) -> Bucket {
        Bucket {
            credit: SPAM_BURST.saturating_mul(SPAM_REFILL_NANOS),
            at: now,
        }
    }

    /// client-go's `TryAccept`: takes one event's worth of credit if there is one.
    fn try_accept(&mut self, now: Timestamp) -> bool {
        let elapsed = now
            .as_nanosecond()
            .saturating_sub(self.at.as_nanosecond())
            .max(0);
        self.credit = self
            .credit
            .saturating_add(elapsed)
            .min(SPAM_BURST.saturating_mul(SPAM_REFILL_NANOS));
        self.at = now;
        if self.credit >= SPAM_REFILL_NANOS {
            self.credit = self.credit.saturating_sub(SPAM_REFILL_NANOS);
            true
        } else {
            false
        }
    }
}

/// A map of at most [`MAX_CACHE_ENTRIES`] keys that forgets the key used longest ago
/// (deterministically: by a sequence number of uses).
#[derive(Debug)]
struct Lru<K, V> {
    entries: BTreeMap<K, (V, u64)>,
    /// The keys by their last use: the oldest is the first (found without a scan).
    order: BTreeMap<u64, K>,
    seq: u64,
}

impl<K, V> Default for Lru<K, V> {
    fn default() -> Self {
        Lru {
            entries: BTreeMap::new(),
            order: BTreeMap::new(),
            seq: 0,
        }
    }
}

impl<K: Ord + Clone, V> Lru<K, V> {
    fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Stores `value` under `key` as its latest use.
    fn put(&mut self, key: K, value: V) {
        self.seq = self.seq.saturating_add(1);
        let seq = self.seq;
        if let Some((_, prev)) = self.entries.get(&key) {
            self.order.remove(prev);
        } else if self.entries.len() >= MAX_CACHE_ENTRIES
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.entries.remove(&oldest);
        }
        self.order.insert(seq, key.clone());
        self.entries.insert(key, (value, seq));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The digest of the source-and-object key of the spam filter (client-go `getSpamKey`).
fn spam_key(key: &EventKey) -> u128 {
    digest(
        &[
            &key.kind,
            &key.namespace,
            &key.name,
            &key.uid,
            &key.api_version,
        ],
        false,
    )
}

#[derive(Debug, Default)]
struct State {
    /// By [`EventKey::digest`].
    seen: Lru<u128, Seen>,
    /// By the digest of the group's key (no message, `aggregate`).
    similar: Lru<u128, Similar>,
    /// By [`spam_key`].
    spam: Lru<u128, Bucket>,
    /// The last nanosecond suffix used, so that two events recorded at the same virtual instant
    /// still get distinct names.
    last_nanos: i128,
    /// Added to this recorder's suffixes (under a millisecond; none for controllers) so that two
    /// recorders naming events about one object at one virtual instant — a kubelet and the node
    /// controller both about a Node — seldom pick the same name; on a real clock their
    /// nanoseconds differ anyway.
    offset: i128,
}

/// What one recorded event comes to.
#[derive(Clone, Debug, PartialEq)]
enum Plan {
    /// Filtered as spam (still counted).
    Skip,
    /// Write the Event `name` with this count, first timestamp and message: a PATCH of the
    /// existing one (`patch`), else a create.
    Write {
        key: Box<EventKey>,
        namespace: String,
        name: String,
        count: i32,
        first: Time,
        message: String,
        patch: bool,
    },
}

impl State {
    fn next_suffix(&mut self, nanos: i128) -> i128 {
        let nanos = nanos.saturating_add(self.offset);
        let n = if nanos <= self.last_nanos {
            self.last_nanos.saturating_add(1)
        } else {
            nanos
        };
        self.last_nanos = n;
        n
    }

    /// client-go's `EventCorrelate`: aggregation, then de-duplication (counted whether or not
    /// the event is then written), then the spam filter.
    fn correlate(&mut self, key: EventKey, event_namespace: &str, now: Timestamp) -> Plan {
        // aggregation (`EventAggregate`)
        let group = EventKey {
            message: String::new(),
            aggregate: true,
            ..key.clone()
        };
        let group_digest = group.digest();
        let mut similar = match self.similar.get(&group_digest) {
            Some(s)
                if now.as_nanosecond().saturating_sub(s.last.as_nanosecond())
                    <= AGGREGATE_INTERVAL.as_nanos() =>
            {
                s.clone()
            }
            _ => Similar {
                messages: Vec::new(),
                last: now,
            },
        };
        if let Err(at) = similar.messages.binary_search(&key.message) {
            similar.messages.insert(at, key.message.clone());
        }
        similar.last = now;
        let aggregate = similar.messages.len() >= AGGREGATE_MAX_EVENTS;
        if aggregate {
            // the set stays below the threshold: every further new message aggregates too
            similar.messages.remove(0);
        }
        self.similar.put(group_digest, similar);
        let (key, message) = if aggregate {
            let message = format!("{AGGREGATE_PREFIX}{}", key.message);
            (group, message)
        } else {
            let message = key.message.clone();
            (key, message)
        };
        // de-duplication (`eventObserve`)
        let (namespace, name, count, first, patch) = match self.seen.get(&key.digest()) {
            Some(s) => (
                s.namespace.clone(),
                s.event_name.clone(),
                s.count.saturating_add(1),
                s.first.clone(),
                true,
            ),
            None => {
                let suffix = self.next_suffix(now.as_nanosecond());
                (
                    event_namespace.to_string(),
                    format!("{}.{suffix:x}", key.name),
                    1,
                    Time(now),
                    false,
                )
            }
        };
        self.remember(&key, namespace.clone(), name.clone(), count, first.clone());
        // spam filter (`EventSourceObjectSpamFilter`)
        let spam_key = spam_key(&key);
        let mut bucket = self
            .spam
            .get(&spam_key)
            .cloned()
            .unwrap_or_else(|| Bucket::full(now));
        let accepted = bucket.try_accept(now);
        self.spam.put(spam_key, bucket);
        if !accepted {
            return Plan::Skip;
        }
        Plan::Write {
            key: Box::new(key),
            namespace,
            name,
            count,
            first,
            message,
            patch,
        }
    }

    /// Files the last Event written (or counted) for `key`.
    fn remember(
        &mut self,
        key: &EventKey,
        namespace: String,
        event_name: String,
        count: i32,
        first: Time,
    ) {
        self.seen.put(
            key.digest(),
            Seen {
                namespace,
                event_name,
                count,
                first,
            },
        );
    }
}

/// Records core/v1 Events on behalf of one component (`source.component`). Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    client: kube::Client,
    clock: Clock,
    rng: DetRng,
    component: String,
    /// `source.host` and `reportingInstance` (a kubelet's node name); none for controllers.
    host: Option<String>,
    /// Failures logged at debug rather than warn: a node agent cut off from the API server
    /// fails every write, and says so once elsewhere.
    quiet: bool,
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
            host: None,
            quiet: false,
            state: Arc::default(),
        }
    }

    /// The recorder of a component on a node (the kubelet): `source.host` and
    /// `reportingInstance` name it, and failed writes are logged at debug level.
    pub fn on_host(mut self, host: &str) -> Self {
        use std::hash::BuildHasher;
        let hash = crate::derived::Fixed::default().hash_one((&self.component, host));
        self.lock().offset = i128::from(hash % (1 << 20));
        self.host = Some(host.to_string());
        self.quiet = true;
        self
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
            field_path: regarding.field_path.clone().unwrap_or_default(),
            uid: regarding.uid.clone().unwrap_or_default(),
            api_version: regarding.api_version.clone().unwrap_or_default(),
            type_: type_.to_string(),
            reason: reason.to_string(),
            message,
            aggregate: false,
        };
        let event_namespace = match regarding.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns.to_string(),
            _ => klab_api::names::NS_DEFAULT.to_string(),
        };
        let now = self.clock.now();
        let plan = self.lock().correlate(key, &event_namespace, now);
        let Plan::Write {
            key,
            namespace,
            name,
            count,
            first,
            message,
            patch,
        } = plan
        else {
            return;
        };
        if patch {
            let api: Api<Slim<Event>> = Api::namespaced(self.client.clone(), &namespace);
            let body = serde_json::json!({
                "count": count, "lastTimestamp": Time(now), "message": message,
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => return,
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    // The Event expired, was deleted or was never written (filtered): create
                    // it as counted, as client-go does when its PATCH finds nothing.
                }
                Err(e) => {
                    self.failed(reason, &e, "could not update event");
                    return;
                }
            }
        }
        let write = Write {
            count,
            first,
            message,
            now: Time(now),
        };
        self.create(key, regarding, type_, namespace, name, write)
            .await;
    }

    async fn create(
        &self,
        key: Box<EventKey>,
        regarding: &ObjectReference,
        type_: &str,
        namespace: String,
        name: String,
        w: Write,
    ) {
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let object_name = regarding.name.clone().unwrap_or_default();
        let mut name = name;
        for attempt in 0..CREATE_ATTEMPTS {
            let ev = Event {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(namespace.clone()),
                    ..Default::default()
                },
                involved_object: regarding.clone(),
                reason: Some(key.reason.clone()),
                message: Some(w.message.clone()),
                source: Some(EventSource {
                    component: Some(self.component.clone()),
                    host: self.host.clone(),
                }),
                first_timestamp: Some(w.first.clone()),
                last_timestamp: Some(w.now.clone()),
                count: Some(w.count),
                type_: Some(type_.to_string()),
                reporting_component: Some(self.component.clone()),
                reporting_instance: self.host.clone(),
                ..Default::default()
            };
            // The reply is not read: only whether the create succeeded.
            match crate::create::create_unread(&api, &PostParams::default(), &ev).await {
                Ok(_) => {
                    if attempt > 0 {
                        self.lock()
                            .remember(&key, namespace, name, w.count, w.first.clone());
                    }
                    return;
                }
                Err(kube::Error::Api(s))
                    if s.code == 409 && attempt.saturating_add(1) < CREATE_ATTEMPTS =>
                {
                    // Another recorder used this name (same object, same instant): move the
                    // suffix by a deterministic random amount and try again.
                    let tried = name
                        .rsplit_once('.')
                        .and_then(|(_, hex)| i128::from_str_radix(hex, 16).ok())
                        .unwrap_or_else(|| w.now.0.as_nanosecond());
                    let suffix = tried
                        .saturating_add(1)
                        .saturating_add(i128::from(self.rng.range(0, 1 << 20)));
                    name = format!("{object_name}.{suffix:x}");
                }
                Err(e) => {
                    self.failed(&key.reason, &e, "could not create event");
                    return;
                }
            }
        }
    }

    /// Logs a write that failed (events are best effort: nothing else is done about it).
    fn failed(&self, reason: &str, e: &kube::Error, what: &str) {
        if self.quiet {
            tracing::debug!(component = %self.component, host = ?self.host, reason, error = %e, "{what}");
        } else {
            tracing::warn!(component = %self.component, reason, error = %e, "{what}");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The counted fields of an Event to create.
struct Write {
    count: i32,
    first: Time,
    message: String,
    now: Time,
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
    use kube::api::ListParams;

    /// An API server on the virtual clock and an admin client of it.
    struct Cluster {
        _api: klab_apiserver::ApiServer,
        clock: Clock,
        client: kube::Client,
    }

    impl Cluster {
        async fn new() -> Self {
            let clock = Clock::virtual_default();
            let api = klab_apiserver::testing::memory_server_with(
                clock.clone(),
                DetRng::seeded(1),
                Default::default(),
            )
            .await;
            let client = kube::Client::new(api.router(), "default");
            Cluster {
                _api: api,
                clock,
                client,
            }
        }

        /// Sleeps until `secs` after the epoch.
        async fn at(&self, secs: f64) {
            let t = self.clock.epoch() + jiff::SignedDuration::from_secs_f64(secs);
            self.clock.sleep_until(t).await;
        }

        fn secs(&self, t: Timestamp) -> f64 {
            t.duration_since(self.clock.epoch()).as_secs_f64()
        }

        fn recorder(&self, component: &str) -> EventRecorder {
            EventRecorder::new(
                self.client.clone(),
                self.clock.clone(),
                DetRng::seeded(3),
                component,
            )
        }

        async fn events(&self, ns: &str) -> Vec<Event> {
            let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
            let mut v = api.list(&ListParams::default()).await.unwrap().items;
            v.sort_by_key(|e| e.first_timestamp.as_ref().map(|t| t.0));
            v
        }
    }

    fn node_n1() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn node_reference_is_cluster_scoped() {
        let node = node_n1();
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
    fn a_full_cache_forgets_the_key_used_longest_ago() {
        let mut lru: Lru<usize, i32> = Lru::default();
        for i in 0..MAX_CACHE_ENTRIES {
            lru.put(i, 1);
        }
        // Using 0 again makes 1 the oldest.
        lru.put(0, 2);
        lru.put(MAX_CACHE_ENTRIES, 1);
        assert_eq!(lru.len(), MAX_CACHE_ENTRIES);
        assert_eq!(lru.order.len(), MAX_CACHE_ENTRIES);
        assert!(lru.get(&1).is_none());
        assert_eq!(lru.get(&0), Some(&2));
        assert!(lru.get(&2).is_some());
        assert!(lru.get(&MAX_CACHE_ENTRIES).is_some());
    }

    fn key(object: &str, reason: &str, message: &str) -> EventKey {
        EventKey {
            kind: "ReplicaSet".into(),
            namespace: "default".into(),
            name: object.into(),
            field_path: String::new(),
            uid: format!("{object}-uid"),
            api_version: "apps/v1".into(),
            type_: "Normal".into(),
            reason: reason.into(),
            message: message.into(),
            aggregate: false,
        }
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    /// (message, count, patch) of a plan; `None` for a skipped one.
    fn outcome(p: &Plan) -> Option<(String, i32, bool)> {
        match p {
            Plan::Skip => None,
            Plan::Write {
                message,
                count,
                patch,
                ..
            } => Some((message.clone(), *count, *patch)),
        }
    }

    /// client-go's correlation of a ReplicaSet creating pods: nine events as they are, the
    /// tenth distinct message becomes "(combined from similar events): …", whose count the
    /// next ones raise; after 25 writes about the object, one every 5 minutes, carrying the
    /// events counted meanwhile.
    #[test]
    fn similar_events_aggregate_and_a_source_is_throttled_per_object() {
        let mut st = State::default();
        let mut plans = Vec::new();
        for i in 0..40 {
            let k = key("web", "SuccessfulCreate", &format!("Created pod: web-{i}"));
            plans.push(st.correlate(k, "default", at(i / 10)));
        }
        for (i, p) in plans.iter().enumerate().take(9) {
            assert_eq!(
                outcome(p),
                Some((format!("Created pod: web-{i}"), 1, false))
            );
        }
        assert_eq!(
            outcome(&plans[9]),
            Some((format!("{AGGREGATE_PREFIX}Created pod: web-9"), 1, false))
        );
        for (i, p) in plans.iter().enumerate().take(25).skip(10) {
            let count = i32::try_from(i).unwrap() - 8;
            assert_eq!(
                outcome(p),
                Some((
                    format!("{AGGREGATE_PREFIX}Created pod: web-{i}"),
                    count,
                    true
                ))
            );
        }
        // 25 writes about `web`: the rest are counted, not written.
        assert!(plans[25..].iter().all(|p| *p == Plan::Skip));
        // The same events about another object are their own.
        let other = st.correlate(
            key("api", "SuccessfulCreate", "Created pod: api-0"),
            "default",
            at(4),
        );
        assert_eq!(
            outcome(&other),
            Some(("Created pod: api-0".into(), 1, false))
        );
        // The bucket refills one event per 5 minutes from the first: one more at 300 s, with
        // everything counted since.
        let k = |i: usize| key("web", "SuccessfulCreate", &format!("Created pod: web-{i}"));
        assert_eq!(st.correlate(k(40), "default", at(299)), Plan::Skip);
        assert_eq!(
            outcome(&st.correlate(k(41), "default", at(301))),
            Some((format!("{AGGREGATE_PREFIX}Created pod: web-41"), 33, true))
        );
    }

    /// Past the threshold the group keeps nine distinct messages, forgetting the smallest (client-go
    /// pops any one): a message it still holds is a repeat of its own Event, the one it forgot
    /// aggregates again.
    #[test]
    fn an_aggregated_group_forgets_its_smallest_message() {
        let mut st = State::default();
        let k = |m: &str| key("n1", "BackOff", m);
        for (i, m) in ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
            .iter()
            .enumerate()
        {
            st.correlate(k(m), "default", at(i64::try_from(i).unwrap()));
        }
        let p = st.correlate(k("b"), "default", at(11));
        assert_eq!(outcome(&p), Some(("b".into(), 2, true)));
        let p = st.correlate(k("a"), "default", at(12));
        assert_eq!(outcome(&p), Some((format!("{AGGREGATE_PREFIX}a"), 2, true)));
    }

    /// A repeat of one message is counted on its Event; similar events more than 10 minutes
    /// after the last one start over, below the aggregation threshold.
    #[test]
    fn repeats_count_and_similar_events_expire_after_ten_minutes() {
        let mut st = State::default();
        let k = |m: &str| key("n1", "NodeNotReady", m);
        let p = st.correlate(k("a"), "default", at(0));
        assert_eq!(outcome(&p), Some(("a".into(), 1, false)));
        let p = st.correlate(k("a"), "default", at(7));
        assert_eq!(outcome(&p), Some(("a".into(), 2, true)));
        let Plan::Write { first, name, .. } = p else {
            panic!("written")
        };
        assert_eq!(first, Time(at(0)));
        assert!(name.starts_with("n1."));
        for (i, m) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
            let t = 10 + i64::try_from(i).unwrap();
            assert_eq!(
                outcome(&st.correlate(k(m), "default", at(t))).map(|o| o.0),
                Some(m.to_string())
            );
        }
        // the tenth distinct message, but 10 minutes and a second after the last similar one
        let p = st.correlate(k("j"), "default", at(17 + 601));
        assert_eq!(outcome(&p), Some(("j".into(), 1, false)));
        // within 10 minutes of the last, the set is the fresh one: no aggregation yet
        let p = st.correlate(k("k"), "default", at(17 + 601 + 599));
        assert_eq!(outcome(&p), Some(("k".into(), 1, false)));
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_are_aggregated_and_names_are_unique() {
        let c = Cluster::new().await;
        let rec = c.recorder("node-controller");
        let node = node_n1();
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

    /// An Event counted while filtered, or deleted since it was written, is created as counted
    /// when its next occurrence's PATCH finds nothing (client-go's fallback): same name, the
    /// whole count, the first occurrence's time.
    #[tokio::test(start_paused = true)]
    async fn a_patch_that_finds_nothing_creates_the_event_as_counted() {
        let c = Cluster::new().await;
        let rec = c.recorder("node-controller");
        let r = node_ref("n1", "u1");
        let msg = "Node n1 status is now: NodeNotReady";
        rec.record(&r, "Normal", "NodeNotReady", msg.into()).await;
        let first = c.events("default").await;
        assert_eq!(first.len(), 1);
        let name = first[0].metadata.name.clone().unwrap();
        Api::<Event>::namespaced(c.client.clone(), "default")
            .delete(&name, &Default::default())
            .await
            .unwrap();
        c.at(7.0).await;
        rec.record(&r, "Normal", "NodeNotReady", msg.into()).await;
        let events = c.events("default").await;
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(e.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(e.count, Some(2));
        assert_eq!(c.secs(e.first_timestamp.as_ref().unwrap().0), 0.0);
        assert_eq!(c.secs(e.last_timestamp.as_ref().unwrap().0), 7.0);
    }
}
