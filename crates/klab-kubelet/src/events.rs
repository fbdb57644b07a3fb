//! Event recording: the kubelet's node and pod events as `core/v1` Events, named like upstream's
//! recorder (`<object>.<hex nanoseconds>`), source component `kubelet`, host = node name.
//! Like upstream's event correlator, a repeat of an identical event (same object, type, reason,
//! message) within one kubelet process PATCHes the first one's `count` and `lastTimestamp`, which
//! is what `kubectl describe` shows as `(x2 over 56m)`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use klab_api::slim::Slim;
use klab_api::{Clock, names};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::node_status::NodeEvent;
use crate::pods::PodEvent;

/// (namespace, name, count) of the first occurrence of an event.
type SeenEvent = (String, String, i32);

/// Builds and posts events. Failures are logged and dropped (as upstream's recorder does).
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    clock: Clock,
    node: String,
    seq: Arc<std::sync::atomic::AtomicU64>,
    /// Identical-event key → (namespace, event name, count) of the first occurrence.
    seen: Arc<Mutex<BTreeMap<String, SeenEvent>>>,
}

impl Recorder {
    pub fn new(client: Client, clock: Clock, node: &str) -> Self {
        Recorder {
            client,
            clock,
            node: node.to_string(),
            seq: Default::default(),
            seen: Default::default(),
        }
    }

    fn build(&self, involved: ObjectReference, type_: &str, reason: &str, message: &str) -> Event {
        let now = self.clock.now_time();
        // Upstream names events `<name>.<UnixNano in hex>`; a sequence number keeps two events of
        // one instant apart.
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = self.clock.now().as_nanosecond() as u128 + seq as u128;
        let ns = involved
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| names::NS_DEFAULT.to_string());
        Event {
            metadata: ObjectMeta {
                name: Some(format!(
                    "{}.{:x}",
                    involved.name.clone().unwrap_or_default(),
                    nanos
                )),
                namespace: Some(ns),
                ..Default::default()
            },
            involved_object: involved,
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(type_.to_string()),
            source: Some(EventSource {
                component: Some(names::COMPONENT_KUBELET.into()),
                host: Some(self.node.clone()),
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some(names::COMPONENT_KUBELET.into()),
            reporting_instance: Some(self.node.clone()),
            ..Default::default()
        }
    }

    async fn post(&self, ev: Event) {
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Slim<Event>> = Api::namespaced(self.client.clone(), &ns);
        let o = &ev.involved_object;
        let key = format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            o.kind, o.namespace, o.name, o.uid, o.field_path, ev.type_, ev.reason, ev.message
        );
        let previous = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some((pns, name, count)) = previous {
            let patch =
                serde_json::json!({ "count": count + 1, "lastTimestamp": self.clock.now_time() });
            let api: Api<Slim<Event>> = Api::namespaced(self.client.clone(), &pns);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key, (pns, name, count + 1));
                    return;
                }
                Err(e) => {
                    tracing::debug!(node = %self.node, error = %e, "event count not updated; creating a new one")
                }
            }
        }
        // The reply is decoded without its managed fields: only its name is read.
        let ev = Slim(ev);
        match api.create(&PostParams::default(), &ev).await {
            Ok(Slim(created)) => {
                let name = created.metadata.name.unwrap_or_default();
                self.seen
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, (ns, name, 1));
            }
            Err(e) => {
                tracing::debug!(node = %self.node, reason = ?ev.reason, error = %e, "event not recorded")
            }
        }
    }

    /// A node event: involvedObject `{kind: Node, name, uid: <node name>}` (upstream's nodeRef).
    pub async fn node_event(&self, e: &NodeEvent) {
        let involved = ObjectReference {
            kind: Some("Node".into()),
            name: Some(self.node.clone()),
            uid: Some(self.node.clone()),
            namespace: Some(String::new()),
            ..Default::default()
        };
        self.post(self.build(involved, e.type_, &e.reason, &e.message))
            .await;
    }

    /// A pod event (container events carry `fieldPath: spec.containers{<name>}`).
    pub async fn pod_event(&self, e: &PodEvent) {
        let involved = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(e.pod_name.clone()),
            namespace: Some(e.namespace.clone()),
            uid: Some(e.pod_uid.clone()),
            field_path: e.field_path.clone(),
            ..Default::default()
        };
        self.post(self.build(involved, e.type_, &e.reason, &e.message))
            .await;
    }
}
