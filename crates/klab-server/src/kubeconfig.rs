//! Writes the admin kubeconfig (context `klab`) with the CA and client certificate inlined.

use std::path::Path;

use base64::Engine as _;
use serde_json::json;

use crate::pki::Pki;

/// Writes a kubeconfig for `server` (e.g. `https://127.0.0.1:6443`). JSON is valid YAML, and both
/// kubectl and kube-rs read it.
pub fn write_kubeconfig(path: &Path, server: &str, pki: &Pki) -> std::io::Result<()> {
    write_client_kubeconfig(
        path,
        server,
        &pki.ca_cert_pem,
        "klab-admin",
        &pki.admin_cert_pem,
        &pki.admin_key_pem,
    )
}

/// Writes a kubeconfig (context `klab`) for one client certificate, named `user` in the file.
pub fn write_client_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    cert_pem: &str,
    key_pem: &str,
) -> std::io::Result<()> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let cfg = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "klab", "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(cert_pem),
            "client-key-data": b64(key_pem)}}],
        "contexts": [{"name": "klab", "context": {"cluster": "klab", "user": user, "namespace": "default"}}],
        "current-context": "klab",
        "preferences": {},
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(&cfg).map_err(std::io::Error::other)?;
    // It carries a client key: private from the first byte, replaced atomically.
    crate::files::write_private(path, text.as_bytes())
}

/// `klab user add`: a client certificate for `user` in `groups`, signed by the CA of the cluster
/// whose data directory is `data_dir`, written as a kubeconfig to `out` (default
/// `<data-dir>/users/<user>.kubeconfig`) for the server the admin kubeconfig names. Returns the
/// path written.
pub fn add_user(
    data_dir: &Path,
    user: &str,
    groups: &[String],
    out: Option<&Path>,
) -> Result<std::path::PathBuf, String> {
    if user.is_empty() {
        return Err("a user name is required".into());
    }
    let admin = data_dir.join("kubeconfig");
    let text = std::fs::read_to_string(&admin).map_err(|e| {
        format!(
            "{}: {e} (start `klab up --data-dir {}` first)",
            admin.display(),
            data_dir.display()
        )
    })?;
    let cfg: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", admin.display()))?;
    let server = cfg
        .pointer("/clusters/0/cluster/server")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("{}: no cluster server", admin.display()))?;
    // `klab up` keeps its PKI in <data-dir>/pki.
    let pki = data_dir.join("pki");
    let ca = std::fs::read_to_string(pki.join("ca.crt"))
        .map_err(|e| format!("{}: {e}", pki.join("ca.crt").display()))?;
    let (cert, key) =
        crate::pki::issue_client_cert(&pki, user, groups).map_err(|e| e.to_string())?;
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => {
            // A user name may hold characters a file name cannot (`system:…`, `/`).
            let file: String = user
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            data_dir.join("users").join(format!("{file}.kubeconfig"))
        }
    };
    write_client_kubeconfig(&path, server, &ca, user, &cert, &key)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_kubeconfig_is_private_and_names_the_server() {
        let dir = tempfile::tempdir().unwrap();
        assert!(add_user(dir.path(), "alice", &[], None).is_err());
        let pki = Pki::load_or_create(&dir.path().join("pki"), &["localhost".to_string()]).unwrap();
        write_kubeconfig(
            &dir.path().join("kubeconfig"),
            "https://127.0.0.1:7000",
            &pki,
        )
        .unwrap();
        let path = add_user(dir.path(), "system:node:n1", &["system:nodes".into()], None).unwrap();
        assert_eq!(
            path,
            dir.path().join("users").join("system_node_n1.kubeconfig")
        );
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            cfg["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:7000"
        );
        assert_eq!(cfg["users"][0]["name"], "system:node:n1");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let out = dir.path().join("bob.yaml");
        assert_eq!(add_user(dir.path(), "bob", &[], Some(&out)).unwrap(), out);
    }
}
