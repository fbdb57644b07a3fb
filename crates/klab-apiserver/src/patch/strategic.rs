//! Strategic merge patch over serde_json::Value, driven by a table of merge keys (api-surface §b.13).
