//! The replicaset controller (shell); decisions live in decide.rs.
