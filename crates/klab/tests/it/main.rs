//! One integration-test binary for klab: end-to-end tests against the real binary and kubectl.
