//! Writes the admin kubeconfig (context `klab`) with the CA and client certificate inlined.

use std::path::Path;

use base64::Engine as _;
use serde_json::json;

use crate::pki::Pki;

/// Writes a kubeconfig for `server` (e.g. `https://127.0.0.1:6443`). JSON is valid YAML, and both
/// kubectl and kube-rs read it.
pub fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> std::io::Result<()> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let cfg = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "klab", "cluster": {"server": server, "certificate-authority-data": b64(&pki.ca_cert_pem)}}],
        "users": [{"name": "klab-admin", "user": {
            "client-certificate-data": b64(&pki.admin_cert_pem),
            "client-key-data": b64(&pki.admin_key_pem)}}],
        "contexts": [{"name": "klab", "context": {"cluster": "klab", "user": "klab-admin", "namespace": "default"}}],
        "current-context": "klab",
        "preferences": {},
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(&cfg).map_err(std::io::Error::other)?;
    // It carries the admin key: private from the first byte, replaced atomically.
    crate::files::write_private(path, text.as_bytes())
}
