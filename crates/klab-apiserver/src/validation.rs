//! Validation of names and required fields for the served kinds (422 Invalid with causes).
