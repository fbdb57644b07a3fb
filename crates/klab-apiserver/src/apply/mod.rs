//! Field management and server-side apply (upstream `managedfields` over structured-merge-diff).
//!
//! Every write records who owns which fields in `metadata.managedFields`: an `Update` entry per
//! (manager, apiVersion, subresource) for create/update/patch, an `Apply` entry per (manager,
//! subresource) for `application/apply-patch+yaml`. Apply merges the configuration into the live
//! object, refuses to change fields another manager owns with a different value (409, upstream's
//! `Apply failed with N conflict(s)`) unless forced, and removes fields its manager applied
//! before and no longer specifies when no other applier owns them. kubectl's upgrade from
//! client-side apply is honoured: for manager `kubectl`, conflicts on fields the
//! `last-applied-configuration` annotation set to their live value are not conflicts, and the
//! annotation keeps following the applied configuration.
//!
//! `fieldset` (paths, sets, `fieldsV1`), `schema` (list types, atomic structs: the one table),
//! `typed` (the walks) are pure; this module composes them and is called by `crud`.

pub mod fieldset;
pub mod schema;
pub mod typed;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::Pointer;
use crate::registry::ResourceInfo;
use fieldset::{Path, PathElement, Set, path_string};

/// Upstream's `validation.FieldManagerMaxLength`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;
/// kubectl's client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The manager kubectl uses for `apply --server-side`, the only one whose apply upgrades the
/// client-side apply annotation.
const KUBECTL: &str = "kubectl";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who is writing: the manager name and the subresource written through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldManager {
    pub name: String,
    pub subresource: Option<String>,
}

impl FieldManager {
    pub fn new(name: impl Into<String>, subresource: Option<&str>) -> Self {
        FieldManager {
            name: name.into(),
            subresource: subresource.map(str::to_string),
        }
    }
}

/// The manager of a request (upstream `managerOrUserAgent`): the `fieldManager` parameter, else
/// the User-Agent up to its first `/` (unprintable characters dropped, at most 128 bytes). A
/// request with neither (the in-process components send no User-Agent) is named after its
/// component, as upstream's binaries name themselves.
pub fn manager_name(
    field_manager: Option<&str>,
    user_agent: Option<&str>,
    user: Option<&str>,
) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    if let Some(ua) = user_agent.filter(|u| !u.is_empty()) {
        let head = ua.split('/').next().unwrap_or("");
        let mut out = String::new();
        for c in head.chars() {
            if c.is_control() {
                continue;
            }
            if out.len().saturating_add(c.len_utf8()) > FIELD_MANAGER_MAX_LENGTH {
                break;
            }
            out.push(c);
        }
        return out;
    }
    match user.unwrap_or("") {
        u if u.starts_with("system:node:") => "kubelet".to_string(),
        "system:kube-scheduler" => "kube-scheduler".to_string(),
        u if u.starts_with("system:serviceaccount:kube-system:")
            || u == "system:kube-controller-manager" =>
        {
            "kube-controller-manager".to_string()
        }
        _ => String::new(),
    }
}

/// Upstream `ValidateFieldManager` for the `fieldManager` parameter: (field, detail, too long).
pub fn validate_field_manager(name: &str) -> Option<crate::validation::FieldError> {
    if name.len() > FIELD_MANAGER_MAX_LENGTH {
        return Some(crate::validation::FieldError::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_LENGTH,
        ));
    }
    if name.chars().any(char::is_control) {
        return Some(crate::validation::FieldError::invalid(
            "fieldManager",
            json!(name),
            "must only contain printable characters",
        ));
    }
    None
}

/// The identity of a managedFields entry (upstream `BuildManagerIdentifier`: appliers are one
/// entry whatever the version they applied).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManagerKey {
    pub manager: String,
    pub operation: Operation,
    /// Empty for `Apply`.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerKey {
    fn of(m: &FieldManager, operation: Operation, api_version: &str) -> Self {
        ManagerKey {
            manager: m.name.clone(),
            operation,
            api_version: if operation == Operation::Apply {
                String::new()
            } else {
                api_version.to_string()
            },
            subresource: m.subresource.clone().unwrap_or_default(),
        }
    }

    /// Upstream `printManager`: `"kubectl"`, `"kube-controller-manager" using apps/v1`,
    /// `"kubelet" with subresource "status" using v1`.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {:?}", self.subresource);
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub set: Set,
    pub api_version: String,
    pub time: Option<String>,
}

/// Decoded `metadata.managedFields`.
pub type Managers = BTreeMap<ManagerKey, Entry>;

/// Decodes `managedFields` as upstream's `DecodeManagedFields`.
pub fn decode(v: Option<&Value>) -> Result<Managers, String> {
    let mut out = Managers::new();
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(out);
    };
    let list = v.as_array().ok_or("managedFields must be a list")?;
    for (i, e) in list.iter().enumerate() {
        let (key, api_version, time) = decode_header(i, e)?;
        let set = Set::from_fields_v1(e.get("fieldsV1").unwrap_or(&json!({})))
            .map_err(|err| format!("error decoding set of entry {i}: {err}"))?;
        out.insert(
            key,
            Entry {
                set,
                api_version,
                time,
            },
        );
    }
    Ok(out)
}

/// An entry's identity, apiVersion and time (everything but its set).
fn decode_header(i: usize, e: &Value) -> Result<(ManagerKey, String, Option<String>), String> {
    let get = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
    let operation = match get("operation") {
        "Apply" => Operation::Apply,
        "Update" => Operation::Update,
        other => {
            return Err(format!(
                "error decoding managed fields entry {i}: operation must be `Apply` or `Update`, got {other:?}"
            ));
        }
    };
    match get("fieldsType") {
        "FieldsV1" => {}
        other => return Err(format!("unexpected fieldsType {other:?} in entry {i}")),
    }
    let api_version = get("apiVersion").to_string();
    let key = ManagerKey {
        manager: get("manager").to_string(),
        operation,
        api_version: if operation == Operation::Apply {
            String::new()
        } else {
            api_version.clone()
        },
        subresource: get("subresource").to_string(),
    };
    let time = e.get("time").and_then(Value::as_str).map(str::to_string);
    Ok((key, api_version, time))
}

/// Encodes managers in upstream's order: operation, time, manager, apiVersion, subresource.
pub fn encode(managers: &Managers) -> Value {
    let mut entries: Vec<(&ManagerKey, &Entry)> =
        managers.iter().filter(|(_, e)| !e.set.is_empty()).collect();
    entries.sort_by_key(|(k, e)| entry_order(k, e.time.as_deref(), &e.api_version));
    Value::Array(
        entries
            .into_iter()
            .map(|(k, e)| encode_entry(k, e))
            .collect(),
    )
}

/// Where an entry goes in the list (upstream sorts by operation, time, manager, apiVersion,
/// subresource).
type EntryOrder = (Operation, String, String, String, String);

fn entry_order(k: &ManagerKey, time: Option<&str>, api_version: &str) -> EntryOrder {
    (
        k.operation,
        time.unwrap_or_default().to_string(),
        k.manager.clone(),
        api_version.to_string(),
        k.subresource.clone(),
    )
}

fn encode_entry(k: &ManagerKey, e: &Entry) -> Value {
    encode_entry_fields(k, &e.api_version, e.time.as_deref(), e.set.to_fields_v1())
}

/// An entry with its set already encoded.
fn encode_entry_fields(
    k: &ManagerKey,
    api_version: &str,
    time: Option<&str>,
    fields_v1: Value,
) -> Value {
    let mut m = Map::new();
    m.insert("manager".into(), json!(k.manager));
    m.insert("operation".into(), json!(k.operation.as_str()));
    m.insert("apiVersion".into(), json!(api_version));
    if let Some(t) = time {
        m.insert("time".into(), json!(t));
    }
    m.insert("fieldsType".into(), json!("FieldsV1"));
    m.insert("fieldsV1".into(), fields_v1);
    if !k.subresource.is_empty() {
        m.insert("subresource".into(), json!(k.subresource));
    }
    Value::Object(m)
}

/// `managedFields: [{}]`: upstream's way to clear every entry.
fn is_reset(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array)
        .is_some_and(|a| a.len() == 1 && a[0].as_object().is_some_and(Map::is_empty))
}

fn strip_ignored(ri: &ResourceInfo, sub: Option<&str>, set: &mut Set) {
    strip_paths(ignored_field_paths(ri, sub), set);
}

/// [`schema::ignored_paths`] as field paths (built once: every write asks).
fn ignored_field_paths(ri: &ResourceInfo, sub: Option<&str>) -> &'static [Path] {
    static CASES: std::sync::LazyLock<[Vec<Path>; schema::RESET_CASES]> =
        std::sync::LazyLock::new(|| {
            std::array::from_fn(|case| {
                schema::ignored_paths_of_case(case)
                    .iter()
                    .map(|p| p.iter().map(|f| PathElement::field(f)).collect())
                    .collect()
            })
        });
    CASES
        .get(schema::reset_case(ri, sub))
        .map_or(&[], Vec::as_slice)
}

fn strip_paths(paths: &[Path], set: &mut Set) {
    for p in paths {
        set.remove_subtree(p);
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    without_fields(obj, &[])
}

/// A copy of `obj` without `metadata.managedFields` and without the top-level fields `skip`,
/// neither of which is copied first (a pod's spec is most of it).
pub(crate) fn without_fields(obj: &Value, skip: &[&str]) -> Value {
    let Value::Object(top) = obj else {
        return obj.clone();
    };
    let copy = top
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| {
            let v = match v {
                Value::Object(meta) if k == "metadata" => Value::Object(
                    meta.iter()
                        .filter(|(mk, _)| *mk != "managedFields")
                        .map(|(mk, mv)| (mk.clone(), mv.clone()))
                        .collect(),
                ),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    Value::Object(copy)
}

fn set_managed_fields(obj: &mut Value, managers: &Managers) {
    put_managed_fields(obj, encode(managers));
}

/// Stores encoded entries as `obj`'s managedFields; an empty list leaves none (upstream omits it).
fn put_managed_fields(obj: &mut Value, encoded: Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if encoded.as_array().is_some_and(Vec::is_empty) {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), encoded);
    }
}

/// Adds the zero value's fields `obj` lacks.
#[cfg(test)]
fn fill_zero(zero: &Value, obj: &mut Value) {
    let (Value::Object(z), Value::Object(o)) = (zero, obj) else {
        return;
    };
    for (k, zv) in z {
        match o.get_mut(k) {
            Some(ov) => fill_zero(zv, ov),
            None => {
                o.insert(k.clone(), zv.clone());
            }
        }
    }
}

/// The comparison of two objects with the fields management ignores taken out.
fn compare_managed(
    ri: &ResourceInfo,
    sub: Option<&str>,
    live: &Value,
    new: &Value,
) -> typed::Comparison {
    // Whole top-level fields the comparison ignores (a status write's spec) are left out of it
    // before, not stripped from its result after: the same sets, without copying them. Both
    // sides are compared as Go would hold them: the zero value's structs are never absent.
    let skip = top_level_ignored(ri, sub);
    let c = typed::compare_filled(ri, live, new, schema::zero_object(ri), &skip);
    without_ignored(ri, sub, c)
}

/// The comparison without the paths management ignores below the top level.
fn without_ignored(
    ri: &ResourceInfo,
    sub: Option<&str>,
    mut c: typed::Comparison,
) -> typed::Comparison {
    let paths = ignored_field_paths(ri, sub);
    strip_paths(paths, &mut c.added);
    strip_paths(paths, &mut c.modified);
    strip_paths(paths, &mut c.removed);
    c
}

/// The ignored paths that are whole top-level fields.
fn top_level_ignored(ri: &ResourceInfo, sub: Option<&str>) -> Vec<&'static str> {
    schema::ignored_paths(ri, sub)
        .iter()
        .filter_map(|p| match p {
            [field] => Some(*field),
            _ => None,
        })
        .collect()
}

/// `compare_managed` as copies: both objects trimmed and filled with the zero value's fields,
/// then compared (what `typed::compare_filled` does without copying).
#[cfg(test)]
fn compare_managed_by_copies(
    ri: &ResourceInfo,
    sub: Option<&str>,
    live: &Value,
    new: &Value,
) -> typed::Comparison {
    let skip = top_level_ignored(ri, sub);
    let zero = without_fields(schema::zero_object(ri), &skip);
    let mut lhs = without_fields(live, &skip);
    let mut rhs = without_fields(new, &skip);
    fill_zero(&zero, &mut lhs);
    fill_zero(&zero, &mut rhs);
    without_ignored(ri, sub, typed::compare(ri, &lhs, &rhs))
}

/// Records an `Update` by `manager` on `next` (the object about to be stored).
///
/// `live` is the stored object (`None` on create); `requested` the managedFields the client sent:
/// used instead of the live ones when they decode and are not empty (so a client can rewrite
/// them, as kubectl does when upgrading from client-side apply), `[{}]` clears them, anything
/// else keeps the live ones (upstream `decodeLiveOrNew`). A subresource cannot rewrite them.
pub fn record_update(
    ri: &ResourceInfo,
    manager: &FieldManager,
    live: Option<&Value>,
    requested: Option<Value>,
    next: &mut Value,
    now: &str,
) {
    if live.is_none() && requested.is_none() {
        record_create(ri, manager, next, now);
        return;
    }
    let mut requested = requested;
    if !record_update_in_place(ri, manager, live, &mut requested, next, now) {
        record_update_decoded(ri, manager, live, requested.as_ref(), next, now);
    }
}

/// The field sets of created objects, by the hash of the object's shape (see [`shape`]): objects
/// of one shape get one set, and most creates repeat a shape (a component's Events, a
/// Deployment's ReplicaSets). Many do not: a pod's projected volume, a Node's addresses and a
/// CSINode's driver `nodeID` each put a name of their own in a list, so their shape is theirs
/// alone. A set is kept only at its shape's second create (the first leaves its hash in
/// `seen`), so those cost 16 bytes, not their shape and set (7 KB a Node). Kept for the
/// process, each map cleared when it grows past its bound.
#[derive(Default)]
struct CreatedSets {
    sets: HashMap<u128, Value>,
    seen: std::collections::HashSet<u128>,
}

impl CreatedSets {
    /// Remembers that an object of shape `key` was created with `fields` (computed only when
    /// they are to be kept): kept at the shape's second create.
    fn created(&mut self, key: u128, fields: impl FnOnce() -> Option<Value>) {
        if !self.seen.remove(&key) {
            if self.seen.len() >= SEEN_SHAPES_MAX {
                self.seen.clear();
            }
            self.seen.insert(key);
            return;
        }
        if let Some(fields) = fields() {
            if self.sets.len() >= CREATED_SETS_MAX {
                self.sets.clear();
            }
            self.sets.insert(key, fields);
        }
    }
}

static CREATED_SETS: std::sync::LazyLock<std::sync::Mutex<CreatedSets>> =
    std::sync::LazyLock::new(Default::default);
const CREATED_SETS_MAX: usize = 4096;
const SEEN_SHAPES_MAX: usize = 65_536;

/// [`record_update`] of a create that sends no managed fields: one entry, the writer's, with
/// every field the object sets. Its `fieldsV1` is the one computed for an earlier object of the
/// same shape; the first two of a shape compute it the whole way ([`record_update_decoded`]).
fn record_create(ri: &ResourceInfo, manager: &FieldManager, next: &mut Value, now: &str) {
    // A 128-bit hash names the shape, as the process's shared decodes name documents: two
    // shapes with one hash are not expected in the life of the universe.
    let key = xxhash_rust::xxh3::xxh3_128(&shape(ri, manager.subresource.as_deref(), next));
    let known = CREATED_SETS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .sets
        .get(&key)
        .cloned();
    if let Some(fields) = known {
        let me = ManagerKey::of(manager, Operation::Update, &ri.api_version());
        let entry = encode_entry_fields(&me, &ri.api_version(), Some(now), fields);
        put_managed_fields(next, Value::Array(vec![entry]));
        return;
    }
    record_update_decoded(ri, manager, None, None, next, now);
    let fields = || {
        next.get("metadata")
            .and_then(|m| m.get("managedFields"))
            .and_then(Value::as_array)
            .filter(|entries| entries.len() == 1)
            .and_then(|entries| entries[0].get("fieldsV1"))
            .cloned()
    };
    CREATED_SETS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .created(key, fields);
}

/// What a created object's field set depends on, as bytes: the kind and subresource (whose
/// schema and ignored paths the comparison reads), every object key at every level, the type of
/// every value, and the whole value of every scalar inside a list (list-map keys, set values and
/// positions are read from there). A scalar's value outside lists never changes the set: the
/// zero object it is compared with holds only objects and nulls there.
fn shape(ri: &ResourceInfo, sub: Option<&str>, obj: &Value) -> Vec<u8> {
    fn text(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    fn walk(out: &mut Vec<u8>, v: &Value, in_list: bool) {
        match v {
            Value::Null => out.push(b'n'),
            Value::Bool(b) => out.push(match (in_list, b) {
                (false, _) => b'b',
                (true, true) => b't',
                (true, false) => b'f',
            }),
            Value::Number(n) => {
                out.push(b'#');
                if in_list {
                    text(out, &n.to_string());
                }
            }
            Value::String(s) => {
                out.push(b's');
                if in_list {
                    text(out, s);
                }
            }
            Value::Array(items) => {
                out.push(b'[');
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    walk(out, item, true);
                }
            }
            Value::Object(m) => {
                out.push(b'{');
                out.extend_from_slice(&(m.len() as u64).to_le_bytes());
                for (k, v) in m {
                    text(out, k);
                    walk(out, v, in_list);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(512);
    for part in [
        ri.group,
        ri.version,
        ri.kind,
        ri.plural,
        sub.unwrap_or("\0"),
    ] {
        text(&mut out, part);
    }
    walk(&mut out, obj, false);
    out
}

/// [`record_update`] on every entry decoded, changed and encoded again: what it does when the
/// entries kept are not the stored ones, or when the Update entries must be capped.
fn record_update_decoded(
    ri: &ResourceInfo,
    manager: &FieldManager,
    live: Option<&Value>,
    requested: Option<&Value>,
    next: &mut Value,
    now: &str,
) {
    let sub = manager.subresource.as_deref();
    let live_fields =
        || decode(live.and_then(|l| l.at("/metadata/managedFields"))).unwrap_or_default();
    let mut managers = if sub.is_some() {
        live_fields()
    } else if is_reset(requested) {
        Managers::new()
    } else {
        match decode(requested) {
            Ok(m) if !m.is_empty() => m,
            _ => live_fields(),
        }
    };
    let zero = schema::zero_object(ri);
    let mut c = compare_managed(ri, sub, live.unwrap_or(zero), next);
    // The sets are updated in place: most entries lose nothing, and copying them was most of
    // the cost of an update.
    let mut changed = std::mem::take(&mut c.added);
    changed.absorb(&c.modified);
    let me = ManagerKey::of(manager, Operation::Update, &ri.api_version());
    for (k, e) in managers.iter_mut() {
        if *k != me {
            e.set.subtract(&changed);
            e.set.subtract(&c.removed);
        }
    }
    let (set, time) = match managers.remove(&me) {
        Some(e) => writers_entry(e.set, e.time, &changed, &c.removed, now),
        None => writers_entry(Set::new(), None, &changed, &c.removed, now),
    };
    managers.insert(
        me,
        Entry {
            set,
            api_version: ri.api_version(),
            time,
        },
    );
    managers.retain(|_, e| !e.set.is_empty());
    cap_update_managers(&mut managers);
    set_managed_fields(next, &managers);
}

/// [`record_update`] where it keeps the stored entries (a subresource write, or a request that
/// sends them back as they are or not at all), which are this server's own encoding: an entry
/// the write takes no field from is kept as it is, its set neither decoded nor encoded (a pod's
/// status write touches the kubelet's entry and seldom any other). `false`, with nothing done,
/// where that does not apply: the caller then decodes every entry. The kept entries are moved
/// out of `requested` (taken then) when it is the stored entries sent back, as a patch sends
/// them, else copied from `live`.
fn record_update_in_place(
    ri: &ResourceInfo,
    manager: &FieldManager,
    live: Option<&Value>,
    requested: &mut Option<Value>,
    next: &mut Value,
    now: &str,
) -> bool {
    let sub = manager.subresource.as_deref();
    let Some(stored) = live.and_then(|l| l.at("/metadata/managedFields")) else {
        return false;
    };
    let sent_back = requested.as_ref() == Some(stored);
    let keeps_stored = sub.is_some()
        || sent_back
        || match requested.as_ref() {
            None => true,
            Some(r) if is_reset(Some(r)) => false,
            Some(r) => r.as_array().is_some_and(Vec::is_empty) || r.is_null(),
        };
    let Some(list) = stored.as_array().filter(|_| keeps_stored) else {
        return false;
    };
    let mut headers = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        match (decode_header(i, e), e.get("fieldsV1")) {
            (Ok(h), Some(fields)) if fields.is_object() => headers.push((h, i, fields)),
            _ => return false,
        }
    }
    let zero = schema::zero_object(ri);
    let mut c = compare_managed(ri, sub, live.unwrap_or(zero), next);
    let mut changed = std::mem::take(&mut c.added);
    changed.absorb(&c.modified);
    let me = ManagerKey::of(manager, Operation::Update, &ri.api_version());
    // Each entry as it goes out: kept (the stored JSON at this index) or changed (decoded).
    enum Out {
        Kept(usize),
        /// Kept with its time moved to now: the writer's own entry when it changed only
        /// fields it already managed (a heartbeat).
        Retimed(usize),
        Changed(ManagerKey, Entry),
    }
    let mut out: Vec<(EntryOrder, Out)> = Vec::with_capacity(headers.len() + 1);
    let mut mine = None;
    for ((key, api_version, time), i, fields) in headers {
        if key == me {
            mine = Some((api_version, time, i, fields));
            continue;
        }
        let order = entry_order(&key, time.as_deref(), &api_version);
        if !touches(fields, &changed) && !touches(fields, &c.removed) {
            out.push((order, Out::Kept(i)));
            continue;
        }
        let Ok(mut set) = Set::from_fields_v1(fields) else {
            return false;
        };
        set.subtract(&changed);
        set.subtract(&c.removed);
        if !set.is_empty() {
            let entry = Entry {
                set,
                api_version,
                time,
            };
            out.push((order, Out::Changed(key, entry)));
        }
    }
    match mine {
        Some((api_version, time, i, fields))
            if changed.is_empty() && !touches(fields, &c.removed) =>
        {
            out.push((
                entry_order(&me, time.as_deref(), &api_version),
                Out::Kept(i),
            ));
        }
        Some((api_version, Some(_), i, fields))
            if !touches(fields, &c.removed) && holds(fields, &changed) =>
        {
            out.push((entry_order(&me, Some(now), &api_version), Out::Retimed(i)));
        }
        mine => {
            let (set, time) = match mine {
                Some((_, time, _, fields)) => match Set::from_fields_v1(fields) {
                    Ok(set) => writers_entry(set, time, &changed, &c.removed, now),
                    Err(_) => return false,
                },
                None => writers_entry(Set::new(), None, &changed, &c.removed, now),
            };
            if !set.is_empty() {
                let entry = Entry {
                    set,
                    api_version: ri.api_version(),
                    time,
                };
                out.push((
                    entry_order(&me, entry.time.as_deref(), &entry.api_version),
                    Out::Changed(me, entry),
                ));
            }
        }
    }
    let updaters = out
        .iter()
        .filter(|(order, _)| order.0 == Operation::Update)
        .count();
    if updaters > MAX_UPDATE_MANAGERS {
        return false;
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sent = match requested.take() {
        Some(Value::Array(sent)) if sent_back => Some(sent),
        other => {
            *requested = other;
            None
        }
    };
    // Else the object to store usually still holds the stored entries (a status write's object
    // is the stored one with a new status): the kept ones are moved out of it, not copied.
    if sent.is_none()
        && let Some(own) = next
            .get_mut("metadata")
            .and_then(|m| m.get_mut("managedFields"))
            .filter(|own| **own == *stored)
        && let Value::Array(own) = std::mem::take(own)
    {
        sent = Some(own);
    }
    let entries: Vec<Value> = out
        .into_iter()
        .map(|(_, o)| match (o, sent.as_mut()) {
            (Out::Kept(i), Some(sent)) => sent.get_mut(i).map(Value::take).unwrap_or_default(),
            (Out::Kept(i), None) => list[i].clone(),
            (Out::Retimed(i), sent) => {
                let mut e = match sent {
                    Some(sent) => sent.get_mut(i).map(Value::take).unwrap_or_default(),
                    None => list[i].clone(),
                };
                if let Some(t) = e.get_mut("time") {
                    *t = Value::String(now.to_string());
                }
                e
            }
            (Out::Changed(k, e), _) => encode_entry(&k, &e),
        })
        .collect();
    put_managed_fields(next, Value::Array(entries));
    true
}

/// Whether the `fieldsV1` JSON `fields` has a member path that `set` has: a set subtracted
/// from it would change it.
fn touches(fields: &Value, set: &Set) -> bool {
    let Value::Object(m) = fields else {
        return false;
    };
    set.members().any(|pe| {
        m.get(&pe.encode())
            .and_then(Value::as_object)
            .is_some_and(|c| c.is_empty() || c.contains_key("."))
    }) || set
        .children()
        .any(|(pe, c)| m.get(&pe.encode()).is_some_and(|child| touches(child, c)))
}

/// Whether the encoded set `fields` holds every path of `set` (a member as a member, not only as
/// the parent of others): a writer changing only fields it already manages keeps its set.
fn holds(fields: &Value, set: &Set) -> bool {
    let Value::Object(m) = fields else {
        return set.is_empty();
    };
    set.members().all(|pe| {
        m.get(&pe.encode())
            .and_then(Value::as_object)
            .is_some_and(|c| c.is_empty() || c.contains_key("."))
    }) && set
        .children()
        .all(|(pe, c)| c.is_empty() || m.get(&pe.encode()).is_some_and(|child| holds(child, c)))
}

/// The writer's own entry after its update: what it removed goes, what it changed comes in, and
/// its time moves to `now` only when it changed something.
fn writers_entry(
    mut set: Set,
    time: Option<String>,
    changed: &Set,
    removed: &Set,
    now: &str,
) -> (Set, Option<String>) {
    set.subtract(removed);
    set.absorb(changed);
    let time = if changed.is_empty() {
        time
    } else {
        Some(now.to_string())
    };
    (set, time)
}

/// Upstream keeps at most this many `Update` entries (`DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;
/// The entry older updates are merged into.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Upstream `capManagersManager`: past ten Update entries, the oldest are merged per apiVersion
/// into one `ancient-changes` entry (the first oldest of a version starts the bucket; each merge
/// takes the merged entry's time).
fn cap_update_managers(managers: &mut Managers) {
    let mut updaters: Vec<(String, ManagerKey)> = managers
        .iter()
        .filter(|(k, _)| k.operation == Operation::Update)
        .map(|(k, e)| (e.time.clone().unwrap_or_default(), k.clone()))
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut length = updaters.len();
    let mut first_of_version: BTreeMap<String, ManagerKey> = BTreeMap::new();
    for (time, key) in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(entry) = managers.get(&key).cloned() else {
            continue;
        };
        let bucket = ManagerKey {
            manager: ANCIENT_CHANGES.to_string(),
            operation: Operation::Update,
            api_version: entry.api_version.clone(),
            subresource: String::new(),
        };
        match first_of_version.get(&entry.api_version) {
            Some(first) => {
                if !managers.contains_key(&bucket)
                    && let Some(f) = managers.remove(first)
                {
                    managers.insert(bucket.clone(), f);
                }
                managers.remove(&key);
                if let Some(b) = managers.get_mut(&bucket) {
                    b.set = entry.set.union(&b.set);
                    b.time = Some(time);
                }
                length = length.saturating_sub(1);
            }
            None => {
                first_of_version.insert(entry.api_version.clone(), key);
            }
        }
    }
}

/// One conflict: the manager owning the field, and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: ManagerKey,
    pub path: Path,
}

/// Upstream `NewConflictError`: 409 Conflict with a `FieldManagerConflict` cause per field.
pub fn conflict_error(ri: &ResourceInfo, name: &str, conflicts: &[Conflict]) -> ApiError {
    let message = if let [c] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager.describe(),
            path_string(&c.path)
        )
    } else {
        let mut by_manager: BTreeMap<&ManagerKey, Vec<String>> = BTreeMap::new();
        for c in conflicts {
            by_manager
                .entry(&c.manager)
                .or_default()
                .push(path_string(&c.path));
        }
        // Upstream sorts by the JSON manager identifier, which begins with the manager's name.
        let mut groups: Vec<(&ManagerKey, Vec<String>)> = by_manager.into_iter().collect();
        groups.sort_by_key(|(k, _)| (k.manager.clone(), k.operation, k.api_version.clone()));
        let mut lines = Vec::new();
        for (k, paths) in groups {
            lines.push(format!("conflicts with {}:", k.describe()));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with {}", c.manager.describe()),
                   "field": path_string(&c.path)})
        })
        .collect();
    let mut details = json!({"name": name, "kind": ri.plural, "causes": causes});
    if !ri.group.is_empty() {
        details["group"] = json!(ri.group);
    }
    ApiError::new(409, "Conflict", message).with_details(details)
}

/// The fields `last-applied-configuration` set to what the live object still holds: kubectl's
/// client-side apply owned them, so `kubectl apply --server-side` may take them over.
fn allowed_from_last_applied(ri: &ResourceInfo, live: &Value) -> Option<Set> {
    let text = live
        .at("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(ri.api_version().as_str()) {
        return None;
    }
    let set = typed::to_field_set(ri, &last);
    let c = typed::compare(ri, &last, &without_managed_fields(live));
    Some(
        set.difference(&c.modified)
            .difference(&c.added)
            .difference(&c.removed),
    )
}

/// JSON with keys sorted at every level, as Go marshals an unstructured object.
fn sorted_json(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, sorted_json(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_json).collect()),
        other => other.clone(),
    }
}

/// The annotation text for an applied configuration (upstream `buildLastApplied`): the config
/// without its own annotation (an annotations map the config has stays, even emptied).
fn last_applied_text(config: &Value) -> String {
    let mut c = config.clone();
    if let Some(ann) = c
        .at_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        ann.remove(LAST_APPLIED);
    }
    sorted_json(&c).to_string()
}

/// Checks an apply configuration before it is applied: its type meta must be the resource's
/// (400, upstream's `Incorrect version/kind specified in apply patch`), its name the URL's, and
/// every field must be declared by the kind's schema (upstream's typed conversion refuses the
/// patch whatever `fieldValidation` says, with a 500 and no reason).
pub fn check_config(
    ri: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    config: &Value,
) -> ApiResult<()> {
    let gv = ri.api_version();
    let av = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if av != gv {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {gv}"
        )));
    }
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != ri.kind {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {kind}, expected: {}",
            ri.kind
        )));
    }
    let body_name = config
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let typed = crate::schema::prune(ri, config).map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            ri.kind, ri.version, ri.kind
        ))
    })?;
    let mut undeclared = typed::undeclared(ri, config, &typed.0);
    undeclared.sort();
    if !undeclared.is_empty() {
        let group = ri.group;
        let what: Vec<String> = undeclared
            .iter()
            .map(|p| format!("{p}: field not declared in schema"))
            .collect();
        return Err(ApiError::new(
            500,
            "",
            format!(
                "failed to create typed patch object ({}/{name}; {group}/{}, Kind={}): {}",
                namespace.unwrap_or(""),
                ri.version,
                ri.kind,
                what.join("\n")
            ),
        ));
    }
    Ok(())
}

/// Upstream's prune: everything the applier owned last time is taken out of the merged object,
/// what an applier still specifies is put back, and of the rest only what the applier owned goes.
/// A map or struct the applier owned as a whole (an Update entry's `.`) thus loses only the
/// entries nobody applies any more.
fn prune(ri: &ResourceInfo, merged: &Value, last: &Set, applied: &Set) -> Value {
    let merged_set = typed::to_field_set(ri, merged);
    let mut pruned = merged.clone();
    typed::remove_items(ri, &mut pruned, last);
    let pruned_set = typed::to_field_set(ri, &pruned);
    let unowned = merged_set.difference(&pruned_set.union(applied));
    let mut owned_back = merged.clone();
    typed::remove_items(ri, &mut owned_back, &unowned);
    let removed = merged_set
        .difference(&typed::to_field_set(ri, &owned_back))
        .intersection(last);
    let mut out = merged.clone();
    typed::remove_items(ri, &mut out, &removed);
    out
}

/// A server-side apply of `config` by `manager` onto `live` (`None`: the object does not exist
/// yet). Returns the object to store, its managedFields set.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    ri: &ResourceInfo,
    name: &str,
    manager: &FieldManager,
    live: Option<&Value>,
    config: &Value,
    force: bool,
    now: &str,
) -> ApiResult<Value> {
    match apply_once(ri, manager, live, config, force, now) {
        Ok(obj) => Ok(obj),
        Err(conflicts) => {
            // kubectl's upgrade from client-side apply: conflicts on what the last-applied
            // configuration owned are taken over.
            if manager.name == KUBECTL
                && let Some(allowed) = live.and_then(|l| allowed_from_last_applied(ri, l))
            {
                let left: Vec<Conflict> = conflicts
                    .iter()
                    .filter(|c| !allowed.has(&c.path))
                    .cloned()
                    .collect();
                if left.is_empty() {
                    return apply_once(ri, manager, live, config, true, now)
                        .map_err(|c| conflict_error(ri, name, &c));
                }
                return Err(conflict_error(ri, name, &left));
            }
            Err(conflict_error(ri, name, &conflicts))
        }
    }
}

fn apply_once(
    ri: &ResourceInfo,
    manager: &FieldManager,
    live: Option<&Value>,
    config: &Value,
    force: bool,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let sub = manager.subresource.as_deref();
    let mut managers =
        decode(live.and_then(|l| l.at("/metadata/managedFields"))).unwrap_or_default();
    let live_obj = live.map(without_managed_fields);
    let mut cfg = config.clone();
    if let Some(meta) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let mut new = typed::merge(ri, live_obj.as_ref().unwrap_or(&json!({})), &cfg);
    let mut config_set = typed::to_field_set(ri, &cfg);
    strip_ignored(ri, sub, &mut config_set);
    let me = ManagerKey::of(manager, Operation::Apply, &ri.api_version());
    let last = managers.remove(&me);
    // Fields this manager applied last time and no longer specifies go, unless an applier (this
    // one included) still specifies them.
    if let Some(last) = &last {
        let mut applied = managers
            .iter()
            .filter(|(k, _)| k.operation == Operation::Apply)
            .fold(config_set.clone(), |acc, (_, e)| acc.union(&e.set));
        // The client-side apply annotation stays for kubectl, which keeps it in step below.
        if manager.name == KUBECTL {
            applied.insert(&[
                PathElement::field("metadata"),
                PathElement::field("annotations"),
                PathElement::field(LAST_APPLIED),
            ]);
        }
        new = prune(ri, &new, &last.set, &applied);
    }
    let zero = schema::zero_object(ri);
    let c = compare_managed(ri, sub, live_obj.as_ref().unwrap_or(zero), &new);
    let changed = c.changed();
    let mut conflicts = Vec::new();
    for (k, e) in managers.iter() {
        for path in e.set.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: k.clone(),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for e in managers.values_mut() {
        e.set = e.set.difference(&changed).difference(&c.removed);
    }
    let unchanged = changed.is_empty()
        && c.removed.is_empty()
        && last.as_ref().is_some_and(|l| l.set == config_set);
    let time = if unchanged {
        last.and_then(|l| l.time)
    } else {
        Some(now.to_string())
    };
    managers.insert(
        me,
        Entry {
            set: config_set,
            api_version: ri.api_version(),
            time,
        },
    );
    managers.retain(|_, e| !e.set.is_empty());
    // Keep the client-side apply annotation in step with what kubectl applies server-side.
    if manager.name == KUBECTL
        && new
            .at("/metadata/annotations")
            .and_then(|a| a.get(LAST_APPLIED))
            .is_some()
    {
        new["metadata"]["annotations"][LAST_APPLIED] = json!(last_applied_text(config));
    }
    set_managed_fields(&mut new, &managers);
    Ok(new)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod api_tests;
