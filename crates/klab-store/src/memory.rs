//! In-memory backend (sim and tests).
