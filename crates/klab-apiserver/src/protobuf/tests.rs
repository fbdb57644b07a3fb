//! Protobuf tests: JSON → protobuf → JSON round trips for every served kind, the special types
//! against hand-checked wire bytes, envelope errors, and protobuf requests and responses through
//! the Router (bad bodies answer a Status and store nothing).

use serde_json::{Value, json};

use super::codec::{self, decode, encode};
use super::*;
use crate::registry::RESOURCES;

fn meta(name: &str, namespaced: bool) -> Value {
    let mut m = json!({
        "name": name,
        "generateName": "gen-",
        "uid": "0b1c2d3e-0000-4000-8000-000000000001",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2026-11-22T08:00:00Z",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "x", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
            "uid": "0b1c2d3e-0000-4000-8000-000000000002", "controller": true, "blockOwnerDeletion": true}],
        "finalizers": ["example.com/keep"],
        "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-22T08:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
    });
    if namespaced {
        m["namespace"] = json!("default");
    }
    m
}

fn pod_spec() -> Value {
    json!({
        "containers": [{"name": "c", "image": "nginx:1.27", "command": ["sh", "-c", "sleep 1"],
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
            "livenessProbe": {"tcpSocket": {"port": 80}, "failureThreshold": 3},
            "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": true},
            "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 0,
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
        "volumes": [{"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420}}],
        "priority": 1000,
        "schedulerName": "default-scheduler"
    })
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()})
}

fn selector() -> Value {
    json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})
}

/// One example object per served kind, with its kind's characteristic fields (and Kubernetes'
/// special types: times, quantities, int-or-strings, bytes, raw extensions).
fn example(kind: &str, group: &str) -> Option<Value> {
    let body = match (group, kind) {
        ("", "Namespace") => {
            json!({"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        }
        ("", "Node") => {
            json!({"spec": {"podCIDR": "10.244.1.0/24", "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-22T08:01:00Z"}], "unschedulable": true},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "3900m"},
                "conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-11-22T08:00:00Z", "lastTransitionTime": "2026-11-22T08:00:40Z", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6", "osImage": "klab", "containerRuntimeVersion": "klab://1", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}})
        }
        ("", "Pod") => {
            json!({"spec": pod_spec(), "status": {"phase": "Running", "podIP": "10.244.1.5", "podIPs": [{"ip": "10.244.1.5"}],
            "startTime": "2026-11-22T08:00:01Z", "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T08:00:02Z"}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2, "image": "nginx:1.27", "imageID": "", "started": true,
                "state": {"running": {"startedAt": "2026-11-22T08:00:02Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": "2026-11-22T07:59:00Z", "finishedAt": "2026-11-22T08:00:00Z"}}}]}})
        }
        ("", "Event") => {
            json!({"involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "u"},
            "reason": "Scheduled", "message": "Successfully assigned", "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-11-22T08:00:00Z", "lastTimestamp": "2026-11-22T08:00:05Z", "count": 2, "type": "Normal",
            "eventTime": "2026-11-22T08:00:00.123456Z", "series": {"count": 2, "lastObservedTime": "2026-11-22T08:00:05.000001Z"},
            "reportingComponent": "kubelet", "reportingInstance": "n1", "action": "Binding"})
        }
        ("", "ConfigMap") => {
            json!({"data": {"a": "1", "b": "two"}, "binaryData": {"bin": "AAEC/w=="}, "immutable": true})
        }
        ("", "Secret") => {
            json!({"type": "Opaque", "data": {"password": "cGFzcw==", "empty": ""}, "immutable": true})
        }
        ("", "Service") => {
            json!({"spec": {"type": "NodePort", "selector": {"app": "web"}, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080, "protocol": "TCP"}, {"name": "m", "port": 9090, "targetPort": 9091, "protocol": "UDP"}],
            "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}}})
        }
        ("", "Endpoints") => {
            json!({"subsets": [{"addresses": [{"ip": "10.244.1.5", "nodeName": "n1", "targetRef": {"kind": "Pod", "name": "web", "namespace": "default"}}],
            "notReadyAddresses": [{"ip": "10.244.1.6"}], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]})
        }
        ("", "ServiceAccount") => {
            json!({"secrets": [{"name": "tok"}], "automountServiceAccountToken": true})
        }
        ("", "PersistentVolume") => {
            json!({"spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "standard", "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"}},
            "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-11-22T08:00:00Z"}})
        }
        ("", "PersistentVolumeClaim") => {
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}})
        }
        ("", "ResourceQuota") => {
            json!({"spec": {"hard": {"pods": "3", "requests.cpu": "2"}, "scopes": ["NotTerminating"]}, "status": {"hard": {"pods": "3"}, "used": {"pods": "1"}}})
        }
        ("", "LimitRange") => {
            json!({"spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "250m"}, "max": {"memory": "1Gi"}}]}})
        }
        ("apps", "Deployment") => {
            json!({"spec": {"replicas": 0, "selector": selector(), "template": template(), "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}, "minReadySeconds": 5, "paused": true},
            "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1,
                "conditions": [{"type": "Available", "status": "False", "lastUpdateTime": "2026-11-22T08:00:00Z", "lastTransitionTime": "2026-11-22T08:00:00Z", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability."}]}})
        }
        ("apps", "ReplicaSet") => {
            json!({"spec": {"replicas": 2, "selector": selector(), "template": template(), "minReadySeconds": 1},
            "status": {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 3}})
        }
        ("apps", "StatefulSet") => {
            json!({"spec": {"replicas": 3, "selector": selector(), "template": template(), "serviceName": "web", "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": "50%"}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}},
            "status": {"replicas": 3, "currentRevision": "web-1", "updateRevision": "web-1", "collisionCount": 1, "availableReplicas": 3}})
        }
        ("apps", "DaemonSet") => {
            json!({"spec": {"selector": selector(), "template": template(), "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}},
            "status": {"currentNumberScheduled": 2, "numberMisscheduled": 1, "desiredNumberScheduled": 2, "numberReady": 1}})
        }
        ("apps", "ControllerRevision") => {
            json!({"data": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}, "revision": 7})
        }
        ("batch", "Job") => {
            json!({"spec": {"parallelism": 2, "completions": 4, "backoffLimit": 0, "activeDeadlineSeconds": 60, "ttlSecondsAfterFinished": 100,
            "completionMode": "NonIndexed", "suspend": true, "selector": selector(), "manualSelector": true, "template": template(),
            "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2, 42]}}]}},
            "status": {"active": 1, "succeeded": 2, "failed": 1, "ready": 1, "startTime": "2026-11-22T08:00:00Z", "uncountedTerminatedPods": {"succeeded": ["u1"]},
                "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": "2026-11-22T08:01:00Z", "lastTransitionTime": "2026-11-22T08:01:00Z"}]}})
        }
        ("batch", "CronJob") => {
            json!({"spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 30, "suspend": true,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"metadata": {"labels": {"app": "tick"}}, "spec": {"backoffLimit": 2, "template": template()}}},
            "status": {"active": [{"kind": "Job", "name": "tick-1", "namespace": "default", "uid": "u1"}],
                "lastScheduleTime": "2026-11-22T08:00:00Z", "lastSuccessfulTime": "2026-11-22T07:55:00Z"}})
        }
        ("authentication.k8s.io", "SelfSubjectReview") => {
            json!({"status": {"userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}}})
        }
        ("authentication.k8s.io", "TokenReview") => {
            json!({"spec": {"token": "a.b.c", "audiences": ["api"]},
            "status": {"authenticated": true, "user": {"username": "system:serviceaccount:default:sa", "uid": "u", "groups": ["system:authenticated"]}, "audiences": ["api"]}})
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            json!({"spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}},
            "status": {"allowed": true}})
        }
        ("authorization.k8s.io", "LocalSubjectAccessReview" | "SubjectAccessReview") => {
            json!({"spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "group": "apps", "resource": "deployments"},
                "user": "alice", "groups": ["dev"]},
            "status": {"allowed": false, "denied": true, "reason": "no"}})
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            json!({"spec": {"namespace": "default"},
            "status": {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": false}})
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            json!({"spec": {"request": "LS0tLS1CRUdJTg==", "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "expirationSeconds": 3600, "usages": ["digital signature", "client auth"], "username": "system:bootstrap:abcdef",
                "groups": ["system:bootstrappers", "system:authenticated"], "extra": {"scopes": ["a", "b"]}},
            "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved", "message": "ok",
                "lastUpdateTime": "2026-11-22T08:00:00Z"}], "certificate": "Y2VydA=="}})
        }
        ("coordination.k8s.io", "Lease") => {
            json!({"spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-11-22T08:00:10.654321Z",
            "acquireTime": "2026-11-22T08:00:00.000000Z", "leaseTransitions": 1}})
        }
        ("discovery.k8s.io", "EndpointSlice") => json!({"addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.1.5"], "conditions": {"ready": true, "serving": true, "terminating": false}, "nodeName": "n1", "zone": "a",
                "targetRef": {"kind": "Pod", "name": "web", "namespace": "default"}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
        ("events.k8s.io", "Event") => {
            json!({"eventTime": "2026-11-22T08:00:00.500000Z", "reportingController": "default-scheduler", "reportingInstance": "s",
            "action": "Binding", "reason": "Scheduled", "regarding": {"kind": "Pod", "name": "web", "namespace": "default"}, "note": "Successfully assigned", "type": "Normal",
            "deprecatedCount": 1, "deprecatedFirstTimestamp": "2026-11-22T08:00:00Z"})
        }
        ("policy", "PodDisruptionBudget") => {
            json!({"spec": {"minAvailable": "50%", "selector": selector(), "unhealthyPodEvictionPolicy": "AlwaysAllow"},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 2,
                "disruptedPods": {"web-1": "2026-11-22T08:00:00Z"},
                "conditions": [{"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "", "lastTransitionTime": "2026-11-22T08:00:00Z", "observedGeneration": 1}]}})
        }
        ("rbac.authorization.k8s.io", "ClusterRole") => {
            json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-x": "true"}}]},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"], "resourceNames": ["web"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/api/*"]}]})
        }
        ("rbac.authorization.k8s.io", "Role") => {
            json!({"rules": [{"verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments/scale"]}]})
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding" | "RoleBinding") => {
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "ServiceAccount", "name": "default", "namespace": "default"}]})
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            json!({"value": 1000000, "globalDefault": true, "description": "high", "preemptionPolicy": "Never"})
        }
        ("storage.k8s.io", "StorageClass") => {
            json!({"provisioner": "csi.klab.dev", "parameters": {"type": "ssd"}, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true, "mountOptions": ["ro"]})
        }
        ("storage.k8s.io", "CSIDriver") => {
            json!({"spec": {"attachRequired": true, "podInfoOnMount": true, "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "volumeLifecycleModes": ["Persistent"], "storageCapacity": true, "requiresRepublish": true, "seLinuxMount": true}})
        }
        ("storage.k8s.io", "CSINode") => {
            json!({"spec": {"drivers": [{"name": "csi.klab.dev", "nodeID": "n1", "topologyKeys": ["topology.kubernetes.io/zone"],
            "allocatable": {"count": 16}}]}})
        }
        ("storage.k8s.io", "VolumeAttachment") => {
            json!({"spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}},
            "status": {"attached": true, "attachmentMetadata": {"dev": "/dev/xvdb"}}})
        }
        _ => return None,
    };
    Some(body)
}

/// An example object, normalised through the kind's typed model as stored objects are.
fn stored_example(ri: &ResourceInfo) -> Value {
    let mut obj = example(ri.kind, ri.group)
        .unwrap_or_else(|| panic!("add an example for {} {}", ri.group, ri.kind));
    obj["apiVersion"] = json!(ri.api_version());
    obj["kind"] = json!(ri.kind);
    obj["metadata"] = meta("web", ri.namespaced);
    let (pruned, unknown) = crate::schema::prune(ri, &obj).expect("example decodes");
    assert!(
        unknown.is_empty(),
        "{} example has unknown fields {unknown:?}",
        ri.kind
    );
    pruned
}

/// Drops what JSON never writes (zero scalars outside the schema's required fields, which a
/// protobuf decode cannot tell from unset) so that both sides compare as upstream's would.
fn round_trip(ri: &ResourceInfo, obj: &Value) -> Value {
    let bytes = encode_envelope(&ri.api_version(), ri.kind, obj).expect("encode");
    assert!(bytes.starts_with(MAGIC));
    let (api_version, kind, back) = decode_envelope(&bytes).expect("decode");
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        (ri.api_version().as_str(), ri.kind)
    );
    let mut back = back;
    back["apiVersion"] = json!(api_version);
    back["kind"] = json!(kind);
    crate::schema::prune(ri, &back).expect("typed").0
}

/// The paths where two JSON values differ, for readable failures.
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(l), Some(r)) => diff(l, r, &p, out),
                    (l, r) => out.push(format!("{p}: {l:?} vs {r:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (l, r)) in x.iter().zip(y).enumerate() {
                diff(l, r, &format!("{path}[{i}]"), out);
            }
        }
        (l, r) if l != r => out.push(format!("{path}: {l} vs {r}")),
        _ => {}
    }
}

#[test]
fn every_served_kind_round_trips_json_protobuf_json() {
    for ri in RESOURCES {
        assert!(supports(ri), "{} has no protobuf message", ri.kind);
        // Never stored, so no typed model to normalise an example through: see
        // `metrics_kinds_round_trip`.
        if crate::registry::is_metrics(ri) {
            continue;
        }
        let obj = stored_example(ri);
        let back = round_trip(ri, &obj);
        let mut d = Vec::new();
        diff(&back, &obj, "", &mut d);
        assert!(d.is_empty(), "{} {} round trip: {d:#?}", ri.group, ri.kind);
        // Reviews are never listed (and have no list message).
        if crate::registry::is_review(ri) {
            continue;
        }
        // Lists of every kind too.
        let list = json!({"apiVersion": ri.api_version(), "kind": ri.list_kind(),
            "metadata": {"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3}, "items": [obj.clone(), obj]});
        let bytes = encode_envelope(&ri.api_version(), &ri.list_kind(), &list).expect("list");
        let (_, _, back) = decode_envelope(&bytes).expect("list decode");
        assert_eq!(
            back["items"].as_array().map(Vec::len),
            Some(2),
            "{}",
            ri.kind
        );
        assert_eq!(
            back["metadata"],
            json!({"resourceVersion": "42", "continue": "abc", "remainingItemCount": 3})
        );
    }
}

#[test]
fn pointer_zeros_survive_and_unset_scalars_stay_unset() {
    // What Go's marshaller writes for a Deployment with replicas=0: every non-pointer scalar
    // (minReadySeconds=0, paused=false) is on the wire too.
    let spec = json!({"replicas": 0, "minReadySeconds": 0, "paused": false, "selector": {}, "template": {}});
    let bytes = encode("k8s.io.api.apps.v1.DeploymentSpec", &spec).unwrap();
    let back = decode("k8s.io.api.apps.v1.DeploymentSpec", &bytes)
        .unwrap()
        .unwrap();
    assert_eq!(back, json!({"replicas": 0, "selector": {}, "template": {}}));
    let tol = json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0, "value": ""});
    let bytes = encode("k8s.io.api.core.v1.Toleration", &tol).unwrap();
    assert_eq!(
        decode("k8s.io.api.core.v1.Toleration", &bytes)
            .unwrap()
            .unwrap(),
        json!({"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0})
    );
    // A required scalar keeps its zero (containerPort is required, so JSON always writes it).
    let port = json!({"containerPort": 0});
    let bytes = encode("k8s.io.api.core.v1.ContainerPort", &port).unwrap();
    assert_eq!(
        decode("k8s.io.api.core.v1.ContainerPort", &bytes)
            .unwrap()
            .unwrap(),
        port
    );
}

#[test]
fn special_types_match_upstream_wire_bytes() {
    const TIME: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Time";
    const MICRO: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime";
    const IOS: &str = "k8s.io.apimachinery.pkg.util.intstr.IntOrString";
    // Time: seconds only (Go drops nanos for Time); 2026-11-22T08:00:00Z = 1795334400.
    let t = encode(TIME, &json!("2026-11-22T08:00:00Z")).unwrap();
    let mut want = vec![0x08];
    codec::put_varint(&mut want, 1_795_334_400);
    assert_eq!(t, want);
    assert_eq!(
        decode(TIME, &t).unwrap(),
        Some(json!("2026-11-22T08:00:00Z"))
    );
    // A zero Time is an empty message and absent in JSON.
    assert_eq!(decode(TIME, &[]).unwrap(), None);
    let m = encode(MICRO, &json!("2026-11-22T08:00:00.123456Z")).unwrap();
    assert_eq!(
        decode(MICRO, &m).unwrap(),
        Some(json!("2026-11-22T08:00:00.123456Z"))
    );
    // IntOrString: Go writes type, intVal and strVal.
    assert_eq!(
        encode(IOS, &json!(8080)).unwrap(),
        vec![0x08, 0x00, 0x10, 0x90, 0x3f, 0x1a, 0x00]
    );
    assert_eq!(
        encode(IOS, &json!("http")).unwrap(),
        vec![0x08, 0x01, 0x10, 0x00, 0x1a, 0x04, b'h', b't', b't', b'p']
    );
    assert_eq!(
        decode(IOS, &[0x08, 0x00, 0x10, 0x90, 0x3f]).unwrap(),
        Some(json!(8080))
    );
    // Negative int32 travels sign-extended in ten bytes and comes back.
    let probe = json!({"exitCode": -1});
    let b = encode("k8s.io.api.core.v1.ContainerStateTerminated", &probe).unwrap();
    assert_eq!(b.len(), 11);
    assert_eq!(
        decode("k8s.io.api.core.v1.ContainerStateTerminated", &b)
            .unwrap()
            .unwrap()["exitCode"],
        -1
    );
    // Bytes are base64 in JSON; a map entry is {1: key, 2: value}, keys in order.
    let s = encode(
        "k8s.io.api.core.v1.Secret",
        &json!({"data": {"b": "AQ==", "a": ""}}),
    )
    .unwrap();
    assert_eq!(
        s,
        vec![
            0x12, 0x05, 0x0a, 0x01, b'a', 0x12, 0x00, 0x12, 0x06, 0x0a, 0x01, b'b', 0x12, 0x01,
            0x01
        ]
    );
    // Status, the one meta kind a client decodes in any group.
    assert_eq!(
        message_for("v1", "Status").as_deref(),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.Status")
    );
    assert_eq!(
        message_for("meta.k8s.io/v1", "DeleteOptions").as_deref(),
        Some("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
    );
    assert_eq!(
        message_for("policy/v1", "Eviction").as_deref(),
        Some("k8s.io.api.policy.v1.Eviction")
    );
    assert_eq!(message_for("example.com/v1", "Widget"), None);
}

#[test]
fn corrupted_envelopes_are_errors_not_panics() {
    let good = encode_envelope(
        "v1",
        "ConfigMap",
        &json!({"metadata": {"name": "x"}, "data": {"a": "b"}}),
    )
    .unwrap();
    assert!(decode_envelope(&good).is_ok());
    assert!(
        decode_envelope(b"{}")
            .unwrap_err()
            .contains("expected prefix")
    );
    assert!(decode_envelope(MAGIC).unwrap_err().contains("Kind"));
    // Every truncation is an error or a smaller valid message, never a panic.
    for cut in 0..good.len() {
        let _ = decode_envelope(&good[..cut]);
    }
    // An unknown kind.
    let odd = encode_envelope("v1", "ConfigMap", &json!({})).unwrap();
    let odd: Vec<u8> = odd
        .iter()
        .map(|b| if *b == b'C' { b'X' } else { *b })
        .collect();
    assert!(decode_envelope(&odd).unwrap_err().contains("XonfigMap"));
    // Random bytes after the magic, seeded.
    let rng = klab_api::DetRng::seeded(7);
    for _ in 0..2000 {
        let mut b = MAGIC.to_vec();
        b.extend((0..rng.range(0, 80)).map(|_| rng.range(0, 256) as u8));
        let _ = decode_envelope(&b);
        // And bit flips of a valid envelope.
        let mut g = good.clone();
        let i = rng.range(4, g.len() as u64) as usize;
        g[i] ^= 1 << rng.range(0, 8);
        let _ = decode_envelope(&g);
    }
    // Deep nesting is refused, not followed.
    let mut deep = Vec::new();
    for _ in 0..200 {
        let mut outer = Vec::new();
        codec::put_bytes(&mut outer, 1, &deep);
        deep = outer;
    }
    assert!(decode("k8s.io.api.core.v1.NodeSelector", &deep).is_err());
}

#[test]
fn negotiation_follows_the_accept_order() {
    assert!(wants_protobuf(
        "application/vnd.kubernetes.protobuf,application/json"
    ));
    assert!(wants_protobuf(
        "application/vnd.kubernetes.protobuf;q=1, */*"
    ));
    assert!(!wants_protobuf(
        "application/json,application/vnd.kubernetes.protobuf"
    ));
    assert!(!wants_protobuf(
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
    ));
    assert!(!wants_protobuf(""));
    assert!(!wants_protobuf("*/*"));
    assert!(wants_protobuf_metadata(
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    ));
    assert!(!wants_protobuf_metadata(
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    ));
}

#[test]
fn watch_frames_are_length_prefixed_bare_watch_events() {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let f = watch_frame("ADDED", &obj).unwrap();
    let len = u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize;
    assert_eq!(len, f.len() - 4);
    let ev = decode("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent", &f[4..])
        .unwrap()
        .unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "x");
    assert_eq!(ev["object"]["kind"], "ConfigMap");
}

// ---------------------------------------------------------------------------------------------
// Through the Router

async fn call(
    api: &crate::ApiServer,
    method: &str,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    use tower::ServiceExt;
    let req = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .header("accept", accept)
        .body(axum::body::Body::from(body))
        .unwrap();
    let resp = api.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, ct, bytes.to_vec())
}

const PB_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

#[tokio::test(start_paused = true)]
async fn protobuf_create_get_list_and_delete_through_the_router() {
    let api = crate::testing::memory_server().await;
    let ns = encode_envelope(
        "v1",
        "Namespace",
        &json!({"metadata": {"name": "pb"}, "spec": {}, "status": {}}),
    )
    .unwrap();
    let (code, ct, body) = call(
        &api,
        "POST",
        "/api/v1/namespaces",
        MEDIA_TYPE,
        PB_ACCEPT,
        ns,
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (201, MEDIA_TYPE),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (_, kind, created) = decode_envelope(&body).unwrap();
    assert_eq!(kind, "Namespace");
    assert_eq!(created["status"]["phase"], "Active");
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));

    // A Deployment as kubectl create deployment --replicas=0 sends it.
    let dep = json!({"metadata": {"name": "web", "labels": {"app": "web"}, "creationTimestamp": null},
        "spec": {"replicas": 0, "minReadySeconds": 0, "paused": false, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx", "stdin": false, "tty": false}], "hostNetwork": false}},
            "strategy": {}}, "status": {}});
    let bytes = encode_envelope("apps/v1", "Deployment", &dep).unwrap();
    let (code, _, body) = call(
        &api,
        "POST",
        "/apis/apps/v1/namespaces/pb/deployments",
        MEDIA_TYPE,
        "application/json",
        bytes,
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["spec"]["replicas"], 0, "explicit zero kept: {v}");
    assert_eq!(v["spec"]["revisionHistoryLimit"], 10, "defaulted");
    assert!(
        v["spec"]["template"]["spec"].get("hostNetwork").is_none(),
        "unset: {v}"
    );
    assert!(
        v["spec"]["template"]["spec"]["containers"][0]
            .get("stdin")
            .is_none()
    );

    // GET and LIST in protobuf; a Table stays JSON.
    let (code, ct, body) = call(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/pb/deployments/web",
        "",
        PB_ACCEPT,
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    assert_eq!(decode_envelope(&body).unwrap().2["spec"]["replicas"], 0);
    let (code, ct, body) = call(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/pb/deployments",
        "",
        PB_ACCEPT,
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let (_, kind, list) = decode_envelope(&body).unwrap();
    assert_eq!(kind, "DeploymentList");
    assert_eq!(list["items"][0]["metadata"]["name"], "web");
    let (_, ct, _) = call(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/pb/deployments",
        "",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        vec![],
    )
    .await;
    assert_eq!(ct, "application/json");

    // Metadata-only, as client-go's metadata client asks for it.
    let meta_accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let (code, ct, body) = call(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/pb/deployments",
        "",
        meta_accept,
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, MEDIA_TYPE));
    let (api_version, kind, list) = decode_envelope(&body).unwrap();
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadataList")
    );
    assert_eq!(
        list["items"][0]["metadata"]["labels"],
        json!({"app": "web"})
    );
    assert!(list["items"][0].get("spec").is_none());

    // DELETE with a protobuf DeleteOptions body.
    let opts = encode_envelope(
        "meta.k8s.io/v1",
        "DeleteOptions",
        &json!({"propagationPolicy": "Background", "gracePeriodSeconds": 0}),
    )
    .unwrap();
    let (code, _, body) = call(
        &api,
        "DELETE",
        "/apis/apps/v1/namespaces/pb/deployments/web",
        MEDIA_TYPE,
        "application/json",
        opts,
    )
    .await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let (code, _, _) = call(
        &api,
        "GET",
        "/apis/apps/v1/namespaces/pb/deployments/web",
        "",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test(start_paused = true)]
async fn bad_protobuf_bodies_get_a_status_and_store_nothing() {
    let api = crate::testing::memory_server().await;
    let before = api.store().current_revision();
    let wrong_kind = encode_envelope("v1", "Service", &json!({"metadata": {"name": "s"}})).unwrap();
    let invalid = encode_envelope("v1", "Pod", &json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap();
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"k8s\0".to_vec(), 400, "Kind"),
        (b"not protobuf".to_vec(), 400, "expected prefix"),
        (
            b"k8s\0\x0a\xff\xff\xff\xff\x0f".to_vec(),
            400,
            "unexpected end",
        ),
        (wrong_kind, 400, "does not match the expected kind"),
        (invalid, 422, "Bad_Name"),
    ];
    let rng = klab_api::DetRng::seeded(9);
    let mut fuzz: Vec<Vec<u8>> = Vec::new();
    let good = encode_envelope(
        "v1",
        "Pod",
        &json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    for _ in 0..300 {
        let mut g = good.clone();
        for _ in 0..rng.range(1, 4) {
            let i = rng.range(4, g.len() as u64) as usize;
            g[i] = rng.range(0, 256) as u8;
        }
        fuzz.push(g);
    }
    for (body, want, text) in cases {
        let (code, ct, resp) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/pods",
            MEDIA_TYPE,
            PB_ACCEPT,
            body,
        )
        .await;
        let v: Value = serde_json::from_slice(&resp).unwrap();
        assert_eq!((code, ct.as_str()), (want, "application/json"), "{v}");
        assert_eq!(v["kind"], "Status");
        assert!(v["message"].as_str().unwrap().contains(text), "{v}");
    }
    assert_eq!(api.store().current_revision(), before, "nothing stored");
    for body in fuzz {
        let (code, ct, resp) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/pods",
            MEDIA_TYPE,
            PB_ACCEPT,
            body,
        )
        .await;
        if code >= 400 {
            let v: Value = serde_json::from_slice(&resp).unwrap();
            assert_eq!(
                (v["kind"].as_str(), ct.as_str()),
                (Some("Status"), "application/json")
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn protobuf_watch_streams_length_prefixed_events() {
    let api = crate::testing::memory_server().await;
    let cm = encode_envelope(
        "v1",
        "ConfigMap",
        &json!({"metadata": {"name": "w"}, "data": {"k": "v"}}),
    )
    .unwrap();
    let (code, _, _) = call(
        &api,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        MEDIA_TYPE,
        PB_ACCEPT,
        cm,
    )
    .await;
    assert_eq!(code, 201);
    let (code, ct, body) = call(
        &api,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
        "",
        "application/vnd.kubernetes.protobuf;stream=watch, application/json",
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (200, WATCH_MEDIA_TYPE));
    let mut events = Vec::new();
    let mut rest = body.as_slice();
    while rest.len() >= 4 {
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let frame = &rest[4..4 + len];
        events.push(
            decode("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent", frame)
                .unwrap()
                .unwrap(),
        );
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["data"], json!({"k": "v"}));
    // A JSON watch of the same resource is unchanged.
    let (_, ct, body) = call(
        &api,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
        "",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(ct, "application/json");
    assert!(String::from_utf8_lossy(&body).starts_with("{\"type\":\"ADDED\""));
}

/// NodeMetrics and PodMetrics lists as `kubectl top` receives them (it asks for protobuf).
#[test]
fn metrics_kinds_round_trip() {
    let meta =
        json!({"name": "n1", "creationTimestamp": "2026-01-01T00:00:15Z", "labels": {"a": "b"}});
    let node = json!({"metadata": meta, "timestamp": "2026-01-01T00:00:10Z", "window": "14.5s",
        "usage": {"cpu": "250m", "memory": "100Mi"}});
    let pod = json!({"metadata": {"name": "web", "namespace": "default",
            "creationTimestamp": "2026-01-01T00:00:15Z"},
        "timestamp": "2026-01-01T00:00:10Z", "window": "15s",
        "containers": [{"name": "app", "usage": {"cpu": "123456789n", "memory": "1536"}}]});
    for (kind, item) in [("NodeMetricsList", node), ("PodMetricsList", pod)] {
        let list = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": kind,
            "metadata": {}, "items": [item.clone()]});
        let bytes = encode_envelope("metrics.k8s.io/v1beta1", kind, &list).expect(kind);
        let (api_version, k, back) = decode_envelope(&bytes).expect("decode");
        assert_eq!(
            (api_version.as_str(), k.as_str()),
            ("metrics.k8s.io/v1beta1", kind)
        );
        let mut d = Vec::new();
        diff(&back["items"][0], &item, "", &mut d);
        assert!(d.is_empty(), "{kind}: {d:#?}");
    }
}
