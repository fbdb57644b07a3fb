//! klab's scheduler: filters and scores as pure functions, a queue with backoff, binding.
//!
//! Faithful to kube-scheduler v1.33's default profile where it matters for node failures:
//! NodeUnschedulable, NodeName, TaintToleration, NodeAffinity (incl. the PreFilter that narrows a
//! DaemonSet pod to its node), NodePorts and NodeResourcesFit filters; TaintToleration,
//! NodeAffinity, LeastAllocated, BalancedAllocation and default PodTopologySpread scores with the
//! upstream weights; the `FitError` message with the DefaultPreemption part. The scheduler does not
//! read node conditions: dead nodes are avoided only through the node lifecycle controller's taints.
//!
//! Layout: [`quantity`] and [`nodeinfo`] (accounting), [`plugins`] (filters and
//! scores), [`framework`] (`schedule_one`, pure), [`queue`] (active/backoff/unschedulable, pure),
//! [`events`] (events.k8s.io recorder), [`shell`] (`run`: watch, cache, bind, report).
//!
//! Not modelled: preemption (the message says no victims were found), inter-pod affinity,
//! explicit topology spread constraints, volume topology (VolumeBinding checks claims only), scheduling gates (gated pods are left
//! alone), extended resources, image locality, multiple profiles.
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))] // tests compute expectations freely

pub mod events;
pub mod framework;
pub mod nodeinfo;
pub mod plugins;
pub mod quantity;
pub mod queue;
pub mod shell;
pub mod volume_filters;
pub mod volumes;

pub use events::EventsApi;
pub use queue::QueueConfig;
pub use shell::run;

/// Scheduler configuration (KubeSchedulerConfiguration names, upstream defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    /// `profiles[0].schedulerName`: pods with this `spec.schedulerName` (or none) are ours.
    pub scheduler_name: String,
    /// Queue backoff knobs (`podInitialBackoffSeconds`, `podMaxBackoffSeconds`).
    pub queue: QueueConfig,
    /// Which Events API to write (upstream: events.k8s.io/v1).
    pub events_api: EventsApi,
    /// `reportingInstance` of events (upstream `default-scheduler-<hostname>`).
    pub reporting_instance: String,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            scheduler_name: klab_api::names::DEFAULT_SCHEDULER_NAME.into(),
            queue: QueueConfig::default(),
            events_api: EventsApi::default(),
            reporting_instance: format!("{}-klab", klab_api::names::DEFAULT_SCHEDULER_NAME),
        }
    }
}

/// Errors that stop the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("watch stream of {0} ended")]
    WatchEnded(&'static str),
}

#[cfg(test)]
mod it_tests;
#[cfg(test)]
mod order_tests;
