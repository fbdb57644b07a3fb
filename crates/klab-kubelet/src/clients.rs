//! The kubelet's three API clients in one: upstream's kubelet builds a `kubeClient`, an
//! `eventClient` and a `heartbeatClient` (`cmd/kubelet/app/server.go`), each a clientset with its
//! own client-side rate limiter, so that pod status writes and events can never hold back a Lease
//! renewal or a node status update. klab sends every request through one `kube::Client` and files
//! it under the client upstream would have sent it with ([`kind_of`]); each kind has its own
//! service and so its own token bucket. One client instead of three saves each node two request
//! buffers and their worker tasks (about 35 KB a node).

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{Service, ServiceExt};

/// Which of upstream's kubelet clients sends a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// `kubeClient`, at `kubeAPIQPS` / `kubeAPIBurst`: registration, pods, volumes, CSINode.
    Main,
    /// `eventClient`, at `eventRecordQPS` / `eventBurst`: the event recorder.
    Events,
    /// `heartbeatClient`, without client-side rate limiting: the node Lease and node status.
    Heartbeat,
}

/// The client upstream's kubelet sends this request with: the node Lease and the node's status
/// with the heartbeat client; a node GET too (the status update's own read; upstream's other
/// reads of its Node come from an informer and cost no token either); Events with the event
/// client; everything else with the main client.
pub fn kind_of(method: &Method, path: &str) -> ClientKind {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        [
            "apis",
            "coordination.k8s.io",
            "v1",
            "namespaces",
            "kube-node-lease",
            "leases",
            ..,
        ] => ClientKind::Heartbeat,
        ["api", "v1", "nodes", _, "status"] => ClientKind::Heartbeat,
        ["api", "v1", "nodes", _] if method == Method::GET => ClientKind::Heartbeat,
        ["api", "v1", "namespaces", _, "events", ..] => ClientKind::Events,
        ["apis", "events.k8s.io", "v1", "namespaces", _, "events", ..] => ClientKind::Events,
        _ => ClientKind::Main,
    }
}

/// Sends each request through the service of its [`ClientKind`].
#[derive(Clone)]
pub struct Split<S> {
    pub main: S,
    pub events: S,
    pub heartbeat: S,
}

impl<S, B> Service<Request<B>> for Split<S>
where
    S: Service<Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    // Which service is asked is known only from the request: `call` waits for that one.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let service = match kind_of(req.method(), req.uri().path()) {
            ClientKind::Main => self.main.clone(),
            ClientKind::Events => self.events.clone(),
            ClientKind::Heartbeat => self.heartbeat.clone(),
        };
        Box::pin(service.oneshot(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_to_the_client_upstream_uses() {
        use ClientKind::*;
        let cases = [
            (
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
                Heartbeat,
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
                Heartbeat,
            ),
            (
                Method::POST,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                Heartbeat,
            ),
            (Method::PATCH, "/api/v1/nodes/n1/status", Heartbeat),
            (Method::GET, "/api/v1/nodes/n1", Heartbeat),
            (Method::POST, "/api/v1/nodes", Main),
            (Method::PATCH, "/api/v1/nodes/n1", Main),
            (Method::POST, "/api/v1/namespaces/default/events", Events),
            (
                Method::PATCH,
                "/api/v1/namespaces/default/events/p.17a",
                Events,
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/default/events",
                Events,
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/default/pods/p/status",
                Main,
            ),
            (Method::GET, "/api/v1/pods", Main),
            (
                Method::GET,
                "/api/v1/namespaces/default/persistentvolumeclaims/c",
                Main,
            ),
            (Method::POST, "/apis/storage.k8s.io/v1/csinodes", Main),
            // A Lease elsewhere is not the node's heartbeat.
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x",
                Main,
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(kind_of(&method, path), want, "{method} {path}");
        }
    }
}
