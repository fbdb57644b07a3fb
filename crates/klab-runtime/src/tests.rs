//! Tests of the runtime: indexes kept true through updates and relists, subscriptions that see
//! every change once and in order whenever they subscribed, objects shared between subscribers,
//! and the reconcile loop against an in-process API server on virtual time.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use klab_api::Clock;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::Event;

use crate::index::{self, CONTROLLER_UID, POD_NODE_NAME};
use crate::{Informers, Notice, Reconcile, SharedInformer, Sources, WorkQueue, run};

fn pod(ns: &str, name: &str, rv: &str, node: Option<&str>, owner: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(String::from),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn names(v: &[Arc<Pod>]) -> Vec<String> {
    v.iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// Every notice a subscription holds now, as `(old name/rv, new name/rv)` strings or "synced".
fn drain(sub: &mut crate::Subscription<Pod>) -> Vec<String> {
    let d = |p: &Option<Arc<Pod>>| {
        p.as_ref()
            .map(|p| {
                format!(
                    "{}@{}",
                    p.metadata.name.as_deref().unwrap_or_default(),
                    p.metadata.resource_version.as_deref().unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "-".into())
    };
    let mut out = Vec::new();
    while let Some(n) = sub.try_recv() {
        out.push(match n {
            Notice::Changed((o, n)) => format!("{}>{}", d(&o), d(&n)),
            Notice::Synced => "synced".into(),
        });
    }
    out
}

#[test]
fn indexes_follow_updates_deletions_and_relists() {
    let inf = SharedInformer::<Pod>::default();
    inf.add_index(POD_NODE_NAME, index::pod_node_name);
    let mut early = inf.subscribe();
    inf.apply(Event::Init);
    inf.apply(Event::InitApply(pod("a", "x", "1", Some("n1"), Some("u1"))));
    inf.apply(Event::InitApply(pod("a", "y", "1", None, None)));
    inf.apply(Event::InitDone);
    // An index added after the store filled files what is there.
    inf.add_index(CONTROLLER_UID, index::controller_uid::<Pod>);
    assert_eq!(names(&inf.by_index(POD_NODE_NAME, "n1")), ["x"]);
    assert_eq!(names(&inf.by_index(CONTROLLER_UID, "u1")), ["x"]);
    assert_eq!(
        names(&inf.by_index(CONTROLLER_UID, &index::orphan_key("a"))),
        ["y"]
    );
    // y is bound and adopted; x moves node.
    inf.apply(Event::Apply(pod("a", "y", "2", Some("n1"), Some("u1"))));
    inf.apply(Event::Apply(pod("a", "x", "3", Some("n2"), Some("u1"))));
    assert_eq!(names(&inf.by_index(POD_NODE_NAME, "n1")), ["y"]);
    assert_eq!(names(&inf.by_index(POD_NODE_NAME, "n2")), ["x"]);
    assert_eq!(names(&inf.by_index(CONTROLLER_UID, "u1")), ["x", "y"]);
    assert!(
        inf.by_index(CONTROLLER_UID, &index::orphan_key("a"))
            .is_empty()
    );
    // A relist: x gone, y unchanged, z new.
    inf.apply(Event::Init);
    inf.apply(Event::InitApply(pod("a", "y", "2", Some("n1"), Some("u1"))));
    inf.apply(Event::InitApply(pod("b", "z", "4", Some("n2"), None)));
    inf.apply(Event::InitDone);
    assert!(inf.by_index(POD_NODE_NAME, "n2").len() == 1);
    assert_eq!(names(&inf.by_index(POD_NODE_NAME, "n2")), ["z"]);
    assert_eq!(names(&inf.by_index(CONTROLLER_UID, "u1")), ["y"]);
    assert_eq!(names(&inf.in_namespace("b")), ["z"]);
    assert_eq!(
        drain(&mut early),
        [
            "->x@1", "->y@1", "synced", "y@1>y@2", "x@1>x@3", "x@3>-", "->z@4", "synced"
        ]
    );
    // A late subscriber is replayed the store in key order, then told it is synced.
    let mut late = inf.subscribe();
    assert_eq!(drain(&mut late), ["->y@2", "->z@4", "synced"]);
    inf.apply(Event::Delete(pod("a", "y", "5", Some("n1"), Some("u1"))));
    assert_eq!(drain(&mut late), ["y@2>-"]);
    assert_eq!(drain(&mut early), ["y@2>-"]);
    assert!(inf.by_index(POD_NODE_NAME, "n1").is_empty());
    assert_eq!(inf.len(), 1);
}

#[test]
fn cached_objects_carry_no_managed_fields() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    let inf = SharedInformer::<Pod>::default();
    let with_fields = |rv: &str| {
        let mut p = pod("a", "x", rv, Some("n1"), None);
        p.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubelet".into()),
            ..Default::default()
        }]);
        p
    };
    let mut sub = inf.subscribe();
    inf.apply(Event::Init);
    inf.apply(Event::InitApply(with_fields("1")));
    inf.apply(Event::InitDone);
    inf.apply(Event::Apply(with_fields("2")));
    let held = inf.get(&("a".into(), "x".into())).expect("cached");
    assert_eq!(held.metadata.resource_version.as_deref(), Some("2"));
    assert!(held.metadata.managed_fields.is_none());
    // Subscribers see the same trimmed objects.
    while let Some(n) = sub.try_recv() {
        if let Notice::Changed((old, new)) = n {
            for o in old.iter().chain(new.iter()) {
                assert!(o.metadata.managed_fields.is_none());
            }
        }
    }
}

#[test]
fn reads_are_counted_by_kind() {
    let inf = SharedInformer::<Pod>::default();
    inf.add_index(POD_NODE_NAME, index::pod_node_name);
    inf.apply(Event::Init);
    for i in 0..10 {
        let node = format!("n{}", i % 2);
        inf.apply(Event::InitApply(pod(
            "a",
            &format!("p{i}"),
            "1",
            Some(&node),
            None,
        )));
    }
    inf.apply(Event::InitDone);
    let before = inf.stats();
    assert_eq!(inf.by_index(POD_NODE_NAME, "n0").len(), 5);
    let s = inf.stats().since(&before);
    assert_eq!((s.indexed, s.scanned, s.namespace_scanned), (5, 0, 0));
    inf.list();
    inf.in_namespace("a");
    inf.get(&("a".into(), "p1".into()));
    let s = inf.stats().since(&before);
    assert_eq!(
        (s.scanned, s.namespace_scanned, s.gets, s.total()),
        (10, 10, 1, 26)
    );
}

/// A controller that records its reconciles: a key per ConfigMap change, one retry on the first
/// failure of key "fail"; `log` interleaves the notices handled and the keys reconciled. With
/// `children`, reconciling a key `x` creates the ConfigMap `x-child`.
#[derive(Default)]
struct Recorder {
    log: Vec<String>,
    reconciled: Vec<(String, bool)>,
    failed_once: bool,
    informer: Option<SharedInformer<ConfigMap>>,
    children: Option<Api<ConfigMap>>,
    queue: WorkQueue,
}

impl Recorder {
    /// The keys whose notices were handled, in order.
    fn handled(&self) -> Vec<&str> {
        self.log
            .iter()
            .filter_map(|l| l.strip_prefix("handle "))
            .collect()
    }
}

impl Reconcile for Recorder {
    type Event = crate::Change<ConfigMap>;
    type Error = String;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, (o, n): Self::Event) {
        let obj = n.or(o).expect("a change has a side");
        let key = crate::key_of(obj.as_ref());
        self.log.push(format!("handle {}", key.1));
        self.queue.add(key);
    }

    async fn reconcile(&mut self, key: crate::ObjKey) -> Result<(), String> {
        self.log.push(format!("reconcile {}", key.1));
        let exists = self
            .informer
            .as_ref()
            .is_some_and(|i| i.get(&key).is_some());
        self.reconciled.push((key.1.clone(), exists));
        if key.1 == "fail" && !self.failed_once {
            self.failed_once = true;
            return Err("first attempt fails".into());
        }
        if let Some(cms) = self
            .children
            .as_ref()
            .filter(|_| !key.1.ends_with("-child"))
        {
            let child = config_map(&format!("{}-child", key.1));
            cms.create(&PostParams::default(), &child)
                .await
                .map_err(|e| e.to_string())?;
            // Let the informer's watch deliver the creation before the reconcile ends.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }
}

/// A ConfigMap named `name`, with one key for its creator to manage.
fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), "v".to_string())].into()),
        ..Default::default()
    }
}

/// A client of an in-process API server on `clock`, and its ConfigMaps in `default`.
async fn config_maps(clock: &Clock) -> (kube::Client, Api<ConfigMap>) {
    let api = klab_apiserver::testing::memory_server_with(
        clock.clone(),
        klab_api::DetRng::seeded(3),
        Default::default(),
    )
    .await;
    let client = kube::Client::new(api.router(), "default");
    let cms = Api::namespaced(client.clone(), "default");
    (client, cms)
}

#[tokio::test(start_paused = true)]
async fn one_informer_per_type_shared_by_every_subscriber_and_the_loop_reconciles_in_order() {
    let clock = Clock::virtual_default();
    let (client, cms) = config_maps(&clock).await;
    cms.create(&PostParams::default(), &config_map("b"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("a"))
        .await
        .unwrap();

    let informers = Informers::new(client.clone(), clock.clone());
    let i1 = informers.get::<ConfigMap>();
    let i2 = informers.get::<ConfigMap>();
    let mut s1 = i1.subscribe();
    let mut s2 = i2.subscribe();
    let mut rec = Recorder {
        informer: Some(i1.clone()),
        ..Default::default()
    };
    let sources = Sources::default().add(&i1, |c| c);
    let handle = tokio::spawn({
        let clock = clock.clone();
        async move {
            let r =
                tokio::time::timeout(Duration::from_secs(30), run(clock, sources, &mut rec)).await;
            (r.is_err(), rec)
        }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(i1.synced());
    // The API server keeps field managers; the informer holds its objects without them.
    assert!(
        cms.get("a")
            .await
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );
    assert_eq!(i1.len(), 2);
    assert!(
        i1.list()
            .iter()
            .all(|c| c.metadata.managed_fields.is_none())
    );
    cms.create(&PostParams::default(), &config_map("fail"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    cms.delete("a", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Both subscriptions see the same objects (one watch, objects held once).
    let first = |s: &mut crate::Subscription<ConfigMap>| match s.try_recv() {
        Some(Notice::Changed((None, Some(o)))) => o,
        _ => panic!("expected an addition first"),
    };
    let (a1, a2) = (first(&mut s1), first(&mut s2));
    assert!(Arc::ptr_eq(&a1, &a2));
    assert_eq!(a1.metadata.name.as_deref(), Some("a"));

    // Stopping the factory's informers (as the controller manager's task does when it is
    // aborted) stops their watches: later changes no longer arrive.
    drop(informers.stop_guard());
    tokio::time::sleep(Duration::from_millis(10)).await;
    cms.create(&PostParams::default(), &config_map("late"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(i1.get(&("default".into(), "late".into())).is_none());

    let (timed_out, rec) = handle.await.unwrap();
    assert!(timed_out, "the loop runs until stopped");
    assert_eq!(rec.handled(), ["a", "b", "fail", "a"]);
    // Nothing is reconciled before the sync; then keys in order; the failed key once more after
    // RETRY_AFTER; a deleted key is reconciled with the object gone from the store.
    assert_eq!(
        rec.reconciled,
        [
            ("a".to_string(), true),
            ("b".to_string(), true),
            ("fail".to_string(), true),
            ("a".to_string(), false),
            ("fail".to_string(), true),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn notices_are_handled_between_reconciles_and_their_keys_wait_behind_the_others() {
    let clock = Clock::virtual_default();
    let (client, cms) = config_maps(&clock).await;
    // Created in the order z, y: the queue keeps that order, not the keys'.
    for name in ["z", "y"] {
        cms.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
    let informers = Informers::new(client.clone(), clock.clone());
    let inf = informers.get::<ConfigMap>();
    let mut c = Recorder {
        children: Some(cms.clone()),
        ..Default::default()
    };
    let sources = Sources::default().add(&inf, |c| c);
    let handle = tokio::spawn({
        let clock = clock.clone();
        async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), run(clock, sources, &mut c)).await;
            c
        }
    });
    let c = handle.await.unwrap();
    assert_eq!(
        c.log,
        [
            // The initial list, replayed in key order.
            "handle y",
            "handle z",
            "reconcile y",
            // y's child arrived during y's reconcile: handled before z is reconciled, and
            // queued behind it (in key order, "y-child" would come before "z").
            "handle y-child",
            "reconcile z",
            "handle z-child",
            "reconcile y-child",
            "reconcile z-child",
        ]
    );
}
