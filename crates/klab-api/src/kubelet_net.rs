//! The network between the control plane and the kubelets, as a seam: what a dial to a
//! kubelet's port meets, and where a node's kubelet listens.
//!
//! Two clients dial kubelets, as on a real cluster: the API server (logs, exec, attach,
//! port-forward and the node proxy) and metrics-server (its scrapes of `/metrics/resource`).
//! The composition root provides one [`KubeletNetwork`] for both, so a node's faults decide what
//! each of them sees: a stopped kubelet refuses the dial at once, a powered-off, frozen or
//! partitioned node never answers and the caller's own timeout ends the dial.

use std::future::Future;
use std::pin::Pin;

use tokio::io::DuplexStream;

/// Why a dial to a kubelet failed at once (a dial that is never answered just stays pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialError {
    /// Nothing listens on the port (TCP RST): `connect: connection refused`.
    Refused,
    /// No route to the host: `connect: no route to host`.
    NoRoute,
}

impl std::fmt::Display for DialError {
    /// Go's `net.Dial` error text after `dial tcp HOST:PORT: `.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DialError::Refused => "connect: connection refused",
            DialError::NoRoute => "connect: no route to host",
        })
    }
}

/// A dial in progress.
pub type DialFuture = Pin<Box<dyn Future<Output = Result<DuplexStream, DialError>> + Send>>;

/// The network to the kubelets. A dial to a host that does not answer never completes; the
/// caller's timeout ends it.
pub trait KubeletNetwork: Send + Sync + 'static {
    fn dial(&self, host: &str, port: u16) -> DialFuture;
}

/// The kubelet's port when the Node does not say (`daemonEndpoints.kubeletEndpoint.Port`), as a
/// port number (`names::KUBELET_PORT` is the Node field's `int32`).
pub const KUBELET_PORT: u16 = crate::names::KUBELET_PORT as u16;

/// The order in which a node's addresses are tried: kube-apiserver's
/// `--kubelet-preferred-address-types` as kubeadm sets it, and metrics-server's
/// `--kubelet-preferred-address-types` as its `components.yaml` sets it.
pub const PREFERRED_ADDRESS_TYPES: [&str; 3] = ["InternalIP", "ExternalIP", "Hostname"];

/// The host a node's kubelet is reached at: the first address of the first preferred type the
/// node has (`(type, address)` pairs in the node's order; an empty address does not count),
/// else the node's name.
pub fn kubelet_host<'a, I>(addresses: I, node: &'a str) -> &'a str
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
    I::IntoIter: Clone,
{
    let addresses = addresses.into_iter().filter(|(_, a)| !a.is_empty());
    PREFERRED_ADDRESS_TYPES
        .iter()
        .find_map(|ty| {
            addresses
                .clone()
                .find(|(t, _)| t == ty)
                .map(|(_, address)| address)
        })
        .unwrap_or(node)
}

/// The kubelet's port from `daemonEndpoints.kubeletEndpoint.Port`: [`KUBELET_PORT`] when it is
/// absent, zero or not a port.
pub fn kubelet_port(port: Option<i64>) -> u16 {
    port.and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(KUBELET_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_the_first_address_of_the_first_preferred_type() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (&[], "n"),
            (
                &[
                    ("Hostname", "h"),
                    ("ExternalIP", "1.2.3.4"),
                    ("InternalIP", "10.0.0.9"),
                    ("InternalIP", "10.0.0.10"),
                ],
                "10.0.0.9",
            ),
            (&[("Hostname", "h"), ("ExternalIP", "1.2.3.4")], "1.2.3.4"),
            (&[("InternalIP", ""), ("Hostname", "h")], "h"),
            (&[("InternalDNS", "n.internal")], "n"),
            (&[("Hostname", "h")], "h"),
        ];
        for (addresses, want) in cases {
            assert_eq!(
                kubelet_host(addresses.iter().copied(), "n"),
                want,
                "{addresses:?}"
            );
        }
    }

    #[test]
    fn the_port_defaults_to_10250_unless_a_port_is_given() {
        for (port, want) in [
            (None, 10250),
            (Some(0), 10250),
            (Some(-1), 10250),
            (Some(70000), 10250),
            (Some(10255), 10255),
            (Some(65535), 65535),
        ] {
            assert_eq!(kubelet_port(port), want, "{port:?}");
        }
    }

    #[test]
    fn dial_errors_read_as_go_writes_them() {
        assert_eq!(
            DialError::Refused.to_string(),
            "connect: connection refused"
        );
        assert_eq!(DialError::NoRoute.to_string(), "connect: no route to host");
    }
}
