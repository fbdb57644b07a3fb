//! klab-apiserver: the Kubernetes API as an `axum::Router`.
//!
//! Objects are stored as JSON in a [`klab_store::Storage`] backend and handled as
//! `serde_json::Value` so that fields klab does not model still round-trip; k8s-openapi types are
//! used where a kind's rules need them (validation, defaulting, admission).
//!
//! The same Router is served in-process (each component gets a `kube::Client` over it, with its
//! identity attached as a request extension) and over TCP/TLS by `klab-server`.

pub mod admission;
pub mod apply;
pub mod audit;
pub mod authz;
pub mod bootstrap_token;
pub mod conversion;
pub mod crud;
pub mod csr;
pub mod defaults;
pub mod deletion;
pub mod discovery;
pub mod error;
pub mod health;
pub mod identity;
mod json_field;
pub mod kubelet_proxy;
pub mod metrics;
pub mod metrics_api;
pub mod node_authz;
pub mod node_restriction;
pub mod object;
pub mod openapi;
pub mod patch;
mod prefix_cache;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod review;
mod same_value;
pub mod schema;
pub mod selector_field;
pub mod server;
pub mod services;
pub mod subresources;
pub mod table;
pub mod testing;
pub mod token;
pub mod token_file;
pub mod validation;
pub mod watch;
pub mod yaml;

#[cfg(test)]
mod api_tests;
#[cfg(test)]
mod auth_fuzz_tests;

pub use error::{ApiError, ApiResult};
pub use identity::Identity;
pub use server::{ApiServer, ApiServerConfig, ComponentService};
