//! The deployment controller (shell); decisions live in decide.rs.
