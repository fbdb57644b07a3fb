//! Admission: DefaultTolerationSeconds (control-plane spec §3), on pod create and update, and
//! the Priority plugin (pod priority resolved from PriorityClasses on create and kept on update;
//! one global default class). Neither runs on subresources. The decisions here are pure; `crud`
//! reads the PriorityClasses from the store and turns a refusal into upstream's 403. Storage:
//! DefaultStorageClass (a claim without a class gets the default one) and
//! StorageObjectInUseProtection (the pvc-/pv-protection finalizers on create).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use klab_api::names::{
    ANN_BETA_DEFAULT_STORAGE_CLASS, ANN_BETA_STORAGE_CLASS, ANN_DEFAULT_STORAGE_CLASS,
    FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION, TAINT_NOT_READY, TAINT_UNREACHABLE,
};

use crate::object::Pointer;

/// The two flags of the DefaultTolerationSeconds plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultTolerationSeconds {
    /// `--default-not-ready-toleration-seconds` (default 300).
    pub not_ready_seconds: i64,
    /// `--default-unreachable-toleration-seconds` (default 300).
    pub unreachable_seconds: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        DefaultTolerationSeconds {
            not_ready_seconds: 300,
            unreachable_seconds: 300,
        }
    }
}

impl DefaultTolerationSeconds {
    /// Appends the not-ready and unreachable NoExecute tolerations a pod does not already cover.
    /// A toleration covers a key when its key is that key or empty and its effect is NoExecute or
    /// empty; operator and value are not examined (an upstream quirk kept on purpose).
    pub fn admit_pod(&self, pod: &mut Value) {
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !tolerations.is_array() {
            // Left for validation to refuse.
            return;
        }
        let list = tolerations.as_array_mut().expect("checked");
        let covers = |list: &[Value], key: &str| {
            list.iter().any(|t| {
                let k = t.get("key").and_then(Value::as_str).unwrap_or("");
                let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
                (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
            })
        };
        let not_ready = covers(list, TAINT_NOT_READY);
        let unreachable = covers(list, TAINT_UNREACHABLE);
        if !not_ready {
            list.push(json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": self.not_ready_seconds}));
        }
        if !unreachable {
            list.push(json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": self.unreachable_seconds}));
        }
        if list.is_empty() {
            spec.remove("tolerations");
        }
    }
}

/// One PriorityClass as the Priority plugin reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClassInfo {
    pub name: String,
    pub value: i64,
    pub global_default: bool,
    pub preemption_policy: Option<String>,
}

/// The fields of a stored PriorityClass admission reads, decoded straight from its bytes: every
/// pod create reads every class, and decoding the whole documents was an eighth of a create.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredPriorityClass {
    metadata: StoredMeta,
    #[serde(default)]
    value: i64,
    #[serde(default)]
    global_default: bool,
    #[serde(default)]
    preemption_policy: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    creation_timestamp: String,
}

impl PriorityClassInfo {
    /// Reads a stored PriorityClass's bytes (what [`PriorityClassInfo::from_object`] reads of
    /// the decoded object).
    pub fn from_stored(bytes: &[u8]) -> serde_json::Result<Self> {
        let c: StoredPriorityClass = serde_json::from_slice(bytes)?;
        Ok(PriorityClassInfo {
            name: c.metadata.name,
            value: c.value,
            global_default: c.global_default,
            preemption_policy: c.preemption_policy,
        })
    }

    /// Reads a (validated) PriorityClass object.
    pub fn from_object(obj: &Value) -> PriorityClassInfo {
        PriorityClassInfo {
            name: obj
                .at("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            value: obj.get("value").and_then(Value::as_i64).unwrap_or(0),
            global_default: obj
                .get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            preemption_policy: obj
                .get("preemptionPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }
}

/// The default class (`getDefaultPriorityClass`): of the classes marked `globalDefault`, the one
/// with the lowest value (more than one can exist after a race); among equal values the first in
/// name order, so the answer never depends on listing order.
pub fn default_priority_class(classes: &[PriorityClassInfo]) -> Option<&PriorityClassInfo> {
    classes
        .iter()
        .filter(|c| c.global_default)
        .min_by_key(|c| (c.value, c.name.clone()))
}

/// The Priority plugin on pod create (`admitPod`): a named class must exist, and gives the pod
/// its value and preemption policy; without a name, the default class does (its name is written
/// into the pod), else priority 0 and `PreemptLowerPriority`. A pod may carry its own `priority`
/// or `preemptionPolicy` only if they equal what the class gives. `Err` is the reason of
/// upstream's 403.
pub fn admit_pod_priority(pod: &mut Value, classes: &[PriorityClassInfo]) -> Result<(), String> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let (priority, policy) = if named.is_empty() {
        match default_priority_class(classes) {
            Some(c) => {
                spec.insert("priorityClassName".into(), json!(c.name));
                (c.value, c.preemption_policy.clone())
            }
            None => (0, Some("PreemptLowerPriority".to_string())),
        }
    } else {
        match classes.iter().find(|c| c.name == named) {
            Some(c) => (c.value, c.preemption_policy.clone()),
            None => return Err(format!("no PriorityClass with name {named} was found")),
        }
    };
    if let Some(own) = spec.get("priority").filter(|v| !v.is_null())
        && own.as_i64() != Some(priority)
    {
        return Err(format!(
            "the integer value of priority ({}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name",
            own
        ));
    }
    spec.insert("priority".into(), json!(priority));
    if let Some(policy) = policy {
        if let Some(own) = spec.get("preemptionPolicy").and_then(Value::as_str)
            && own != policy
        {
            return Err(format!(
                "the string value of PreemptionPolicy ({own}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            ));
        }
        spec.insert("preemptionPolicy".into(), json!(policy));
    }
    Ok(())
}

/// The Priority plugin on pod update: the priority and preemption policy set at create are kept
/// when the update leaves them out (validation refuses any other change to them).
pub fn keep_pod_priority(pod: &mut Value, old: &Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        let unset = spec.get(field).is_none_or(Value::is_null);
        if unset && let Some(v) = old.at(&format!("/spec/{field}")).filter(|v| !v.is_null()) {
            spec.insert(field.into(), v.clone());
        }
    }
}

/// The Priority plugin on PriorityClass create and update: only one class may be the global
/// default. `Err` is the reason of upstream's 403.
pub fn check_global_default(
    class: &PriorityClassInfo,
    others: &[PriorityClassInfo],
    create: bool,
) -> Result<(), String> {
    if !class.global_default {
        return Ok(());
    }
    match default_priority_class(others) {
        Some(d) if create || d.name != class.name => Err(format!(
            "PriorityClass {} is already marked as default. Only one default can exist",
            d.name
        )),
        _ => Ok(()),
    }
}

/// A StorageClass as the DefaultStorageClass plugin sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageClassInfo {
    pub name: String,
    /// Either default-class annotation is `"true"`.
    pub is_default: bool,
    /// RFC 3339 creation time (sortable as text: the store writes one format).
    pub created: String,
}

impl StorageClassInfo {
    /// Reads a stored StorageClass's bytes (what [`StorageClassInfo::from_object`] reads of the
    /// decoded object).
    pub fn from_stored(bytes: &[u8]) -> serde_json::Result<Self> {
        #[derive(serde::Deserialize)]
        struct Stored {
            metadata: StoredMeta,
        }
        let m = serde_json::from_slice::<Stored>(bytes)?.metadata;
        let is_default = [ANN_DEFAULT_STORAGE_CLASS, ANN_BETA_DEFAULT_STORAGE_CLASS]
            .iter()
            .any(|k| m.annotations.get(*k).map(String::as_str) == Some("true"));
        Ok(StorageClassInfo {
            name: m.name,
            is_default,
            created: m.creation_timestamp,
        })
    }

    pub fn from_object(obj: &Value) -> Self {
        let ann = |k: &str| obj.at("/metadata/annotations").and_then(|a| a.get(k));
        let is_default = [ANN_DEFAULT_STORAGE_CLASS, ANN_BETA_DEFAULT_STORAGE_CLASS]
            .iter()
            .any(|k| ann(k).and_then(Value::as_str) == Some("true"));
        let text = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        StorageClassInfo {
            name: text("/metadata/name"),
            is_default,
            created: text("/metadata/creationTimestamp"),
        }
    }
}

/// The DefaultStorageClass plugin (`plugin/pkg/admission/storage/storageclass/setdefault`): a
/// claim that names no class (neither `spec.storageClassName`, even empty, nor the beta
/// annotation) gets the default one; with several defaults the newest wins, ties by name
/// (`GetDefaultClass`). No default leaves the claim unchanged.
pub fn admit_claim_storage_class(pvc: &mut Value, classes: &[StorageClassInfo]) {
    let has_annotation = pvc
        .at("/metadata/annotations")
        .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
        .is_some();
    let Some(spec) = pvc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if has_annotation || spec.get("storageClassName").is_some_and(|v| !v.is_null()) {
        return;
    }
    let default = classes
        .iter()
        .filter(|c| c.is_default)
        .max_by_key(|c| (c.created.clone(), std::cmp::Reverse(c.name.clone())));
    if let Some(class) = default {
        spec.insert("storageClassName".into(), json!(class.name));
    }
}

/// The StorageObjectInUseProtection plugin: a new claim carries `kubernetes.io/pvc-protection`
/// and a new volume `kubernetes.io/pv-protection`, so neither disappears while in use (the
/// protection controllers remove them once it is safe).
pub fn admit_storage_protection(kind: &str, obj: &mut Value) {
    let finalizer = match kind {
        "PersistentVolumeClaim" => FINALIZER_PVC_PROTECTION,
        "PersistentVolume" => FINALIZER_PV_PROTECTION,
        _ => return,
    };
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    let Some(list) = list.as_array_mut() else {
        // Left for validation to refuse.
        return;
    };
    if !list.iter().any(|f| f.as_str() == Some(finalizer)) {
        list.push(json!(finalizer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(name: &str, value: i64, global_default: bool, policy: Option<&str>) -> PriorityClassInfo {
        PriorityClassInfo {
            name: name.into(),
            value,
            global_default,
            preemption_policy: policy.map(str::to_string),
        }
    }

    #[test]
    fn stored_classes_read_as_their_decoded_objects_do() {
        let managed = json!([{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:value": {}}}]);
        let priority = [
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high", "managedFields": managed, "labels": {"a": "b"}},
                "value": 1000000, "globalDefault": true, "preemptionPolicy": "Never",
                "description": "x"}),
            json!({"metadata": {"name": "low"}, "value": -5}),
            json!({"metadata": {"name": "zero"}, "globalDefault": false}),
        ];
        for obj in &priority {
            let bytes = serde_json::to_vec(obj).unwrap();
            assert_eq!(
                PriorityClassInfo::from_stored(&bytes).unwrap(),
                PriorityClassInfo::from_object(obj),
                "{obj}"
            );
        }
        let storage = [
            json!({"metadata": {"name": "fast", "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {ANN_DEFAULT_STORAGE_CLASS: "true"}, "managedFields": managed},
                "provisioner": "x"}),
            json!({"metadata": {"name": "beta", "annotations": {ANN_BETA_DEFAULT_STORAGE_CLASS: "true"}}}),
            json!({"metadata": {"name": "off", "annotations": {ANN_DEFAULT_STORAGE_CLASS: "false"}}}),
            json!({"metadata": {"name": "plain"}}),
        ];
        for obj in &storage {
            let bytes = serde_json::to_vec(obj).unwrap();
            assert_eq!(
                StorageClassInfo::from_stored(&bytes).unwrap(),
                StorageClassInfo::from_object(obj),
                "{obj}"
            );
        }
        assert!(PriorityClassInfo::from_stored(b"{").is_err());
    }

    fn admit_priority(spec: Value, classes: &[PriorityClassInfo]) -> Result<Value, String> {
        let mut pod = json!({ "spec": spec });
        admit_pod_priority(&mut pod, classes).map(|()| pod["spec"].clone())
    }

    #[test]
    fn priority_plugin_table() {
        let high = pc("high", 1000, false, Some("PreemptLowerPriority"));
        let never = pc("batch", 10, false, Some("Never"));
        let node_critical = pc(
            "system-node-critical",
            2_000_001_000,
            false,
            Some("PreemptLowerPriority"),
        );
        let classes = [high.clone(), never.clone(), node_critical];
        // No class, no default: 0 and PreemptLowerPriority, no class name written.
        let s = admit_priority(json!({}), &classes).unwrap();
        assert_eq!(
            s,
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );
        // A named class gives its value and policy.
        let s = admit_priority(json!({"priorityClassName": "batch"}), &classes).unwrap();
        assert_eq!(s["priority"], 10);
        assert_eq!(s["preemptionPolicy"], "Never");
        let s = admit_priority(
            json!({"priorityClassName": "system-node-critical"}),
            &classes,
        )
        .unwrap();
        assert_eq!(s["priority"], 2_000_001_000);
        // Unknown class.
        assert_eq!(
            admit_priority(json!({"priorityClassName": "nope"}), &classes).unwrap_err(),
            "no PriorityClass with name nope was found"
        );
        // Own priority: equal is accepted, different refused.
        assert!(
            admit_priority(
                json!({"priorityClassName": "high", "priority": 1000}),
                &classes
            )
            .is_ok()
        );
        assert_eq!(
            admit_priority(json!({"priority": 5}), &classes).unwrap_err(),
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
        );
        // Own preemption policy that differs from the class's.
        assert_eq!(
            admit_priority(
                json!({"priorityClassName": "batch", "preemptionPolicy": "PreemptLowerPriority"}),
                &classes
            )
            .unwrap_err(),
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
        );
        assert_eq!(
            admit_priority(json!({"preemptionPolicy": "Never"}), &classes).unwrap_err(),
            "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
        );
        // A global default class names itself in the pod; the lowest value wins among several.
        let d1 = pc("default-low", -10, true, Some("Never"));
        let d2 = pc("default-high", 50, true, Some("PreemptLowerPriority"));
        let s = admit_priority(json!({}), &[d2.clone(), high.clone(), d1.clone()]).unwrap();
        assert_eq!(
            s,
            json!({"priorityClassName": "default-low", "priority": -10, "preemptionPolicy": "Never"})
        );
        // A class without a policy leaves the pod's alone.
        let bare = pc("bare", 7, false, None);
        let s = admit_priority(
            json!({"priorityClassName": "bare", "preemptionPolicy": "Never"}),
            &[bare],
        )
        .unwrap();
        assert_eq!(s["priority"], 7);
        assert_eq!(s["preemptionPolicy"], "Never");
        // No spec: nothing to do, no panic.
        let mut odd = json!({"spec": 3});
        assert!(admit_pod_priority(&mut odd, &classes).is_ok());
    }

    #[test]
    fn priority_is_kept_on_update_and_one_default_only() {
        let old = json!({"spec": {"priority": 1000, "preemptionPolicy": "Never"}});
        let mut new = json!({"spec": {"containers": []}});
        keep_pod_priority(&mut new, &old);
        assert_eq!(new["spec"]["priority"], 1000);
        assert_eq!(new["spec"]["preemptionPolicy"], "Never");
        let mut changed = json!({"spec": {"priority": 3}});
        keep_pod_priority(&mut changed, &old);
        assert_eq!(
            changed["spec"]["priority"], 3,
            "left for validation to refuse"
        );

        let d = pc("d", 1, true, None);
        let other = pc("e", 2, true, None);
        assert_eq!(
            check_global_default(&other, std::slice::from_ref(&d), true).unwrap_err(),
            "PriorityClass d is already marked as default. Only one default can exist"
        );
        // Updating the default itself is fine; marking another one is not.
        assert!(check_global_default(&d, std::slice::from_ref(&d), false).is_ok());
        assert!(check_global_default(&other, std::slice::from_ref(&d), false).is_err());
        assert!(check_global_default(&pc("x", 1, false, None), &[d], true).is_ok());
    }

    fn admit(tolerations: Value) -> Value {
        let mut pod = json!({"spec": {"containers": [{"name": "c"}], "tolerations": tolerations}});
        DefaultTolerationSeconds::default().admit_pod(&mut pod);
        pod["spec"]["tolerations"].clone()
    }

    fn nr(secs: i64) -> Value {
        json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs})
    }
    fn ur(secs: i64) -> Value {
        json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs})
    }

    #[test]
    fn cp43_defaulting_table() {
        // No tolerations: both appended, not-ready first.
        assert_eq!(admit(json!([])), json!([nr(300), ur(300)]));
        // An unrelated toleration is kept first.
        let other =
            json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"});
        assert_eq!(
            admit(json!([other.clone()])),
            json!([other, nr(300), ur(300)])
        );
        // Own unreachable toleration with 0 s: only not-ready appended.
        let own = json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0});
        assert_eq!(admit(json!([own.clone()])), json!([own, nr(300)]));
        // Wildcard covers both.
        let wild = json!({"operator": "Exists"});
        assert_eq!(admit(json!([wild.clone()])), json!([wild]));
        // Empty effect on the key covers it.
        let any_effect = json!({"key": TAINT_NOT_READY, "operator": "Exists"});
        assert_eq!(
            admit(json!([any_effect.clone()])),
            json!([any_effect, ur(300)])
        );
        // NoSchedule effect does not cover.
        let nosched = json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(
            admit(json!([nosched.clone()])),
            json!([nosched, nr(300), ur(300)])
        );
        // Quirk: Equal with a value still suppresses the default.
        let quirk = json!({"key": TAINT_UNREACHABLE, "operator": "Equal", "value": "x", "effect": "NoExecute"});
        assert_eq!(admit(json!([quirk.clone()])), json!([quirk, nr(300)]));
    }

    #[test]
    fn cp45_custom_flags() {
        let mut pod = json!({"spec": {"containers": []}});
        DefaultTolerationSeconds {
            not_ready_seconds: 60,
            unreachable_seconds: 100,
        }
        .admit_pod(&mut pod);
        assert_eq!(pod["spec"]["tolerations"], json!([nr(60), ur(100)]));
    }

    fn class(name: &str, default: bool, created: &str) -> StorageClassInfo {
        StorageClassInfo {
            name: name.into(),
            is_default: default,
            created: created.into(),
        }
    }

    #[test]
    fn claim_gets_the_newest_default_class() {
        let classes = [
            class("standard", true, "2026-01-01T00:00:00Z"),
            class("fast", false, "2026-01-03T00:00:00Z"),
            class("newer", true, "2026-01-02T00:00:00Z"),
        ];
        let cases: Vec<(Value, Option<&str>)> = vec![
            (json!({"spec": {}}), Some("newer")),
            // An explicit class, even empty (no class at all), is kept.
            (json!({"spec": {"storageClassName": "fast"}}), Some("fast")),
            (json!({"spec": {"storageClassName": ""}}), Some("")),
            // The beta annotation counts as naming a class.
            (
                json!({"metadata": {"annotations": {ANN_BETA_STORAGE_CLASS: "x"}}, "spec": {}}),
                None,
            ),
        ];
        for (mut pvc, want) in cases {
            admit_claim_storage_class(&mut pvc, &classes);
            assert_eq!(
                pvc.at("/spec/storageClassName").and_then(Value::as_str),
                want,
                "{pvc}"
            );
        }
        let mut pvc = json!({"spec": {}});
        admit_claim_storage_class(&mut pvc, &[class("fast", false, "x")]);
        assert_eq!(pvc, json!({"spec": {}}), "no default: unchanged");
        let sc = json!({"metadata": {"name": "s", "creationTimestamp": "t",
            "annotations": {ANN_BETA_DEFAULT_STORAGE_CLASS: "true"}}});
        assert_eq!(StorageClassInfo::from_object(&sc), class("s", true, "t"));
    }

    #[test]
    fn protection_finalizers_are_added_once() {
        let mut pvc = json!({"metadata": {"finalizers": ["a"]}});
        admit_storage_protection("PersistentVolumeClaim", &mut pvc);
        admit_storage_protection("PersistentVolumeClaim", &mut pvc);
        assert_eq!(
            pvc["metadata"]["finalizers"],
            json!(["a", FINALIZER_PVC_PROTECTION])
        );
        let mut pv = json!({"metadata": {}});
        admit_storage_protection("PersistentVolume", &mut pv);
        assert_eq!(
            pv["metadata"]["finalizers"],
            json!([FINALIZER_PV_PROTECTION])
        );
        let mut pod = json!({"metadata": {}});
        admit_storage_protection("Pod", &mut pod);
        assert_eq!(pod, json!({"metadata": {}}));
    }
}

/// Where the ServiceAccount plugin mounts the API credentials in every container.
pub const SERVICE_ACCOUNT_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The prefix of the projected volume's name (`kube-api-access-<5 random characters>`).
pub const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";
/// The projected token's lifetime (upstream's `WarnOnlyBoundTokenExpirationSeconds`).
pub const PROJECTED_TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// The ServiceAccount plugin on pod create: the pod's account must exist (`sa` is what the store
/// holds under `spec.serviceAccountName`, already defaulted to `default`), and unless automount is
/// off (the pod's `automountServiceAccountToken`, else the account's) every init and app container
/// that does not already mount something at the credentials path mounts a projected
/// `kube-api-access-xxxxx` volume (token, cluster CA, namespace), as upstream. Mirror pods are left
/// alone. `Err` is the reason of upstream's 403.
pub fn admit_service_account(
    pod: &mut Value,
    namespace: &str,
    sa: Option<&Value>,
    suffix: impl FnOnce() -> String,
) -> Result<(), String> {
    let mirror = pod
        .at("/metadata/annotations/kubernetes.io~1config.mirror")
        .is_some();
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if mirror {
        return Ok(());
    }
    let name = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let Some(sa) = sa else {
        return Err(format!(
            "error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found"
        ));
    };
    // Image pull secrets of the account, when the pod names none.
    let pod_has_pull_secrets = spec
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !pod_has_pull_secrets
        && let Some(secrets) = sa
            .get("imagePullSecrets")
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
    {
        spec.insert("imagePullSecrets".into(), Value::Array(secrets.clone()));
    }
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| {
            sa.get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true);
    if !automount {
        return Ok(());
    }
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .find(|n| n.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX))
                .map(String::from)
        });
    let volume_name = existing
        .clone()
        .unwrap_or_else(|| format!("{SERVICE_ACCOUNT_VOLUME_PREFIX}{}", suffix()));
    let mount =
        json!({"mountPath": SERVICE_ACCOUNT_MOUNT_PATH, "name": volume_name, "readOnly": true});
    let mut needs_volume = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut() {
            let Some(c) = c.as_object_mut() else { continue };
            let mounts = c
                .entry("volumeMounts")
                .or_insert_with(|| Value::Array(Vec::new()));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            let taken = mounts.iter().any(|m| {
                m.get("mountPath").and_then(Value::as_str) == Some(SERVICE_ACCOUNT_MOUNT_PATH)
            });
            if !taken {
                mounts.push(mount.clone());
                needs_volume = true;
            }
        }
    }
    if existing.is_none() && needs_volume {
        let volume = json!({
            "name": volume_name,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": PROJECTED_TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
                "defaultMode": 420,
            },
        });
        let volumes = spec
            .entry("volumes")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(v) = volumes.as_array_mut() {
            v.push(volume);
        }
    }
    Ok(())
}

#[cfg(test)]
mod service_account_tests {
    use super::*;

    fn pod(extra: Value) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "default",
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "a", "image": "nginx"},
                           {"name": "b", "image": "nginx", "volumeMounts": [{"name": "own", "mountPath": SERVICE_ACCOUNT_MOUNT_PATH}]}]}});
        if let (Some(s), Some(e)) = (p["spec"].as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        p
    }

    #[test]
    fn every_container_without_its_own_mount_gets_the_projected_credentials() {
        let mut p = pod(json!({}));
        admit_service_account(&mut p, "default", Some(&json!({})), || "abcde".into()).unwrap();
        let spec = &p["spec"];
        assert_eq!(spec["volumes"][0]["name"], "kube-api-access-abcde");
        assert_eq!(
            spec["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        assert_eq!(spec["volumes"][0]["projected"]["defaultMode"], 420);
        assert_eq!(
            spec["initContainers"][0]["volumeMounts"][0],
            json!({"mountPath": SERVICE_ACCOUNT_MOUNT_PATH, "name": "kube-api-access-abcde", "readOnly": true})
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"][0]["name"],
            "kube-api-access-abcde"
        );
        // The container with its own mount at the path keeps only that.
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn automount_off_missing_accounts_and_mirror_pods() {
        let mut p = pod(json!({"automountServiceAccountToken": false}));
        admit_service_account(&mut p, "default", Some(&json!({})), || unreachable!()).unwrap();
        assert!(p["spec"].get("volumes").is_none());
        // The account's setting applies when the pod says nothing; the pod's wins.
        let mut p = pod(json!({}));
        let sa =
            json!({"automountServiceAccountToken": false, "imagePullSecrets": [{"name": "reg"}]});
        admit_service_account(&mut p, "default", Some(&sa), || unreachable!()).unwrap();
        assert!(p["spec"].get("volumes").is_none());
        assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "reg"}]));
        let mut p = pod(json!({"automountServiceAccountToken": true}));
        admit_service_account(&mut p, "default", Some(&sa), || "zzzzz".into()).unwrap();
        assert_eq!(p["spec"]["volumes"][0]["name"], "kube-api-access-zzzzz");
        let mut p = pod(json!({"serviceAccountName": "robot"}));
        assert_eq!(
            admit_service_account(&mut p, "ns1", None, || unreachable!()),
            Err(
                "error looking up service account ns1/robot: serviceaccount \"robot\" not found"
                    .into()
            )
        );
        let mut p = pod(json!({}));
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        admit_service_account(&mut p, "default", None, || unreachable!()).unwrap();
        assert!(p["spec"].get("volumes").is_none());
    }
}
