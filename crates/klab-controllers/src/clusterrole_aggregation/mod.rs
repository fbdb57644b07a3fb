//! The ClusterRole aggregation controller (upstream's `clusterrole-aggregation-controller`): a
//! ClusterRole with an `aggregationRule` gets the rules of every ClusterRole its selectors
//! match, kept so as labelled roles appear, change and go. Any ClusterRole change queues one
//! key; a sync compares every aggregated role with its union (decide.rs) and updates those that
//! differ, as its role grants (`update` and `escalate` on clusterroles).

pub mod decide;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use serde_json::json;

use klab_api::Clock;
use klab_runtime::{Change, Informers, ObjKey, Reconcile, SharedInformer, Sources, WorkQueue};

/// The controller's event source and service account.
pub const CONTROLLER_NAME: &str = "clusterrole-aggregation-controller";

/// Every change means the same work: re-check all aggregated roles.
fn all_key() -> ObjKey {
    (String::new(), String::new())
}

/// Runs the controller on the process's shared informers until they stop.
pub async fn run(
    client: kube::Client,
    informers: Informers,
    clock: Clock,
) -> Result<(), crate::replicaset::Error> {
    let roles = informers.get::<ClusterRole>();
    let sources = Sources::default().add(&roles, |c: Change<ClusterRole>| c);
    let mut c = Aggregation {
        client,
        roles,
        queue: informers.queue("ClusterRoleAggregator"),
    };
    klab_runtime::run(clock, sources, &mut c)
        .await
        .map_err(crate::replicaset::Error::Stopped)
}

struct Aggregation {
    client: kube::Client,
    roles: SharedInformer<ClusterRole>,
    queue: WorkQueue,
}

impl Reconcile for Aggregation {
    type Event = Change<ClusterRole>;
    type Error = kube::Error;

    fn queue(&mut self) -> &mut WorkQueue {
        &mut self.queue
    }

    fn handle(&mut self, _ev: Change<ClusterRole>) {
        self.queue.add(all_key());
    }

    async fn reconcile(&mut self, _key: ObjKey) -> Result<(), kube::Error> {
        let roles = self.roles.list();
        let refs: Vec<&ClusterRole> = roles.iter().map(|r| r.as_ref()).collect();
        let api: Api<ClusterRole> = Api::all(self.client.clone());
        for (name, rules) in decide::changes(&refs) {
            let patch = json!({ "rules": rules });
            match crate::write::update_merged(&api, &name, crate::write::Target::Object, &patch)
                .await
            {
                Ok(_) => {}
                // Deleted meanwhile: nothing to keep up to date.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
