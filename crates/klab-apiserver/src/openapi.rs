//! The OpenAPI v3 index and per group-version documents kubectl needs for validation (§b.4).
