//! Auditing as upstream's `--audit-log-path` and `--audit-policy-file`: an audit.k8s.io/v1
//! `Policy` decides each request's level (the first matching rule; no rule, no event) and the
//! log receives upstream's audit.k8s.io/v1 `Event`s as JSON lines — RequestReceived (unless
//! omitted) and ResponseComplete (ResponseStarted for a watch, whose stream outlives the
//! request) — with the authenticated and impersonated users, the object reference, the response
//! status and, per level, the request and response bodies. Timestamps are the cluster clock's.
//!
//! `Policy::decide` is pure (table tests below); the Router layer [`audit_request`] is the shell.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::authz::{Attributes, request_attributes};
use crate::identity::Identity;
use crate::server::Inner;

/// How much of a request an event records, in upstream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

/// The stages an event can be emitted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

/// `GroupResources` of a policy rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// One `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
}

/// An audit.k8s.io/v1 `Policy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

impl Policy {
    /// Parses a policy file's YAML (or JSON), refusing what upstream refuses.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let p: Policy = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if p.kind != "Policy" {
            return Err(format!("kind {:?} is not Policy", p.kind));
        }
        if !matches!(p.api_version.as_str(), "audit.k8s.io/v1") {
            return Err(format!(
                "apiVersion {:?} is not supported (audit.k8s.io/v1)",
                p.api_version
            ));
        }
        for (i, r) in p.rules.iter().enumerate() {
            if !r.non_resource_urls.is_empty()
                && (!r.resources.is_empty() || !r.namespaces.is_empty())
            {
                return Err(format!(
                    "rules[{i}].nonResourceURLs: Invalid value: {:?}: rules cannot apply to both regular resources and non-resource URLs",
                    r.non_resource_urls
                ));
            }
        }
        Ok(p)
    }

    /// The level of a request and the stages omitted for it: the first matching rule's, the
    /// policy's omitted stages joined with the rule's. No matching rule: `None`.
    pub fn decide(&self, a: &Attributes) -> (Level, Vec<Stage>) {
        for r in &self.rules {
            if rule_matches(r, a) {
                let mut omit = self.omit_stages.clone();
                for s in &r.omit_stages {
                    if !omit.contains(s) {
                        omit.push(*s);
                    }
                }
                return (r.level, omit);
            }
        }
        (Level::None, self.omit_stages.clone())
    }
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == v)
}

/// Upstream's `ruleMatches`: users, groups and verbs (empty lists match everything), then the
/// resource or the non-resource URL part.
fn rule_matches(r: &Rule, a: &Attributes) -> bool {
    if !r.users.is_empty() && !has(&r.users, &a.user) {
        return false;
    }
    if !r.user_groups.is_empty() && !a.groups.iter().any(|g| has(&r.user_groups, g)) {
        return false;
    }
    if !r.verbs.is_empty() && !has(&r.verbs, &a.verb) {
        return false;
    }
    if a.resource_request {
        if !r.non_resource_urls.is_empty() {
            return false;
        }
        if !r.namespaces.is_empty() && !has(&r.namespaces, &a.namespace) {
            return false;
        }
        r.resources.is_empty() || r.resources.iter().any(|gr| resource_matches(gr, a))
    } else {
        if !r.resources.is_empty() || !r.namespaces.is_empty() {
            return false;
        }
        r.non_resource_urls.is_empty()
            || r.non_resource_urls
                .iter()
                .any(|u| match u.strip_suffix('*') {
                    Some(prefix) => a.path.starts_with(prefix),
                    None => *u == a.path,
                })
    }
}

/// Upstream's `ruleMatchesResource`: `pods`, `pods/log`, `*`, `*/status`, `pods/*`, optionally
/// narrowed to resource names.
fn resource_matches(gr: &GroupResources, a: &Attributes) -> bool {
    if gr.group != a.group {
        return false;
    }
    if gr.resources.is_empty() {
        return true;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    if !gr.resource_names.is_empty() && !has(&gr.resource_names, &a.name) {
        return false;
    }
    gr.resources.iter().any(|res| {
        *res == combined
            || res == "*"
            || (!a.subresource.is_empty() && res.strip_prefix("*/") == Some(&a.subresource))
            || res.strip_suffix("/*") == Some(a.resource.as_str())
    })
}

/// `--audit-log-path` with its policy.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    pub log_path: PathBuf,
    pub policy: Policy,
}

/// The open log and its policy.
pub(crate) struct AuditLog {
    policy: Policy,
    out: Mutex<std::fs::File>,
    /// A side stream of the cluster's RNG for audit IDs: audited requests never move the draws
    /// objects take (`Audit-ID` sent by the client is used as is, as upstream does).
    rng: klab_api::rng::DetRng,
}

impl AuditLog {
    pub(crate) fn open(cfg: &AuditConfig, rng: klab_api::rng::DetRng) -> std::io::Result<Self> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.log_path)?;
        Ok(AuditLog {
            policy: cfg.policy.clone(),
            out: Mutex::new(out),
            rng,
        })
    }

    fn write(&self, event: &Value) {
        let mut line = event.to_string();
        line.push('\n');
        if let Ok(mut f) = self.out.lock()
            && let Err(e) = f.write_all(line.as_bytes())
        {
            tracing::warn!("writing the audit log: {e}");
        }
    }
}

/// The impersonated user of a request, filled by the impersonation layer for the audit event.
#[derive(Clone, Default)]
pub(crate) struct ImpersonatedSlot(pub Arc<Mutex<Option<Identity>>>);

/// The user as an audit event's `UserInfo`.
fn user_info(id: &Identity) -> Value {
    json!({"username": id.user, "groups": id.groups})
}

/// The event fields common to every stage (upstream's `ObjectRef` for resource requests).
pub fn event_base(
    audit_id: &str,
    level: Level,
    attrs: &Attributes,
    request_uri: &str,
    user: &Identity,
    source_ips: &[String],
    user_agent: Option<&str>,
) -> Value {
    let level_name = match level {
        Level::None => "None",
        Level::Metadata => "Metadata",
        Level::Request => "Request",
        Level::RequestResponse => "RequestResponse",
    };
    let mut e = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": level_name,
        "auditID": audit_id,
        "requestURI": request_uri,
        "verb": attrs.verb,
        "user": user_info(user),
        "sourceIPs": source_ips,
    });
    if let Some(ua) = user_agent {
        e["userAgent"] = json!(ua);
    }
    if attrs.resource_request {
        let mut r = serde_json::Map::new();
        r.insert("resource".into(), json!(attrs.resource));
        if !attrs.namespace.is_empty() {
            r.insert("namespace".into(), json!(attrs.namespace));
        }
        if !attrs.name.is_empty() {
            r.insert("name".into(), json!(attrs.name));
        }
        if !attrs.group.is_empty() {
            r.insert("apiGroup".into(), json!(attrs.group));
        }
        if let Some(v) = api_version_of(request_uri) {
            r.insert("apiVersion".into(), json!(v));
        }
        if !attrs.subresource.is_empty() {
            r.insert("subresource".into(), json!(attrs.subresource));
        }
        e["objectRef"] = Value::Object(r);
    }
    e
}

/// The version segment of a resource path (`/api/v1/…` → `v1`, `/apis/apps/v1/…` → `v1`).
fn api_version_of(uri: &str) -> Option<&str> {
    let path = uri.split('?').next().unwrap_or("");
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api", v, ..] => Some(v),
        ["apis", _g, v, ..] => Some(v),
        _ => None,
    }
}

/// Upstream's audit timestamps: RFC 3339 with microseconds.
fn micro(t: jiff::Timestamp) -> String {
    let t = jiff::Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t);
    format!("{:.6}", t)
}

/// Bodies larger than this are not copied into events (the event says so by omitting them).
const MAX_AUDITED_BODY: usize = 1 << 20;

/// The Router layer: decides the level after authentication, logs RequestReceived, runs the
/// request and logs its completion. Requests without an identity (in-process callers acting
/// as the admin) are audited as the admin.
pub(crate) async fn audit_request(
    State(inner): State<Arc<Inner>>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(log) = inner.audit.as_ref() else {
        return next.run(req).await;
    };
    let who = req
        .extensions()
        .get::<Identity>()
        .cloned()
        .unwrap_or_else(Identity::admin);
    let attrs = request_attributes(req.method(), req.uri().path(), req.uri().query(), &who);
    let (level, omit) = log.policy.decide(&attrs);
    if level == Level::None {
        return next.run(req).await;
    }
    let received = inner.clock.now();
    let audit_id = match req
        .headers()
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    {
        Some(id) => id.to_string(),
        None => log.rng.uid(),
    };
    // Upstream's requestURI is the path and query (HTTP/2 requests carry an absolute URI).
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| req.uri().path().to_string());
    let source_ips: Vec<String> = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| vec![c.0.ip().to_string()])
        .unwrap_or_else(|| vec!["127.0.0.1".to_string()]);
    let user_agent = req
        .headers()
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let slot = ImpersonatedSlot::default();
    req.extensions_mut().insert(slot.clone());
    let base = event_base(
        &audit_id,
        level,
        &attrs,
        &uri,
        &who,
        &source_ips,
        user_agent.as_deref(),
    );
    let mut request_object = None;
    if level >= Level::Request && !matches!(attrs.verb.as_str(), "get" | "list" | "watch") {
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, inner.config.max_request_bytes).await {
            Ok(b) => b,
            Err(_) => {
                return crate::ApiError::new(
                    413,
                    "RequestEntityTooLarge",
                    "Request entity too large",
                )
                .into_response();
            }
        };
        if bytes.len() <= MAX_AUDITED_BODY {
            request_object = serde_json::from_slice::<Value>(&bytes).ok();
        }
        req = Request::from_parts(parts, Body::from(bytes));
    }
    if !omit.contains(&Stage::RequestReceived) {
        let mut e = base.clone();
        e["stage"] = json!(Stage::RequestReceived.as_str());
        e["requestReceivedTimestamp"] = json!(micro(received));
        e["stageTimestamp"] = json!(micro(received));
        if let Some(o) = &request_object {
            e["requestObject"] = o.clone();
        }
        log.write(&e);
    }
    let watch = attrs.verb == "watch";
    let (method, path) = (req.method().clone(), req.uri().clone());
    let resp = match klab_api::supervise::catch_panic(next.run(req)).await {
        Ok(resp) => resp,
        Err(p) => {
            // Upstream's audit filter records a Panic stage with the panic's value, then the
            // panic recovery answers (here: the same 500 as the outer layer's).
            if !omit.contains(&Stage::Panic) {
                let mut e = base;
                e["stage"] = json!(Stage::Panic.as_str());
                e["requestReceivedTimestamp"] = json!(micro(received));
                e["stageTimestamp"] = json!(micro(inner.clock.now()));
                e["responseStatus"] = json!({
                    "metadata": {},
                    "status": "Failure",
                    "message": format!("APIServer panic'd: {}", p.message),
                    "reason": "InternalError",
                    "code": 500,
                });
                log.write(&e);
            }
            return crate::server::panicked(&method, &path, p);
        }
    };
    let stage = if watch {
        Stage::ResponseStarted
    } else {
        Stage::ResponseComplete
    };
    let code = resp.status().as_u16();
    let (parts, body) = resp.into_parts();
    let mut response_body = None;
    let json_response = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    // A failed request's Status is always recorded (upstream's responseStatus carries it);
    // successful bodies only at RequestResponse.
    let want_body = !watch && json_response && (level == Level::RequestResponse || code >= 400);
    let body = if want_body {
        match axum::body::to_bytes(body, usize::MAX).await {
            Ok(b) => {
                if b.len() <= MAX_AUDITED_BODY {
                    response_body = serde_json::from_slice::<Value>(&b).ok();
                }
                Body::from(b)
            }
            Err(_) => Body::empty(),
        }
    } else {
        body
    };
    if !omit.contains(&stage) {
        let mut e = base;
        e["stage"] = json!(stage.as_str());
        e["requestReceivedTimestamp"] = json!(micro(received));
        e["stageTimestamp"] = json!(micro(inner.clock.now()));
        if let Ok(guard) = slot.0.lock()
            && let Some(imp) = guard.as_ref()
        {
            e["impersonatedUser"] = user_info(imp);
        }
        let mut status = json!({"metadata": {}, "code": code});
        if code >= 400
            && let Some(b) = &response_body
        {
            for k in ["status", "message", "reason", "details"] {
                if let Some(v) = b.get(k) {
                    status[k] = v.clone();
                }
            }
        }
        e["responseStatus"] = status;
        if let Some(o) = request_object {
            e["requestObject"] = o;
        }
        if level == Level::RequestResponse
            && let Some(b) = response_body
        {
            e["responseObject"] = b;
        }
        e["annotations"] = json!({
            "authorization.k8s.io/decision": if code == 403 { "forbid" } else { "allow" },
        });
        log.write(&e);
    }
    let mut resp = Response::from_parts(parts, body);
    if let Ok(v) = axum::http::HeaderValue::from_str(&audit_id) {
        resp.headers_mut().insert("audit-id", v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(
        user: &str,
        groups: &[&str],
        verb: &str,
        res: (&str, &str, &str),
        ns: &str,
    ) -> Attributes {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        Attributes::resource(user, &groups, verb, res, ns, "x")
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:kube-scheduler"]
  - level: None
    userGroups: ["system:nodes"]
    verbs: ["get"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["pods/log", "nodes/*"]
  - level: Request
    verbs: ["delete"]
    namespaces: ["prod"]
    omitStages: [ResponseComplete]
  - level: Metadata
    resources:
      - group: apps
        resources: ["*/scale"]
      - group: ""
        resources: ["secrets"]
        resourceNames: ["x"]
  - level: None
    nonResourceURLs: ["/healthz*"]
  - level: Metadata
    omitStages: [ResponseStarted]
"#;

    #[test]
    fn first_matching_rule_decides_the_level_and_stages() {
        let p = Policy::parse(POLICY).unwrap();
        use Level::*;
        use Stage::*;
        let cases = [
            (
                attrs(
                    "system:kube-scheduler",
                    &[],
                    "create",
                    ("", "pods", ""),
                    "a",
                ),
                None,
                vec![RequestReceived],
            ),
            (
                attrs(
                    "system:node:n1",
                    &["system:nodes"],
                    "get",
                    ("", "pods", ""),
                    "a",
                ),
                None,
                vec![RequestReceived],
            ),
            (
                attrs(
                    "system:node:n1",
                    &["system:nodes"],
                    "patch",
                    ("", "pods", "status"),
                    "a",
                ),
                Metadata,
                vec![RequestReceived, ResponseStarted],
            ),
            (
                attrs("bob", &[], "get", ("", "pods", "log"), "a"),
                RequestResponse,
                vec![RequestReceived],
            ),
            (
                attrs("bob", &[], "patch", ("", "nodes", "status"), ""),
                RequestResponse,
                vec![RequestReceived],
            ),
            // `nodes/*` matches the resource itself too, as upstream's check reads.
            (
                attrs("bob", &[], "patch", ("", "nodes", ""), ""),
                RequestResponse,
                vec![RequestReceived],
            ),
            (
                attrs("bob", &[], "patch", ("", "pods", ""), ""),
                Metadata,
                vec![RequestReceived, ResponseStarted],
            ),
            (
                attrs("bob", &[], "delete", ("", "pods", ""), "prod"),
                Request,
                vec![RequestReceived, ResponseComplete],
            ),
            (
                attrs("bob", &[], "delete", ("", "pods", ""), "dev"),
                Metadata,
                vec![RequestReceived, ResponseStarted],
            ),
            (
                attrs("bob", &[], "update", ("apps", "deployments", "scale"), "a"),
                Metadata,
                vec![RequestReceived],
            ),
            (
                attrs("bob", &[], "get", ("", "secrets", ""), "a"),
                Metadata,
                vec![RequestReceived],
            ),
        ];
        for (a, level, omit) in cases {
            assert_eq!(p.decide(&a), (level, omit), "{a:?}");
        }
        let health = Attributes {
            user: "bob".into(),
            verb: "get".into(),
            path: "/healthz/etcd".into(),
            ..Default::default()
        };
        assert_eq!(p.decide(&health).0, None);
        let version = Attributes {
            path: "/version".into(),
            ..health
        };
        assert_eq!(p.decide(&version).0, Metadata);
        // No rules: nothing is audited.
        let empty = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\n").unwrap();
        assert_eq!(
            empty
                .decide(&attrs("bob", &[], "get", ("", "pods", ""), "a"))
                .0,
            None
        );
    }

    #[test]
    fn bad_policies_are_refused_with_a_reason() {
        for (text, want) in [
            (
                "apiVersion: audit.k8s.io/v1\nkind: Pod\n",
                "kind \"Pod\" is not Policy",
            ),
            (
                "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\n",
                "is not supported",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n",
                "Loud",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, colour: red}]\n",
                "colour",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/x], namespaces: [a]}]\n",
                "rules cannot apply to both regular resources and non-resource URLs",
            ),
            ("[", ""),
        ] {
            let e = Policy::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn events_carry_upstream_fields() {
        let a = attrs(
            "kubernetes-admin",
            &["system:masters"],
            "patch",
            ("", "nodes", ""),
            "",
        );
        let e = event_base(
            "id-1",
            Level::Metadata,
            &a,
            "/api/v1/nodes/x?fieldManager=kubectl-taint",
            &Identity::admin(),
            &["10.0.0.1".into()],
            Some("kubectl/v1.33.0"),
        );
        assert_eq!(
            e,
            json!({"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
                "auditID": "id-1", "requestURI": "/api/v1/nodes/x?fieldManager=kubectl-taint",
                "verb": "patch",
                "user": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
                "sourceIPs": ["10.0.0.1"], "userAgent": "kubectl/v1.33.0",
                "objectRef": {"resource": "nodes", "name": "x", "apiVersion": "v1"}})
        );
        assert_eq!(
            micro(jiff::Timestamp::from_second(1_700_000_000).unwrap()),
            "2023-11-14T22:13:20.000000Z"
        );
    }
}
