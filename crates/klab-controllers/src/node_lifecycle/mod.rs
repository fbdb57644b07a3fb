//! The node_lifecycle controller (shell); decisions live in decide.rs.
