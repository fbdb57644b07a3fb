//! The job controller (shell); decisions live in decide.rs.
