//! Server-side Table output (meta.k8s.io/v1 Table): columns and cells per resource (§b.6, §b.7).
