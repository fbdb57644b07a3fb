//! The admin endpoint of a live cluster: node faults one command away (`klab node …`), and the
//! supervised components (`klab component …`).
//!
//! `GET /klab/v1/nodes` lists the simulated nodes; `POST /klab/v1/nodes/{name}/{fault}` applies a
//! fault (`stop-kubelet`, `power-off`, `memory-pressure?available=80Mi`, `relieve`, …) or restarts the kubelet so that it registers again
//! (`rejoin`); `POST /klab/v1/nodes` with `{"name": …, "zone": …}` adds a machine and
//! `DELETE /klab/v1/nodes/{name}` removes one for good. `GET /klab/v1/components` lists the supervised
//! components; `POST /klab/v1/components/{name}/panic` makes one panic. Only `system:masters` may call it; errors are
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
        ClusterError::UnknownNode(n) => {
            status(404, "NotFound", format!("node {n:?} is not a klab node"))
        }
        ClusterError::Transition(m) => status(409, "Conflict", m),
        e @ ClusterError::NodeExists(_) => status(409, "AlreadyExists", e.to_string()),
        e @ ClusterError::InvalidNode { .. } => status(422, "Invalid", e.to_string()),
        e @ ClusterError::InvalidFlag { .. } => status(400, "BadRequest", e.to_string()),
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
            json!({
                "name": name,
                "running": h.state == klab_api::supervise::ComponentState::Running,
                "restarts": h.restarts,
                "panics": h.panics,
                "lastFailure": h.last_failure.map(|f| f.to_string()),
            })
        })
        .collect();
    Json(json!({"items": items})).into_response()
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
) -> Response {
    match rest.strip_suffix("/panic") {
        Some(name) => inject_panic(state, identity, Path(name.to_string())).await,
        None => status(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        ),
    }
}

/// The admin routes, to be merged in front of the API server's Router.
pub fn admin_router(cluster: Arc<Cluster>) -> Router {
    Router::new()
        .route("/klab/v1/nodes", get(list).post(add))
        .route("/klab/v1/nodes/{name}", axum::routing::delete(remove))
        .route("/klab/v1/nodes/{name}/{fault}", post(fault))
        .route("/klab/v1/volumes/{name}/{action}", post(volume))
        .route("/klab/v1/components", get(components))
        .route("/klab/v1/components/{*name}", post(inject_panic_path))
        .with_state(cluster)
}
