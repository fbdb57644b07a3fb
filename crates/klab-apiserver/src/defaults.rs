//! Defaulting on create/update as upstream for the fields kubectl and controllers rely on (§b.15).
