//! RBAC (rbac.authorization.k8s.io/v1) as upstream's authorizer evaluates it: rules matched
//! against request attributes, bindings matched against the user, the escalation check on role
//! and binding writes, and the objects' defaults and validation. Everything here is pure: the
//! caller loads a [`Policy`] snapshot from the store and asks it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::authz::{Attributes, Decision};
use crate::object::Pointer;
use crate::validation::FieldError;

/// The API group of the RBAC kinds (also the `apiGroup` of role references and of User and Group
/// subjects).
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// One `PolicyRule`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

impl Rule {
    pub fn from_value(v: &Value) -> Rule {
        Rule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// The rule as a `PolicyRule` object (empty lists omitted, as Go's omitempty).
    pub fn to_value(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in [
            ("verbs", &self.verbs),
            ("apiGroups", &self.api_groups),
            ("resources", &self.resources),
            ("resourceNames", &self.resource_names),
            ("nonResourceURLs", &self.non_resource_urls),
        ] {
            if !v.is_empty() || k == "verbs" {
                m.insert(
                    k.into(),
                    v.iter().map(|s| Value::from(s.as_str())).collect(),
                );
            }
        }
        Value::Object(m)
    }

    /// Upstream's `CompactString`: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
    pub fn compact_string(&self) -> String {
        let q = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(" "))
        };
        let mut parts = Vec::new();
        if !self.api_groups.is_empty() {
            parts.push(format!("APIGroups:{}", q(&self.api_groups)));
        }
        if !self.resources.is_empty() {
            parts.push(format!("Resources:{}", q(&self.resources)));
        }
        if !self.non_resource_urls.is_empty() {
            parts.push(format!("NonResourceURLs:{}", q(&self.non_resource_urls)));
        }
        if !self.resource_names.is_empty() {
            parts.push(format!("ResourceNames:{}", q(&self.resource_names)));
        }
        if !self.verbs.is_empty() {
            parts.push(format!("Verbs:{}", q(&self.verbs)));
        }
        format!("{{{}}}", parts.join(", "))
    }
}

fn has(set: &[String], s: &str) -> bool {
    set.iter().any(|x| x == s)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

/// Upstream's `RuleAllows`: verb, group, resource (with `*/subresource`), resource name; or verb
/// and non-resource URL (a trailing `*` is a prefix match).
pub fn rule_allows(attrs: &Attributes, rule: &Rule) -> bool {
    let verb = has(&rule.verbs, "*") || has(&rule.verbs, &attrs.verb);
    if !verb {
        return false;
    }
    if !attrs.resource_request {
        return rule
            .non_resource_urls
            .iter()
            .any(|u| url_covers(u, &attrs.path));
    }
    let group = has(&rule.api_groups, "*") || has(&rule.api_groups, &attrs.group);
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource = rule.resources.iter().any(|r| {
        r == "*"
            || *r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    let name = rule.resource_names.is_empty() || has(&rule.resource_names, &attrs.name);
    group && resource && name
}

fn url_covers(owner: &str, requested: &str) -> bool {
    owner == "*"
        || owner == requested
        || owner
            .strip_suffix('*')
            .is_some_and(|p| requested.starts_with(p))
}

/// One subject of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subject {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (namespace empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding {
    pub name: String,
    pub namespace: String,
    pub role_kind: String,
    pub role_name: String,
    pub subjects: Vec<Subject>,
}

impl Binding {
    pub fn from_value(v: &Value) -> Binding {
        let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
        let role = v.get("roleRef").cloned().unwrap_or(Value::Null);
        Binding {
            name: str_of(&meta, "name").into(),
            namespace: str_of(&meta, "namespace").into(),
            role_kind: str_of(&role, "kind").into(),
            role_name: str_of(&role, "name").into(),
            subjects: v
                .get("subjects")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|s| Subject {
                            kind: str_of(s, "kind").into(),
                            name: str_of(s, "name").into(),
                            namespace: str_of(s, "namespace").into(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Upstream's `appliesToUser`: a ServiceAccount subject without a namespace means the binding's.
fn applies(subject: &Subject, user: &str, groups: &[String], binding_ns: &str) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user,
        "Group" => has(groups, &subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                binding_ns
            } else {
                &subject.namespace
            };
            // `system:serviceaccount:<ns>:<name>`, compared without building it.
            !ns.is_empty()
                && user
                    .strip_prefix("system:serviceaccount:")
                    .and_then(|rest| rest.strip_prefix(ns))
                    .and_then(|rest| rest.strip_prefix(':'))
                    == Some(subject.name.as_str())
        }
        _ => false,
    }
}

/// Upstream's `describeSubject`, for allow reasons.
fn describe_subject(s: &Subject, binding_ns: &str) -> String {
    match s.kind.as_str() {
        "ServiceAccount" => {
            let ns = if s.namespace.is_empty() {
                binding_ns
            } else {
                &s.namespace
            };
            format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
        }
        _ => format!("{} {:?}", s.kind, s.name),
    }
}

/// A snapshot of every Role, ClusterRole and binding, as the authorizer's informers hold them.
/// Bindings are visited in name order, cluster-wide ones first, as upstream's lister returns
/// them.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub cluster_roles: BTreeMap<String, Vec<Rule>>,
    /// Keyed by (namespace, name).
    pub roles: BTreeMap<(String, String), Vec<Rule>>,
    pub cluster_role_bindings: Vec<Binding>,
    /// Keyed by namespace.
    pub role_bindings: BTreeMap<String, Vec<Binding>>,
}

/// What one visit found: the rules a binding grants, or why they could not be resolved.
enum Visit<'a> {
    Rules(&'a Binding, &'a Subject, &'a [Rule]),
    Error(String),
}

fn rules_of_object(v: &Value) -> Vec<Rule> {
    v.get("rules")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Rule::from_value).collect())
        .unwrap_or_default()
}

impl Policy {
    /// Files one stored RBAC object.
    pub fn add(&mut self, kind: &str, obj: &Value) {
        let name = obj
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let ns = obj
            .at("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind {
            "ClusterRole" => {
                self.cluster_roles.insert(name, rules_of_object(obj));
            }
            "Role" => {
                self.roles.insert((ns, name), rules_of_object(obj));
            }
            "ClusterRoleBinding" => self.cluster_role_bindings.push(Binding::from_value(obj)),
            "RoleBinding" => self
                .role_bindings
                .entry(ns)
                .or_default()
                .push(Binding::from_value(obj)),
            _ => {}
        }
    }

    fn role_rules(&self, b: &Binding) -> Result<&[Rule], String> {
        let found = match b.role_kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&b.role_name),
            "Role" => self.roles.get(&(b.namespace.clone(), b.role_name.clone())),
            _ => None,
        };
        found
            .map(Vec::as_slice)
            .ok_or_else(|| match b.role_kind.as_str() {
                "Role" => format!("role.rbac.authorization.k8s.io {:?} not found", b.role_name),
                _ => format!(
                    "clusterrole.rbac.authorization.k8s.io {:?} not found",
                    b.role_name
                ),
            })
    }

    /// Upstream's `VisitRulesFor`: every binding that applies to the user, cluster-wide ones
    /// first, then those of `namespace`; `visit` returns false to stop.
    fn visit_rules_for(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
        mut visit: impl FnMut(Visit<'_>) -> bool,
    ) {
        for b in &self.cluster_role_bindings {
            let Some(s) = b.subjects.iter().find(|s| applies(s, user, groups, "")) else {
                continue;
            };
            let go_on = match self.role_rules(b) {
                Ok(rules) => visit(Visit::Rules(b, s, rules)),
                Err(e) => visit(Visit::Error(e)),
            };
            if !go_on {
                return;
            }
        }
        if namespace.is_empty() {
            return;
        }
        for b in self.role_bindings.get(namespace).into_iter().flatten() {
            let Some(s) = b
                .subjects
                .iter()
                .find(|s| applies(s, user, groups, namespace))
            else {
                continue;
            };
            let go_on = match self.role_rules(b) {
                Ok(rules) => visit(Visit::Rules(b, s, rules)),
                Err(e) => visit(Visit::Error(e)),
            };
            if !go_on {
                return;
            }
        }
    }

    /// The RBAC authorizer: allowed with upstream's reason (`RBAC: allowed by ClusterRoleBinding
    /// "x" of ClusterRole "y" to User "z"`), otherwise no opinion (never an explicit deny).
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        let mut reason = None;
        self.visit_rules_for(&attrs.user, &attrs.groups, &attrs.namespace, |v| {
            let Visit::Rules(b, s, rules) = v else {
                return true;
            };
            if rules.iter().any(|r| rule_allows(attrs, r)) {
                let source = if b.namespace.is_empty() {
                    format!(
                        "ClusterRoleBinding {:?} of {} {:?} to {}",
                        b.name,
                        b.role_kind,
                        b.role_name,
                        describe_subject(s, "")
                    )
                } else {
                    format!(
                        "RoleBinding {:?} of {} {:?} to {}",
                        format!("{}/{}", b.name, b.namespace),
                        b.role_kind,
                        b.role_name,
                        describe_subject(s, &b.namespace)
                    )
                };
                reason = Some(format!("RBAC: allowed by {source}"));
                return false;
            }
            true
        });
        match reason {
            Some(reason) => Decision {
                allowed: true,
                denied: false,
                reason,
            },
            None => Decision {
                allowed: false,
                denied: false,
                reason: String::new(),
            },
        }
    }

    /// Upstream's `RulesFor`: every rule granted to the user in `namespace` (cluster-wide ones
    /// included), and the resolution errors met on the way.
    pub fn rules_for(
        &self,
        user: &str,
        groups: &[String],
        namespace: &str,
    ) -> (Vec<Rule>, Vec<String>) {
        let (mut rules, mut errors) = (Vec::new(), Vec::new());
        self.visit_rules_for(user, groups, namespace, |v| {
            match v {
                Visit::Rules(_, _, r) => rules.extend(r.iter().cloned()),
                Visit::Error(e) => errors.push(e),
            }
            true
        });
        (rules, errors)
    }
}

/// Upstream's `BreakdownRule`: one rule per group × resource × verb (× name), and per URL × verb.
fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut out = Vec::new();
    for g in &rule.api_groups {
        for r in &rule.resources {
            for v in &rule.verbs {
                let base = Rule {
                    verbs: vec![v.clone()],
                    api_groups: vec![g.clone()],
                    resources: vec![r.clone()],
                    ..Default::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    for n in &rule.resource_names {
                        out.push(Rule {
                            resource_names: vec![n.clone()],
                            ..base.clone()
                        });
                    }
                }
            }
        }
    }
    for u in &rule.non_resource_urls {
        for v in &rule.verbs {
            out.push(Rule {
                verbs: vec![v.clone()],
                non_resource_urls: vec![u.clone()],
                ..Default::default()
            });
        }
    }
    out
}

fn resource_covers_all(set: &[String], covers: &[String]) -> bool {
    if has(set, "*") || has_all(set, covers) {
        return true;
    }
    covers.iter().all(|path| {
        has(set, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(set, &format!("*/{sub}")))
    })
}

/// Upstream's `ruleCovers`.
fn rule_covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resource_covers_all(&owner.resources, &sub.resources);
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Upstream's `Covers`: whether `owner` holds every permission of `requested`, and the broken-down
/// rules it does not.
pub fn covers(owner: &[Rule], requested: &[Rule]) -> (bool, Vec<Rule>) {
    let mut missing = Vec::new();
    for r in requested {
        for sub in breakdown(r) {
            if !owner.iter().any(|o| rule_covers(o, &sub)) {
                missing.push(sub);
            }
        }
    }
    (missing.is_empty(), missing)
}

/// Upstream's `CompactRules`: single-group, single-resource rules (with at most one name) merged
/// by their (group, resource, name), verbs appended.
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out = Vec::new();
    let mut simple: BTreeMap<(String, String, String), Rule> = BTreeMap::new();
    for r in rules {
        let is_simple = r.non_resource_urls.is_empty()
            && r.api_groups.len() == 1
            && r.resources.len() == 1
            && r.resource_names.len() <= 1;
        if is_simple {
            let key = (
                r.api_groups[0].clone(),
                r.resources[0].clone(),
                r.resource_names.first().cloned().unwrap_or_default(),
            );
            match simple.get_mut(&key) {
                Some(e) => e.verbs.extend(r.verbs),
                None => {
                    simple.insert(key, r);
                }
            }
        } else {
            out.push(r);
        }
    }
    out.extend(simple.into_values());
    out
}

/// Upstream's `ConfirmNoEscalation` message when `owner` does not cover `requested`: the missing
/// rules, compacted, one per line in sorted order.
pub fn escalation_error(
    user: &str,
    groups: &[String],
    owner: &[Rule],
    requested: &[Rule],
    resolution_errors: &[String],
) -> Option<String> {
    let (ok, missing) = covers(owner, requested);
    if ok {
        return None;
    }
    let mut lines: Vec<String> = compact(missing).iter().map(Rule::compact_string).collect();
    lines.sort();
    lines.dedup();
    let gq: Vec<String> = groups.iter().map(|g| format!("{g:?}")).collect();
    let mut msg = format!(
        "user {user:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        gq.join(" "),
        lines.join("\n")
    );
    if !resolution_errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            resolution_errors.join(" ")
        ));
    }
    Some(msg)
}

/// Upstream's `forbiddenMessage` wrapped in `NewForbidden`: the 403 message a denied request gets.
pub fn forbidden_message(attrs: &Attributes, reason: &str) -> String {
    let mut msg = if !attrs.resource_request {
        format!(
            "User {:?} cannot {} path {:?}",
            attrs.user, attrs.verb, attrs.path
        )
    } else {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        if attrs.namespace.is_empty() {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
                attrs.user, attrs.verb, resource, attrs.group
            )
        } else {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
                attrs.user, attrs.verb, resource, attrs.group, attrs.namespace
            )
        }
    };
    if !reason.is_empty() {
        msg.push_str(": ");
        msg.push_str(reason);
    }
    let qualified = if !attrs.resource_request || attrs.resource.is_empty() {
        String::new()
    } else if attrs.group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.group)
    };
    if qualified.is_empty() {
        format!("forbidden: {msg}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {msg}")
    } else {
        format!("{qualified} {:?} is forbidden: {msg}", attrs.name)
    }
}

/// `SetDefaults_Subject` and the role reference's group (`SetDefaults_(Cluster)RoleBinding`).
pub fn default_object(kind: &str, obj: &mut serde_json::Map<String, Value>) {
    if !matches!(kind, "RoleBinding" | "ClusterRoleBinding") {
        return;
    }
    if let Some(Value::Object(r)) = obj.get_mut("roleRef")
        && r.get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        r.insert("apiGroup".into(), GROUP.into());
    }
    if let Some(Value::Array(subjects)) = obj.get_mut("subjects") {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let empty = s
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            let kind = s.get("kind").and_then(Value::as_str).unwrap_or("");
            if empty && matches!(kind, "User" | "Group") {
                s.insert("apiGroup".into(), GROUP.into());
            }
        }
    }
}

fn jstr(s: &str) -> Value {
    Value::String(s.to_string())
}

/// `ValidatePolicyRule`.
fn validate_rule(rule: &Value, namespaced: bool, path: &str, errs: &mut Vec<FieldError>) {
    let r = Rule::from_value(rule);
    if r.verbs.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = Value::from(
        r.non_resource_urls
            .iter()
            .map(|u| Value::from(u.as_str()))
            .collect::<Vec<_>>(),
    );
    if !r.non_resource_urls.is_empty() {
        if namespaced {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                urls.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !r.api_groups.is_empty() || !r.resources.is_empty() || !r.resource_names.is_empty() {
            errs.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if r.api_groups.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if r.resources.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

/// `ValidateRBACName`: a path segment (`.`/`..` refused, no `/` or `%`).
fn name_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|b| name.contains(*b))
        .map(|b| format!("may not contain '{b}'"))
        .collect()
}

/// `ValidateServiceAccountName` (a DNS subdomain).
fn service_account_name_errors(name: &str) -> Vec<String> {
    klab_api::selector::is_dns1123_subdomain(name)
}

fn validate_subject(s: &Value, namespaced: bool, path: &str, errs: &mut Vec<FieldError>) {
    let name = str_of(s, "name");
    let group = str_of(s, "apiGroup");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    match str_of(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in service_account_name_errors(name) {
                    errs.push(FieldError::invalid(format!("{path}.name"), jstr(name), m));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    jstr(group),
                    &[""],
                ));
            }
            if !namespaced && str_of(s, "namespace").is_empty() {
                errs.push(FieldError::required(format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(FieldError::not_supported(
                    format!("{path}.apiGroup"),
                    jstr(group),
                    &[GROUP],
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            format!("{path}.kind"),
            jstr(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

/// `ValidateRole`, `ValidateClusterRole`, `ValidateRoleBinding`, `ValidateClusterRoleBinding`
/// (object metadata is checked by the caller, with [`name_errors`] as the name rule).
pub fn validate(kind: &str, obj: &Value, errs: &mut Vec<FieldError>) {
    match kind {
        "Role" | "ClusterRole" => {
            let namespaced = kind == "Role";
            for (i, r) in obj
                .get("rules")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                validate_rule(r, namespaced, &format!("rules[{i}]"), errs);
            }
            if kind == "ClusterRole"
                && let Some(agg) = obj.get("aggregationRule").filter(|a| !a.is_null())
            {
                let sels = agg
                    .get("clusterRoleSelectors")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                if sels.is_empty() {
                    errs.push(FieldError::required(
                        "aggregationRule.clusterRoleSelectors",
                        "at least one clusterRoleSelector required if aggregationRule is non-nil",
                    ));
                }
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let namespaced = kind == "RoleBinding";
            let role = obj.get("roleRef").cloned().unwrap_or(Value::Null);
            let group = str_of(&role, "apiGroup");
            if group != GROUP {
                errs.push(FieldError::not_supported(
                    "roleRef.apiGroup",
                    jstr(group),
                    &[GROUP],
                ));
            }
            let rk = str_of(&role, "kind");
            let kinds: &[&str] = if namespaced {
                &["Role", "ClusterRole"]
            } else {
                &["ClusterRole"]
            };
            if !kinds.contains(&rk) {
                errs.push(FieldError::not_supported("roleRef.kind", jstr(rk), kinds));
            }
            let rn = str_of(&role, "name");
            if rn.is_empty() {
                errs.push(FieldError::required("roleRef.name", ""));
            } else {
                for m in name_errors(rn) {
                    errs.push(FieldError::invalid("roleRef.name", jstr(rn), m));
                }
            }
            for (i, s) in obj
                .get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                validate_subject(s, namespaced, &format!("subjects[{i}]"), errs);
            }
        }
        _ => {}
    }
}

/// `ValidateRoleBindingUpdate`: the role reference cannot change.
pub fn validate_update(kind: &str, obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if matches!(kind, "RoleBinding" | "ClusterRoleBinding")
        && obj.get("roleRef") != old.get("roleRef")
    {
        errs.push(FieldError::invalid(
            "roleRef",
            obj.get("roleRef").cloned().unwrap_or(Value::Null),
            "cannot change roleRef",
        ));
    }
}

pub use klab_api::rbac::aggregate;

pub mod bootstrap;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod api_tests;
