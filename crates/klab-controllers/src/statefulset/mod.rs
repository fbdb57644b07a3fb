//! The statefulset controller (shell); decisions live in decide.rs.
