//! The table of served resources: group/version/kind, plural and singular names, scope, short names,
//! categories and subresources. Discovery, OpenAPI, routing, storage keys and error messages all read
//! this one table, so adding a resource is one entry here (plus its Table printer and validation).

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// Plural resource name, as in URLs.
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources served (`status`, `scale`, `binding`, `eviction`, …).
    pub subresources: &'static [&'static str],
    /// Whether a create sets `metadata.generation = 1` and spec changes bump it.
    pub has_generation: bool,
}

impl ResourceInfo {
    /// `apiVersion` as written in objects: `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`, as in upstream error messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Pod` or `Deployment.apps`, as in upstream validation messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The storage key prefix for this resource: `/registry/<group or core>/<plural>/`.
    pub fn key_prefix(&self) -> String {
        format!("/registry/{}/{}/", self.storage_group(), self.plural)
    }

    /// The group's segment of storage keys: `core` for the core group.
    fn storage_group(&self) -> &'static str {
        if self.group.is_empty() {
            "core"
        } else {
            self.group
        }
    }

    /// Storage key prefix for one namespace (namespaced resources) or for all.
    pub fn key_prefix_in(&self, namespace: Option<&str>) -> String {
        match (self.namespaced, namespace) {
            (true, Some(ns)) => format!("{}{ns}/", self.key_prefix()),
            _ => self.key_prefix(),
        }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        // Built in one allocation: every request names a key.
        let g = self.storage_group();
        let ns = match (self.namespaced, namespace) {
            (true, Some(ns)) => Some(ns),
            _ => None,
        };
        let mut k = String::with_capacity(
            "/registry///".len()
                + g.len()
                + self.plural.len()
                + ns.map_or(0, |n| n.len() + 1)
                + name.len(),
        );
        for part in ["/registry/", g, "/", self.plural, "/"] {
            k.push_str(part);
        }
        if let Some(ns) = ns {
            k.push_str(ns);
            k.push('/');
        }
        k.push_str(name);
        k
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    /// The `kind` of a list of this resource (`PodList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

const STATUS: &[&str] = &["status"];
const NONE: &[&str] = &[];

/// Every resource klab serves, core first, then groups in discovery order.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: NONE,
        subresources: &["status", "finalize"],
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        namespaced: false,
        short_names: &["no"],
        categories: NONE,
        subresources: &["status", "proxy"],
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &[
            "status",
            "binding",
            "eviction",
            "log",
            "exec",
            "attach",
            "portforward",
            "ephemeralcontainers",
        ],
        has_generation: true,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        short_names: &["cm"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        subresources: STATUS,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        namespaced: true,
        short_names: &["ep"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        namespaced: true,
        short_names: &["sa"],
        categories: NONE,
        subresources: &["token"],
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        namespaced: false,
        short_names: &["pv"],
        categories: NONE,
        subresources: STATUS,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: NONE,
        subresources: STATUS,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        namespaced: true,
        short_names: &["quota"],
        categories: NONE,
        subresources: STATUS,
        has_generation: false,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        namespaced: true,
        short_names: &["limits"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &["status", "scale"],
        has_generation: true,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        subresources: &["status", "scale"],
        has_generation: true,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        namespaced: true,
        short_names: &["sts"],
        categories: &["all"],
        subresources: &["status", "scale"],
        has_generation: true,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        namespaced: true,
        short_names: &["ds"],
        categories: &["all"],
        subresources: STATUS,
        has_generation: true,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "SelfSubjectReview",
        plural: "selfsubjectreviews",
        singular: "selfsubjectreview",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "TokenReview",
        plural: "tokenreviews",
        singular: "tokenreview",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        singular: "localsubjectaccessreview",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        singular: "subjectaccessreview",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        namespaced: true,
        short_names: NONE,
        categories: &["all"],
        subresources: STATUS,
        has_generation: true,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        namespaced: true,
        short_names: &["cj"],
        categories: &["all"],
        subresources: STATUS,
        has_generation: true,
    },
    ResourceInfo {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        singular: "certificatesigningrequest",
        namespaced: false,
        short_names: &["csr"],
        categories: NONE,
        subresources: STATUS,
        has_generation: false,
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: true,
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        short_names: &["ev"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: NONE,
        subresources: STATUS,
        has_generation: true,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        singular: "role",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        namespaced: false,
        short_names: &["pc"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        plural: "csidrivers",
        singular: "csidriver",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        namespaced: false,
        short_names: &["sc"],
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttachment",
        plural: "volumeattachments",
        singular: "volumeattachment",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: STATUS,
        has_generation: false,
    },
    // metrics-server's group, last as its APIService's low group priority puts it; singular
    // names empty as metrics-server declares them.
    ResourceInfo {
        group: "metrics.k8s.io",
        version: "v1beta1",
        kind: "NodeMetrics",
        plural: "nodes",
        singular: "",
        namespaced: false,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
    ResourceInfo {
        group: "metrics.k8s.io",
        version: "v1beta1",
        kind: "PodMetrics",
        plural: "pods",
        singular: "",
        namespaced: true,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        has_generation: false,
    },
];

/// The deprecation warning of a resource at klab's version (1.33), as upstream's
/// `apihelpers`/deprecation filter words it.
pub fn deprecation(ri: &ResourceInfo) -> Option<&'static str> {
    match (ri.group, ri.kind) {
        ("", "Endpoints") => {
            Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
        }
        _ => None,
    }
}

/// Resources that only answer a create, compute their answer and store nothing: the access and
/// token reviews.
pub fn is_review(ri: &ResourceInfo) -> bool {
    matches!(ri.group, "authentication.k8s.io" | "authorization.k8s.io")
}

/// Resources computed at each request from the metrics pipeline and stored nowhere (what
/// metrics-server serves behind its APIService): get and list only.
pub fn is_metrics(ri: &ResourceInfo) -> bool {
    ri.group == crate::metrics_api::GROUP
}

/// Finds a resource by group, version and plural name.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Finds a resource by `apiVersion` and `kind` as written in an object.
pub fn lookup_kind(api_version: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.api_version() == api_version && r.kind == kind)
}

/// The groups served under `/apis`, in discovery order (each with one version, `v1`).
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.contains(&r.group) {
            out.push(r.group);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        let pods = lookup("", "v1", "pods").unwrap();
        assert_eq!(pods.api_version(), "v1");
        assert_eq!(
            pods.key(Some("default"), "web"),
            "/registry/core/pods/default/web"
        );
        let deploy = lookup_kind("apps/v1", "Deployment").unwrap();
        assert_eq!(deploy.qualified_plural(), "deployments.apps");
        assert_eq!(deploy.key_prefix_in(None), "/registry/apps/deployments/");
        let node = lookup("", "v1", "nodes").unwrap();
        assert_eq!(node.key(None, "n1"), "/registry/core/nodes/n1");
        // A key is its prefix and the name, whatever the namespace given.
        for ri in RESOURCES {
            for ns in [None, Some("kube-system")] {
                assert_eq!(
                    ri.key(ns, "x"),
                    format!("{}x", ri.key_prefix_in(ns)),
                    "{}",
                    ri.plural
                );
            }
        }
        assert_eq!(
            groups(),
            vec![
                "apps",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "batch",
                "certificates.k8s.io",
                "coordination.k8s.io",
                "discovery.k8s.io",
                "events.k8s.io",
                "policy",
                "rbac.authorization.k8s.io",
                "scheduling.k8s.io",
                "storage.k8s.io",
                "metrics.k8s.io"
            ]
        );
    }
}
