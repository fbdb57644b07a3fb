//! The kubelet's volume manager, pure: a pod with claims waits (ContainerCreating, before its
//! sandbox) until every claim's volume is attached to this node (`status.volumesAttached`, written
//! by the attach/detach controller) and then mounted after the modelled mount latency; a wait of
//! `podAttachAndMountTimeout` (2m3s) without success records upstream's `FailedMount` and starts
//! again. The volumes of running pods are reported in `status.volumesInUse` until their
//! containers have stopped (unmount).
//!
//! The agent resolves each claim to the volume's unique name (`kubernetes.io/csi/<driver>^<handle>`)
//! through the API and hands it over with [`VolumeManager::set_resolved`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

/// `podAttachAndMountTimeout`.
pub const ATTACH_AND_MOUNT_TIMEOUT: Duration = Duration::from_secs(123);
/// MountDevice + SetUp of an attached volume.
pub const MOUNT_LATENCY: Duration = Duration::from_secs(1);
/// While a pod waits for an attach, the Node is read again this often.
pub const ATTACH_POLL: Duration = Duration::from_secs(1);

/// The volumes of a pod that come from claims: (pod volume name, claim name).
pub fn claim_volumes(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| (v.name.clone(), c.claim_name.clone()))
        })
        .collect()
}

/// `FailedMount` after the attach-and-mount timeout.
pub fn failed_mount_message(unmounted: &[String], unattached: &[String]) -> String {
    format!(
        "Unable to attach or mount volumes: unmounted volumes=[{}], unattached volumes=[{}], failed to process volumes=[]: context deadline exceeded",
        unmounted.join(" "),
        unattached.join(" ")
    )
}

/// A resolved pod volume: its name in the pod and the attachable volume's unique name (`None`
/// for a volume that needs no attach).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub name: String,
    pub unique: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Wait {
    since: Timestamp,
    mounted_at: Option<Timestamp>,
}

/// What the gate says about one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Volumes mounted (or none): the pod may start.
    Ready,
    /// Keep waiting; `Some(message)` is a FailedMount event to record now.
    Waiting(Option<String>),
}

#[derive(Debug, Default, Clone)]
pub struct VolumeManager {
    resolved: BTreeMap<String, Vec<Resolved>>,
    waits: BTreeMap<String, Wait>,
    /// Unique names in this node's `status.volumesAttached`, as last read.
    attached: BTreeSet<String>,
}

impl VolumeManager {
    pub fn set_attached(&mut self, attached: BTreeSet<String>) {
        self.attached = attached;
    }

    pub fn is_resolved(&self, uid: &str) -> bool {
        self.resolved.contains_key(uid)
    }

    pub fn set_resolved(&mut self, uid: &str, vols: Vec<Resolved>) {
        self.resolved.insert(uid.to_string(), vols);
    }

    pub fn forget(&mut self, uid: &str) {
        self.resolved.remove(uid);
        self.waits.remove(uid);
    }

    /// Whether any pod's gate is still closed (mount pending or attach awaited).
    pub fn any_waiting(&self) -> bool {
        !self.waits.is_empty()
    }

    /// Whether any pod still waits for an attach (the agent then polls the Node).
    pub fn waiting_for_attach(&self) -> bool {
        self.waits.values().any(|w| w.mounted_at.is_none())
    }

    /// The gate for pod `uid` at `now`.
    pub fn check(&mut self, uid: &str, pod: &Pod, now: Timestamp) -> Gate {
        let claims = claim_volumes(pod);
        if claims.is_empty() {
            return Gate::Ready;
        }
        let wait = self.waits.entry(uid.to_string()).or_insert(Wait {
            since: now,
            mounted_at: None,
        });
        if let Some(at) = wait.mounted_at {
            return if at <= now {
                Gate::Ready
            } else {
                Gate::Waiting(None)
            };
        }
        let mut unattached: Vec<String> = Vec::new();
        match self.resolved.get(uid) {
            None => unattached.extend(claims.iter().map(|(n, _)| n.clone())),
            Some(vols) => {
                for v in vols {
                    if let Some(u) = &v.unique
                        && !self.attached.contains(u)
                    {
                        unattached.push(v.name.clone());
                    }
                }
            }
        }
        if unattached.is_empty() {
            wait.mounted_at = Some(add(now, MOUNT_LATENCY));
            return if MOUNT_LATENCY.is_zero() {
                Gate::Ready
            } else {
                Gate::Waiting(None)
            };
        }
        if now >= add(wait.since, ATTACH_AND_MOUNT_TIMEOUT) {
            wait.since = now;
            let mut unmounted: Vec<String> = claims.iter().map(|(n, _)| n.clone()).collect();
            unmounted.sort();
            unattached.sort();
            return Gate::Waiting(Some(failed_mount_message(&unmounted, &unattached)));
        }
        Gate::Waiting(None)
    }

    /// The next instant a gate changes by itself (mount done, timeout, attach poll).
    pub fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        self.waits
            .values()
            .map(|w| match w.mounted_at {
                Some(at) => at,
                // The timeout is due at its own instant, whatever the poll's phase (other
                // wake-ups, such as the eviction manager's, move the poll's grid).
                None => add(now, ATTACH_POLL).min(add(w.since, ATTACH_AND_MOUNT_TIMEOUT)),
            })
            .filter(|t| *t > now)
            .min()
    }

    /// `status.volumesInUse`: the attachable volumes of `active` pods, sorted.
    pub fn in_use(&self, active: &[String]) -> Vec<String> {
        let set: BTreeSet<String> = active
            .iter()
            .filter_map(|uid| self.resolved.get(uid))
            .flatten()
            .filter_map(|v| v.unique.clone())
            .collect();
        set.into_iter().collect()
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    let span = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    t.checked_add(span).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "web-0", "uid": "u"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                {"name": "tmp", "emptyDir": {}}]}}))
        .unwrap()
    }

    #[test]
    fn waits_for_attach_then_mounts() {
        let mut vm = VolumeManager::default();
        let p = pod();
        // Unresolved claim: waiting.
        assert_eq!(vm.check("u", &p, at(0)), Gate::Waiting(None));
        vm.set_resolved(
            "u",
            vec![Resolved {
                name: "data".into(),
                unique: Some("kubernetes.io/csi/csi.klab.dev^h".into()),
            }],
        );
        assert_eq!(vm.check("u", &p, at(1)), Gate::Waiting(None));
        assert!(vm.waiting_for_attach());
        assert_eq!(
            vm.in_use(&["u".into()]),
            vec!["kubernetes.io/csi/csi.klab.dev^h"]
        );
        // The timeout records FailedMount and starts again.
        let msg = "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[]: context deadline exceeded";
        assert_eq!(vm.check("u", &p, at(123)), Gate::Waiting(Some(msg.into())));
        assert_eq!(vm.check("u", &p, at(200)), Gate::Waiting(None));
        // Attached: mounted one second later.
        vm.set_attached(BTreeSet::from([
            "kubernetes.io/csi/csi.klab.dev^h".to_string()
        ]));
        assert_eq!(vm.check("u", &p, at(201)), Gate::Waiting(None));
        assert_eq!(vm.next_due(at(201)), Some(at(202)));
        assert_eq!(vm.check("u", &p, at(202)), Gate::Ready);
        assert!(!vm.waiting_for_attach());
        // Stopped pods are not in use.
        assert!(vm.in_use(&[]).is_empty());
        vm.forget("u");
        assert!(!vm.is_resolved("u"));
    }

    #[test]
    fn pods_without_claims_pass() {
        let mut vm = VolumeManager::default();
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": "x"},
            "spec": {"containers": []}}))
        .unwrap();
        assert_eq!(vm.check("x", &p, at(0)), Gate::Ready);
        assert_eq!(vm.next_due(at(0)), None);
    }
}
