//! Pure decisions of the attach/detach controller (control-plane spec §8,
//! `pkg/controller/volume/attachdetach`): the desired state of the world from pods, the
//! VolumeAttachment name of a CSI attachment, the detach decision for an attached volume no
//! longer desired (healthy or not, timeout expired or not, out-of-service taint, volumes in use,
//! `--disable-force-detach-on-timeout`) and the Multi-Attach refusal with its event text.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use klab_api::names;

/// Flags and constants of the controller.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachDetachConfig {
    /// `maxWaitForUnmountDuration` (6 min).
    pub max_wait_for_unmount: Duration,
    /// The reconciler loop period (100 ms): a timed-out force detach happens on the first loop
    /// after the wait has strictly elapsed.
    pub reconciler_loop_period: Duration,
    /// `--disable-force-detach-on-timeout` (default false, v1.30+).
    pub disable_force_detach_on_timeout: bool,
}

impl Default for AttachDetachConfig {
    fn default() -> Self {
        AttachDetachConfig {
            max_wait_for_unmount: Duration::from_secs(360),
            reconciler_loop_period: Duration::from_millis(100),
            disable_force_detach_on_timeout: false,
        }
    }
}

/// `IsPodTerminated`: phase Failed/Succeeded, or deleting with no container running according
/// to its status. A Terminating pod on a dead node keeps its stale running status, so its
/// volumes stay desired.
pub fn pod_terminated(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    if phase == "Failed" || phase == "Succeeded" {
        return true;
    }
    if pod.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let running = status
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some()))
        });
    !running
}

/// The unique name of a CSI volume, as in `status.volumesAttached` / `status.volumesInUse`.
pub fn unique_volume_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

/// `csi-` + hex(SHA-256(volumeHandle + driverName + nodeName)) (`getAttachmentName`).
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = klab_api::sha256::sha256(format!("{handle}{driver}{node}").as_bytes());
    format!("csi-{}", klab_api::sha256::hex(&digest))
}

/// One volume desired on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub volume: String,
    pub node: String,
    pub driver: String,
    pub handle: String,
    /// Not ReadWriteMany/ReadOnlyMany: at most one node may have it attached.
    pub exclusive: bool,
    /// The pods (namespace, name) that want it there.
    pub pods: BTreeSet<(String, String)>,
}

/// The CSI source of a volume: (driver, handle).
pub fn csi_source(pv: &PersistentVolume) -> Option<(String, String)> {
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    Some((csi.driver.clone(), csi.volume_handle.clone()))
}

/// Whether a volume may be attached to several nodes at once.
pub fn multi_node(pv: &PersistentVolume) -> bool {
    pv.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .is_some_and(|m| {
            m.iter()
                .any(|m| m == "ReadWriteMany" || m == "ReadOnlyMany")
        })
}

/// Whether a pod uses a claim at all: only such pods can be in the desired state of the world
/// (the shell indexes them and ignores every other pod's changes).
pub fn uses_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| v.iter().any(|v| v.persistent_volume_claim.is_some()))
}

/// The desired state of the world: for every scheduled, non-terminated pod, each of its claims
/// bound to a CSI volume whose driver requires attach, on the pod's node. Claims not bound yet
/// are skipped (the pod waits in ContainerCreating).
pub fn desired_state<C, V>(
    pods: &[&Pod],
    claims: &BTreeMap<(String, String), C>,
    volumes: &BTreeMap<String, V>,
    attach_required: &dyn Fn(&str) -> bool,
) -> BTreeMap<(String, String), Desired>
where
    C: Borrow<PersistentVolumeClaim>,
    V: Borrow<PersistentVolume>,
{
    let mut out: BTreeMap<(String, String), Desired> = BTreeMap::new();
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        if node.is_empty() || pod_terminated(pod) {
            continue;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        for v in pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
        {
            let Some(src) = v.persistent_volume_claim.as_ref() else {
                continue;
            };
            let Some(claim) = claims.get(&(ns.clone(), src.claim_name.clone())) else {
                continue;
            };
            let claim: &PersistentVolumeClaim = claim.borrow();
            let Some(pv_name) = claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            let Some(pv) = volumes.get(&pv_name) else {
                continue;
            };
            let pv: &PersistentVolume = pv.borrow();
            let Some((driver, handle)) = csi_source(pv) else {
                continue;
            };
            if !attach_required(&driver) {
                continue;
            }
            out.entry((pv_name.clone(), node.clone()))
                .or_insert_with(|| Desired {
                    volume: pv_name.clone(),
                    node: node.clone(),
                    driver,
                    handle,
                    exclusive: !multi_node(pv),
                    pods: BTreeSet::new(),
                })
                .pods
                .insert((ns.clone(), name.clone()));
        }
    }
    out
}

/// Whether a node is healthy for the detach decision: its Ready condition is True (a missing
/// node is not).
pub fn node_ready(node: Option<&Node>) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// Whether a node carries the out-of-service taint (any value, any effect).
pub fn out_of_service(node: Option<&Node>) -> bool {
    node.and_then(|n| n.spec.as_ref())
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == names::TAINT_OUT_OF_SERVICE))
}

/// Whether the node reports the volume in `status.volumesInUse` (`MountedByNode`).
pub fn mounted_by_node(node: Option<&Node>, unique_name: &str) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.volumes_in_use.as_ref())
        .is_some_and(|v| v.iter().any(|u| u == unique_name))
}

/// What the reconciler sees of one attached volume no longer desired on its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetachInput {
    /// Node Ready == True (a deleted node is not healthy).
    pub healthy: bool,
    /// The node has the out-of-service taint.
    pub out_of_service: bool,
    /// The node still lists the volume in `status.volumesInUse`.
    pub mounted_by_node: bool,
    pub disable_force_detach_on_timeout: bool,
    /// Time since the detach was first requested.
    pub elapsed: Duration,
    pub max_wait: Duration,
}

/// Why a detach skips the safe-to-detach check (the force-detach metric's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForceReason {
    Timeout,
    OutOfService,
}

impl ForceReason {
    pub fn label(self) -> &'static str {
        match self {
            ForceReason::Timeout => "timeout",
            ForceReason::OutOfService => "out-of-service",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetachDecision {
    /// Not now: the node may still be using it.
    Wait,
    /// Detach: remove from `volumesAttached`, delete the VolumeAttachment. `force` is set when
    /// the safe-to-detach check is skipped.
    Detach { force: Option<ForceReason> },
}

/// Spec §8 steps 2–7 for one attached (volume, node) pair no longer in the desired state.
pub fn decide_detach(i: DetachInput) -> DetachDecision {
    let expired = i.elapsed > i.max_wait;
    let force_detach_timeout = expired && !i.disable_force_detach_on_timeout;
    // Healthy nodes are never force-detached on timeout (v1.25+).
    let force_detach = !i.healthy && force_detach_timeout;
    if i.mounted_by_node && !force_detach && !i.out_of_service {
        return DetachDecision::Wait;
    }
    // verifySafeToDetach = !(forceDetachTimeout || oos): the check is skipped (and counted
    // under that reason) whether or not the node still mounts the volume.
    let force = if i.out_of_service {
        Some(ForceReason::OutOfService)
    } else if force_detach_timeout {
        Some(ForceReason::Timeout)
    } else {
        None
    };
    DetachDecision::Detach { force }
}

/// `reportMultiAttachError`: the FailedAttachVolume message for a volume exclusively attached
/// elsewhere. `others` are the pods that want it on other nodes (the desired state): those in
/// the same namespace are named, the rest counted.
pub fn multi_attach_message(volume: &str, namespace: &str, others: &[(String, String)]) -> String {
    let mut same: Vec<&str> = others
        .iter()
        .filter(|(ns, _)| ns == namespace)
        .map(|(_, n)| n.as_str())
        .collect();
    same.sort_unstable();
    let other_ns = others.iter().filter(|(ns, _)| ns != namespace).count();
    let detail = match (same.is_empty(), other_ns) {
        (true, 0) => {
            "Volume is already exclusively attached to one node and can't be attached to another"
                .to_string()
        }
        (false, 0) => format!("Volume is already used by pod(s) {}", same.join(", ")),
        (true, n) => format!("Volume is already used by {n} pod(s) in different namespaces"),
        (false, n) => format!(
            "Volume is already used by pod(s) {} and {n} pod(s) in different namespaces",
            same.join(", ")
        ),
    };
    format!("Multi-Attach error for volume \"{volume}\" {detail}")
}

/// `AttachVolume.Attach succeeded for volume "pvc-…"` (SuccessfulAttachVolume).
pub fn attach_succeeded_message(volume: &str) -> String {
    format!("AttachVolume.Attach succeeded for volume \"{volume}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MIN: u64 = 60;

    fn input(
        healthy: bool,
        oos: bool,
        in_use: bool,
        disable: bool,
        elapsed: Duration,
    ) -> DetachInput {
        DetachInput {
            healthy,
            out_of_service: oos,
            mounted_by_node: in_use,
            disable_force_detach_on_timeout: disable,
            elapsed,
            max_wait: Duration::from_secs(6 * MIN),
        }
    }

    /// Every row of spec §8 / vector CP-56, plus the rows between them.
    #[test]
    fn detach_decision_table() {
        use DetachDecision::*;
        use ForceReason::*;
        let s = Duration::from_secs;
        let just_over = Duration::from_millis(6 * MIN * 1000 + 100);
        let rows: Vec<(&str, DetachInput, DetachDecision)> = vec![
            (
                "healthy, in use, 10 min: never force-detach a healthy node",
                input(true, false, true, false, s(10 * MIN)),
                Wait,
            ),
            (
                "unhealthy, in use, 5 min: wait",
                input(false, false, true, false, s(5 * MIN)),
                Wait,
            ),
            (
                "unhealthy, in use, exactly 6 min: not yet (strictly greater)",
                input(false, false, true, false, s(6 * MIN)),
                Wait,
            ),
            (
                "unhealthy, in use, 6 min + 0.1 s: force detach (timeout)",
                input(false, false, true, false, just_over),
                Detach {
                    force: Some(Timeout),
                },
            ),
            (
                "unhealthy, in use, force detach on timeout disabled, 1 h: wait forever",
                input(false, false, true, true, s(60 * MIN)),
                Wait,
            ),
            (
                "unhealthy, out-of-service, in use, 0 s: detach at once",
                input(false, true, true, false, s(0)),
                Detach {
                    force: Some(OutOfService),
                },
            ),
            (
                "unhealthy, out-of-service, in use, disabled timeout: still at once",
                input(false, true, true, true, s(0)),
                Detach {
                    force: Some(OutOfService),
                },
            ),
            (
                "healthy node with the taint, in use: out-of-service wins",
                input(true, true, true, false, s(0)),
                Detach {
                    force: Some(OutOfService),
                },
            ),
            (
                "healthy, not in use: normal detach",
                input(true, false, false, false, s(0)),
                Detach { force: None },
            ),
            (
                "unhealthy, not in use, 0 s: normal detach",
                input(false, false, false, false, s(0)),
                Detach { force: None },
            ),
            (
                "unhealthy, not in use, disabled: normal detach",
                input(false, false, false, true, s(0)),
                Detach { force: None },
            ),
            (
                "healthy, in use, disabled, 1 h: wait",
                input(true, false, true, true, s(60 * MIN)),
                Wait,
            ),
            (
                "missing node (unhealthy), in use, expired: force detach",
                input(false, false, true, false, s(7 * MIN)),
                Detach {
                    force: Some(Timeout),
                },
            ),
        ];
        for (what, i, want) in rows {
            assert_eq!(decide_detach(i), want, "{what}");
        }
    }

    fn pod(v: serde_json::Value) -> Pod {
        let mut base = json!({"metadata": {"name": "web-0", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]},
            "status": {"phase": "Running",
                       "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true,
                           "restartCount": 0, "state": {"running": {}}}]}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn terminated_pods() {
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
        let cases = [
            ("running", pod(json!({})), false),
            (
                "terminating with stale running status (dead node)",
                pod(deleting.clone()),
                false,
            ),
            (
                "terminating, containers stopped",
                pod(
                    json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                    "status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                        "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}}),
                ),
                true,
            ),
            ("failed", pod(json!({"status": {"phase": "Failed"}})), true),
            (
                "succeeded",
                pod(json!({"status": {"phase": "Succeeded"}})),
                true,
            ),
        ];
        for (what, p, want) in cases {
            assert_eq!(pod_terminated(&p), want, "{what}");
        }
    }

    #[test]
    fn desired_state_from_pods() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-web-0", "namespace": "default"},
            "spec": {"volumeName": "pvc-1"}}))
        .unwrap();
        let unbound: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-web-1", "namespace": "default"}, "spec": {}}))
        .unwrap();
        let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pvc-1"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": "csi.klab.dev", "volumeHandle": "h1"}}}))
        .unwrap();
        let claims = BTreeMap::from([
            (("default".into(), "data-web-0".into()), claim),
            (("default".into(), "data-web-1".into()), unbound),
        ]);
        let volumes = BTreeMap::from([("pvc-1".to_string(), pv)]);
        let p0 = pod(json!({}));
        let dead = pod(
            json!({"metadata": {"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n2"}}),
        );
        let failed = pod(
            json!({"metadata": {"name": "gone"}, "spec": {"nodeName": "n3"},
            "status": {"phase": "Failed"}}),
        );
        let pending = pod(json!({"metadata": {"name": "web-1"},
            "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}]}}));
        let unscheduled = pod(json!({"metadata": {"name": "u"}, "spec": {"nodeName": null}}));
        let plain = pod(json!({"metadata": {"name": "plain"}, "spec": {"volumes": null}}));
        let pods = [&p0, &dead, &failed, &pending, &unscheduled, &plain];
        let all = |_: &str| true;
        let d = desired_state(&pods, &claims, &volumes, &all);
        let keys: Vec<_> = d.keys().cloned().collect();
        assert_eq!(
            keys,
            vec![
                ("pvc-1".to_string(), "n1".to_string()),
                ("pvc-1".to_string(), "n2".to_string())
            ]
        );
        let n1 = &d[&("pvc-1".to_string(), "n1".to_string())];
        assert!(n1.exclusive);
        assert_eq!(n1.handle, "h1");
        assert_eq!(
            n1.pods,
            BTreeSet::from([("default".to_string(), "web-0".to_string())])
        );
        // A driver that needs no attach has no desired attachments.
        let none = |_: &str| false;
        assert!(desired_state(&pods, &claims, &volumes, &none).is_empty());
        // Only pods with a claim can be desired: the shell ignores the others' changes.
        assert!(uses_claims(&p0) && uses_claims(&pending) && uses_claims(&unscheduled));
        assert!(!uses_claims(&plain));
        let with_claims: Vec<&Pod> = pods.iter().copied().filter(|p| uses_claims(p)).collect();
        assert_eq!(desired_state(&with_claims, &claims, &volumes, &all), d);
    }

    #[test]
    fn attachment_names_and_messages() {
        let name = attachment_name("h1", "csi.klab.dev", "n1");
        assert!(name.starts_with("csi-"));
        assert_eq!(name.len(), 4 + 64);
        assert_ne!(name, attachment_name("h1", "csi.klab.dev", "n2"));
        assert_eq!(
            unique_volume_name("csi.klab.dev", "h1"),
            "kubernetes.io/csi/csi.klab.dev^h1"
        );
        // Upstream's Test_ReportMultiAttachError rows.
        let o = |ns: &str, n: &str| (ns.to_string(), n.to_string());
        assert_eq!(
            multi_attach_message("volume-name", "ns1", &[]),
            "Multi-Attach error for volume \"volume-name\" Volume is already exclusively attached to one node and can't be attached to another"
        );
        assert_eq!(
            multi_attach_message("volume-name", "ns1", &[o("ns1", "pod2")]),
            "Multi-Attach error for volume \"volume-name\" Volume is already used by pod(s) pod2"
        );
        assert_eq!(
            multi_attach_message("volume-name", "ns1", &[o("ns2", "pod2")]),
            "Multi-Attach error for volume \"volume-name\" Volume is already used by 1 pod(s) in different namespaces"
        );
        assert_eq!(
            multi_attach_message("volume-name", "ns1", &[o("ns2", "pod2"), o("ns1", "pod3")]),
            "Multi-Attach error for volume \"volume-name\" Volume is already used by pod(s) pod3 and 1 pod(s) in different namespaces"
        );
    }
}
