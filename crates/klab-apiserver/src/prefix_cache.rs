//! A value the API server derives from every object under a few store prefixes (the RBAC policy,
//! the PriorityClasses), kept while watches on those prefixes have delivered nothing.
//!
//! The watches are opened before the prefixes are listed. The store hands a commit's events to
//! its watchers before the write returns, so a request after a write under a prefix always sees
//! it — upstream's plugins, fed by informers, may lag. Checking the watches costs nothing per
//! request; listing and decoding the prefixes on every request was measurable on a busy cluster
//! (the policy: 2–3 % of its time; every PriorityClass decoded for each pod created: 0.7 %).

use std::sync::{Arc, Mutex};

use klab_store::{KeyValue, Storage};

use crate::error::ApiResult;

/// The cached value of a derivation over some prefixes (see the module documentation).
pub(crate) struct PrefixCache<T> {
    /// The entry with the watches opened before it was read (one lock: a slower load must
    /// never pair its older entry with a newer load's quiet watches).
    state: Mutex<State<T>>,
}

impl<T> Default for PrefixCache<T> {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                entry: None,
                watches: None,
            }),
        }
    }
}

struct State<T> {
    entry: Option<(Signature, Arc<T>)>,
    /// Open while `entry` is current; `None` when it must be checked against the store.
    watches: Option<Vec<klab_store::WatchStream>>,
}

/// The `(key, mod revision)` of every object a value was derived from.
type Signature = Vec<(String, u64)>;

impl<T> PrefixCache<T> {
    /// The cached value if nothing under its prefixes can have changed since it was loaded:
    /// every watch is open and has nothing to deliver. Anything delivered (or a watch that
    /// ended) drops them.
    fn current(&self) -> Option<Arc<T>> {
        use futures::FutureExt;
        use futures::StreamExt;
        let mut state = self.state.lock().ok()?;
        let open = state.watches.as_mut()?;
        let quiet = open.iter_mut().all(|w| w.next().now_or_never().is_none());
        if !quiet {
            state.watches = None;
            return None;
        }
        state.entry.as_ref().map(|(_, v)| v.clone())
    }

    /// Files a load: its value with the watches opened before it read the store.
    fn keep(&self, entry: (Signature, Arc<T>), watches: Option<Vec<klab_store::WatchStream>>) {
        if let Ok(mut state) = self.state.lock() {
            state.entry = Some(entry);
            state.watches = watches;
        }
    }

    /// The cached value if it was derived from exactly these objects.
    fn built_from(&self, signature: &Signature) -> Option<Arc<T>> {
        let state = self.state.lock().ok()?;
        let (sig, v) = state.entry.as_ref()?;
        (sig == signature).then(|| v.clone())
    }

    /// The value derived from the objects under `prefixes`: the cached one while its watches
    /// are quiet, else `derive` over one list per prefix (in `prefixes`' order) — unless the
    /// lists hold exactly the objects the cached value was derived from.
    pub(crate) async fn get(
        &self,
        store: &dyn Storage,
        prefixes: &[String],
        derive: impl FnOnce(&[Vec<KeyValue>]) -> ApiResult<T>,
    ) -> ApiResult<Arc<T>> {
        if let Some(v) = self.current() {
            return Ok(v);
        }
        // Watches from the current revision, opened before the lists: a write that lands
        // during the lists is both read and delivered, and only costs one more load.
        let revision = store.current_revision();
        let mut watches = Vec::with_capacity(prefixes.len());
        let mut lists = Vec::with_capacity(prefixes.len());
        let mut signature = Vec::new();
        for prefix in prefixes {
            // A watch that cannot be opened (the revision just compacted) leaves the cache
            // unwatched: the next request loads again.
            if let Ok(w) = store.watch(prefix, revision) {
                watches.push(w);
            }
            let l = store.list(prefix, Default::default()).await?;
            signature.extend(l.kvs.iter().map(|kv| (kv.key.clone(), kv.mod_revision)));
            lists.push(l.kvs);
        }
        let watched = (watches.len() == prefixes.len()).then_some(watches);
        if let Some(v) = self.built_from(&signature) {
            self.keep((signature, v.clone()), watched);
            return Ok(v);
        }
        let v = Arc::new(derive(&lists)?);
        self.keep((signature, v.clone()), watched);
        Ok(v)
    }
}
