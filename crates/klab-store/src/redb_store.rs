//! redb backend: the durable default.
