//! The TLS listener: rustls with ALPN h2 and http/1.1 (kubectl negotiates h2, kube-rs speaks
//! HTTP/1.1), optional client certificates verified against the cluster CA, and the certificate's
//! subject turned into the request `Identity`.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
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

/// Serves `router` on `listener` over TLS until `shutdown` completes.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let acceptor = TlsAcceptor::from(tls);
    tokio::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!("TLS handshake failed: {e}");
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
                    match identity {
                        Some(id) => {
                            req.extensions_mut().insert(id);
                        }
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
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder
                .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
            if let Err(e) = conn.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}
