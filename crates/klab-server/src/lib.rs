//! klab-server: serves the API server's Router to kubectl and other processes over TLS.
//!
//! On first start `Pki::load_or_create` makes a CA, a server certificate and an admin client
//! certificate (`O=system:masters`) in the data directory and writes a kubeconfig (context `klab`);
//! later starts reuse them, so kubeconfigs handed out stay valid. Each TLS connection's client
//! certificate becomes the request `Identity` (CN = user, O = groups); requests without one are
//! refused with 401, except the public health and version endpoints.

pub mod dashboard;
pub mod files;
pub mod kubeconfig;
pub mod pki;
pub mod serve;
pub mod up;

pub use kubeconfig::write_kubeconfig;
pub use pki::Pki;
pub use serve::{ServeConfig, ServeError, serve_tls, serve_tls_with, serve_unix};
