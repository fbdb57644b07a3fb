//! Event recording for controllers: core/v1 Events with upstream reasons, sources and aggregation.
