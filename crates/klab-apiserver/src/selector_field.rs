//! Field selectors: parsing `a=b,c!=d` and the fields each kind supports (api-surface §b.8).
