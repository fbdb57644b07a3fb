//! The garbage collector (shell): a graph of every watched object keyed by UID with its
//! ownerReferences; dependents of vanished owners are deleted, owners being deleted with
//! `foregroundDeletion` wait for their blocking dependents, owners with `orphan` release theirs.
//! Objects are watched as metadata only, as upstream's metadata informers. Decisions live in
//! `decide.rs`; every action is re-checked against a live read first, as
//! upstream does, so a lagging cache never deletes a live object's dependents.
//!
//! What the API server must do on DELETE (the collector only removes finalizers and dependents):
//! - `propagationPolicy=Foreground`: add `foregroundDeletion` to `metadata.finalizers`, set
//!   `deletionTimestamp`, keep the object (200 with the object);
//! - `propagationPolicy=Orphan` (or `orphanDependents=true`): add `orphan`, set
//!   `deletionTimestamp`, keep the object;
//! - `Background` / unset: delete at once (pods: graceful deletion) — the collector then deletes
//!   the dependents;
//! - an update that empties `finalizers` of an object with `deletionTimestamp` (and, for pods,
//!   grace elapsed/zero) removes it from storage.

pub mod config;
pub mod decide;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::task::Poll;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use klab_api::Clock;
use klab_api::names::{FINALIZER_FOREGROUND_DELETION, FINALIZER_ORPHAN_DEPENDENTS};
use klab_api::slim::Slim;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    Preconditions, PropagationPolicy,
};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use serde_json::{Value, json};

pub use config::{GarbageCollectorConfig, GcResource};
use decide::{DependentVerdict, ForegroundVerdict, OwnerState, Propagation};

use crate::replicaset::informer;
use crate::replicaset::{Error, api_error_text, is_not_found, set_owner_refs};
use klab_runtime::WorkQueue as Queue;
use klab_runtime::controller::sleep_until;

/// What the GC caches of an object: its metadata.
type Meta = PartialObjectMeta<DynamicObject>;

type Stream = BoxStream<'static, Result<watcher::Event<Meta>, watcher::Error>>;

/// Work kinds, as the first half of queue keys.
const ATTEMPT: &str = "attemptToDelete";
const OWNER: &str = "processOwner";

/// Runs the garbage collector until a watch stream ends.
pub async fn run(
    client: kube::Client,
    clock: Clock,
    config: GarbageCollectorConfig,
) -> Result<(), Error> {
    if !config.enable_garbage_collector {
        return Ok(());
    }
    let resources: Vec<(GcResource, ApiResource)> = config
        .resources
        .iter()
        .map(|r| {
            (
                r.clone(),
                ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
                    &r.plural,
                ),
            )
        })
        .collect();
    let mut streams: Vec<Stream> = resources
        .iter()
        .map(|(_, ar)| {
            // A metadata watch (`as=PartialObjectMetadata`), as upstream's GC uses metadata
            // informers: the server sends metadata only, and it is all the graph reads. Its
            // managed fields are skipped unread (`Slim`): the graph never looks at them.
            watcher(
                Api::<Slim<Meta>>::all_with(client.clone(), ar),
                watcher::Config::default(),
            )
            .map_ok(klab_runtime::informer::unslim)
            .boxed()
        })
        .collect();
    let mut gc = Gc {
        client,
        clock: clock.clone(),
        resources,
        caches: Vec::new(),
        synced: Vec::new(),
        items: BTreeMap::new(),
        dependents: BTreeMap::new(),
        queue: Queue::default(),
    };
    gc.caches = gc
        .resources
        .iter()
        .map(|_| informer::Cache::default())
        .collect();
    gc.synced = vec![false; gc.resources.len()];
    loop {
        let deadline = gc.queue.next_deadline();
        // Poll the streams in a fixed order (deterministic), or wake for a retry.
        let next = std::future::poll_fn(|cx| {
            for (i, s) in streams.iter_mut().enumerate() {
                if let Poll::Ready(x) = s.poll_next_unpin(cx) {
                    return Poll::Ready((i, x));
                }
            }
            Poll::Pending
        });
        tokio::select! {
            biased;
            (i, ev) = next => gc.on_event(i, ev.into()).await?,
            _ = sleep_until(&clock, deadline) => {}
        }
        loop {
            let ready = streams.iter_mut().enumerate().find_map(|(i, s)| {
                use futures::FutureExt;
                s.next().now_or_never().map(|x| (i, x))
            });
            match ready {
                Some((i, ev)) => gc.on_event(i, ev.into()).await?,
                None => break,
            }
        }
        gc.queue.fire_due(clock.now());
        if gc.synced.iter().all(|s| *s) {
            while let Some((what, uid)) = gc.queue.pop() {
                let r = if what == OWNER {
                    gc.process_owner(&uid).await
                } else {
                    gc.attempt_to_delete(&uid).await
                };
                if let Err(e) = r {
                    tracing::debug!(uid = %uid, error = %e, "garbage collector action failed; retrying");
                    if let Ok(t) = clock.now().checked_add(jiff::SignedDuration::from_secs(1)) {
                        gc.queue.add_at((what, uid), t);
                    }
                }
            }
        }
    }
}

/// A graph node: where an object lives and its last seen metadata — the watch cache's own
/// `Arc`, not a copy: the graph holds every object of every watched resource (every pod, node
/// and Lease), so a second copy of each one's metadata cost memory in proportion to the cluster.
#[derive(Clone, Debug)]
struct Item {
    res: usize,
    obj: Arc<Meta>,
}

impl Item {
    fn meta(&self) -> &ObjectMeta {
        &self.obj.metadata
    }
}

struct Gc {
    client: kube::Client,
    clock: Clock,
    resources: Vec<(GcResource, ApiResource)>,
    caches: Vec<informer::Cache<Meta>>,
    synced: Vec<bool>,
    /// uid → item
    items: BTreeMap<String, Item>,
    /// owner uid → dependent uids (the owner need not exist: that is what makes them garbage)
    dependents: BTreeMap<String, BTreeSet<String>>,
    queue: Queue,
}

fn uid_of(m: &ObjectMeta) -> String {
    m.uid.clone().unwrap_or_default()
}

impl Gc {
    async fn on_event(&mut self, i: usize, p: informer::Polled<Meta>) -> Result<(), Error> {
        match p {
            informer::Polled::Event(ev) => {
                let changes = self.caches[i].apply(ev);
                if self.caches[i].synced() {
                    self.synced[i] = true;
                }
                for (old, new) in changes {
                    match (old, new) {
                        (_, Some(n)) => self.upsert(i, n),
                        (Some(o), None) => self.remove(&o.metadata),
                        (None, None) => {}
                    }
                }
                Ok(())
            }
            informer::Polled::Error(e) => {
                tracing::warn!(error = %e, resource = %self.resources[i].0.plural, "garbage collector watch error");
                self.clock
                    .sleep(klab_runtime::informer::WATCH_ERROR_BACKOFF)
                    .await;
                Ok(())
            }
            informer::Polled::Ended => Err(Error::WatchEnded("garbage collector resources")),
        }
    }

    fn link(&mut self, uid: &str, meta: &ObjectMeta, add: bool) {
        for r in meta.owner_references.iter().flatten() {
            if add {
                self.dependents
                    .entry(r.uid.clone())
                    .or_default()
                    .insert(uid.to_string());
            } else if let Some(s) = self.dependents.get_mut(&r.uid) {
                s.remove(uid);
                if s.is_empty() {
                    self.dependents.remove(&r.uid);
                }
            }
        }
    }

    fn upsert(&mut self, res: usize, obj: Arc<Meta>) {
        let meta = &obj.metadata;
        let uid = uid_of(meta);
        if uid.is_empty() {
            return;
        }
        // As upstream's graph builder, an update is verified again only when its owner
        // references changed: one that leaves them alone (a Lease renewal, a pod's status) has
        // nothing new to check, and an owner's removal queues its dependents itself.
        let owners_changed = self
            .items
            .get(&uid)
            .is_none_or(|old| old.meta().owner_references != meta.owner_references);
        if owners_changed {
            if let Some(old) = self.items.remove(&uid) {
                self.link(&uid, old.meta(), false);
            }
            self.link(&uid, meta, true);
            if meta
                .owner_references
                .as_ref()
                .is_some_and(|r| !r.is_empty())
            {
                self.queue.add((ATTEMPT.into(), uid.clone()));
            }
        }
        if decide::is_deleting_dependents(meta) || decide::is_orphaning(meta) {
            self.queue.add((OWNER.into(), uid.clone()));
        }
        // An owner that no longer exists is discovered through its dependents; one that now
        // exists again (a relist) needs nothing.
        self.items.insert(uid, Item { res, obj });
    }

    fn remove(&mut self, meta: &ObjectMeta) {
        let uid = uid_of(meta);
        let Some(item) = self.items.remove(&uid) else {
            return;
        };
        self.link(&uid, item.meta(), false);
        // its dependents may now be garbage
        for d in self.dependents.get(&uid).cloned().unwrap_or_default() {
            self.queue.add((ATTEMPT.into(), d));
        }
        // an owner waiting for it may now be free to go
        for r in item.meta().owner_references.iter().flatten() {
            if self
                .items
                .get(&r.uid)
                .is_some_and(|o| decide::is_deleting_dependents(o.meta()))
            {
                self.queue.add((OWNER.into(), r.uid.clone()));
            }
        }
    }

    fn resource_for(&self, r: &OwnerReference) -> Option<usize> {
        self.resources
            .iter()
            .position(|(g, _)| g.kind == r.kind && g.api_version() == r.api_version)
    }

    fn api(&self, res: usize, ns: &str) -> Api<DynamicObject> {
        let (g, ar) = &self.resources[res];
        if g.namespaced {
            Api::namespaced_with(self.client.clone(), ns, ar)
        } else {
            Api::all_with(self.client.clone(), ar)
        }
    }

    /// A live read (upstream `getObject`): Ok(None) when not found.
    async fn live(
        &self,
        res: usize,
        ns: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, kube::Error> {
        match self.api(res, ns).get(name).await {
            Ok(o) => Ok(Some(o.metadata)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Classifies every owner reference of `meta` (upstream `classifyReferences`): from the graph
    /// when the owner is known there, from a live read otherwise. Unknown kinds count as solid.
    async fn classify_owners(
        &self,
        meta: &ObjectMeta,
        live: bool,
    ) -> Result<Vec<(String, OwnerState)>, kube::Error> {
        let ns = meta.namespace.clone().unwrap_or_default();
        let mut out = Vec::new();
        for r in meta.owner_references.iter().flatten() {
            let Some(res) = self.resource_for(r) else {
                out.push((r.uid.clone(), OwnerState::Solid));
                continue;
            };
            let owner = match (live, self.items.get(&r.uid)) {
                (false, Some(item)) => Some(item.meta().clone()),
                _ => self.live(res, &ns, &r.name).await?,
            };
            out.push((r.uid.clone(), decide::classify(r, owner.as_ref())));
        }
        Ok(out)
    }

    /// Upstream `attemptToDeleteItem`.
    async fn attempt_to_delete(&mut self, uid: &str) -> Result<(), kube::Error> {
        let Some(item) = self.items.get(uid).cloned() else {
            return Ok(());
        };
        if decide::is_deleting_dependents(item.meta()) {
            return self.process_owner(uid).await;
        }
        let has_dependents = self.dependents.get(uid).is_some_and(|d| !d.is_empty());
        // First from the graph; only an action is confirmed against live reads.
        let cached = self.classify_owners(item.meta(), false).await?;
        if decide::attempt_to_delete(item.meta(), &cached, has_dependents) == DependentVerdict::Keep
        {
            return Ok(());
        }
        let ns = item.meta().namespace.clone().unwrap_or_default();
        let name = item.meta().name.clone().unwrap_or_default();
        let Some(latest) = self.live(item.res, &ns, &name).await? else {
            return Ok(());
        };
        if latest.uid.as_deref() != Some(uid) {
            return Ok(());
        }
        let states = self.classify_owners(&latest, true).await?;
        match decide::attempt_to_delete(&latest, &states, has_dependents) {
            DependentVerdict::Keep => Ok(()),
            DependentVerdict::RemoveOwnerRefs(owners) => {
                if let Some(refs) = decide::without_owners(&latest, &owners)
                    && !set_owner_refs(&self.api(item.res, &ns), &latest, refs).await
                {
                    return Err(kube::Error::Service(
                        "ownerReferences patch conflicted".into(),
                    ));
                }
                Ok(())
            }
            DependentVerdict::Delete(policy) => self.delete(item.res, &latest, policy).await,
        }
    }

    async fn delete(
        &self,
        res: usize,
        meta: &ObjectMeta,
        policy: Propagation,
    ) -> Result<(), kube::Error> {
        let ns = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let dp = DeleteParams {
            propagation_policy: Some(match policy {
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
                Propagation::Orphan => PropagationPolicy::Orphan,
            }),
            preconditions: Some(Preconditions {
                uid: meta.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        tracing::debug!(object = %name, namespace = %ns, policy = policy.as_str(), "garbage collector deleting");
        match self.api(res, &ns).delete(&name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            // UID precondition failed: a namesake replaced it; nothing to do.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Owners being deleted with `foregroundDeletion` (wait for blocking dependents, then drop the
    /// finalizer) or with `orphan` (release every dependent, then drop the finalizer).
    async fn process_owner(&mut self, uid: &str) -> Result<(), kube::Error> {
        let Some(item) = self.items.get(uid).cloned() else {
            return Ok(());
        };
        let ns = item.meta().namespace.clone().unwrap_or_default();
        let name = item.meta().name.clone().unwrap_or_default();
        let dep_uids: Vec<String> = self
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        if decide::is_orphaning(item.meta()) {
            for d in &dep_uids {
                let Some(dep) = self.items.get(d).cloned() else {
                    continue;
                };
                let dns = dep.meta().namespace.clone().unwrap_or_default();
                let dname = dep.meta().name.clone().unwrap_or_default();
                let Some(latest) = self.live(dep.res, &dns, &dname).await? else {
                    continue;
                };
                if let Some(refs) = decide::without_owners(&latest, &[uid.to_string()])
                    && !set_owner_refs(&self.api(dep.res, &dns), &latest, refs).await
                {
                    return Err(kube::Error::Service("orphaning patch conflicted".into()));
                }
            }
            return self
                .remove_finalizer(item.res, &ns, &name, FINALIZER_ORPHAN_DEPENDENTS)
                .await;
        }
        if !decide::is_deleting_dependents(item.meta()) {
            return Ok(());
        }
        let deps: Vec<(String, Arc<Meta>)> = dep_uids
            .iter()
            .filter_map(|d| self.items.get(d).map(|i| (d.clone(), i.obj.clone())))
            .collect();
        let refs: Vec<(String, &ObjectMeta)> =
            deps.iter().map(|(u, m)| (u.clone(), &m.metadata)).collect();
        match decide::process_deleting_dependents(uid, &refs) {
            ForegroundVerdict::RemoveFinalizer => {
                self.remove_finalizer(item.res, &ns, &name, FINALIZER_FOREGROUND_DELETION)
                    .await
            }
            ForegroundVerdict::DeleteDependents(uids) => {
                for d in uids {
                    self.queue.add((ATTEMPT.into(), d));
                }
                Ok(())
            }
            ForegroundVerdict::Wait => Ok(()),
        }
    }

    /// Removes one finalizer with a JSON patch guarded by the object's UID and the finalizer list as
    /// read (a compare-and-swap on the field).
    async fn remove_finalizer(
        &self,
        res: usize,
        ns: &str,
        name: &str,
        finalizer: &str,
    ) -> Result<(), kube::Error> {
        let Some(latest) = self.live(res, ns, name).await? else {
            return Ok(());
        };
        let Some(fs) = latest.finalizers.clone() else {
            return Ok(());
        };
        if !fs.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let kept: Vec<String> = fs.into_iter().filter(|f| f != finalizer).collect();
        let mut ops = vec![
            json!({"op": "test", "path": "/metadata/uid", "value": latest.uid}),
            json!({"op": "test", "path": "/metadata/finalizers", "value": latest.finalizers}),
        ];
        ops.push(if kept.is_empty() {
            json!({"op": "remove", "path": "/metadata/finalizers"})
        } else {
            json!({"op": "replace", "path": "/metadata/finalizers", "value": kept})
        });
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(kube::Error::SerdeError)?;
        match self
            .api(res, ns)
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => {
                tracing::debug!(object = %name, error = %api_error_text(&e), "finalizer removal failed");
                Err(e)
            }
        }
    }
}
