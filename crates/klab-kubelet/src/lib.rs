//! klab's node agent: registration, Lease and NodeStatus heartbeats, pod lifecycle on a simulated runtime, node faults.

pub mod backoff;
pub mod config;
pub mod node_status;
pub mod program;
pub mod quantity;
pub mod pod_status;
pub mod runtime;
pub mod termination;
