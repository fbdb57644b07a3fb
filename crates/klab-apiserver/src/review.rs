//! The review resources, which answer a create and store nothing: access reviews
//! (SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectRulesReview:
//! `kubectl auth can-i [--list]`), SelfSubjectReview (`kubectl auth whoami`) and TokenReview, plus
//! the `serviceaccounts/token` subresource (TokenRequest: `kubectl create token`). Access answers
//! come from [`crate::authz`], the same decision every request gets.

use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::authz::{self, Attributes};
use crate::crud::{decode_body, decode_kv, normalize, object_response};
use crate::identity::Identity;
use crate::object::{self, Pointer};
use crate::registry::{self, ResourceInfo};
use crate::server::{Ctx, Inner};
use crate::token::{self, TokenSubject};
use crate::validation::FieldError;
use crate::{ApiError, ApiResult};

/// TokenRequest is served only as `serviceaccounts/token`; its errors name it as upstream does.
static TOKEN_REQUEST: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    plural: "tokenrequests",
    singular: "tokenrequest",
    namespaced: true,
    short_names: &[],
    categories: &[],
    subresources: &[],
    has_generation: false,
};

/// Who is asking: the request's identity; in-process callers without one act as the admin.
fn caller(ctx: &Ctx) -> Identity {
    ctx.identity.clone().unwrap_or_else(Identity::admin)
}

fn invalid(ri: &ResourceInfo, name: &str, errs: Vec<FieldError>) -> ApiError {
    crate::crud::validation_error(ri, name, errs)
}

/// `POST` on a review resource: validated, answered, nothing stored.
pub(crate) async fn create(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let ri = ctx.target.ri;
    let obj = normalize(ri, decode_body(ctx, &body)?, ctx.strict())?;
    let mut out = match ri.kind {
        "SelfSubjectAccessReview" => access_review(ctx, &obj, Review::SelfSubject).await?,
        "SubjectAccessReview" => access_review(ctx, &obj, Review::Subject).await?,
        "LocalSubjectAccessReview" => access_review(ctx, &obj, Review::Local).await?,
        "SelfSubjectRulesReview" => rules_review(ctx, &obj).await?,
        "SelfSubjectReview" => self_subject_review(ctx, &obj),
        "TokenReview" => token_review(&ctx.inner, &obj).await?,
        _ => return Err(ApiError::no_such_path()),
    };
    object::set_type_meta(&mut out, &ri.api_version(), ri.kind);
    // Reviews are never stored: no uid, no resourceVersion, `creationTimestamp: null`.
    let meta = out
        .as_object_mut()
        .map(|m| m.entry("metadata").or_insert_with(|| json!({})));
    if let Some(Value::Object(m)) = meta {
        m.insert("creationTimestamp".into(), Value::Null);
    }
    object_response(ctx, StatusCode::CREATED, out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Review {
    SelfSubject,
    Subject,
    Local,
}

/// The attributes an access review's spec asks about.
fn attributes_of(spec: &Value, who: &Identity) -> Attributes {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut a = Attributes {
        user: who.user.clone(),
        groups: who.groups.clone(),
        ..Default::default()
    };
    if let Some(r) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        a.resource_request = true;
        a.verb = s(r, "verb");
        a.namespace = s(r, "namespace");
        a.group = s(r, "group");
        a.resource = s(r, "resource");
        a.subresource = s(r, "subresource");
        a.name = s(r, "name");
    } else if let Some(n) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        a.verb = s(n, "verb");
        a.path = s(n, "path");
    }
    a
}

/// Upstream's `ValidateSubjectAccessReviewSpec` family.
fn validate_access_spec(spec: &Value, kind: Review, namespace: &str) -> Vec<FieldError> {
    let has = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let mut errs = Vec::new();
    if has("resourceAttributes") && has("nonResourceAttributes") {
        errs.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            spec["nonResourceAttributes"].clone(),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if !has("resourceAttributes") && !has("nonResourceAttributes") {
        errs.push(FieldError::invalid(
            "spec.resourceAttributes",
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    if kind != Review::SelfSubject {
        let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
        let no_groups = spec
            .get("groups")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if user.is_empty() && no_groups {
            errs.push(FieldError::invalid(
                "spec.user",
                json!(user),
                "at least one of user or group must be specified",
            ));
        }
    }
    if kind == Review::Local {
        // A local review asks about its own namespace only.
        let asked = spec
            .at("/resourceAttributes/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if has("resourceAttributes") && asked != namespace {
            errs.push(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                json!(asked),
                "must match metadata.namespace",
            ));
        }
        if has("nonResourceAttributes") {
            errs.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                spec["nonResourceAttributes"].clone(),
                "disallowed on this kind of request",
            ));
        }
    }
    errs
}

async fn access_review(ctx: &Ctx, obj: &Value, kind: Review) -> ApiResult<Value> {
    let ri = ctx.target.ri;
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let namespace = ctx.target.namespace.clone().unwrap_or_default();
    let errs = validate_access_spec(&spec, kind, &namespace);
    if !errs.is_empty() {
        return Err(invalid(ri, object::name(obj), errs));
    }
    let who = match kind {
        Review::SelfSubject => caller(ctx),
        Review::Subject | Review::Local => Identity {
            user: spec
                .get("user")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            groups: spec
                .get("groups")
                .and_then(Value::as_array)
                .map(|g| {
                    g.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        },
    };
    let decision = authz::authorize(&ctx.inner, &attributes_of(&spec, &who)).await?;
    let mut status = json!({"allowed": decision.allowed});
    if decision.denied {
        status["denied"] = json!(true);
    }
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    let mut out = obj.clone();
    out["status"] = status;
    Ok(out)
}

async fn rules_review(ctx: &Ctx, obj: &Value) -> ApiResult<Value> {
    let ns = obj
        .at("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut out = obj.clone();
    out["status"] = authz::rules_review_status(&ctx.inner, &caller(ctx), ns).await?;
    Ok(out)
}

fn user_info(id: &Identity) -> Value {
    json!({"username": id.user, "groups": id.groups})
}

fn self_subject_review(ctx: &Ctx, obj: &Value) -> Value {
    let mut out = obj.clone();
    out["status"] = json!({"userInfo": user_info(&caller(ctx))});
    out
}

async fn token_review(inner: &Inner, obj: &Value) -> ApiResult<Value> {
    let token = obj.at("/spec/token").and_then(Value::as_str).unwrap_or("");
    let mut out = obj.clone();
    out["status"] = match authenticate(inner, token).await? {
        Some((id, subject)) => {
            let mut user = user_info(&id);
            user["uid"] = json!(subject.service_account_uid);
            json!({"authenticated": true, "user": user, "audiences": subject.audiences})
        }
        None => {
            json!({"user": {}, "error": "[invalid bearer token, service account token has been invalidated]"})
        }
    };
    Ok(out)
}

/// Authenticates a bearer token: a token this server signed, current, whose service account
/// (and bound object, if any) still exists with the UID it was issued for.
pub(crate) async fn authenticate(
    inner: &Inner,
    token: &str,
) -> ApiResult<Option<(Identity, TokenSubject)>> {
    let now = inner.clock.now().as_second();
    let Some(claims) = inner.signer.verify(token, now) else {
        return Ok(None);
    };
    let Some(subject) = TokenSubject::from_claims(&claims) else {
        return Ok(None);
    };
    if !subject.audiences.iter().any(|a| a == token::ISSUER) {
        return Ok(None);
    }
    let sa_ri = registry::lookup("", "v1", "serviceaccounts").expect("served");
    let Some(kv) = inner
        .store
        .get(&sa_ri.key(Some(&subject.namespace), &subject.service_account))
        .await?
    else {
        return Ok(None);
    };
    if object::uid(&decode_kv(sa_ri, &kv)?) != subject.service_account_uid {
        return Ok(None);
    }
    if let Some((kind, name, uid)) = &subject.bound {
        let (plural, ns) = match kind.as_str() {
            "Pod" => ("pods", Some(subject.namespace.as_str())),
            "Secret" => ("secrets", Some(subject.namespace.as_str())),
            _ => ("nodes", None),
        };
        let ri = registry::lookup("", "v1", plural).expect("served");
        let Some(kv) = inner.store.get(&ri.key(ns, name)).await? else {
            return Ok(None);
        };
        let o = decode_kv(ri, &kv)?;
        // A bound pod that is being deleted no longer vouches for its token.
        if object::uid(&o) != uid.as_str()
            || (kind == "Pod" && o.at("/metadata/deletionTimestamp").is_some())
        {
            return Ok(None);
        }
    }
    Ok(Some((subject.identity(), subject)))
}

/// `POST …/serviceaccounts/{name}/token`: a TokenRequest answered with a signed token.
pub(crate) async fn token_request(ctx: &Ctx, body: Bytes) -> ApiResult<Response> {
    let inner = &ctx.inner;
    let ns = ctx.target.namespace.clone().unwrap_or_default();
    let sa_name = ctx.target.name.clone().unwrap_or_default();
    let mut raw = if body.is_empty() {
        json!({})
    } else {
        crate::crud::decode_body_any(&body)?
    };
    // Status and metadata are the server's to fill (kubectl sends `expirationTimestamp: null`).
    if let Some(m) = raw.as_object_mut() {
        m.remove("status");
        m.remove("metadata");
    }
    let mut req = normalize(&TOKEN_REQUEST, raw, ctx.strict())?;
    let spec = req
        .as_object_mut()
        .map(|m| m.entry("spec").or_insert_with(|| json!({})));
    let Some(spec) = spec else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if spec.get("expirationSeconds").is_none_or(Value::is_null) {
        spec["expirationSeconds"] = json!(token::DEFAULT_EXPIRATION_SECONDS);
    }
    let expiration = spec["expirationSeconds"].as_i64().unwrap_or(0);
    let mut errs = Vec::new();
    if expiration < token::MIN_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    } else if expiration > token::MAX_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errs.is_empty() {
        return Err(invalid(&TOKEN_REQUEST, &sa_name, errs));
    }
    let audiences: Vec<String> = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![token::ISSUER.to_string()],
    };
    spec["audiences"] = json!(audiences);
    let sa_ri = ctx.target.ri;
    let sa = match inner.store.get(&sa_ri.key(Some(&ns), &sa_name)).await? {
        Some(kv) => decode_kv(sa_ri, &kv)?,
        None => return Err(ApiError::not_found(sa_ri, &sa_name)),
    };
    let bound_ref = spec
        .get("boundObjectRef")
        .filter(|v| v.is_object())
        .cloned();
    let (bound, node) = match &bound_ref {
        Some(r) => bound_object(inner, &ns, r).await?,
        None => (None, None),
    };
    let now = inner.clock.now();
    let claims = token::claims(
        &ns,
        &sa_name,
        object::uid(&sa),
        bound
            .as_ref()
            .map(|(k, n, u)| (k.as_str(), n.as_str(), u.as_str())),
        node.as_ref().map(|(n, u)| (n.as_str(), u.as_str())),
        &audiences,
        now.as_second(),
        expiration,
        &inner.rng.uid(),
    );
    let expires = now
        .checked_add(jiff::SignedDuration::from_secs(expiration))
        .unwrap_or(now);
    req["metadata"] = json!({"name": sa_name, "namespace": ns,
        "creationTimestamp": klab_api::clock::format_time(now)});
    req["status"] = json!({
        "token": inner.signer.sign(&claims),
        "expirationTimestamp": klab_api::clock::format_time(expires),
    });
    object::set_type_meta(&mut req, "authentication.k8s.io/v1", "TokenRequest");
    Ok(crate::crud::json_response(StatusCode::CREATED, &req))
}

/// The object a token is bound to: (kind, name, uid), and for a pod its node (name, uid), as
/// upstream puts both into the claims.
async fn bound_object(
    inner: &Inner,
    ns: &str,
    r: &Value,
) -> ApiResult<(Option<(String, String, String)>, Option<(String, String)>)> {
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let (plural, scoped) = match kind {
        "Pod" => ("pods", true),
        "Secret" => ("secrets", true),
        "Node" => ("nodes", false),
        other => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount to object of kind {other:?}: only Pod, Secret and Node are supported"
            )));
        }
    };
    let ri = registry::lookup("", "v1", plural).expect("served");
    let ns_opt = scoped.then_some(ns);
    let Some(kv) = inner.store.get(&ri.key(ns_opt, name)).await? else {
        return Err(ApiError::not_found(ri, name));
    };
    let o = decode_kv(ri, &kv)?;
    let uid = object::uid(&o).to_string();
    if let Some(want) = r.get("uid").and_then(Value::as_str)
        && !want.is_empty()
        && want != uid
    {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let mut node = None;
    if kind == "Pod"
        && let Some(node_name) = o.at("/spec/nodeName").and_then(Value::as_str)
    {
        let nri = registry::lookup("", "v1", "nodes").expect("served");
        if let Some(kv) = inner.store.get(&nri.key(None, node_name)).await? {
            let n = decode_kv(nri, &kv)?;
            node = Some((node_name.to_string(), object::uid(&n).to_string()));
        }
    }
    Ok((Some((kind.to_string(), name.to_string(), uid)), node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn access_review_specs_are_validated_as_upstream() {
        let msgs = |spec: Value, kind, ns: &str| -> Vec<String> {
            validate_access_spec(&spec, kind, ns)
                .iter()
                .map(FieldError::message)
                .collect()
        };
        assert_eq!(
            msgs(json!({}), Review::SelfSubject, ""),
            [
                "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ]
        );
        assert_eq!(
            msgs(
                json!({"resourceAttributes": {"verb": "get"}}),
                Review::Subject,
                ""
            ),
            ["spec.user: Invalid value: \"\": at least one of user or group must be specified"]
        );
        assert!(
            msgs(
                json!({"resourceAttributes": {"verb": "get"}, "groups": ["g"]}),
                Review::Subject,
                ""
            )
            .is_empty()
        );
        let both = msgs(
            json!({"resourceAttributes": {}, "nonResourceAttributes": {"path": "/x"}}),
            Review::SelfSubject,
            "",
        );
        assert_eq!(both.len(), 1);
        assert!(both[0].starts_with("spec.nonResourceAttributes: Invalid value: "));
        assert!(both[0].ends_with("cannot be specified in combination with resourceAttributes"));
        assert_eq!(
            msgs(
                json!({"resourceAttributes": {"namespace": "b"}, "user": "u"}),
                Review::Local,
                "a"
            ),
            [
                "spec.resourceAttributes.namespace: Invalid value: \"b\": must match metadata.namespace"
            ]
        );
    }

    #[test]
    fn attributes_come_from_the_spec() {
        let a = attributes_of(
            &json!({"resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "x"}}),
            &Identity::admin(),
        );
        assert!(a.resource_request);
        assert_eq!((a.verb.as_str(), a.resource.as_str()), ("list", "pods"));
        assert_eq!(a.user, "kubernetes-admin");
        let n = attributes_of(
            &json!({"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}),
            &Identity::admin(),
        );
        assert!(!n.resource_request);
        assert_eq!(n.path, "/metrics");
    }

    async fn call(
        api: &crate::ApiServer,
        method: &str,
        uri: &str,
        bearer: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        use tower::ServiceExt;
        let mut req = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json");
        if let Some(t) = bearer {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req.body(axum::body::Body::from(body.to_string())).unwrap();
        let resp = api.router().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test(start_paused = true)]
    async fn reviews_answer_and_store_nothing() {
        let api = crate::testing::memory_server().await;
        let rev = api.store().current_revision();
        let (code, v) = call(
            &api,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            None,
            json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}}),
        )
        .await;
        assert_eq!(code, 201, "{v}");
        assert_eq!(v["status"]["allowed"], json!(true));
        assert_eq!(v["kind"], "SelfSubjectAccessReview");
        assert_eq!(v["metadata"]["creationTimestamp"], Value::Null);
        let (code, v) = call(
            &api,
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            None,
            json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
        )
        .await;
        assert_eq!(code, 422, "{v}");
        assert_eq!(
            v["message"],
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
        );
        let (code, _) = call(
            &api,
            "GET",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            None,
            json!({}),
        )
        .await;
        assert_eq!(code, 405);
        let (code, v) = call(
            &api,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            None,
            json!({}),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(v["status"]["userInfo"]["username"], "kubernetes-admin");
        assert_eq!(api.store().current_revision(), rev, "nothing stored");
    }

    #[tokio::test(start_paused = true)]
    async fn a_requested_token_authenticates_its_service_account_until_it_is_deleted() {
        let api = crate::testing::memory_server().await;
        let (code, _) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            None,
            json!({"metadata": {"name": "robot"}}),
        )
        .await;
        assert_eq!(code, 201);
        let (code, v) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            None,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}, "status": {"expirationTimestamp": null}}),
        )
        .await;
        assert_eq!(code, 201, "{v}");
        assert_eq!(v["spec"]["expirationSeconds"], json!(3600));
        let token = v["status"]["token"].as_str().unwrap().to_string();
        let whoami = |t: String| {
            let api = api.clone();
            async move {
                call(
                    &api,
                    "POST",
                    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    Some(&t),
                    json!({}),
                )
                .await
            }
        };
        let (code, v) = whoami(token.clone()).await;
        assert_eq!(code, 201);
        assert_eq!(
            v["status"]["userInfo"]["username"],
            "system:serviceaccount:default:robot"
        );
        let (code, v) = call(
            &api,
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            None,
            json!({"spec": {"token": token}}),
        )
        .await;
        assert_eq!(code, 201);
        assert_eq!(v["status"]["authenticated"], json!(true));
        // A forged token is 401.
        assert_eq!(whoami(format!("{token}x")).await.0, 401);
        // After an hour the token has expired.
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(whoami(token.clone()).await.0, 401);
        // Too short a duration is refused as upstream.
        let (code, v) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            None,
            json!({"spec": {"expirationSeconds": 60}}),
        )
        .await;
        assert_eq!(code, 422);
        assert_eq!(
            v["message"],
            "TokenRequest.authentication.k8s.io \"robot\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
        );
        // A deleted service account's tokens stop working.
        let (_, v) = call(
            &api,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            None,
            json!({}),
        )
        .await;
        let fresh = v["status"]["token"].as_str().unwrap().to_string();
        assert_eq!(whoami(fresh.clone()).await.0, 201);
        let (code, _) = call(
            &api,
            "DELETE",
            "/api/v1/namespaces/default/serviceaccounts/robot",
            None,
            json!({}),
        )
        .await;
        assert_eq!(code, 200);
        assert_eq!(whoami(fresh).await.0, 401);
    }
}
