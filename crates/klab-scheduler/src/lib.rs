//! klab's scheduler: filters and scores as pure functions, a queue with backoff, binding.
