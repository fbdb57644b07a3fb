//! Subresources other than `status`: `scale` (deployments, replicasets, statefulsets),
//! `pods/binding`, `pods/eviction` (with PodDisruptionBudgets) and `namespaces/finalize`
//! (api-surface §b.12, control-plane §10.1).

use axum::http::{Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

use klab_api::clock::format_time;
use klab_api::selector::LabelSelector;

use crate::crud::{
    self, Changes, DeleteOptions, WriteMode, WriteOutcome, WriteScope, guarded_update,
    json_response,
};
use crate::error::{ApiError, ApiResult};
use crate::object::{self, Pointer};
use crate::registry;
use crate::server::Ctx;

pub(crate) async fn handle(
    ctx: &Ctx,
    method: Method,
    sub: &str,
    body: Bytes,
) -> ApiResult<Response> {
    match (sub, method) {
        ("scale", Method::GET) => get_scale(ctx).await,
        ("scale", Method::PUT) => write_scale(ctx, false, body).await,
        ("scale", Method::PATCH) => write_scale(ctx, true, body).await,
        ("binding", Method::POST) => bind(ctx, body).await,
        ("eviction", Method::POST) => evict(ctx, body).await,
        ("finalize", Method::PUT) => finalize_namespace(ctx, body).await,
        ("token", Method::POST) => crate::review::token_request(ctx, body).await,
        ("log", Method::GET) => crate::kubelet_proxy::log(ctx).await,
        ("proxy", m) if ctx.target.ri.plural == "nodes" => {
            crate::kubelet_proxy::node_proxy(ctx, m, body).await
        }
        ("exec" | "attach" | "portforward", m @ (Method::GET | Method::POST)) => {
            crate::kubelet_proxy::upgrade(ctx, sub, m).await
        }
        (
            "scale" | "binding" | "eviction" | "finalize" | "log" | "exec" | "attach"
            | "portforward" | "token",
            m,
        ) => Err(ApiError::method_not_allowed(m.as_str(), ctx.target.ri)),
        // proxy, ephemeralcontainers: not part of klab yet.
        _ => Err(ApiError::no_such_path()),
    }
}

fn name(ctx: &Ctx) -> &str {
    ctx.target.name.as_deref().unwrap_or("")
}

/// The autoscaling/v1 Scale view of a workload.
fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .at("/spec/selector")
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .and_then(|s| LabelSelector::from_label_selector(&s).ok())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": obj.at("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {
            "replicas": obj.at("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

async fn get_scale(ctx: &Ctx) -> ApiResult<Response> {
    let t = &ctx.target;
    let key = t.ri.key(t.namespace.as_deref(), name(ctx));
    let kv = ctx
        .inner
        .store
        .get(&key)
        .await?
        .ok_or_else(|| ApiError::not_found(t.ri, name(ctx)))?;
    let obj = object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
}

async fn write_scale(ctx: &Ctx, is_patch: bool, body: Bytes) -> ApiResult<Response> {
    let t = &ctx.target;
    let ri = t.ri;
    let patch = if is_patch {
        let kind = crate::patch::PatchKind::from_content_type(ctx.content_type())?;
        Some((kind, crate::patch::decode_patch(kind, &body)?))
    } else {
        None
    };
    let put_body = if patch.is_none() {
        Some(crud::decode_body_any(&body)?)
    } else {
        None
    };
    // Recorded on the parent as an Update through the `scale` subresource.
    let options = if is_patch {
        "PatchOptions"
    } else {
        "UpdateOptions"
    };
    let manager = crud::request_field_manager(ctx, options, false)?;
    let outcome = crud::guarded_update_as(
        &ctx.inner,
        ri,
        t.namespace.as_deref(),
        name(ctx),
        WriteMode {
            scope: WriteScope::Main,
            dry_run: ctx.dry_run(),
            strict: false,
            changes: Changes::Any,
        },
        &crud::Recording::Update(manager),
        |current| {
            let scale = scale_of(current);
            let new_scale = match (&patch, &put_body) {
                (Some((kind, p)), _) => {
                    let scale_ri =
                        registry::lookup(ri.group, ri.version, ri.plural).expect("served");
                    crate::patch::apply_patch(scale_ri, *kind, &scale, p)?
                }
                (None, Some(b)) => {
                    if let Some(rv) = object::resource_version(b)
                        && Some(rv) != object::resource_version(current)
                    {
                        return Err(ApiError::conflict(ri, object::name(current)));
                    }
                    b.clone()
                }
                (None, None) => scale,
            };
            let replicas = new_scale
                .at("/spec/replicas")
                .and_then(Value::as_i64)
                .ok_or_else(|| ApiError::bad_request("spec.replicas: Required value"))?;
            let mut next = current.clone();
            object::strip_for_storage(&mut next);
            next["spec"]["replicas"] = json!(replicas);
            Ok(next)
        },
    )
    .await?;
    let (WriteOutcome::Stored(obj) | WriteOutcome::Deleted(obj)) = outcome;
    Ok(json_response(StatusCode::OK, &scale_of(&obj)))
}

/// `POST pods/<name>/binding`: assigns the pod to a node, once (upstream `BindingREST.Create`).
async fn bind(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let binding = crud::decode_body_any(&body)?;
    let pod_name = name(ctx).to_string();
    let meta = |field: &str| {
        binding
            .at(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if meta("name") != pod_name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    let node = binding_target(&binding)?;
    // The binding's uid and resourceVersion are preconditions on the pod (upstream keeps them
    // for this: `PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate`).
    let (uid, rv) = (meta("uid"), meta("resourceVersion"));
    let annotations = binding
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let t = &ctx.target;
    let now = format_time(ctx.inner.clock.now());
    let ri = t.ri;
    let conflict = |why: String| {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{pod_name}\": {why}"),
        )
    };
    // Upstream's binding writes straight to storage (`GuaranteedUpdate`), around the pod
    // strategy: the pod is not validated again, and its managedFields stay as they are. Of the
    // stored pod only the node name and status change, and the Binding's annotations if any.
    let changes = if annotations.is_empty() {
        Changes::Binding
    } else {
        Changes::Any
    };
    guarded_update(&ctx.inner, ri, t.namespace.as_deref(), &pod_name, WriteMode { scope: WriteScope::Internal, dry_run: ctx.dry_run(), strict: false, changes }, |current| {
        if !uid.is_empty() && uid != object::uid(current) {
            return Err(ApiError::precondition_failed(ri, &pod_name, format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", object::uid(current))));
        }
        let current_rv = object::resource_version(current).unwrap_or("");
        if !rv.is_empty() && rv != current_rv {
            return Err(ApiError::precondition_failed(ri, &pod_name, format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {current_rv}")));
        }
        if object::deletion_timestamp(current).is_some() {
            return Err(conflict(format!("pod {pod_name} is being deleted, cannot be assigned to a host")));
        }
        if let Some(existing) = current.at("/spec/nodeName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            return Err(conflict(format!("pod {pod_name} is already assigned to node \"{existing}\"")));
        }
        if current.at("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty()) {
            return Err(conflict(format!("pod {pod_name} has non-empty .spec.schedulingGates")));
        }
        let mut next = current.clone();
        object::strip_for_storage(&mut next);
        crate::schema::set_node_name(&mut next, &node);
        if !annotations.is_empty() {
            let m = object::meta_mut(&mut next);
            if !m.get("annotations").is_some_and(Value::is_object) {
                m.insert("annotations".into(), json!({}));
            }
            if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
                for (k, v) in &annotations {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
        set_pod_condition(&mut next, json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
        Ok(next)
    })
    .await
    .map_err(|e| if e.code == 404 { ApiError::not_found(ri, name(ctx)) } else { e })?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// The node a Binding names, checked as upstream's `ValidatePodBinding`. Its errors are not API
/// statuses there, so the server answers them as an unknown 500 with the field errors as the
/// message.
fn binding_target(binding: &Value) -> ApiResult<String> {
    let target = |field: &str| {
        binding
            .at(&format!("/target/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let mut errs = Vec::new();
    let kind = target("kind");
    if !kind.is_empty() && kind != "Node" {
        errs.push(format!(
            "target.kind: Unsupported value: \"{kind}\": supported values: \"Node\", \"<empty>\""
        ));
    }
    if target("name").is_empty() {
        errs.push("target.name: Required value".to_string());
    }
    match errs.len() {
        0 => Ok(target("name").to_string()),
        1 => Err(ApiError::new(500, "", errs.remove(0))),
        _ => Err(ApiError::new(500, "", format!("[{}]", errs.join(", ")))),
    }
}

/// Replaces or appends a pod condition by type.
pub(crate) fn set_pod_condition(pod: &mut Value, cond: Value) {
    let ty = cond.get("type").cloned();
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let list = pod["status"]
        .as_object_mut()
        .expect("object")
        .entry("conditions")
        .or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        if let Some(existing) = a.iter_mut().find(|c| c.get("type") == ty.as_ref()) {
            if existing.get("status") == cond.get("status") {
                // Same status: keep the original transition time.
                let ltt = existing.get("lastTransitionTime").cloned();
                *existing = cond;
                if let Some(t) = ltt {
                    existing["lastTransitionTime"] = t;
                }
            } else {
                *existing = cond;
            }
        } else {
            a.push(cond);
        }
    }
}

/// `POST pods/<name>/eviction` (policy/v1 Eviction): deletes the pod unless a PodDisruptionBudget
/// forbids it (control-plane spec §10.1, upstream `pkg/registry/core/pod/storage/eviction.go`).
async fn evict(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    // A pod that changed between its read and the delete is read again (upstream retries 20
    // times with backoff; here writes are serialised, so a few immediate retries suffice).
    let mut last = None;
    for _ in 0..EVICTION_RETRIES {
        match evict_once(ctx, &body).await {
            Ok(Some(resp)) => return Ok(resp),
            Ok(None) => last = Some(ApiError::conflict(ctx.target.ri, name(ctx))),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| ApiError::conflict(ctx.target.ri, name(ctx))))
}

const EVICTION_RETRIES: usize = 20;

/// One attempt; `Ok(None)` when a pod that ignores budgets changed under the server's own
/// precondition and must be read again.
async fn evict_once(ctx: &Ctx, body: &Bytes) -> ApiResult<Option<Response>> {
    let eviction = crud::decode_body_any(body)?;
    let t = &ctx.target;
    let pod_ri = t.ri;
    let ns = t.namespace.clone().unwrap_or_default();
    let pod_name = name(ctx).to_string();
    if let Some(body_name) = eviction.at("/metadata/name").and_then(Value::as_str)
        && body_name != pod_name
    {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let mut opts = match eviction.get("deleteOptions") {
        Some(o) if !o.is_null() => DeleteOptions::from_value(o)?,
        _ => DeleteOptions::default(),
    };
    opts.dry_run |= ctx.dry_run();
    let caller_pinned_rv = opts.precondition_rv.is_some();
    let key = pod_ri.key(Some(&ns), &pod_name);
    let kv = ctx
        .inner
        .store
        .get(&key)
        .await?
        .ok_or_else(|| ApiError::not_found(pod_ri, &pod_name))?;
    let pod = object::decode_stored(&kv.value, kv.mod_revision).map_err(ApiError::internal)?;
    crate::authz::admit_node_write(
        &ctx.inner,
        pod_ri,
        "eviction",
        crate::node_restriction::Op::Create,
        &ns,
        &pod_name,
        Some(&eviction),
        Some(&pod),
    )
    .await?;
    let pod_rv = kv.mod_revision.to_string();
    let phase = pod
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    let deleting = object::deletion_timestamp(&pod).is_some();
    // Terminal, Pending and deleting pods ignore budgets; one that is not terminal is deleted
    // only as it was read (it may have started meanwhile), else read again.
    let terminal = matches!(phase, "Succeeded" | "Failed");
    if terminal || phase == "Pending" || deleting {
        let enforce = !terminal && !caller_pinned_rv;
        if enforce {
            opts.precondition_rv = Some(pod_rv.clone());
        }
        return match delete_evicted(ctx, &ns, &pod_name, opts, None).await {
            Ok(()) => Ok(Some(evicted())),
            Err(e) if e.code == 409 && enforce => Ok(None),
            Err(e) => Err(e),
        };
    }
    let pdb_ri = registry::lookup("policy", "v1", "poddisruptionbudgets").expect("served");
    let pdbs = ctx
        .inner
        .store
        .list(&pdb_ri.key_prefix_in(Some(&ns)), Default::default())
        .await?;
    let labels = pod.at("/metadata/labels");
    let mut matching = Vec::new();
    for pkv in &pdbs.kvs {
        let pdb =
            object::decode_stored(&pkv.value, pkv.mod_revision).map_err(ApiError::internal)?;
        let sel = pdb
            .at("/spec/selector")
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .and_then(|s| LabelSelector::from_label_selector(&s).ok());
        // policy/v1: an empty selector matches every pod in the namespace, a missing one none.
        if sel.is_some_and(|s| s.matches_json(labels)) {
            matching.push(pdb);
        }
    }
    if matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let Some(pdb) = matching.pop() else {
        delete_evicted(ctx, &ns, &pod_name, opts, None).await?;
        return Ok(Some(evicted()));
    };
    let pdb_name = object::name(&pdb).to_string();
    let int_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    // A pod that is not Ready does not count as healthy: it may go without consuming the budget
    // when the policy says so, or while the budget is met (deleted only as it was read).
    let ready = pod
        .at("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    if !ready {
        let always = pdb
            .at("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            == Some("AlwaysAllow");
        let current = int_at(&pdb, "/status/currentHealthy");
        let desired = int_at(&pdb, "/status/desiredHealthy");
        if always || (current >= desired && desired > 0) {
            if !caller_pinned_rv {
                opts.precondition_rv = Some(pod_rv.clone());
            }
            let still_processing = (!caller_pinned_rv).then(|| pdb_name.clone());
            delete_evicted(ctx, &ns, &pod_name, opts, still_processing).await?;
            return Ok(Some(evicted()));
        }
    }
    // `checkAndDecrement` on the stored budget (re-read on conflict).
    let dry_run = opts.dry_run;
    let now = format_time(ctx.inner.clock.now());
    let pn = pod_name.clone();
    let check = |cur: &Value| -> ApiResult<Value> {
        let mut next = cur.clone();
        object::strip_for_storage(&mut next);
        if int_at(cur, "/status/observedGeneration") < int_at(cur, "/metadata/generation") {
            return Err(still_being_processed(&pdb_name));
        }
        let allowed = int_at(cur, "/status/disruptionsAllowed");
        if allowed < 0 {
            return Err(pdb_forbidden(
                &pdb_name,
                "pdb disruptions allowed is negative",
            ));
        }
        let disrupted = cur
            .at("/status/disruptedPods")
            .and_then(Value::as_object)
            .map_or(0, |m| m.len());
        if disrupted > MAX_DISRUPTED_POD_SIZE {
            return Err(pdb_forbidden(
                &pdb_name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            ));
        }
        if allowed == 0 {
            return Err(ApiError::too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
                    "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                    int_at(cur, "/status/desiredHealthy"), int_at(cur, "/status/currentHealthy"))}]}),
            ));
        }
        let allowed = allowed.saturating_sub(1);
        next["status"]["disruptionsAllowed"] = json!(allowed);
        if allowed == 0 {
            // `UpdateDisruptionAllowedCondition`, as the controller would write it.
            let observed = cur.at("/status/observedGeneration").cloned();
            set_condition(
                &mut next["status"],
                json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                       "message": "", "observedGeneration": observed, "lastTransitionTime": now}),
            );
        }
        if !next["status"]
            .get("disruptedPods")
            .is_some_and(Value::is_object)
        {
            next["status"]["disruptedPods"] = json!({});
        }
        next["status"]["disruptedPods"][pn.as_str()] = json!(now);
        Ok(next)
    };
    if dry_run {
        check(&pdb)?;
    } else {
        guarded_update(
            &ctx.inner,
            pdb_ri,
            Some(&ns),
            &pdb_name,
            WriteMode {
                scope: WriteScope::Status,
                dry_run: false,
                strict: false,
                changes: Changes::Any,
            },
            check,
        )
        .await?;
    }
    delete_evicted(ctx, &ns, &pod_name, opts, None).await?;
    Ok(Some(evicted()))
}

/// Upstream `MaxDisruptedPodSize`.
const MAX_DISRUPTED_POD_SIZE: usize = 2000;

fn evicted() -> Response {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// `createTooManyRequestsError`: the budget's status is older than its spec.
fn still_being_processed(pdb_name: &str) -> ApiError {
    ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        json!({"causes": [{"reason": "DisruptionBudget", "message": format!(
            "The disruption budget {pdb_name} is still being processed by the server.")}],
               "retryAfterSeconds": 10}),
    )
}

/// `errors.NewForbidden(policy.Resource("poddisruptionbudget"), name, err)`.
fn pdb_forbidden(pdb_name: &str, why: &str) -> ApiError {
    ApiError::forbidden(format!(
        "poddisruptionbudget.policy {pdb_name:?} is forbidden: {why}"
    ))
    .with_details(json!({"name": pdb_name, "group": "policy", "kind": "poddisruptionbudget"}))
}

/// `apimeta.SetStatusCondition` on a JSON status: the transition time is kept while the status
/// does not change.
fn set_condition(status: &mut Value, cond: Value) {
    if !status.is_object() {
        *status = json!({});
    }
    let list = &mut status["conditions"];
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(a) = list.as_array_mut() else { return };
    match a.iter_mut().find(|c| c.get("type") == cond.get("type")) {
        Some(existing) => {
            let ltt = (existing.get("status") == cond.get("status"))
                .then(|| existing.get("lastTransitionTime").cloned())
                .flatten();
            *existing = cond;
            if let Some(t) = ltt {
                existing["lastTransitionTime"] = t;
            }
        }
        None => a.push(cond),
    }
}

/// `addConditionAndDeletePod`: marks the pod `DisruptionTarget=True` (unless dry-run), then
/// deletes it with the caller's options; a resourceVersion precondition is checked by the
/// condition update and moved to the version it wrote. `still_processing` names the budget when
/// the precondition was the server's own: a conflict then asks the client to retry (429).
async fn delete_evicted(
    ctx: &Ctx,
    ns: &str,
    pod_name: &str,
    mut opts: DeleteOptions,
    still_processing: Option<String>,
) -> ApiResult<()> {
    let pod_ri = ctx.target.ri;
    let conflict = |e: ApiError| match (&still_processing, e.code) {
        (Some(pdb), 409) => still_being_processed(pdb),
        _ => e,
    };
    if !opts.dry_run {
        let now = format_time(ctx.inner.clock.now());
        let pinned = opts.precondition_rv.clone();
        let pinned_uid = opts.precondition_uid.clone();
        let out = guarded_update(
            &ctx.inner,
            pod_ri,
            Some(ns),
            pod_name,
            WriteMode {
                scope: WriteScope::Status,
                dry_run: false,
                strict: false,
                changes: Changes::Any,
            },
            |cur| {
                if let Some(uid) = &pinned_uid
                    && uid != object::uid(cur)
                {
                    return Err(ApiError::conflict(pod_ri, pod_name));
                }
                let mut next = cur.clone();
                object::strip_for_storage(&mut next);
                if let Some(rv) = &pinned {
                    next["metadata"]["resourceVersion"] = json!(rv);
                }
                set_pod_condition(
                    &mut next,
                    json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null, "lastTransitionTime": now,
                           "reason": klab_api::names::REASON_EVICTION_BY_EVICTION_API, "message": klab_api::names::MSG_EVICTION_BY_EVICTION_API}),
                );
                Ok(next)
            },
        )
        .await
        .map_err(conflict)?;
        if pinned.is_some()
            && let WriteOutcome::Stored(obj) = &out
        {
            opts.precondition_rv = object::resource_version(obj).map(str::to_string);
        }
    }
    crud::delete_object(&ctx.inner, pod_ri, Some(ns), pod_name, &opts)
        .await
        .map_err(conflict)?;
    Ok(())
}

/// `PUT namespaces/<name>/finalize`: only `spec.finalizers` changes; an empty list on a
/// terminating namespace removes it.
async fn finalize_namespace(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let new = crud::decode_body_any(&body)?;
    let ri = ctx.target.ri;
    let finalizers = new.at("/spec/finalizers").cloned().unwrap_or(json!([]));
    let outcome = guarded_update(
        &ctx.inner,
        ri,
        None,
        name(ctx),
        WriteMode {
            scope: WriteScope::Main,
            dry_run: ctx.dry_run(),
            strict: false,
            changes: Changes::Any,
        },
        |cur| {
            let mut next = cur.clone();
            object::strip_for_storage(&mut next);
            next["spec"]["finalizers"] = finalizers.clone();
            Ok(next)
        },
    )
    .await?;
    let (WriteOutcome::Stored(obj) | WriteOutcome::Deleted(obj)) = outcome;
    let empty = obj
        .at("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty
        && object::deletion_timestamp(&obj).is_some()
        && object::finalizers(&obj).is_empty()
        && !ctx.dry_run()
    {
        // The last finalizer of a terminating namespace is gone: remove it (a concurrent write
        // makes the CAS fail, and the namespace controller finalizes again).
        let key = ri.key(None, name(ctx));
        if let Some(kv) = ctx.inner.store.get(&key).await? {
            let _ = ctx.inner.store.delete(&key, Some(kv.mod_revision)).await;
        }
    }
    Ok(json_response(StatusCode::OK, &obj))
}
