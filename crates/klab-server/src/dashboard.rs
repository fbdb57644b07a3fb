//! The dashboard's place in `klab up`: its login token in the data directory and its routes
//! beside the admin endpoint, behind the dashboard's authentication (see `klab_ui`).

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use klab_cluster::Cluster;

/// The login token's file in the data directory (0600).
pub const TOKEN_FILE: &str = "dashboard-token";

/// The saved login token, or a new one (256 bits from the OS) written 0600: kept across
/// restarts, so a dashboard URL stays valid as long as the data directory does.
pub fn load_or_create_token(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(TOKEN_FILE);
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim();
        if t.len() >= 32 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            // Tighten the mode of a token file an older run or a user left readable.
            crate::files::private_file(&path)?;
            return Ok(t.to_string());
        }
        tracing::warn!("{}: not a token; writing a new one", path.display());
    }
    let rng = klab_api::DetRng::from_entropy();
    let token = format!("{}{}", rng.hex32(), rng.hex32());
    crate::files::write_private(&path, token.as_bytes())?;
    Ok(token)
}

/// The admin endpoint and the dashboard, both behind the dashboard's authentication (client
/// certificates pass as they are; the token's cookie stands for an administrator).
pub fn router(cluster: Arc<Cluster>, token: String) -> Router {
    let client = cluster.client(klab_ui::auth::token_identity());
    let dashboard = klab_ui::Dashboard::new(
        client,
        cluster.clock().clone(),
        cluster.health().clone(),
        klab_cluster::FAULT_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        token,
    );
    klab_cluster::admin::admin_router(cluster)
        .merge(klab_ui::router(dashboard.clone()))
        .layer(axum::middleware::from_fn_with_state(
            dashboard,
            klab_ui::authenticate,
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_kept_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let t1 = load_or_create_token(dir.path()).unwrap();
        assert_eq!(t1.len(), 64);
        let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create_token(dir.path()).unwrap(), t1);
        // A file that is not a token is replaced, never served as one.
        std::fs::write(dir.path().join(TOKEN_FILE), "x").unwrap();
        let t2 = load_or_create_token(dir.path()).unwrap();
        assert_ne!(t2, "x");
        assert_eq!(t2.len(), 64);
    }
}

/// The dashboard's routes on an in-process cluster: authentication, the admin endpoint reached
/// by cookie with its own errors, and the event stream's snapshot and deltas.
#[cfg(test)]
mod router_tests {
    use super::*;
    use axum::body::Body;
    use http::{Request, StatusCode, header};
    use http_body_util::BodyExt;
    use klab_api::{Clock, DetRng};
    use klab_apiserver::Identity;
    use klab_cluster::{ClusterConfig, NodeSpec};
    use tower::ServiceExt;

    const TOKEN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    async fn cluster() -> Arc<Cluster> {
        let config = ClusterConfig {
            nodes: vec![NodeSpec::new("n1"), NodeSpec::new("n2")],
            ..Default::default()
        };
        Arc::new(
            Cluster::start(
                klab_store::memory::MemoryStore::new(),
                Clock::virtual_default(),
                DetRng::seeded(1),
                config,
            )
            .await
            .unwrap(),
        )
    }

    fn req(method: &str, uri: &str, cookie: bool, id: Option<Identity>) -> Request<Body> {
        let mut r = Request::builder().method(method).uri(uri);
        if cookie {
            r = r.header(header::COOKIE, format!("{}={TOKEN}", klab_ui::auth::COOKIE));
        }
        let mut r = r.body(Body::empty()).unwrap();
        if let Some(id) = id {
            r.extensions_mut().insert(id);
        }
        r
    }

    async fn call(router: &Router, r: Request<Body>) -> (StatusCode, http::HeaderMap, String) {
        let resp = router.clone().oneshot(r).await.unwrap();
        let (parts, body) = resp.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn the_page_needs_the_token_or_an_admin_certificate() {
        let c = cluster().await;
        let router = super::router(c.clone(), TOKEN.into());
        let (code, _, body) = call(&router, req("GET", "/ui/", false, None)).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        assert!(body.contains("login token"), "{body}");
        let (code, _, _) = call(&router, req("GET", "/ui/?token=nope", false, None)).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        // The login sets the cookie and takes the token out of the address bar.
        let (code, headers, _) = call(
            &router,
            req("GET", &format!("/ui/?token={TOKEN}"), false, None),
        )
        .await;
        assert_eq!(code, StatusCode::SEE_OTHER);
        assert_eq!(headers[header::LOCATION], "/ui/");
        let cookie = headers[header::SET_COOKIE].to_str().unwrap();
        assert!(cookie.starts_with(&format!("klab-dashboard={TOKEN};")));
        for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(cookie.contains(attr), "{cookie}");
        }
        let (code, _, body) = call(&router, req("GET", "/ui/", true, None)).await;
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains(r#""faults":["stop-kubelet","start-kubelet""#));
        let (code, _, _) = call(&router, req("GET", "/ui/", false, Some(Identity::admin()))).await;
        assert_eq!(code, StatusCode::OK);
        let dev = Identity::new("dev", &["system:authenticated"]);
        let (code, _, body) = call(&router, req("GET", "/ui/", false, Some(dev.clone()))).await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(body.contains("system:masters"), "{body}");
        // The buttons' admin calls: by cookie; a certificate outside system:masters gets the
        // admin endpoint's own 403; nothing at all is 401.
        let (code, _, body) = call(
            &router,
            req("POST", "/klab/v1/nodes/n1/stop-kubelet", false, Some(dev)),
        )
        .await;
        assert_eq!(code, StatusCode::FORBIDDEN);
        assert!(body.contains("only system:masters may use the klab admin endpoint"));
        let (code, _, _) = call(
            &router,
            req("POST", "/klab/v1/nodes/n1/stop-kubelet", false, None),
        )
        .await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        assert!(
            c.node_state("n1").unwrap().kubelet_running,
            "refused calls change nothing"
        );
        // Bad input: the admin endpoint's messages, which the page shows as they are.
        let (code, _, body) = call(
            &router,
            req("POST", "/klab/v1/nodes/n9/stop-kubelet", true, None),
        )
        .await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(body.contains(r#"nodes \"n9\" not found"#), "{body}");
        let (code, _, body) = call(
            &router,
            req("POST", "/klab/v1/nodes/n1/explode", true, None),
        )
        .await;
        assert_eq!(code, StatusCode::BAD_REQUEST);
        assert!(body.contains("unknown fault"), "{body}");
        let (code, _, _) = call(
            &router,
            req("POST", "/klab/v1/nodes/n1/stop-kubelet", true, None),
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        assert!(!c.node_state("n1").unwrap().kubelet_running);
    }

    /// Reads server-sent events off a body until `want` accepts one (name, JSON data).
    async fn next_event(
        body: &mut Body,
        buf: &mut String,
        mut want: impl FnMut(&str, &serde_json::Value) -> bool,
    ) -> (String, serde_json::Value) {
        loop {
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let mut name = String::new();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let v: serde_json::Value = serde_json::from_str(&data).unwrap();
                if want(&name, &v) {
                    return (name, v);
                }
            }
            let frame = body.frame().await.expect("the stream goes on").unwrap();
            if let Ok(data) = frame.into_data() {
                buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_event_stream_sends_a_snapshot_then_the_node_going_not_ready() {
        let c = cluster().await;
        let router = super::router(c.clone(), TOKEN.into());
        let resp = router
            .clone()
            .oneshot(req("GET", "/ui/events", true, None))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
        let mut body = resp.into_body();
        let mut buf = String::new();
        // The first event is the whole picture; deltas follow. Apply them as the page does
        // until both nodes registered, are Ready and renewed their Leases.
        let (name, mut snap) = next_event(&mut body, &mut buf, |_, _| true).await;
        assert_eq!(name, "snapshot");
        let ready = |v: &serde_json::Value| {
            ["n1", "n2"]
                .iter()
                .all(|n| v["nodes"][n]["ready"] == "True" && v["nodes"][n]["heartbeat"].is_string())
        };
        while !ready(&snap) {
            let (name, d) = next_event(&mut body, &mut buf, |_, _| true).await;
            assert_eq!(name, "delta");
            for part in ["nodes", "pods", "workloads"] {
                for (k, v) in d[part].as_object().into_iter().flatten() {
                    snap[part][k] = v.clone();
                }
            }
        }
        assert!(snap["nodes"]["n1"]["heartbeat"].is_string(), "{snap}");
        assert!(snap["speed"].is_number());
        // Stop n1's kubelet: after the grace period a delta shows it Unknown (NotReady).
        c.apply_fault("n1", klab_cluster::parse_fault("stop-kubelet").unwrap())
            .await
            .unwrap();
        let (name, delta) = next_event(&mut body, &mut buf, |name, v| {
            name == "delta" && v["nodes"]["n1"]["ready"] == "Unknown"
        })
        .await;
        assert_eq!(name, "delta");
        assert_eq!(delta["nodes"]["n1"]["status"], "NotReady");
        assert!(
            delta["nodes"].get("n2").is_none(),
            "n2 did not change in that delta: {delta}"
        );
    }
}
