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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::{Revision, Trigger, TriggerIndex};

/// One retained version of a key: the revision that wrote it and whether it is a put (a
/// tombstone otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub rev: Revision,
    pub put: bool,
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

    /// Files `key` under what its new bytes give (`None`: deleted).
    pub fn file(&mut self, key: &str, value: Option<&[u8]>) {
        if !key.starts_with(self.prefix()) {
            return;
        }
        if let Some(old) = self.of_key.remove(key)
            && let Some(set) = self.by_value.get_mut(&old)
        {
            set.remove(key);
            if set.is_empty() {
                self.by_value.remove(&old);
            }
        }
        if let Some(bytes) = value {
            let filed = (self.index.0.func)(key, bytes);
            self.by_value
                .entry(filed.clone())
                .or_default()
                .insert(key.into());
            self.of_key.insert(key.into(), filed);
        }
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

    /// Files a committed write in the secondary indexes (`value: None` for a deletion).
    pub fn file(&mut self, key: &str, value: Option<&[u8]>) {
        for secondary in self.secondary.values_mut() {
            secondary.file(key, value);
        }
    }

    /// Records a committed write (revisions ascend across calls).
    pub fn apply(&mut self, key: &str, version: Version) {
        match self.keys.get_mut(key) {
            Some(versions) => versions.push(version),
            None => {
                self.keys.insert(key.into(), vec![version]);
            }
        }
        self.rev = self.rev.max(version.rev);
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
    /// live ones to read, and a count of the live ones after them.
    pub fn plan(&self, prefix: &str, start: &str, at: Revision, limit: usize) -> Plan {
        let mut plan = Plan::default();
        let range = self
            .keys
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix));
        for (key, versions) in range {
            let idx = versions.partition_point(|v| v.rev <= at);
            let Some(v) = idx.checked_sub(1).map(|i| versions[i]) else {
                continue;
            };
            if !v.put {
                continue;
            }
            if plan.page.len() < limit {
                plan.page.push((key.to_string(), v.rev));
            } else {
                plan.remaining += 1;
            }
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

    /// Whether both hold the same versions of the same keys.
    #[cfg(test)]
    pub fn same_versions(&self, other: &KeyIndex) -> bool {
        self.keys == other.keys
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
mod tests {
    use super::*;

    fn put(rev: Revision) -> Version {
        Version { rev, put: true }
    }

    fn tomb(rev: Revision) -> Version {
        Version { rev, put: false }
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
            let plan = idx.plan("/p/", start, *at, *limit);
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
            keys(&idx.plan("/p/", "/p/", 5, usize::MAX)),
            [("/p/a", 4), ("/p/c", 3)]
        );
        assert_eq!(keys(&idx.plan("/", "/", 6, usize::MAX)).len(), 3);
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
