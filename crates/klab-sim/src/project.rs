//! JSON values decoded with only the fields their reader uses: the recorder's pod watch keeps of
//! each pod what its trace view and `kubectl get pods` columns read, its Event watch what an
//! Event's trace line reads, and both skip the rest unbuilt (a [`Keep`] tree is a
//! `klab_api::shape::Shape`).
//!
//! The recorder sees every version of every pod, and decoding them into `serde_json::Value`s was
//! most of its cost (about 4 % of a large run): a pod's containers, volumes, tolerations and
//! annotations are more than half of its document, and no view reads them. Skipped values are
//! scanned (`IgnoredAny`), not built. A scenario whose `object:` expectations may read pods
//! keeps them whole instead (`Recorder::keeps_whole`).

use std::marker::PhantomData;

use klab_api::shape::{Shape, Shaped};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer};
use serde_json::Value;

/// What of a JSON value to keep.
#[derive(Debug)]
pub enum Keep {
    /// The whole value.
    All,
    /// Of an object, the fields named, each with what of it to keep (a value that is not an
    /// object is kept whole).
    Fields(&'static [(&'static str, Keep)]),
    /// Of an array, what to keep of each element (a value that is not an array is kept whole).
    Each(&'static Keep),
}

/// What the recorder reads of a pod: the metadata its views and expectations use, the parts of
/// the spec that `kubectl get pods` prints (READY counts the containers and the sidecars among
/// the init containers; READINESS GATES; NODE), and the whole status.
pub const POD: Keep = Keep::Fields(&[
    (
        "metadata",
        Keep::Fields(&[
            ("name", Keep::All),
            ("namespace", Keep::All),
            ("resourceVersion", Keep::All),
            ("creationTimestamp", Keep::All),
            ("deletionTimestamp", Keep::All),
            ("deletionGracePeriodSeconds", Keep::All),
            ("labels", Keep::All),
            ("ownerReferences", Keep::All),
        ]),
    ),
    (
        "spec",
        Keep::Fields(&[
            ("nodeName", Keep::All),
            ("readinessGates", Keep::All),
            (
                "containers",
                Keep::Each(&Keep::Fields(&[("name", Keep::All)])),
            ),
            (
                "initContainers",
                Keep::Each(&Keep::Fields(&[
                    ("name", Keep::All),
                    ("restartPolicy", Keep::All),
                ])),
            ),
        ]),
    ),
    ("status", Keep::All),
]);

/// A list of pods, each item kept as [`POD`].
pub const POD_LIST: Keep = Keep::Fields(&[("metadata", Keep::All), ("items", Keep::Each(&POD))]);

/// What the recorder reads of a core/v1 Event (`EventView::from_core`).
pub const EVENT: Keep = Keep::Fields(&[
    (
        "metadata",
        Keep::Fields(&[
            ("name", Keep::All),
            ("namespace", Keep::All),
            ("resourceVersion", Keep::All),
        ]),
    ),
    ("source", Keep::All),
    ("reportingComponent", Keep::All),
    ("type", Keep::All),
    ("reason", Keep::All),
    (
        "involvedObject",
        Keep::Fields(&[
            ("kind", Keep::All),
            ("namespace", Keep::All),
            ("name", Keep::All),
        ]),
    ),
    ("message", Keep::All),
    ("count", Keep::All),
]);

/// A list of Events, each item kept as [`EVENT`].
pub const EVENT_LIST: Keep =
    Keep::Fields(&[("metadata", Keep::All), ("items", Keep::Each(&EVENT))]);

/// A projection named by a type, so that a client can decode into it.
pub trait Projection {
    const KEEP: &'static Keep;
}

/// [`POD`] as a type.
pub struct PodFields;
impl Projection for PodFields {
    const KEEP: &'static Keep = &POD;
}

/// [`POD_LIST`] as a type.
pub struct PodListFields;
impl Projection for PodListFields {
    const KEEP: &'static Keep = &POD_LIST;
}

/// [`EVENT`] as a type.
pub struct EventFields;
impl Projection for EventFields {
    const KEEP: &'static Keep = &EVENT;
}

/// [`EVENT_LIST`] as a type.
pub struct EventListFields;
impl Projection for EventListFields {
    const KEEP: &'static Keep = &EVENT_LIST;
}

/// A value decoded with only what `P` keeps.
pub struct Projected<P>(pub Value, PhantomData<P>);

impl<P> Projected<P> {
    pub fn into_inner(self) -> Value {
        self.0
    }
}

impl<P> Clone for Projected<P> {
    fn clone(&self) -> Self {
        Projected(self.0.clone(), PhantomData)
    }
}

impl<'de, P: Projection> Deserialize<'de> for Projected<P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Shaped(P::KEEP)
            .deserialize(d)
            .map(|v| Projected(v, PhantomData))
    }
}

/// `All` is built whole; `Fields` skips the keys it does not name; `Each` shapes the elements.
impl Shape for &'static Keep {
    fn field(&self, key: &str) -> Option<Option<Self>> {
        match self {
            Keep::Fields(fields) => fields
                .iter()
                .find(|(name, _)| *name == key)
                .map(|(_, keep)| whole_or(keep)),
            Keep::All | Keep::Each(_) => Some(None),
        }
    }

    fn element(&self) -> Option<Self> {
        match self {
            Keep::Each(each) => whole_or(each),
            Keep::All | Keep::Fields(_) => None,
        }
    }
}

/// `None` for a value kept whole, else what to keep of it.
fn whole_or(keep: &'static Keep) -> Option<&'static Keep> {
    match keep {
        Keep::All => None,
        keep => Some(keep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{EventView, PodView};
    use serde_json::json;

    fn project(keep: &'static Keep, v: &Value) -> Value {
        let text = serde_json::to_string(v).unwrap();
        let mut d = serde_json::Deserializer::from_str(&text);
        Shaped(keep).deserialize(&mut d).unwrap()
    }

    #[test]
    fn fields_are_kept_by_name_at_every_depth_and_the_rest_skipped() {
        const KEEP: Keep = Keep::Fields(&[
            ("a", Keep::All),
            ("b", Keep::Fields(&[("c", Keep::All)])),
            ("l", Keep::Each(&Keep::Fields(&[("n", Keep::All)]))),
            // Not an object or an array where one is expected: kept whole.
            ("s", Keep::Fields(&[("x", Keep::All)])),
            ("t", Keep::Each(&Keep::All)),
        ]);
        let v = json!({
            "a": {"deep": [1, 2.5, null, true, "x"]},
            "b": {"c": -3, "d": {"e": 1}},
            "l": [{"n": "one", "m": [1]}, {"m": 2}, 7],
            "s": "text",
            "t": {"k": 1},
            "skipped": {"big": ["x", {"y": 1}]},
        });
        assert_eq!(
            project(&KEEP, &v),
            json!({
                "a": {"deep": [1, 2.5, null, true, "x"]},
                "b": {"c": -3},
                "l": [{"n": "one"}, {}, 7],
                "s": "text",
                "t": {"k": 1},
            })
        );
        // A list of pods keeps its metadata and each item as a pod.
        let list = json!({"metadata": {"resourceVersion": "9"}, "kind": "PodList",
            "items": [{"metadata": {"name": "p", "uid": "u"}, "spec": {"volumes": []}}]});
        assert_eq!(
            project(&POD_LIST, &list),
            json!({"metadata": {"resourceVersion": "9"},
                "items": [{"metadata": {"name": "p"}, "spec": {}}]})
        );
    }

    #[test]
    fn a_projected_event_shows_as_the_whole_event_does() {
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "p.1", "namespace": "default", "resourceVersion": "7",
                "uid": "u", "managedFields": [{"manager": "kubelet"}]},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p",
                "uid": "u-p", "apiVersion": "v1", "fieldPath": "spec.containers{c}"},
            "reason": "BackOff", "message": "Back-off restarting failed container c",
            "source": {"component": "kubelet", "host": "n1"}, "type": "Warning", "count": 4,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
            "reportingComponent": "kubelet", "reportingInstance": "n1"
        });
        let mut from_reporting = ev.clone();
        from_reporting.as_object_mut().unwrap().remove("source");
        from_reporting.as_object_mut().unwrap().remove("count");
        for ev in [ev, from_reporting] {
            let projected = project(&EVENT, &ev);
            assert!(projected.get("firstTimestamp").is_none());
            assert_eq!(EventView::from_core(&projected), EventView::from_core(&ev));
        }
    }

    /// A pod with what every column of `kubectl get pods` reads: sidecar and plain init
    /// containers, readiness gates, restarts, deletion, an owner, a disruption condition.
    fn rich_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-0", "namespace": "default", "uid": "u-1", "resourceVersion": "42",
                "generateName": "web-", "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": "2026-01-01T00:05:00Z", "deletionGracePeriodSeconds": 30,
                "labels": {"app": "web"}, "annotations": {"a": "b"}, "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                    "name": "web", "uid": "u-0", "controller": true}],
                "managedFields": [{"manager": "m", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "n1",
                "readinessGates": [{"conditionType": "example.com/gate"}],
                "initContainers": [
                    {"name": "init", "image": "busybox"},
                    {"name": "side", "image": "busybox", "restartPolicy": "Always"}
                ],
                "containers": [
                    {"name": "c", "image": "nginx", "env": [{"name": "X", "value": "1"}]},
                    {"name": "d", "image": "nginx"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "tolerations": [{"key": "k", "operator": "Exists"}]
            },
            "status": {
                "phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "example.com/gate", "status": "True"},
                    {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                     "message": "Eviction API: evicting"}
                ],
                "initContainerStatuses": [
                    {"name": "init", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "side", "ready": true, "started": true, "restartCount": 2,
                     "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1,
                        "finishedAt": "2026-01-01T00:01:00Z"}}}
                ],
                "containerStatuses": [
                    {"name": "c", "ready": true, "restartCount": 1, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 137,
                        "finishedAt": "2026-01-01T00:02:00Z"}}},
                    {"name": "d", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]
            }
        })
    }

    #[test]
    fn a_projected_pod_shows_as_the_whole_pod_does() {
        let now: jiff::Timestamp = "2026-01-01T00:06:00Z".parse().unwrap();
        let mut pods = vec![rich_pod()];
        // Variations: not deleting, no init containers, a NodeLost reason, a terminal phase.
        let mut p = rich_pod();
        p["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("deletionTimestamp");
        p["spec"].as_object_mut().unwrap().remove("initContainers");
        p["status"]
            .as_object_mut()
            .unwrap()
            .remove("initContainerStatuses");
        pods.push(p.clone());
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:05:00Z");
        p["status"]["reason"] = json!("NodeLost");
        pods.push(p.clone());
        p["status"]["phase"] = json!("Succeeded");
        pods.push(p);
        for pod in pods {
            let projected = project(&POD, &pod);
            assert!(projected.pointer("/spec/volumes").is_none());
            assert!(projected.pointer("/metadata/managedFields").is_none());
            assert_eq!(
                PodView::from_object(&projected, now),
                PodView::from_object(&pod, now),
                "{pod}"
            );
        }
    }
}
