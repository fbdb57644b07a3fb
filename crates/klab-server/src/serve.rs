//! The TLS listener: rustls with ALPN h2 and http/1.1 (kubectl negotiates h2, kube-rs speaks
//! HTTP/1.1), optional client certificates verified against the cluster CA, and the certificate's
//! subject turned into the request `Identity`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use axum::response::IntoResponse;
use klab_apiserver::{ApiError, Identity};

use crate::pki::Pki;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServeError::Tls(e.to_string()))
}

fn key(pem: &str) -> Result<PrivateKeyDer<'static>, ServeError> {
    rustls_pemfile::private_key(&mut pem.as_bytes())
        .map_err(|e| ServeError::Tls(e.to_string()))?
        .ok_or_else(|| ServeError::Tls("no private key in PEM".into()))
}

/// The rustls server configuration: server certificate, optional client certificates signed by the
/// cluster CA, ALPN h2 + http/1.1.
pub fn tls_config(pki: &Pki) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(&pki.ca_cert_pem)? {
        roots.add(c).map_err(|e| ServeError::Tls(e.to_string()))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&pki.server_cert_pem)?, key(&pki.server_key_pem)?)
        .map_err(|e| ServeError::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The identity a verified client certificate carries: CN is the user, each O a group.
pub fn identity_from_cert(der: &CertificateDer<'_>) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(String::from))
        .collect();
    groups.push("system:authenticated".into());
    Some(Identity { user, groups })
}

/// Paths anonymous clients may read (upstream's `system:public-info-viewer`).
fn is_public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

/// Requests without a certificate that the dashboard's own authentication judges: its page and
/// events, and admin-endpoint calls carrying its cookie. Nothing else gets past without one.
fn is_dashboard<B>(req: &Request<B>) -> bool {
    let path = req.uri().path();
    path == "/ui"
        || path.starts_with("/ui/")
        || (path.starts_with("/klab/v1/")
            && req
                .headers()
                .get(http::header::COOKIE)
                .and_then(|c| c.to_str().ok())
                .is_some_and(|c| klab_ui::auth::cookie_value(c, klab_ui::auth::COOKIE).is_some()))
}

/// Connection limits of the TLS listener, with kube-apiserver's values as defaults.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// A client must finish the TLS handshake within this (upstream: 10 s).
    pub tls_handshake_timeout: Duration,
    /// An HTTP/1 client must send its request headers within this (upstream `ReadHeaderTimeout`
    /// 32 s).
    pub header_read_timeout: Duration,
    /// Connections served at once; beyond it new ones wait in the kernel's accept queue until
    /// one closes (they are not refused).
    pub max_connections: usize,
    /// End every open connection (a watch mid-stream included) when serving stops, as a
    /// process that exits drops its sockets — `klab up` stopping the API server on purpose.
    /// Off, open connections finish on their own.
    pub end_connections_on_shutdown: bool,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            tls_handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(32),
            max_connections: 4096,
            end_connections_on_shutdown: false,
        }
    }
}

/// The pause after a failed `accept` (Go's `http.Server`: 5 ms, doubling, at most 1 s) — out of
/// file descriptors, retrying at once would spin a core and flood the log.
pub fn accept_backoff(previous: Option<Duration>) -> Duration {
    match previous {
        None => Duration::from_millis(5),
        Some(d) => d.saturating_mul(2).min(Duration::from_secs(1)),
    }
}

/// Accepts one connection, set up as Go's `net/http` server sets its connections up:
/// `TCP_NODELAY` on. Without it, a response written in more than one segment (TLS records for
/// the headers and the body) can wait for the client's delayed acknowledgement of the first: a
/// `/version` over TLS took 49 ms instead of 7, and each page of a `kubectl get nodes` at 5 000
/// nodes about 15 ms more than it does now.
async fn accept(
    listener: &TcpListener,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    let (tcp, peer) = listener.accept().await?;
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("setting TCP_NODELAY: {e}");
    }
    Ok((tcp, peer))
}

/// Serves `router` on `listener` over TLS until `shutdown` completes, with the default limits.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    serve_tls_with(listener, tls, router, shutdown, ServeConfig::default()).await
}

/// Serves `router` on `listener` over TLS until `shutdown` completes.
pub async fn serve_tls_with(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
    cfg: ServeConfig,
) -> Result<(), ServeError> {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(tokio::sync::Semaphore::new(cfg.max_connections.max(1)));
    let mut backoff: Option<Duration> = None;
    // Connections that end with the server: dropping the set (on any return) aborts them.
    let mut owned = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(()),
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return Ok(()),
            },
        };
        let (tcp, peer) = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(()),
            accepted = accept(&listener) => match accepted {
                Ok(a) => {
                    backoff = None;
                    a
                }
                Err(e) => {
                    let delay = accept_backoff(backoff);
                    backoff = Some(delay);
                    // One line per pause, as Go's "http: Accept error: …; retrying in 5ms".
                    tracing::warn!("accept error: {e}; retrying in {delay:?}");
                    tokio::select! {
                        biased;
                        _ = &mut shutdown => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let end_with_server = cfg.end_connections_on_shutdown;
        let cfg = cfg.clone();
        let connection = async move {
            let _permit = permit;
            let tls =
                match tokio::time::timeout(cfg.tls_handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(t)) => t,
                    Ok(Err(e)) => {
                        tracing::debug!("TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake timed out");
                        return;
                    }
                };
            let identity = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(identity_from_cert);
            let svc = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
                let router = router.clone();
                let identity = identity.clone();
                async move {
                    let mut req = req.map(Body::new);
                    // The client's address, for the audit log's sourceIPs.
                    req.extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                    match identity {
                        Some(id) => {
                            req.extensions_mut().insert(id);
                        }
                        // A bearer token is the API server's to check (service-account
                        // tokens); it answers 401 when the token does not verify.
                        None if req
                            .headers()
                            .get(http::header::AUTHORIZATION)
                            .is_some_and(|v| v.as_bytes().starts_with(b"Bearer ")) => {}
                        // The dashboard authenticates its page by login token or cookie,
                        // and the admin endpoint's calls by cookie (`klab_ui::authenticate`).
                        None if is_dashboard(&req) => {}
                        None if is_public(req.uri().path()) => {
                            req.extensions_mut().insert(Identity::new(
                                "system:anonymous",
                                &["system:unauthenticated"],
                            ));
                        }
                        None => {
                            return Ok::<_, std::convert::Infallible>(
                                ApiError::unauthorized().into_response(),
                            );
                        }
                    }
                    router.oneshot(req).await
                }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(cfg.header_read_timeout);
            // Long label selectors and field selectors travel in the URL: allow what Go's
            // MaxHeaderBytes (1 MiB) allows, so the API answers them (with a Status) itself.
            builder.http2().max_header_list_size(1 << 20);
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        };
        if end_with_server {
            while owned.try_join_next().is_some() {}
            owned.spawn(connection);
        } else {
            tokio::spawn(connection);
        }
    }
}

/// Serves `router` in plain HTTP on a Unix socket whose file only its owner may open (the data
/// directory's owner, who holds the administrator's key anyway): every request acts as the
/// cluster administrator. `klab up` serves its admin endpoint there, so that `klab component
/// start kube-apiserver` reaches a cluster whose API server is stopped.
pub async fn serve_unix(
    listener: tokio::net::UnixListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            biased;
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!("admin socket accept error: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let router = router.clone();
        tokio::spawn(async move {
            let svc = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(Identity::admin());
                router.clone().oneshot(req)
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc));
            if let Err(e) = conn.await {
                tracing::debug!("admin socket connection ended: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client-certificate path: a real certificate names its user and group; any bytes —
    /// truncations, flipped bytes, random buffers — give no identity or another, never a panic
    /// (a truncated certificate gives none).
    #[test]
    fn client_certificates_of_any_bytes_never_panic() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let dir = tempfile::tempdir().unwrap();
        Pki::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        let (pem, _) =
            crate::pki::issue_client_cert(dir.path(), "alice", &["dev".to_string()]).unwrap();
        let (_, parsed) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let der = parsed.contents;
        assert_eq!(
            identity_from_cert(&CertificateDer::from(der.clone())),
            Some(Identity::new("alice", &["dev", "system:authenticated"]))
        );
        let mut runner = TestRunner::new(Config {
            cases: 2000,
            failure_persistence: None,
            ..Config::default()
        });
        let input = (
            0u8..3,
            any::<usize>(),
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..600),
        );
        runner
            .run(&input, |(kind, i, b, random)| {
                let bytes = match kind {
                    0 => der[..i % der.len()].to_vec(),
                    1 => {
                        let mut d = der.clone();
                        let at = i % d.len();
                        d[at] ^= b | 1;
                        d
                    }
                    _ => random,
                };
                let id = identity_from_cert(&CertificateDer::from(bytes));
                if kind == 0 {
                    prop_assert_eq!(id, None);
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn accept_errors_back_off_like_go() {
        let mut d = None;
        let mut seen = Vec::new();
        for _ in 0..10 {
            let next = accept_backoff(d);
            seen.push(next.as_millis());
            d = Some(next);
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    }

    #[test]
    fn only_the_dashboard_passes_without_a_certificate() {
        let req = |path: &str, cookie: Option<&str>| {
            let mut b = Request::builder().uri(path);
            if let Some(c) = cookie {
                b = b.header(http::header::COOKIE, c);
            }
            b.body(()).unwrap()
        };
        let cookie = Some("klab-dashboard=abc");
        assert!(is_dashboard(&req("/ui", None)));
        assert!(is_dashboard(&req("/ui/events", None)));
        assert!(is_dashboard(&req("/klab/v1/nodes/n1/stop-kubelet", cookie)));
        // The API never: a dashboard cookie is not a credential there.
        assert!(!is_dashboard(&req("/api/v1/pods", cookie)));
        assert!(!is_dashboard(&req("/uix", None)));
        assert!(!is_dashboard(&req("/klab/v1/nodes", None)));
        assert!(!is_dashboard(&req("/klab/v1/nodes", Some("other=abc"))));
    }

    /// Accepted connections send small segments at once (`TCP_NODELAY`), as Go's server does.
    #[tokio::test]
    async fn accepted_connections_do_not_wait_to_coalesce_segments() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert!(!client.nodelay().unwrap(), "a fresh socket coalesces");
        let (tcp, _) = accept(&listener).await.unwrap();
        assert!(tcp.nodelay().unwrap());
    }

    /// A client that connects and never says anything is dropped after the handshake timeout
    /// (real sockets on loopback; the wait is bounded).
    #[tokio::test]
    async fn silent_clients_are_dropped_after_the_handshake_timeout() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::load_or_create(dir.path(), &["localhost".into()]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = ServeConfig {
            tls_handshake_timeout: Duration::from_millis(200),
            ..ServeConfig::default()
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_tls_with(
            listener,
            tls_config(&pki).unwrap(),
            Router::new(),
            async {
                let _ = stop_rx.await;
            },
            cfg,
        ));
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
            .await
            .expect("closed within the bound")
            .unwrap_or(0);
        assert_eq!(n, 0, "the server closed the silent connection");
        let _ = stop_tx.send(());
        server.await.unwrap().unwrap();
    }
}
