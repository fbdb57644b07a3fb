//! `kubectl drain` as a scenario step, the way kubectl does it (control-plane spec §10.2,
//! `staging/src/k8s.io/kubectl/pkg/drain`): cordon, list the node's pods, run kubectl's filters
//! (pure, table-tested here), evict each pod — retrying every 5 s on a 429 from a disruption
//! budget — and wait for each to go, polling every second, until `node/<n> drained` or the
//! global timeout. kubectl's output lines go into the trace (component `kubectl`), so a scenario
//! shows when a budget blocked the drain and when it let go.
//!
//! The drain runs beside the scenario's timeline, as kubectl would in another terminal.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

/// kubectl drain's flags that change what it does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DrainOptions {
    pub ignore_daemonsets: bool,
    pub delete_emptydir_data: bool,
    pub force: bool,
    /// `--grace-period` (unset: the pod's own).
    pub grace_period: Option<i64>,
    /// `--timeout` (unset: wait for ever).
    pub timeout: Option<Duration>,
    /// `--skip-wait-for-delete-timeout` seconds (0: never skip).
    pub skip_wait_for_delete_timeout: u64,
    /// `--disable-eviction`: delete instead of evict (budgets do not apply).
    pub disable_eviction: bool,
    /// `--pod-selector`.
    pub pod_selector: Option<String>,
}

impl DrainOptions {
    /// The flags as kubectl's command line shows them.
    pub fn flags(&self) -> String {
        let mut s = String::new();
        if self.ignore_daemonsets {
            s.push_str(" --ignore-daemonsets");
        }
        if self.delete_emptydir_data {
            s.push_str(" --delete-emptydir-data");
        }
        if self.force {
            s.push_str(" --force");
        }
        if let Some(g) = self.grace_period {
            s.push_str(&format!(" --grace-period={g}"));
        }
        if let Some(t) = self.timeout {
            s.push_str(&format!(" --timeout={}s", t.as_secs()));
        }
        if self.skip_wait_for_delete_timeout > 0 {
            s.push_str(&format!(
                " --skip-wait-for-delete-timeout={}",
                self.skip_wait_for_delete_timeout
            ));
        }
        if self.disable_eviction {
            s.push_str(" --disable-eviction");
        }
        if let Some(p) = &self.pod_selector {
            s.push_str(&format!(" --pod-selector={p}"));
        }
        s
    }
}

const DAEMONSET_FATAL: &str = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)";
const DAEMONSET_WARNING: &str = "ignoring DaemonSet-managed Pods";
const LOCAL_STORAGE_FATAL: &str =
    "Pods with local storage (use --delete-emptydir-data to override)";
const LOCAL_STORAGE_WARNING: &str = "deleting Pods with local storage";
const UNMANAGED_FATAL: &str =
    "cannot delete Pods that declare no controller (use --force to override)";
const UNMANAGED_WARNING: &str = "deleting Pods that declare no controller";

/// kubectl's `PodDeleteStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Okay,
    Skip,
    /// (delete?, message)
    Warning(bool, String),
    Error(String),
}

impl Status {
    fn delete(&self) -> bool {
        matches!(self, Status::Okay | Status::Warning(true, _))
    }
}

fn finished(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn controller_kind_name(pod: &Value) -> Option<(&str, &str)> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            (
                r.get("kind").and_then(Value::as_str).unwrap_or(""),
                r.get("name").and_then(Value::as_str).unwrap_or(""),
            )
        })
}

/// Whether a deleting pod's deletion is older than `--skip-wait-for-delete-timeout`.
pub fn should_skip(pod: &Value, skip_secs: u64, now: Timestamp) -> bool {
    if skip_secs == 0 {
        return false;
    }
    let Some(t) = pod
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
    else {
        return false;
    };
    // kubectl truncates the age to whole seconds and compares strictly.
    let age = now.duration_since(t).as_secs();
    age > i64::try_from(skip_secs).unwrap_or(i64::MAX)
}

/// kubectl's filters in their order, stopping at the first that keeps the pod: skip-deleted,
/// DaemonSet, mirror pod, local storage, unreplicated. `ds_exists(namespace, name)` says whether
/// the owning DaemonSet exists (kubectl GETs it).
pub fn filter(
    pod: &Value,
    opts: &DrainOptions,
    now: Timestamp,
    ds_exists: &dyn Fn(&str, &str) -> bool,
) -> Status {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let filters: [&dyn Fn() -> Status; 5] = [
        &|| {
            if should_skip(pod, opts.skip_wait_for_delete_timeout, now) {
                Status::Skip
            } else {
                Status::Okay
            }
        },
        &|| match controller_kind_name(pod) {
            Some(("DaemonSet", name)) if !finished(pod) => {
                if !ds_exists(ns, name) {
                    let err = format!("daemonsets.apps {name:?} not found");
                    if opts.force {
                        Status::Warning(true, err)
                    } else {
                        Status::Error(err)
                    }
                } else if !opts.ignore_daemonsets {
                    Status::Error(DAEMONSET_FATAL.into())
                } else {
                    Status::Warning(false, DAEMONSET_WARNING.into())
                }
            }
            _ => Status::Okay,
        },
        &|| {
            if pod
                .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
                .is_some()
            {
                Status::Skip
            } else {
                Status::Okay
            }
        },
        &|| {
            let local = pod
                .pointer("/spec/volumes")
                .and_then(Value::as_array)
                .is_some_and(|vs| vs.iter().any(|v| v.get("emptyDir").is_some()));
            if !local || finished(pod) {
                Status::Okay
            } else if !opts.delete_emptydir_data {
                Status::Error(LOCAL_STORAGE_FATAL.into())
            } else {
                Status::Warning(true, LOCAL_STORAGE_WARNING.into())
            }
        },
        &|| {
            if finished(pod) || controller_kind_name(pod).is_some() {
                Status::Okay
            } else if opts.force {
                Status::Warning(true, UNMANAGED_WARNING.into())
            } else {
                Status::Error(UNMANAGED_FATAL.into())
            }
        },
    ];
    let mut status = Status::Okay;
    for f in filters {
        status = f();
        if !status.delete() {
            break;
        }
    }
    status
}

fn pod_name(p: &Value) -> String {
    format!(
        "{}/{}",
        p.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        p.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    )
}

/// What kubectl makes of the filtered pods: the pods to evict, the `Warning: …` line, and the
/// errors that stop the drain (`cannot delete …: ns/p, …`), messages in sorted order (kubectl's
/// map order is random).
pub fn plan(pods: &[(Value, Status)]) -> (Vec<Value>, Option<String>, Vec<String>) {
    let mut warnings: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut errors: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut delete = Vec::new();
    for (p, s) in pods {
        match s {
            Status::Warning(_, m) => warnings.entry(m).or_default().push(pod_name(p)),
            Status::Error(m) => errors.entry(m).or_default().push(pod_name(p)),
            _ => {}
        }
        if s.delete() {
            delete.push(p.clone());
        }
    }
    let warning = (!warnings.is_empty()).then(|| {
        warnings
            .iter()
            .map(|(m, ps)| format!("{m}: {}", ps.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    });
    let errors = errors
        .iter()
        .map(|(m, ps)| {
            if m.to_lowercase().starts_with("cannot delete") {
                format!("{m}: {}", ps.join(", "))
            } else {
                format!("cannot delete {m}: {}", ps.join(", "))
            }
        })
        .collect();
    (delete, warning, errors)
}

/// The Eviction body kubectl posts (policy/v1), with `--grace-period` when set.
pub fn eviction_body(namespace: &str, name: &str, grace: Option<i64>) -> Value {
    let mut b = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace}});
    if let Some(g) = grace.filter(|g| *g >= 0) {
        b["deleteOptions"] = json!({"gracePeriodSeconds": g});
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).unwrap()
    }

    fn pod(name: &str, owner: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {}, "status": {"phase": "Running"}});
        if let Some(kind) = owner {
            p["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": "owner", "controller": true}]);
        }
        p
    }

    #[test]
    fn filters_follow_kubectl() {
        let o = DrainOptions::default();
        let exists = |_: &str, _: &str| true;
        let gone = |_: &str, _: &str| false;
        let f = |p: &Value, o: &DrainOptions| filter(p, o, ts(100), &exists);
        assert_eq!(f(&pod("rs", Some("ReplicaSet")), &o), Status::Okay);
        // DaemonSet pods: an error unless ignored, then kept with a warning.
        let ds = pod("ds", Some("DaemonSet"));
        assert_eq!(f(&ds, &o), Status::Error(DAEMONSET_FATAL.into()));
        let ignore = DrainOptions {
            ignore_daemonsets: true,
            ..Default::default()
        };
        assert_eq!(
            f(&ds, &ignore),
            Status::Warning(false, DAEMONSET_WARNING.into())
        );
        // An orphaned DaemonSet pod is an error, and goes with --force (the warning is lost to
        // the later filters, as in kubectl).
        assert_eq!(
            filter(&ds, &o, ts(100), &gone),
            Status::Error("daemonsets.apps \"owner\" not found".into())
        );
        let force = DrainOptions {
            force: true,
            ..Default::default()
        };
        assert_eq!(filter(&ds, &force, ts(100), &gone), Status::Okay);
        // Mirror pods are skipped silently.
        let mut mirror = pod("static-n1", Some("Node"));
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        assert_eq!(f(&mirror, &o), Status::Skip);
        // emptyDir: refused unless --delete-emptydir-data; its warning is then lost to the
        // next filter, as in kubectl.
        let mut local = pod("cache", Some("ReplicaSet"));
        local["spec"]["volumes"] = json!([{"name": "tmp", "emptyDir": {}}]);
        assert_eq!(f(&local, &o), Status::Error(LOCAL_STORAGE_FATAL.into()));
        let del = DrainOptions {
            delete_emptydir_data: true,
            ..Default::default()
        };
        assert_eq!(f(&local, &del), Status::Okay);
        // Bare pods: refused unless --force.
        let bare = pod("bare", None);
        assert_eq!(f(&bare, &o), Status::Error(UNMANAGED_FATAL.into()));
        assert_eq!(
            f(&bare, &force),
            Status::Warning(true, UNMANAGED_WARNING.into())
        );
        // Finished pods always go.
        let mut done = pod("done", None);
        done["status"]["phase"] = json!("Succeeded");
        assert_eq!(f(&done, &o), Status::Okay);
        // Deleting for longer than --skip-wait-for-delete-timeout: skipped.
        let mut deleting = pod("old", Some("ReplicaSet"));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:30Z");
        let skip = DrainOptions {
            skip_wait_for_delete_timeout: 60,
            ..Default::default()
        };
        assert_eq!(filter(&deleting, &skip, ts(90), &exists), Status::Okay);
        assert_eq!(filter(&deleting, &skip, ts(91), &exists), Status::Skip);
    }

    #[test]
    fn plans_aggregate_warnings_and_errors_as_kubectl_prints_them() {
        let ds1 = (
            pod("ds1", Some("DaemonSet")),
            Status::Warning(false, DAEMONSET_WARNING.into()),
        );
        let ds2 = (
            pod("ds2", Some("DaemonSet")),
            Status::Warning(false, DAEMONSET_WARNING.into()),
        );
        let web = (pod("web", Some("ReplicaSet")), Status::Okay);
        let (del, warn, errs) = plan(&[ds1.clone(), ds2.clone(), web.clone()]);
        assert_eq!(del.len(), 1);
        assert_eq!(
            warn.as_deref(),
            Some("ignoring DaemonSet-managed Pods: default/ds1, default/ds2")
        );
        assert!(errs.is_empty());
        let bare = (pod("bare", None), Status::Error(UNMANAGED_FATAL.into()));
        let dsx = (
            pod("ds3", Some("DaemonSet")),
            Status::Error(DAEMONSET_FATAL.into()),
        );
        let (_, _, errs) = plan(&[bare, dsx, web]);
        assert_eq!(
            errs,
            vec![
                "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/ds3",
                "cannot delete Pods that declare no controller (use --force to override): default/bare",
            ]
        );
    }

    #[test]
    fn eviction_bodies_carry_the_grace_period_only_when_set() {
        assert_eq!(
            eviction_body("d", "p", None),
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "d"}})
        );
        assert_eq!(
            eviction_body("d", "p", Some(0))["deleteOptions"],
            json!({"gracePeriodSeconds": 0})
        );
        assert!(
            eviction_body("d", "p", Some(-1))
                .get("deleteOptions")
                .is_none()
        );
    }
}
