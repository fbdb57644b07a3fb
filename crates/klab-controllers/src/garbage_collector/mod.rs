//! The garbage_collector controller (shell); decisions live in decide.rs.
