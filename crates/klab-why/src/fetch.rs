//! Reads a [`Snapshot`] through the API (the only I/O of this crate): any cluster, any
//! permissions. Each list is tried cluster-wide, then in the target's namespace; what still fails
//! is named in `unreadable` with the server's own message (e.g. upstream's Forbidden text).
//! Lists are read in pages of [`PAGE`], as kubectl and client-go's pager read them, so that
//! neither side holds a whole resource's JSON at once (thousands of Events at the end of a big
//! run).

use std::fmt::Debug;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use klab_api::slim::Slim;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::{Kind, Settings, Snapshot, Target};

/// Why the target itself could not be read: the server's answer, ready to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    /// `Error from server (NotFound): pods "x" not found`, as kubectl prints it.
    pub message: String,
    pub code: u16,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for FetchError {}

fn server_error(e: &kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => {
            let reason = if s.reason.is_empty() {
                "Unknown".to_string()
            } else {
                s.reason.clone()
            };
            (
                s.code,
                format!("Error from server ({reason}): {}", s.message),
            )
        }
        other => (0, other.to_string()),
    }
}

/// Reads everything an explanation of `target` may need. `now` is the server's time (see
/// [`server_now`]) unless given. Fails only when the target itself cannot be read.
pub async fn fetch(
    client: &Client,
    target: &Target,
    settings: Settings,
    now: Option<Timestamp>,
) -> Result<Snapshot, FetchError> {
    let ns = if target.namespace.is_empty() {
        "default"
    } else {
        target.namespace.as_str()
    };
    // The target first: its absence or a Forbidden is the answer, not an empty explanation.
    check_target(client, target).await?;
    Ok(fetch_all(client, ns, settings, now).await)
}

/// Reads everything, whatever can be read (`klab sim` at the end of a run). Lists refused
/// cluster-wide are retried in `ns`.
pub async fn fetch_all(
    client: &Client,
    ns: &str,
    settings: Settings,
    now: Option<Timestamp>,
) -> Snapshot {
    let mut un = Vec::new();
    let mut snap = Snapshot {
        pods: list_ns::<Pod>(client, ns, "pods", &mut un).await,
        nodes: list_cluster::<Node>(client, "nodes", &mut un).await,
        events: list_ns_matching::<Event>(client, ns, "events", &explaining_events(), &mut un)
            .await,
        replica_sets: list_ns::<ReplicaSet>(client, ns, "replicasets.apps", &mut un).await,
        deployments: list_ns::<Deployment>(client, ns, "deployments.apps", &mut un).await,
        stateful_sets: list_ns::<StatefulSet>(client, ns, "statefulsets.apps", &mut un).await,
        daemon_sets: list_ns::<DaemonSet>(client, ns, "daemonsets.apps", &mut un).await,
        jobs: list_ns::<Job>(client, ns, "jobs.batch", &mut un).await,
        pdbs: list_ns::<PodDisruptionBudget>(client, ns, "poddisruptionbudgets.policy", &mut un)
            .await,
        pvcs: list_ns::<PersistentVolumeClaim>(client, ns, "persistentvolumeclaims", &mut un).await,
        volume_attachments: list_cluster::<VolumeAttachment>(
            client,
            "volumeattachments.storage.k8s.io",
            &mut un,
        )
        .await,
        settings,
        ..Default::default()
    };
    let leases: Api<Slim<Lease>> = Api::namespaced(client.clone(), klab_api::names::NS_NODE_LEASE);
    snap.leases = match list_paged(&leases).await {
        Ok(l) => Some(l),
        Err(e) => {
            let (code, msg) = server_error(&e);
            un.push(if code == 404 {
                "leases.coordination.k8s.io: the server does not serve node Leases (heartbeats are judged from the Ready condition only)".into()
            } else {
                format!("leases.coordination.k8s.io: {msg}")
            });
            None
        }
    };
    if !snap.settings.known {
        // A kubeadm-style cluster shows its kube-controller-manager flags in its static pod.
        let kcm: Api<Pod> = Api::namespaced(client.clone(), klab_api::names::NS_KUBE_SYSTEM);
        if let Ok(l) = kcm
            .list(&ListParams::default().labels("component=kube-controller-manager"))
            .await
        {
            for c in l
                .items
                .iter()
                .filter_map(|p| p.spec.as_ref())
                .flat_map(|s| s.containers.iter())
            {
                let args = c.command.iter().flatten().chain(c.args.iter().flatten());
                snap.settings.apply_args(args.map(String::as_str));
            }
        }
    }
    snap.now = match now {
        Some(t) => t,
        None => server_now(client, ns).await,
    };
    snap.unreadable = un;
    snap
}

/// The server's clock: the creationTimestamp of a dry-run ConfigMap (nothing is stored). A
/// `klab up --speed N` runs its own timeline, so this machine's clock would be wrong there; when
/// the dry run is refused, this machine's clock it is.
pub async fn server_now(client: &Client, ns: &str) -> Timestamp {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let probe = ConfigMap {
        metadata: kube::api::ObjectMeta {
            generate_name: Some("klab-why-".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let pp = PostParams {
        dry_run: true,
        field_manager: Some("klab-why".into()),
    };
    match api.create(&pp, &probe).await {
        Ok(cm) => match cm.metadata.creation_timestamp {
            Some(t) => t.0,
            None => klab_api::Clock::scaled(1.0).now(),
        },
        Err(_) => klab_api::Clock::scaled(1.0).now(),
    }
}

async fn check_target(client: &Client, t: &Target) -> Result<(), FetchError> {
    async fn get<K>(api: Api<K>, name: &str) -> Result<(), FetchError>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
    {
        api.get(name).await.map(|_| ()).map_err(|e| {
            let (code, message) = server_error(&e);
            FetchError { message, code }
        })
    }
    let c = client.clone();
    let ns = t.namespace.as_str();
    match t.kind {
        Kind::Pod => get(Api::<Pod>::namespaced(c, ns), &t.name).await,
        Kind::Node => get(Api::<Node>::all(c), &t.name).await,
        Kind::Deployment => get(Api::<Deployment>::namespaced(c, ns), &t.name).await,
        Kind::ReplicaSet => get(Api::<ReplicaSet>::namespaced(c, ns), &t.name).await,
        Kind::StatefulSet => get(Api::<StatefulSet>::namespaced(c, ns), &t.name).await,
        Kind::DaemonSet => get(Api::<DaemonSet>::namespaced(c, ns), &t.name).await,
        Kind::Job => get(Api::<Job>::namespaced(c, ns), &t.name).await,
    }
}

/// Objects per list page (kubectl's `--chunk-size` and client-go's pager default).
const PAGE: u32 = 500;

/// The reasons of the Events every pod has in the ordinary course of its life, four to six per
/// pod: no explanation reads them ([`crate::explain::POD_TROUBLE_EVENTS`] are what they read).
/// They are most of a cluster's Events, and at the end of a run of 150 000 pods decoding them
/// would take about a gigabyte, so the server leaves them out of the list.
const ROUTINE_POD_EVENTS: &[&str] = &["Scheduled", "Pulling", "Pulled", "Created", "Started"];

/// The field selector of the Events a [`Snapshot`] holds: those about pods, but for the routine
/// ones (upstream's Event field labels `involvedObject.kind` and `reason`).
pub fn explaining_events() -> String {
    let mut fields = String::from("involvedObject.kind=Pod");
    for reason in ROUTINE_POD_EVENTS {
        fields.push_str(",reason!=");
        fields.push_str(reason);
    }
    fields
}

/// Every object of `api`, page by page at one resource version, decoded without managed
/// fields (nothing here reads them, and they are most of a pod's metadata). If a continued page
/// fails (its resource version compacted away), the whole list is read again in one request.
async fn list_paged<K>(api: &Api<Slim<K>>) -> kube::Result<Vec<K>>
where
    K: Clone + DeserializeOwned + Debug,
{
    list_paged_matching(api, "").await
}

/// [`list_paged`] of the objects that match the field selector `fields` (all when empty).
async fn list_paged_matching<K>(api: &Api<Slim<K>>, fields: &str) -> kube::Result<Vec<K>>
where
    K: Clone + DeserializeOwned + Debug,
{
    let whole = match fields {
        "" => ListParams::default(),
        fields => ListParams::default().fields(fields),
    };
    let mut lp = whole.clone().limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = match api.list(&lp).await {
            Ok(page) => page,
            Err(_) if lp.continue_token.is_some() => {
                let all = api.list(&whole).await?;
                return Ok(all.items.into_iter().map(Slim::into_inner).collect());
            }
            Err(e) => return Err(e),
        };
        items.extend(page.items.into_iter().map(Slim::into_inner));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(items),
        }
    }
}

async fn list_ns<K>(client: &Client, ns: &str, what: &str, un: &mut Vec<String>) -> Vec<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    list_ns_matching(client, ns, what, "", un).await
}

/// [`list_ns`] of the objects that match the field selector `fields` (all when empty).
async fn list_ns_matching<K>(
    client: &Client,
    ns: &str,
    what: &str,
    fields: &str,
    un: &mut Vec<String>,
) -> Vec<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let all = Api::<Slim<K>>::all(client.clone());
    match list_paged_matching(&all, fields).await {
        Ok(items) => items,
        // Allowed in one namespace only (a namespaced Role): that namespace is what matters.
        Err(_) => {
            match list_paged_matching(&Api::<Slim<K>>::namespaced(client.clone(), ns), fields).await
            {
                Ok(items) => items,
                Err(e) => {
                    un.push(format!("{what}: {}", server_error(&e).1));
                    Vec::new()
                }
            }
        }
    }
}

async fn list_cluster<K>(client: &Client, what: &str, un: &mut Vec<String>) -> Vec<K>
where
    K: Resource<Scope = ClusterResourceScope> + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    match list_paged(&Api::<Slim<K>>::all(client.clone())).await {
        Ok(items) => items,
        Err(e) => {
            un.push(format!("{what}: {}", server_error(&e).1));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_left_out_are_none_an_explanation_reads() {
        for reason in ROUTINE_POD_EVENTS {
            assert!(
                !crate::explain::POD_TROUBLE_EVENTS.contains(reason),
                "{reason}"
            );
        }
        assert_eq!(
            explaining_events(),
            "involvedObject.kind=Pod,reason!=Scheduled,reason!=Pulling,reason!=Pulled,\
             reason!=Created,reason!=Started"
        );
    }

    /// More objects than a page: every one is read, in pages at one resource version.
    #[tokio::test(start_paused = true)]
    async fn lists_are_read_page_by_page() {
        let api = klab_apiserver::testing::memory_server().await;
        let client = Client::new(api.router(), "default");
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let n = 2 * PAGE as usize + 3;
        for i in 0..n {
            let cm: ConfigMap = serde_json::from_value(
                serde_json::json!({"metadata": {"name": format!("cm-{i:04}")}, "data": {"k": "v"}}),
            )
            .unwrap();
            maps.create(&PostParams::default(), &cm).await.unwrap();
        }
        let first = maps.list(&ListParams::default().limit(PAGE)).await.unwrap();
        assert!(first.metadata.continue_.is_some(), "more than one page");
        assert!(first.items[0].metadata.managed_fields.is_some());
        let all = list_paged(&Api::<Slim<ConfigMap>>::namespaced(
            client.clone(),
            "default",
        ))
        .await
        .unwrap();
        assert!(all.iter().all(|c| c.metadata.managed_fields.is_none()));
        let names: Vec<String> = all.into_iter().filter_map(|c| c.metadata.name).collect();
        let want: Vec<String> = (0..n).map(|i| format!("cm-{i:04}")).collect();
        assert_eq!(names, want);
    }

    /// The snapshot holds a pod's trouble Events, ordinary or not, and no routine ones; the
    /// server filters them, across pages.
    #[tokio::test(start_paused = true)]
    async fn the_snapshot_reads_every_pod_event_but_the_routine_ones() {
        let api = klab_apiserver::testing::memory_server().await;
        let client = Client::new(api.router(), "default");
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        let event = |name: String, kind: &str, reason: &str, type_: &str| -> Event {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "involvedObject": {"kind": kind, "namespace": "default", "name": "p"},
                "reason": reason, "type": type_, "message": "m",
            }))
            .unwrap()
        };
        // More routine Events than a page, so the selector must hold on every page.
        for i in 0..PAGE + 10 {
            let reason = ROUTINE_POD_EVENTS[i as usize % ROUTINE_POD_EVENTS.len()];
            let e = event(format!("r{i:04}"), "Pod", reason, "Normal");
            events.create(&PostParams::default(), &e).await.unwrap();
        }
        let kept = [
            ("a", "Pod", "BackOff", "Normal"),
            ("b", "Pod", "FailedMount", "Warning"),
            ("c", "Pod", "Killing", "Normal"),
        ];
        let dropped = [("d", "Node", "FailedMount", "Warning")];
        for (name, kind, reason, type_) in kept.iter().chain(&dropped) {
            let e = event(name.to_string(), kind, reason, type_);
            events.create(&PostParams::default(), &e).await.unwrap();
        }
        let snap = fetch_all(&client, "default", Settings::default(), None).await;
        let got: Vec<(String, String)> = snap
            .events
            .iter()
            .map(|e| {
                let name = e.metadata.name.clone().unwrap_or_default();
                (name, e.reason.clone().unwrap_or_default())
            })
            .collect();
        let want: Vec<(String, String)> = kept
            .iter()
            .map(|(n, _, r, _)| (n.to_string(), r.to_string()))
            .collect();
        assert_eq!(got, want);
        assert!(snap.unreadable.is_empty(), "{:?}", snap.unreadable);
    }

    #[test]
    fn server_errors_read_as_kubectl_prints_them() {
        let forbidden = kube::Error::Api(Box::new(kube::core::Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "leases.coordination.k8s.io is forbidden: User \"dev\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\"".into(),
            ..Default::default()
        }));
        assert_eq!(
            server_error(&forbidden),
            (403, "Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User \"dev\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-node-lease\"".to_string())
        );
        let bare = kube::Error::Api(Box::new(kube::core::Status {
            code: 500,
            message: "boom".into(),
            ..Default::default()
        }));
        assert_eq!(
            server_error(&bare),
            (500, "Error from server (Unknown): boom".to_string())
        );
    }
}
