//! The four walks server-side apply makes over objects with their schema (`apply::schema`), as
//! structured-merge-diff defines them: the field set an object specifies (`to_field_set`), what
//! changed between two objects (`compare`), an applied configuration merged into the live object
//! (`merge`) and the removal of the items of a set (`remove_items`).

use serde_json::{Map, Value};

use super::fieldset::{Path, PathElement, Set};
use super::schema::{self, ListType};
use crate::registry::ResourceInfo;

/// Field names from the root, the schema tables' view of a path.
struct Names(Vec<String>);

impl Names {
    fn view(&self) -> Vec<&str> {
        self.0.iter().map(String::as_str).collect()
    }
}

fn list_type(ri: &ResourceInfo, names: &Names) -> ListType {
    schema::list_type(ri, &names.view())
}

fn atomic_struct(ri: &ResourceInfo, names: &Names) -> bool {
    schema::is_atomic_struct(ri, &names.view())
}

/// The path element of a list item, or `None` when it cannot have one (a list-map element that is
/// not an object or lacks a key without default): such items are addressed by index.
fn item_element(lt: ListType, item: &Value, index: usize) -> PathElement {
    let by_index = PathElement::Index(i64::try_from(index).unwrap_or(i64::MAX));
    match lt {
        ListType::Atomic => by_index,
        ListType::Set => PathElement::value(item),
        ListType::Map(keys) => {
            let Some(obj) = item.as_object() else {
                return by_index;
            };
            let mut fields: Vec<(&str, Value)> = Vec::with_capacity(keys.len());
            for k in keys {
                match obj.get(*k).filter(|v| !v.is_null()) {
                    Some(v) => fields.push((k, v.clone())),
                    None => match schema::key_default(k) {
                        Some(d) => fields.push((k, d)),
                        // An optional key may be absent (upstream skips it when it has no default
                        // and other keys remain).
                        None if keys.len() > 1 => {}
                        None => return by_index,
                    },
                }
            }
            if fields.is_empty() {
                return by_index;
            }
            let refs: Vec<(&str, &Value)> = fields.iter().map(|(k, v)| (*k, v)).collect();
            PathElement::key(&refs)
        }
    }
}

/// The items of a list with their elements; later duplicates of an element are ignored, as
/// upstream does.
fn items(lt: ListType, list: &[Value]) -> Vec<(PathElement, &Value)> {
    let elements: Vec<PathElement> = list
        .iter()
        .enumerate()
        .map(|(i, item)| item_element(lt, item, i))
        .collect();
    // The first of equal elements is kept; the check borrows them rather than copying each.
    let mut seen = std::collections::BTreeSet::new();
    let first: Vec<bool> = elements.iter().map(|pe| seen.insert(pe)).collect();
    drop(seen);
    elements
        .into_iter()
        .zip(list)
        .zip(first)
        .filter_map(|(item, first)| first.then_some(item))
        .collect()
}

/// The fields `obj` specifies: its scalars, list items, atomic lists and structs (structs
/// themselves are not members).
pub fn to_field_set(ri: &ResourceInfo, obj: &Value) -> Set {
    let mut set = Set::new();
    walk_set(ri, obj, &mut Names(Vec::new()), &mut Vec::new(), &mut set);
    set
}

fn walk_set(ri: &ResourceInfo, v: &Value, names: &mut Names, path: &mut Path, set: &mut Set) {
    match v {
        Value::Object(m) => {
            if !path.is_empty() && atomic_struct(ri, names) {
                set.insert(path);
                return;
            }
            for (k, child) in m {
                names.0.push(k.clone());
                path.push(PathElement::field(k));
                walk_set(ri, child, names, path, set);
                path.pop();
                names.0.pop();
            }
        }
        Value::Array(list) => {
            let lt = list_type(ri, names);
            if lt == ListType::Atomic {
                set.insert(path);
                return;
            }
            for (pe, item) in items(lt, list) {
                path.push(pe);
                walk_set(ri, item, names, path, set);
                set.insert(path);
                path.pop();
            }
        }
        _ => set.insert(path),
    }
}

/// What changed from `lhs` to `rhs`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Added or modified paths: what a writer took over.
    pub fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }
}

pub fn compare(ri: &ResourceInfo, lhs: &Value, rhs: &Value) -> Comparison {
    let mut c = Comparison::default();
    walk_compare(
        ri,
        Some(Filled::plain(lhs)),
        Some(Filled::plain(rhs)),
        &mut Vec::new(),
        &mut Vec::new(),
        &mut c,
        true,
    );
    c
}

/// What changed from `lhs` to `rhs` as Go would hold both: the top-level fields in `skip` and
/// `metadata.managedFields` left out of either, and each filled with the fields of `zero` (the
/// kind's zero value, `skip` left out of it too) it lacks. The same as `compare` of the two
/// objects so trimmed and filled, without copying them.
pub fn compare_filled(
    ri: &ResourceInfo,
    lhs: &Value,
    rhs: &Value,
    zero: &Value,
    skip: &[&str],
) -> Comparison {
    filled_comparison(ri, lhs, rhs, zero, skip, true)
}

/// [`compare_filled`], walking the parts both objects hold alike too when `skip_identical` is
/// false (what the skip must not change).
pub(crate) fn filled_comparison(
    ri: &ResourceInfo,
    lhs: &Value,
    rhs: &Value,
    zero: &Value,
    skip: &[&str],
    skip_identical: bool,
) -> Comparison {
    let mut c = Comparison::default();
    let root = |v| Filled {
        v,
        zero: zero.as_object(),
        level: Level::Root,
        skip,
    };
    walk_compare(
        ri,
        Some(root(lhs)),
        Some(root(rhs)),
        &mut Vec::new(),
        &mut Vec::new(),
        &mut c,
        skip_identical,
    );
    c
}

/// Where a `Filled` node is, for the fields left out at that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Nothing left out anywhere below (`compare`).
    Plain,
    /// The root: `skip` left out.
    Root,
    /// The root's `metadata`: `managedFields` left out.
    Meta,
    /// Anywhere else.
    Other,
}

/// A value seen with some fields left out and the zero value's fields it lacks filled in (only
/// where it is an object: a zero struct never replaces a value of another type).
#[derive(Clone, Copy)]
struct Filled<'a> {
    v: &'a Value,
    /// The zero value's fields at this place, when `v` is an object taken from an object.
    zero: Option<&'a Map<String, Value>>,
    level: Level,
    skip: &'a [&'a str],
}

impl<'a> Filled<'a> {
    fn plain(v: &'a Value) -> Self {
        Filled {
            v,
            zero: None,
            level: Level::Plain,
            skip: &[],
        }
    }

    fn hidden(&self, k: &str) -> bool {
        match self.level {
            Level::Root => self.skip.contains(&k),
            Level::Meta => k == "managedFields",
            Level::Plain | Level::Other => false,
        }
    }

    fn child(&self, k: &str, v: &'a Value, zero: Option<&'a Value>) -> Filled<'a> {
        let level = match self.level {
            Level::Plain => Level::Plain,
            Level::Root if k == "metadata" => Level::Meta,
            _ => Level::Other,
        };
        Filled {
            v,
            zero: zero.and_then(Value::as_object),
            level,
            skip: self.skip,
        }
    }

    /// The field `k`, or the zero value's when the object lacks it.
    fn get(&self, k: &str) -> Option<Filled<'a>> {
        let m = self.v.as_object()?;
        if self.hidden(k) {
            return None;
        }
        let zero = self.zero.and_then(|z| z.get(k));
        match m.get(k) {
            Some(v) => Some(self.child(k, v, zero)),
            None => zero.map(|z| self.child(k, z, None)),
        }
    }

    /// The fields: the object's in order, then the zero value's it lacks.
    fn entries(&self) -> impl Iterator<Item = (&'a str, Filled<'a>)> + '_ {
        let m = self.v.as_object();
        let own = m
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|(k, _)| !self.hidden(k))
            .map(|(k, v)| {
                let zero = self.zero.and_then(|z| z.get(k));
                (k.as_str(), self.child(k, v, zero))
            });
        let filled = self
            .zero
            .filter(|_| m.is_some())
            .into_iter()
            .flat_map(|z| z.iter())
            .filter(move |(k, _)| !self.hidden(k) && !m.is_some_and(|m| m.contains_key(*k)))
            .map(|(k, z)| (k.as_str(), self.child(k, z, None)));
        own.chain(filled)
    }

    fn is_empty_container(&self) -> bool {
        match self.v {
            Value::Null => true,
            Value::Object(_) => self.entries().next().is_none(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }

    /// Whether two values at the same place are seen alike: the same JSON, filled from the same
    /// zero value and with the same fields left out. The walk below two such values finds
    /// nothing, so it is skipped: most of an update's object is what was stored, and the
    /// equality check costs a fraction of a walk that builds a path at every node.
    fn identical(&self, other: &Filled<'_>) -> bool {
        let zero_ptr = |f: &Filled<'_>| f.zero.map(std::ptr::from_ref);
        self.level == other.level && zero_ptr(self) == zero_ptr(other) && self.v == other.v
    }

    /// Whether both are the same value as filled.
    fn same(&self, other: &Filled<'_>) -> bool {
        let trivial =
            |f: &Filled<'_>| f.zero.is_none() && matches!(f.level, Level::Plain | Level::Other);
        if trivial(self) && trivial(other) {
            return self.v == other.v;
        }
        match (self.v, other.v) {
            (Value::Object(_), Value::Object(_)) => {
                self.entries().count() == other.entries().count()
                    && self
                        .entries()
                        .all(|(k, a)| other.get(k).is_some_and(|b| a.same(&b)))
            }
            (a, b) => a == b,
        }
    }
}

fn is_empty_container(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

fn is_empty_filled(v: Option<&Filled<'_>>) -> bool {
    v.is_none_or(Filled::is_empty_container)
}

fn walk_compare<'a>(
    ri: &ResourceInfo,
    lhs: Option<Filled<'a>>,
    rhs: Option<Filled<'a>>,
    names: &mut Vec<&'a str>,
    path: &mut Path,
    c: &mut Comparison,
    skip_identical: bool,
) {
    let null = |f: &Option<Filled<'a>>| f.as_ref().is_some_and(|f| f.v.is_null());
    // A null and an absent field are the same to a typed object.
    if (null(&lhs) && rhs.is_none()) || (lhs.is_none() && null(&rhs)) {
        return;
    }
    let shape = match (&lhs, &rhs) {
        (_, Some(v)) if !v.v.is_null() => v.v,
        (Some(v), _) => v.v,
        (None, Some(v)) => v.v,
        (None, None) => return,
    };
    let same_shape = match (&lhs, &rhs) {
        (Some(l), Some(r)) => {
            let (l, r) = (l.v, r.v);
            l.is_null()
                || r.is_null()
                || (l.is_object() == r.is_object() && l.is_array() == r.is_array())
        }
        _ => true,
    };
    let leaf = |c: &mut Comparison, path: &Path| match (&lhs, &rhs) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(l), Some(r)) if !l.same(r) => c.modified.insert(path),
        _ => {}
    };
    let both_empty = is_empty_filled(lhs.as_ref()) && is_empty_filled(rhs.as_ref());
    match shape {
        Value::Object(_) if same_shape => {
            if (!path.is_empty() && schema::is_atomic_struct(ri, names)) || both_empty {
                leaf(c, path);
                return;
            }
            let as_object = |f: &Option<Filled<'a>>| f.filter(|f| f.v.is_object());
            let (l, r) = (as_object(&lhs), as_object(&rhs));
            for (k, rv) in r.iter().flat_map(|r| r.entries()) {
                let lv = l.and_then(|l| l.get(k));
                if skip_identical && lv.is_some_and(|lv| lv.identical(&rv)) {
                    continue;
                }
                names.push(k);
                path.push(PathElement::field(k));
                walk_compare(ri, lv, Some(rv), names, path, c, skip_identical);
                path.pop();
                names.pop();
            }
            for (k, lv) in l.iter().flat_map(|l| l.entries()) {
                if r.is_some_and(|r| r.get(k).is_some()) {
                    continue;
                }
                names.push(k);
                path.push(PathElement::field(k));
                walk_compare(ri, Some(lv), None, names, path, c, skip_identical);
                path.pop();
                names.pop();
            }
        }
        Value::Array(_) if same_shape => {
            let lt = schema::list_type(ri, names);
            if lt == ListType::Atomic || both_empty {
                leaf(c, path);
                return;
            }
            let list = |f: &Option<Filled<'a>>| {
                f.as_ref()
                    .and_then(|f| f.v.as_array())
                    .map_or(&[] as &[Value], Vec::as_slice)
            };
            let item = |f: &Option<Filled<'a>>, v: &'a Value| Filled {
                v,
                zero: None,
                level: match f.as_ref().map(|f| f.level) {
                    Some(Level::Plain) => Level::Plain,
                    _ => Level::Other,
                },
                skip: &[],
            };
            let l = items(lt, list(&lhs));
            let r = items(lt, list(&rhs));
            for (pe, rv) in &r {
                let lv = l
                    .iter()
                    .find(|(lp, _)| lp == pe)
                    .map(|(_, v)| item(&lhs, v));
                let rv = item(&rhs, rv);
                if skip_identical && lv.is_some_and(|lv| lv.identical(&rv)) {
                    continue;
                }
                path.push(pe.clone());
                walk_compare(ri, lv, Some(rv), names, path, c, skip_identical);
                path.pop();
            }
            for (pe, lv) in &l {
                if r.iter().any(|(rp, _)| rp == pe) {
                    continue;
                }
                path.push(pe.clone());
                walk_compare(
                    ri,
                    Some(item(&lhs, lv)),
                    None,
                    names,
                    path,
                    c,
                    skip_identical,
                );
                path.pop();
            }
        }
        _ => {
            leaf(c, path);
            return;
        }
    }
    if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
}

/// `config` merged into `live`: config's scalars, atomic lists and structs win, structs merge
/// field by field, list maps and sets element by element (live order kept, new elements
/// appended). A `null` in the configuration removes the field.
pub fn merge(ri: &ResourceInfo, live: &Value, config: &Value) -> Value {
    merge_at(ri, live, config, &mut Names(Vec::new()), true)
}

fn merge_at(
    ri: &ResourceInfo,
    live: &Value,
    config: &Value,
    names: &mut Names,
    root: bool,
) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(r)) if root || !atomic_struct(ri, names) => {
            let mut out = l.clone();
            for (k, rv) in r {
                if rv.is_null() {
                    out.remove(k);
                    continue;
                }
                names.0.push(k.clone());
                let merged = match l.get(k) {
                    Some(lv) => merge_at(ri, lv, rv, names, false),
                    None => rv.clone(),
                };
                names.0.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(r)) => {
            let lt = list_type(ri, names);
            if lt == ListType::Atomic {
                return config.clone();
            }
            let li = items(lt, l);
            let ri_items = items(lt, r);
            let mut out: Vec<Value> = Vec::with_capacity(li.len() + ri_items.len());
            for (pe, lv) in &li {
                match ri_items.iter().find(|(rp, _)| rp == pe) {
                    Some((_, rv)) => out.push(merge_at(ri, lv, rv, names, false)),
                    None => out.push((*lv).clone()),
                }
            }
            for (pe, rv) in &ri_items {
                if !li.iter().any(|(lp, _)| lp == pe) {
                    out.push((*rv).clone());
                }
            }
            Value::Array(out)
        }
        _ => config.clone(),
    }
}

/// Removes from `obj` every member of `set` (fields, list items); containers emptied by the
/// removal go too, as Go's `omitempty` would drop them.
pub fn remove_items(ri: &ResourceInfo, obj: &mut Value, set: &Set) {
    remove_at(ri, obj, set, &mut Names(Vec::new()));
}

fn remove_at(ri: &ResourceInfo, v: &mut Value, set: &Set, names: &mut Names) {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::field(&k);
                if set.has(std::slice::from_ref(&pe)) {
                    m.remove(&k);
                    continue;
                }
                if let Some(child_set) = set.child(&pe)
                    && let Some(child) = m.get_mut(&k)
                {
                    names.0.push(k.clone());
                    let was_empty = is_empty_container(Some(child));
                    remove_at(ri, child, child_set, names);
                    names.0.pop();
                    if !was_empty && is_empty_container(Some(child)) {
                        m.remove(&k);
                    }
                }
            }
        }
        Value::Array(list) => {
            let lt = list_type(ri, names);
            let mut kept = Vec::with_capacity(list.len());
            for (i, mut item) in std::mem::take(list).into_iter().enumerate() {
                let pe = item_element(lt, &item, i);
                if set.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                if let Some(child_set) = set.child(&pe) {
                    remove_at(ri, &mut item, child_set, names);
                }
                kept.push(item);
            }
            *list = kept;
        }
        _ => {}
    }
}

/// The fields of `before` its typed form `after` dropped (the schema does not declare them), as
/// upstream's paths (`.spec.template.spec.containers[name="app"].foo`).
pub fn undeclared(ri: &ResourceInfo, before: &Value, after: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_undeclared(
        ri,
        before,
        after,
        &mut Names(Vec::new()),
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn walk_undeclared(
    ri: &ResourceInfo,
    before: &Value,
    after: &Value,
    names: &mut Names,
    path: &mut Path,
    out: &mut Vec<String>,
) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, bv) in b {
                if bv.is_null() {
                    continue;
                }
                path.push(PathElement::field(k));
                match a.get(k) {
                    Some(av) => {
                        names.0.push(k.clone());
                        walk_undeclared(ri, bv, av, names, path, out);
                        names.0.pop();
                    }
                    None => out.push(super::fieldset::path_string(path)),
                }
                path.pop();
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            let lt = list_type(ri, names);
            for (i, (bv, av)) in b.iter().zip(a.iter()).enumerate() {
                path.push(item_element(lt, bv, i));
                walk_undeclared(ri, bv, av, names, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use serde_json::json;

    fn deployments() -> &'static ResourceInfo {
        registry::lookup("apps", "v1", "deployments").unwrap()
    }

    fn fields(set: &Set) -> Value {
        set.to_fields_v1()
    }

    #[test]
    fn to_field_set_matches_upstream_apply_sets() {
        let cfg = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx:1",
                                           "ports": [{"containerPort": 80}],
                                           "args": ["a"]}]}}}
        });
        let set = to_field_set(deployments(), &cfg);
        assert_eq!(
            fields(&set),
            json!({
                "f:apiVersion": {}, "f:kind": {},
                "f:metadata": {"f:labels": {"f:app": {}}, "f:name": {}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                            ".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {}, "f:containerPort": {}}}
                        }}}
                    }
                }
            })
        );
    }

    #[test]
    fn compare_reports_added_modified_removed() {
        let ri = deployments();
        let zero = schema::zero_object(ri);
        let live = merge(
            ri,
            zero,
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}},
            "spec": {"replicas": 1, "strategy": {"type": "RollingUpdate"}}}),
        );
        let new = json!({"metadata": {"labels": {"a": "1", "c": "3"}},
            "spec": {"replicas": 2, "strategy": {"type": "RollingUpdate",
                     "rollingUpdate": {"maxSurge": 1}}, "template": {"metadata": {}, "spec": {}}},
            "status": {}});
        let c = compare(ri, &live, &new);
        assert_eq!(
            fields(&c.added),
            json!({"f:metadata": {"f:labels": {"f:c": {}}},
                   "f:spec": {"f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}}}}})
        );
        assert_eq!(fields(&c.modified), json!({"f:spec": {"f:replicas": {}}}));
        assert_eq!(
            fields(&c.removed),
            json!({"f:metadata": {"f:labels": {"f:b": {}}}})
        );
        assert!(compare(ri, &new, &new).changed().is_empty());
    }

    #[test]
    fn compare_from_the_zero_object_owns_new_maps_and_items() {
        let ri = deployments();
        let new = json!({"metadata": {"labels": {"app": "x"}},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}},
                     "strategy": {}}});
        let c = compare(ri, schema::zero_object(ri), &new);
        assert_eq!(
            fields(&c.added),
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:selector": {}, "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                        ".": {}, "f:image": {}, "f:name": {}}}}}}
            })
        );
    }

    #[test]
    fn merge_follows_list_types() {
        let ri = deployments();
        let live = json!({"spec": {"selector": {"matchLabels": {"a": "1", "b": "2"}},
            "template": {"spec": {"containers": [
                {"name": "a", "image": "a:1", "args": ["x", "y"]},
                {"name": "b", "image": "b:1"}]}}}});
        let cfg = json!({"spec": {"selector": {"matchLabels": {"a": "1"}},
            "template": {"spec": {"containers": [
                {"name": "c", "image": "c:1"},
                {"name": "a", "image": "a:2", "args": ["z"]}]}}}});
        let out = merge(ri, &live, &cfg);
        assert_eq!(
            out,
            json!({"spec": {"selector": {"matchLabels": {"a": "1"}},
                "template": {"spec": {"containers": [
                    {"name": "a", "image": "a:2", "args": ["z"]},
                    {"name": "b", "image": "b:1"},
                    {"name": "c", "image": "c:1"}]}}}})
        );
    }

    #[test]
    fn remove_items_drops_fields_items_and_emptied_parents() {
        let ri = deployments();
        let mut obj = json!({"metadata": {"labels": {"a": "1"}, "name": "x"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "a", "image": "a"}, {"name": "b", "image": "b", "tty": true}]}}}});
        let mut set = Set::new();
        set.insert(&[
            PathElement::field("metadata"),
            PathElement::field("labels"),
            PathElement::field("a"),
        ]);
        let key_a = PathElement::key(&[("name", &json!("a"))]);
        let key_b = PathElement::key(&[("name", &json!("b"))]);
        let containers = [
            PathElement::field("spec"),
            PathElement::field("template"),
            PathElement::field("spec"),
            PathElement::field("containers"),
        ];
        let mut p = containers.to_vec();
        p.push(key_a);
        set.insert(&p);
        let mut p = containers.to_vec();
        p.push(key_b);
        p.push(PathElement::field("tty"));
        set.insert(&p);
        remove_items(ri, &mut obj, &set);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "x"},
                "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b"}]}}}})
        );
    }

    #[test]
    fn undeclared_fields_use_upstream_paths() {
        let ri = deployments();
        let before = json!({"spec": {"foo": 1, "template": {"spec": {"containers": [
            {"name": "app", "bar": true, "image": "x"}]}}}});
        let after = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "x"}]}}}});
        assert_eq!(
            undeclared(ri, &before, &after),
            [
                ".spec.foo",
                ".spec.template.spec.containers[name=\"app\"].bar"
            ]
        );
    }

    #[test]
    fn items_without_keys_do_not_panic() {
        let ri = deployments();
        let odd = json!({"spec": {"template": {"spec": {"containers": [1, {"image": "x"}, null, {"name": "a"}, {"name": "a"}]}}}});
        let set = to_field_set(ri, &odd);
        assert!(!set.is_empty());
        let _ = compare(ri, &odd, &json!({}));
        let _ = merge(ri, &odd, &odd);
        let mut o = odd.clone();
        remove_items(ri, &mut o, &set);
    }
}
