//! The authorizer: who may do what. Every request passes [`authorize_request`] (a layer of the
//! Router) and the access reviews (`kubectl auth can-i`) ask [`authorize`], so their answers are
//! the server's real decisions. Modes as upstream's `--authorization-mode`: `AlwaysAllow`; `RBAC`,
//! in which the privileged group `system:masters` is always allowed and everyone else gets what
//! the Roles, ClusterRoles and their bindings in the store grant ([`crate::rbac::Policy`]); and
//! `Node,RBAC` (the default), which asks the Node authorizer about kubelets first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::identity::Identity;
use crate::rbac::{self, Policy};
use crate::registry;
use crate::server::Inner;
use crate::{ApiError, ApiResult};

/// The privileged group: upstream's authorizer chain allows it before asking any authorizer.
pub const SYSTEM_MASTERS: &str = "system:masters";

/// `--authorization-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// Roles and bindings decide (`system:masters` always allowed).
    Rbac,
    /// `Node,RBAC`: kubelets are asked of the Node authorizer first, then RBAC. The default, as
    /// kubeadm and every managed cluster run kube-apiserver.
    #[default]
    NodeRbac,
}

impl AuthorizationMode {
    /// Parses the flag's value (`AlwaysAllow`, `RBAC`, `Node,RBAC`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let modes: Vec<&str> = s.split(',').map(str::trim).collect();
        match modes.as_slice() {
            ["AlwaysAllow"] => Ok(AuthorizationMode::AlwaysAllow),
            ["RBAC"] => Ok(AuthorizationMode::Rbac),
            ["Node", "RBAC"] => Ok(AuthorizationMode::NodeRbac),
            _ => Err(format!(
                "authorization-mode {s:?} is not supported (AlwaysAllow, RBAC or Node,RBAC)"
            )),
        }
    }
}

/// What a request (or an access review) asks to do: upstream's `authorizer.Attributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    /// A resource request (`namespace`, `group`, `resource`, …) or a non-resource one (`path`).
    pub resource_request: bool,
    pub namespace: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub path: String,
    /// The request's `fieldSelector` (the Node authorizer reads `spec.nodeName=<node>`).
    pub field_selector: String,
}

impl Attributes {
    /// A resource request by `user` (in `groups`): `verb` on `group`/`resource`[/`sub`] `name`
    /// in namespace `ns` (empty for cluster scope or a collection).
    pub fn resource(
        user: &str,
        groups: &[String],
        verb: &str,
        (group, resource, sub): (&str, &str, &str),
        ns: &str,
        name: &str,
    ) -> Self {
        Attributes {
            user: user.into(),
            groups: groups.to_vec(),
            verb: verb.into(),
            resource_request: true,
            namespace: ns.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..Default::default()
        }
    }
}

/// An authorizer's answer: upstream's `Decision` with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// An explicit deny (no other authorizer may allow).
    pub denied: bool,
    pub reason: String,
}

impl Decision {
    fn allow(reason: &str) -> Decision {
        Decision {
            allowed: true,
            denied: false,
            reason: reason.into(),
        }
    }
}

/// Upstream's `RequestInfoFactory`: the attributes of an HTTP request. Paths under `/api/v1` and
/// `/apis/<group>/<version>` with at least a resource are resource requests; everything else
/// (discovery, health, `/metrics`, `/openapi`) is a non-resource request whose verb is the
/// lower-cased method.
pub fn request_attributes(
    method: &Method,
    path: &str,
    query: Option<&str>,
    who: &Identity,
) -> Attributes {
    let mut a = Attributes {
        user: who.user.clone(),
        groups: who.groups.clone(),
        path: path.to_string(),
        verb: method.as_str().to_ascii_lowercase(),
        ..Default::default()
    };
    let decoded = crate::server::decode_path(path).unwrap_or_else(|_| path.to_string());
    let segs: Vec<&str> = decoded.trim_matches('/').split('/').collect();
    let (group, mut rest) = match segs.as_slice() {
        ["api", _v, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", g, _v, rest @ ..] if !rest.is_empty() => (*g, rest),
        _ => return a,
    };
    a.resource_request = true;
    a.group = group.to_string();
    if rest.first() == Some(&"namespaces")
        && let Some(ns) = rest.get(1)
    {
        a.namespace = ns.to_string();
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    a.resource = rest.first().map(|s| s.to_string()).unwrap_or_default();
    a.name = rest.get(1).map(|s| s.to_string()).unwrap_or_default();
    a.subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
    let pairs: Vec<(String, String)> = query
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .filter(|(k, _)| !k.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let q = |k: &str| {
        pairs
            .iter()
            .find(|(pk, _)| pk == k)
            .map(|(_, v)| v.as_str())
    };
    let named = !a.name.is_empty();
    a.verb = match *method {
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "",
    }
    .to_string();
    if a.verb.is_empty() {
        a.verb = method.as_str().to_ascii_lowercase();
    }
    if matches!(q("watch"), Some("true" | "1")) && matches!(a.verb.as_str(), "list" | "get") {
        a.verb = "watch".into();
    }
    // A list or watch narrowed to one name by `fieldSelector=metadata.name=x` is about that object
    // (kubectl get pod x -w), as upstream reads it.
    a.field_selector = q("fieldSelector").unwrap_or("").to_string();
    if matches!(a.verb.as_str(), "list" | "watch")
        && !named
        && let Some(fs) = q("fieldSelector")
    {
        for term in fs.split(',') {
            if let Some(v) = term
                .strip_prefix("metadata.name=")
                .or_else(|| term.strip_prefix("metadata.name=="))
            {
                a.name = v.to_string();
            }
        }
    }
    a
}

fn url_pairs(q: &str) -> Vec<(String, String)> {
    let uri: axum::http::Uri = match format!("/?{q}").parse() {
        Ok(u) => u,
        Err(_) => return Vec::new(),
    };
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// The RBAC policy as last built from the stored roles and bindings: a pure function of their
/// bytes, kept while the four RBAC prefixes are quiet (`PrefixCache`), so that the next request
/// after an RBAC write always sees it.
pub(crate) type PolicyCache = crate::prefix_cache::PrefixCache<Policy>;

const KINDS: [(&str, &str); 4] = [
    ("clusterroles", "ClusterRole"),
    ("roles", "Role"),
    ("clusterrolebindings", "ClusterRoleBinding"),
    ("rolebindings", "RoleBinding"),
];

/// Every Role, ClusterRole and binding in the store.
pub(crate) async fn load_policy(inner: &Inner) -> ApiResult<Arc<Policy>> {
    let kinds = KINDS.map(|(plural, kind)| {
        let ri = registry::lookup(rbac::GROUP, "v1", plural).expect("RBAC kinds are served");
        (ri, kind)
    });
    let prefixes = kinds.map(|(ri, _)| ri.key_prefix());
    let derive = |lists: &[Vec<klab_store::KeyValue>]| {
        let mut policy = Policy::default();
        for ((ri, kind), kvs) in kinds.iter().zip(lists) {
            for kv in kvs {
                let obj = crate::crud::decode_kv(ri, kv)?;
                policy.add(kind, &obj);
            }
        }
        Ok(policy)
    };
    inner.policy.get(&*inner.store, &prefixes, derive).await
}

/// Decides one request (or access review): `system:masters` first, then the configured mode.
pub(crate) async fn authorize(inner: &Inner, attrs: &Attributes) -> ApiResult<Decision> {
    if attrs.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        return Ok(Decision::allow(""));
    }
    let mut reasons = Vec::new();
    match inner.config.authorization_mode {
        AuthorizationMode::AlwaysAllow => return Ok(Decision::allow("")),
        AuthorizationMode::Rbac => {}
        AuthorizationMode::NodeRbac => {
            if let Some(node) = crate::node_authz::node_identity(&attrs.user, &attrs.groups) {
                let graph = if crate::node_authz::needs_graph(attrs) {
                    load_node_graph(inner, &node).await?
                } else {
                    Default::default()
                };
                let d = crate::node_authz::authorize(&node, attrs, &graph, node_rules());
                if d.allowed {
                    return Ok(d);
                }
                reasons.push(d.reason);
            }
        }
    }
    let d = load_policy(inner).await?.authorize(attrs);
    if d.allowed {
        return Ok(d);
    }
    reasons.push(d.reason);
    // Upstream's union authorizer joins the reasons it was given.
    reasons.retain(|r| !r.is_empty());
    Ok(Decision {
        allowed: false,
        denied: false,
        reason: reasons.join("\n"),
    })
}

/// The static `system:node` rules the Node authorizer applies to what its graph does not cover.
fn node_rules() -> &'static [rbac::Rule] {
    static RULES: std::sync::OnceLock<Vec<rbac::Rule>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        rbac::bootstrap::objects()
            .into_iter()
            .find(|(p, o)| *p == "clusterroles" && o["metadata"]["name"] == "system:node")
            .map(|(_, o)| rules_in(&o))
            .unwrap_or_default()
    })
}

/// The Node authorizer's graph for `node`, from the stored pods, claims and attachments.
async fn load_node_graph(inner: &Inner, node: &str) -> ApiResult<crate::node_authz::NodeGraph> {
    let mut lists = Vec::new();
    for (group, plural) in [
        ("", "pods"),
        ("", "persistentvolumeclaims"),
        ("storage.k8s.io", "volumeattachments"),
    ] {
        let ri = registry::lookup(group, "v1", plural).expect("served");
        let l = inner
            .store
            .list(&ri.key_prefix(), Default::default())
            .await?;
        let mut objs = Vec::with_capacity(l.kvs.len());
        for kv in &l.kvs {
            objs.push(
                crate::object::decode_stored(&kv.value, kv.mod_revision)
                    .map_err(ApiError::internal)?,
            );
        }
        lists.push(objs);
    }
    Ok(crate::node_authz::NodeGraph::build(
        node, &lists[0], &lists[1], &lists[2],
    ))
}

/// What `identity` may do in `namespace`, as a SelfSubjectRulesReview status (`kubectl auth can-i
/// --list`).
pub(crate) async fn rules_review_status(
    inner: &Inner,
    identity: &Identity,
    namespace: &str,
) -> ApiResult<Value> {
    let everything = json!({
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": false,
    });
    if inner.config.authorization_mode == AuthorizationMode::AlwaysAllow {
        return Ok(everything);
    }
    let policy = load_policy(inner).await?;
    let (rules, mut errors) = policy.rules_for(&identity.user, &identity.groups, namespace);
    // Upstream's Node authorizer cannot enumerate a node's permissions: the union of authorizers
    // marks the list incomplete with its error, before RBAC's.
    if inner.config.authorization_mode == AuthorizationMode::NodeRbac
        && crate::node_authz::node_identity(&identity.user, &identity.groups).is_some()
    {
        errors.insert(
            0,
            "node authorizer does not support user rule resolution".to_string(),
        );
    }
    let (mut resource, mut non_resource) = (Vec::new(), Vec::new());
    for r in rules {
        let mut v = r.to_value();
        if r.non_resource_urls.is_empty() {
            if let Some(m) = v.as_object_mut() {
                m.remove("nonResourceURLs");
            }
            resource.push(v);
        } else {
            non_resource.push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    let mut status = json!({
        "resourceRules": resource,
        "nonResourceRules": non_resource,
        "incomplete": !errors.is_empty(),
    });
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    Ok(status)
}

/// The 403 a denied request gets: upstream's `ForbiddenStatusError`.
pub fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let message = rbac::forbidden_message(attrs, reason);
    let mut details = serde_json::Map::new();
    if !attrs.name.is_empty() {
        details.insert("name".into(), json!(attrs.name));
    }
    if attrs.resource_request && !attrs.group.is_empty() {
        details.insert("group".into(), json!(attrs.group));
    }
    if attrs.resource_request && !attrs.resource.is_empty() {
        details.insert("kind".into(), json!(attrs.resource));
    }
    ApiError::forbidden(message).with_details(Value::Object(details))
}

/// Marks a request made by one of the cluster's own in-process components (`ApiServer::
/// router_as`): a denial of one is a klab bug, so it is logged and counted, never silent.
#[derive(Debug, Clone, Copy)]
pub struct InProcess;

/// The requests of in-process components the authorizer refused: counted by `(user, verb,
/// resource)` for `/metrics`, the first one kept with its instant (a sim run fails on it).
#[derive(Default)]
pub(crate) struct Denials {
    counts: Mutex<BTreeMap<(String, String, String), u64>>,
    first: Mutex<Option<(jiff::Timestamp, String)>>,
}

impl Denials {
    fn record(&self, now: jiff::Timestamp, attrs: &Attributes, message: &str) {
        let resource = if attrs.resource_request {
            let mut r = attrs.resource.clone();
            if !attrs.subresource.is_empty() {
                r = format!("{r}/{}", attrs.subresource);
            }
            if attrs.group.is_empty() {
                r
            } else {
                format!("{r}.{}", attrs.group)
            }
        } else {
            attrs.path.clone()
        };
        tracing::warn!(user = %attrs.user, "in-process component refused: {message}");
        if let Ok(mut c) = self.counts.lock() {
            let n = c
                .entry((attrs.user.clone(), attrs.verb.clone(), resource))
                .or_default();
            *n = n.saturating_add(1);
        }
        if let Ok(mut f) = self.first.lock()
            && f.is_none()
        {
            *f = Some((now, message.to_string()));
        }
    }

    /// The first denial: when, and the Forbidden message the component got.
    pub(crate) fn first(&self) -> Option<(jiff::Timestamp, String)> {
        self.first.lock().ok().and_then(|f| f.clone())
    }

    /// Every refused `(user, verb, resource)` with its count, sorted.
    pub(crate) fn summary(&self) -> Vec<String> {
        self.counts
            .lock()
            .map(|c| {
                c.iter()
                    .map(|((u, v, r), n)| format!("{u} {v} {r} ×{n}"))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `klab_component_authorization_denials_total`, one series per (user, verb, resource).
    pub(crate) fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::from(
            "# HELP klab_component_authorization_denials_total Requests of the cluster's own components refused by the authorizer (a klab bug when not zero).\n\
             # TYPE klab_component_authorization_denials_total counter\n",
        );
        if let Ok(c) = self.counts.lock() {
            for ((user, verb, resource), n) in c.iter() {
                let _ = writeln!(
                    out,
                    "klab_component_authorization_denials_total{{resource=\"{resource}\",user=\"{user}\",verb=\"{verb}\"}} {n}"
                );
            }
        }
        out
    }
}

/// The Router layer that authorizes every request that carries an identity (in-process callers
/// without one act as the cluster admin, as everywhere in the server).
pub(crate) async fn authorize_request(
    State(inner): State<Arc<Inner>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(who) = req.extensions().get::<Identity>().cloned() else {
        return next.run(req).await;
    };
    let attrs = request_attributes(req.method(), req.uri().path(), req.uri().query(), &who);
    match authorize(&inner, &attrs).await {
        Ok(d) if d.allowed => REQUEST_USER.scope(who, next.run(req)).await,
        Ok(d) => {
            let err = forbidden(&attrs, &d.reason);
            if req.extensions().get::<InProcess>().is_some() {
                inner
                    .denials
                    .record(inner.clock.now(), &attrs, &err.message);
            }
            err.into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// Upstream's impersonation filter: `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`
/// and `Impersonate-Extra-<key>` headers, each authorized with the `impersonate` verb for the
/// requesting user (`users`, `groups`, `serviceaccounts`, `uids`, `userextras/<key>`); the request
/// then proceeds as the impersonated user, who is `system:authenticated`.
pub(crate) async fn impersonate(
    State(inner): State<Arc<Inner>>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = req.headers();
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let uid = headers
        .get("impersonate-uid")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut extras: Vec<(String, String)> = Vec::new();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = v.to_str()
        {
            extras.push((key.to_string(), v.to_string()));
        }
    }
    if user.is_none() && groups.is_empty() && uid.is_none() && extras.is_empty() {
        return next.run(req).await;
    }
    let Some(who) = req.extensions().get::<Identity>().cloned() else {
        return next.run(req).await;
    };
    let Some(user) = user else {
        return ApiError::internal(format!(
            "requested impersonation of groups {groups:?} without impersonating a user"
        ))
        .into_response();
    };
    let ask = |resource: &str, sub: &str, group: &str, ns: &str, name: &str| {
        Attributes::resource(
            &who.user,
            &who.groups,
            "impersonate",
            (group, resource, sub),
            ns,
            name,
        )
    };
    let mut checks = Vec::new();
    let mut new_groups = groups.clone();
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, name)) = rest.split_once(':')
    {
        checks.push(ask("serviceaccounts", "", "", ns, name));
        if groups.is_empty() {
            new_groups.push("system:serviceaccounts".into());
            new_groups.push(format!("system:serviceaccounts:{ns}"));
        }
    } else {
        checks.push(ask("users", "", "", "", &user));
    }
    for g in &groups {
        checks.push(ask("groups", "", "", "", g));
    }
    if let Some(u) = &uid {
        checks.push(ask("uids", "", "authentication.k8s.io", "", u));
    }
    for (k, v) in &extras {
        checks.push(ask("userextras", k, "authentication.k8s.io", "", v));
    }
    for a in checks {
        match authorize(&inner, &a).await {
            Ok(d) if d.allowed => {}
            Ok(d) => return forbidden(&a, &d.reason).into_response(),
            Err(e) => return e.into_response(),
        }
    }
    let (auth, unauth) = ("system:authenticated", "system:unauthenticated");
    if user == "system:anonymous" {
        if !new_groups.iter().any(|g| g == unauth) {
            new_groups.push(unauth.into());
        }
    } else if !new_groups.iter().any(|g| g == auth) {
        new_groups.push(auth.into());
    }
    let impersonated = Identity {
        user,
        groups: new_groups,
    };
    if let Some(slot) = req.extensions().get::<crate::audit::ImpersonatedSlot>()
        && let Ok(mut s) = slot.0.lock()
    {
        *s = Some(impersonated.clone());
    }
    req.extensions_mut().insert(impersonated);
    next.run(req).await
}

tokio::task_local! {
    /// The user of the request being served, for the checks that depend on who writes (RBAC's
    /// escalation check). Unset for the server's own writes (bootstrap objects).
    static REQUEST_USER: Identity;
}

/// The NodeRestriction admission plugin on a write by a kubelet (enabled with `Node,RBAC`, as
/// upstream clusters enable both): `obj` is the proposed object, `old` the stored one.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn admit_node_write(
    inner: &Inner,
    ri: &crate::registry::ResourceInfo,
    subresource: &str,
    op: crate::node_restriction::Op,
    namespace: &str,
    name: &str,
    obj: Option<&Value>,
    old: Option<&Value>,
) -> ApiResult<()> {
    if inner.config.authorization_mode != AuthorizationMode::NodeRbac {
        return Ok(());
    }
    let Ok(who) = REQUEST_USER.try_with(Identity::clone) else {
        return Ok(());
    };
    let Some(node) = crate::node_authz::node_identity(&who.user, &who.groups) else {
        return Ok(());
    };
    let mut node_uid = None;
    if ri.group.is_empty() && ri.plural == "pods" && op == crate::node_restriction::Op::Create {
        let nodes = registry::lookup("", "v1", "nodes").expect("served");
        if let Some(kv) = inner.store.get(&nodes.key(None, &node)).await? {
            let n = crate::object::decode_stored(&kv.value, kv.mod_revision)
                .map_err(ApiError::internal)?;
            node_uid = Some(crate::object::uid(&n).to_string());
        }
    }
    let r = crate::node_restriction::Request {
        op,
        group: ri.group,
        resource: ri.plural,
        subresource,
        namespace,
        name,
        object: obj,
        old,
        node_uid: node_uid.as_deref(),
    };
    crate::node_restriction::admit(&node, &r).map_err(|reason| {
        // `admission.NewForbidden`: the resource, the object's name, the reason.
        let shown = if name.is_empty() {
            obj.map(crate::object::name).unwrap_or("")
        } else {
            name
        };
        let what = if ri.group.is_empty() {
            ri.plural.to_string()
        } else {
            format!("{}.{}", ri.plural, ri.group)
        };
        let msg = if shown.is_empty() {
            format!("{what} is forbidden: {reason}")
        } else {
            format!("{what} {shown:?} is forbidden: {reason}")
        };
        ApiError::forbidden(msg)
            .with_details(json!({"name": shown, "group": ri.group, "kind": ri.plural}))
    })
}

/// Everything: what only a cluster-admin holds (upstream's `fullAuthority`), required to create
/// an aggregated ClusterRole.
fn full_authority() -> Vec<rbac::Rule> {
    let star = || vec!["*".to_string()];
    vec![
        rbac::Rule {
            verbs: star(),
            api_groups: star(),
            resources: star(),
            ..Default::default()
        },
        rbac::Rule {
            verbs: star(),
            non_resource_urls: star(),
            ..Default::default()
        },
    ]
}

fn rules_in(obj: &Value) -> Vec<rbac::Rule> {
    obj.get("rules")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(rbac::Rule::from_value).collect())
        .unwrap_or_default()
}

/// RBAC's escalation prevention on a write of a Role, ClusterRole or binding (`old` is the stored
/// object on update): a user may only grant what they hold, unless they may `escalate` (roles)
/// or `bind` (bindings) the role, or are in `system:masters`. Upstream's texts.
pub(crate) async fn check_escalation(
    inner: &Inner,
    ri: &crate::registry::ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> ApiResult<()> {
    if ri.group != rbac::GROUP || inner.config.authorization_mode == AuthorizationMode::AlwaysAllow
    {
        return Ok(());
    }
    let Ok(who) = REQUEST_USER.try_with(Identity::clone) else {
        return Ok(());
    };
    if who.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        return Ok(());
    }
    let name = crate::object::name(obj).to_string();
    let namespace = crate::object::namespace(obj).unwrap_or("").to_string();
    let forbidden_with = |msg: String| {
        ApiError::forbidden(format!(
            "{} {name:?} is forbidden: {msg}",
            ri.qualified_plural()
        ))
        .with_details(json!({"name": name, "group": ri.group, "kind": ri.plural}))
    };
    let ask = |verb: &str, resource: &str, target: &str| Attributes {
        user: who.user.clone(),
        groups: who.groups.clone(),
        verb: verb.into(),
        resource_request: true,
        namespace: namespace.clone(),
        group: rbac::GROUP.into(),
        resource: resource.into(),
        name: target.into(),
        ..Default::default()
    };
    let policy = load_policy(inner).await?;
    let (owner, errors) = policy.rules_for(&who.user, &who.groups, &namespace);
    let requested = match ri.kind {
        "Role" | "ClusterRole" => {
            if old.is_some_and(|o| o.get("rules") == obj.get("rules"))
                && old.is_some_and(|o| o.get("aggregationRule") == obj.get("aggregationRule"))
            {
                return Ok(());
            }
            if authorize(inner, &ask("escalate", ri.plural, &name))
                .await?
                .allowed
            {
                return Ok(());
            }
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null())
                && rbac::escalation_error(&who.user, &who.groups, &owner, &full_authority(), &[])
                    .is_some()
            {
                return Err(forbidden_with(
                    "must have cluster-admin privileges to use the aggregationRule".into(),
                ));
            }
            rules_in(obj)
        }
        _ => {
            if old.is_some_and(|o| {
                o.get("roleRef") == obj.get("roleRef") && o.get("subjects") == obj.get("subjects")
            }) {
                return Ok(());
            }
            let b = rbac::Binding::from_value(obj);
            let resource = if b.role_kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if authorize(inner, &ask("bind", resource, &b.role_name))
                .await?
                .allowed
            {
                return Ok(());
            }
            let found = match b.role_kind.as_str() {
                "Role" => policy.roles.get(&(namespace.clone(), b.role_name.clone())),
                _ => policy.cluster_roles.get(&b.role_name),
            };
            match found {
                Some(rules) => rules.clone(),
                // The role lister's NotFound, as upstream returns it.
                None => {
                    let what = if b.role_kind == "Role" {
                        "role"
                    } else {
                        "clusterrole"
                    };
                    return Err(ApiError::new(
                        404,
                        "NotFound",
                        format!(
                            "{what}.rbac.authorization.k8s.io {:?} not found",
                            b.role_name
                        ),
                    )
                    .with_details(
                        json!({"name": b.role_name, "group": rbac::GROUP, "kind": what}),
                    ));
                }
            }
        }
    };
    match rbac::escalation_error(&who.user, &who.groups, &owner, &requested, &errors) {
        None => Ok(()),
        Some(msg) => Err(forbidden_with(msg)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, uri: &str) -> Attributes {
        let (path, query) = match uri.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (uri, None),
        };
        request_attributes(&method, path, query, &Identity::new("u", &["g"]))
    }

    #[test]
    fn request_info_table() {
        // (method, uri, verb, namespace, group, resource, subresource, name)
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/d/pods",
                "list",
                "d",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/d/pods?watch=true",
                "watch",
                "d",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/d/pods/web",
                "get",
                "d",
                "",
                "pods",
                "",
                "web",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/d/pods/web/log",
                "get",
                "d",
                "",
                "pods",
                "log",
                "web",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/d/pods/web/eviction",
                "create",
                "d",
                "",
                "pods",
                "eviction",
                "web",
            ),
            (
                Method::PUT,
                "/api/v1/nodes/n1/status",
                "update",
                "",
                "",
                "nodes",
                "status",
                "n1",
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/d/deployments/w/scale",
                "patch",
                "d",
                "apps",
                "deployments",
                "scale",
                "w",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/d/pods",
                "deletecollection",
                "d",
                "",
                "pods",
                "",
                "",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/d/pods/p",
                "delete",
                "d",
                "",
                "pods",
                "",
                "p",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kube-system",
                "get",
                "kube-system",
                "",
                "namespaces",
                "",
                "kube-system",
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/x/finalize",
                "update",
                "x",
                "",
                "namespaces",
                "finalize",
                "x",
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                "list",
                "",
                "",
                "namespaces",
                "",
                "",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/d/pods?fieldSelector=metadata.name%3Dweb&watch=1",
                "watch",
                "d",
                "",
                "pods",
                "",
                "web",
            ),
            (
                Method::GET,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
                "get",
                "kube-node-lease",
                "coordination.k8s.io",
                "leases",
                "",
                "n1",
            ),
        ];
        for (m, uri, verb, ns, g, r, sub, name) in cases {
            let a = attrs(m, uri);
            assert!(a.resource_request, "{uri}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.namespace.as_str(),
                    a.group.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                    a.name.as_str()
                ),
                (verb, ns, g, r, sub, name),
                "{uri}"
            );
        }
        for (m, uri, verb) in [
            (Method::GET, "/api", "get"),
            (Method::GET, "/api/v1", "get"),
            (Method::GET, "/apis/apps/v1", "get"),
            (Method::GET, "/healthz", "get"),
            (Method::POST, "/metrics", "post"),
            (Method::GET, "/openapi/v3", "get"),
        ] {
            let a = attrs(m, uri);
            assert!(!a.resource_request, "{uri}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), (verb, uri));
        }
    }

    #[test]
    fn modes_parse_as_the_flag() {
        assert_eq!(
            AuthorizationMode::parse("AlwaysAllow"),
            Ok(AuthorizationMode::AlwaysAllow)
        );
        assert_eq!(
            AuthorizationMode::parse("RBAC"),
            Ok(AuthorizationMode::Rbac)
        );
        assert_eq!(
            AuthorizationMode::parse("Node,RBAC"),
            Ok(AuthorizationMode::NodeRbac)
        );
        assert!(AuthorizationMode::parse("ABAC").is_err());
    }

    #[test]
    fn forbidden_status_has_upstream_details() {
        let a = attrs(Method::GET, "/apis/apps/v1/namespaces/d/deployments/w");
        let e = forbidden(&a, "");
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(
            e.message,
            r#"deployments.apps "w" is forbidden: User "u" cannot get resource "deployments" in API group "apps" in the namespace "d""#
        );
        assert_eq!(
            e.details,
            Some(json!({"name": "w", "group": "apps", "kind": "deployments"}))
        );
    }
}
