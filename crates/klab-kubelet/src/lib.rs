//! klab's node agent: registration, Lease and NodeStatus heartbeats, pod lifecycle on a simulated runtime, node faults.
