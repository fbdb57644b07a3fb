//! Well-known strings copied verbatim from upstream Kubernetes: taint keys, labels, condition types,
//! reasons, messages, component names. They are identifiers: never reword them.
//!
//! Components add the strings they need here (append at the end of the relevant section).

// ---- taint keys (k8s.io/api core/v1 well_known_taints.go) ----
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
pub const TAINT_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
pub const TAINT_CLOUD_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

// ---- taint effects / toleration operators ----
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
pub const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
pub const OP_EXISTS: &str = "Exists";
pub const OP_EQUAL: &str = "Equal";

// ---- labels ----
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
pub const LABEL_EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
pub const LABEL_NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
pub const LABEL_ROLE_CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

// ---- namespaces ----
pub const NS_DEFAULT: &str = "default";
pub const NS_KUBE_SYSTEM: &str = "kube-system";
pub const NS_KUBE_PUBLIC: &str = "kube-public";
pub const NS_NODE_LEASE: &str = "kube-node-lease";

// ---- node condition types ----
pub const COND_READY: &str = "Ready";
pub const COND_MEMORY_PRESSURE: &str = "MemoryPressure";
pub const COND_DISK_PRESSURE: &str = "DiskPressure";
pub const COND_PID_PRESSURE: &str = "PIDPressure";
pub const COND_NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

// ---- pod condition types ----
pub const POD_COND_SCHEDULED: &str = "PodScheduled";
pub const POD_COND_READY_TO_START: &str = "PodReadyToStartContainers";
pub const POD_COND_INITIALIZED: &str = "Initialized";
pub const POD_COND_CONTAINERS_READY: &str = "ContainersReady";
pub const POD_COND_READY: &str = "Ready";
pub const POD_COND_DISRUPTION_TARGET: &str = "DisruptionTarget";

// ---- node lifecycle controller ----
pub const REASON_NODE_STATUS_UNKNOWN: &str = "NodeStatusUnknown";
pub const REASON_NODE_STATUS_NEVER_UPDATED: &str = "NodeStatusNeverUpdated";
pub const MSG_KUBELET_STOPPED_POSTING: &str = "Kubelet stopped posting node status.";
pub const MSG_KUBELET_NEVER_POSTED: &str = "Kubelet never posted node status.";

// ---- taint eviction / pod GC / eviction API (DisruptionTarget reasons and messages) ----
pub const REASON_DELETION_BY_TAINT_MANAGER: &str = "DeletionByTaintManager";
pub const MSG_DELETION_BY_TAINT_MANAGER: &str = "Taint manager: deleting due to NoExecute taint";
pub const REASON_DELETION_BY_POD_GC: &str = "DeletionByPodGC";
pub const MSG_DELETION_BY_POD_GC: &str = "PodGC: node no longer exists";
pub const REASON_EVICTION_BY_EVICTION_API: &str = "EvictionByEvictionAPI";
pub const MSG_EVICTION_BY_EVICTION_API: &str = "Eviction API: evicting";
pub const EVENT_TAINT_MANAGER_EVICTION: &str = "TaintManagerEviction";
/// The kubelet killed the pod (graceful node shutdown, node-pressure eviction).
pub const REASON_TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

// ---- component names (event sources, field managers, controller IDs) ----
pub const COMPONENT_KUBELET: &str = "kubelet";
pub const COMPONENT_SCHEDULER: &str = "default-scheduler";
pub const CONTROLLER_NODE_LIFECYCLE: &str = "node-lifecycle-controller";
pub const CONTROLLER_TAINT_EVICTION: &str = "taint-eviction-controller";
pub const CONTROLLER_POD_GC: &str = "pod-garbage-collector";

// ---- event types ----
pub const EVENT_NORMAL: &str = "Normal";
pub const EVENT_WARNING: &str = "Warning";

// ---- defaults ----
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
pub const KUBELET_PORT: i32 = 10250;

// ---- workload controllers (replicaset, deployment, statefulset, garbage collector) ----
pub const CONTROLLER_REPLICASET: &str = "replicaset-controller";
pub const CONTROLLER_DEPLOYMENT: &str = "deployment-controller";
pub const CONTROLLER_STATEFULSET: &str = "statefulset-controller";
pub const CONTROLLER_GARBAGE_COLLECTOR: &str = "garbage-collector-controller";
pub const EVENT_SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
pub const EVENT_FAILED_CREATE: &str = "FailedCreate";
pub const EVENT_SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
pub const EVENT_FAILED_DELETE: &str = "FailedDelete";
pub const EVENT_SUCCESSFUL_UPDATE: &str = "SuccessfulUpdate";
pub const EVENT_SCALING_REPLICA_SET: &str = "ScalingReplicaSet";
pub const EVENT_SELECTING_ALL: &str = "SelectingAll";
pub const LABEL_POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const ANN_DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";
pub const ANN_DEPLOYMENT_REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const ANN_DEPLOYMENT_DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const ANN_DEPLOYMENT_MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const ANN_LAST_APPLIED_CONFIG: &str = "kubectl.kubernetes.io/last-applied-configuration";
pub const ANN_POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
pub const DEPLOY_COND_AVAILABLE: &str = "Available";
pub const DEPLOY_COND_PROGRESSING: &str = "Progressing";
pub const DEPLOY_COND_REPLICA_FAILURE: &str = "ReplicaFailure";
pub const REASON_NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const REASON_FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const REASON_NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const REASON_RS_UPDATED: &str = "ReplicaSetUpdated";
pub const REASON_PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
pub const REASON_MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const REASON_MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
pub const REASON_FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
pub const REASON_DEPLOYMENT_PAUSED: &str = "DeploymentPaused";
pub const REASON_DEPLOYMENT_RESUMED: &str = "DeploymentResumed";
pub const MSG_MINIMUM_AVAILABILITY: &str = "Deployment has minimum availability.";
pub const MSG_NO_MINIMUM_AVAILABILITY: &str = "Deployment does not have minimum availability.";
pub const LABEL_STS_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
pub const LABEL_POD_INDEX: &str = "apps.kubernetes.io/pod-index";
pub const LABEL_CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
pub const EVENT_RECREATING_FAILED_POD: &str = "RecreatingFailedPod";
pub const FINALIZER_FOREGROUND_DELETION: &str = "foregroundDeletion";
pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";

// ---- node lifecycle / taint eviction events (appended by the NLC/TEC/PodGC engineer) ----
/// Event source component of the node lifecycle controller (`node-controller`).
pub const EVENT_SOURCE_NODE_CONTROLLER: &str = "node-controller";
pub const EVENT_REGISTERED_NODE: &str = "RegisteredNode";
pub const EVENT_REMOVING_NODE: &str = "RemovingNode";
pub const EVENT_NODE_NOT_READY: &str = "NodeNotReady";
pub const MSG_POD_NODE_NOT_READY: &str = "Node is not ready";
pub const STATUS_NODE_NOT_READY: &str = "NodeNotReady";

// ---- Job labels (k8s.io/api batch/v1 types.go; set by the Job strategy's generated selector) ----
pub const LABEL_JOB_CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub const LABEL_JOB_NAME: &str = "batch.kubernetes.io/job-name";
pub const LABEL_JOB_CONTROLLER_UID_LEGACY: &str = "controller-uid";
pub const LABEL_JOB_NAME_LEGACY: &str = "job-name";

// ---- kubectl Table printers (pkg/printers/internalversion; appended by the kubectl-surface engineer) ----
/// Pod `status.reason` the node lifecycle controller sets on pods of an unreachable node
/// (`NodeUnreachablePodReason`); a deleting pod with it prints STATUS `Unknown`.
pub const POD_REASON_NODE_LOST: &str = "NodeLost";
/// `PodScheduled` condition reason while scheduling gates remain (`PodReasonSchedulingGated`).
pub const POD_REASON_SCHEDULING_GATED: &str = "SchedulingGated";
/// Node role labels: `node-role.kubernetes.io/<role>` (any value) …
pub const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// … and the legacy `kubernetes.io/role=<role>`.
pub const LABEL_NODE_ROLE_LEGACY: &str = "kubernetes.io/role";
/// Beta storage-class annotation, still preferred over `spec.storageClassName` when present.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

// ---- scheduler, DaemonSet and Job controllers (appended by the scheduler/DS/Job engineer) ----
pub const CONTROLLER_DAEMONSET: &str = "daemonset-controller";
pub const CONTROLLER_JOB: &str = "job-controller";
pub const EVENT_SCHEDULED: &str = "Scheduled";
pub const EVENT_FAILED_SCHEDULING: &str = "FailedScheduling";
/// `PodScheduled=False` reasons (`v1.PodReasonUnschedulable`, `v1.PodReasonSchedulerError`).
pub const POD_REASON_UNSCHEDULABLE: &str = "Unschedulable";
pub const POD_REASON_SCHEDULER_ERROR: &str = "SchedulerError";
pub const LABEL_POD_TEMPLATE_GENERATION: &str = "pod-template-generation";
pub const ANN_DS_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
pub const EVENT_FAILED_DAEMON_POD: &str = "FailedDaemonPod";
pub const EVENT_SUCCEEDED_DAEMON_POD: &str = "SucceededDaemonPod";
pub const FINALIZER_JOB_TRACKING: &str = "batch.kubernetes.io/job-tracking";
pub const JOB_COND_COMPLETE: &str = "Complete";
pub const JOB_COND_FAILED: &str = "Failed";
pub const JOB_COND_FAILURE_TARGET: &str = "FailureTarget";
pub const JOB_COND_SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub const JOB_REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub const JOB_MSG_BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
pub const JOB_REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const JOB_MSG_DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
pub const JOB_REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
pub const JOB_REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
pub const JOB_MSG_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
pub const LABEL_CONTROLLER_REVISION_OBJECT_HASH: &str = "controller.kubernetes.io/hash";

// ---- storage: claims, volumes, attach/detach (k8s.io/api storage/v1, pkg/controller/volume) ----
/// The default-class annotation (`storageutil.IsDefaultStorageClassAnnotation`) and its beta form.
pub const ANN_DEFAULT_STORAGE_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const ANN_BETA_DEFAULT_STORAGE_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The default StorageClass every klab cluster has, and the simulated CSI driver behind it.
pub const DEFAULT_STORAGE_CLASS: &str = "standard";
pub const CSI_DRIVER_KLAB: &str = "csi.klab.dev";
/// Finalizers of the storage-object-in-use protection (admission adds, controllers remove).
pub const FINALIZER_PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
pub const FINALIZER_PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// Finalizer the external-attacher keeps on a VolumeAttachment it handles.
pub const FINALIZER_CSI_ATTACHER_PREFIX: &str = "external-attacher/";
/// PV controller annotations (`pkg/controller/volume/persistentvolume/util`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Node annotation the kubelet sets when the attach/detach controller manages its volumes.
pub const ANN_CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
/// Source components of the storage controllers' events.
pub const CONTROLLER_PERSISTENT_VOLUME: &str = "persistentvolume-controller";
pub const CONTROLLER_ATTACH_DETACH: &str = "attachdetach-controller";
/// PV controller event reasons (`pkg/controller/volume/events`).
pub const EVENT_PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
pub const EVENT_PROVISIONING_FAILED: &str = "ProvisioningFailed";
pub const EVENT_EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
pub const EVENT_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
pub const EVENT_VOLUME_DELETE: &str = "VolumeDelete";
pub const EVENT_FAILED_BINDING: &str = "FailedBinding";
/// Attach/detach and kubelet volume event reasons.
pub const EVENT_SUCCESSFUL_ATTACH_VOLUME: &str = "SuccessfulAttachVolume";
pub const EVENT_FAILED_ATTACH_VOLUME: &str = "FailedAttachVolume";
pub const EVENT_FAILED_MOUNT: &str = "FailedMount";
