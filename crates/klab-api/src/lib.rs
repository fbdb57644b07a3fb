//! klab-api: the vocabulary every klab component shares — well-known Kubernetes strings, the one
//! `Clock`, the seeded `DetRng`, typed durations, and pure helpers over k8s-openapi types.
//!
//! Nothing here performs I/O, and this is the only crate allowed to read the operating system's
//! clock (inside `clock`), so that virtual time in `klab sim` stays a pure function of the seed.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))] // tests compute expectations freely

pub mod clock;
pub mod cron;
pub mod duration;
pub mod heap;
pub mod kubelet_net;
pub mod names;
pub mod nodeaffinity;
pub mod order;
pub mod probe_script;
pub mod prom_text;
pub mod rbac;
pub mod resource_metrics;
pub mod rng;
pub mod selector;
pub mod sha256;
pub mod shape;
pub mod shared;
pub mod slim;
pub mod supervise;
pub mod taints;

pub use clock::{Clock, ClockMode};
pub use duration::{Duration, parse_duration};
pub use rng::DetRng;
