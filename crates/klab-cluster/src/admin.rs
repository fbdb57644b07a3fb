//! The admin endpoint of a live cluster: node faults one command away (`klab node …`), and the
//! supervised components (`klab component …`).
//!
//! `GET /klab/v1/nodes` lists the simulated nodes; `POST /klab/v1/nodes/{name}/{fault}` applies a
//! fault (`stop-kubelet`, `power-off`, `memory-pressure?available=80Mi`, `relieve`, …) or restarts the kubelet so that it registers again
//! (`rejoin`); `POST /klab/v1/nodes` with `{"name": …, "zone": …}` adds a machine and
//! `DELETE /klab/v1/nodes/{name}` removes one for good; `POST /klab/v1/nodes/{name}/clock-skew?offset=-2m`
//! offsets the machine's clock; `POST /klab/v1/nodes/{name}/condition?type=Ready&status=False&reason=…&message=…`
//! (and `clear-condition?type=…`), `image-pull-fail?image=…` / `image-pull-heal?image=…` and
//! `reboot?cpu=8&memory=16Gi&labels=k=v` apply the scenario language's node faults with the same
//! cluster calls; `POST /klab/v1/images/{fail|heal}?image=…` does it on every node. `GET /klab/v1/components` lists the supervised
//! components; `POST /klab/v1/components/{name}/panic` makes one panic;
//! `POST /klab/v1/components/{name}/{stop|start|restart}` stops, starts or restarts the API server,
//! the controller manager, one controller or the scheduler; `POST
//! /klab/v1/components/{name}/brownout?latency=2s&error-rate=0.5&code=503` starts a brownout of
//! one client's requests (`kubelet/NODE`, `kube-controller-manager`, …) and `?end` ends it. Only `system:masters` may call it; errors are
//! `metav1.Status` bodies like every other API answer.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};

use klab_apiserver::Identity;

use crate::{Cluster, ClusterError, FAULT_NAMES, NodeSpec, SimNodeState, parse_fault};

fn status(code: u16, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code});
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn state_json(s: &SimNodeState) -> Value {
    json!({
        "name": s.name,
        "powered": s.powered,
        "kubeletRunning": s.kubelet_running,
        "partitioned": s.partitioned,
        "frozen": s.frozen,
        "shuttingDown": s.shutting_down,
        "bootID": s.boot_id,
        "runningContainers": s.running_containers,
    })
}

fn authorized(identity: &Option<Extension<Identity>>) -> bool {
    identity
        .as_ref()
        .is_some_and(|Extension(i)| i.groups.iter().any(|g| g == "system:masters"))
}

/// 403 for anyone but `system:masters`.
fn refuse_unauthorized(identity: &Option<Extension<Identity>>) -> Option<Response> {
    (!authorized(identity)).then(|| {
        status(
            403,
            "Forbidden",
            "only system:masters may use the klab admin endpoint".into(),
        )
    })
}

async fn list(State(c): State<Arc<Cluster>>, identity: Option<Extension<Identity>>) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let mut items = Vec::new();
    for n in c.node_names() {
        if let Ok(s) = c.node_state(&n) {
            items.push(state_json(&s));
        }
    }
    Json(json!({"items": items})).into_response()
}

async fn fault(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path((name, fault)): Path<(String, String)>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let q = own_params(q);
    if fault == "clock-skew" {
        let Some(offset) = q.get("offset") else {
            return status(
                400,
                "BadRequest",
                "clock-skew needs ?offset=DURATION".into(),
            );
        };
        let offset = match crate::control::parse_offset(offset) {
            Ok(o) => o,
            Err(e) => return status(400, "BadRequest", e),
        };
        return match c
            .set_clock_skew(&name, offset)
            .and_then(|()| c.node_state(&name))
        {
            Ok(s) => Json(state_json(&s)).into_response(),
            Err(e) => cluster_error(e),
        };
    }
    if let Some(r) = node_fault_with_args(&c, &name, &fault, &q).await {
        return r;
    }
    let result = if fault == "rejoin" {
        c.rejoin_node(&name)
    } else if fault == "relieve" || crate::pressure_signal(&fault).is_some() {
        c.apply_pressure(&name, &fault, q.get("available").map(String::as_str))
    } else {
        let Some(f) = parse_fault(&fault) else {
            return status(
                400,
                "BadRequest",
                format!(
                    "unknown fault {fault:?}: one of {}, memory-pressure, disk-pressure, pid-pressure, relieve, rejoin",
                    FAULT_NAMES.join(", ")
                ),
            );
        };
        c.apply_fault(&name, f).await
    };
    match result {
        Ok(s) => Json(state_json(&s)).into_response(),
        Err(e) => cluster_error(e),
    }
}

/// A call's own query parameters: all but `timeout`, the API server's request timeout, which
/// kubectl adds to every request it is given `--request-timeout` for (`kubectl create --raw
/// /klab/v1/nodes/n1/reboot -f - --request-timeout=20s`). Every admin call ends well within it.
fn own_params(
    mut q: std::collections::BTreeMap<String, String>,
) -> std::collections::BTreeMap<String, String> {
    q.remove("timeout");
    q
}

/// The node faults that take arguments, as the scenario runner applies them (the same
/// `Cluster` calls): `condition?type=T&status=S[&reason=R][&message=M]`,
/// `clear-condition?type=T`, `image-pull-fail?image=I[&message=E]`, `image-pull-heal?image=I`
/// and `reboot?cpu=C&memory=M&labels=k=v,k2=v2` (a plain `reboot` has no query). `None` when
/// `fault` is none of them.
async fn node_fault_with_args(
    c: &Cluster,
    name: &str,
    fault: &str,
    q: &std::collections::BTreeMap<String, String>,
) -> Option<Response> {
    let bad = |m: String| Some(status(400, "BadRequest", m));
    let allowed: &[&str] = match fault {
        "condition" => &["type", "status", "reason", "message"],
        "clear-condition" => &["type"],
        "image-pull-fail" => &["image", "message"],
        "image-pull-heal" => &["image"],
        "reboot" if !q.is_empty() => &["cpu", "memory", "labels"],
        _ => return None,
    };
    if let Some(k) = q.keys().find(|k| !allowed.contains(&k.as_str())) {
        return bad(format!("{fault} takes {}, not {k:?}", allowed.join(", ")));
    }
    let result = match fault {
        "condition" | "clear-condition" => {
            let Some(type_) = q.get("type") else {
                return bad(format!("{fault} needs ?type=CONDITION"));
            };
            let report = if fault == "condition" {
                let Some(st) = q.get("status") else {
                    return bad("condition needs ?status=True|False|Unknown".into());
                };
                Some(crate::ConditionOverride {
                    status: st.clone(),
                    reason: q.get("reason").cloned(),
                    message: q.get("message").cloned(),
                })
            } else {
                None
            };
            c.set_node_condition(name, type_, report)
        }
        "image-pull-fail" | "image-pull-heal" => {
            let Some(image) = q.get("image") else {
                return bad(format!("{fault} needs ?image=IMAGE"));
            };
            c.image_pull_fault(
                Some(name),
                image,
                fault == "image-pull-fail",
                q.get("message").map(String::as_str),
            )
            .and_then(|_| c.node_state(name))
        }
        _ => {
            let labels = match q.get("labels").map(|l| parse_labels(l)).transpose() {
                Ok(l) => l,
                Err(e) => return bad(e),
            };
            c.reboot_node_with(
                name,
                q.get("cpu").map(String::as_str),
                q.get("memory").map(String::as_str),
                labels,
            )
            .await
        }
    };
    Some(match result {
        Ok(s) => Json(state_json(&s)).into_response(),
        Err(e) => cluster_error(e),
    })
}

/// `k=v,k2=v2` (as kubelet's `--node-labels`); the values are checked by the cluster.
fn parse_labels(l: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    l.split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("invalid label {kv:?}: expected key=value"))
        })
        .collect()
}

/// `POST /klab/v1/images/{fail|heal}?image=I[&message=E]`: pulls of one image fail (or work
/// again) on every node, present and to come.
async fn images(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path(action): Path<String>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let q = own_params(q);
    let fail = match action.as_str() {
        "fail" => true,
        "heal" => false,
        other => {
            return status(
                400,
                "BadRequest",
                format!("unknown image action {other:?}: one of fail, heal"),
            );
        }
    };
    let Some(image) = q.get("image") else {
        return status(
            400,
            "BadRequest",
            format!("image {action} needs ?image=IMAGE"),
        );
    };
    if let Some(k) = q
        .keys()
        .find(|k| !["image", "message"].contains(&k.as_str()))
    {
        return status(
            400,
            "BadRequest",
            format!("image {action} takes image, message, not {k:?}"),
        );
    }
    match c.image_pull_fault(None, image, fail, q.get("message").map(String::as_str)) {
        Ok(nodes) => Json(json!({"image": image, "failed": fail, "nodes": nodes})).into_response(),
        Err(e) => cluster_error(e),
    }
}

/// `POST /klab/v1/volumes/{name}/{fail|heal}`.
async fn volume(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path((name, action)): Path<(String, String)>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let fail = match action.as_str() {
        "fail" => true,
        "heal" => false,
        other => {
            return status(
                400,
                "BadRequest",
                format!("unknown volume action {other:?}: one of fail, heal"),
            );
        }
    };
    // A claim is named `namespace/claim`: the path carries it as `namespace~claim`.
    let name = name.replace('~', "/");
    match c.volume_fault(&name, fail).await {
        Ok(pv) => Json(json!({"volume": pv, "failed": fail})).into_response(),
        Err(e) => cluster_error(e),
    }
}

fn cluster_error(e: ClusterError) -> Response {
    match e {
        e @ ClusterError::UnknownVolume(_) => status(404, "NotFound", e.to_string()),
        // As kube-apiserver answers a GET of a missing Node.
        ClusterError::UnknownNode(n) => {
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("nodes {n:?} not found"), "reason": "NotFound",
                "details": {"name": n, "kind": "nodes"}, "code": 404});
            (StatusCode::NOT_FOUND, Json(body)).into_response()
        }
        ClusterError::Transition(m) => status(409, "Conflict", m),
        e @ ClusterError::NodeExists(_) => status(409, "AlreadyExists", e.to_string()),
        e @ ClusterError::InvalidNode { .. } => status(422, "Invalid", e.to_string()),
        e @ ClusterError::InvalidFlag { .. } => status(400, "BadRequest", e.to_string()),
        e @ ClusterError::UnknownComponent(_) => status(404, "NotFound", e.to_string()),
        e => status(500, "InternalError", e.to_string()),
    }
}

/// The body of `POST /klab/v1/nodes`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AddNode {
    name: String,
    zone: Option<String>,
}

/// `POST /klab/v1/nodes`: a new machine joins the cluster.
async fn add(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let req: AddNode = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return status(400, "BadRequest", format!("invalid request body: {e}")),
    };
    let mut spec = NodeSpec::new(req.name);
    if let Some(z) = req.zone {
        let errs = klab_api::selector::is_valid_label_value(&z);
        if !errs.is_empty() {
            return status(
                422,
                "Invalid",
                format!("invalid zone {z:?}: {}", errs.join("; ")),
            );
        }
        spec.zone = Some(z);
    }
    match c.add_node(&spec) {
        Ok(s) => (StatusCode::CREATED, Json(state_json(&s))).into_response(),
        Err(e) => cluster_error(e),
    }
}

/// `DELETE /klab/v1/nodes/{name}`: the machine is powered off for good and its Node deleted.
async fn remove(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    match c.remove_node(&name).await {
        Ok(()) => Json(json!({"name": name, "removed": true})).into_response(),
        Err(e) => cluster_error(e),
    }
}

/// `GET /klab/v1/components`: every supervised component with its state, restarts and panics.
async fn components(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let items: Vec<Value> = c
        .health()
        .components()
        .into_iter()
        .map(|(name, h)| {
            let state = match h.state {
                klab_api::supervise::ComponentState::Running => "running",
                klab_api::supervise::ComponentState::BackingOff { .. } => "backoff",
                klab_api::supervise::ComponentState::Stopped { .. } => "stopped",
            };
            json!({
                "name": name,
                "running": h.state == klab_api::supervise::ComponentState::Running,
                "state": state,
                "restarts": h.restarts,
                "panics": h.panics,
                "lastFailure": h.last_failure.map(|f| f.to_string()),
            })
        })
        .collect();
    // The API server is not a supervised task; it is listed with its stop state.
    let plane = c.plane_state();
    let mut all = vec![json!({
        "name": crate::control::APISERVER,
        "running": !plane.api_down,
        "state": if plane.api_down { "stopped" } else { "running" },
        "restarts": 0,
        "panics": 0,
        "lastFailure": null,
    })];
    all.extend(items);
    Json(json!({"items": all})).into_response()
}

/// `POST /klab/v1/components/{name}/{stop|start|restart}`.
async fn control_component(c: &Cluster, name: &str, op: &str) -> Response {
    let Some(op) = klab_api::supervise::ComponentOp::parse(op) else {
        return not_found();
    };
    match c.control_component(name, op) {
        Ok(n) => Json(json!({"name": n, "action": op.name()})).into_response(),
        Err(e) => cluster_error(e),
    }
}

/// `POST /klab/v1/components/{name}/brownout?latency=…&error-rate=…&code=…` (or `?end`).
fn brownout(c: &Cluster, name: &str, q: &std::collections::BTreeMap<String, String>) -> Response {
    use crate::control::{Brownout, BrownoutError};
    let bad = |m: String| status(400, "BadRequest", m);
    let b = if q.contains_key("end") {
        None
    } else {
        let latency = match q.get("latency").map(|l| klab_api::parse_duration(l)) {
            None => std::time::Duration::ZERO,
            Some(Ok(d)) => d,
            Some(Err(e)) => return bad(e),
        };
        let error_rate = match q.get("error-rate").map(|r| r.parse::<f64>()) {
            None => 0.0,
            Some(Ok(r)) => r,
            Some(Err(e)) => return bad(format!("invalid error-rate: {e}")),
        };
        let code = q.get("code").map(String::as_str).unwrap_or("503");
        let Some(error) = code.parse::<u16>().ok().and_then(BrownoutError::parse) else {
            return bad(format!("code must be 500, 503 or 429, got {code}"));
        };
        Some(Brownout {
            latency,
            error_rate,
            error,
        })
    };
    match c.brownout(name, b) {
        Ok(()) => Json(json!({"name": name, "brownout": b.is_some()})).into_response(),
        Err(e) => cluster_error(e),
    }
}

fn not_found() -> Response {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource".into(),
    )
}

/// `POST /klab/v1/components/{name}/panic`: makes a component panic, to watch it be restarted.
async fn inject_panic(
    State(c): State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path(name): Path<String>,
) -> Response {
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    if c.health().inject_panic(&name) {
        Json(json!({"name": name, "injected": "panic"})).into_response()
    } else {
        status(
            404,
            "NotFound",
            format!("no supervised component {name:?} (see `klab component list`)"),
        )
    }
}

/// Component names contain `/` (`kube-controller-manager/replicaset-controller`): the path is
/// `/klab/v1/components/<name>/panic`.
async fn inject_panic_path(
    state: State<Arc<Cluster>>,
    identity: Option<Extension<Identity>>,
    Path(rest): Path<String>,
    Query(q): Query<std::collections::BTreeMap<String, String>>,
) -> Response {
    if let Some(name) = rest.strip_suffix("/panic") {
        return inject_panic(state, identity, Path(name.to_string())).await;
    }
    if let Some(refused) = refuse_unauthorized(&identity) {
        return refused;
    }
    let Some((name, action)) = rest.rsplit_once('/') else {
        return not_found();
    };
    if action == "brownout" {
        return brownout(&state.0, name, &own_params(q));
    }
    control_component(&state.0, name, action).await
}

/// The admin routes, to be merged in front of the API server's Router.
///
/// Its POSTs and DELETEs start and stop the cluster's own tasks (a node's kubelet when it powers
/// on, reboots or joins; a component), so they run on the runtime the router was made on — the
/// cluster's — whichever runtime serves the connection: `klab up` serves connections on threads
/// of their own, and a kubelet started there would run beside kubectl's requests instead of
/// with the other nodes. The GETs only read, and are answered where they arrive (at 5 000 busy
/// nodes, `klab node list` took 8 s on the cluster's runtime).
pub fn admin_router(cluster: Arc<Cluster>) -> Router {
    let router = routes(cluster);
    match tokio::runtime::Handle::try_current() {
        Ok(home) => router.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let home = home.clone();
                async move {
                    if req.method() == axum::http::Method::GET {
                        return next.run(req).await;
                    }
                    match home.spawn(next.run(req)).await {
                        Ok(response) => response,
                        Err(e) => status(
                            500,
                            "InternalError",
                            format!("the admin request did not finish: {e}"),
                        ),
                    }
                }
            },
        )),
        Err(_) => router,
    }
}

fn routes(cluster: Arc<Cluster>) -> Router {
    Router::new()
        .route("/klab/v1/nodes", get(list).post(add))
        .route("/klab/v1/nodes/{name}", axum::routing::delete(remove))
        .route("/klab/v1/nodes/{name}/{fault}", post(fault))
        .route("/klab/v1/volumes/{name}/{action}", post(volume))
        .route("/klab/v1/images/{action}", post(images))
        .route("/klab/v1/components", get(components))
        .route("/klab/v1/components/{*name}", post(inject_panic_path))
        .with_state(cluster)
}
