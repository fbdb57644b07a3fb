//! `kubectl port-forward`: the kubelet's `/portForward` over SPDY (`portforward.k8s.io`), and
//! the simulated container's answer on a forwarded port.
//!
//! kubectl opens two streams per local connection (`streamtype` `error` and `data`, paired by
//! `requestid`, with the container `port`). Nothing listens in a simulated container, so every
//! port answers like a minimal HTTP server: it reads one request and answers it, then closes
//! (nginx images serve nginx's default page; other images a short text naming the pod and
//! port). kubectl ≥ 1.31 tunnels the same SPDY session through a WebSocket
//! (`SPDY/3.1+portforward.k8s.io`, see [`crate::spdy::tunnel`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use tokio::io::AsyncWrite;

use crate::exec::ExecTarget;
use crate::spdy::{Event, Session};

/// nginx's default `index.html` (615 bytes).
const NGINX_INDEX: &str = "<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
<style>
html { color-scheme: light dark; }
body { width: 35em; margin: 0 auto;
font-family: Tahoma, Verdana, Arial, sans-serif; }
</style>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>

<p>For online documentation and support please refer to
<a href=\"http://nginx.org/\">nginx.org</a>.<br/>
Commercial support is available at
<a href=\"http://nginx.com/\">nginx.com</a>.</p>

<p><em>Thank you for using nginx.</em></p>
</body>
</html>
";

/// The simulated container's HTTP answer to `request` on `port`.
pub fn http_answer(
    image: &str,
    pod: &str,
    port: &str,
    request: &[u8],
    now: jiff::Timestamp,
) -> Vec<u8> {
    let line = String::from_utf8_lossy(request);
    let first = line.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("GET"), parts.next().unwrap_or("/"));
    let name = image.rsplit('/').next().unwrap_or(image);
    let (repo, tag) = name.split_once(':').unwrap_or((name, "latest"));
    let date = now.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string();
    let (status, server, ctype, body) = match repo {
        "nginx" if path == "/" || path == "/index.html" => (
            "200 OK",
            format!("nginx/{tag}"),
            "text/html",
            NGINX_INDEX.to_string(),
        ),
        "nginx" => (
            "404 Not Found",
            format!("nginx/{tag}"),
            "text/html",
            format!(
                "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/{tag}</center>\r\n</body>\r\n</html>\r\n"
            ),
        ),
        _ => (
            "200 OK",
            "klab-simulated".to_string(),
            "text/plain; charset=utf-8",
            format!("{pod}: port {port} ({image}, simulated by klab)\n"),
        ),
    };
    let body = if method == "HEAD" {
        String::new()
    } else {
        body
    };
    let len = if method == "HEAD" && status == "200 OK" && repo == "nginx" {
        NGINX_INDEX.len()
    } else {
        body.len()
    };
    format!(
        "HTTP/1.1 {status}\r\nServer: {server}\r\nDate: {date}\r\nContent-Type: {ctype}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    )
    .into_bytes()
}

/// One forwarded connection: its two streams and what the client sent so far.
#[derive(Default)]
struct Forward {
    data: Option<u32>,
    error: Option<u32>,
    port: String,
    request: Vec<u8>,
    answered: bool,
}

/// Serves the port-forward streams of one connection until the client goes away.
pub async fn session<W: AsyncWrite + Unpin>(mut s: Session<W>, target: ExecTarget) {
    let _open = crate::server::StreamGuard::new(&target.endpoint.open_streams);
    let image = target
        .pod
        .spec
        .as_ref()
        .and_then(|sp| sp.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let pod = target.pod.metadata.name.clone().unwrap_or_default();
    let mut forwards: BTreeMap<String, Forward> = BTreeMap::new();
    let mut by_stream: BTreeMap<u32, String> = BTreeMap::new();
    loop {
        match s.next().await {
            Event::Open { id, headers, .. } => {
                if s.writer.reply(id).await.is_err() {
                    return;
                }
                let request_id = headers.get("requestid").cloned().unwrap_or_default();
                let f = forwards.entry(request_id.clone()).or_default();
                f.port = headers.get("port").cloned().unwrap_or_default();
                match headers.get("streamtype").map(String::as_str) {
                    Some("data") => f.data = Some(id),
                    Some("error") => f.error = Some(id),
                    _ => {}
                }
                by_stream.insert(id, request_id);
            }
            Event::Data { id, data, fin } => {
                let Some(rid) = by_stream.get(&id).cloned() else {
                    continue;
                };
                let Some(f) = forwards.get_mut(&rid) else {
                    continue;
                };
                if f.data != Some(id) || f.answered {
                    continue;
                }
                f.request.extend_from_slice(&data);
                let complete = f.request.windows(4).any(|w| w == b"\r\n\r\n");
                if complete || fin || f.request.len() > 64 * 1024 {
                    f.answered = true;
                    let answer = Bytes::from(http_answer(
                        &image,
                        &pod,
                        &f.port,
                        &f.request,
                        target.endpoint.clock.now(),
                    ));
                    let (d, e) = (f.data, f.error);
                    if let Some(d) = d
                        && (s.writer.data(d, &answer).await.is_err()
                            || s.writer.fin(d).await.is_err())
                    {
                        return;
                    }
                    if let Some(e) = e
                        && s.writer.fin(e).await.is_err()
                    {
                        return;
                    }
                    // Answered: forget the request and its streams (a long port-forward serves
                    // many connections; what is done must not stay).
                    forwards.remove(&rid);
                    for id in [d, e].into_iter().flatten() {
                        by_stream.remove(&id);
                    }
                }
            }
            Event::Reset { id } => {
                if let Some(rid) = by_stream.remove(&id)
                    && let Some(f) = forwards.remove(&rid)
                {
                    for other in [f.data, f.error].into_iter().flatten() {
                        by_stream.remove(&other);
                    }
                }
            }
            Event::Closed => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_serves_its_default_page() {
        let now = jiff::Timestamp::from_second(1_767_225_600).unwrap();
        let a = http_answer(
            "nginx:1.27",
            "web",
            "80",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            now,
        );
        let a = String::from_utf8(a).unwrap();
        assert!(
            a.starts_with("HTTP/1.1 200 OK\r\nServer: nginx/1.27\r\n"),
            "{a}"
        );
        assert!(a.contains("Content-Length: 615\r\n"));
        assert!(a.ends_with(NGINX_INDEX));
        assert_eq!(NGINX_INDEX.len(), 615);
        let a = http_answer("busybox", "p", "8080", b"GET /x HTTP/1.1\r\n\r\n", now);
        assert!(
            String::from_utf8(a)
                .unwrap()
                .ends_with("p: port 8080 (busybox, simulated by klab)\n")
        );
    }
}
