//! The conformance suite every backend must pass: one body of checks, run against each backend.
//!
//! Each check is a `pub async fn(&DynStorage)` that expects a fresh, empty store. Two ways to run:
//! * [`storage_conformance_tests!`](crate::storage_conformance_tests) generates one `#[tokio::test]`
//!   per check (so failures name the check and checks run in parallel);
//! * [`run_all`] runs every check in sequence, each on a fresh store from a factory.
//!
//! Checks never wait on the wall clock. "No further event" is asserted by writing a sentinel and
//! checking that it is the next event. Waits for an expected event carry a generous timeout only as
//! a guard against hanging forever on a bug (on a paused runtime it fires instantly).
//!
//! Keep [`run_all`] and the macro's list in step when adding a check.

use std::any::Any;
use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use crate::{
    DynStorage, Event, EventKind, KeyValue, ListOptions, Revision, StoreError, Trigger,
    TriggerIndex, WatchStream,
};

/// A store under test plus whatever must outlive it (e.g. a temporary directory).
pub struct Fixture {
    pub store: DynStorage,
    _guard: Option<Box<dyn Any + Send>>,
}

impl Fixture {
    pub fn new(store: DynStorage) -> Self {
        Self {
            store,
            _guard: None,
        }
    }

    /// `guard` is dropped after the store handle (fields drop in declaration order).
    pub fn with_guard(store: DynStorage, guard: impl Any + Send) -> Self {
        Self {
            store,
            _guard: Some(Box::new(guard)),
        }
    }
}

/// Generates one `#[tokio::test]` per conformance check. The first argument is an expression
/// yielding a fresh [`Fixture`]; the rest is passed to `#[tokio::test(..)]`, e.g.
/// `storage_conformance_tests!(fixture(), start_paused = true);`.
#[macro_export]
macro_rules! storage_conformance_tests {
    ($make:expr $(, $($arg:tt)*)?) => {
        $crate::storage_conformance_tests!(@each ($($($arg)*)?) $make;
            crud,
            revisions_are_global_and_increasing,
            create_existing_is_already_exists,
            stale_revision_conflicts,
            missing_keys_are_not_found,
            list_order_and_prefix_isolation,
            list_pagination,
            list_by_name_index,
            list_at_past_revision,
            future_revision,
            watch_from_zero,
            watch_from_mid_history,
            watch_live,
            watch_from_future_revision,
            watch_resume_after_drop,
            watch_prefix_filtering,
            compaction,
            compaction_keeps_latest_version_of_untouched_keys,
            concurrent_writers
        );
    };
    (@each $args:tt $make:expr; $($name:ident),* $(,)?) => {
        mod storage_conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[::tokio::test $args]
                async fn $name() {
                    let fixture: $crate::conformance::Fixture = $make;
                    $crate::conformance::$name(&fixture.store).await;
                }
            )*
        }
    };
}

/// Runs every check in sequence, each on a fresh store from `make`.
pub async fn run_all(make: impl Fn() -> Fixture) {
    crud(&make().store).await;
    revisions_are_global_and_increasing(&make().store).await;
    create_existing_is_already_exists(&make().store).await;
    stale_revision_conflicts(&make().store).await;
    missing_keys_are_not_found(&make().store).await;
    list_order_and_prefix_isolation(&make().store).await;
    list_pagination(&make().store).await;
    list_by_name_index(&make().store).await;
    list_at_past_revision(&make().store).await;
    future_revision(&make().store).await;
    watch_from_zero(&make().store).await;
    watch_from_mid_history(&make().store).await;
    watch_live(&make().store).await;
    watch_from_future_revision(&make().store).await;
    watch_resume_after_drop(&make().store).await;
    watch_prefix_filtering(&make().store).await;
    compaction(&make().store).await;
    compaction_keeps_latest_version_of_untouched_keys(&make().store).await;
    concurrent_writers(&make().store).await;
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn kv(key: &str, value: &str, create: Revision, modr: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: b(value),
        create_revision: create,
        mod_revision: modr,
    }
}

fn ev(
    revision: Revision,
    kind: EventKind,
    key: &str,
    value: Option<&str>,
    prev: Option<&str>,
) -> Event {
    Event {
        revision,
        kind,
        key: key.to_owned(),
        value: value.map(b),
        prev_value: prev.map(b),
        memo: crate::Memo::default(),
    }
}

/// The next event of `w`; panics if the stream ends, errors, or stays silent (guard only).
async fn next_event(w: &mut WatchStream) -> Event {
    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
        Ok(Some(Ok(e))) => e,
        Ok(Some(Err(e))) => panic!("watch error: {e}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within the guard timeout"),
    }
}

async fn next_events(w: &mut WatchStream, n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(next_event(w).await);
    }
    out
}

/// Writes `key` (create) and asserts it is the very next event of `w`: nothing else was pending.
async fn expect_sentinel_next(s: &DynStorage, w: &mut WatchStream, key: &str) {
    let rev = s.create(key, b("sentinel")).await.unwrap();
    let e = next_event(w).await;
    assert_eq!(
        (e.revision, e.key.as_str()),
        (rev, key),
        "an unexpected event came before the sentinel"
    );
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|k| k.key.as_str()).collect()
}

fn at(rev: Revision) -> ListOptions {
    ListOptions {
        revision: Some(rev),
        ..Default::default()
    }
}

/// Create, get, update, delete, and re-create of one key.
pub async fn crud(s: &DynStorage) {
    assert_eq!(s.current_revision(), 0);
    assert_eq!(s.get("/k").await.unwrap(), None);
    let r1 = s.create("/k", b("v1")).await.unwrap();
    assert_eq!(r1, 1, "the first write gets revision 1");
    assert_eq!(s.get("/k").await.unwrap(), Some(kv("/k", "v1", r1, r1)));
    let r2 = s.update("/k", b("v2"), r1).await.unwrap();
    assert!(r2 > r1);
    assert_eq!(
        s.get("/k").await.unwrap(),
        Some(kv("/k", "v2", r1, r2)),
        "create_revision is kept"
    );
    let (r3, removed) = s.delete("/k", Some(r2)).await.unwrap();
    assert!(r3 > r2);
    assert_eq!(removed, kv("/k", "v2", r1, r2));
    assert_eq!(s.get("/k").await.unwrap(), None);
    let r4 = s.create("/k", b("v3")).await.unwrap();
    assert_eq!(
        s.get("/k").await.unwrap(),
        Some(kv("/k", "v3", r4, r4)),
        "a new life gets a new create_revision"
    );
    let (r5, removed) = s.delete("/k", None).await.unwrap();
    assert_eq!(removed, kv("/k", "v3", r4, r4), "unconditional delete");
    assert_eq!(s.current_revision(), r5);
}

/// One global revision: strictly increasing across keys, reported by `current_revision`, and not
/// consumed by failed writes.
pub async fn revisions_are_global_and_increasing(s: &DynStorage) {
    s.create("/r/fixed", b("x")).await.unwrap();
    let mut last = s.current_revision();
    for i in 0..20 {
        let key = format!("/r/{}", i % 3);
        let rev = match s.get(&key).await.unwrap() {
            None => s.create(&key, b("x")).await.unwrap(),
            Some(kv) if i % 5 == 0 => s.delete(&key, Some(kv.mod_revision)).await.unwrap().0,
            Some(kv) => s
                .update(&key, b(&i.to_string()), kv.mod_revision)
                .await
                .unwrap(),
        };
        assert!(rev > last, "revision {rev} after {last}");
        assert_eq!(s.current_revision(), rev);
        last = rev;
        // A failed write changes nothing.
        assert!(s.create("/r/fixed", b("dup")).await.is_err());
        assert!(s.update("/r/none", b("x"), 1).await.is_err());
        assert!(s.delete("/r/fixed", Some(last + 1)).await.is_err());
        assert_eq!(s.current_revision(), last);
    }
    let other = s.create("/other/key", b("x")).await.unwrap();
    assert!(other > last, "revisions are global, not per prefix");
}

pub async fn create_existing_is_already_exists(s: &DynStorage) {
    let r = s.create("/a/x", b("one")).await.unwrap();
    assert_eq!(
        s.create("/a/x", b("two")).await,
        Err(StoreError::AlreadyExists("/a/x".into()))
    );
    assert_eq!(s.get("/a/x").await.unwrap(), Some(kv("/a/x", "one", r, r)));
    assert_eq!(s.current_revision(), r);
}

/// Update and delete with a stale revision fail with `Conflict` carrying the current value.
pub async fn stale_revision_conflicts(s: &DynStorage) {
    let r1 = s.create("/a/x", b("one")).await.unwrap();
    let r2 = s.update("/a/x", b("two"), r1).await.unwrap();
    let current = Some(Box::new(kv("/a/x", "two", r1, r2)));
    assert_eq!(
        s.update("/a/x", b("three"), r1).await,
        Err(StoreError::Conflict {
            key: "/a/x".into(),
            expected: r1,
            current: current.clone()
        })
    );
    assert_eq!(
        s.delete("/a/x", Some(r1)).await,
        Err(StoreError::Conflict {
            key: "/a/x".into(),
            expected: r1,
            current: current.clone()
        })
    );
    assert_eq!(
        s.update("/a/x", b("three"), r2 + 100).await,
        Err(StoreError::Conflict {
            key: "/a/x".into(),
            expected: r2 + 100,
            current
        })
    );
    assert_eq!(
        s.current_revision(),
        r2,
        "failed CAS writes consume no revision"
    );
    assert_eq!(
        s.get("/a/x").await.unwrap(),
        Some(kv("/a/x", "two", r1, r2))
    );
    let (r3, removed) = s.delete("/a/x", Some(r2)).await.unwrap();
    assert_eq!((r3, removed), (r2 + 1, kv("/a/x", "two", r1, r2)));
}

pub async fn missing_keys_are_not_found(s: &DynStorage) {
    assert_eq!(
        s.update("/a/none", b("x"), 0).await,
        Err(StoreError::NotFound("/a/none".into()))
    );
    assert_eq!(
        s.delete("/a/none", None).await,
        Err(StoreError::NotFound("/a/none".into()))
    );
    assert_eq!(
        s.delete("/a/none", Some(3)).await,
        Err(StoreError::NotFound("/a/none".into()))
    );
    let r = s.create("/a/gone", b("x")).await.unwrap();
    s.delete("/a/gone", Some(r)).await.unwrap();
    assert_eq!(
        s.update("/a/gone", b("y"), r).await,
        Err(StoreError::NotFound("/a/gone".into()))
    );
    assert_eq!(
        s.delete("/a/gone", None).await,
        Err(StoreError::NotFound("/a/gone".into()))
    );
    assert_eq!(s.current_revision(), r + 1);
}

/// Keys come back in byte order, and `/a/` never includes `/ab/` (or `/a` itself).
pub async fn list_order_and_prefix_isolation(s: &DynStorage) {
    for k in [
        "/ab/1",
        "/a/z",
        "/a",
        "/a/B",
        "/a/a",
        "/b/1",
        "/a/a/nested",
        "/ab/0",
        "/a/",
        "/a/a-1",
    ] {
        s.create(k, b(k)).await.unwrap();
    }
    let rev = s.current_revision();
    let a = s.list("/a/", ListOptions::default()).await.unwrap();
    assert_eq!(
        keys(&a.kvs),
        ["/a/", "/a/B", "/a/a", "/a/a-1", "/a/a/nested", "/a/z"]
    );
    assert_eq!((a.revision, a.remaining), (rev, 0));
    assert!(a.kvs.iter().all(|kv| kv.value == kv.key.as_bytes()));
    let ab = s.list("/ab/", ListOptions::default()).await.unwrap();
    assert_eq!(keys(&ab.kvs), ["/ab/0", "/ab/1"]);
    let all = s.list("", ListOptions::default()).await.unwrap();
    assert_eq!(all.kvs.len(), 10);
    assert!(
        all.kvs
            .windows(2)
            .all(|w| w[0].key.as_bytes() < w[1].key.as_bytes()),
        "byte order"
    );
    assert!(
        s.list("/c/", ListOptions::default())
            .await
            .unwrap()
            .kvs
            .is_empty()
    );
    // A deleted key disappears from lists.
    s.delete("/a/B", None).await.unwrap();
    let a = s.list("/a/", ListOptions::default()).await.unwrap();
    assert_eq!(
        keys(&a.kvs),
        ["/a/", "/a/a", "/a/a-1", "/a/a/nested", "/a/z"]
    );
}

/// Pages via `start_key` + `limit`, `remaining` counts what is left, pages pinned to one revision
/// see one snapshot even while writes continue.
pub async fn list_pagination(s: &DynStorage) {
    for i in 0..10 {
        s.create(&format!("/p/{i:02}"), b(&i.to_string()))
            .await
            .unwrap();
    }
    s.create("/pz", b("outside")).await.unwrap();
    let mut opts = ListOptions {
        limit: Some(3),
        ..Default::default()
    };
    let mut seen = Vec::new();
    let mut remaining = Vec::new();
    let mut pinned = None;
    loop {
        let page = s.list("/p/", opts.clone()).await.unwrap();
        let pinned_rev = *pinned.get_or_insert(page.revision);
        assert_eq!(page.revision, pinned_rev);
        assert!(page.kvs.len() <= 3);
        seen.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        remaining.push(page.remaining);
        // Writes between pages must not show up in the pinned snapshot.
        s.create(&format!("/p/{:02}x", seen.len()), b("late"))
            .await
            .unwrap();
        let Some(last) = page.kvs.last() else { break };
        if page.remaining == 0 {
            break;
        }
        opts = ListOptions {
            start_key: Some(format!("{}\0", last.key)),
            limit: Some(3),
            revision: Some(pinned_rev),
            ..Default::default()
        };
    }
    let want: Vec<String> = (0..10).map(|i| format!("/p/{i:02}")).collect();
    assert_eq!(seen, want);
    assert_eq!(remaining, [7, 4, 1, 0]);
    // A start key below the prefix does not leak other keys; limit 0 means no limit.
    let page = s
        .list(
            "/p/",
            ListOptions {
                start_key: Some("/".into()),
                limit: Some(0),
                revision: pinned,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.kvs.len(), 10);
    // The current revision sees the late writes.
    let now = s.list("/p/", ListOptions::default()).await.unwrap();
    assert_eq!(now.kvs.len(), 14);
}

/// A list that wants one name (an index of keys alone, as the API server's `metadata.name`
/// selector gives) returns that key only, at the revision asked, and says whether live keys
/// follow it.
pub async fn list_by_name_index(s: &DynStorage) {
    fn name(key: &str, _: &[u8]) -> Option<String> {
        key.rsplit('/').next().map(str::to_string)
    }
    const NAME: TriggerIndex = TriggerIndex {
        name: "name",
        func: name,
        prefix: None,
    };
    for k in ["/n/a", "/n/b", "/n/c", "/n/d"] {
        s.create(k, b(k)).await.unwrap();
    }
    s.create("/nz/c", b("outside")).await.unwrap();
    let before_delete = s.current_revision();
    s.delete("/n/b", None).await.unwrap();
    let list = |value: &str, revision: Option<Revision>| {
        let opts = ListOptions {
            revision,
            index: Some(Trigger {
                index: NAME,
                value: value.into(),
            }),
            ..Default::default()
        };
        async move {
            let page = s.list("/n/", opts).await.unwrap();
            let keys: Vec<String> = page.kvs.iter().map(|kv| kv.key.clone()).collect();
            (keys, page.remaining)
        }
    };
    assert_eq!(list("c", None).await, (vec!["/n/c".to_string()], 1));
    assert_eq!(list("d", None).await, (vec!["/n/d".to_string()], 0));
    assert_eq!(list("a", None).await, (vec!["/n/a".to_string()], 1));
    // A deleted name is absent now and present at a revision before its deletion.
    assert_eq!(list("b", None).await, (vec![], 1));
    assert_eq!(
        list("b", Some(before_delete)).await,
        (vec!["/n/b".to_string()], 1)
    );
    assert_eq!(list("zz", None).await, (vec![], 1));
    // With a limit the index is ignored: the page is the first keys.
    let page = s
        .list(
            "/n/",
            ListOptions {
                limit: Some(2),
                index: Some(Trigger {
                    index: NAME,
                    value: "d".into(),
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let keys: Vec<&str> = page.kvs.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!((keys, page.remaining), (vec!["/n/a", "/n/c"], 1));
}

/// A list at each retained past revision shows exactly the state at that revision.
pub async fn list_at_past_revision(s: &DynStorage) {
    let r1 = s.create("/h/a", b("a1")).await.unwrap();
    let r2 = s.create("/h/b", b("b1")).await.unwrap();
    let r3 = s.update("/h/a", b("a2"), r1).await.unwrap();
    let (r4, _) = s.delete("/h/b", Some(r2)).await.unwrap();
    let r5 = s.create("/h/c", b("c1")).await.unwrap();
    let r6 = s.create("/h/b", b("b2")).await.unwrap();
    let expected: Vec<(Revision, Vec<KeyValue>)> = vec![
        (r1, vec![kv("/h/a", "a1", r1, r1)]),
        (r2, vec![kv("/h/a", "a1", r1, r1), kv("/h/b", "b1", r2, r2)]),
        (r3, vec![kv("/h/a", "a2", r1, r3), kv("/h/b", "b1", r2, r2)]),
        (r4, vec![kv("/h/a", "a2", r1, r3)]),
        (r5, vec![kv("/h/a", "a2", r1, r3), kv("/h/c", "c1", r5, r5)]),
        (
            r6,
            vec![
                kv("/h/a", "a2", r1, r3),
                kv("/h/b", "b2", r6, r6),
                kv("/h/c", "c1", r5, r5),
            ],
        ),
    ];
    for (rev, want) in &expected {
        let got = s.list("/h/", at(*rev)).await.unwrap();
        assert_eq!(
            (&got.kvs, got.revision, got.remaining),
            (want, *rev, 0),
            "list at revision {rev}"
        );
    }
    // Pagination at a past revision counts only keys that existed then.
    let page = s
        .list(
            "/h/",
            ListOptions {
                limit: Some(1),
                revision: Some(r3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((keys(&page.kvs), page.remaining), (vec!["/h/a"], 1));
    let cur = s.list("/h/", ListOptions::default()).await.unwrap();
    assert_eq!((cur.kvs, cur.revision), (expected[5].1.clone(), r6));
}

pub async fn future_revision(s: &DynStorage) {
    let r = s.create("/f/a", b("x")).await.unwrap();
    assert_eq!(
        s.list("/f/", at(r + 1)).await,
        Err(StoreError::FutureRevision {
            requested: r + 1,
            current: r
        })
    );
    assert_eq!(s.list("/f/", at(r)).await.unwrap().kvs.len(), 1);
}

/// A fixed little history used by the watch checks; returns its events in order.
async fn write_history(s: &DynStorage) -> Vec<Event> {
    let r1 = s.create("/w/a", b("a1")).await.unwrap();
    let r2 = s.create("/w/b", b("b1")).await.unwrap();
    let r3 = s.update("/w/a", b("a2"), r1).await.unwrap();
    let (r4, _) = s.delete("/w/b", Some(r2)).await.unwrap();
    let r5 = s.create("/w/b", b("b2")).await.unwrap();
    let r6 = s.update("/w/a", b("a3"), r3).await.unwrap();
    vec![
        ev(r1, EventKind::Create, "/w/a", Some("a1"), None),
        ev(r2, EventKind::Create, "/w/b", Some("b1"), None),
        ev(r3, EventKind::Update, "/w/a", Some("a2"), Some("a1")),
        ev(r4, EventKind::Delete, "/w/b", None, Some("b1")),
        ev(r5, EventKind::Create, "/w/b", Some("b2"), None),
        ev(r6, EventKind::Update, "/w/a", Some("a3"), Some("a2")),
    ]
}

/// Watch from 0 replays the whole history with kinds, values and previous values, then goes live.
pub async fn watch_from_zero(s: &DynStorage) {
    let history = write_history(s).await;
    let mut w = s.watch("/w/", 0).unwrap();
    assert_eq!(next_events(&mut w, history.len()).await, history);
    let r = s.create("/w/c", b("c1")).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        ev(r, EventKind::Create, "/w/c", Some("c1"), None)
    );
    expect_sentinel_next(s, &mut w, "/w/sentinel").await;
}

/// Watch from a revision in the middle replays only later events.
pub async fn watch_from_mid_history(s: &DynStorage) {
    let history = write_history(s).await;
    let mut sentinels: Vec<Revision> = Vec::new();
    for cut in 0..history.len() {
        let after = history[cut].revision;
        let mut w = s.watch("/w/", after).unwrap();
        let rest = &history[cut + 1..];
        assert_eq!(
            next_events(&mut w, rest.len()).await,
            rest,
            "watch after {after}"
        );
        // The sentinels of earlier rounds are history now, too.
        let replayed: Vec<Revision> = next_events(&mut w, sentinels.len())
            .await
            .iter()
            .map(|e| e.revision)
            .collect();
        assert_eq!(replayed, sentinels);
        let key = format!("/w/sentinel-{cut}");
        expect_sentinel_next(s, &mut w, &key).await;
        sentinels.push(s.get(&key).await.unwrap().map_or(0, |kv| kv.mod_revision));
    }
}

/// Watch from the current revision sees only what follows, in order.
pub async fn watch_live(s: &DynStorage) {
    write_history(s).await;
    let mut w = s.watch("/w/", s.current_revision()).unwrap();
    let r1 = s.create("/w/live", b("l1")).await.unwrap();
    let r2 = s.update("/w/live", b("l2"), r1).await.unwrap();
    let (r3, _) = s.delete("/w/live", None).await.unwrap();
    assert_eq!(
        next_events(&mut w, 3).await,
        [
            ev(r1, EventKind::Create, "/w/live", Some("l1"), None),
            ev(r2, EventKind::Update, "/w/live", Some("l2"), Some("l1")),
            ev(r3, EventKind::Delete, "/w/live", None, Some("l2")),
        ]
    );
    expect_sentinel_next(s, &mut w, "/w/sentinel").await;
}

/// As in etcd, a watch may start after a revision not reached yet: it sees revisions > `after`.
pub async fn watch_from_future_revision(s: &DynStorage) {
    let r0 = s.create("/w/x", b("0")).await.unwrap();
    let mut w = s.watch("/w/", r0 + 2).unwrap();
    let r1 = s.create("/w/y", b("1")).await.unwrap();
    let r2 = s.create("/w/z", b("2")).await.unwrap();
    let r3 = s.create("/w/q", b("3")).await.unwrap();
    assert_eq!((r1, r2), (r0 + 1, r0 + 2));
    assert_eq!(next_event(&mut w).await.revision, r3);
}

/// Dropping a stream and re-watching from the last seen revision loses and repeats nothing.
pub async fn watch_resume_after_drop(s: &DynStorage) {
    let mut all = Vec::new();
    for i in 0..10 {
        all.push(s.create(&format!("/w/{i}"), b("x")).await.unwrap());
    }
    let mut w = s.watch("/w/", 0).unwrap();
    let first = next_events(&mut w, 4).await;
    let last_seen = first[3].revision;
    drop(w);
    for i in 10..15 {
        all.push(s.create(&format!("/w/{i}"), b("x")).await.unwrap());
    }
    let mut w = s.watch("/w/", last_seen).unwrap();
    let rest = next_events(&mut w, all.len() - 4).await;
    let got: Vec<Revision> = first
        .iter()
        .chain(rest.iter())
        .map(|e| e.revision)
        .collect();
    assert_eq!(got, all);
    // Once more while live.
    drop(w);
    let mut w = s.watch("/w/", *all.last().unwrap_or(&0)).unwrap();
    let r = s.create("/w/after", b("x")).await.unwrap();
    assert_eq!(next_event(&mut w).await.revision, r);
    expect_sentinel_next(s, &mut w, "/w/sentinel").await;
}

/// Watchers see only their prefix, in history and live: `/a/` excludes `/ab/`.
pub async fn watch_prefix_filtering(s: &DynStorage) {
    let r1 = s.create("/a/1", b("x")).await.unwrap();
    s.create("/ab/1", b("x")).await.unwrap();
    s.create("/a", b("x")).await.unwrap();
    let r4 = s.create("/a/2", b("x")).await.unwrap();
    let mut wa = s.watch("/a/", 0).unwrap();
    let mut wab = s.watch("/ab/", 0).unwrap();
    let mut wall = s.watch("", 0).unwrap();
    assert_eq!(
        next_events(&mut wa, 2)
            .await
            .iter()
            .map(|e| e.revision)
            .collect::<Vec<_>>(),
        [r1, r4]
    );
    let r5 = s.create("/ab/2", b("x")).await.unwrap();
    let r6 = s.create("/a/3", b("x")).await.unwrap();
    assert_eq!(next_event(&mut wa).await.revision, r6);
    let ab: Vec<_> = next_events(&mut wab, 2)
        .await
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(ab, ["/ab/1", "/ab/2"]);
    assert_eq!(
        next_events(&mut wall, 6)
            .await
            .iter()
            .map(|e| e.revision)
            .collect::<Vec<_>>(),
        (1..=r6).collect::<Vec<_>>()
    );
    assert_eq!(r5 + 1, r6);
    expect_sentinel_next(s, &mut wa, "/a/sentinel").await;
    expect_sentinel_next(s, &mut wab, "/ab/sentinel").await;
}

/// After `compact(c)`: reads and watches below c answer `Compacted`; at or above c they work.
pub async fn compaction(s: &DynStorage) {
    let r1 = s.create("/c/a", b("a1")).await.unwrap();
    let r2 = s.update("/c/a", b("a2"), r1).await.unwrap();
    let r3 = s.create("/c/b", b("b1")).await.unwrap();
    let r4 = s.update("/c/a", b("a3"), r2).await.unwrap();
    let (r5, _) = s.delete("/c/b", Some(r3)).await.unwrap();
    let r6 = s.create("/c/c", b("c1")).await.unwrap();
    assert_eq!(s.compacted_revision(), 0);
    s.compact(r4).await.unwrap();
    assert_eq!(s.compacted_revision(), r4);

    assert_eq!(
        s.list("/c/", at(r3)).await,
        Err(StoreError::Compacted {
            requested: r3,
            compacted: r4
        })
    );
    let l = s.list("/c/", at(r4)).await.unwrap();
    assert_eq!(l.kvs, [kv("/c/a", "a3", r1, r4), kv("/c/b", "b1", r3, r3)]);
    let l = s.list("/c/", at(r5)).await.unwrap();
    assert_eq!(l.kvs, [kv("/c/a", "a3", r1, r4)]);
    assert_eq!(s.get("/c/c").await.unwrap(), Some(kv("/c/c", "c1", r6, r6)));

    match s.watch("/c/", r3) {
        Err(e) => assert_eq!(
            e,
            StoreError::Compacted {
                requested: r3,
                compacted: r4
            }
        ),
        Ok(_) => panic!("watch below the compacted revision must fail"),
    }
    let mut w = s.watch("/c/", r4).unwrap();
    assert_eq!(
        next_events(&mut w, 2).await,
        [
            ev(r5, EventKind::Delete, "/c/b", None, Some("b1")),
            ev(r6, EventKind::Create, "/c/c", Some("c1"), None)
        ]
    );
    expect_sentinel_next(s, &mut w, "/c/sentinel").await;

    // Compacting below the compacted revision is a no-op; above the current one, it clamps.
    s.compact(r2).await.unwrap();
    assert_eq!(s.compacted_revision(), r4);
    let current = s.current_revision();
    s.compact(current + 100).await.unwrap();
    assert_eq!(s.compacted_revision(), current);
    assert_eq!(s.current_revision(), current, "compaction is not a write");
    let l = s.list("/c/", ListOptions::default()).await.unwrap();
    assert_eq!(keys(&l.kvs), ["/c/a", "/c/c", "/c/sentinel"]);
    // After a full compaction, writes and CAS keep working from the retained versions.
    let r = s.update("/c/a", b("a4"), r4).await.unwrap();
    assert_eq!(s.get("/c/a").await.unwrap(), Some(kv("/c/a", "a4", r1, r)));
    let mut w = s.watch("/c/", current).unwrap();
    assert_eq!(
        next_event(&mut w).await,
        ev(r, EventKind::Update, "/c/a", Some("a4"), Some("a3"))
    );
}

/// A key not written since long before the compaction point is still visible at that point, and
/// the first event after compaction still carries its previous value.
pub async fn compaction_keeps_latest_version_of_untouched_keys(s: &DynStorage) {
    let r1 = s.create("/k/old", b("old")).await.unwrap();
    let mut last = 0;
    for i in 0..10 {
        last = s.create(&format!("/k/n{i}"), b("x")).await.unwrap();
    }
    s.compact(last - 1).await.unwrap();
    let l = s.list("/k/", at(last - 1)).await.unwrap();
    assert!(l.kvs.contains(&kv("/k/old", "old", r1, r1)));
    assert_eq!(l.kvs.len(), 10);
    let mut w = s.watch("/k/old", last - 1).unwrap();
    let r = s.update("/k/old", b("new"), r1).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        ev(r, EventKind::Update, "/k/old", Some("new"), Some("old"))
    );
    s.compact(r).await.unwrap();
    let (rd, removed) = s.delete("/k/old", Some(r)).await.unwrap();
    assert_eq!(removed, kv("/k/old", "new", r1, r));
    assert_eq!(
        next_event(&mut w).await,
        ev(rd, EventKind::Delete, "/k/old", None, Some("new"))
    );
}

/// 8 tasks × 200 creates: all succeed with distinct revisions, and one watcher sees all of them
/// in strictly increasing order.
pub async fn concurrent_writers(s: &DynStorage) {
    const TASKS: usize = 8;
    const PER_TASK: usize = 200;
    let start = s.current_revision();
    let mut w = s.watch("/cc/", start).unwrap();
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut revs = Vec::with_capacity(PER_TASK);
            for i in 0..PER_TASK {
                let value = Bytes::from(vec![b'v'; 256]);
                revs.push(s.create(&format!("/cc/{t}/{i:04}"), value).await.unwrap());
            }
            revs
        }));
    }
    let mut acked = BTreeSet::new();
    for h in handles {
        let revs = h.await.unwrap();
        assert!(
            revs.windows(2).all(|w| w[0] < w[1]),
            "one task's writes are ordered"
        );
        acked.extend(revs);
    }
    assert_eq!(acked.len(), TASKS * PER_TASK, "revisions are distinct");
    assert_eq!(s.current_revision(), *acked.last().unwrap_or(&0));
    let events = next_events(&mut w, TASKS * PER_TASK).await;
    assert!(
        events.windows(2).all(|w| w[0].revision < w[1].revision),
        "watch order"
    );
    let seen: BTreeSet<Revision> = events.iter().map(|e| e.revision).collect();
    assert_eq!(seen, acked);
    let listed = s.list("/cc/", ListOptions::default()).await.unwrap();
    assert_eq!(listed.kvs.len(), TASKS * PER_TASK);
    expect_sentinel_next(s, &mut w, "/cc/sentinel").await;
}
