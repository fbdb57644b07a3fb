//! klab-controllers: the controller manager — node lifecycle, taint eviction, pod GC and the
//! workload controllers, and storage (PV binder, protection, attach/detach, the simulated CSI
//! driver `csi.klab.dev`) — as ordinary kube-rs API clients.
//!
//! Each controller is a directory: `decide.rs` (pure decisions with table tests), `mod.rs` (the thin
//! async shell: a `klab_runtime::Reconcile` impl over the process's shared informers that calls the
//! decision with `now` and applies it with PATCHes), `config.rs` (knobs with upstream flag names and
//! defaults). `manager` starts them all from one entry point, with one informer factory.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))] // tests compute expectations freely

pub mod attach_detach;
pub mod clusterrole_aggregation;
pub mod cronjob;
pub mod csi_driver;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpointslice;
pub use klab_runtime::events;
pub mod garbage_collector;
pub mod job;
pub mod manager;
pub mod metrics_server;
pub mod namespace;
pub mod node_lifecycle;
pub mod persistent_volume;
pub mod pod_gc;
pub mod replicaset;
pub mod serviceaccount;
pub mod slow_start;
pub mod statefulset;
pub mod taint_eviction;
pub mod volume_protection;
pub mod write;

#[cfg(test)]
mod order_tests;
