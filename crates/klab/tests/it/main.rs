//! One integration-test binary for klab: end-to-end tests that run the real `klab` binary and the
//! real kubectl binaries (1.27 … 1.33) against it.

mod access_live;
mod accounts_live;
mod apply_live;
mod audit_live;
mod bootstrap_live;
mod cli_errors;
mod clients;
mod control_plane_live;
mod dashboard_browser;
mod drain_live;
mod everyday_live;
mod eviction_live;
mod hardening_live;
mod harness;
mod kubectl_basics;
mod kubectl_verbs;
mod logs_exec_live;
mod node_faults_live;
mod node_lifecycle_live;
mod openapi_live;
mod priority_live;
mod probes_live;
mod protobuf_live;
mod report_browser;
mod seed000_live;
mod services_live;
mod shutdown_live;
mod tidy;
mod top_live;
mod volumes_live;
mod why_live;
