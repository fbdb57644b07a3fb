//! Field sets as structured-merge-diff defines them: a tree of path elements (`f:` field names,
//! `k:` list-map keys, `v:` set values, `i:` list indexes), its set algebra, upstream's `fieldsV1`
//! JSON encoding and the `.spec.containers[name="app"].image` path text used in conflicts.
//!
//! A path is a *member* of a set when the set holds that exact path; its children hold longer
//! paths through it. In `fieldsV1` a node that is both a member and has children carries a `"."`
//! key, a member without children is `{}`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path. The derived order (field < key < value < index, then by content) is the
/// order upstream iterates and serialises sets in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a struct or an entry of a map.
    Field(String),
    /// A list-map element by its key fields, each `(name, compact JSON value)`, sorted by name.
    Key(Vec<(String, String)>),
    /// A set element by its value, as compact JSON.
    Value(String),
    /// A list element by position (lists whose elements have no identity).
    Index(i64),
}

impl PathElement {
    pub fn field(name: &str) -> Self {
        PathElement::Field(name.to_string())
    }

    /// A key element from the key fields of a list-map element (sorted by name).
    pub fn key(fields: &[(&str, &Value)]) -> Self {
        let mut kv: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        kv.sort();
        PathElement::Key(kv)
    }

    pub fn value(v: &Value) -> Self {
        PathElement::Value(v.to_string())
    }

    /// The `fieldsV1` spelling: `f:name`, `k:{"name":"app"}`, `v:"x"`, `i:0`.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(kv) => {
                let body: Vec<String> = kv
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                    .collect();
                format!("k:{{{}}}", body.join(","))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `fieldsV1` key back into an element.
    pub fn decode(s: &str) -> Result<Self, String> {
        let (prefix, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("unknown path element type: {s:?}"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => {
                let v: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                let Value::Object(m) = v else {
                    return Err(format!("key must be a JSON object: {rest}"));
                };
                if m.is_empty() {
                    return Err("key must have at least one field".to_string());
                }
                let fields: Vec<(&str, &Value)> = m.iter().map(|(k, v)| (k.as_str(), v)).collect();
                Ok(PathElement::key(&fields))
            }
            "v" => {
                let v: Value = serde_json::from_str(rest).map_err(|e| e.to_string())?;
                Ok(PathElement::value(&v))
            }
            "i" => rest
                .parse::<i64>()
                .map(PathElement::Index)
                .map_err(|e| e.to_string()),
            _ => Err(format!("unknown path element type: {prefix:?}")),
        }
    }
}

impl fmt::Display for PathElement {
    /// Upstream's `Path.String` spelling of one element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(kv) => {
                let body: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", body.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root.
pub type Path = Vec<PathElement>;

/// Upstream's text for a path (`.spec.replicas`).
pub fn path_string(p: &[PathElement]) -> String {
    p.iter().map(ToString::to_string).collect()
}

/// A set of paths, as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn new() -> Self {
        Set::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        // An element already there is not copied: a comparison inserts every path it walks
        // from the root, and most of their elements are there by then.
        match path {
            [] => {}
            [last] => {
                if !self.members.contains(last) {
                    self.members.insert(last.clone());
                }
            }
            [first, rest @ ..] => match self.children.get_mut(first) {
                Some(child) => child.insert(rest),
                None => self.children.entry(first.clone()).or_default().insert(rest),
            },
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The child set under one element (empty when there is none).
    pub fn child(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe)
    }

    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The child sets, by path element.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Paths of `self` not in `other` (exact paths: a member of `other` does not remove what lies
    /// below it).
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// `self.union(other)`, in place: what is already there is not copied.
    pub fn absorb(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.absorb(c),
                None => {
                    self.children.insert(pe.clone(), c.clone());
                }
            }
        }
    }

    /// `self.difference(other)`, in place: what stays is not copied.
    pub fn subtract(&mut self, other: &Set) {
        if !other.members.is_empty() {
            self.members.retain(|m| !other.members.contains(m));
        }
        self.children.retain(|pe, c| {
            if let Some(o) = other.children.get(pe) {
                c.subtract(o);
            }
            !c.is_empty()
        });
    }

    /// Removes `path` and everything below it.
    pub fn remove_subtree(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.remove(last);
                self.children.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(c) = self.children.get_mut(first) {
                    c.remove_subtree(rest);
                    if c.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Every member path, in upstream's iteration order (a level's members, then its children).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON of this set.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        self.write_fields_v1(&mut out);
        Value::Object(out)
    }

    /// Writes this set's `fieldsV1` entries into `out` (a child's straight into its own object).
    fn write_fields_v1(&self, out: &mut Map<String, Value>) {
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(
            self.children
                .iter()
                .filter(|(_, c)| !c.is_empty())
                .map(|(k, _)| k),
        );
        for pe in keys {
            let mut inner = Map::new();
            if let Some(c) = self.children.get(pe).filter(|c| !c.is_empty()) {
                if self.members.contains(pe) {
                    inner.insert(".".into(), Value::Object(Map::new()));
                }
                c.write_fields_v1(&mut inner);
            }
            out.insert(pe.encode(), Value::Object(inner));
        }
    }

    /// Parses `fieldsV1` JSON.
    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        let Value::Object(m) = v else {
            return Err("expected a JSON object".to_string());
        };
        Set::from_entries(m, true)
    }

    /// The set of one level's entries; below a path element (`top` false) the `"."` entry marks
    /// that element a member and is skipped here. Children are read in place, not copied.
    fn from_entries(m: &Map<String, Value>, top: bool) -> Result<Set, String> {
        let mut out = Set::new();
        for (k, child) in m {
            if k == "." {
                if top {
                    return Err("\".\" is only valid below a path element".to_string());
                }
                continue;
            }
            let pe = PathElement::decode(k)?;
            let Value::Object(cm) = child else {
                return Err(format!("expected a JSON object at {k}"));
            };
            if cm.is_empty() || cm.contains_key(".") {
                out.members.insert(pe.clone());
            }
            if let Some(dot) = cm.get(".")
                && dot.as_object().is_none_or(|d| !d.is_empty())
            {
                return Err(format!("expected {{}} at {k}.\".\""));
            }
            if cm.keys().any(|ck| ck != ".") {
                let c = Set::from_entries(cm, false)?;
                out.children.insert(pe, c);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::field(n)
    }

    fn set_of(paths: &[Path]) -> Set {
        let mut s = Set::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    #[test]
    fn path_elements_encode_as_upstream() {
        let name = json!("nginx");
        let port = json!(80);
        let tcp = json!("TCP");
        let cases: Vec<(PathElement, &str, &str)> = vec![
            (f("replicas"), "f:replicas", ".replicas"),
            (
                PathElement::key(&[("name", &name)]),
                r#"k:{"name":"nginx"}"#,
                r#"[name="nginx"]"#,
            ),
            (
                PathElement::key(&[("protocol", &tcp), ("containerPort", &port)]),
                r#"k:{"containerPort":80,"protocol":"TCP"}"#,
                r#"[containerPort=80,protocol="TCP"]"#,
            ),
            (
                PathElement::value(&json!("kubernetes")),
                r#"v:"kubernetes""#,
                r#"[="kubernetes"]"#,
            ),
            (PathElement::Index(3), "i:3", "[3]"),
        ];
        for (pe, enc, text) in cases {
            assert_eq!(pe.encode(), enc);
            assert_eq!(pe.to_string(), text);
            assert_eq!(PathElement::decode(enc).unwrap(), pe, "{enc}");
        }
    }

    #[test]
    fn fields_v1_round_trips_with_dot_for_members_with_children() {
        let c = PathElement::key(&[("name", &json!("app"))]);
        let s = set_of(&[
            vec![f("metadata"), f("labels"), f("app")],
            vec![f("metadata"), f("labels")],
            vec![f("spec"), f("replicas")],
            vec![f("spec"), f("containers"), c.clone()],
            vec![f("spec"), f("containers"), c.clone(), f("image")],
        ]);
        let v = s.to_fields_v1();
        assert_eq!(
            v,
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}},
                    "f:replicas": {}
                }
            })
        );
        // Upstream's order: "." first, then elements in order.
        let keys: Vec<&String> = v["f:spec"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["f:containers", "f:replicas"]);
        assert_eq!(Set::from_fields_v1(&v).unwrap(), s);
    }

    #[test]
    fn invalid_fields_v1_is_refused() {
        for bad in [
            json!([]),
            json!({"x:spec": {}}),
            json!({"f:spec": 1}),
            json!({"k:[1]": {}}),
            json!({"k:{}": {}}),
            json!({"i:one": {}}),
            json!({".": {}}),
            json!({"f:a": {".": {"f:b": {}}}}),
        ] {
            assert!(Set::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_algebra() {
        let a = set_of(&[
            vec![f("spec"), f("replicas")],
            vec![f("spec"), f("paused")],
            vec![f("metadata"), f("labels"), f("a")],
        ]);
        let b = set_of(&[
            vec![f("spec"), f("replicas")],
            vec![f("metadata"), f("labels"), f("b")],
        ]);
        assert_eq!(
            a.intersection(&b),
            set_of(&[vec![f("spec"), f("replicas")]])
        );
        assert_eq!(
            a.difference(&b),
            set_of(&[
                vec![f("spec"), f("paused")],
                vec![f("metadata"), f("labels"), f("a")]
            ])
        );
        let u = a.union(&b);
        assert!(u.has(&[f("metadata"), f("labels"), f("b")]));
        assert!(!u.has(&[f("metadata"), f("labels")]));
        assert!(a.difference(&a).is_empty());
        let mut r = u.clone();
        r.remove_subtree(&[f("metadata")]);
        assert_eq!(
            r,
            set_of(&[vec![f("spec"), f("paused")], vec![f("spec"), f("replicas")]])
        );
        // Members of a level come before its children, as upstream iterates.
        let s = set_of(&[
            vec![f("spec"), f("template"), f("x")],
            vec![f("spec"), f("replicas")],
        ]);
        let texts: Vec<String> = s.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(texts, [".spec.replicas", ".spec.template.x"]);
    }

    mod in_place {
        use super::*;
        use proptest::prelude::*;

        fn element() -> impl Strategy<Value = PathElement> {
            prop_oneof![
                prop::sample::select(vec!["a", "b", "c"]).prop_map(PathElement::field),
                (0i64..2).prop_map(PathElement::Index),
            ]
        }

        /// Sets from random paths, some with a child left empty by a removal.
        fn set() -> impl Strategy<Value = Set> {
            (
                prop::collection::vec(prop::collection::vec(element(), 1..4), 0..8),
                prop::collection::vec(prop::collection::vec(element(), 1..3), 0..2),
            )
                .prop_map(|(paths, removed)| {
                    let mut s = set_of(&paths);
                    for p in removed {
                        s.remove_subtree(&p);
                    }
                    s
                })
        }

        proptest! {
            #[test]
            fn absorb_and_subtract_are_union_and_difference(a in set(), b in set()) {
                let mut u = a.clone();
                u.absorb(&b);
                prop_assert_eq!(u, a.union(&b));
                let mut d = a.clone();
                d.subtract(&b);
                prop_assert_eq!(d, a.difference(&b));
            }
        }
    }
}
