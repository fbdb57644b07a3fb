//! Pure garbage-collector decisions, after upstream `pkg/controller/garbagecollector`
//! (`attemptToDeleteItem`, `classifyReferences`, `processDeletingDependentsItem`,
//! `orphanDependents`): what to do with a dependent given the state of its owners, and with an
//! owner that is being deleted with the `foregroundDeletion` or `orphan` finalizer.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use klab_api::names::{FINALIZER_FOREGROUND_DELETION, FINALIZER_ORPHAN_DEPENDENTS};

/// How a dependent's owner reference resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner exists (with this UID) and is not deleting its dependents in the foreground.
    Solid,
    /// No object with this name and UID exists (deleted, or replaced by a namesake).
    Dangling,
    /// The owner exists, is being deleted and has the `foregroundDeletion` finalizer.
    WaitingForDependentsDeletion,
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }
}

/// What to do with a dependent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DependentVerdict {
    /// Keep it (no owners, a solid owner only, or already on its way out).
    Keep,
    /// It has a solid owner: drop the references to these dangling / waiting owners (by UID).
    RemoveOwnerRefs(Vec<String>),
    /// Garbage: delete it with this propagation (UID precondition).
    Delete(Propagation),
}

pub fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|fs| fs.iter().any(|x| x == f))
}

/// Being deleted with `foregroundDeletion` (upstream `isDeletingDependents`).
pub fn is_deleting_dependents(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, FINALIZER_FOREGROUND_DELETION)
}

/// Being deleted with `orphan`: dependents must be released first.
pub fn is_orphaning(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, FINALIZER_ORPHAN_DEPENDENTS)
}

/// Upstream `classifyReferences` for one reference, given the live owner (None = not found).
pub fn classify(r: &OwnerReference, owner: Option<&ObjectMeta>) -> OwnerState {
    match owner {
        Some(o) if o.uid.as_deref() == Some(r.uid.as_str()) => {
            if is_deleting_dependents(o) {
                OwnerState::WaitingForDependentsDeletion
            } else {
                OwnerState::Solid
            }
        }
        _ => OwnerState::Dangling,
    }
}

/// Upstream `attemptToDeleteItem` for a dependent that is not deleting its own dependents.
/// `owners`: (owner UID, state) per owner reference; `has_dependents`: the item owns objects.
pub fn attempt_to_delete(
    item: &ObjectMeta,
    owners: &[(String, OwnerState)],
    has_dependents: bool,
) -> DependentVerdict {
    // "being deleted" is a one-way trip: wait for the final deletion, then handle its dependents.
    if item.deletion_timestamp.is_some() && !is_deleting_dependents(item) {
        return DependentVerdict::Keep;
    }
    if owners.is_empty() {
        return DependentVerdict::Keep;
    }
    let solid = owners
        .iter()
        .filter(|(_, s)| *s == OwnerState::Solid)
        .count();
    let not_solid: Vec<String> = owners
        .iter()
        .filter(|(_, s)| *s != OwnerState::Solid)
        .map(|(u, _)| u.clone())
        .collect();
    let waiting = owners
        .iter()
        .any(|(_, s)| *s == OwnerState::WaitingForDependentsDeletion);
    if solid > 0 {
        return if not_solid.is_empty() {
            DependentVerdict::Keep
        } else {
            DependentVerdict::RemoveOwnerRefs(not_solid)
        };
    }
    if waiting && has_dependents {
        // the owner waits for us and we have dependents of our own: delete in the foreground so
        // that the owner's wait covers our dependents too
        return DependentVerdict::Delete(Propagation::Foreground);
    }
    let policy = if has_finalizer(item, FINALIZER_ORPHAN_DEPENDENTS) {
        Propagation::Orphan
    } else if has_finalizer(item, FINALIZER_FOREGROUND_DELETION) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    DependentVerdict::Delete(policy)
}

/// What to do with an owner being deleted in the foreground.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForegroundVerdict {
    /// No blocking dependent left: remove `foregroundDeletion` (the API server then deletes it).
    RemoveFinalizer,
    /// Still blocked; the listed dependents (UIDs) are not yet being deleted: delete them.
    DeleteDependents(Vec<String>),
    /// Still blocked by dependents already on their way out: wait.
    Wait,
}

/// Upstream `processDeletingDependentsItem`. `dependents`: (UID, metadata) of objects whose
/// ownerReferences name the owner's UID.
pub fn process_deleting_dependents(
    owner_uid: &str,
    dependents: &[(String, &ObjectMeta)],
) -> ForegroundVerdict {
    let blocking: Vec<&(String, &ObjectMeta)> = dependents
        .iter()
        .filter(|(_, m)| {
            m.owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == owner_uid && r.block_owner_deletion == Some(true))
        })
        .collect();
    if blocking.is_empty() {
        return ForegroundVerdict::RemoveFinalizer;
    }
    let to_delete: Vec<String> = blocking
        .iter()
        .filter(|(_, m)| m.deletion_timestamp.is_none())
        .map(|(u, _)| u.clone())
        .collect();
    if to_delete.is_empty() {
        ForegroundVerdict::Wait
    } else {
        ForegroundVerdict::DeleteDependents(to_delete)
    }
}

/// The owner references left on a dependent after removing those to `owner_uids`
/// (`orphanDependents` and `RemoveOwnerRefs`). `None` when nothing changes.
pub fn without_owners(meta: &ObjectMeta, owner_uids: &[String]) -> Option<Vec<OwnerReference>> {
    let refs = meta.owner_references.clone().unwrap_or_default();
    let kept: Vec<OwnerReference> = refs
        .iter()
        .filter(|r| !owner_uids.contains(&r.uid))
        .cloned()
        .collect();
    (kept.len() != refs.len()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn r(uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: format!("rs-{uid}"),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        }
    }

    fn meta(
        uid: &str,
        owners: Vec<OwnerReference>,
        finalizers: &[&str],
        deleting: bool,
    ) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            owner_references: Some(owners),
            finalizers: Some(finalizers.iter().map(|s| s.to_string()).collect()),
            deletion_timestamp: deleting.then(|| Time(jiff::Timestamp::from_second(1).unwrap())),
            ..Default::default()
        }
    }

    #[test]
    fn classify_table() {
        let rf = r("o1", true);
        assert_eq!(classify(&rf, None), OwnerState::Dangling);
        assert_eq!(
            classify(&rf, Some(&meta("other", vec![], &[], false))),
            OwnerState::Dangling,
            "namesake with another UID"
        );
        assert_eq!(
            classify(&rf, Some(&meta("o1", vec![], &[], false))),
            OwnerState::Solid
        );
        assert_eq!(
            classify(&rf, Some(&meta("o1", vec![], &[], true))),
            OwnerState::Solid,
            "background delete in progress"
        );
        assert_eq!(
            classify(
                &rf,
                Some(&meta("o1", vec![], &[FINALIZER_FOREGROUND_DELETION], true))
            ),
            OwnerState::WaitingForDependentsDeletion
        );
        assert_eq!(
            classify(
                &rf,
                Some(&meta("o1", vec![], &[FINALIZER_ORPHAN_DEPENDENTS], true))
            ),
            OwnerState::Solid
        );
    }

    #[test]
    fn attempt_to_delete_table() {
        use OwnerState::*;
        let s = |u: &str, st| (u.to_string(), st);
        let plain = meta("p", vec![r("o1", true)], &[], false);
        let orphaning = meta(
            "p",
            vec![r("o1", true)],
            &[FINALIZER_ORPHAN_DEPENDENTS],
            false,
        );
        let terminating = meta("p", vec![r("o1", true)], &[], true);
        type Case<'a> = (
            &'a str,
            &'a ObjectMeta,
            Vec<(String, OwnerState)>,
            bool,
            DependentVerdict,
        );
        let cases: Vec<Case> = vec![
            ("no owners", &plain, vec![], false, DependentVerdict::Keep),
            (
                "solid owner",
                &plain,
                vec![s("o1", Solid)],
                false,
                DependentVerdict::Keep,
            ),
            (
                "owner gone -> background",
                &plain,
                vec![s("o1", Dangling)],
                false,
                DependentVerdict::Delete(Propagation::Background),
            ),
            (
                "solid + dangling -> drop ref",
                &plain,
                vec![s("o1", Solid), s("o2", Dangling)],
                false,
                DependentVerdict::RemoveOwnerRefs(vec!["o2".into()]),
            ),
            (
                "waiting owner -> delete",
                &plain,
                vec![s("o1", WaitingForDependentsDeletion)],
                false,
                DependentVerdict::Delete(Propagation::Background),
            ),
            (
                "waiting owner, has dependents -> foreground",
                &plain,
                vec![s("o1", WaitingForDependentsDeletion)],
                true,
                DependentVerdict::Delete(Propagation::Foreground),
            ),
            (
                "own orphan finalizer honoured",
                &orphaning,
                vec![s("o1", Dangling)],
                false,
                DependentVerdict::Delete(Propagation::Orphan),
            ),
            (
                "already terminating",
                &terminating,
                vec![s("o1", Dangling)],
                false,
                DependentVerdict::Keep,
            ),
        ];
        for (name, m, owners, deps, want) in cases {
            assert_eq!(attempt_to_delete(m, &owners, deps), want, "{name}");
        }
    }

    #[test]
    fn foreground_owner_table() {
        let blocking = meta("d1", vec![r("o", true)], &[], false);
        let blocking_deleting = meta("d2", vec![r("o", true)], &[], true);
        let non_blocking = meta("d3", vec![r("o", false)], &[], false);
        assert_eq!(
            process_deleting_dependents("o", &[]),
            ForegroundVerdict::RemoveFinalizer
        );
        assert_eq!(
            process_deleting_dependents("o", &[("d3".into(), &non_blocking)]),
            ForegroundVerdict::RemoveFinalizer
        );
        assert_eq!(
            process_deleting_dependents(
                "o",
                &[("d1".into(), &blocking), ("d2".into(), &blocking_deleting)]
            ),
            ForegroundVerdict::DeleteDependents(vec!["d1".into()])
        );
        assert_eq!(
            process_deleting_dependents("o", &[("d2".into(), &blocking_deleting)]),
            ForegroundVerdict::Wait
        );
    }

    #[test]
    fn orphaning_removes_only_that_owner() {
        let m = meta("d", vec![r("o1", true), r("o2", false)], &[], false);
        let kept = without_owners(&m, &["o1".into()]).unwrap();
        assert_eq!(
            kept.iter().map(|r| r.uid.as_str()).collect::<Vec<_>>(),
            vec!["o2"]
        );
        assert_eq!(without_owners(&m, &["zz".into()]), None);
        assert!(is_orphaning(&meta(
            "o",
            vec![],
            &[FINALIZER_ORPHAN_DEPENDENTS],
            true
        )));
        assert!(!is_orphaning(&meta(
            "o",
            vec![],
            &[FINALIZER_ORPHAN_DEPENDENTS],
            false
        )));
    }
}
