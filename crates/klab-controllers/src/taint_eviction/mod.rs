//! The taint_eviction controller (shell); decisions live in decide.rs.

pub mod decide;
