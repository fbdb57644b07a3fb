//! Event recording: the kubelet's node and pod events as `core/v1` Events, source component
//! `kubelet`, host = node name, through the one recorder every component uses
//! (`klab_runtime::events`: client-go's `EventCorrelator` with the options the kubelet runs with —
//! repeats counted, similar events aggregated, 25 events per object then one every 5 minutes).

use k8s_openapi::api::core::v1::ObjectReference;
use klab_api::{Clock, DetRng, names};
use klab_runtime::events::EventRecorder;
use kube::Client;

use crate::node_status::NodeEvent;
use crate::pods::PodEvent;

/// The ChaCha stream of the recorder's name draws (taken only when two recorders name an event
/// alike), apart from the kubelet's jitter so that a collision shifts no other draw.
const EVENT_NAME_STREAM: u64 = 0x6b75_6265_6c65_7476;

/// Builds and posts events. Failures are logged and dropped (as upstream's recorder does).
#[derive(Clone)]
pub struct Recorder {
    inner: EventRecorder,
    node: String,
}

impl Recorder {
    pub fn new(client: Client, clock: Clock, rng: &DetRng, node: &str) -> Self {
        Recorder {
            inner: EventRecorder::new(
                client,
                clock,
                rng.side_stream(EVENT_NAME_STREAM),
                names::COMPONENT_KUBELET,
            )
            .on_host(node),
            node: node.to_string(),
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
        self.inner
            .record(&involved, e.type_, &e.reason, e.message.clone())
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
        self.inner
            .record(&involved, e.type_, &e.reason, e.message.clone())
            .await;
    }
}
