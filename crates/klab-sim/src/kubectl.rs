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
    router: klab_apiserver::ComponentService,
    namespace: &str,
    name: &str,
    container: Option<&str>,
    command: &[String],
) -> Vec<String> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    // The connection's server side ends with this call, even when the call is dropped.
    let _server = AbortOnDrop(tokio::spawn(async move {
        let svc = hyper_util::service::TowerToHyperService::new(router);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(server_io), svc)
            .with_upgrades()
            .await;
    }));
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
    run_exec(url, client_io).await
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use klab_cluster::{Cluster, ClusterConfig, NodeSpec};
    use std::time::Duration;

    async fn cluster_with_pod() -> Cluster {
        let config = ClusterConfig {
            nodes: vec![NodeSpec::new("n1")],
            ..Default::default()
        };
        let c = Cluster::start(
            klab_store::memory::MemoryStore::new(),
            klab_api::Clock::virtual_default(),
            klab_api::DetRng::seeded(5),
            config,
        )
        .await
        .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx:1.27",
                "env": [{"name": "GREETING", "value": "hello"}]}]}
        }))
        .unwrap();
        let pods: Api<Pod> = Api::namespaced(c.admin_client(), "default");
        pods.create(&Default::default(), &pod).await.unwrap();
        for _ in 0..60 {
            let p = pods.get("p").await.unwrap();
            if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
                return c;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("pod never ran");
    }

    fn router(c: &Cluster) -> klab_apiserver::ComponentService {
        c.api().router_as(klab_apiserver::Identity::admin())
    }

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn exec_runs_the_simulated_shell_in_virtual_time() {
        let c = cluster_with_pod().await;
        let run = |cmd: &[&str]| {
            let (r, a) = (router(&c), argv(cmd));
            async move { exec(r, "default", "p", None, &a).await }
        };
        assert_eq!(run(&["printenv", "GREETING"]).await, vec!["hello"]);
        assert_eq!(
            run(&[]).await,
            vec!["Error from server (BadRequest): you must specify at least 1 command"]
        );
        let start = tokio::time::Instant::now();
        assert_eq!(
            run(&["sh", "-c", "sleep 20; echo x > /f; cat /f; exit 2"]).await,
            vec!["x", "command terminated with exit code 2"]
        );
        assert_eq!(start.elapsed(), Duration::from_secs(20));
        assert_eq!(
            run(&["ps"]).await[1],
            "    1 root      0:00 nginx: master process nginx -g daemon off;"
        );
        // `kill 1`: nginx exits on SIGTERM, and the exec'd process dies with its container.
        let out = run(&["sh", "-c", "kill 1; sleep 5"]).await;
        assert_eq!(out, vec!["command terminated with exit code 137"]);
        assert_eq!(
            run(&["ls"]).await,
            vec!["error: unable to upgrade connection: container not found (\"c\")"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_exec_leaves_nothing_running() {
        let c = cluster_with_pod().await;
        let endpoint = c.kubelet_endpoint("n1").unwrap();
        let sleep = argv(&["sleep", "3600"]);
        let long = exec(router(&c), "default", "p", None, &sleep);
        assert!(
            tokio::time::timeout(Duration::from_secs(10), long)
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            endpoint.open_streams(),
            0,
            "the session outlived its client"
        );
        // And the kubelet still serves.
        let hostname = argv(&["hostname"]);
        let run = exec(router(&c), "default", "p", None, &hostname);
        assert_eq!(run.await, vec!["p"]);
    }
}
