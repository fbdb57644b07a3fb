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

use std::collections::BTreeMap;

use crate::Revision;

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

#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct KeyIndex {
    /// The last revision applied: every committed version up to it is here.
    pub rev: Revision,
    /// The compacted revision as of `rev`.
    pub compacted: Revision,
    /// Retained versions of every key, oldest first.
    keys: BTreeMap<Box<str>, Vec<Version>>,
}

impl KeyIndex {
    /// Records a version read back from the history table (keys and revisions in any order).
    pub fn load(&mut self, key: &str, version: Version) {
        let versions = self.keys.entry(key.into()).or_default();
        let at = versions.partition_point(|v| v.rev < version.rev);
        versions.insert(at, version);
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
