//! Discovery documents: legacy /api, /apis, /api/v1, /apis/<g>/<v> and aggregated v2 / v2beta1 (§b.3).
