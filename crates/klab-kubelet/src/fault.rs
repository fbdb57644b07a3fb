//! Node faults and the network seam they act on.
//!
//! Faults touch only two seams: the node agent's API client (a tower layer in front of the
//! in-process service, [`FaultService`]) and the simulated machine (process table, boot id). No
//! component can tell a fault from the real thing: a partitioned kubelet just sees its requests
//! fail, a stopped kubelet just is not running.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, StreamBody};
use tokio::sync::watch;
use tower::{Layer, Service, ServiceExt};

/// A boxed error, as tower and kube use.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A fault applied to one node. Closed set: scenarios and `klab node …` map onto these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeFault {
    /// `systemctl stop kubelet`: the agent stops; containers keep running.
    StopKubelet,
    /// `systemctl start kubelet`: a new agent process is built from the node's durable state.
    StartKubelet,
    /// Power failure: the agent and every container end; sandboxes are lost.
    PowerOff,
    /// Boot: new boot id, the kubelet starts (and restarts the pods per their policy).
    PowerOn,
    /// Hard reset: `PowerOff` immediately followed by `PowerOn`.
    Reboot,
    /// The node loses its network path to the API server (requests fail like a refused connection;
    /// open watches end).
    Partition,
    /// The network path comes back.
    Heal,
    /// The whole machine stops (a paused VM): no timer, container or request progresses.
    Freeze,
    /// The machine resumes where it stopped.
    Thaw,
    /// `systemctl poweroff`: logind signals `PrepareForShutdown(true)`; a kubelet holding its
    /// inhibitor lock (graceful node shutdown enabled) kills its pods group by group and
    /// releases the lock, then the machine powers off. Without the lock it is `PowerOff`.
    Shutdown,
    /// The shutdown is cancelled before the machine went down (`PrepareForShutdown(false)`).
    ShutdownCancel,
    /// The container runtime stops answering (containerd stopped; its shims keep the containers
    /// running): after 30 s the kubelet reports Ready=False `container runtime is down`, after
    /// 3 minutes PLEG is unhealthy too.
    RuntimeDown,
    /// The container runtime answers again.
    RuntimeUp,
    /// Only the kubelet's Lease writes fail (create and renew); everything else still works.
    FailLeaseUpdates,
    /// The Lease writes work again.
    HealLeaseUpdates,
    /// Only the kubelet's Node status writes (`nodes/NAME/status`) fail.
    FailStatusUpdates,
    /// The status writes work again.
    HealStatusUpdates,
}

/// The error a partitioned client sees (what `net/http` reports for a refused connection).
#[derive(Debug, thiserror::Error)]
#[error("dial tcp: connect: connection refused")]
pub struct ConnectionRefused;

/// The network state of one node, shared by its client layer and the node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetState {
    pub partitioned: bool,
    pub frozen: bool,
    /// Bumped whenever open connections must break (partition, freeze, kubelet stop).
    pub epoch: u64,
    /// Lease writes fail (`fail-lease-updates`).
    pub lease_writes_fail: bool,
    /// Node status writes fail (`fail-status-updates`).
    pub status_writes_fail: bool,
}

impl NetState {
    /// Whether this one request fails while the rest of the path works: the selective faults
    /// hit writes only (a kubelet still reads and watches).
    pub fn refuses(&self, method: &http::Method, path: &str) -> bool {
        if matches!(*method, http::Method::GET | http::Method::HEAD) {
            return false;
        }
        let lease = path.starts_with("/apis/coordination.k8s.io/") && path.contains("/leases");
        let status = path.starts_with("/api/v1/nodes/") && path.ends_with("/status");
        (self.lease_writes_fail && lease) || (self.status_writes_fail && status)
    }
}

/// Handle on a node's network seam. Cheap to clone.
#[derive(Clone, Debug)]
pub struct NetFault {
    tx: Arc<watch::Sender<NetState>>,
}

impl Default for NetFault {
    fn default() -> Self {
        Self::new()
    }
}

impl NetFault {
    pub fn new() -> Self {
        NetFault {
            tx: Arc::new(watch::channel(NetState::default()).0),
        }
    }

    pub fn state(&self) -> NetState {
        *self.tx.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<NetState> {
        self.tx.subscribe()
    }

    fn update(&self, f: impl FnOnce(&mut NetState)) {
        self.tx.send_modify(f);
    }

    pub fn set_partitioned(&self, on: bool) {
        self.update(|s| {
            if on && !s.partitioned {
                s.epoch += 1;
            }
            s.partitioned = on;
        });
    }

    pub fn set_frozen(&self, on: bool) {
        self.update(|s| {
            if on && !s.frozen {
                s.epoch += 1;
            }
            s.frozen = on;
        });
    }

    /// Makes the kubelet's Lease writes fail (or work again).
    pub fn set_lease_writes_fail(&self, on: bool) {
        self.update(|s| s.lease_writes_fail = on);
    }

    /// Makes the kubelet's Node status writes fail (or work again).
    pub fn set_status_writes_fail(&self, on: bool) {
        self.update(|s| s.status_writes_fail = on);
    }

    /// Breaks every open connection (the process that held them is gone).
    pub fn break_connections(&self) {
        self.update(|s| s.epoch += 1);
    }

    /// Waits until the machine is not frozen.
    pub async fn wait_thawed(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|s| !s.frozen).await;
    }

    /// The tower layer for this node's client.
    pub fn layer(&self) -> FaultLayer {
        FaultLayer { net: self.clone() }
    }
}

/// Tower layer wrapping a node agent's API service with its [`NetFault`].
#[derive(Clone, Debug)]
pub struct FaultLayer {
    net: NetFault,
}

impl<S> Layer<S> for FaultLayer {
    type Service = FaultService<S>;
    fn layer(&self, inner: S) -> FaultService<S> {
        FaultService {
            inner,
            net: self.net.clone(),
        }
    }
}

/// The fault-injecting service: blocks requests while frozen, fails them while partitioned, and
/// ends response bodies (watch streams) when the connection epoch changes.
#[derive(Clone, Debug)]
pub struct FaultService<S> {
    inner: S,
    net: NetFault,
}

/// Response body of [`FaultService`].
pub type FaultBody = UnsyncBoxBody<Bytes, BoxError>;

impl<S, ReqB, ResB> Service<Request<ReqB>> for FaultService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    ReqB: Send + 'static,
    ResB: hyper::body::Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    type Response = Response<FaultBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is checked on the clone used in `call` (oneshot).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let inner = self.inner.clone();
        let mut rx = self.net.subscribe();
        Box::pin(async move {
            // A frozen machine sends nothing until it is thawed.
            let _ = rx.wait_for(|s| !s.frozen).await;
            let state = *rx.borrow();
            if state.partitioned || state.refuses(req.method(), req.uri().path()) {
                return Err(Box::new(ConnectionRefused) as BoxError);
            }
            let resp = inner.oneshot(req).await.map_err(Into::into)?;
            let epoch = state.epoch;
            let (parts, body) = resp.into_parts();
            let mut cut_rx = rx.clone();
            let cut = async move {
                let _ = cut_rx.wait_for(|s| s.epoch != epoch).await;
            };
            let frames =
                TryStreamExt::map_err(BodyStream::new(body), Into::into).take_until(Box::pin(cut));
            let body: FaultBody = StreamBody::new(frames).boxed_unsync();
            Ok(Response::from_parts(parts, body))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use std::convert::Infallible;

    #[derive(Clone)]
    struct Echo;
    impl Service<Request<String>> for Echo {
        type Response = Response<Full<Bytes>>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Self::Response, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, r: Request<String>) -> Self::Future {
            std::future::ready(Ok(Response::new(Full::new(Bytes::from(r.into_body())))))
        }
    }

    #[test]
    fn selective_faults_refuse_only_their_writes() {
        use http::Method;
        let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1";
        let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
        let status = "/api/v1/nodes/n1/status";
        let node = "/api/v1/nodes/n1";
        let both = NetState {
            lease_writes_fail: true,
            status_writes_fail: true,
            ..Default::default()
        };
        let only_lease = NetState {
            lease_writes_fail: true,
            ..Default::default()
        };
        let table: &[(&NetState, Method, &str, bool)] = &[
            (&only_lease, Method::PUT, lease, true),
            (&only_lease, Method::POST, leases, true),
            (&only_lease, Method::GET, lease, false),
            (&only_lease, Method::PATCH, status, false),
            (&both, Method::PATCH, status, true),
            (&both, Method::PUT, status, true),
            (&both, Method::GET, status, false),
            (&both, Method::PATCH, node, false),
            (
                &both,
                Method::POST,
                "/api/v1/namespaces/default/events",
                false,
            ),
            (&NetState::default(), Method::PUT, lease, false),
        ];
        for (state, method, path, want) in table {
            assert_eq!(state.refuses(method, path), *want, "{method} {path}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn partition_fails_and_freeze_blocks_until_thaw() {
        let net = NetFault::new();
        let svc = net.layer().layer(Echo);
        let ok = svc
            .clone()
            .oneshot(Request::new("hi".to_string()))
            .await
            .unwrap();
        assert_eq!(
            ok.into_body().collect().await.unwrap().to_bytes(),
            Bytes::from("hi")
        );
        net.set_partitioned(true);
        let err = svc
            .clone()
            .oneshot(Request::new("x".to_string()))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "dial tcp: connect: connection refused");
        net.set_partitioned(false);
        net.set_frozen(true);
        let start = tokio::time::Instant::now();
        let n2 = net.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(7)).await;
            n2.set_frozen(false);
        });
        let r = svc
            .clone()
            .oneshot(Request::new("late".to_string()))
            .await
            .unwrap();
        assert_eq!(
            tokio::time::Instant::now() - start,
            std::time::Duration::from_secs(7)
        );
        assert_eq!(
            r.into_body().collect().await.unwrap().to_bytes(),
            Bytes::from("late")
        );
    }
}
