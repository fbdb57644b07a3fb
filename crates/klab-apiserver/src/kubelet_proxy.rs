//! The API server's side of `pods/log` (and the connection upgrades of exec, attach and
//! port-forward): it finds the pod's node, dials the kubelet there through the
//! [`KubeletNetwork`] the composition root provides, and proxies the request (node spec §8.3).
//!
//! The network is a seam so that node faults decide what the proxy sees, exactly as on a real
//! cluster: a stopped kubelet refuses the dial at once; a powered-off, frozen or partitioned node
//! answers nothing and the dial gives up after [`DIAL_TIMEOUT`] of cluster time (via the `Clock`,
//! so it passes in virtual time in `klab sim`). The errors are upstream's (node spec §8.4): a
//! transport error of the log request is returned as it is (a Status with code 500 and no reason,
//! which kubectl prints as `Error from server: Get "https://IP:10250/containerLogs/…": dial tcp
//! IP:10250: …`), an upgrade's as `error dialing backend: dial tcp IP:10250: …`; a kubelet's own
//! error answer is mapped as `GenericHttpResponseChecker` does.

use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
#[cfg(doc)]
use klab_api::kubelet_net::KubeletNetwork;
use klab_api::kubelet_net::{kubelet_host, kubelet_port};
use serde_json::{Value, json};
use tokio::io::DuplexStream;

use crate::error::{ApiError, ApiResult};
use crate::object::{self, Pointer};
use crate::registry;
use crate::server::Ctx;

/// How long the API server waits for a kubelet's TCP connection (upstream's proxy dialer: 30 s).
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Go's `url.QueryEscape`.
fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Go's `url.Values.Encode`: keys sorted, values escaped.
fn encode_query(mut params: Vec<(&str, String)>) -> String {
    params.sort_by(|a, b| a.0.cmp(b.0));
    params
        .iter()
        .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `PodLogOptions` as the API server reads them from the query.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct PodLogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<jiff::Timestamp>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
}

impl PodLogOptions {
    fn from_query(ctx: &Ctx) -> ApiResult<PodLogOptions> {
        let int = |k: &str| -> ApiResult<Option<i64>> {
            match ctx.q(k) {
                None => Ok(None),
                Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                    ApiError::bad_request(format!(
                        "strconv.ParseInt: parsing {v:?}: invalid syntax"
                    ))
                }),
            }
        };
        let since_time = match ctx.q("sinceTime") {
            None => None,
            Some(v) => Some(v.parse::<jiff::Timestamp>().map_err(|_| {
                ApiError::bad_request(format!(
                    "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {v:?} as \"2006\""
                ))
            })?),
        };
        Ok(PodLogOptions {
            container: ctx
                .q("container")
                .filter(|c| !c.is_empty())
                .map(String::from),
            follow: ctx.q_bool("follow"),
            previous: ctx.q_bool("previous"),
            timestamps: ctx.q_bool("timestamps"),
            since_seconds: int("sinceSeconds")?,
            since_time,
            tail_lines: int("tailLines")?,
            limit_bytes: int("limitBytes")?,
        })
    }

    /// `ValidatePodLogOptions`: the field errors as (field, value, detail).
    fn validate(&self) -> Vec<(String, String, &'static str)> {
        let mut errs = Vec::new();
        if let Some(n) = self.tail_lines
            && n < 0
        {
            errs.push((
                "tailLines".into(),
                n.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = self.limit_bytes
            && n < 1
        {
            errs.push(("limitBytes".into(), n.to_string(), "must be greater than 0"));
        }
        if let Some(n) = self.since_seconds
            && n < 1
        {
            errs.push((
                "sinceSeconds".into(),
                n.to_string(),
                "must be greater than 0",
            ));
        }
        if self.since_seconds.is_some() && self.since_time.is_some() {
            // A Forbidden error: no value (see `invalid_log_options`).
            errs.push((
                "sinceSeconds".into(),
                String::new(),
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            ));
        }
        errs
    }

    /// The kubelet's query (`LogLocation`'s params, encoded sorted as Go does).
    fn kubelet_query(&self) -> String {
        let mut p: Vec<(&str, String)> = Vec::new();
        if self.follow {
            p.push(("follow", "true".into()));
        }
        if self.previous {
            p.push(("previous", "true".into()));
        }
        if self.timestamps {
            p.push(("timestamps", "true".into()));
        }
        if let Some(n) = self.since_seconds {
            p.push(("sinceSeconds", n.to_string()));
        }
        if let Some(t) = self.since_time {
            p.push(("sinceTime", t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()));
        }
        if let Some(n) = self.tail_lines {
            p.push(("tailLines", n.to_string()));
        }
        if let Some(n) = self.limit_bytes {
            p.push(("limitBytes", n.to_string()));
        }
        encode_query(p)
    }
}

/// The 422 of `ValidatePodLogOptions` (`The PodLogOptions "x" is invalid: …` in kubectl).
fn invalid_log_options(name: &str, errs: Vec<(String, String, &'static str)>) -> ApiError {
    // An empty value marks a Forbidden error (`field.Forbidden` prints no value).
    let body = |v: &str, d: &str| {
        if v.is_empty() {
            format!("Forbidden: {d}")
        } else {
            format!("Invalid value: {v}: {d}")
        }
    };
    let texts: Vec<String> = errs
        .iter()
        .map(|(f, v, d)| format!("{f}: {}", body(v, d)))
        .collect();
    let agg = if texts.len() == 1 {
        texts[0].clone()
    } else {
        format!("[{}]", texts.join(", "))
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|(f, v, d)| {
            let reason = if v.is_empty() {
                "FieldValueForbidden"
            } else {
                "FieldValueInvalid"
            };
            json!({"reason": reason, "message": body(v, d), "field": f})
        })
        .collect();
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("PodLogOptions {name:?} is invalid: {agg}"),
    );
    e.details = Some(json!({"name": name, "kind": "PodLogOptions", "causes": causes}));
    e
}

/// Every container name of a pod spec, in upstream's visiting order.
fn container_names(pod: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        if let Some(cs) = pod.at(&format!("/spec/{list}")).and_then(Value::as_array) {
            for c in cs {
                if let Some(n) = c.get("name").and_then(Value::as_str) {
                    names.push(n.to_string());
                }
            }
        }
    }
    names
}

/// `validateContainer`: the container a request is for, defaulted when the pod has one.
pub(crate) fn validate_container(pod: &Value, container: Option<&str>) -> ApiResult<String> {
    let name = pod
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match container {
        None => {
            let cs = pod
                .at("/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match cs.as_slice() {
                [one] => Ok(one
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()),
                [] => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}"
                ))),
                _ => Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    container_names(pod).join(" ")
                ))),
            }
        }
        Some(c) if container_names(pod).iter().any(|n| n == c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
    }
}

/// Where a node's kubelet listens: the first address of kubeadm's
/// `--kubelet-preferred-address-types` order (InternalIP, ExternalIP, Hostname) and the port of
/// `daemonEndpoints`.
pub(crate) async fn kubelet_location(ctx: &Ctx, node: &str) -> ApiResult<(String, u16)> {
    let ri = registry::lookup("", "v1", "nodes").ok_or_else(ApiError::no_such_path)?;
    let kv = ctx
        .inner
        .store
        .get(&ri.key(None, node))
        .await?
        .ok_or_else(|| ApiError::not_found(ri, node))?;
    locate(&kv.value, node).map_err(ApiError::internal)
}

/// The kubelet's host and port from a stored Node: its first InternalIP, ExternalIP or Hostname
/// address (else the node's name) and `daemonEndpoints.kubeletEndpoint.Port` (else 10250).
fn locate(stored: &[u8], node: &str) -> Result<(String, u16), serde_json::Error> {
    // Only the addresses and the kubelet's port are read: every node proxy request (a
    // metrics-server scrape of each node every resolution) would otherwise build the whole Node,
    // images and all.
    #[derive(serde::Deserialize)]
    struct Located {
        status: Option<LocatedStatus>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct LocatedStatus {
        addresses: Option<Vec<Address>>,
        daemon_endpoints: Option<Endpoints>,
    }
    #[derive(serde::Deserialize)]
    struct Address {
        #[serde(rename = "type")]
        ty: Option<String>,
        address: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Endpoints {
        kubelet_endpoint: Option<Port>,
    }
    #[derive(serde::Deserialize)]
    struct Port {
        #[serde(rename = "Port")]
        port: Option<Value>,
    }
    let status = serde_json::from_slice::<Located>(stored)?.status;
    let (addrs, endpoints) = status.map_or((None, None), |s| (s.addresses, s.daemon_endpoints));
    let addrs = addrs.unwrap_or_default();
    let host = kubelet_host(
        addrs.iter().map(|a| {
            (
                a.ty.as_deref().unwrap_or(""),
                a.address.as_deref().unwrap_or(""),
            )
        }),
        node,
    )
    .to_string();
    let port = kubelet_port(
        endpoints
            .and_then(|d| d.kubelet_endpoint)
            .and_then(|k| k.port)
            .as_ref()
            .and_then(Value::as_i64),
    );
    Ok((host, port))
}

/// Dials the kubelet at `host:port`, giving up after [`DIAL_TIMEOUT`] of cluster time. The error
/// is Go's `net.Dial` text.
pub(crate) async fn dial(ctx: &Ctx, host: &str, port: u16) -> Result<DuplexStream, String> {
    let net = ctx.inner.kubelet_net.get().cloned();
    let prefix = format!("dial tcp {host}:{port}");
    let Some(net) = net else {
        return Err(format!("{prefix}: connect: no route to host"));
    };
    let clock = ctx.inner.clock.clone();
    tokio::select! {
        biased;
        r = net.dial(host, port) => r.map_err(|e| format!("{prefix}: {e}")),
        _ = clock.sleep(DIAL_TIMEOUT) => Err(format!("{prefix}: i/o timeout")),
    }
}

/// An error that is not an API status, as `ErrorToAPIStatus` returns it: 500, no reason.
fn transport_error(message: String) -> ApiError {
    ApiError::new(500, "", message)
}

/// `GET pods/{name}/log`.
pub(crate) async fn log(ctx: &Ctx) -> ApiResult<Response> {
    let t = &ctx.target;
    let name = t.name.as_deref().unwrap_or("");
    let ns = t.namespace.as_deref().unwrap_or("");
    let opts = PodLogOptions::from_query(ctx)?;
    let errs = opts.validate();
    if !errs.is_empty() {
        return Err(invalid_log_options(name, errs));
    }
    let kv = ctx
        .inner
        .store
        .get(&t.ri.key(t.namespace.as_deref(), name))
        .await?
        .ok_or_else(|| ApiError::not_found(t.ri, name))?;
    let pod = object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?;
    let container = validate_container(&pod, opts.container.as_deref())?;
    let node = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        // A pod that has not been scheduled has no log yet: an empty answer, as upstream.
        return Ok(Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::empty())
            .unwrap_or_default());
    }
    let (host, port) = kubelet_location(ctx, node).await?;
    let path = format!("/containerLogs/{ns}/{name}/{container}");
    let query = opts.kubelet_query();
    let path_q = if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    };
    let url = format!("https://{host}:{port}{path_q}");
    let (mut sender, stop) = connect(ctx, &host, port, |e| format!("Get {url:?}: {e}")).await?;
    let req = Request::get(path_q)
        .header(header::HOST, format!("{host}:{port}"))
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(ApiError::internal)?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|_| transport_error(format!("Get {url:?}: EOF")))?;
    let status = resp.status();
    if !status.is_success() {
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body[..body.len().min(1024 * 1024)]).into_owned();
        return Err(kubelet_error(status, name, text));
    }
    let body = StopOnDrop {
        inner: resp.into_body(),
        _stop: stop,
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::new(body))
        .unwrap_or_default())
}

/// An HTTP/1.1 connection to a kubelet; a failed dial or handshake is a transport error worded
/// by `describe`. The connection lives as long as the returned `stop` sender: dropping it (the
/// response body dropped because the client went away) ends the connection, and with it the
/// kubelet's stream.
async fn connect<B>(
    ctx: &Ctx,
    host: &str,
    port: u16,
    describe: impl Fn(String) -> String,
) -> ApiResult<(
    hyper::client::conn::http1::SendRequest<B>,
    tokio::sync::oneshot::Sender<()>,
)>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = dial(ctx, host, port)
        .await
        .map_err(|e| transport_error(describe(e.to_string())))?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn))
            .await
            .map_err(|e| transport_error(describe(e.to_string())))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = stopped => {}
            _ = connection => {}
        }
    });
    Ok((sender, stop))
}

/// `nodes/{name}/proxy/{path}`: the request is sent on to the node's kubelet (`/pods`,
/// `/healthz`, `/containerLogs/…`, …) and its answer returned as it is. A failed dial is the
/// proxy transport's `error trying to reach service: dial tcp …`.
pub(crate) async fn node_proxy(
    ctx: &Ctx,
    method: axum::http::Method,
    body: bytes::Bytes,
) -> ApiResult<Response> {
    let node = ctx.target.name.as_deref().unwrap_or("");
    let (host, port) = kubelet_location(ctx, node).await?;
    let path = ctx.target.proxy_path.clone().unwrap_or_else(|| "/".into());
    let path_q = match &ctx.raw_query {
        Some(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path,
    };
    let (mut sender, stop) = connect(ctx, &host, port, |e| {
        format!("error trying to reach service: {e}")
    })
    .await?;
    let mut req = Request::builder()
        .method(method)
        .uri(path_q)
        .header(header::HOST, format!("{host}:{port}"));
    if let Some(ct) = ctx.headers.get(header::CONTENT_TYPE) {
        req = req.header(header::CONTENT_TYPE, ct);
    }
    let req = req
        .body(http_body_util::Full::new(body))
        .map_err(ApiError::internal)?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|_| transport_error("error trying to reach service: EOF".into()))?;
    let mut out = Response::builder().status(resp.status());
    for (k, v) in resp.headers() {
        if k != header::TRANSFER_ENCODING && k != header::CONNECTION {
            out = out.header(k, v);
        }
    }
    let body = StopOnDrop {
        inner: resp.into_body(),
        _stop: stop,
    };
    Ok(out.body(Body::new(body)).unwrap_or_default())
}

/// Headers of an upgrade request that the kubelet needs (the rest is hop-by-hop or the API
/// server's own business).
const UPGRADE_HEADERS: [&str; 7] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "x-stream-protocol-version",
];

/// `pods/{name}/exec`, `attach` and `portforward`: upstream's `UpgradeAwareHandler`. The
/// request is sent on to the kubelet; if it switches protocols, the client's connection and the
/// kubelet's are spliced, so the stream protocol (WebSocket or SPDY) is spoken end to end by
/// kubectl and the kubelet. A failed dial is `error dialing backend: …` (500, no reason).
pub(crate) async fn upgrade(
    ctx: &Ctx,
    sub: &str,
    method: axum::http::Method,
) -> ApiResult<Response> {
    let t = &ctx.target;
    let name = t.name.as_deref().unwrap_or("");
    let ns = t.namespace.as_deref().unwrap_or("");
    let kv = ctx
        .inner
        .store
        .get(&t.ri.key(t.namespace.as_deref(), name))
        .await?
        .ok_or_else(|| ApiError::not_found(t.ri, name))?;
    let pod = object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?;
    let path = match sub {
        "portforward" => format!("/portForward/{ns}/{name}"),
        _ => {
            let container = validate_container(&pod, ctx.q("container").filter(|c| !c.is_empty()))?;
            if sub == "exec" && ctx.q("command").is_none() {
                return Err(ApiError::bad_request("you must specify at least 1 command"));
            }
            format!("/{sub}/{ns}/{name}/{container}")
        }
    };
    let node = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let (host, port) = kubelet_location(ctx, node).await?;
    let path_q = match &ctx.raw_query {
        Some(q) if !q.is_empty() => format!("{path}?{q}"),
        _ => path,
    };
    let conn = dial(ctx, &host, port)
        .await
        .map_err(|e| transport_error(format!("error dialing backend: {e}")))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn))
            .await
            .map_err(|e| transport_error(format!("error dialing backend: {e}")))?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(path_q)
        .header(header::HOST, format!("{host}:{port}"));
    for h in UPGRADE_HEADERS {
        for v in ctx.headers.get_all(h) {
            req = req.header(h, v);
        }
    }
    let req = req
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(ApiError::internal)?;
    let mut resp = sender
        .send_request(req)
        .await
        .map_err(|e| transport_error(format!("error proxying to backend: {e}")))?;
    let status = resp.status();
    let mut out = Response::builder().status(status);
    for (k, v) in resp.headers() {
        out = out.header(k, v);
    }
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // The kubelet's refusal goes back as it is (kubectl prints `unable to upgrade
        // connection: <body>` when it is not a Status).
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Ok(out.body(Body::from(body)).unwrap_or_default());
    }
    let Some(client) = ctx.upgrade.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return Err(ApiError::bad_request(
            "Upgrade request required: this connection cannot be upgraded",
        ));
    };
    let backend = hyper::upgrade::on(&mut resp);
    tokio::spawn(async move {
        let (Ok(client), Ok(backend)) = (client.await, backend.await) else {
            return;
        };
        let mut client = hyper_util::rt::TokioIo::new(client);
        let mut backend = hyper_util::rt::TokioIo::new(backend);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
    });
    Ok(out.body(Body::empty()).unwrap_or_default())
}

/// A kubelet's non-2xx answer as the API server's `GenericHttpResponseChecker` maps it.
fn kubelet_error(status: StatusCode, name: &str, body: String) -> ApiError {
    match status.as_u16() {
        400 => ApiError::bad_request(body),
        500 => ApiError::internal(body),
        404 => {
            let mut e = ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource ( pods/log {name})"),
            );
            e.details = Some(json!({"name": name, "kind": "pods/log"}));
            e
        }
        code => ApiError::new(
            code,
            "",
            format!(
                "the server responded with the status code {code} but did not return more information ( pods/log {name})"
            ),
        ),
    }
}

/// A response body that holds a guard until it is dropped.
struct StopOnDrop<B> {
    inner: B,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for StopOnDrop<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_is_found_by_preferred_address_type_and_daemon_endpoint() {
        let node = |status: Value| {
            serde_json::to_vec(&json!({"metadata": {"name": "n"}, "status": status})).unwrap()
        };
        let addr = |ty: &str, a: &str| json!({"type": ty, "address": a});
        let cases = [
            (json!(null), ("n", 10250)),
            (json!({}), ("n", 10250)),
            (
                json!({"addresses": null, "daemonEndpoints": null}),
                ("n", 10250),
            ),
            (
                json!({"addresses": [addr("Hostname", "h"), addr("ExternalIP", "1.2.3.4"), addr("InternalIP", "10.0.0.9")],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10255}}}),
                ("10.0.0.9", 10255),
            ),
            (
                json!({"addresses": [addr("Hostname", "h"), addr("ExternalIP", "1.2.3.4")]}),
                ("1.2.3.4", 10250),
            ),
            (
                json!({"addresses": [{"type": "InternalIP"}, addr("Hostname", "h")]}),
                ("h", 10250),
            ),
            (
                json!({"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}}),
                ("n", 10250),
            ),
            (
                json!({"daemonEndpoints": {"kubeletEndpoint": {"Port": 70000}}}),
                ("n", 10250),
            ),
            (
                json!({"daemonEndpoints": {"kubeletEndpoint": {}}}),
                ("n", 10250),
            ),
        ];
        for (status, (host, port)) in cases {
            let got = locate(&node(status.clone()), "n").unwrap();
            assert_eq!(got, (host.to_string(), port), "{status}");
        }
        assert!(locate(b"not json", "n").is_err());
    }

    #[test]
    fn kubelet_query_is_go_encoded() {
        let o = PodLogOptions {
            follow: true,
            timestamps: true,
            tail_lines: Some(10),
            since_time: Some("2026-11-25T00:43:31Z".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(
            o.kubelet_query(),
            "follow=true&sinceTime=2026-11-25T00%3A43%3A31Z&tailLines=10&timestamps=true"
        );
    }

    #[test]
    fn bad_options_are_upstreams_422() {
        let o = PodLogOptions {
            tail_lines: Some(-1),
            ..Default::default()
        };
        let e = invalid_log_options("web", o.validate());
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        let o = PodLogOptions {
            since_seconds: Some(0),
            limit_bytes: Some(0),
            ..Default::default()
        };
        assert_eq!(
            invalid_log_options("web", o.validate()).message,
            "PodLogOptions \"web\" is invalid: [limitBytes: Invalid value: 0: must be greater than 0, sinceSeconds: Invalid value: 0: must be greater than 0]"
        );
        let o = PodLogOptions {
            since_seconds: Some(10),
            since_time: Some(jiff::Timestamp::UNIX_EPOCH),
            ..Default::default()
        };
        let e = invalid_log_options("web", o.validate());
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
        assert_eq!(
            e.details.unwrap()["causes"][0]["reason"],
            "FieldValueForbidden"
        );
    }

    #[test]
    fn containers_are_validated_like_upstream() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(validate_container(&pod, Some("init")).unwrap(), "init");
        assert_eq!(
            validate_container(&pod, None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [init a b]"
        );
        assert_eq!(
            validate_container(&pod, Some("x")).unwrap_err().message,
            "container x is not valid for pod p"
        );
        let one = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}});
        assert_eq!(validate_container(&one, None).unwrap(), "a");
    }
}
