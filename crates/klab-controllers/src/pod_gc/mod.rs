//! The pod_gc controller (shell); decisions live in decide.rs.

pub mod decide;
