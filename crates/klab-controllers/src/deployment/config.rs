//! Deployment controller knobs. Upstream's only flag, `--concurrent-deployment-syncs`, is
//! meaningless in klab's single ordered queue; the per-object knobs (maxSurge,
//! progressDeadlineSeconds, …) live in the Deployment spec. The feature gate below changes status.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentControllerConfig {
    /// Feature gate `DeploymentReplicaSetTerminatingReplicas` (alpha/off in v1.33, beta/on in
    /// v1.35): report `status.terminatingReplicas` (the sum over the ReplicaSets).
    pub deployment_replica_set_terminating_replicas: bool,
}
