//! The redb backend's in-memory index of retained key versions (etcd's `treeIndex`): which
//! revisions of which keys the history table holds, and whether each is a put or a tombstone.
//!
//! A list at any revision plans from it alone — the keys of its page with the revision to read,
//! and the number of live keys after the page — so that the table is touched only for the page's
//! own values. Without it a list counted the keys after its page by walking the stored versions
//! themselves, values and all: a continued page of `kubectl get pods -A` over 150 000 pods read
//! the whole history (half a second a page).
//!
//! The index mirrors the history table exactly: every committed write adds its version, and a
//! compaction drops the same versions as the table's (`compact_range`). It is rebuilt from the
//! table when the store opens.
//!
//! It can also keep secondary indexes of the current state (a pod's `spec.nodeName`, from the
//! API server's [`TriggerIndex`]), so that a list of one node's pods among 150 000 reads only that
//! node's pods. Each is built once (from a read snapshot, then caught up by the writer; see
//! `redb_store`), when the API server starts or the first list asks for it, and kept up to date
//! from every committed write's value.
//!
//! While a secondary index is kept, each version written records what its value filed under
//! (a [`Filing`], shared by every version filed under the same value), so that a watch of one
//! node's pods resuming from a past revision can tell, without reading a value, which of the
//! changes since cannot concern its node ([`KeyIndex::misses`]): a kubelet's watch re-opened
//! after its timeout reads the values of its own node's changes only, not of every pod change
//! since its last bookmark.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::{Revision, Trigger, TriggerIndex};

/// One retained version of a key: the revision that wrote it, whether it is a put (a tombstone
/// otherwise) and, for a put written while a secondary index covering the key was kept, what its
/// value filed under there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub rev: Revision,
    pub put: bool,
    pub filing: Option<Arc<Filing>>,
}

impl Version {
    /// A version whose filing is not known (read back from the history table, or written while
    /// no secondary index covered its key).
    pub fn unfiled(rev: Revision, put: bool) -> Version {
        Version {
            rev,
            put,
            filing: None,
        }
    }
}

/// What a version's value filed under in one secondary index (`value: None`: bytes the index
/// function cannot read).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Filing {
    pub index: &'static str,
    pub value: Option<String>,
}

/// What a list reads: each page key with the revision of its version at the list's revision, and
/// how many live keys follow the page.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub page: Vec<(String, Revision)>,
    pub remaining: u64,
}

#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    /// The last revision applied: every committed version up to it is here.
    pub rev: Revision,
    /// The compacted revision as of `rev`.
    pub compacted: Revision,
    /// Retained versions of every key, oldest first.
    keys: BTreeMap<Box<str>, Vec<Version>>,
    /// Secondary indexes of the current state, by index name.
    secondary: BTreeMap<&'static str, Secondary>,
}

/// The current keys under an index's prefix, filed by the value its function gives their bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Secondary {
    index: IndexKey,
    /// Keys by value; `None` holds the keys whose bytes the function cannot read (every list
    /// must consider them).
    by_value: HashMap<Option<String>, BTreeSet<Box<str>>>,
    /// Each key's value, to unfile it when it changes.
    of_key: HashMap<Box<str>, Option<String>>,
    /// One shared [`Filing`] per value some key files under now, for the versions filed under it.
    filings: HashMap<Option<String>, Arc<Filing>>,
}

/// A [`TriggerIndex`] compared by name and prefix (function pointers do not compare reliably).
#[derive(Clone, Copy, Debug)]
struct IndexKey(TriggerIndex);

impl PartialEq for IndexKey {
    fn eq(&self, other: &Self) -> bool {
        (self.0.name, self.0.prefix) == (other.0.name, other.0.prefix)
    }
}

impl Eq for IndexKey {}

impl Secondary {
    /// An empty index for `index`, which must have a prefix; fill it with [`Secondary::file`].
    pub fn new(index: TriggerIndex) -> Secondary {
        Secondary {
            index: IndexKey(index),
            by_value: HashMap::new(),
            of_key: HashMap::new(),
            filings: HashMap::new(),
        }
    }

    /// The index's name.
    pub fn name(&self) -> &'static str {
        self.index.0.name
    }

    /// What the index indexes.
    pub fn trigger_index(&self) -> TriggerIndex {
        self.index.0
    }

    /// The prefix the index covers.
    pub fn prefix(&self) -> &'static str {
        self.index.0.prefix.unwrap_or_default()
    }

    /// Files `key` under what its new bytes give (`None`: deleted); returns what a put filed
    /// under (`None` for a deletion or a key outside the index's prefix).
    pub fn file(&mut self, key: &str, value: Option<&[u8]>) -> Option<Arc<Filing>> {
        if !key.starts_with(self.prefix()) {
            return None;
        }
        if let Some(old) = self.of_key.remove(key)
            && let Some(set) = self.by_value.get_mut(&old)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_value.remove(&old);
                // The versions filed under it keep their own reference.
                self.filings.remove(&old);
            }
        }
        let bytes = value?;
        let filed = (self.index.0.func)(key, bytes);
        self.by_value
            .entry(filed.clone())
            .or_default()
            .insert(key.into());
        let name = self.index.0.name;
        let filing = self
            .filings
            .entry(filed.clone())
            .or_insert_with(|| {
                Arc::new(Filing {
                    index: name,
                    value: filed.clone(),
                })
            })
            .clone();
        self.of_key.insert(key.into(), filed);
        Some(filing)
    }
}

impl KeyIndex {
    /// Records a version read back from the history table (keys and revisions in any order).
    pub fn load(&mut self, key: &str, version: Version) {
        let versions = self.keys.entry(key.into()).or_default();
        let at = versions.partition_point(|v| v.rev < version.rev);
        versions.insert(at, version);
    }

    /// Whether the secondary index named `name` is kept.
    pub fn has_secondary(&self, name: &str) -> bool {
        self.secondary.contains_key(name)
    }

    /// Keeps `secondary` from now on; it must hold the current state as of `self.rev`.
    pub fn add_secondary(&mut self, secondary: Secondary) {
        self.secondary.insert(secondary.index.0.name, secondary);
    }

    /// Records a committed write (revisions ascend across calls; `value: None` for a deletion):
    /// its version, filed in the secondary indexes, with what it filed under in the first of
    /// them that covers the key.
    pub fn record(&mut self, key: &str, rev: Revision, value: Option<&[u8]>) {
        let mut filing = None;
        for secondary in self.secondary.values_mut() {
            let filed = secondary.file(key, value);
            filing = filing.or(filed);
        }
        self.apply(
            key,
            Version {
                rev,
                put: value.is_some(),
                filing,
            },
        );
    }

    /// Adds a version (revisions ascend across calls).
    fn apply(&mut self, key: &str, version: Version) {
        self.rev = self.rev.max(version.rev);
        match self.keys.get_mut(key) {
            Some(versions) => versions.push(version),
            None => {
                self.keys.insert(key.into(), vec![version]);
            }
        }
    }

    /// Drops what the history table's compaction dropped: for each key written in the compacted
    /// range, with `keep` its newest revision in it, every version older than `keep`, and `keep`
    /// itself when it is a tombstone.
    pub fn compact<'a>(
        &mut self,
        to: Revision,
        newest: impl IntoIterator<Item = (&'a String, &'a Revision)>,
    ) {
        for (key, keep) in newest {
            let Some(versions) = self.keys.get_mut(key.as_str()) else {
                continue;
            };
            versions.retain(|v| v.rev > *keep || (v.rev == *keep && v.put));
            if versions.is_empty() {
                self.keys.remove(key.as_str());
            }
        }
        self.compacted = self.compacted.max(to);
    }

    /// The keys under `prefix` from `start` on, as they were at revision `at`: the first `limit`
    /// live ones to read, and a count of the live ones after them. With `index` (a list without
    /// a limit), keys it leaves out by their name alone are not planned, and `remaining` says
    /// whether live keys follow the last one planned (see `ListOptions::index`).
    pub fn plan(
        &self,
        prefix: &str,
        start: &str,
        at: Revision,
        limit: usize,
        index: Option<&Trigger>,
    ) -> Plan {
        let mut plan = Plan::default();
        let range = self
            .keys
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        let mut left_out = false;
        for (key, versions) in range {
            let idx = versions.partition_point(|v| v.rev <= at);
            let Some(v) = idx.checked_sub(1).map(|i| &versions[i]) else {
                continue;
            };
            if !v.put {
                continue;
            }
            if index.is_some_and(|t| !t.may_want_key(key)) {
                left_out = true;
                continue;
            }
            if plan.page.len() < limit {
                plan.page.push((key.to_string(), v.rev));
                left_out = false;
            } else {
                plan.remaining += 1;
            }
        }
        if index.is_some() {
            plan.remaining = u64::from(left_out);
        }
        plan
    }

    /// The plan of a list without a limit that wants only the keys filed under `trigger`, when
    /// its secondary index is kept, covers `prefix` and `at` is the current revision (`None`
    /// otherwise: plan every key). Its `remaining` says whether keys left out follow the last one
    /// planned (see `ListOptions::index`).
    pub fn filtered(
        &self,
        prefix: &str,
        start: &str,
        at: Revision,
        trigger: &Trigger,
    ) -> Option<Plan> {
        let secondary = self.secondary.get(trigger.index.name)?;
        if secondary.index != IndexKey(trigger.index)
            || !prefix.starts_with(secondary.prefix())
            || at != self.rev
        {
            return None;
        }
        let empty = BTreeSet::new();
        let filed = secondary
            .by_value
            .get(&Some(trigger.value.clone()))
            .unwrap_or(&empty);
        let unreadable = secondary.by_value.get(&None).unwrap_or(&empty);
        let mut candidates: Vec<&str> = filed
            .iter()
            .chain(unreadable)
            .map(|k| &**k)
            .filter(|k| k.starts_with(prefix) && *k >= start)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        // The secondary index holds current keys only, so each has a live newest version.
        let page: Vec<(String, Revision)> = candidates
            .into_iter()
            .filter_map(|key| {
                let v = self.keys.get(key)?.last().filter(|v| v.put)?;
                Some((key.to_string(), v.rev))
            })
            .collect();
        let after = page
            .last()
            .map_or(start.to_owned(), |(k, _)| format!("{k}\0"));
        let follows = self
            .keys
            .range::<str, _>((
                std::ops::Bound::Included(after.as_str()),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .any(|(_, v)| v.last().is_some_and(|v| v.put));
        Some(Plan {
            page,
            remaining: u64::from(follows),
        })
    }

    /// Whether the change that wrote `key` at `rev` surely concerns no watcher waiting for
    /// `trigger`: neither its value nor the value before it files under the trigger's value (a
    /// watch's replay then skips it unread). `false` whenever that is not known from the index
    /// alone — the index not kept, the version not (or no longer) here, a filing not recorded, a
    /// value the function cannot read —, so the caller reads the change and its own filter
    /// decides.
    pub fn misses(&self, key: &str, rev: Revision, trigger: &Trigger) -> bool {
        let Some(secondary) = self.secondary.get(trigger.index.name) else {
            return false;
        };
        if secondary.index != IndexKey(trigger.index) || !key.starts_with(secondary.prefix()) {
            return false;
        }
        let Some(versions) = self.keys.get(key) else {
            return false;
        };
        let Ok(at) = versions.binary_search_by_key(&rev, |v| v.rev) else {
            return false;
        };
        let elsewhere = |v: &Version| {
            !v.put
                || v.filing.as_ref().is_some_and(|f| {
                    f.index == trigger.index.name
                        && f.value.as_ref().is_some_and(|x| *x != trigger.value)
                })
        };
        let before = match at.checked_sub(1) {
            Some(i) => elsewhere(&versions[i]),
            // Nothing older retained: any older version is at or below the compacted revision,
            // and the newest of those was dropped, so it was a deletion — the change had no
            // previous value. At or below the compacted revision itself, the versions before it
            // may have been dropped after the reader's snapshot was taken: not known.
            None => rev > self.compacted,
        };
        before && elsewhere(&versions[at])
    }

    /// Whether both hold the same versions of the same keys (what the versions filed under is
    /// not read back from the table, so it is not compared).
    #[cfg(test)]
    pub fn same_versions(&self, other: &KeyIndex) -> bool {
        let plain = |index: &KeyIndex| {
            index
                .keys
                .iter()
                .map(|(k, vs)| (k.clone(), vs.iter().map(|v| (v.rev, v.put)).collect()))
                .collect::<Vec<(Box<str>, Vec<_>)>>()
        };
        plain(self) == plain(other)
    }

    /// The secondary indexes kept, with what each indexes.
    #[cfg(test)]
    pub fn secondaries(&self) -> impl Iterator<Item = (TriggerIndex, &Secondary)> {
        self.secondary.values().map(|s| (s.index.0, s))
    }

    /// Retained versions, tombstones included.
    #[cfg(test)]
    pub fn versions(&self) -> u64 {
        self.keys.values().map(|v| v.len() as u64).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn put(rev: Revision) -> Version {
        Version::unfiled(rev, true)
    }

    fn tomb(rev: Revision) -> Version {
        Version::unfiled(rev, false)
    }

    fn index() -> KeyIndex {
        // a: put 1, put 4; b: put 2, deleted 5; c: put 3; d (another prefix): put 6
        let mut idx = KeyIndex::default();
        for (k, v) in [
            ("/p/a", put(1)),
            ("/p/b", put(2)),
            ("/p/c", put(3)),
            ("/p/a", put(4)),
            ("/p/b", tomb(5)),
            ("/q/d", put(6)),
        ] {
            idx.apply(k, v);
        }
        idx
    }

    fn keys(plan: &Plan) -> Vec<(&str, Revision)> {
        plan.page.iter().map(|(k, r)| (k.as_str(), *r)).collect()
    }

    #[test]
    fn a_plan_reads_each_key_as_it_was_at_the_revision_and_counts_the_rest() {
        let idx = index();
        assert_eq!(idx.rev, 6);
        // (start, at, limit) → (page, remaining)
        type Case<'a> = (&'a str, Revision, usize, &'a [(&'a str, Revision)], u64);
        let cases: &[Case] = &[
            ("/p/", 6, usize::MAX, &[("/p/a", 4), ("/p/c", 3)], 0),
            (
                "/p/",
                4,
                usize::MAX,
                &[("/p/a", 4), ("/p/b", 2), ("/p/c", 3)],
                0,
            ),
            ("/p/", 2, usize::MAX, &[("/p/a", 1), ("/p/b", 2)], 0),
            ("/p/", 0, usize::MAX, &[], 0),
            ("/p/", 4, 1, &[("/p/a", 4)], 2),
            ("/p/", 6, 1, &[("/p/a", 4)], 1),
            ("/p/b", 4, 1, &[("/p/b", 2)], 1),
            ("/p/a\0", 6, usize::MAX, &[("/p/c", 3)], 0),
            ("/p/", 4, 0, &[], 3),
        ];
        for (start, at, limit, page, remaining) in cases {
            let plan = idx.plan("/p/", start, *at, *limit, None);
            assert_eq!(keys(&plan), *page, "start {start:?} at {at} limit {limit}");
            assert_eq!(plan.remaining, *remaining, "start {start:?} at {at}");
        }
    }

    #[test]
    fn compaction_keeps_the_newest_put_of_each_key_and_drops_tombstones() {
        let mut idx = index();
        // The history table's compaction to 5 names each key's newest revision in (0, 5].
        let newest: BTreeMap<String, Revision> = [("/p/a", 4), ("/p/b", 5), ("/p/c", 3)]
            .into_iter()
            .map(|(k, r)| (k.to_string(), r))
            .collect();
        idx.compact(5, &newest);
        assert_eq!(idx.compacted, 5);
        assert_eq!(idx.versions(), 3); // a@4, c@3, d@6
        assert_eq!(
            keys(&idx.plan("/p/", "/p/", 5, usize::MAX, None)),
            [("/p/a", 4), ("/p/c", 3)]
        );
        assert_eq!(keys(&idx.plan("/", "/", 6, usize::MAX, None)).len(), 3);
    }

    /// The node a test value names (`n1:…` → `n1`); values starting with `x` cannot be read
    /// (also the redb store's tests' index function).
    pub(crate) fn node_of(_key: &str, value: &[u8]) -> Option<String> {
        let s = std::str::from_utf8(value).ok()?;
        (!s.starts_with('x')).then(|| s.split(':').next().unwrap_or_default().to_string())
    }

    const NODE: TriggerIndex = TriggerIndex {
        name: "node",
        func: node_of,
        prefix: Some("/p/"),
    };

    #[test]
    fn a_change_misses_a_trigger_only_when_both_its_values_are_known_to_file_elsewhere() {
        let mut idx = KeyIndex::default();
        // Written before the index was kept: filing unknown.
        idx.record("/p/old", 1, Some(b"n2:a"));
        idx.add_secondary(Secondary::new(NODE));
        let writes: &[(&str, Option<&[u8]>)] = &[
            ("/p/a", Some(b"n2:a")),   // 2: created on n2
            ("/p/a", Some(b"n2:b")),   // 3: stays on n2
            ("/p/a", Some(b"n1:c")),   // 4: moves to n1
            ("/p/a", Some(b"n2:d")),   // 5: moves back to n2
            ("/p/a", None),            // 6: deleted from n2
            ("/p/b", Some(b"x")),      // 7: unreadable
            ("/p/b", Some(b"n2:a")),   // 8: from unreadable to n2
            ("/p/old", Some(b"n2:b")), // 9: the version before it has no filing
            ("/q/c", Some(b"n2:a")),   // 10: outside the index's prefix
        ];
        for (rev, (key, value)) in (2..).zip(writes) {
            idx.record(key, rev, *value);
        }
        let on = |node: &str| Trigger {
            index: NODE,
            value: node.to_string(),
        };
        let cases: &[(&str, Revision, &str, bool)] = &[
            ("/p/a", 2, "n1", true),
            ("/p/a", 2, "n2", false),
            ("/p/a", 3, "n1", true),
            ("/p/a", 4, "n1", false), // arrives
            ("/p/a", 4, "n2", false), // leaves
            ("/p/a", 4, "n3", true),
            ("/p/a", 5, "n1", false),
            ("/p/a", 6, "n2", false), // deleted from it
            ("/p/a", 6, "n1", true),
            ("/p/b", 7, "n1", false), // unreadable: offered to all
            ("/p/b", 8, "n1", false),
            ("/p/old", 9, "n1", false),
            ("/q/c", 10, "n1", false),
            ("/p/a", 11, "n1", false), // not (yet) in the index
            ("/p/none", 3, "n1", false),
        ];
        for (key, rev, node, misses) in cases {
            assert_eq!(
                idx.misses(key, *rev, &on(node)),
                *misses,
                "{key}@{rev} {node}"
            );
        }
        let other = TriggerIndex {
            name: "other",
            ..NODE
        };
        let t = Trigger {
            index: other,
            value: "n1".into(),
        };
        assert!(!idx.misses("/p/a", 2, &t), "an index not kept");
        // After compaction to 3 the oldest version of /p/a is 3: nothing is known of what came
        // before it any more (a reader's snapshot may still hold 2), while 4 is still known.
        let newest: BTreeMap<String, Revision> = [("/p/a".to_string(), 3)].into_iter().collect();
        idx.compact(3, &newest);
        assert!(!idx.misses("/p/a", 3, &on("n1")));
        assert!(!idx.misses("/p/a", 4, &on("n1")));
        assert!(idx.misses("/p/a", 4, &on("n3")));
    }

    #[test]
    fn loading_in_any_order_gives_the_same_index_as_applying() {
        let applied = index();
        let mut loaded = KeyIndex::default();
        for (k, v) in [
            ("/q/d", put(6)),
            ("/p/b", tomb(5)),
            ("/p/a", put(4)),
            ("/p/c", put(3)),
            ("/p/b", put(2)),
            ("/p/a", put(1)),
        ] {
            loaded.load(k, v);
        }
        assert_eq!(loaded.keys, applied.keys);
    }
}
