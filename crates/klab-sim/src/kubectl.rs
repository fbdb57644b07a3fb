//! What kubectl prints for the `logs` and `exec` scenario steps, so that the seed-000 checks
//! (`connection refused` with the kubelet stopped, `i/o timeout` with the node off) are
//! scenario files with golden traces.
//!
//! Both go through the API server like kubectl: `logs` is a GET of `pods/log`; `exec` opens a
//! WebSocket (`v5.channel.k8s.io`, kubectl ≥ 1.30's protocol) to `pods/exec` over an in-memory
//! HTTP/1.1 connection to the API server's Router, so the upgrade, the proxy to the kubelet and
//! the dial through the simulated network are the ones `klab up` uses. (kubectl ≥ 1.30 retries
//! a refused WebSocket with SPDY, which doubles a dial timeout; a step makes one attempt.)

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use serde_json::Value;
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

/// kubectl's `Error from server (Reason): message` / `Error from server: message`.
fn status_line(status: &Value) -> String {
    let message = status.get("message").and_then(Value::as_str).unwrap_or("");
    match status.get("reason").and_then(Value::as_str) {
        Some(r) if !r.is_empty() => format!("Error from server ({r}): {message}"),
        _ => format!("Error from server: {message}"),
    }
}

/// `kubectl logs`: the log's lines, or the error line.
pub async fn logs(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    container: Option<&str>,
    tail: Option<i64>,
) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = LogParams {
        container: container.map(String::from),
        tail_lines: tail,
        ..Default::default()
    };
    match api.logs(name, &lp).await {
        Ok(text) => text.lines().map(String::from).collect(),
        Err(kube::Error::Api(s)) => vec![status_line(&serde_json::json!({
            "reason": s.reason, "message": s.message
        }))],
        Err(e) => vec![format!("error: {e}")],
    }
}

/// Go's `url.QueryEscape`.
fn escape(s: &str) -> String {
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

/// `kubectl exec POD -- COMMAND…`: stdout lines, stderr lines, then kubectl's last word
/// (`command terminated with exit code N`, or the error).
pub async fn exec(
    router: axum::Router,
    namespace: &str,
    name: &str,
    container: Option<&str>,
    command: &[String],
) -> Vec<String> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(async move {
        let svc = hyper_util::service::TowerToHyperService::new(router);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(server_io), svc)
            .with_upgrades()
            .await;
    });
    let mut query: Vec<String> = command
        .iter()
        .map(|c| format!("command={}", escape(c)))
        .collect();
    if let Some(c) = container {
        query.push(format!("container={}", escape(c)));
    }
    query.push("stderr=true".into());
    query.push("stdout=true".into());
    let url = format!(
        "ws://klab/api/v1/namespaces/{namespace}/pods/{name}/exec?{}",
        query.join("&")
    );
    let out = run_exec(url, client_io).await;
    server.abort();
    out
}

async fn run_exec(url: String, io: tokio::io::DuplexStream) -> Vec<String> {
    let mut req = match url.into_client_request() {
        Ok(r) => r,
        Err(e) => return vec![format!("error: {e}")],
    };
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        http::HeaderValue::from_static("v5.channel.k8s.io"),
    );
    let mut ws = match tokio_tungstenite::client_async(req, io).await {
        Ok((ws, _)) => ws,
        Err(tungstenite::Error::Http(resp)) => {
            let body = resp.body().clone().unwrap_or_default();
            return match serde_json::from_slice::<Value>(&body) {
                Ok(status) => vec![status_line(&status)],
                Err(_) => vec![format!(
                    "error: unable to upgrade connection: {}",
                    String::from_utf8_lossy(&body)
                )],
            };
        }
        Err(e) => return vec![format!("error: {e}")],
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut status: Option<Value> = None;
    while let Some(Ok(msg)) = ws.next().await {
        match msg {
            Message::Binary(b) => match b.first() {
                Some(1) => stdout.push_str(&String::from_utf8_lossy(&b[1..])),
                Some(2) => stderr.push_str(&String::from_utf8_lossy(&b[1..])),
                Some(3) => status = serde_json::from_slice(&b[1..]).ok(),
                _ => {}
            },
            Message::Close(_) => break,
            _ => {}
        }
    }
    let _ = ws.close(None).await;
    let mut lines: Vec<String> = stdout.lines().map(String::from).collect();
    lines.extend(stderr.lines().map(String::from));
    match status {
        Some(s) if s.get("status").and_then(Value::as_str) == Some("Success") => {}
        Some(s) if s.get("reason").and_then(Value::as_str) == Some("NonZeroExitCode") => {
            let code = s
                .pointer("/details/causes/0/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            lines.push(format!("command terminated with exit code {code}"));
        }
        Some(s) => lines.push(format!(
            "error: {}",
            s.get("message").and_then(Value::as_str).unwrap_or("")
        )),
        None => lines.push("error: error reading from error stream: EOF".into()),
    }
    lines
}
