//! Resources that share storage with another API version. As upstream, `events.k8s.io/v1` Events
//! and core `v1` Events are two views of one stored object: kubelets write core events, the
//! scheduler writes events.k8s.io events, and `kubectl get events` shows both.
//!
//! Objects are stored in the core form; the events.k8s.io form is converted on the way in and out
//! (field mapping of upstream `pkg/apis/events/v1` conversion).

use serde_json::{Map, Value};

use crate::registry::{self, ResourceInfo};

/// Whether `ri` is served as it is stored (everything but events.k8s.io events).
pub fn is_identity(ri: &ResourceInfo) -> bool {
    !(ri.group == "events.k8s.io" && ri.plural == "events")
}

/// The resource whose storage `ri` uses (itself for everything but events.k8s.io events).
pub fn storage_resource(ri: &'static ResourceInfo) -> &'static ResourceInfo {
    if !is_identity(ri) {
        registry::lookup("", "v1", "events").expect("core events are served")
    } else {
        ri
    }
}

/// Field renames between events.k8s.io/v1 (left) and core/v1 (right).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let pairs: Vec<(&str, &str)> = pairs.collect();
    let mut out = Map::new();
    for (k, v) in m {
        let key = pairs
            .iter()
            .find(|(from, _)| from == k)
            .map(|(_, to)| *to)
            .unwrap_or(k.as_str());
        out.insert(key.to_string(), v.clone());
    }
    Value::Object(out)
}

/// Converts an object of `ri` into its stored form.
pub fn to_storage(ri: &ResourceInfo, obj: &Value) -> Value {
    if !is_identity(ri) {
        let mut v = rename(obj, EVENT_FIELDS.iter().copied());
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), Value::String("v1".into()));
            m.insert("kind".into(), Value::String("Event".into()));
        }
        v
    } else {
        obj.clone()
    }
}

/// Converts a stored object into the form `ri` serves.
pub fn from_storage(ri: &ResourceInfo, obj: Value) -> Value {
    if !is_identity(ri) {
        let mut v = rename(&obj, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(ri.api_version()));
            m.insert("kind".into(), Value::String("Event".into()));
        }
        v
    } else {
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_versions() {
        let new = registry::lookup("events.k8s.io", "v1", "events").unwrap();
        let e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "x"},
            "regarding": {"kind": "Pod", "name": "web"}, "note": "Successfully assigned default/web to n1",
            "reason": "Scheduled", "type": "Normal", "reportingController": "default-scheduler",
            "eventTime": "2026-01-01T00:00:00.000000Z"});
        let stored = to_storage(new, &e);
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], "Successfully assigned default/web to n1");
        assert_eq!(stored["reportingComponent"], "default-scheduler");
        assert_eq!(from_storage(new, stored), e);
        assert_eq!(storage_resource(new).group, "");
    }
}
