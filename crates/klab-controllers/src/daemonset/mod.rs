//! The daemonset controller (shell); decisions live in decide.rs.
