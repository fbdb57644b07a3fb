//! Garbage collector knobs (kube-controller-manager `--enable-garbage-collector`) and the
//! resources it watches as possible owners and dependents.

/// One served resource the collector tracks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcResource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl GcResource {
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        GcResource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    /// `apiVersion` as written in ownerReferences.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GarbageCollectorConfig {
    /// `--enable-garbage-collector` (default true): when false, `run` returns at once.
    pub enable_garbage_collector: bool,
    /// Watched kinds. Upstream watches every deletable served resource; klab serves a fixed set.
    /// PVCs are included for claims that do carry owner references (a StatefulSet with
    /// `persistentVolumeClaimRetentionPolicy: Delete`); default StatefulSet claims are retained.
    pub resources: Vec<GcResource>,
}

impl Default for GarbageCollectorConfig {
    fn default() -> Self {
        GarbageCollectorConfig {
            enable_garbage_collector: true,
            resources: vec![
                GcResource::new("", "v1", "Pod", "pods", true),
                GcResource::new("", "v1", "Node", "nodes", false),
                GcResource::new(
                    "",
                    "v1",
                    "PersistentVolumeClaim",
                    "persistentvolumeclaims",
                    true,
                ),
                GcResource::new("apps", "v1", "Deployment", "deployments", true),
                GcResource::new("apps", "v1", "ReplicaSet", "replicasets", true),
                GcResource::new("apps", "v1", "StatefulSet", "statefulsets", true),
                GcResource::new("apps", "v1", "DaemonSet", "daemonsets", true),
                GcResource::new(
                    "apps",
                    "v1",
                    "ControllerRevision",
                    "controllerrevisions",
                    true,
                ),
                GcResource::new("batch", "v1", "Job", "jobs", true),
                GcResource::new("coordination.k8s.io", "v1", "Lease", "leases", true),
            ],
        }
    }
}
