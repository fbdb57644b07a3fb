//! Mutating admission: DefaultTolerationSeconds (control-plane spec §3). Runs on pod create and
//! update (not on subresources).

use serde_json::{Value, json};

use klab_api::names::{TAINT_NOT_READY, TAINT_UNREACHABLE};

/// The two flags of the DefaultTolerationSeconds plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultTolerationSeconds {
    /// `--default-not-ready-toleration-seconds` (default 300).
    pub not_ready_seconds: i64,
    /// `--default-unreachable-toleration-seconds` (default 300).
    pub unreachable_seconds: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        DefaultTolerationSeconds {
            not_ready_seconds: 300,
            unreachable_seconds: 300,
        }
    }
}

impl DefaultTolerationSeconds {
    /// Appends the not-ready and unreachable NoExecute tolerations a pod does not already cover.
    /// A toleration covers a key when its key is that key or empty and its effect is NoExecute or
    /// empty; operator and value are not examined (an upstream quirk kept on purpose).
    pub fn admit_pod(&self, pod: &mut Value) {
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
        if !tolerations.is_array() {
            // Left for validation to refuse.
            return;
        }
        let list = tolerations.as_array_mut().expect("checked");
        let covers = |list: &[Value], key: &str| {
            list.iter().any(|t| {
                let k = t.get("key").and_then(Value::as_str).unwrap_or("");
                let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
                (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
            })
        };
        let not_ready = covers(list, TAINT_NOT_READY);
        let unreachable = covers(list, TAINT_UNREACHABLE);
        if !not_ready {
            list.push(json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": self.not_ready_seconds}));
        }
        if !unreachable {
            list.push(json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": self.unreachable_seconds}));
        }
        if list.is_empty() {
            spec.remove("tolerations");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(tolerations: Value) -> Value {
        let mut pod = json!({"spec": {"containers": [{"name": "c"}], "tolerations": tolerations}});
        DefaultTolerationSeconds::default().admit_pod(&mut pod);
        pod["spec"]["tolerations"].clone()
    }

    fn nr(secs: i64) -> Value {
        json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs})
    }
    fn ur(secs: i64) -> Value {
        json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs})
    }

    #[test]
    fn cp43_defaulting_table() {
        // No tolerations: both appended, not-ready first.
        assert_eq!(admit(json!([])), json!([nr(300), ur(300)]));
        // An unrelated toleration is kept first.
        let other =
            json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"});
        assert_eq!(
            admit(json!([other.clone()])),
            json!([other, nr(300), ur(300)])
        );
        // Own unreachable toleration with 0 s: only not-ready appended.
        let own = json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0});
        assert_eq!(admit(json!([own.clone()])), json!([own, nr(300)]));
        // Wildcard covers both.
        let wild = json!({"operator": "Exists"});
        assert_eq!(admit(json!([wild.clone()])), json!([wild]));
        // Empty effect on the key covers it.
        let any_effect = json!({"key": TAINT_NOT_READY, "operator": "Exists"});
        assert_eq!(
            admit(json!([any_effect.clone()])),
            json!([any_effect, ur(300)])
        );
        // NoSchedule effect does not cover.
        let nosched = json!({"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoSchedule"});
        assert_eq!(
            admit(json!([nosched.clone()])),
            json!([nosched, nr(300), ur(300)])
        );
        // Quirk: Equal with a value still suppresses the default.
        let quirk = json!({"key": TAINT_UNREACHABLE, "operator": "Equal", "value": "x", "effect": "NoExecute"});
        assert_eq!(admit(json!([quirk.clone()])), json!([quirk, nr(300)]));
    }

    #[test]
    fn cp45_custom_flags() {
        let mut pod = json!({"spec": {"containers": []}});
        DefaultTolerationSeconds {
            not_ready_seconds: 60,
            unreachable_seconds: 100,
        }
        .admit_pod(&mut pod);
        assert_eq!(pod["spec"]["tolerations"], json!([nr(60), ur(100)]));
    }
}
