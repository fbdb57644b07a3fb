//! ReplicaSet controller knobs, named after kube-controller-manager flags and feature gates.

/// `--concurrent-replicaset-syncs` has no meaning in klab (one task, keys in order); the knobs that
/// change behaviour are below.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSetControllerConfig {
    /// Upstream `BurstReplicas` (500): at most this many creations or deletions per sync.
    pub burst_replicas: usize,
    /// Feature gate `DeploymentReplicaSetTerminatingReplicas` (alpha/off in v1.33, beta/on in
    /// v1.35): report `status.terminatingReplicas`.
    pub deployment_replica_set_terminating_replicas: bool,
}

impl Default for ReplicaSetControllerConfig {
    fn default() -> Self {
        ReplicaSetControllerConfig {
            burst_replicas: 500,
            deployment_replica_set_terminating_replicas: false,
        }
    }
}
