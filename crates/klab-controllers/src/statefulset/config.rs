//! StatefulSet controller knobs. Upstream has only `--concurrent-statefulset-syncs` (meaningless in
//! klab's single ordered queue); kept as a struct so every controller is wired alike.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatefulSetControllerConfig {}
