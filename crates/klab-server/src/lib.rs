//! Serving the API over TCP/TLS: PKI, kubeconfig, admin endpoints.
