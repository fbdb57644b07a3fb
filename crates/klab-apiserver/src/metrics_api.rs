//! `metrics.k8s.io/v1beta1`: NodeMetrics and PodMetrics, served as upstream's metrics-server
//! serves them behind its APIService — get and list only, objects made at each request from the
//! Nodes and Pods in the store (their names and labels, selectors applied to them) and the
//! metrics pipeline's in-memory usage ([`klab_api::resource_metrics::MetricsReader`], connected
//! by the composition root). Nothing is stored; an object without metrics is simply absent from
//! a list, and a get of one is metrics-server's 404.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::Response;
use jiff::Timestamp;
use klab_api::clock::format_time;
use klab_api::resource_metrics::{MetricsReader, Usage};
use klab_store::ListOptions;
use serde_json::{Map, Value, json};

use crate::crud::{Selectors, decode_kv, json_response};
use crate::error::{ApiError, ApiResult};
use crate::object::Pointer;
use crate::registry::{self, ResourceInfo};
use crate::server::Ctx;

/// The group metrics-server serves.
pub const GROUP: &str = "metrics.k8s.io";

/// A non-negative quantity as Go's `Quantity.String()` writes it in DecimalSI from a value in
/// units of 10^`scale` (CPU: nanocores, scale -9): the largest SI suffix that keeps it integral.
pub fn decimal_si(value: u64, scale: i32) -> String {
    if value == 0 {
        return "0".into();
    }
    let (mut v, mut exp) = (value, scale);
    // Normalise to a multiple-of-three exponent, then climb while exact.
    while exp.rem_euclid(3) != 0 {
        match v.checked_mul(10) {
            Some(n) => {
                v = n;
                exp = exp.saturating_sub(1);
            }
            None => break,
        }
    }
    while v % 1000 == 0 && exp < 18 {
        v /= 1000;
        exp = exp.saturating_add(3);
    }
    let suffix = match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return value.to_string(),
    };
    format!("{v}{suffix}")
}

/// Bytes as Go's `Quantity.String()` writes a BinarySI quantity: the largest power of 1024 that
/// divides it (`100Mi`), plain under 1024 or when none does (`1536`).
pub fn binary_si(bytes: u64) -> String {
    if bytes < 1024 {
        return bytes.to_string();
    }
    let (mut v, mut i) = (bytes, 0usize);
    while v % 1024 == 0 && i < 6 {
        v /= 1024;
        i = i.saturating_add(1);
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][i];
    format!("{v}{suffix}")
}

/// Go's `time.Duration.String()` (`15s`, `1m0s`, `12.5s`, `500ms`).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let frac = |v: u128, unit: u128| -> String {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let width = unit.to_string().len().saturating_sub(1);
        let digits = format!("{rest:0width$}");
        format!("{whole}.{}", digits.trim_end_matches('0'))
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", frac(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", frac(nanos, 1_000_000));
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let s = frac(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"cpu": decimal_si(u.cpu_nanocores, -9), "memory": binary_si(u.memory_bytes)})
}

/// metrics-server's metadata: the object's name (and namespace), its labels, and the time of
/// the request as its creation.
fn metadata(obj: &Value, now: Timestamp) -> Value {
    let m = obj.get("metadata").cloned().unwrap_or(Value::Null);
    let mut out = Map::new();
    out.insert("name".into(), m.get("name").cloned().unwrap_or(json!("")));
    if let Some(ns) = m.get("namespace") {
        out.insert("namespace".into(), ns.clone());
    }
    out.insert("creationTimestamp".into(), json!(format_time(now)));
    if let Some(l) = m
        .get("labels")
        .filter(|l| l.as_object().is_some_and(|o| !o.is_empty()))
    {
        out.insert("labels".into(), l.clone());
    }
    Value::Object(out)
}

/// The NodeMetrics of a Node, if the pipeline has its usage.
pub fn node_metrics(reader: &dyn MetricsReader, node: &Value, now: Timestamp) -> Option<Value> {
    let name = node.at("/metadata/name")?.as_str()?;
    let u = reader.node(name)?;
    Some(json!({
        "kind": "NodeMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(node, now),
        "timestamp": format_time(u.timestamp),
        "window": go_duration(u.window),
        "usage": usage_json(&u.usage),
    }))
}

/// The PodMetrics of a Pod, if the pipeline has its containers' usage.
pub fn pod_metrics(reader: &dyn MetricsReader, pod: &Value, now: Timestamp) -> Option<Value> {
    let name = pod.at("/metadata/name")?.as_str()?;
    let ns = pod.at("/metadata/namespace")?.as_str()?;
    let u = reader.pod(ns, name)?;
    let containers: Vec<Value> = u
        .containers
        .iter()
        .map(|(c, usage)| json!({"name": c, "usage": usage_json(usage)}))
        .collect();
    Some(json!({
        "kind": "PodMetrics",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": metadata(pod, now),
        "timestamp": format_time(u.timestamp),
        "window": go_duration(u.window),
        "containers": containers,
    }))
}

/// The Table metrics-server's printers make: `Name`, one column per resource (`cpu`,
/// `memory`; a pod's are its containers' sums) and `Window`.
pub fn table(items: &[Value], include: crate::table::IncludeObject) -> Value {
    let col = |name: &str, format: &str, description: &str| json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0});
    let columns = if items.is_empty() {
        Value::Null
    } else {
        json!([
            col("Name", "name", "Name of the resource"),
            col("cpu", "quantity", ""),
            col("memory", "quantity", ""),
            col("Window", "duration", ""),
        ])
    };
    let rows: Vec<Value> = items
        .iter()
        .map(|m| {
            let (mut cpu, mut mem) = (0u64, 0u64);
            let usages: Vec<&Value> = match m.get("containers").and_then(Value::as_array) {
                Some(cs) => cs.iter().filter_map(|c| c.get("usage")).collect(),
                None => m.get("usage").into_iter().collect(),
            };
            for u in usages {
                let q = |k: &str| u.get(k).and_then(Value::as_str).unwrap_or("0");
                cpu = cpu.saturating_add(parse_nanocores(q("cpu")));
                mem = mem.saturating_add(parse_bytes(q("memory")));
            }
            let object = match include {
                crate::table::IncludeObject::None => Value::Null,
                crate::table::IncludeObject::Metadata => crate::table::partial_object_metadata(m),
                crate::table::IncludeObject::Object => m.clone(),
            };
            json!({
                "cells": [m.at("/metadata/name").cloned().unwrap_or(json!("")),
                          decimal_si(cpu, -9), binary_si(mem),
                          m.get("window").cloned().unwrap_or(json!(""))],
                "object": object,
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// Reads back what [`decimal_si`] wrote for CPU (nanocores).
fn parse_nanocores(s: &str) -> u64 {
    let (num, mul) = match s.char_indices().last() {
        Some((i, 'n')) => (&s[..i], 1u64),
        Some((i, 'u')) => (&s[..i], 1_000),
        Some((i, 'm')) => (&s[..i], 1_000_000),
        Some((i, 'k')) => (&s[..i], 1_000_000_000_000),
        _ => (s, 1_000_000_000),
    };
    num.parse::<u64>().unwrap_or(0).saturating_mul(mul)
}

/// Reads back what [`binary_si`] wrote.
fn parse_bytes(s: &str) -> u64 {
    for (i, suffix) in ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].iter().enumerate() {
        if let Some(n) = s.strip_suffix(suffix) {
            let shift = u32::try_from(i.saturating_add(1).saturating_mul(10)).unwrap_or(60);
            return n.parse::<u64>().unwrap_or(0).saturating_mul(1u64 << shift);
        }
    }
    s.parse().unwrap_or(0)
}

/// `nodemetrics.metrics.k8s.io "x" not found` / `podmetrics.metrics.k8s.io "ns/x" not found`.
fn no_metrics(resource: &str, name: &str) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("{resource}.{GROUP} \"{name}\" not found"),
    )
    .with_details(json!({"name": name, "group": GROUP, "kind": resource}))
}

/// The 404 of metrics-server's listers for the object itself (`node "x" not found`; pods come
/// from a metadata lister over `pods`: `pods "x" not found`).
fn no_object(resource: &str, name: &str) -> ApiError {
    ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
        .with_details(json!({"name": name, "kind": resource}))
}

/// Answers a request for `metrics.k8s.io`.
pub(crate) async fn handle(ctx: &Ctx, method: &Method) -> ApiResult<Response> {
    let t = &ctx.target;
    if method != Method::GET {
        return Err(ApiError::method_not_allowed(method.as_str(), t.ri));
    }
    if t.sub.is_some() {
        return Err(ApiError::no_such_path());
    }
    if ctx.q_bool("watch") {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "watch is not supported on resources of kind \"{}\"",
                t.ri.qualified_plural()
            ),
        ));
    }
    let Some(reader) = ctx.inner.metrics_reader.get().cloned() else {
        // No metrics pipeline behind the group: what kube-apiserver answers for an APIService
        // whose backend is unavailable.
        return Err(ApiError::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ));
    };
    let now = ctx.inner.clock.now();
    let is_node = !t.ri.namespaced;
    let source = registry::lookup("", "v1", if is_node { "nodes" } else { "pods" })
        .ok_or_else(|| ApiError::internal("core resource missing"))?;
    let ns = t.namespace.as_deref();
    if let Some(name) = t.name.as_deref() {
        let key = source.key(ns, name);
        let Some(kv) = ctx.inner.store.get(&key).await? else {
            return Err(if is_node {
                no_object("node", name)
            } else {
                no_object("pods", name)
            });
        };
        let obj = decode_kv(source, &kv)?;
        let m = if is_node {
            node_metrics(reader.as_ref(), &obj, now)
        } else {
            pod_metrics(reader.as_ref(), &obj, now)
        };
        let Some(m) = m else {
            return Err(if is_node {
                no_metrics("nodemetrics", name)
            } else {
                no_metrics("podmetrics", &format!("{}/{name}", ns.unwrap_or("")))
            });
        };
        return respond(ctx, vec![m], false);
    }
    let sel = Selectors::from_ctx(ctx)?;
    let res = ctx
        .inner
        .store
        .list(&source.key_prefix_in(ns), ListOptions::default())
        .await?;
    let mut items = Vec::new();
    for kv in &res.kvs {
        let obj = decode_kv(source, kv)?;
        if !selected(&sel, t.ri, &obj) {
            continue;
        }
        let m = if is_node {
            node_metrics(reader.as_ref(), &obj, now)
        } else {
            pod_metrics(reader.as_ref(), &obj, now)
        };
        items.extend(m);
    }
    respond(ctx, items, true)
}

/// Label selectors apply to the Node's or Pod's labels; field selectors see only
/// `metadata.name` and `metadata.namespace`, as metrics-server's filters do.
fn selected(sel: &Selectors, ri: &ResourceInfo, obj: &Value) -> bool {
    let meta = obj.get("metadata");
    let fields = json!({"metadata": {
        "name": meta.and_then(|m| m.get("name")).cloned().unwrap_or(json!("")),
        "namespace": meta.and_then(|m| m.get("namespace")).cloned().unwrap_or(json!("")),
    }});
    sel.labels.matches_json(meta.and_then(|m| m.get("labels"))) && sel.fields.matches(ri, &fields)
}

fn respond(ctx: &Ctx, items: Vec<Value>, list: bool) -> ApiResult<Response> {
    let ri = ctx.target.ri;
    let accept = ctx.accept();
    if crate::table::wants_table(accept) {
        let include = crate::table::IncludeObject::parse(ctx.q("includeObject"))
            .map_err(ApiError::bad_request)?;
        return Ok(json_response(StatusCode::OK, &table(&items, include)));
    }
    let body = if list {
        json!({"kind": ri.list_kind(), "apiVersion": ri.api_version(), "metadata": {}, "items": items})
    } else {
        items.into_iter().next().unwrap_or(Value::Null)
    };
    if crate::protobuf::wants_protobuf(accept)
        && let Some(resp) = crate::protobuf::response(StatusCode::OK, &body)
    {
        return Ok(resp);
    }
    Ok(json_response(StatusCode::OK, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_as_go_does() {
        for (v, want) in [
            (0, "0"),
            (250_000_000, "250m"),
            (1_000_000_000, "1"),
            (123_456_789, "123456789n"),
            (1_500_000, "1500u"),
            (2_000_000_000_000, "2k"),
            (5_000, "5u"),
        ] {
            assert_eq!(decimal_si(v, -9), want, "{v}");
            assert_eq!(parse_nanocores(want), v, "{want}");
        }
        for (v, want) in [
            (0, "0"),
            (1000, "1000"),
            (1024, "1Ki"),
            (1536, "1536"),
            (100 << 20, "100Mi"),
            (3 << 30, "3Gi"),
            (1_000_000, "1000000"),
            (123 << 10, "123Ki"),
        ] {
            assert_eq!(binary_si(v), want, "{v}");
            assert_eq!(parse_bytes(want), v, "{want}");
        }
    }

    #[test]
    fn durations_print_as_go_does() {
        for (d, want) in [
            (Duration::from_secs(15), "15s"),
            (Duration::from_millis(12_500), "12.5s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(go_duration(d), want);
        }
    }

    struct Fixed;
    impl MetricsReader for Fixed {
        fn node(&self, name: &str) -> Option<klab_api::resource_metrics::NodeUsage> {
            (name == "n1").then(|| klab_api::resource_metrics::NodeUsage {
                timestamp: Timestamp::from_second(1_700_000_015).unwrap(),
                window: Duration::from_secs(15),
                usage: Usage {
                    cpu_nanocores: 1_250_000_000,
                    memory_bytes: 512 << 20,
                },
            })
        }
        fn pod(&self, ns: &str, name: &str) -> Option<klab_api::resource_metrics::PodUsage> {
            ((ns, name) == ("default", "web")).then(|| klab_api::resource_metrics::PodUsage {
                timestamp: Timestamp::from_second(1_700_000_015).unwrap(),
                window: Duration::from_millis(14_500),
                containers: vec![
                    (
                        "app".into(),
                        Usage {
                            cpu_nanocores: 250_000_000,
                            memory_bytes: 64 << 20,
                        },
                    ),
                    (
                        "sidecar".into(),
                        Usage {
                            cpu_nanocores: 1_234_567,
                            memory_bytes: 1 << 20,
                        },
                    ),
                ],
            })
        }
    }

    #[test]
    fn objects_have_metrics_servers_shape() {
        let now = Timestamp::from_second(1_700_000_020).unwrap();
        let node = json!({"metadata": {"name": "n1", "uid": "x", "labels": {"zone": "a"}}});
        assert_eq!(
            node_metrics(&Fixed, &node, now).unwrap(),
            json!({
                "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": "n1", "creationTimestamp": "2023-11-14T22:13:40Z",
                             "labels": {"zone": "a"}},
                "timestamp": "2023-11-14T22:13:35Z", "window": "15s",
                "usage": {"cpu": "1250m", "memory": "512Mi"},
            })
        );
        assert_eq!(
            node_metrics(&Fixed, &json!({"metadata": {"name": "n2"}}), now),
            None
        );
        let pod = json!({"metadata": {"name": "web", "namespace": "default"}});
        let m = pod_metrics(&Fixed, &pod, now).unwrap();
        assert_eq!(
            m,
            json!({
                "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": "web", "namespace": "default",
                             "creationTimestamp": "2023-11-14T22:13:40Z"},
                "timestamp": "2023-11-14T22:13:35Z", "window": "14.5s",
                "containers": [
                    {"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
                    {"name": "sidecar", "usage": {"cpu": "1234567n", "memory": "1Mi"}},
                ],
            })
        );
        // The Table sums a pod's containers.
        let t = table(&[m], crate::table::IncludeObject::None);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["web", "251234567n", "65Mi", "14.5s"])
        );
        assert_eq!(t["columnDefinitions"][1]["name"], "cpu");
        assert_eq!(
            table(&[], crate::table::IncludeObject::None)["columnDefinitions"],
            Value::Null
        );
    }
}
