//! The node_lifecycle controller (shell); decisions live in decide.rs.

pub mod config;
pub mod decide;
pub mod queue;
pub mod zones;
