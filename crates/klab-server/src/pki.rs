//! The cluster's PKI: a self-signed CA, a server certificate for the API endpoint and an admin
//! client certificate, kept as PEM files in the data directory and reused across restarts.
//!
//! The CA certificate is written once; its key is kept so the server certificate can be re-issued
//! when the served host names change (the CA's subject and key are enough to sign: rcgen builds the
//! issuer from the same parameters and key, so clients that trust `ca.crt` keep working).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// PEM material for serving and for the admin kubeconfig.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "klab-ca");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PkiError::Io {
            path: path.into(),
            source,
        }),
    }
}

fn write(path: &Path, contents: &str) -> Result<(), PkiError> {
    crate::files::write_private(path, contents.as_bytes()).map_err(|source| PkiError::Io {
        path: path.into(),
        source,
    })
}

impl Pki {
    /// Loads the PKI from `dir`, creating what is missing. The server certificate is (re)issued
    /// when it does not exist or when `hosts` changed since it was issued.
    pub fn load_or_create(dir: &Path, hosts: &[String]) -> Result<Pki, PkiError> {
        crate::files::private_dir(dir).map_err(|source| PkiError::Io {
            path: dir.into(),
            source,
        })?;
        let p = |n: &str| dir.join(n);
        let (ca_key, ca_cert_pem) = match (read(&p("ca.key"))?, read(&p("ca.crt"))?) {
            (Some(k), Some(c)) => (KeyPair::from_pem(&k)?, c),
            _ => {
                let key = KeyPair::generate()?;
                let cert = ca_params().self_signed(&key)?;
                write(&p("ca.key"), &key.serialize_pem())?;
                write(&p("ca.crt"), &cert.pem())?;
                (key, cert.pem())
            }
        };
        let issuer = Issuer::new(ca_params(), ca_key);
        let hosts_line = hosts.join(",");
        let server = match (
            read(&p("server.crt"))?,
            read(&p("server.key"))?,
            read(&p("server.hosts"))?,
        ) {
            (Some(c), Some(k), Some(h)) if h == hosts_line => (c, k),
            _ => {
                let key = KeyPair::generate()?;
                let mut params = CertificateParams::new(hosts.to_vec())?;
                let mut dn = DistinguishedName::new();
                dn.push(DnType::CommonName, "kube-apiserver");
                params.distinguished_name = dn;
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                params.key_usages = vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ];
                let cert = params.signed_by(&key, &issuer)?;
                write(&p("server.crt"), &cert.pem())?;
                write(&p("server.key"), &key.serialize_pem())?;
                write(&p("server.hosts"), &hosts_line)?;
                (cert.pem(), key.serialize_pem())
            }
        };
        let admin = match (read(&p("admin.crt"))?, read(&p("admin.key"))?) {
            (Some(c), Some(k)) => (c, k),
            _ => {
                let key = KeyPair::generate()?;
                let mut params = CertificateParams::default();
                let mut dn = DistinguishedName::new();
                dn.push(DnType::CommonName, "kubernetes-admin");
                dn.push(DnType::OrganizationName, "system:masters");
                params.distinguished_name = dn;
                params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
                params.key_usages = vec![
                    KeyUsagePurpose::DigitalSignature,
                    KeyUsagePurpose::KeyEncipherment,
                ];
                let cert = params.signed_by(&key, &issuer)?;
                write(&p("admin.crt"), &cert.pem())?;
                write(&p("admin.key"), &key.serialize_pem())?;
                (cert.pem(), key.serialize_pem())
            }
        };
        Ok(Pki {
            ca_cert_pem,
            server_cert_pem: server.0,
            server_key_pem: server.1,
            admin_cert_pem: admin.0,
            admin_key_pem: admin.1,
        })
    }
}

/// Issues a client certificate signed by the cluster CA kept in `dir`: CN = `user`, one O per
/// group, as kube-apiserver's x509 authenticator reads them (`klab user add`). Returns the
/// certificate and key PEM.
pub fn issue_client_cert(
    dir: &Path,
    user: &str,
    groups: &[String],
) -> Result<(String, String), PkiError> {
    if groups.len() > 1 {
        // rcgen keeps one value per attribute type, so a second O would replace the first.
        return Err(PkiError::Io {
            path: dir.into(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "at most one group per user certificate (bind further groups' roles to the user)",
            ),
        });
    }
    let p = |n: &str| dir.join(n);
    let missing = |path: PathBuf| PkiError::Io {
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no cluster CA here (start `klab up` with this data directory first)",
        ),
        path,
    };
    let ca_key = read(&p("ca.key"))?.ok_or_else(|| missing(p("ca.key")))?;
    let issuer = Issuer::new(ca_params(), KeyPair::from_pem(&ca_key)?);
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, user);
    for g in groups {
        dn.push(DnType::OrganizationName, g.as_str());
    }
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let a = Pki::load_or_create(dir.path(), &hosts).unwrap();
        let b = Pki::load_or_create(dir.path(), &hosts).unwrap();
        assert_eq!(a.ca_cert_pem, b.ca_cert_pem);
        assert_eq!(a.server_cert_pem, b.server_cert_pem);
        assert_eq!(a.admin_key_pem, b.admin_key_pem);
        // New host names: a new server certificate from the same CA.
        let c = Pki::load_or_create(dir.path(), &["localhost".to_string()]).unwrap();
        assert_eq!(a.ca_cert_pem, c.ca_cert_pem);
        assert_ne!(a.server_cert_pem, c.server_cert_pem);
    }

    #[test]
    fn user_certificates_carry_name_and_groups() {
        let dir = tempfile::tempdir().unwrap();
        assert!(issue_client_cert(dir.path(), "alice", &[]).is_err());
        Pki::load_or_create(dir.path(), &["localhost".to_string()]).unwrap();
        let (cert, _key) = issue_client_cert(dir.path(), "alice", &["dev".to_string()]).unwrap();
        let der = rustls_pemfile_der(&cert);
        let id = crate::serve::identity_from_cert(&der).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, ["dev", "system:authenticated"]);
        let two = ["dev".to_string(), "qa".to_string()];
        assert!(issue_client_cert(dir.path(), "alice", &two).is_err());
    }

    fn rustls_pemfile_der(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }
}
