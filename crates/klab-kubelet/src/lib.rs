//! klab's node agent: registration, Lease and NodeStatus heartbeats, pod lifecycle on a simulated
//! runtime, node faults.
//!
//! # Shape
//!
//! A [`node::SimNode`] is one simulated machine plus its kubelet. The machine
//! ([`runtime::Machine`]: boot id, image store, process table) is the node's durable state; the
//! kubelet is a process built from it by a factory ([`agent::run_kubelet`] over a fresh
//! `kube::Client`), so a kubelet restart is "build it again" and a power cycle is "lose the
//! running processes, new boot id, build it again". The kubelet is an ordinary API client: it
//! only talks to the API server through its client, never to other components.
//!
//! Decisions are pure and table-tested:
//! [`node_status`] (initial Node, condition setters, reboot detection, report decision, label
//! reconciliation, Lease), [`pod_status`] (admission, `getPhase`, pod conditions),
//! [`termination`] (effective grace, preStop budget, 2 s floor), [`probes`] (probe workers),
//! [`shutdown`] (graceful node shutdown: priority groups, kill overrides, the shutdown status),
//! [`eviction`] (node-pressure eviction: thresholds, conditions, ranking, messages),
//! [`backoff`] (registration,
//! lease and crash-loop backoff), [`program`] (what a container's command does). The pod workers
//! are one synchronous state machine, [`pods::PodManager`], whose `sync(now, …)` returns the API
//! writes; [`agent`] is the async shell that watches, calls it and sends the writes.
//!
//! # Faults
//!
//! [`fault::NodeFault`] acts only at two seams: the kubelet's client ([`fault::FaultService`],
//! a tower layer that fails requests while partitioned, holds them while frozen and ends open
//! watches) and the machine (containers keep running while the kubelet is stopped, are lost on
//! power-off, time stands still while frozen).
//!
//! # Container programs
//!
//! What a simulated container does is derived from its `command`/`args`; the rules are in the
//! [`program`] module documentation.
//!
//! # The kubelet's server
//!
//! [`server`] is port 10250 as the API server reaches it (logs, exec, attach, port-forward),
//! behind a [`server::KubeletEndpoint`] whose dial meets what the node's state dictates: a
//! refusal while the kubelet is stopped, silence while the machine is off, frozen or cut off.
//! Logs come from [`logs`] (derived from the command like [`program`]), exec runs [`shell`];
//! `/metrics/resource` and `/stats/summary` are rendered by [`resource_metrics`] from the
//! [`usage`] model.
//!
//! # Resource usage
//!
//! Each running container has a [`usage::Model`] on the machine (requests by default, the pod's
//! `usage.klab.dev/<container>` annotation otherwise, re-anchored when it changes): the runtime
//! OOM-kills an instance when its growing working set reaches its memory limit, and the eviction
//! manager's signals and ranking read the same model (`docs/usage.md`).
//!
//! # Not modelled (yet)
//!
//! Startup probes (readiness and liveness are modelled, see [`probes`]), preStop hooks on liveness
//! kills, image GC and other node-level reclaim before a disk eviction, local-storage limit
//! evictions, static pods, `activeDeadlineSeconds`,
//! event aggregation (each event is a new object), re-assertion of the os/arch labels by the
//! status loop, the fast startup status path (Ready is True from the first computation because
//! the simulated runtime is always healthy), the 10 s heartbeat client timeout of a black-holed
//! network (a partition refuses connections at once).

pub mod agent;
pub mod backoff;
pub mod clients;
pub mod config;
pub mod csi_node;
pub mod events;
pub mod eviction;
pub mod exec;
pub mod fault;
pub mod images;
pub mod logs;
pub mod node;
pub mod node_status;
pub mod pod_status;
pub mod pods;
pub mod portforward;
pub mod probes;
pub mod program;
pub mod quantity;
pub mod resource_metrics;
pub mod runtime;
pub mod server;
pub mod shell;
pub mod shutdown;
pub mod spdy;
pub mod termination;
pub mod usage;
pub mod volumes;

#[cfg(test)]
mod sim_tests;

pub use config::{KubeletConfig, NodeSpecConfig, RuntimeModel};
pub use fault::{NetFault, NodeFault};
pub use node::{SimNode, SimNodeState};
