//! Defaulting on create/update as upstream for the fields kubectl and controllers rely on (§b.15).
//!
//! Mirrors upstream `pkg/apis/core/v1/defaults.go`, `pkg/apis/apps/v1/defaults.go`,
//! `pkg/apis/batch/v1/defaults.go` and the create-time parts of the registry strategies
//! (`PrepareForCreate`: pod status and QoS class, namespace finalizers, the Job's generated
//! selector). Upstream defaults on every decode, so `default_object` is idempotent and is applied
//! on create and on update; the create-only pieces are separate functions. Only fields that are
//! absent (or `null`) are filled: a value the client sent is never overwritten (except the
//! namespace name label, which upstream always forces).

use klab_api::names::{
    LABEL_JOB_CONTROLLER_UID as LABEL_CONTROLLER_UID,
    LABEL_JOB_CONTROLLER_UID_LEGACY as LABEL_LEGACY_CONTROLLER_UID, LABEL_JOB_NAME,
    LABEL_JOB_NAME_LEGACY as LABEL_LEGACY_JOB_NAME, LABEL_NAMESPACE_NAME,
};
use serde_json::{Map, Value, json};

use crate::object::Pointer;
use crate::registry::ResourceInfo;

// ---------------------------------------------------------------------------------------------
// JSON helpers
// ---------------------------------------------------------------------------------------------

/// The object at `key`, created (or replacing a `null`) when absent. `None` when the existing
/// value is not an object (bad input is left for validation to report).
fn obj_at<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let v = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if v.is_null() {
        *v = json!({});
    }
    v.as_object_mut()
}

/// Sets `key` when absent or `null`.
fn default_field(m: &mut Map<String, Value>, key: &str, value: Value) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), value);
        }
        Some(_) => {}
    }
}

/// Sets a string field when absent, `null` or `""` (Go's zero value means unset).
fn default_str(m: &mut Map<String, Value>, key: &str, value: &str) {
    match m.get(key) {
        None | Some(Value::Null) => {
            m.insert(key.to_string(), json!(value));
        }
        Some(Value::String(s)) if s.is_empty() => {
            m.insert(key.to_string(), json!(value));
        }
        Some(_) => {}
    }
}

fn for_each_obj_in(
    m: &mut Map<String, Value>,
    key: &str,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    if let Some(Value::Array(list)) = m.get_mut(key) {
        for item in list.iter_mut() {
            if let Some(o) = item.as_object_mut() {
                f(o);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pods and pod templates
// ---------------------------------------------------------------------------------------------

/// The tag of an image reference (upstream `parsers.ParseImageName`): `None` when it carries a
/// digest and no tag, `"latest"` when it carries neither.
fn image_tag(image: &str) -> Option<String> {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => Some(tag.to_string()),
        None if digest.is_some() => None,
        None => Some("latest".to_string()),
    }
}

/// `Always` for `:latest` or an untagged image, else `IfNotPresent` (upstream
/// `SetDefaults_Container`).
pub fn default_pull_policy(image: &str) -> &'static str {
    if image_tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    }
}

fn default_probe(p: &mut Map<String, Value>) {
    default_field(p, "timeoutSeconds", json!(1));
    default_field(p, "periodSeconds", json!(10));
    default_field(p, "successThreshold", json!(1));
    default_field(p, "failureThreshold", json!(3));
    if let Some(Value::Object(h)) = p.get_mut("httpGet") {
        default_str(h, "path", "/");
        default_str(h, "scheme", "HTTP");
    }
}

fn default_container(c: &mut Map<String, Value>) {
    let image = c
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    default_str(c, "imagePullPolicy", default_pull_policy(&image));
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    // `resources` is a struct (not a pointer) upstream, so it always serializes, as `{}`.
    obj_at(c, "resources");
    for_each_obj_in(c, "ports", |p| default_str(p, "protocol", "TCP"));
    for_each_obj_in(c, "env", |e| {
        if let Some(Value::Object(vf)) = e.get_mut("valueFrom")
            && let Some(Value::Object(fr)) = vf.get_mut("fieldRef")
        {
            default_str(fr, "apiVersion", "v1");
        }
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(p)) = c.get_mut(probe) {
            default_probe(p);
        }
    }
}

fn default_volume(v: &mut Map<String, Value>) {
    // A volume without a source is an emptyDir (upstream `SetDefaults_Volume`).
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["configMap", "secret", "projected", "downwardAPI"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            // 0644, as upstream's `DefaultMode` constants.
            default_field(s, "defaultMode", json!(420));
        }
    }
}

/// `SetDefaults_PodSpec` and the container/volume defaulters under it (used for pods and for
/// pod templates).
fn default_pod_spec(spec: &mut Map<String, Value>) {
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");
    obj_at(spec, "securityContext");
    // The deprecated `serviceAccount` and `serviceAccountName` mirror each other.
    let sa = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let deprecated = spec
        .get("serviceAccount")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if sa.is_empty() && !deprecated.is_empty() {
        spec.insert("serviceAccountName".into(), json!(deprecated));
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for_each_obj_in(spec, list, default_container);
    }
    for_each_obj_in(spec, "volumes", default_volume);
}

/// `SetDefaults_Pod`: the pod-only parts (not applied to templates).
fn default_pod(obj: &mut Map<String, Value>) {
    let Some(spec) = obj_at(obj, "spec") else {
        return;
    };
    default_pod_spec(spec);
    default_field(spec, "enableServiceLinks", json!(true));
    // The ServiceAccount admission plugin: `default`, mirrored into `serviceAccount` as v1 does.
    default_str(spec, "serviceAccountName", "default");
    let sa = spec
        .get("serviceAccountName")
        .cloned()
        .unwrap_or(json!("default"));
    default_str(spec, "serviceAccount", sa.as_str().unwrap_or("default"));
    // `spec.priority` and `spec.preemptionPolicy` are not defaults: the Priority admission
    // plugin resolves them from the PriorityClasses on create (`admission::Priority`).
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["containers", "initContainers"] {
        for_each_obj_in(spec, list, |c| {
            // Requests default to limits for resources with a limit and no request.
            if let Some(Value::Object(res)) = c.get_mut("resources")
                && let Some(Value::Object(limits)) = res.get("limits").cloned()
                && !limits.is_empty()
                && let Some(requests) = obj_at(res, "requests")
            {
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
            // Host-network pods use their container ports on the host.
            if host_network {
                for_each_obj_in(c, "ports", |p| {
                    if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                        && let Some(cp) = p.get("containerPort").cloned()
                    {
                        p.insert("hostPort".into(), cp);
                    }
                });
            }
        });
    }
}

/// Defaults the pod template at `spec.template.spec` of a workload.
fn default_template(spec: &mut Map<String, Value>) {
    if let Some(template) = obj_at(spec, "template")
        && let Some(pod_spec) = obj_at(template, "spec")
    {
        default_pod_spec(pod_spec);
    }
}

/// A Kubernetes quantity as a number (for QoS comparisons): `100m`, `1`, `1.5Gi`, `2e3`.
pub(crate) fn parse_quantity(q: &Value) -> Option<f64> {
    let s = match q {
        Value::String(s) => s.trim(),
        Value::Number(n) => return n.as_f64(),
        _ => return None,
    };
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// Upstream `qos.GetPodQOS` (without pod-level resources): BestEffort with no cpu/memory
/// requests or limits; Guaranteed when every container limits both cpu and memory and the
/// summed requests equal the summed limits; Burstable otherwise.
pub fn pod_qos_class(pod: &Value) -> &'static str {
    let mut requests: [Option<f64>; 2] = [None, None];
    let mut limits: [Option<f64>; 2] = [None, None];
    let mut guaranteed = true;
    let names = ["cpu", "memory"];
    let lists = ["containers", "initContainers"];
    for list in lists {
        let containers = pod
            .at(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in &containers {
            let mut limits_found = 0;
            for (i, name) in names.iter().enumerate() {
                let limit = c.at(&format!("/resources/limits/{name}"));
                // A request defaults to its limit (`SetDefaults_Pod`); applied here too so the
                // class does not depend on whether defaulting already ran.
                let request = c.at(&format!("/resources/requests/{name}")).or(limit);
                if let Some(q) = request.and_then(parse_quantity)
                    && q > 0.0
                {
                    requests[i] = Some(requests[i].unwrap_or(0.0) + q);
                }
                if let Some(q) = limit.and_then(parse_quantity)
                    && q > 0.0
                {
                    limits_found += 1;
                    limits[i] = Some(limits[i].unwrap_or(0.0) + q);
                }
            }
            if limits_found < 2 {
                guaranteed = false;
            }
        }
    }
    if requests.iter().all(Option::is_none) && limits.iter().all(Option::is_none) {
        return "BestEffort";
    }
    if guaranteed {
        for i in 0..2 {
            if let Some(r) = requests[i]
                && limits[i].is_none_or(|l| (l - r).abs() > f64::EPSILON * l.abs().max(1.0))
            {
                guaranteed = false;
            }
        }
    }
    let count = |a: &[Option<f64>; 2]| a.iter().filter(|x| x.is_some()).count();
    if guaranteed && count(&requests) == count(&limits) {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The status a new pod starts with (upstream pod `PrepareForCreate`): `Pending` and its QoS
/// class; whatever status the client sent is dropped.
pub fn default_pod_status_on_create(obj: &mut Value) {
    let qos = pod_qos_class(obj);
    if let Some(m) = obj.as_object_mut() {
        m.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos}),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

fn default_deployment(spec: &mut Map<String, Value>) {
    default_field(spec, "replicas", json!(1));
    if let Some(strategy) = obj_at(spec, "strategy") {
        default_str(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = obj_at(strategy, "rollingUpdate")
        {
            default_field(ru, "maxUnavailable", json!("25%"));
            default_field(ru, "maxSurge", json!("25%"));
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    default_field(spec, "progressDeadlineSeconds", json!(600));
    default_template(spec);
}

fn default_pvc_spec(spec: &mut Map<String, Value>) {
    default_str(spec, "volumeMode", "Filesystem");
}

fn default_statefulset(spec: &mut Map<String, Value>) {
    default_field(spec, "replicas", json!(1));
    default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(us) = obj_at(spec, "updateStrategy") {
        default_str(us, "type", "RollingUpdate");
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = obj_at(us, "rollingUpdate")
        {
            default_field(ru, "partition", json!(0));
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    if let Some(policy) = obj_at(spec, "persistentVolumeClaimRetentionPolicy") {
        default_str(policy, "whenDeleted", "Retain");
        default_str(policy, "whenScaled", "Retain");
    }
    for_each_obj_in(spec, "volumeClaimTemplates", |t| {
        if let Some(s) = obj_at(t, "spec") {
            default_pvc_spec(s);
        }
        if let Some(st) = obj_at(t, "status") {
            default_str(st, "phase", "Pending");
        }
    });
    default_template(spec);
}

fn default_daemonset(spec: &mut Map<String, Value>) {
    if let Some(us) = obj_at(spec, "updateStrategy") {
        default_str(us, "type", "RollingUpdate");
        if us.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(ru) = obj_at(us, "rollingUpdate")
        {
            default_field(ru, "maxUnavailable", json!(1));
            default_field(ru, "maxSurge", json!(0));
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    default_template(spec);
}

/// `SetDefaults_Job` (v1.33: JobPodReplacementPolicy on).
fn default_job(obj: &mut Map<String, Value>) {
    let template_labels = obj
        .get("spec")
        .and_then(|s| s.at("/template/metadata/labels"))
        .cloned();
    let Some(spec) = obj_at(obj, "spec") else {
        return;
    };
    let unset = |m: &Map<String, Value>, k: &str| m.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_field(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i64::from(i32::MAX)
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    default_str(spec, "completionMode", "NonIndexed");
    default_field(spec, "suspend", json!(false));
    if unset(spec, "podReplacementPolicy") {
        let policy = if unset(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        spec.insert("podReplacementPolicy".into(), json!(policy));
    }
    if let Some(Value::Object(pfp)) = spec.get_mut("podFailurePolicy") {
        for_each_obj_in(pfp, "rules", |rule| {
            for_each_obj_in(rule, "onPodConditions", |c| {
                default_str(c, "status", "True")
            });
        });
    }
    default_template(spec);
    // The Job takes its template's labels when it has none of its own.
    if let Some(labels) = template_labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        && let Some(meta) = obj_at(obj, "metadata")
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
}

/// The Job strategy's generated selector (upstream `generateSelector`, applied on create unless
/// `spec.manualSelector` is true): template labels `batch.kubernetes.io/controller-uid`,
/// `batch.kubernetes.io/job-name`, `controller-uid`, `job-name` (user-set ones are kept) and the
/// selector `matchLabels[batch.kubernetes.io/controller-uid] = uid`. Call before
/// `default_object`, which then also copies the template labels onto a Job without labels.
pub fn default_job_selector(obj: &mut Value, uid: &str) {
    let name = obj
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(m) = obj.as_object_mut() else { return };
    let Some(spec) = obj_at(m, "spec") else {
        return;
    };
    if spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if let Some(template) = obj_at(spec, "template")
        && let Some(meta) = obj_at(template, "metadata")
        && let Some(labels) = obj_at(meta, "labels")
    {
        for key in [LABEL_LEGACY_JOB_NAME, LABEL_JOB_NAME] {
            labels.entry(key).or_insert_with(|| json!(name));
        }
        for key in [LABEL_LEGACY_CONTROLLER_UID, LABEL_CONTROLLER_UID] {
            labels.entry(key).or_insert_with(|| json!(uid));
        }
    }
    if let Some(selector) = obj_at(spec, "selector")
        && let Some(ml) = obj_at(selector, "matchLabels")
    {
        ml.entry(LABEL_CONTROLLER_UID).or_insert_with(|| json!(uid));
    }
}

// ---------------------------------------------------------------------------------------------
// Other kinds
// ---------------------------------------------------------------------------------------------

fn default_namespace(obj: &mut Map<String, Value>) {
    let name = obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .cloned()
        .unwrap_or(json!(""));
    // Upstream always (re)sets this label to the name, even over a client's value.
    if name.as_str().is_some_and(|n| !n.is_empty())
        && let Some(meta) = obj_at(obj, "metadata")
        && let Some(labels) = obj_at(meta, "labels")
    {
        labels.insert(LABEL_NAMESPACE_NAME.into(), name);
    }
    if let Some(status) = obj_at(obj, "status") {
        default_str(status, "phase", "Active");
    }
}

fn default_node(obj: &mut Map<String, Value>) {
    // `SetDefaults_NodeStatus`: allocatable defaults to capacity.
    if let Some(Value::Object(status)) = obj.get_mut("status")
        && let Some(capacity) = status.get("capacity").cloned()
        && status.get("allocatable").is_none_or(Value::is_null)
    {
        status.insert("allocatable".into(), capacity);
    }
}

fn default_service(spec: &mut Map<String, Value>) {
    default_str(spec, "sessionAffinity", "None");
    default_str(spec, "type", "ClusterIP");
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    for_each_obj_in(spec, "ports", |p| {
        default_str(p, "protocol", "TCP");
        let unset = match p.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if unset && let Some(port) = p.get("port").cloned() {
            p.insert("targetPort".into(), port);
        }
    });
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP")
        && let Some(cfg) = obj_at(spec, "sessionAffinityConfig")
        && let Some(cip) = obj_at(cfg, "clientIP")
    {
        default_field(cip, "timeoutSeconds", json!(10800));
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        default_str(spec, "internalTrafficPolicy", "Cluster");
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        default_str(spec, "externalTrafficPolicy", "Cluster");
    }
}

/// Applies the kind's defaults (idempotent; create and update).
/// `Secret.stringData` is write-only: upstream's conversion to the internal type copies each
/// entry into `data` (base64, overriding a `data` entry of the same key) and drops it, so it is
/// never stored or returned.
fn merge_string_data(m: &mut Map<String, Value>) {
    use base64::Engine as _;
    let Some(Value::Object(sd)) = m.remove("stringData") else {
        return;
    };
    if sd.is_empty() {
        return;
    }
    let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Some(data) = data.as_object_mut() {
        for (k, v) in sd {
            let text = match &v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text.as_bytes())),
            );
        }
    }
}

pub fn default_object(ri: &ResourceInfo, obj: &mut Value) {
    let Some(m) = obj.as_object_mut() else { return };
    match (ri.group, ri.kind) {
        ("", "Pod") => default_pod(m),
        ("", "Namespace") => default_namespace(m),
        ("", "Node") => default_node(m),
        (crate::rbac::GROUP, kind) => crate::rbac::default_object(kind, m),
        // `SetDefaults_PriorityClass`.
        ("scheduling.k8s.io", "PriorityClass") => {
            default_str(m, "preemptionPolicy", "PreemptLowerPriority")
        }
        ("", "Secret") => {
            merge_string_data(m);
            default_str(m, "type", "Opaque");
        }
        ("", "Service") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_service(spec);
            }
        }
        ("", "PersistentVolumeClaim") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_pvc_spec(spec);
            }
            if let Some(status) = obj_at(m, "status") {
                default_str(status, "phase", "Pending");
            }
        }
        ("", "PersistentVolume") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_str(spec, "persistentVolumeReclaimPolicy", "Retain");
                default_str(spec, "volumeMode", "Filesystem");
            }
            if let Some(status) = obj_at(m, "status") {
                default_str(status, "phase", "Pending");
            }
        }
        // `SetDefaults_StorageClass`.
        ("storage.k8s.io", "StorageClass") => {
            default_str(m, "reclaimPolicy", "Delete");
            default_str(m, "volumeBindingMode", "Immediate");
        }
        // `SetDefaults_CSIDriver`.
        ("storage.k8s.io", "CSIDriver") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_field(spec, "attachRequired", json!(true));
                default_field(spec, "podInfoOnMount", json!(false));
                default_field(spec, "storageCapacity", json!(false));
                default_field(spec, "requiresRepublish", json!(false));
                default_field(spec, "seLinuxMount", json!(false));
                default_str(spec, "fsGroupPolicy", "ReadWriteOnceWithFSType");
                let modes = spec
                    .get("volumeLifecycleModes")
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty());
                if !modes {
                    spec.insert("volumeLifecycleModes".into(), json!(["Persistent"]));
                }
            }
        }
        ("apps", "Deployment") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_deployment(spec);
            }
        }
        ("apps", "ReplicaSet") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_field(spec, "replicas", json!(1));
                default_template(spec);
            }
        }
        ("apps", "StatefulSet") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_statefulset(spec);
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_daemonset(spec);
            }
        }
        ("batch", "Job") => default_job(m),
        ("batch", "CronJob") => {
            if let Some(spec) = obj_at(m, "spec") {
                default_str(spec, "concurrencyPolicy", "Allow");
                default_field(spec, "suspend", json!(false));
                default_field(spec, "successfulJobsHistoryLimit", json!(3));
                default_field(spec, "failedJobsHistoryLimit", json!(1));
                // The job template's pod template is defaulted as any pod template; the Job's
                // own defaults come when the controller creates it.
                if let Some(jt) = obj_at(spec, "jobTemplate")
                    && let Some(js) = obj_at(jt, "spec")
                {
                    default_template(js);
                }
            }
        }
        // PodDisruptionBudget (policy/v1), Lease, Event, ConfigMap, …: no defaults upstream.
        _ => {}
    }
}

/// Create-only defaults that are not part of decoding upstream (strategy `PrepareForCreate`):
/// a Namespace starts with `spec.finalizers: ["kubernetes"]` (not re-added on updates, or the
/// `finalize` subresource could never clear it). Pods: see `default_pod_status_on_create`.
pub fn default_on_create(ri: &ResourceInfo, obj: &mut Value) {
    if ri.group.is_empty()
        && ri.kind == "Namespace"
        && let Some(m) = obj.as_object_mut()
        && let Some(spec) = obj_at(m, "spec")
    {
        spec.insert("finalizers".into(), json!(["kubernetes"]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::lookup_kind;

    fn ri(api_version: &str, kind: &str) -> &'static ResourceInfo {
        lookup_kind(api_version, kind).unwrap()
    }

    fn defaulted(ri: &ResourceInfo, mut obj: Value) -> Value {
        default_object(ri, &mut obj);
        obj
    }

    #[test]
    fn pull_policy_table() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("registry.local:5000/nginx", "Always"),
            ("registry.local:5000/nginx:1.0", "IfNotPresent"),
            ("nginx@sha256:abcd", "IfNotPresent"),
            ("nginx:latest@sha256:abcd", "Always"),
        ];
        for (image, want) in cases {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
    }

    #[test]
    fn pod_defaults_match_upstream_output() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}]}
        });
        let got = defaulted(ri("v1", "Pod"), pod);
        let want = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "imagePullPolicy": "Always", "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File", "resources": {}}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                "schedulerName": "default-scheduler", "securityContext": {}, "enableServiceLinks": true,
                "serviceAccountName": "default", "serviceAccount": "default"
            }
        });
        // (Upstream's stored pod also has `priority: 0` and `preemptionPolicy:
        // PreemptLowerPriority`: the Priority admission plugin's, tested in `admission`.)
        assert_eq!(got, want);
        // Idempotent: defaulting a defaulted object changes nothing.
        assert_eq!(defaulted(ri("v1", "Pod"), got.clone()), got);
    }

    #[test]
    fn pod_defaults_keep_client_values() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 5, "serviceAccountName": "robot",
            "enableServiceLinks": false, "hostNetwork": true,
            "containers": [{"name": "a", "image": "x:1", "imagePullPolicy": "Never",
                            "ports": [{"containerPort": 8080, "protocol": "UDP"}],
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
                            "readinessProbe": {"httpGet": {"port": 80}},
                            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "v"}, {"name": "c", "configMap": {"name": "cm"}}]
        }});
        let got = defaulted(ri("v1", "Pod"), pod);
        let spec = &got["spec"];
        assert_eq!(spec["restartPolicy"], "Never");
        assert_eq!(spec["terminationGracePeriodSeconds"], 5);
        assert_eq!(spec["serviceAccountName"], "robot");
        assert_eq!(spec["serviceAccount"], "robot");
        assert_eq!(spec["enableServiceLinks"], false);
        // Priority is admission's (it reads the PriorityClasses), not a default.
        assert_eq!(spec.get("priority"), None);
        assert_eq!(spec.get("preemptionPolicy"), None);
        let pc = defaulted(
            ri("scheduling.k8s.io/v1", "PriorityClass"),
            json!({"metadata": {"name": "high"}, "value": 1000}),
        );
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(
            c["ports"][0],
            json!({"containerPort": 8080, "protocol": "UDP", "hostPort": 8080})
        );
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "500m", "memory": "1Gi"})
        );
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            spec["volumes"],
            json!([{"name": "v", "emptyDir": {}}, {"name": "c", "configMap": {"name": "cm", "defaultMode": 420}}])
        );
    }

    #[test]
    fn qos_and_status_on_create() {
        let pod = |resources: Value| json!({"spec": {"containers": [{"name": "a", "image": "x", "resources": resources}]}});
        let cases = [
            (json!({}), "BestEffort"),
            (json!({"requests": {"cpu": "100m"}}), "Burstable"),
            (
                json!({"limits": {"cpu": "1", "memory": "1Gi"}}),
                "Guaranteed",
            ),
            (
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}),
                "Guaranteed",
            ),
            (
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}),
                "Burstable",
            ),
            (json!({"limits": {"cpu": "1"}}), "Burstable"),
            (
                json!({"requests": {"ephemeral-storage": "1Gi"}}),
                "BestEffort",
            ),
        ];
        for (resources, want) in cases {
            // Same class before and after defaulting (the API server computes it first).
            let mut raw = pod(resources.clone());
            default_pod_status_on_create(&mut raw);
            assert_eq!(
                raw["status"],
                json!({"phase": "Pending", "qosClass": want}),
                "{resources}"
            );
            let mut p = defaulted(ri("v1", "Pod"), pod(resources.clone()));
            default_pod_status_on_create(&mut p);
            assert_eq!(
                p["status"],
                json!({"phase": "Pending", "qosClass": want}),
                "{resources}"
            );
        }
        let mut p =
            json!({"spec": {"containers": []}, "status": {"phase": "Running", "podIP": "1.2.3.4"}});
        default_pod_status_on_create(&mut p);
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
    }

    #[test]
    fn workload_defaults() {
        let template = json!({"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "a", "image": "x:1"}]}});
        let d = defaulted(
            ri("apps/v1", "Deployment"),
            json!({"spec": {"template": template.clone()}}),
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        let tspec = &d["spec"]["template"]["spec"];
        assert_eq!(tspec["restartPolicy"], "Always");
        assert_eq!(tspec["containers"][0]["imagePullPolicy"], "IfNotPresent");
        // Pod-only defaults stay off templates.
        assert!(
            tspec.get("enableServiceLinks").is_none() && tspec.get("serviceAccountName").is_none()
        );
        // Recreate gets no rollingUpdate.
        let d = defaulted(
            ri("apps/v1", "Deployment"),
            json!({"spec": {"strategy": {"type": "Recreate"}, "replicas": 0}}),
        );
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(d["spec"]["replicas"], 0);

        let rs = defaulted(
            ri("apps/v1", "ReplicaSet"),
            json!({"spec": {"template": template.clone()}}),
        );
        assert_eq!(rs["spec"]["replicas"], 1);
        assert!(rs["spec"].get("revisionHistoryLimit").is_none());

        let sts = defaulted(
            ri("apps/v1", "StatefulSet"),
            json!({"spec": {"template": template.clone(), "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        );
        assert_eq!(sts["spec"]["replicas"], 1);
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(sts["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(
            sts["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["status"],
            json!({"phase": "Pending"})
        );

        let ds = defaulted(
            ri("apps/v1", "DaemonSet"),
            json!({"spec": {"template": template.clone()}}),
        );
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        let ds = defaulted(
            ri("apps/v1", "DaemonSet"),
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
        );
        assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn job_defaults_and_generated_selector() {
        let mut job = json!({
            "metadata": {"name": "pi", "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5"}]}}}
        });
        default_job_selector(&mut job, "uid-1");
        default_object(ri("batch/v1", "Job"), &mut job);
        let labels = json!({
            "job-name": "pi", "batch.kubernetes.io/job-name": "pi",
            "controller-uid": "uid-1", "batch.kubernetes.io/controller-uid": "uid-1"
        });
        assert_eq!(job["spec"]["template"]["metadata"]["labels"], labels);
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}})
        );
        assert_eq!(job["metadata"]["labels"], labels);
        let spec = &job["spec"];
        assert_eq!(
            (
                &spec["parallelism"],
                &spec["completions"],
                &spec["backoffLimit"],
                &spec["completionMode"],
                &spec["suspend"],
                &spec["podReplacementPolicy"]
            ),
            (
                &json!(1),
                &json!(1),
                &json!(6),
                &json!("NonIndexed"),
                &json!(false),
                &json!("TerminatingOrFailed")
            )
        );
        assert!(spec.get("manualSelector").is_none());

        // parallelism alone leaves completions unset; podFailurePolicy switches the policy.
        let j = defaulted(
            ri("batch/v1", "Job"),
            json!({"metadata": {"name": "j", "labels": {"own": "x"}}, "spec": {"parallelism": 3, "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "template": {"metadata": {"labels": {"t": "1"}}}}}),
        );
        assert_eq!(j["spec"]["parallelism"], 3);
        assert!(j["spec"].get("completions").is_none());
        assert_eq!(j["spec"]["podReplacementPolicy"], "Failed");
        assert_eq!(
            j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );
        assert_eq!(j["metadata"]["labels"], json!({"own": "x"}));

        // A manual selector is left alone.
        let mut manual = json!({"metadata": {"name": "m"}, "spec": {"manualSelector": true, "selector": {"matchLabels": {"a": "b"}}}});
        let before = manual.clone();
        default_job_selector(&mut manual, "uid-2");
        assert_eq!(manual, before);
    }

    #[test]
    fn namespace_node_service_pvc_defaults() {
        let mut ns = json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "forged"}}});
        default_on_create(ri("v1", "Namespace"), &mut ns);
        default_object(ri("v1", "Namespace"), &mut ns);
        assert_eq!(
            ns,
            json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        // Updates do not bring back finalizers that `finalize` removed.
        let mut finalized =
            json!({"metadata": {"name": "team-a"}, "spec": {}, "status": {"phase": "Terminating"}});
        default_object(ri("v1", "Namespace"), &mut finalized);
        assert_eq!(finalized["spec"], json!({}));
        assert_eq!(finalized["status"]["phase"], "Terminating");

        let node = defaulted(
            ri("v1", "Node"),
            json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4", "pods": "110"}}}),
        );
        assert_eq!(
            node["status"]["allocatable"],
            json!({"cpu": "4", "pods": "110"})
        );

        let svc = defaulted(
            ri("v1", "Service"),
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]}}),
        );
        assert_eq!(
            svc["spec"],
            json!({"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 443, "targetPort": "https", "protocol": "TCP"}],
                   "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster"})
        );

        let pvc = defaulted(
            ri("v1", "PersistentVolumeClaim"),
            json!({"metadata": {"name": "d"}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
        );
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"]["phase"], "Pending");

        let secret = defaulted(ri("v1", "Secret"), json!({"metadata": {"name": "s"}}));
        assert_eq!(secret["type"], "Opaque");

        // Kinds without defaults are untouched.
        let lease = json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}});
        assert_eq!(
            defaulted(ri("coordination.k8s.io/v1", "Lease"), lease.clone()),
            lease
        );
    }
}
