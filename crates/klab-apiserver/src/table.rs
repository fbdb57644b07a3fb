//! Server-side Table output (meta.k8s.io/v1 Table): columns and cells per resource (§b.6, §b.7).
//!
//! The real API server renders `kubectl get` output itself: it runs upstream's printers
//! (`pkg/printers/internalversion/printers.go`) with `Wide: true`, so every column definition
//! (priority 0 and 1) and every cell travels to the client, which only hides priority-1 columns
//! unless `-o wide`. This module is that printer set for the resources in
//! [`crate::registry::RESOURCES`], as pure functions of the stored JSON object and `now`
//! (ages are computed by the server, as strings, with upstream's `HumanDuration`).
//!
//! Objects are read as `serde_json::Value`: a missing field reads as its Go zero value, which is
//! what upstream's printers see after decoding. Printers never fail: a malformed field prints as
//! its zero value rather than failing the whole list.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use klab_api::names;
use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;

// ------------------------------------------------------------------------------------------------
// Content negotiation
// ------------------------------------------------------------------------------------------------

/// `includeObject` query parameter of a Table request: what each row's `object` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object (`"object": null`).
    None,
    /// A `PartialObjectMetadata` with the full `metadata` (the default: kubectl needs it for
    /// the NAMESPACE column of `-A` and for `--show-labels`).
    Metadata,
    /// The full object in its API version, with `kind`/`apiVersion` set (`--sort-by`).
    Object,
}

impl IncludeObject {
    /// Parses the query value; absent means `Metadata`. The error text is upstream's, for a
    /// 400 BadRequest.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(format!("unrecognized includeObject value: {other:?}")),
        }
    }
}

/// What one `Accept` media range asks for, as far as object encoding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptedForm {
    /// `application/json;as=Table;g=meta.k8s.io;v=<version>`.
    Table { version: &'static str },
    /// `application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=<version>`.
    PartialMetadata { list: bool, version: &'static str },
    /// Plain JSON (`application/json`, `application/*`, `*/*`).
    Json,
}

/// One parsed media range: `type/subtype` lower-cased, parameters as (lower-cased name, value).
pub(crate) struct MediaRange<'a> {
    pub(crate) mime: String,
    pub(crate) params: Vec<(String, &'a str)>,
}

impl MediaRange<'_> {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}

/// Splits an `Accept` header into media ranges, in the client's order. Parameter order is free
/// (kubectl sends `as;v;g`, kube-rs `as;g;v`).
pub(crate) fn media_ranges(accept: &str) -> Vec<MediaRange<'_>> {
    accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';');
            let mime = parts.next()?.trim().to_ascii_lowercase();
            if mime.is_empty() {
                return None;
            }
            let params = parts
                .filter_map(|p| {
                    let (n, v) = p.split_once('=')?;
                    Some((n.trim().to_ascii_lowercase(), v.trim().trim_matches('"')))
                })
                .collect();
            Some(MediaRange { mime, params })
        })
        .collect()
}

fn meta_version(v: Option<&str>) -> Option<&'static str> {
    match v {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    }
}

/// The first form in the `Accept` header this server can produce for a GET/LIST/WATCH of an
/// object, or `None` when nothing is acceptable (406). A missing header means JSON. Ranges the
/// server cannot produce (protobuf, YAML, unknown `as=`) are skipped, as the real server's
/// negotiation skips them.
pub fn accepted_form(accept: Option<&str>) -> Option<AcceptedForm> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(AcceptedForm::Json);
    };
    for range in media_ranges(accept) {
        let json_like = matches!(
            range.mime.as_str(),
            "application/json" | "application/*" | "*/*"
        );
        if !json_like {
            continue;
        }
        match range.param("as") {
            None => return Some(AcceptedForm::Json),
            Some(kind) => {
                if range.param("g") != Some("meta.k8s.io") {
                    continue;
                }
                let Some(version) = meta_version(range.param("v")) else {
                    continue;
                };
                match kind {
                    "Table" => return Some(AcceptedForm::Table { version }),
                    "PartialObjectMetadata" => {
                        return Some(AcceptedForm::PartialMetadata {
                            list: false,
                            version,
                        });
                    }
                    "PartialObjectMetadataList" => {
                        return Some(AcceptedForm::PartialMetadata {
                            list: true,
                            version,
                        });
                    }
                    _ => continue,
                }
            }
        }
    }
    None
}

/// Whether the client asked for a `meta.k8s.io` Table (`as=Table;g=meta.k8s.io;v=v1` or
/// `v1beta1`, parameters in any order) ahead of anything else this server can produce.
pub fn wants_table(accept: &str) -> bool {
    matches!(
        accepted_form(Some(accept)),
        Some(AcceptedForm::Table { .. })
    )
}

/// `Some(list)` when the client (kube-rs `get_metadata`/`list_metadata`) asked for
/// `PartialObjectMetadata` (`list = false`) or `PartialObjectMetadataList` (`list = true`).
pub fn wants_partial_metadata(accept: &str) -> Option<bool> {
    match accepted_form(Some(accept)) {
        Some(AcceptedForm::PartialMetadata { list, .. }) => Some(list),
        _ => None,
    }
}

/// `meta.k8s.io/v1` `PartialObjectMetadata` carrying the object's full `metadata`.
pub fn partial_object_metadata(obj: &Value) -> Value {
    crate::object::fields([
        ("kind", "PartialObjectMetadata".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        (
            "metadata",
            obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        ),
    ])
}

/// `meta.k8s.io/v1` `PartialObjectMetadataList` for a list response (`list_meta` is the list's
/// `metadata`: resourceVersion, continue, remainingItemCount).
pub fn partial_object_metadata_list(items: &[Value], list_meta: Value) -> Value {
    crate::object::fields([
        ("kind", "PartialObjectMetadataList".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        ("metadata", list_meta),
        (
            "items",
            Value::Array(items.iter().map(partial_object_metadata).collect()),
        ),
    ])
}

// ------------------------------------------------------------------------------------------------
// The Table object
// ------------------------------------------------------------------------------------------------

/// A `meta.k8s.io/v1` Table of `items` (already filtered and ordered by the caller).
///
/// `with_columns = false` is for watch events after the first: upstream sends those without
/// headers, which serializes as `"columnDefinitions": null` (a nil Go slice).
pub fn table(
    ri: &ResourceInfo,
    items: &[Value],
    include: IncludeObject,
    list_meta: Value,
    now: Timestamp,
    with_columns: bool,
) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| table_row(ri, obj, include, now))
        .collect();
    let columns = if with_columns {
        Value::Array(column_definitions(ri))
    } else {
        Value::Null
    };
    crate::object::fields([
        ("kind", "Table".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        ("metadata", list_meta),
        ("columnDefinitions", columns),
        ("rows", Value::Array(rows)),
    ])
}

/// One `TableRow`: cells, optional conditions, and the object as `include` asks.
pub fn table_row(ri: &ResourceInfo, obj: &Value, include: IncludeObject, now: Timestamp) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(row_cells(ri, obj, now)));
    if let Some(conditions) = row_conditions(ri, obj) {
        row.insert("conditions".into(), conditions);
    }
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_object_metadata(obj),
        IncludeObject::Object => with_type_meta(ri, obj),
    };
    row.insert("object".into(), object);
    Value::Object(row)
}

/// Paths of an object that no printer reads: a Table built from stored documents leaves them
/// out of the decoded objects (`json_field::decode_without`). Row objects never carry them
/// from the decoded object: a `PartialObjectMetadata` is written from the stored metadata's
/// bytes (`table_json`), and `includeObject=Object` decodes everything.
pub fn unprinted(ri: &ResourceInfo) -> &'static [&'static [&'static str]] {
    const MANAGED_FIELDS: &[&str] = &["metadata", "managedFields"];
    // A node's image list (up to 50 entries of digests and tags) is its largest status field.
    const NODE_IMAGES: &[&str] = &["status", "images"];
    match printer(ri) {
        Printer::Node => &[MANAGED_FIELDS, NODE_IMAGES],
        _ => &[MANAGED_FIELDS],
    }
}

/// A Table's JSON as `table(…, true)` encodes it, for rows given as decoded objects each with
/// its stored `metadata`'s bytes as a read presents them (`json_field::metadata_presented`).
/// With `IncludeObject::Metadata` a row's `PartialObjectMetadata` is written from those bytes,
/// so the object may be decoded without its [`unprinted`] paths; a row without bytes is
/// written from its object, which must then be whole.
pub fn table_json(
    ri: &ResourceInfo,
    rows: &[(Value, Option<Vec<u8>>)],
    include: IncludeObject,
    list_meta: Value,
    now: Timestamp,
) -> serde_json::Result<Vec<u8>> {
    let head = serde_json::to_vec(&crate::object::fields([
        ("kind", "Table".into()),
        ("apiVersion", "meta.k8s.io/v1".into()),
        ("metadata", list_meta),
        ("columnDefinitions", Value::Array(column_definitions(ri))),
    ]))?;
    let mut out = Vec::with_capacity(head.len().saturating_add(rows.len().saturating_mul(1024)));
    out.extend_from_slice(head.strip_suffix(b"}").unwrap_or(&head));
    out.extend_from_slice(b",\"rows\":[");
    for (i, (obj, meta)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match (include, meta) {
            (IncludeObject::Metadata, Some(meta)) => {
                let mut row = Map::new();
                row.insert("cells".into(), Value::Array(row_cells(ri, obj, now)));
                if let Some(conditions) = row_conditions(ri, obj) {
                    row.insert("conditions".into(), conditions);
                }
                let cells = serde_json::to_vec(&Value::Object(row))?;
                out.extend_from_slice(cells.strip_suffix(b"}").unwrap_or(&cells));
                out.extend_from_slice(
                    b",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":",
                );
                out.extend_from_slice(meta);
                out.extend_from_slice(b"}}");
            }
            _ => serde_json::to_writer(&mut out, &table_row(ri, obj, include, now))?,
        }
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

/// The object with `kind`/`apiVersion` filled in (list items may be stored without them).
fn with_type_meta(ri: &ResourceInfo, obj: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(ri.kind.to_string()));
    out.insert("apiVersion".into(), Value::String(ri.api_version()));
    if let Value::Object(fields) = obj {
        for (k, v) in fields {
            if k != "kind" && k != "apiVersion" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The Table upstream's `printStatus` makes of a `Status` (an `ERROR` event of a Table watch):
/// columns `Status, Reason, Message`.
pub fn status_table(status: &Value, with_columns: bool) -> Value {
    let columns = vec![
        column("Status", "string", "", D_STATUS_STATUS, 0),
        column("Reason", "string", "", D_STATUS_REASON, 0),
        // Upstream looks up `SwaggerDoc()["Message"]` (capital M): the description is empty.
        column("Message", "string", "", "", 0),
    ];
    let cells = vec![
        Value::String(gs(status, &["status"]).to_string()),
        Value::String(gs(status, &["reason"]).to_string()),
        Value::String(gs(status, &["message"]).to_string()),
    ];
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": if with_columns { Value::Array(columns) } else { Value::Null },
        "rows": [{"cells": cells, "object": Value::Null}],
    })
}

/// The Table upstream's `printScale` makes of an `autoscaling/v1` `Scale` (`kubectl get
/// --subresource=scale`): `Name, Desired, Available, Age`. Upstream gives its Name column no
/// `name` format.
pub fn scale_table(
    scale: &Value,
    include: IncludeObject,
    now: Timestamp,
    with_columns: bool,
) -> Value {
    let columns = vec![
        column("Name", "string", "", D_META_NAME, 0),
        column(
            "Desired",
            "integer",
            "",
            "replicas is the desired number of instances for the scaled object.",
            0,
        ),
        column(
            "Available",
            "integer",
            "",
            "replicas is the actual number of observed instances of the scaled object.",
            0,
        ),
        age_col(),
    ];
    let cells = vec![
        str_cell(gs(scale, &["metadata", "name"])),
        json!(gi(scale, &["spec", "replicas"])),
        json!(gi(scale, &["status", "replicas"])),
        Value::String(translate_since(
            gts(scale, &["metadata", "creationTimestamp"]),
            now,
        )),
    ];
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_object_metadata(scale),
        IncludeObject::Object => scale.clone(),
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": gs(scale, &["metadata", "resourceVersion"])},
        "columnDefinitions": if with_columns { Value::Array(columns) } else { Value::Null },
        "rows": [{"cells": cells, "object": object}],
    })
}

// ------------------------------------------------------------------------------------------------
// Printers
// ------------------------------------------------------------------------------------------------

/// Which upstream printer renders a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Printer {
    Pod,
    Node,
    /// core/v1 Event.
    Event,
    /// events.k8s.io/v1 Event: upstream converts it to the internal core Event and prints it with
    /// the same printer.
    EventsV1,
    Namespace,
    Lease,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    PodDisruptionBudget,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeAttachment,
    StorageClass,
    CSIDriver,
    CSINode,
    CertificateSigningRequest,
    PriorityClass,
    /// rbac.authorization.k8s.io/v1 RoleBinding and ClusterRoleBinding (one printer, two
    /// descriptions). Roles and ClusterRoles have no printer upstream: `Default`.
    RoleBinding,
    ClusterRoleBinding,
    ConfigMap,
    Secret,
    Service,
    ServiceAccount,
    ResourceQuota,
    ControllerRevision,
    Endpoints,
    EndpointSlice,
    /// Upstream's default table convertor (`Name`, `Created At`): kinds without a printer
    /// (LimitRange, …).
    Default,
}

fn printer(ri: &ResourceInfo) -> Printer {
    match (ri.group, ri.kind) {
        ("", "Pod") => Printer::Pod,
        ("", "Node") => Printer::Node,
        ("", "Event") => Printer::Event,
        ("events.k8s.io", "Event") => Printer::EventsV1,
        ("", "Namespace") => Printer::Namespace,
        ("coordination.k8s.io", "Lease") => Printer::Lease,
        ("apps", "Deployment") => Printer::Deployment,
        ("apps", "ReplicaSet") => Printer::ReplicaSet,
        ("apps", "StatefulSet") => Printer::StatefulSet,
        ("apps", "DaemonSet") => Printer::DaemonSet,
        ("apps", "ControllerRevision") => Printer::ControllerRevision,
        ("batch", "Job") => Printer::Job,
        ("batch", "CronJob") => Printer::CronJob,
        ("policy", "PodDisruptionBudget") => Printer::PodDisruptionBudget,
        ("", "PersistentVolume") => Printer::PersistentVolume,
        ("", "PersistentVolumeClaim") => Printer::PersistentVolumeClaim,
        ("storage.k8s.io", "VolumeAttachment") => Printer::VolumeAttachment,
        ("storage.k8s.io", "StorageClass") => Printer::StorageClass,
        ("storage.k8s.io", "CSIDriver") => Printer::CSIDriver,
        ("storage.k8s.io", "CSINode") => Printer::CSINode,
        ("certificates.k8s.io", "CertificateSigningRequest") => Printer::CertificateSigningRequest,
        ("scheduling.k8s.io", "PriorityClass") => Printer::PriorityClass,
        ("rbac.authorization.k8s.io", "RoleBinding") => Printer::RoleBinding,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => Printer::ClusterRoleBinding,
        ("", "ConfigMap") => Printer::ConfigMap,
        ("", "Secret") => Printer::Secret,
        ("", "Service") => Printer::Service,
        ("", "ServiceAccount") => Printer::ServiceAccount,
        ("", "ResourceQuota") => Printer::ResourceQuota,
        ("", "Endpoints") => Printer::Endpoints,
        ("discovery.k8s.io", "EndpointSlice") => Printer::EndpointSlice,
        _ => Printer::Default,
    }
}

fn column(name: &str, ty: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn name_col() -> Value {
    column("Name", "string", "name", D_META_NAME, 0)
}

fn age_col() -> Value {
    column("Age", "string", "", D_META_CREATION, 0)
}

const D_RB_ROLE_REF: &str = "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";
const D_CRB_ROLE_REF: &str = "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.";

/// Upstream's `rbac.SubjectsStrings`: users, groups and `namespace/name` service accounts, in
/// subject order (other kinds are not printed).
fn subjects_strings(subjects: &[Value]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in subjects {
        let name = gs(s, &["name"]).to_string();
        match gs(s, &["kind"]) {
            "User" => users.push(name),
            "Group" => groups.push(name),
            "ServiceAccount" => sas.push(format!("{}/{name}", gs(s, &["namespace"]))),
            _ => {}
        }
    }
    (users, groups, sas)
}

const D_CONTAINERS: &str = "Names of each container in the template.";
const D_IMAGES: &str = "Images referenced by each container in the template.";
const D_READY_PODS: &str = "Number of the pod with ready state";

/// The column definitions upstream sends for `ri` (all priorities; order is the cell order).
pub fn column_definitions(ri: &ResourceInfo) -> Vec<Value> {
    let s = "string";
    let i = "integer";
    match printer(ri) {
        Printer::Pod => vec![
            name_col(),
            column(
                "Ready",
                s,
                "",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            column(
                "Status",
                s,
                "",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            column(
                "Restarts",
                s,
                "",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age_col(),
            column("IP", s, "", D_POD_IP, 1),
            column("Node", s, "", D_POD_NODE_NAME, 1),
            column("Nominated Node", s, "", D_POD_NOMINATED, 1),
            column("Readiness Gates", s, "", D_POD_READINESS_GATES, 1),
        ],
        Printer::Node => vec![
            name_col(),
            column("Status", s, "", "The status of the node", 0),
            column("Roles", s, "", "The roles of the node", 0),
            age_col(),
            column("Version", s, "", D_NODE_KUBELET_VERSION, 0),
            column("Internal-IP", s, "", D_NODE_ADDRESSES, 1),
            column("External-IP", s, "", D_NODE_ADDRESSES, 1),
            column("OS-Image", s, "", D_NODE_OS_IMAGE, 1),
            column("Kernel-Version", s, "", D_NODE_KERNEL, 1),
            column("Container-Runtime", s, "", D_NODE_RUNTIME, 1),
        ],
        Printer::Event | Printer::EventsV1 => vec![
            column("Last Seen", s, "", D_EV_LAST, 0),
            column("Type", s, "", D_EV_TYPE, 0),
            column("Reason", s, "", D_EV_REASON, 0),
            column("Object", s, "", D_EV_INVOLVED, 0),
            column("Subobject", s, "", D_OBJREF_FIELD_PATH, 1),
            column("Source", s, "", D_EV_SOURCE, 1),
            column("Message", s, "", D_EV_MESSAGE, 0),
            column("First Seen", s, "", D_EV_FIRST, 1),
            column("Count", s, "", D_EV_COUNT, 1),
            column("Name", s, "name", D_META_NAME, 1),
        ],
        Printer::Namespace => vec![
            name_col(),
            column("Status", s, "", "The status of the namespace", 0),
            age_col(),
        ],
        Printer::Lease => vec![
            name_col(),
            column("Holder", s, "", D_LEASE_HOLDER, 0),
            age_col(),
        ],
        Printer::Deployment => vec![
            name_col(),
            column("Ready", s, "", D_READY_PODS, 0),
            column("Up-to-date", s, "", D_EXT_DEPLOY_UPDATED, 0),
            column("Available", s, "", D_EXT_DEPLOY_AVAILABLE, 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
            column("Selector", s, "", D_EXT_DEPLOY_SELECTOR, 1),
        ],
        Printer::ReplicaSet => vec![
            name_col(),
            column("Desired", i, "", D_EXT_RS_REPLICAS, 0),
            column("Current", i, "", D_EXT_RS_STATUS_REPLICAS, 0),
            column("Ready", i, "", D_EXT_RS_READY, 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
            column("Selector", s, "", D_EXT_RS_SELECTOR, 1),
        ],
        Printer::StatefulSet => vec![
            name_col(),
            column("Ready", s, "", D_READY_PODS, 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
        ],
        Printer::DaemonSet => vec![
            name_col(),
            column("Desired", i, "", D_EXT_DS_DESIRED, 0),
            column("Current", i, "", D_EXT_DS_CURRENT, 0),
            column("Ready", i, "", D_EXT_DS_READY, 0),
            column("Up-to-date", i, "", D_EXT_DS_UPDATED, 0),
            column("Available", i, "", D_EXT_DS_AVAILABLE, 0),
            column("Node Selector", s, "", D_POD_NODE_SELECTOR, 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
            column("Selector", s, "", D_EXT_DS_SELECTOR, 1),
        ],
        Printer::Job => vec![
            name_col(),
            column("Status", s, "", "Status of the job.", 0),
            column("Completions", s, "", D_JOB_SUCCEEDED, 0),
            column("Duration", s, "", "Time required to complete the job.", 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
            column("Selector", s, "", D_JOB_SELECTOR, 1),
        ],
        Printer::CronJob => vec![
            name_col(),
            column("Schedule", s, "", D_CRONJOB_SCHEDULE, 0),
            column("Timezone", s, "", D_CRONJOB_TIMEZONE, 0),
            column("Suspend", "boolean", "", D_CRONJOB_SUSPEND, 0),
            column("Active", i, "", D_CRONJOB_ACTIVE, 0),
            column("Last Schedule", s, "", D_CRONJOB_LAST_SCHEDULE, 0),
            age_col(),
            column("Containers", s, "", D_CONTAINERS, 1),
            column("Images", s, "", D_IMAGES, 1),
            column("Selector", s, "", D_JOB_SELECTOR, 1),
        ],
        Printer::PodDisruptionBudget => vec![
            name_col(),
            column(
                "Min Available",
                s,
                "",
                "The minimum number of pods that must be available.",
                0,
            ),
            column(
                "Max Unavailable",
                s,
                "",
                "The maximum number of pods that may be unavailable.",
                0,
            ),
            column(
                "Allowed Disruptions",
                i,
                "",
                "Calculated number of pods that may be disrupted at this time.",
                0,
            ),
            age_col(),
        ],
        Printer::PersistentVolume => vec![
            name_col(),
            column("Capacity", s, "", D_PV_CAPACITY, 0),
            column("Access Modes", s, "", D_PV_ACCESS, 0),
            column("Reclaim Policy", s, "", D_PV_RECLAIM, 0),
            column("Status", s, "", D_PV_PHASE, 0),
            column("Claim", s, "", D_PV_CLAIM, 0),
            column("StorageClass", s, "", "StorageClass of the pv", 0),
            column(
                "VolumeAttributesClass",
                s,
                "",
                "VolumeAttributesClass of the pv",
                0,
            ),
            column("Reason", s, "", D_PV_REASON, 0),
            age_col(),
            column("VolumeMode", s, "", D_PV_MODE, 1),
        ],
        Printer::PersistentVolumeClaim => vec![
            name_col(),
            column("Status", s, "", D_PVC_PHASE, 0),
            column("Volume", s, "", D_PVC_VOLUME, 0),
            column("Capacity", s, "", D_PVC_CAPACITY, 0),
            column("Access Modes", s, "", D_PVC_ACCESS, 0),
            column("StorageClass", s, "", "StorageClass of the pvc", 0),
            column(
                "VolumeAttributesClass",
                s,
                "",
                "VolumeAttributesClass of the pvc",
                0,
            ),
            age_col(),
            column("VolumeMode", s, "", D_PVC_MODE, 1),
        ],
        Printer::VolumeAttachment => vec![
            name_col(),
            // Upstream marks the attacher column with format "name" too.
            column("Attacher", s, "name", D_VA_ATTACHER, 0),
            column("PV", s, "", D_VA_PV, 0),
            column("Node", s, "", D_VA_NODE, 0),
            column("Attached", "boolean", "", D_VA_ATTACHED, 0),
            age_col(),
        ],
        Printer::StorageClass => vec![
            name_col(),
            column("Provisioner", s, "", D_SC_PROVISIONER, 0),
            column("ReclaimPolicy", s, "", D_SC_RECLAIM, 0),
            column("VolumeBindingMode", s, "", D_SC_BINDING, 0),
            column("AllowVolumeExpansion", s, "", D_SC_EXPANSION, 0),
            age_col(),
        ],
        Printer::CSIDriver => vec![
            name_col(),
            column("AttachRequired", "boolean", "", D_CSID_ATTACH, 0),
            column("PodInfoOnMount", "boolean", "", D_CSID_POD_INFO, 0),
            column("StorageCapacity", "boolean", "", D_CSID_CAPACITY, 0),
            column("TokenRequests", s, "", D_CSID_TOKENS, 0),
            column("RequiresRepublish", "boolean", "", D_CSID_REPUBLISH, 0),
            column("Modes", s, "", D_CSID_MODES, 0),
            age_col(),
        ],
        Printer::CSINode => vec![
            name_col(),
            column(
                "Drivers",
                "integer",
                "",
                "Drivers indicates the number of CSI drivers registered on the node",
                0,
            ),
            age_col(),
        ],
        Printer::CertificateSigningRequest => vec![
            name_col(),
            age_col(),
            column("SignerName", s, "", D_CSR_SIGNER, 0),
            column("Requestor", s, "", D_CSR_REQUEST, 0),
            column("RequestedDuration", s, "", D_CSR_EXPIRATION, 0),
            column("Condition", s, "", D_CSR_CONDITIONS, 0),
        ],
        Printer::PriorityClass => vec![
            name_col(),
            column("Value", "integer", "", D_PC_VALUE, 0),
            column("Global-Default", "boolean", "", D_PC_GLOBAL_DEFAULT, 0),
            age_col(),
            column("PreemptionPolicy", s, "", D_PC_PREEMPTION, 0),
        ],
        Printer::RoleBinding => vec![
            name_col(),
            column("Role", s, "", D_RB_ROLE_REF, 0),
            age_col(),
            column("Users", s, "", "Users in the roleBinding", 1),
            column("Groups", s, "", "Groups in the roleBinding", 1),
            column(
                "ServiceAccounts",
                s,
                "",
                "ServiceAccounts in the roleBinding",
                1,
            ),
        ],
        Printer::ClusterRoleBinding => vec![
            name_col(),
            column("Role", s, "", D_CRB_ROLE_REF, 0),
            age_col(),
            column("Users", s, "", "Users in the clusterRoleBinding", 1),
            column("Groups", s, "", "Groups in the clusterRoleBinding", 1),
            column(
                "ServiceAccounts",
                s,
                "",
                "ServiceAccounts in the clusterRoleBinding",
                1,
            ),
        ],
        Printer::ConfigMap => vec![name_col(), column("Data", s, "", D_CM_DATA, 0), age_col()],
        Printer::Secret => {
            vec![
                name_col(),
                column("Type", s, "", D_SECRET_TYPE, 0),
                column("Data", s, "", D_SECRET_DATA, 0),
                age_col(),
            ]
        }
        Printer::Service => vec![
            name_col(),
            column("Type", s, "", D_SVC_TYPE, 0),
            column("Cluster-IP", s, "", D_SVC_CLUSTER_IP, 0),
            column("External-IP", s, "", D_SVC_EXTERNAL_IPS, 0),
            column("Port(s)", s, "", D_SVC_PORTS, 0),
            age_col(),
            column("Selector", s, "", D_SVC_SELECTOR, 1),
        ],
        Printer::ServiceAccount => vec![
            name_col(),
            column("Secrets", s, "", D_SA_SECRETS, 0),
            age_col(),
        ],
        Printer::Endpoints => vec![
            name_col(),
            column("Endpoints", s, "", D_EP_SUBSETS, 0),
            age_col(),
        ],
        Printer::EndpointSlice => vec![
            name_col(),
            column("AddressType", s, "", D_EPS_ADDRESS_TYPE, 0),
            column("Ports", s, "", D_EPS_PORTS, 0),
            column("Endpoints", s, "", D_EPS_ENDPOINTS, 0),
            age_col(),
        ],
        Printer::ResourceQuota => vec![
            name_col(),
            column(
                "Request",
                s,
                "",
                "Request represents a minimum amount of cpu/memory that a container may consume.",
                0,
            ),
            column(
                "Limit",
                s,
                "",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                0,
            ),
            age_col(),
        ],
        Printer::ControllerRevision => vec![
            name_col(),
            column("Controller", s, "", "Controller of the object", 0),
            column("Revision", s, "", D_CR_REVISION, 0),
            age_col(),
        ],
        Printer::Default => vec![
            name_col(),
            column("Created At", "date", "", D_META_CREATION, 0),
        ],
    }
}

/// Every cell of the object's row (priority 0 and 1), in column order.
pub fn row_cells(ri: &ResourceInfo, obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = str_cell(gs(obj, &["metadata", "name"]));
    let age = || {
        Value::String(translate_since(
            gts(obj, &["metadata", "creationTimestamp"]),
            now,
        ))
    };
    match printer(ri) {
        Printer::Pod => pod_cells(obj, now),
        Printer::Node => node_cells(obj, now),
        Printer::Event => event_cells(obj, now),
        Printer::EventsV1 => event_cells(&events_v1_as_core(obj), now),
        Printer::Namespace => vec![name, str_cell(gs(obj, &["status", "phase"])), age()],
        Printer::Lease => vec![name, str_cell(gs(obj, &["spec", "holderIdentity"])), age()],
        Printer::Deployment => {
            let (names, images) = container_cells(obj);
            let selector = match selector_string(get(obj, &["spec", "selector"])) {
                Ok(s) => s,
                Err(()) => "<invalid>".to_string(),
            };
            vec![
                name,
                str_cell(&format!(
                    "{}/{}",
                    gi(obj, &["status", "readyReplicas"]),
                    desired_replicas(obj)
                )),
                json!(gi(obj, &["status", "updatedReplicas"])),
                json!(gi(obj, &["status", "availableReplicas"])),
                age(),
                names,
                images,
                Value::String(selector),
            ]
        }
        Printer::ReplicaSet => {
            let (names, images) = container_cells(obj);
            vec![
                name,
                json!(desired_replicas(obj)),
                json!(gi(obj, &["status", "replicas"])),
                json!(gi(obj, &["status", "readyReplicas"])),
                age(),
                names,
                images,
                Value::String(format_label_selector(get(obj, &["spec", "selector"]))),
            ]
        }
        Printer::StatefulSet => {
            let (names, images) = container_cells(obj);
            vec![
                name,
                str_cell(&format!(
                    "{}/{}",
                    gi(obj, &["status", "readyReplicas"]),
                    desired_replicas(obj)
                )),
                age(),
                names,
                images,
            ]
        }
        Printer::DaemonSet => {
            let (names, images) = container_cells(obj);
            vec![
                name,
                json!(gi(obj, &["status", "desiredNumberScheduled"])),
                json!(gi(obj, &["status", "currentNumberScheduled"])),
                json!(gi(obj, &["status", "numberReady"])),
                json!(gi(obj, &["status", "updatedNumberScheduled"])),
                json!(gi(obj, &["status", "numberAvailable"])),
                Value::String(format_labels(get(
                    obj,
                    &["spec", "template", "spec", "nodeSelector"],
                ))),
                age(),
                names,
                images,
                Value::String(format_label_selector(get(obj, &["spec", "selector"]))),
            ]
        }
        Printer::Job => job_cells(obj, now),
        Printer::CronJob => cronjob_cells(obj, now),
        Printer::PodDisruptionBudget => vec![
            name,
            str_cell(&int_or_string(get(obj, &["spec", "minAvailable"]))),
            str_cell(&int_or_string(get(obj, &["spec", "maxUnavailable"]))),
            json!(gi(obj, &["status", "disruptionsAllowed"])),
            age(),
        ],
        Printer::PersistentVolume => pv_cells(obj, now),
        Printer::PersistentVolumeClaim => pvc_cells(obj, now),
        Printer::VolumeAttachment => vec![
            name,
            str_cell(gs(obj, &["spec", "attacher"])),
            str_cell(gs(obj, &["spec", "source", "persistentVolumeName"])),
            str_cell(gs(obj, &["spec", "nodeName"])),
            Value::Bool(gb(obj, &["status", "attached"])),
            age(),
        ],
        Printer::StorageClass => storage_class_cells(obj, now),
        Printer::CSIDriver => csi_driver_cells(obj, now),
        Printer::CSINode => vec![
            name,
            json!(garr(obj, &["spec", "drivers"]).len() as i64),
            age(),
        ],
        Printer::CertificateSigningRequest => {
            let or_none = |v: &str| str_cell(if v.is_empty() { "<none>" } else { v });
            let requested = match get(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
                Some(secs) => human_duration(SignedDuration::from_secs(secs)),
                None => "<none>".to_string(),
            };
            vec![
                name,
                age(),
                or_none(gs(obj, &["spec", "signerName"])),
                str_cell(gs(obj, &["spec", "username"])),
                str_cell(&requested),
                str_cell(&crate::csr::condition(obj)),
            ]
        }
        Printer::PriorityClass => vec![
            name,
            json!(gi(obj, &["value"])),
            Value::Bool(gb(obj, &["globalDefault"])),
            age(),
            // An unset policy prints as an empty cell (the v1 default makes it rare).
            str_cell(gs(obj, &["preemptionPolicy"])),
        ],
        Printer::RoleBinding | Printer::ClusterRoleBinding => {
            let role = format!(
                "{}/{}",
                gs(obj, &["roleRef", "kind"]),
                gs(obj, &["roleRef", "name"])
            );
            let (users, groups, sas) = subjects_strings(garr(obj, &["subjects"]));
            vec![
                name,
                json!(role),
                age(),
                json!(users.join(", ")),
                json!(groups.join(", ")),
                json!(sas.join(", ")),
            ]
        }
        Printer::ConfigMap => {
            let n = map_len(get(obj, &["data"])) + map_len(get(obj, &["binaryData"]));
            vec![name, json!(n), age()]
        }
        Printer::Secret => {
            // Decoding defaults `type` to Opaque before upstream's printer sees it.
            let ty = match gs(obj, &["type"]) {
                "" => "Opaque",
                t => t,
            };
            vec![
                name,
                str_cell(ty),
                json!(map_len(get(obj, &["data"]))),
                age(),
            ]
        }
        Printer::Service => service_cells(obj, now),
        Printer::ServiceAccount => vec![name, json!(garr(obj, &["secrets"]).len() as i64), age()],
        Printer::Endpoints => vec![name, Value::String(format_endpoints(obj)), age()],
        Printer::EndpointSlice => vec![
            name,
            str_cell(gs(obj, &["addressType"])),
            Value::String(format_discovery_ports(obj)),
            Value::String(format_discovery_endpoints(obj)),
            age(),
        ],
        Printer::ResourceQuota => {
            let (request, limit) = resource_quota_columns(obj);
            vec![name, Value::String(request), Value::String(limit), age()]
        }
        Printer::ControllerRevision => vec![
            name,
            Value::String(controller_of(obj)),
            json!(gi(obj, &["revision"])),
            age(),
        ],
        Printer::Default => {
            // Upstream formats the zero time too: `0001-01-01T00:00:00Z`.
            let created = match gts(obj, &["metadata", "creationTimestamp"]) {
                Some(ts) => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                None => "0001-01-01T00:00:00Z".to_string(),
            };
            vec![name, Value::String(created)]
        }
    }
}

/// Row conditions: pods in a terminal phase carry a `Completed` condition (kubectl's
/// `--show-all`-era filtering reads it).
pub fn row_conditions(ri: &ResourceInfo, obj: &Value) -> Option<Value> {
    if printer(ri) != Printer::Pod {
        return None;
    }
    match gs(obj, &["status", "phase"]) {
        "Succeeded" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."
        }])),
        "Failed" => Some(json!([{
            "type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."
        }])),
        _ => None,
    }
}

// ---- per-kind cells ---------------------------------------------------------------------------

/// `printPod`: READY, STATUS (the whole reason walk, order matters), RESTARTS with the
/// `(… ago)` suffix, then the wide cells.
fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let init_specs = garr(pod, &["spec", "initContainers"]);
    // Sidecars (restartable init containers) count towards READY's total.
    let sidecars: BTreeSet<&str> = init_specs
        .iter()
        .filter(|c| gs(c, &["restartPolicy"]) == "Always")
        .map(|c| gs(c, &["name"]))
        .collect();
    let total = garr(pod, &["spec", "containers"]).len()
        + init_specs
            .iter()
            .filter(|c| gs(c, &["restartPolicy"]) == "Always")
            .count();
    let phase = gs(pod, &["status", "phase"]);
    let mut reason = match gs(pod, &["status", "reason"]) {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    let conditions = garr(pod, &["status", "conditions"]);
    if conditions.iter().any(|c| {
        gs(c, &["type"]) == names::POD_COND_SCHEDULED
            && gs(c, &["reason"]) == names::POD_REASON_SCHEDULING_GATED
    }) {
        reason = names::POD_REASON_SCHEDULING_GATED.to_string();
    }

    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;

    let mut initializing = false;
    for (i, c) in garr(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        restarts += gi(c, &["restartCount"]);
        let finished = last_terminated_at(c);
        last_restart = later(last_restart, finished);
        let is_sidecar = sidecars.contains(gs(c, &["name"]));
        if is_sidecar {
            sidecar_restarts += gi(c, &["restartCount"]);
            last_sidecar_restart = later(last_sidecar_restart, finished);
        }
        let terminated = get(c, &["state", "terminated"]);
        let waiting = get(c, &["state", "waiting"]);
        if terminated.is_some_and(|t| gi(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_sidecar && gb(c, &["started"]) {
            if gb(c, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = match gs(t, &["reason"]) {
                "" if gi(t, &["signal"]) != 0 => format!("Init:Signal:{}", gi(t, &["signal"])),
                "" => format!("Init:ExitCode:{}", gi(t, &["exitCode"])),
                r => format!("Init:{r}"),
            };
        } else if let Some(w) =
            waiting.filter(|w| !matches!(gs(w, &["reason"]), "" | "PodInitializing"))
        {
            reason = format!("Init:{}", gs(w, &["reason"]));
        } else {
            reason = format!("Init:{i}/{}", init_specs.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions
        .iter()
        .any(|c| gs(c, &["type"]) == "Initialized" && gs(c, &["status"]) == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        // Backwards, so the lowest-index container with a waiting/terminated state wins.
        for c in garr(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += gi(c, &["restartCount"]);
            last_restart = later(last_restart, last_terminated_at(c));
            let terminated = get(c, &["state", "terminated"]);
            let waiting_reason = get(c, &["state", "waiting"])
                .map(|w| gs(w, &["reason"]))
                .unwrap_or("");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match gs(t, &["reason"]) {
                    "" if gi(t, &["signal"]) != 0 => format!("Signal:{}", gi(t, &["signal"])),
                    "" => format!("ExitCode:{}", gi(t, &["exitCode"])),
                    r => r.to_string(),
                };
            } else if gb(c, &["ready"]) && get(c, &["state", "running"]).is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| gs(c, &["type"]) == "Ready" && gs(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some();
    if deleting && gs(pod, &["status", "reason"]) == names::POD_REASON_NODE_LOST {
        reason = "Unknown".to_string();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match last_restart {
        Some(at) if restarts != 0 => format!("{restarts} ({} ago)", translate_since(Some(at), now)),
        _ => restarts.to_string(),
    };

    let ip = garr(pod, &["status", "podIPs"])
        .first()
        .map(|p| gs(p, &["ip"]))
        .unwrap_or("");
    let readiness_gates = match garr(pod, &["spec", "readinessGates"]) {
        [] => "<none>".to_string(),
        gates => {
            let true_count = gates
                .iter()
                .filter(|g| {
                    conditions
                        .iter()
                        .find(|c| gs(c, &["type"]) == gs(g, &["conditionType"]))
                        .is_some_and(|c| gs(c, &["status"]) == "True")
                })
                .count();
            format!("{true_count}/{}", gates.len())
        }
    };
    vec![
        str_cell(gs(pod, &["metadata", "name"])),
        str_cell(&format!("{ready}/{total}")),
        str_cell(&reason),
        str_cell(&restarts_cell),
        str_cell(&translate_since(
            gts(pod, &["metadata", "creationTimestamp"]),
            now,
        )),
        str_cell(or_none(ip)),
        str_cell(or_none(gs(pod, &["spec", "nodeName"]))),
        str_cell(or_none(gs(pod, &["status", "nominatedNodeName"]))),
        str_cell(&readiness_gates),
    ]
}

/// `lastState.terminated.finishedAt` of a container status, if any.
fn last_terminated_at(status: &Value) -> Option<Timestamp> {
    get(status, &["lastState", "terminated"]).and_then(|t| gts(t, &["finishedAt"]))
}

fn later(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// `printNode`: only the Ready condition counts (`Unknown` prints as `NotReady`).
fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    // Upstream keys conditions by type in a map, so the last Ready condition wins.
    let ready = garr(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| gs(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if gs(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if gb(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix(names::LABEL_NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == names::LABEL_NODE_ROLE_LEGACY
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |ty: &str| {
        garr(node, &["status", "addresses"])
            .iter()
            .find(|a| gs(a, &["type"]) == ty)
            .map(|a| gs(a, &["address"]))
            .unwrap_or("<none>")
            .to_string()
    };
    let info = |field: &str| match gs(node, &["status", "nodeInfo", field]) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        str_cell(gs(node, &["metadata", "name"])),
        str_cell(&status.join(",")),
        str_cell(&roles),
        str_cell(&translate_since(
            gts(node, &["metadata", "creationTimestamp"]),
            now,
        )),
        str_cell(gs(node, &["status", "nodeInfo", "kubeletVersion"])),
        Value::String(address("InternalIP")),
        Value::String(address("ExternalIP")),
        Value::String(info("osImage")),
        Value::String(info("kernelVersion")),
        Value::String(info("containerRuntimeVersion")),
    ]
}

/// `printEvent` over a core/v1-shaped event. All ten cells, in column order (the real server
/// prints wide).
fn event_cells(ev: &Value, now: Timestamp) -> Vec<Value> {
    let first = match gts(ev, &["firstTimestamp"]) {
        Some(t) => translate_since(Some(t), now),
        None => translate_since(gts(ev, &["eventTime"]), now),
    };
    let mut last = match gts(ev, &["lastTimestamp"]) {
        Some(t) => translate_since(Some(t), now),
        None => first.clone(),
    };
    let mut count = gi(ev, &["count"]);
    if let Some(series) = get(ev, &["series"]) {
        last = translate_since(gts(series, &["lastObservedTime"]), now);
        count = gi(series, &["count"]);
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let kind = gs(ev, &["involvedObject", "kind"]).to_lowercase();
    let target = match gs(ev, &["involvedObject", "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_non_empty(
        gs(ev, &["source", "component"]),
        gs(ev, &["reportingComponent"]),
    );
    let instance = first_non_empty(gs(ev, &["source", "host"]), gs(ev, &["reportingInstance"]));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        Value::String(last),
        str_cell(gs(ev, &["type"])),
        str_cell(gs(ev, &["reason"])),
        Value::String(target),
        str_cell(gs(ev, &["involvedObject", "fieldPath"])),
        Value::String(source),
        str_cell(gs(ev, &["message"]).trim()),
        Value::String(first),
        json!(count),
        str_cell(gs(ev, &["metadata", "name"])),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

/// An events.k8s.io/v1 Event in core/v1 field names (upstream stores both as one internal type).
fn events_v1_as_core(ev: &Value) -> Value {
    let pick = |path: &[&str]| get(ev, path).cloned().unwrap_or(Value::Null);
    json!({
        "metadata": pick(&["metadata"]),
        "involvedObject": pick(&["regarding"]),
        "reason": pick(&["reason"]),
        "message": pick(&["note"]),
        "type": pick(&["type"]),
        "source": pick(&["deprecatedSource"]),
        "firstTimestamp": pick(&["deprecatedFirstTimestamp"]),
        "lastTimestamp": pick(&["deprecatedLastTimestamp"]),
        "count": pick(&["deprecatedCount"]),
        "eventTime": pick(&["eventTime"]),
        "series": pick(&["series"]),
        "reportingComponent": pick(&["reportingController"]),
        "reportingInstance": pick(&["reportingInstance"]),
    })
}

/// `printJob`: STATUS (first match wins), COMPLETIONS, DURATION.
fn job_cells(job: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = gi(job, &["status", "succeeded"]);
    let completions = match get(job, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match get(job, &["spec", "parallelism"])
            .and_then(Value::as_i64)
            .unwrap_or(0)
        {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        gts(job, &["status", "startTime"]),
        gts(job, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.duration_since(start)),
        (Some(start), Some(done)) => human_duration(done.duration_since(start)),
    };
    let conditions = garr(job, &["status", "conditions"]);
    // Upstream's hasJobCondition reads the first condition of the type.
    let has = |ty: &str| {
        conditions
            .iter()
            .find(|c| gs(c, &["type"]) == ty)
            .is_some_and(|c| gs(c, &["status"]) == "True")
    };
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if get(job, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, images) = container_cells(job);
    vec![
        str_cell(gs(job, &["metadata", "name"])),
        str_cell(status),
        Value::String(completions),
        Value::String(duration),
        str_cell(&translate_since(
            gts(job, &["metadata", "creationTimestamp"]),
            now,
        )),
        names,
        images,
        Value::String(format_label_selector(get(job, &["spec", "selector"]))),
    ]
}

/// `printCronJob`: the job template's containers in the wide columns.
fn cronjob_cells(cj: &Value, now: Timestamp) -> Vec<Value> {
    let last = match gts(cj, &["status", "lastScheduleTime"]) {
        Some(t) => translate_since(Some(t), now),
        None => "<none>".to_string(),
    };
    let tz = get(cj, &["spec", "timeZone"])
        .and_then(Value::as_str)
        .unwrap_or("<none>");
    let suspend = match get(cj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let template = get(cj, &["spec", "jobTemplate"])
        .cloned()
        .unwrap_or(Value::Null);
    let (names, images) = container_cells(&template);
    vec![
        str_cell(gs(cj, &["metadata", "name"])),
        str_cell(gs(cj, &["spec", "schedule"])),
        str_cell(tz),
        str_cell(suspend),
        json!(garr(cj, &["status", "active"]).len()),
        Value::String(last),
        str_cell(&translate_since(
            gts(cj, &["metadata", "creationTimestamp"]),
            now,
        )),
        names,
        images,
        Value::String(format_label_selector(get(
            cj,
            &["spec", "jobTemplate", "spec", "selector"],
        ))),
    ]
}

/// `printStorageClass`: the default class is marked ` (default)` (either default annotation,
/// `IsDefaultAnnotation`); unset policies print upstream's defaults.
fn storage_class_cells(sc: &Value, now: Timestamp) -> Vec<Value> {
    let mut name = gs(sc, &["metadata", "name"]).to_string();
    let annotations = get(sc, &["metadata", "annotations"]);
    let is_default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| annotations.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"));
    if is_default {
        name.push_str(" (default)");
    }
    let or = |path: &[&str], default: &'static str| match gs(sc, path) {
        "" => default.to_string(),
        v => v.to_string(),
    };
    vec![
        Value::String(name),
        str_cell(gs(sc, &["provisioner"])),
        Value::String(or(&["reclaimPolicy"], "Delete")),
        Value::String(or(&["volumeBindingMode"], "Immediate")),
        Value::Bool(gb(sc, &["allowVolumeExpansion"])),
        str_cell(&translate_since(
            gts(sc, &["metadata", "creationTimestamp"]),
            now,
        )),
    ]
}

/// `printCSIDriver`: attachRequired defaults to true; no modes print `<none>`, no token
/// requests `<unset>`.
fn csi_driver_cells(d: &Value, now: Timestamp) -> Vec<Value> {
    let attach = get(d, &["spec", "attachRequired"])
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let modes: Vec<&str> = garr(d, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let modes = if modes.is_empty() {
        "<none>".to_string()
    } else {
        modes.join(",")
    };
    let tokens = match get(d, &["spec", "tokenRequests"]).and_then(Value::as_array) {
        None => "<unset>".to_string(),
        Some(list) => list
            .iter()
            .map(|t| gs(t, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
    };
    vec![
        str_cell(gs(d, &["metadata", "name"])),
        Value::Bool(attach),
        Value::Bool(gb(d, &["spec", "podInfoOnMount"])),
        Value::Bool(gb(d, &["spec", "storageCapacity"])),
        Value::String(tokens),
        Value::Bool(gb(d, &["spec", "requiresRepublish"])),
        Value::String(modes),
        str_cell(&translate_since(
            gts(d, &["metadata", "creationTimestamp"]),
            now,
        )),
    ]
}

/// `printPersistentVolume`.
fn pv_cells(pv: &Value, now: Timestamp) -> Vec<Value> {
    let claim = match get(pv, &["spec", "claimRef"]) {
        Some(c) => format!("{}/{}", gs(c, &["namespace"]), gs(c, &["name"])),
        None => String::new(),
    };
    let phase = if get(pv, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        gs(pv, &["status", "phase"])
    };
    vec![
        str_cell(gs(pv, &["metadata", "name"])),
        str_cell(quantity(get(pv, &["spec", "capacity", "storage"]))),
        Value::String(access_modes(garr(pv, &["spec", "accessModes"]))),
        str_cell(gs(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        str_cell(phase),
        Value::String(claim),
        str_cell(storage_class(pv)),
        str_cell(or_unset(get(pv, &["spec", "volumeAttributesClassName"]))),
        str_cell(gs(pv, &["status", "reason"])),
        str_cell(&translate_since(
            gts(pv, &["metadata", "creationTimestamp"]),
            now,
        )),
        str_cell(or_unset(get(pv, &["spec", "volumeMode"]))),
    ]
}

/// `printPersistentVolumeClaim`: capacity and access modes come from status only once bound.
fn pvc_cells(pvc: &Value, now: Timestamp) -> Vec<Value> {
    let phase = if get(pvc, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        gs(pvc, &["status", "phase"])
    };
    let volume = gs(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            quantity(get(pvc, &["status", "capacity", "storage"])).to_string(),
            access_modes(garr(pvc, &["status", "accessModes"])),
        )
    };
    vec![
        str_cell(gs(pvc, &["metadata", "name"])),
        str_cell(phase),
        str_cell(volume),
        Value::String(capacity),
        Value::String(modes),
        str_cell(storage_class(pvc)),
        str_cell(or_unset(get(pvc, &["spec", "volumeAttributesClassName"]))),
        str_cell(&translate_since(
            gts(pvc, &["metadata", "creationTimestamp"]),
            now,
        )),
        str_cell(or_unset(get(pvc, &["spec", "volumeMode"]))),
    ]
}

/// A resource.Quantity as stored; a missing quantity is Go's zero Quantity, printed `0`.
/// (Upstream prints the canonical form; objects written through the API are already canonical
/// in practice, e.g. `10Gi`.)
fn quantity(q: Option<&Value>) -> &str {
    q.and_then(Value::as_str).unwrap_or("0")
}

fn storage_class(obj: &Value) -> &str {
    // The beta annotation still wins over the field, as in upstream's helper.
    match get(
        obj,
        &["metadata", "annotations", names::ANN_BETA_STORAGE_CLASS],
    )
    .and_then(Value::as_str)
    {
        Some(class) => class,
        None => gs(obj, &["spec", "storageClassName"]),
    }
}

/// Access modes abbreviated in upstream's fixed order.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `formatEndpoints`: the first three ready `ip:port` pairs (`ip` alone for a subset without
/// ports), then `+ N more...`; `<none>` without subsets.
fn format_endpoints(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = garr(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for ss in subsets {
        let addrs = garr(ss, &["addresses"]);
        let ports = garr(ss, &["ports"]);
        let mut push = |s: String, list: &mut Vec<String>| {
            if list.len() == MAX {
                more = true;
                false
            } else {
                list.push(s);
                true
            }
        };
        if ports.is_empty() {
            count = count.saturating_add(addrs.len());
            for a in addrs {
                if !push(gs(a, &["ip"]).to_string(), &mut list) {
                    break;
                }
            }
            continue;
        }
        for p in ports {
            count = count.saturating_add(addrs.len());
            for a in addrs {
                let ip = gs(a, &["ip"]);
                let host = if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip.to_string()
                };
                if !push(format!("{host}:{}", gi(p, &["port"])), &mut list) {
                    break;
                }
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count.saturating_sub(MAX))
    } else {
        ret
    }
}

/// `listWithMoreString`: the first three, then `+ N more...`; `<unset>` when empty.
fn list_with_more(list: Vec<String>, count: usize) -> String {
    const MAX: usize = 3;
    let ret = list.join(",");
    if count > MAX {
        format!("{ret} + {} more...", count.saturating_sub(MAX))
    } else if ret.is_empty() {
        "<unset>".into()
    } else {
        ret
    }
}

/// `formatDiscoveryPorts`: port numbers (a name when the number is unset).
fn format_discovery_ports(eps: &Value) -> String {
    let ports = garr(eps, &["ports"]);
    let list = ports
        .iter()
        .take(3)
        .map(|p| match p.get("port").and_then(Value::as_i64) {
            Some(n) => n.to_string(),
            None => p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("<unset>")
                .to_string(),
        })
        .collect();
    list_with_more(list, ports.len())
}

/// `formatDiscoveryEndpoints`: every endpoint's addresses, ready or not.
fn format_discovery_endpoints(eps: &Value) -> String {
    let addrs: Vec<&str> = garr(eps, &["endpoints"])
        .iter()
        .flat_map(|e| garr(e, &["addresses"]).iter().filter_map(Value::as_str))
        .collect();
    let list = addrs.iter().take(3).map(|s| s.to_string()).collect();
    list_with_more(list, addrs.len())
}

/// `printService`.
fn service_cells(svc: &Value, now: Timestamp) -> Vec<Value> {
    let ty = match gs(svc, &["spec", "type"]) {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = garr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| Some(gs(svc, &["spec", "clusterIP"])).filter(|s| !s.is_empty()))
        .unwrap_or("<none>");
    let external_ips: Vec<&str> = garr(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match ty {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            // Upstream joins an unordered set; sorted here so output is deterministic.
            let lb: BTreeSet<&str> = garr(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .map(|i| first_non_empty(gs(i, &["ip"]), gs(i, &["hostname"])))
                .filter(|s| !s.is_empty())
                .collect();
            let mut all: Vec<&str> = lb.into_iter().collect();
            all.extend(external_ips.iter().copied());
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => gs(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = garr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let protocol = match gs(p, &["protocol"]) {
                "" => "TCP",
                proto => proto,
            };
            match gi(p, &["nodePort"]) {
                n if n > 0 => format!("{}:{n}/{protocol}", gi(p, &["port"])),
                _ => format!("{}/{protocol}", gi(p, &["port"])),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };
    vec![
        str_cell(gs(svc, &["metadata", "name"])),
        str_cell(ty),
        str_cell(cluster_ip),
        Value::String(external),
        Value::String(ports),
        str_cell(&translate_since(
            gts(svc, &["metadata", "creationTimestamp"]),
            now,
        )),
        Value::String(format_labels(get(svc, &["spec", "selector"]))),
    ]
}

/// `printResourceQuota`'s REQUEST and LIMIT cells: `res: used/hard` per hard resource, sorted.
fn resource_quota_columns(rq: &Value) -> (String, String) {
    let mut request = Vec::new();
    let mut limit = Vec::new();
    if let Some(hard) = get(rq, &["status", "hard"]).and_then(Value::as_object) {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for res in names {
            let used = quantity(get(rq, &["status", "used", res.as_str()]));
            let entry = format!("{res}: {used}/{}", quantity(hard.get(res.as_str())));
            let pieces: Vec<&str> = res.split('.').collect();
            if pieces.len() > 1 && pieces[0] == "limits" {
                limit.push(entry);
            } else {
                request.push(entry);
            }
        }
    }
    (request.join(", "), limit.join(", "))
}

/// CONTROLLER of a ControllerRevision: `daemonset.apps/kube-proxy`, or `<none>`.
fn controller_of(obj: &Value) -> String {
    let Some(owner) = garr(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| gb(o, &["controller"]))
    else {
        return "<none>".to_string();
    };
    let group = gs(owner, &["apiVersion"])
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    let kind = gs(owner, &["kind"]);
    let name = gs(owner, &["name"]);
    if group.is_empty() && kind.is_empty() {
        return name.to_string();
    }
    let group_kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    format!("{}/{name}", group_kind.to_lowercase())
}

// ---- shared formatting ------------------------------------------------------------------------

/// CONTAINERS and IMAGES of a workload's pod template.
fn container_cells(obj: &Value) -> (Value, Value) {
    let containers = garr(obj, &["spec", "template", "spec", "containers"]);
    let names: Vec<&str> = containers.iter().map(|c| gs(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| gs(c, &["image"])).collect();
    (
        Value::String(names.join(",")),
        Value::String(images.join(",")),
    )
}

/// `spec.replicas`, defaulted to 1 as decoding does upstream.
fn desired_replicas(obj: &Value) -> i64 {
    get(obj, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// `metav1.LabelSelectorAsSelector(sel).String()`: requirements sorted by key, `k=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. A nil selector selects nothing and prints as "";
/// `Err` for an invalid operator or value count.
fn selector_string(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel else {
        return Ok(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for expr in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let key = gs(expr, &["key"]);
        let mut values: Vec<&str> = garr(expr, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let rendered = match gs(expr, &["operator"]) {
            "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
            "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
            "Exists" if values.is_empty() => key.to_string(),
            "DoesNotExist" if values.is_empty() => format!("!{key}"),
            _ => return Err(()),
        };
        reqs.push((key.to_string(), rendered));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(","))
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty or nil selector, `<error>` if invalid.
fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
        Err(()) => "<error>".to_string(),
    }
}

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let Some(map) = map.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        return "<none>".to_string();
    };
    let mut pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    pairs.join(",")
}

/// An IntOrString as `String()` prints it; unset is `N/A` (PDB columns).
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        None => "N/A".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

fn or_unset(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("<unset>")
}

fn str_cell(s: &str) -> Value {
    Value::String(s.to_string())
}

fn map_len(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_object)
        .map(|m| m.len() as i64)
        .unwrap_or(0)
}

// ---- ages ---------------------------------------------------------------------------------------

/// Upstream `translateTimestampSince`: `<unknown>` for an unset time, else `HumanDuration(now − t)`.
pub fn translate_since(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        None => "<unknown>".to_string(),
        Some(t) => human_duration(now.duration_since(t)),
    }
}

/// apimachinery `util/duration.HumanDuration`: a short, lossy age (`42m`, `3d4h`, `7m5s`). Up to
/// one second in the future still reads `0s` (clock skew); further is `<invalid>`.
pub fn human_duration(d: SignedDuration) -> String {
    // Go's int(d.Seconds()) truncates toward zero, as as_secs does.
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

// ---- JSON access (missing or null reads as the Go zero value) ----------------------------------

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    if cur.is_null() { None } else { Some(cur) }
}

fn gs<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn gi(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn gb(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

fn garr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A `metav1.Time`/`MicroTime` field (RFC 3339); unset or unparsable reads as the zero time.
fn gts(v: &Value, path: &[&str]) -> Option<Timestamp> {
    get(v, path)
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
}

// ---- column descriptions: upstream SwaggerDoc() strings (k8s.io/api, as served by v1.33) --------

const D_EP_SUBSETS: &str = "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.";
const D_EPS_ADDRESS_TYPE: &str = "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.";
const D_EPS_PORTS: &str = "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.";
const D_EPS_ENDPOINTS: &str = "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.";
const D_META_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const D_META_CREATION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const D_POD_IP: &str = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.";
const D_POD_NOMINATED: &str = "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.";
const D_POD_NODE_NAME: &str = "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename";
const D_POD_READINESS_GATES: &str = "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const D_POD_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
const D_NODE_KUBELET_VERSION: &str = "Kubelet Version reported by the node.";
const D_NODE_OS_IMAGE: &str =
    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).";
const D_NODE_KERNEL: &str =
    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).";
const D_NODE_RUNTIME: &str = "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).";
const D_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";
const D_EV_LAST: &str = "The time at which the most recent occurrence of this event was recorded.";
const D_EV_FIRST: &str =
    "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)";
const D_EV_TYPE: &str =
    "Type of this event (Normal, Warning), new types could be added in the future";
const D_EV_REASON: &str = "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.";
const D_EV_INVOLVED: &str = "The object that this event is about.";
const D_EV_SOURCE: &str =
    "The component reporting this event. Should be a short machine understandable string.";
const D_EV_MESSAGE: &str = "A human-readable description of the status of this operation.";
const D_EV_COUNT: &str = "The number of times this event has occurred.";
const D_OBJREF_FIELD_PATH: &str = "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.";
const D_SECRET_TYPE: &str = "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const D_SECRET_DATA: &str = "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4";
const D_SA_SECRETS: &str = "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret";
const D_CM_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";
const D_PV_CAPACITY: &str = "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity";
const D_PV_ACCESS: &str = "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes";
const D_PV_RECLAIM: &str = "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming";
const D_PV_CLAIM: &str = "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding";
const D_PV_MODE: &str = "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.";
const D_PV_PHASE: &str = "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase";
const D_PV_REASON: &str = "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.";
const D_PVC_PHASE: &str = "phase represents the current phase of PersistentVolumeClaim.";
const D_PVC_CAPACITY: &str = "capacity represents the actual resources of the underlying volume.";
const D_PVC_ACCESS: &str = "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1";
const D_PVC_VOLUME: &str =
    "volumeName is the binding reference to the PersistentVolume backing this claim.";
const D_PVC_MODE: &str = "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.";
const D_SVC_TYPE: &str = "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types";
const D_SVC_CLUSTER_IP: &str = "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_EXTERNAL_IPS: &str = "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.";
const D_SVC_PORTS: &str = "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies";
const D_SVC_SELECTOR: &str = "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/";
const D_JOB_SUCCEEDED: &str = "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.";
const D_CRONJOB_SCHEDULE: &str =
    "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.";
const D_CRONJOB_TIMEZONE: &str = "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones";
const D_CRONJOB_SUSPEND: &str = "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.";
const D_CRONJOB_ACTIVE: &str = "A list of pointers to currently running jobs.";
const D_CRONJOB_LAST_SCHEDULE: &str =
    "Information when was the last time the job was successfully scheduled.";
const D_JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_LEASE_HOLDER: &str = "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.";
const D_CR_REVISION: &str = "Revision indicates the revision of the state represented by Data.";
const D_PC_VALUE: &str = "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.";
const D_PC_GLOBAL_DEFAULT: &str = "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.";
const D_PC_PREEMPTION: &str = "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.";
const D_SC_PROVISIONER: &str = "provisioner indicates the type of the provisioner.";
const D_SC_RECLAIM: &str = "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.";
const D_SC_BINDING: &str = "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.";
const D_SC_EXPANSION: &str =
    "allowVolumeExpansion shows whether the storage class allow volume expand.";
const D_CSR_SIGNER: &str = "signerName indicates the requested signer, and is a qualified name.";
const D_CSR_REQUEST: &str = "request contains an x509 certificate signing request encoded in a \"CERTIFICATE REQUEST\" PEM block. When serialized as JSON or YAML, the data is additionally base64-encoded.";
const D_CSR_EXPIRATION: &str = "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.";
const D_CSR_CONDITIONS: &str = "conditions applied to the request. Known conditions are \"Approved\", \"Denied\", and \"Failed\".";
const D_CSID_ATTACH: &str = "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.";
const D_CSID_POD_INFO: &str = "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.";
const D_CSID_CAPACITY: &str = "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.";
const D_CSID_TOKENS: &str = "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.";
const D_CSID_REPUBLISH: &str = "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.";
const D_CSID_MODES: &str = "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.";
const D_VA_ATTACHER: &str = "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().";
const D_VA_NODE: &str = "nodeName represents the node that the volume should be attached to.";
const D_VA_PV: &str =
    "persistentVolumeName represents the name of the persistent volume to attach.";
const D_VA_ATTACHED: &str = "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.";
const D_STATUS_STATUS: &str = "Status of the operation. One of: \"Success\" or \"Failure\". More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#spec-and-status";
const D_STATUS_REASON: &str = "A machine-readable description of why this operation is in the \"Failure\" status. If this value is empty there is no information available. A Reason clarifies an HTTP status code but does not override it.";

// extensions/v1beta1 swagger docs: upstream's printers still describe the apps columns with them.
const D_EXT_RS_REPLICAS: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
const D_EXT_RS_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_EXT_RS_STATUS_REPLICAS: &str = "Replicas is the most recently oberved number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
const D_EXT_RS_READY: &str = "The number of ready replicas for this replica set.";
const D_EXT_DS_DESIRED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_EXT_DS_CURRENT: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
const D_EXT_DS_READY: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.";
const D_EXT_DS_UPDATED: &str = "The total number of nodes that are running updated daemon pod";
const D_EXT_DS_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
const D_EXT_DS_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const D_EXT_DEPLOY_UPDATED: &str = "Total number of non-terminated pods targeted by this deployment that have the desired template spec.";
const D_EXT_DEPLOY_AVAILABLE: &str = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.";
const D_EXT_DEPLOY_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{RESOURCES, lookup};

    /// The fixed "now" of every test; objects are created 3d4h earlier, events 42m earlier
    /// (the ages of the api-surface §d samples).
    fn now() -> Timestamp {
        "2026-11-25T12:00:00Z".parse().unwrap()
    }
    const CREATED: &str = "2026-11-22T08:00:00Z";
    const EVENT_AT: &str = "2026-11-25T11:18:00Z";
    const ONE_SEC_AGO: &str = "2026-11-25T11:59:59Z";

    fn ri(group: &str, plural: &str) -> &'static ResourceInfo {
        lookup(group, "v1", plural).unwrap()
    }

    /// A cell as kubectl prints it: strings verbatim, numbers and booleans in decimal/lower case.
    fn shown(cell: &Value) -> String {
        match cell {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    fn check(ri: &ResourceInfo, obj: Value, expected: &[&str]) {
        let cells = row_cells(ri, &obj, now());
        let shown: Vec<String> = cells.iter().map(shown).collect();
        assert_eq!(shown, expected, "{} {}", ri.plural, obj["metadata"]["name"]);
        assert_eq!(
            cells.len(),
            column_definitions(ri).len(),
            "cells vs columns for {}",
            ri.plural
        );
    }

    #[test]
    fn human_duration_follows_apimachinery() {
        let cases: &[(i64, &str)] = &[
            (-3, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (1, "1s"),
            (119, "119s"),
            (120, "2m"),
            (425, "7m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (65 * 60, "65m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (76 * 3600, "3d4h"),
            (72 * 3600, "3d"),
            (8 * 24 * 3600, "8d"),
            (729 * 24 * 3600, "729d"),
            (730 * 24 * 3600, "2y"),
            (731 * 24 * 3600, "2y1d"),
            (8 * 365 * 24 * 3600, "8y"),
            (20 * 365 * 24 * 3600, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(*secs)),
                *want,
                "{secs}s"
            );
        }
        // Go truncates toward zero: 1.5 s in the future is still "now".
        assert_eq!(human_duration(SignedDuration::from_millis(-1500)), "0s");
        assert_eq!(
            human_duration(SignedDuration::from_millis(-2000)),
            "<invalid>"
        );
        assert_eq!(human_duration(SignedDuration::from_millis(1999)), "1s");
        assert_eq!(translate_since(None, now()), "<unknown>");
    }

    fn node(name: &str, ready: Option<&str>, labels: Value, unschedulable: bool) -> Value {
        let mut conditions = vec![json!({"type": "MemoryPressure", "status": "False"})];
        if let Some(status) = ready {
            conditions.push(json!({"type": "Ready", "status": status}));
        }
        json!({
            "metadata": {"name": name, "creationTimestamp": CREATED, "labels": labels},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": conditions,
                "addresses": [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": "10.0.0.1"}],
                "nodeInfo": {
                    "kubeletVersion": "v1.32.5",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.1.0-18-amd64",
                    "containerRuntimeVersion": "containerd://1.7.13"
                }
            }
        })
    }

    #[test]
    fn node_rows_match_the_samples() {
        let nodes = ri("", "nodes");
        let wide = [
            "10.0.0.1",
            "<none>",
            "Debian GNU/Linux 12 (bookworm)",
            "6.1.0-18-amd64",
            "containerd://1.7.13",
        ];
        let row = |first: [&'static str; 5]| -> Vec<&'static str> {
            first.iter().chain(wide.iter()).copied().collect()
        };
        check(
            nodes,
            node(
                "node-1",
                Some("True"),
                json!({"node-role.kubernetes.io/control-plane": ""}),
                false,
            ),
            &row(["node-1", "Ready", "control-plane", "3d4h", "v1.32.5"]),
        );
        check(
            nodes,
            node("node-2", Some("True"), json!({}), true),
            &row([
                "node-2",
                "Ready,SchedulingDisabled",
                "<none>",
                "3d4h",
                "v1.32.5",
            ]),
        );
        // Ready=Unknown prints as NotReady; no Ready condition at all is Unknown.
        check(
            nodes,
            node("node-3", Some("Unknown"), json!({}), false),
            &row(["node-3", "NotReady", "<none>", "3d4h", "v1.32.5"]),
        );
        check(
            nodes,
            node("node-4", None, json!({}), true),
            &row([
                "node-4",
                "Unknown,SchedulingDisabled",
                "<none>",
                "3d4h",
                "v1.32.5",
            ]),
        );
        // Roles: sorted, de-duplicated, kubernetes.io/role value included, empty role ignored.
        check(
            nodes,
            node(
                "node-5",
                Some("False"),
                json!({"node-role.kubernetes.io/worker": "x", "node-role.kubernetes.io/": "", "kubernetes.io/role": "worker",
                       "node-role.kubernetes.io/infra": ""}),
                false,
            ),
            &row(["node-5", "NotReady", "infra,worker", "3d4h", "v1.32.5"]),
        );
        // Missing nodeInfo and addresses.
        check(
            nodes,
            json!({"metadata": {"name": "bare"}}),
            &[
                "bare",
                "Unknown",
                "<none>",
                "<unknown>",
                "",
                "<none>",
                "<none>",
                "<unknown>",
                "<unknown>",
                "<unknown>",
            ],
        );
    }

    /// A pod with the given status pieces; `created` is its creationTimestamp.
    fn pod(
        name: &str,
        created: &str,
        node: Option<&str>,
        ip: Option<&str>,
        status: Value,
    ) -> Value {
        let mut spec = json!({"containers": [{"name": "main", "image": "busybox"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        let mut status = status;
        if let Some(ip) = ip {
            status["podIPs"] = json!([{"ip": ip}]);
        }
        json!({"metadata": {"name": name, "namespace": "default", "creationTimestamp": created}, "spec": spec, "status": status})
    }

    fn running(ready: bool) -> Value {
        json!({"name": "main", "ready": ready, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}})
    }

    #[test]
    fn pod_rows_match_get_pods_all_namespaces_wide() {
        let pods = ri("", "pods");
        let run = |name: &str, ip: &str| {
            pod(
                name,
                CREATED,
                Some("node-2"),
                Some(ip),
                json!({"phase": "Running", "containerStatuses": [running(true)]}),
            )
        };
        check(
            pods,
            run("bare", "10.244.1.8"),
            &[
                "bare",
                "1/1",
                "Running",
                "0",
                "3d4h",
                "10.244.1.8",
                "node-2",
                "<none>",
                "<none>",
            ],
        );
        let crashy = pod(
            "crashy",
            CREATED,
            Some("node-1"),
            Some("10.244.0.9"),
            json!({
                "phase": "Running",
                "containerStatuses": [{"name": "main", "ready": false, "restartCount": 7,
                                       "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
            }),
        );
        check(
            pods,
            crashy,
            &[
                "crashy",
                "0/1",
                "CrashLoopBackOff",
                "7",
                "3d4h",
                "10.244.0.9",
                "node-1",
                "<none>",
                "<none>",
            ],
        );
        let evicted = pod(
            "evicted",
            CREATED,
            Some("node-1"),
            Some("10.244.0.11"),
            json!({
                "phase": "Failed", "reason": "Evicted",
                "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]
            }),
        );
        check(
            pods,
            evicted,
            &[
                "evicted",
                "0/1",
                "Error",
                "0",
                "3d4h",
                "10.244.0.11",
                "node-1",
                "<none>",
                "<none>",
            ],
        );
        let pending = pod(
            "pending",
            CREATED,
            None,
            None,
            json!({
                "phase": "Pending",
                "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0,
                                       "state": {"waiting": {"reason": "ContainerCreating"}}}]
            }),
        );
        check(
            pods,
            pending,
            &[
                "pending",
                "0/1",
                "ContainerCreating",
                "0",
                "3d4h",
                "<none>",
                "<none>",
                "<none>",
                "<none>",
            ],
        );
        let completed = pod(
            "pi-xyz12",
            CREATED,
            Some("node-1"),
            Some("10.244.0.10"),
            json!({
                "phase": "Succeeded",
                "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
            }),
        );
        check(
            pods,
            completed,
            &[
                "pi-xyz12",
                "0/1",
                "Completed",
                "0",
                "3d4h",
                "10.244.0.10",
                "node-1",
                "<none>",
                "<none>",
            ],
        );
    }

    #[test]
    fn pod_status_covers_every_branch() {
        let pods = ri("", "pods");
        let status = |obj: Value| -> (String, String, String) {
            let cells = row_cells(pods, &obj, now());
            (shown(&cells[1]), shown(&cells[2]), shown(&cells[3]))
        };
        let p = |status: Value| pod("p", ONE_SEC_AGO, Some("node-1"), None, status);
        let with_init = |init_status: Value, restart_policy: Option<&str>| {
            let mut obj = p(
                json!({"phase": "Pending", "initContainerStatuses": [init_status],
                                   "containerStatuses": [{"name": "main", "ready": false, "restartCount": 0,
                                                          "state": {"waiting": {"reason": "PodInitializing"}}}]}),
            );
            let mut init = json!({"name": "init", "image": "busybox"});
            if let Some(rp) = restart_policy {
                init["restartPolicy"] = json!(rp);
            }
            obj["spec"]["initContainers"] = json!([init]);
            obj
        };
        let t = |s: (&str, &str, &str)| (s.0.to_string(), s.1.to_string(), s.2.to_string());

        // §d.2 STATUS variety, row by row.
        assert_eq!(
            status(p(json!({"phase": "Failed", "reason": "Evicted"}))),
            t(("0/1", "Evicted", "0"))
        );
        assert_eq!(
            status(p(
                json!({"phase": "Failed", "containerStatuses": [{"name": "main", "restartCount": 0,
                "state": {"terminated": {"exitCode": 2}}}]})
            )),
            t(("0/1", "ExitCode:2", "0"))
        );
        let mut gated = pod(
            "g",
            ONE_SEC_AGO,
            None,
            None,
            json!({"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
        );
        assert_eq!(status(gated.clone()), t(("0/1", "SchedulingGated", "0")));
        gated["metadata"]["name"] = json!("s-gated");
        check(
            pods,
            gated,
            &[
                "s-gated",
                "0/1",
                "SchedulingGated",
                "0",
                "1s",
                "<none>",
                "<none>",
                "<none>",
                "<none>",
            ],
        );
        let mut imgpull = p(json!({"phase": "Pending", "containerStatuses": [
            {"name": "main", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}},
            {"name": "side", "ready": true, "restartCount": 0, "state": {"running": {}}}]}));
        imgpull["spec"]["containers"] = json!([{"name": "main"}, {"name": "side"}]);
        assert_eq!(status(imgpull), t(("1/2", "ImagePullBackOff", "0")));
        assert_eq!(
            status(with_init(
                json!({"name": "init", "restartCount": 0, "state": {"running": {}}}),
                None
            )),
            t(("0/1", "Init:0/1", "0"))
        );
        assert_eq!(
            status(with_init(
                json!({"name": "init", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}),
                None
            )),
            t(("0/1", "Init:CrashLoopBackOff", "3"))
        );
        let mut nodelost = p(
            json!({"phase": "Running", "reason": "NodeLost", "containerStatuses": [running(true)]}),
        );
        nodelost["metadata"]["deletionTimestamp"] = json!(ONE_SEC_AGO);
        assert_eq!(status(nodelost), t(("1/1", "Unknown", "0")));
        let oom = p(
            json!({"phase": "Running", "containerStatuses": [{"name": "main", "ready": false, "restartCount": 2,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-25T10:55:00Z"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-25T10:55:00Z"}}}]}),
        );
        assert_eq!(status(oom), t(("0/1", "OOMKilled", "2 (65m ago)")));
        // What the kubelet writes for a node-pressure eviction: status.reason Evicted, but the
        // containers' terminated reasons win (printPod reads them after the pod's reason), so
        // an evicted pod shows Error (SIGKILLed) or Completed (exited on SIGTERM), as on
        // clusters since the kubelet reports its containers' final states.
        let evicted_killed = p(
            json!({"phase": "Failed", "reason": "Evicted", "containerStatuses": [{"name": "main", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}),
        );
        assert_eq!(status(evicted_killed), t(("0/1", "Error", "0")));
        let evicted_exited = p(
            json!({"phase": "Failed", "reason": "Evicted", "containerStatuses": [{"name": "main", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        assert_eq!(status(evicted_exited), t(("0/1", "Completed", "0")));
        // Graceful node shutdown: reason Terminated while the container still runs; its final
        // state afterwards.
        let shutting = p(
            json!({"phase": "Failed", "reason": "Terminated", "containerStatuses": [running(true)]}),
        );
        assert_eq!(status(shutting), t(("1/1", "Terminated", "0")));
        assert_eq!(
            status(p(json!({"phase": "Pending"}))),
            t(("0/1", "Pending", "0"))
        );
        let mut term = p(json!({"phase": "Running", "containerStatuses": [running(true)]}));
        term["metadata"]["deletionTimestamp"] = json!("2026-11-25T12:00:30Z");
        assert_eq!(status(term), t(("1/1", "Terminating", "0")));

        // Remaining branches of the walk.
        let mut terminal_deleting = p(
            json!({"phase": "Succeeded", "containerStatuses": [{"name": "main",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        terminal_deleting["metadata"]["deletionTimestamp"] = json!(ONE_SEC_AGO);
        assert_eq!(
            status(terminal_deleting),
            t(("0/1", "Completed", "0")),
            "terminal pods never show Terminating"
        );
        assert_eq!(
            status(with_init(
                json!({"name": "init", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}),
                None
            )),
            t(("0/1", "Init:Error", "0"))
        );
        assert_eq!(
            status(with_init(
                json!({"name": "init", "state": {"terminated": {"exitCode": 3}}}),
                None
            )),
            t(("0/1", "Init:ExitCode:3", "0"))
        );
        assert_eq!(
            status(with_init(
                json!({"name": "init", "state": {"terminated": {"exitCode": 137, "signal": 9}}}),
                None
            )),
            t(("0/1", "Init:Signal:9", "0"))
        );
        assert_eq!(
            status(with_init(
                json!({"name": "init", "state": {"waiting": {"reason": "PodInitializing"}}}),
                None
            )),
            t(("0/1", "Init:0/1", "0"))
        );
        // A finished init container lets the main containers decide: PodInitializing.
        assert_eq!(
            status(with_init(
                json!({"name": "init", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}),
                None
            )),
            t(("0/1", "PodInitializing", "0"))
        );
        // A started, ready sidecar counts towards READY and does not block initialization.
        let sidecar = with_init(
            json!({"name": "init", "started": true, "ready": true, "restartCount": 1, "state": {"running": {}}}),
            Some("Always"),
        );
        assert_eq!(status(sidecar), t(("1/2", "PodInitializing", "1")));
        assert_eq!(
            status(p(
                json!({"phase": "Running", "containerStatuses": [{"name": "main",
                "state": {"terminated": {"exitCode": 137, "signal": 9}}}]})
            )),
            t(("0/1", "Signal:9", "0"))
        );
        // Completed main container + a still-running one: Running if Ready, else NotReady.
        let mut mixed = p(json!({"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "b", "ready": true, "state": {"running": {}}}]}));
        mixed["spec"]["containers"] = json!([{"name": "a"}, {"name": "b"}]);
        assert_eq!(status(mixed.clone()), t(("1/2", "NotReady", "0")));
        mixed["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        assert_eq!(status(mixed), t(("1/2", "Running", "0")));
        // Lowest-index container wins; Evicted is overridden by a container reason.
        let mut two = p(
            json!({"phase": "Failed", "reason": "Evicted", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
            {"name": "b", "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        two["spec"]["containers"] = json!([{"name": "a"}, {"name": "b"}]);
        assert_eq!(status(two), t(("0/2", "Error", "0")));
        // Restarts without a finishedAt carry no suffix.
        assert_eq!(
            status(p(
                json!({"phase": "Running", "containerStatuses": [{"name": "main", "ready": true, "restartCount": 4,
                "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1}}}]})
            )),
            t(("1/1", "Running", "4"))
        );
    }

    #[test]
    fn pod_wide_cells_and_conditions() {
        let pods = ri("", "pods");
        let mut obj = pod(
            "w",
            CREATED,
            Some("node-1"),
            Some("10.0.0.9"),
            json!({
                "phase": "Succeeded", "nominatedNodeName": "node-7",
                "conditions": [{"type": "gate-a", "status": "True"}, {"type": "gate-b", "status": "False"}]
            }),
        );
        obj["spec"]["readinessGates"] =
            json!([{"conditionType": "gate-a"}, {"conditionType": "gate-b"}]);
        let cells = row_cells(pods, &obj, now());
        assert_eq!(shown(&cells[5]), "10.0.0.9");
        assert_eq!(shown(&cells[7]), "node-7");
        assert_eq!(shown(&cells[8]), "1/2");
        assert_eq!(
            row_conditions(pods, &obj),
            Some(
                json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                          "message": "The pod has completed successfully."}])
            )
        );
        obj["status"]["phase"] = json!("Failed");
        assert_eq!(
            row_conditions(pods, &obj).unwrap()[0]["message"],
            "The pod failed."
        );
        obj["status"]["phase"] = json!("Running");
        assert_eq!(row_conditions(pods, &obj), None);
        assert_eq!(row_conditions(ri("", "nodes"), &obj), None);
    }

    fn meta(name: &str, ns: Option<&str>) -> Value {
        let mut m = json!({"name": name, "creationTimestamp": CREATED});
        if let Some(ns) = ns {
            m["namespace"] = json!(ns);
        }
        m
    }

    fn template(name: &str, image: &str) -> Value {
        json!({"spec": {"containers": [{"name": name, "image": image}]}})
    }

    #[test]
    fn workload_rows_match_the_samples() {
        check(
            ri("apps", "deployments"),
            json!({"metadata": meta("web", Some("default")),
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template("nginx", "nginx:1.25")},
                   "status": {"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}}),
            &[
                "web",
                "2/2",
                "2",
                "2",
                "3d4h",
                "nginx",
                "nginx:1.25",
                "app=web",
            ],
        );
        check(
            ri("apps", "replicasets"),
            json!({"metadata": meta("web-7d4b9c8f5", Some("default")),
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"pod-template-hash": "7d4b9c8f5", "app": "web"}},
                            "template": template("nginx", "nginx:1.25")},
                   "status": {"replicas": 2, "readyReplicas": 2}}),
            &[
                "web-7d4b9c8f5",
                "2",
                "2",
                "2",
                "3d4h",
                "nginx",
                "nginx:1.25",
                "app=web,pod-template-hash=7d4b9c8f5",
            ],
        );
        check(
            ri("apps", "statefulsets"),
            json!({"metadata": meta("db", Some("default")), "spec": {"replicas": 1, "template": template("pg", "postgres:16")},
                   "status": {"readyReplicas": 1}}),
            &["db", "1/1", "3d4h", "pg", "postgres:16"],
        );
        check(
            ri("apps", "daemonsets"),
            json!({"metadata": meta("kube-proxy", Some("kube-system")),
                   "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                            "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                                  "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.32.5"}]}}},
                   "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                              "updatedNumberScheduled": 3, "numberAvailable": 2}}),
            &[
                "kube-proxy",
                "3",
                "3",
                "2",
                "3",
                "2",
                "kubernetes.io/os=linux",
                "3d4h",
                "kube-proxy",
                "registry.k8s.io/kube-proxy:v1.32.5",
                "k8s-app=kube-proxy",
            ],
        );
        check(
            ri("batch", "jobs"),
            json!({"metadata": meta("pi", Some("default")),
                   "spec": {"completions": 1, "parallelism": 1,
                            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "x"}},
                            "template": template("pi", "perl:5.34")},
                   "status": {"succeeded": 1, "startTime": "2026-11-22T08:00:01Z", "completionTime": "2026-11-22T08:00:18Z",
                              "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}}),
            &[
                "pi",
                "Complete",
                "1/1",
                "17s",
                "3d4h",
                "pi",
                "perl:5.34",
                "batch.kubernetes.io/controller-uid=x",
            ],
        );
        check(
            ri("policy", "poddisruptionbudgets"),
            json!({"metadata": meta("web-pdb", Some("default")), "spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 1}}),
            &["web-pdb", "1", "N/A", "1", "3d4h"],
        );
        check(
            ri("policy", "poddisruptionbudgets"),
            json!({"metadata": meta("pct", Some("default")), "spec": {"maxUnavailable": "25%"}}),
            &["pct", "N/A", "25%", "0", "3d4h"],
        );
    }

    #[test]
    fn job_status_and_completions_rules() {
        let jobs = ri("batch", "jobs");
        let job = |spec: Value, status: Value| json!({"metadata": meta("j", None), "spec": spec, "status": status});
        let cells = |obj: Value| -> Vec<String> {
            row_cells(jobs, &obj, now())
                .iter()
                .take(4)
                .map(shown)
                .collect()
        };
        // Running: duration grows with now.
        assert_eq!(
            cells(job(
                json!({"parallelism": 3}),
                json!({"succeeded": 1, "startTime": "2026-11-25T11:55:00Z"})
            )),
            ["j", "Running", "1/1 of 3", "5m"]
        );
        assert_eq!(
            cells(job(json!({}), json!({}))),
            ["j", "Running", "0/1", ""]
        );
        let cond = |ty: &str| json!({"conditions": [{"type": ty, "status": "True"}]});
        assert_eq!(
            cells(job(json!({"completions": 5}), cond("Failed")))[1],
            "Failed"
        );
        assert_eq!(cells(job(json!({}), cond("Suspended")))[1], "Suspended");
        assert_eq!(
            cells(job(json!({}), cond("FailureTarget")))[1],
            "FailureTarget"
        );
        assert_eq!(
            cells(job(json!({}), cond("SuccessCriteriaMet")))[1],
            "SuccessCriteriaMet"
        );
        let mut deleting = job(json!({}), cond("Suspended"));
        deleting["metadata"]["deletionTimestamp"] = json!(CREATED);
        assert_eq!(cells(deleting)[1], "Terminating");
        // A False condition does not count; the first condition of a type decides.
        assert_eq!(
            cells(job(
                json!({}),
                json!({"conditions": [{"type": "Complete", "status": "False"}, {"type": "Complete", "status": "True"}]})
            ))[1],
            "Running"
        );
    }

    #[test]
    fn storage_and_misc_rows_match_the_samples() {
        check(
            ri("", "persistentvolumes"),
            json!({"metadata": meta("pv-1", None),
                   "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
                            "claimRef": {"namespace": "default", "name": "data-db-0"}, "storageClassName": "standard",
                            "volumeMode": "Filesystem"},
                   "status": {"phase": "Bound"}}),
            &[
                "pv-1",
                "10Gi",
                "RWO",
                "Delete",
                "Bound",
                "default/data-db-0",
                "standard",
                "<unset>",
                "",
                "3d4h",
                "Filesystem",
            ],
        );
        let mut terminating_pv = json!({"metadata": meta("pv-2", None),
            "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce"], "volumeAttributesClassName": "gold"},
            "status": {"phase": "Released", "reason": "Gone"}});
        terminating_pv["metadata"]["deletionTimestamp"] = json!(CREATED);
        terminating_pv["metadata"]["annotations"] =
            json!({"volume.beta.kubernetes.io/storage-class": "old"});
        check(
            ri("", "persistentvolumes"),
            terminating_pv,
            &[
                "pv-2",
                "0",
                "RWO,ROX,RWX,RWOP",
                "",
                "Terminating",
                "",
                "old",
                "gold",
                "Gone",
                "3d4h",
                "<unset>",
            ],
        );
        check(
            ri("", "persistentvolumeclaims"),
            json!({"metadata": meta("data-db-0", Some("default")),
                   "spec": {"volumeName": "pv-1", "storageClassName": "standard", "volumeMode": "Filesystem",
                            "resources": {"requests": {"storage": "5Gi"}}},
                   "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}}),
            &[
                "data-db-0",
                "Bound",
                "pv-1",
                "10Gi",
                "RWO",
                "standard",
                "<unset>",
                "3d4h",
                "Filesystem",
            ],
        );
        check(
            ri("", "persistentvolumeclaims"),
            json!({"metadata": meta("unbound", Some("default")), "spec": {}, "status": {"phase": "Pending", "capacity": {"storage": "1Gi"}}}),
            &[
                "unbound", "Pending", "", "", "", "", "<unset>", "3d4h", "<unset>",
            ],
        );
        let va = json!({"metadata": meta("csi-0123abcd", None),
            "spec": {"attacher": "csi.example.com", "source": {"persistentVolumeName": "pv-1"}, "nodeName": "node-2"},
            "status": {"attached": true}});
        check(
            ri("storage.k8s.io", "volumeattachments"),
            va.clone(),
            &[
                "csi-0123abcd",
                "csi.example.com",
                "pv-1",
                "node-2",
                "true",
                "3d4h",
            ],
        );
        assert_eq!(
            row_cells(ri("storage.k8s.io", "volumeattachments"), &va, now())[4],
            json!(true),
            "boolean cell"
        );
        for ns in ["default", "kube-node-lease"] {
            check(
                ri("", "namespaces"),
                json!({"metadata": meta(ns, None), "status": {"phase": "Active"}}),
                &[ns, "Active", "3d4h"],
            );
        }
        check(
            ri("coordination.k8s.io", "leases"),
            json!({"metadata": meta("node-1", Some("kube-node-lease")), "spec": {"holderIdentity": "node-1"}}),
            &["node-1", "node-1", "3d4h"],
        );
        check(
            ri("coordination.k8s.io", "leases"),
            json!({"metadata": meta("free", None), "spec": {}}),
            &["free", "", "3d4h"],
        );
    }

    /// A kubelet-reported core/v1 event; `what` is (reason, type), `about` is (kind, name).
    fn core_event(
        name: &str,
        what: (&str, &str),
        about: (&str, &str),
        msg: &str,
        host: &str,
        count: i64,
    ) -> Value {
        let ((reason, ty), (kind, obj)) = (what, about);
        json!({"metadata": {"name": name, "namespace": "default", "creationTimestamp": EVENT_AT},
               "involvedObject": {"kind": kind, "name": obj, "namespace": "default"},
               "reason": reason, "message": msg, "type": ty, "source": {"component": "kubelet", "host": host},
               "firstTimestamp": EVENT_AT, "lastTimestamp": EVENT_AT, "count": count})
    }

    #[test]
    fn event_rows_match_the_samples() {
        let events = ri("", "events");
        check(
            events,
            core_event(
                "bare.17a2",
                ("Started", "Normal"),
                ("Pod", "bare"),
                "Started container main",
                "node-2",
                1,
            ),
            &[
                "42m",
                "Normal",
                "Started",
                "pod/bare",
                "",
                "kubelet, node-2",
                "Started container main",
                "42m",
                "1",
                "bare.17a2",
            ],
        );
        check(
            events,
            core_event(
                "crashy.17a3",
                ("BackOff", "Warning"),
                ("Pod", "crashy"),
                "Back-off restarting failed container main in pod crashy_default(uid)\n",
                "node-1",
                12,
            ),
            &[
                "42m",
                "Warning",
                "BackOff",
                "pod/crashy",
                "",
                "kubelet, node-1",
                "Back-off restarting failed container main in pod crashy_default(uid)",
                "42m",
                "12",
                "crashy.17a3",
            ],
        );
        // New-API style event: eventTime only, series, reporting controller, no name.
        let ev = json!({"metadata": {"name": "n.1", "creationTimestamp": EVENT_AT},
            "involvedObject": {"kind": "Node"}, "reason": "NodeNotReady", "type": "Normal",
            "eventTime": "2026-11-25T11:00:00.000000Z", "reportingComponent": "node-controller",
            "series": {"count": 3, "lastObservedTime": "2026-11-25T11:59:00.000000Z"}});
        check(
            events,
            ev,
            &[
                "60s",
                "Normal",
                "NodeNotReady",
                "node",
                "",
                "node-controller",
                "",
                "60m",
                "3",
                "n.1",
            ],
        );
        let bare = json!({"metadata": {"name": "x"}});
        check(
            events,
            bare,
            &["<unknown>", "", "", "", "", "", "", "<unknown>", "1", "x"],
        );
        // events.k8s.io/v1 prints through the same printer.
        let v1 = json!({"metadata": {"name": "node-2.17a1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "node-2"}, "reason": "NodeReady", "type": "Normal",
            "note": "Node node-2 status is now: NodeReady", "deprecatedSource": {"component": "kubelet", "host": "node-2"},
            "deprecatedFirstTimestamp": EVENT_AT, "deprecatedLastTimestamp": EVENT_AT, "deprecatedCount": 1,
            "reportingController": "kubelet", "reportingInstance": "node-2"});
        check(
            ri("events.k8s.io", "events"),
            v1,
            &[
                "42m",
                "Normal",
                "NodeReady",
                "node/node-2",
                "",
                "kubelet, node-2",
                "Node node-2 status is now: NodeReady",
                "42m",
                "1",
                "node-2.17a1",
            ],
        );
    }

    #[test]
    fn config_and_service_rows() {
        check(
            ri("", "configmaps"),
            json!({"metadata": meta("cfg", Some("default")), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
            &["cfg", "3", "3d4h"],
        );
        check(
            ri("", "secrets"),
            json!({"metadata": meta("s", Some("default")), "data": {"k": "dg=="}}),
            &["s", "Opaque", "1", "3d4h"],
        );
        check(
            ri("", "secrets"),
            json!({"metadata": meta("tls", Some("default")), "type": "kubernetes.io/tls"}),
            &["tls", "kubernetes.io/tls", "0", "3d4h"],
        );
        check(
            ri("", "serviceaccounts"),
            json!({"metadata": meta("default", Some("default")), "secrets": [{"name": "x"}]}),
            &["default", "1", "3d4h"],
        );
        check(
            ri("", "services"),
            json!({"metadata": meta("kubernetes", Some("default")),
                   "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                            "ports": [{"port": 443, "protocol": "TCP"}]}}),
            &[
                "kubernetes",
                "ClusterIP",
                "10.96.0.1",
                "<none>",
                "443/TCP",
                "3d4h",
                "<none>",
            ],
        );
        check(
            ri("", "services"),
            json!({"metadata": meta("web", Some("default")),
                   "spec": {"type": "NodePort", "clusterIPs": ["10.96.3.4"], "selector": {"app": "web", "tier": "fe"},
                            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}),
            &[
                "web",
                "NodePort",
                "10.96.3.4",
                "<none>",
                "80:30080/TCP,53/UDP",
                "3d4h",
                "app=web,tier=fe",
            ],
        );
        check(
            ri("", "services"),
            json!({"metadata": meta("lb", Some("default")), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.9"]}}),
            &[
                "lb",
                "LoadBalancer",
                "10.96.0.9",
                "<pending>",
                "<none>",
                "3d4h",
                "<none>",
            ],
        );
        check(
            ri("", "services"),
            json!({"metadata": meta("lb2", Some("default")), "spec": {"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]},
                   "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}, {"hostname": "a.example"}]}}}),
            &[
                "lb2",
                "LoadBalancer",
                "<none>",
                "5.6.7.8,a.example,9.9.9.9",
                "<none>",
                "3d4h",
                "<none>",
            ],
        );
        check(
            ri("", "services"),
            json!({"metadata": meta("ext", Some("default")), "spec": {"type": "ExternalName", "externalName": "db.example"}}),
            &[
                "ext",
                "ExternalName",
                "<none>",
                "db.example",
                "<none>",
                "3d4h",
                "<none>",
            ],
        );
        check(
            ri("", "resourcequotas"),
            json!({"metadata": meta("q", Some("default")),
                   "status": {"hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi"},
                              "used": {"pods": "3", "limits.cpu": "500m"}}}),
            &[
                "q",
                "pods: 3/10, requests.memory: 0/1Gi",
                "limits.cpu: 500m/2",
                "3d4h",
            ],
        );
        check(
            ri("apps", "controllerrevisions"),
            json!({"metadata": {"name": "kube-proxy-5d8f", "creationTimestamp": CREATED,
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "controller": true}]},
                   "revision": 2}),
            &["kube-proxy-5d8f", "daemonset.apps/kube-proxy", "2", "3d4h"],
        );
        check(
            ri("apps", "controllerrevisions"),
            json!({"metadata": meta("orphan", None), "revision": 1}),
            &["orphan", "<none>", "1", "3d4h"],
        );
        // No printer upstream: the default convertor's Name / Created At (RFC 3339, UTC).
        check(
            ri("", "limitranges"),
            json!({"metadata": meta("limits", Some("default"))}),
            &["limits", "2026-11-22T08:00:00Z"],
        );
        check(
            ri("", "limitranges"),
            json!({"metadata": {"name": "x"}}),
            &["x", "0001-01-01T00:00:00Z"],
        );
        let default_cols = column_definitions(ri("", "limitranges"));
        assert_eq!(default_cols[1]["name"], "Created At");
        assert_eq!(default_cols[1]["type"], "date");
    }

    #[test]
    fn label_selectors_print_like_apimachinery() {
        let deploy = ri("apps", "deployments");
        let rs = ri("apps", "replicasets");
        let sel = |s: Value| json!({"metadata": meta("x", None), "spec": {"selector": s}});
        let last = |r: &ResourceInfo, obj: Value| shown(row_cells(r, &obj, now()).last().unwrap());
        let exprs = json!({"matchLabels": {"z": "1"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "a", "operator": "Exists"},
            {"key": "b", "operator": "DoesNotExist"}]});
        assert_eq!(
            last(deploy, sel(exprs.clone())),
            "a,!b,env notin (prod),tier in (api,web),z=1"
        );
        assert_eq!(
            last(rs, sel(exprs)),
            "a,!b,env notin (prod),tier in (api,web),z=1"
        );
        assert_eq!(last(deploy, sel(json!({}))), "");
        assert_eq!(last(rs, sel(json!({}))), "<none>");
        assert_eq!(
            last(rs, json!({"metadata": meta("x", None), "spec": {}})),
            "<none>"
        );
        let bad =
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]});
        assert_eq!(last(deploy, sel(bad.clone())), "<invalid>");
        assert_eq!(last(rs, sel(bad)), "<error>");
        assert_eq!(
            last(
                rs,
                sel(json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}))
            ),
            "<error>"
        );
    }

    #[test]
    fn every_resource_has_matching_columns_and_cells() {
        let objects = [
            json!({}),
            json!({"metadata": meta("x", Some("ns")), "spec": {}, "status": {}}),
        ];
        for r in RESOURCES {
            let cols = column_definitions(r);
            assert!(!cols.is_empty(), "{}", r.plural);
            let names = cols.iter().filter(|c| c["format"] == "name").count();
            assert!(names >= 1, "{} has a name column", r.plural);
            for c in &cols {
                for field in ["name", "type", "format", "description", "priority"] {
                    assert!(
                        c.get(field).is_some(),
                        "{} column {} lacks {field}",
                        r.plural,
                        c["name"]
                    );
                }
            }
            for obj in &objects {
                assert_eq!(row_cells(r, obj, now()).len(), cols.len(), "{}", r.plural);
            }
        }
        // Priority-1 columns exist exactly where kubectl shows extra `-o wide` columns.
        let wide = |g: &str, p: &str| -> Vec<String> {
            column_definitions(ri(g, p))
                .iter()
                .filter(|c| c["priority"] == 1)
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            wide("", "pods"),
            ["IP", "Node", "Nominated Node", "Readiness Gates"]
        );
        assert_eq!(
            wide("", "nodes"),
            [
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            wide("", "events"),
            ["Subobject", "Source", "First Seen", "Count", "Name"]
        );
        assert_eq!(wide("", "persistentvolumes"), ["VolumeMode"]);
        assert!(wide("policy", "poddisruptionbudgets").is_empty());
        assert!(wide("", "namespaces").is_empty());
    }

    #[test]
    fn table_object_and_include_modes() {
        let pods = ri("", "pods");
        let item = pod("a", CREATED, Some("n"), None, json!({"phase": "Succeeded"}));
        let list_meta =
            json!({"resourceVersion": "167", "continue": "abc", "remainingItemCount": 3});
        let t = table(
            pods,
            std::slice::from_ref(&item),
            IncludeObject::Metadata,
            list_meta.clone(),
            now(),
            true,
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], list_meta);
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 9);
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        let row = &t["rows"][0];
        assert_eq!(row["cells"][0], "a");
        assert_eq!(row["conditions"][0]["reason"], "Succeeded");
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(row["object"]["metadata"], item["metadata"]);
        assert!(row["object"].get("spec").is_none());

        let full = table(
            pods,
            std::slice::from_ref(&item),
            IncludeObject::Object,
            json!({}),
            now(),
            false,
        );
        assert_eq!(
            full["columnDefinitions"],
            Value::Null,
            "watch events after the first carry no headers"
        );
        assert_eq!(full["rows"][0]["object"]["kind"], "Pod");
        assert_eq!(full["rows"][0]["object"]["apiVersion"], "v1");
        assert_eq!(full["rows"][0]["object"]["spec"], item["spec"]);

        let none = table(
            ri("apps", "deployments"),
            &[json!({"metadata": meta("d", None)})],
            IncludeObject::None,
            json!({}),
            now(),
            true,
        );
        assert_eq!(none["rows"][0]["object"], Value::Null);
        assert!(none["rows"][0].get("conditions").is_none());
        let empty = table(
            pods,
            &[],
            IncludeObject::Metadata,
            json!({"resourceVersion": "9"}),
            now(),
            true,
        );
        assert_eq!(empty["rows"], json!([]));

        let status = json!({"kind": "Status", "status": "Failure", "reason": "Expired", "message": "too old resource version: 132 (101)", "code": 410});
        let st = status_table(&status, true);
        assert_eq!(
            st["rows"][0]["cells"],
            json!(["Failure", "Expired", "too old resource version: 132 (101)"])
        );
        assert_eq!(st["columnDefinitions"][2]["name"], "Message");
    }

    #[test]
    fn include_object_parsing() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("Metadata")),
            Ok(IncludeObject::Metadata)
        );
        assert_eq!(
            IncludeObject::parse(Some("Object")),
            Ok(IncludeObject::Object)
        );
        assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
        assert_eq!(
            IncludeObject::parse(Some("all")),
            Err("unrecognized includeObject value: \"all\"".to_string())
        );
    }

    #[test]
    fn accept_negotiation() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert!(wants_table(kubectl));
        assert_eq!(
            accepted_form(Some(kubectl)),
            Some(AcceptedForm::Table { version: "v1" })
        );
        assert!(wants_table(
            "application/json;g=meta.k8s.io;as=Table;v=v1beta1"
        ));
        assert_eq!(
            accepted_form(Some("application/json;as=Table;g=meta.k8s.io;v=v1beta1")),
            Some(AcceptedForm::Table { version: "v1beta1" })
        );
        assert!(!wants_table("application/json"));
        assert!(!wants_table(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
        assert!(!wants_table("application/json;as=Table;v=v2;g=meta.k8s.io"));
        assert!(
            !wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"),
            "client order wins"
        );
        assert!(wants_table(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
        assert_eq!(
            wants_partial_metadata(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            ),
            Some(true)
        );
        assert_eq!(
            wants_partial_metadata("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Some(false)
        );
        assert_eq!(wants_partial_metadata(kubectl), None);
        assert_eq!(accepted_form(None), Some(AcceptedForm::Json));
        assert_eq!(accepted_form(Some("*/*")), Some(AcceptedForm::Json));
        assert_eq!(
            accepted_form(Some("application/vnd.kubernetes.protobuf")),
            None
        );
        let list = partial_object_metadata_list(
            &[json!({"metadata": {"name": "a"}, "spec": {}})],
            json!({"resourceVersion": "5"}),
        );
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(
            list["items"][0],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
    }

    /// The objects behind the api-surface §d samples (ages 3d4h, events 42m at `now()`).
    fn sample_objects() -> Vec<(&'static ResourceInfo, Value)> {
        let mut out: Vec<(&'static ResourceInfo, Value)> = Vec::new();
        for (i, (name, ready, labels)) in [
            (
                "node-1",
                "True",
                json!({"node-role.kubernetes.io/control-plane": ""}),
            ),
            ("node-2", "True", json!({})),
            ("node-3", "Unknown", json!({})),
        ]
        .into_iter()
        .enumerate()
        {
            let mut n = node(name, Some(ready), labels, false);
            n["status"]["addresses"] =
                json!([{"type": "InternalIP", "address": format!("10.0.0.{}", i + 1)}]);
            out.push((ri("", "nodes"), n));
        }
        let running_pod = |ns: &str, name: &str, node: &str, ip: &str| {
            let mut p = pod(
                name,
                CREATED,
                Some(node),
                Some(ip),
                json!({"phase": "Running", "containerStatuses": [running(true)]}),
            );
            p["metadata"]["namespace"] = json!(ns);
            p
        };
        let waiting = |reason: &str, restarts: i64| json!([{"name": "main", "ready": false, "restartCount": restarts, "state": {"waiting": {"reason": reason}}}]);
        let terminated = |reason: &str, code: i64| json!([{"name": "main", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": code, "reason": reason}}}]);
        let pods = [
            running_pod("default", "bare", "node-2", "10.244.1.8"),
            pod(
                "crashy",
                CREATED,
                Some("node-1"),
                Some("10.244.0.9"),
                json!({"phase": "Running", "containerStatuses": waiting("CrashLoopBackOff", 7)}),
            ),
            running_pod("default", "db-0", "node-2", "10.244.1.7"),
            pod(
                "evicted",
                CREATED,
                Some("node-1"),
                Some("10.244.0.11"),
                json!({"phase": "Failed", "reason": "Evicted", "containerStatuses": terminated("Error", 137)}),
            ),
            pod(
                "pending",
                CREATED,
                None,
                None,
                json!({"phase": "Pending", "containerStatuses": waiting("ContainerCreating", 0)}),
            ),
            pod(
                "pi-xyz12",
                CREATED,
                Some("node-1"),
                Some("10.244.0.10"),
                json!({"phase": "Succeeded", "containerStatuses": terminated("Completed", 0)}),
            ),
            running_pod("default", "web-7d4b9c8f5-abcde", "node-2", "10.244.1.5"),
            running_pod("default", "web-7d4b9c8f5-fghij", "node-2", "10.244.1.6"),
            running_pod("kube-system", "kube-proxy-x1", "node-2", "10.0.0.2"),
        ];
        out.extend(pods.into_iter().map(|p| (ri("", "pods"), p)));
        out.push((ri("apps", "deployments"), json!({"metadata": meta("web", Some("default")),
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template("nginx", "nginx:1.25")},
            "status": {"replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}})));
        out.push((ri("apps", "replicasets"), json!({"metadata": meta("web-7d4b9c8f5", Some("default")),
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9c8f5"}},
                     "template": template("nginx", "nginx:1.25")},
            "status": {"replicas": 2, "readyReplicas": 2}})));
        out.push((ri("apps", "statefulsets"), json!({"metadata": meta("db", Some("default")),
            "spec": {"replicas": 1, "template": template("pg", "postgres:16")}, "status": {"readyReplicas": 1}})));
        out.push((ri("apps", "daemonsets"), json!({"metadata": meta("kube-proxy", Some("kube-system")),
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                           "containers": [{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.32.5"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                       "updatedNumberScheduled": 3, "numberAvailable": 2}})));
        out.push((ri("batch", "jobs"), json!({"metadata": meta("pi", Some("default")),
            "spec": {"completions": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "x"}},
                     "template": template("pi", "perl:5.34")},
            "status": {"succeeded": 1, "startTime": "2026-11-22T08:00:01Z", "completionTime": "2026-11-22T08:00:18Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}})));
        out.push((
            ri("policy", "poddisruptionbudgets"),
            json!({"metadata": meta("web-pdb", Some("default")),
            "spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 1}}),
        ));
        out.push((ri("", "persistentvolumes"), json!({"metadata": meta("pv-1", None),
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
                     "claimRef": {"namespace": "default", "name": "data-db-0"}, "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}})));
        out.push((ri("", "persistentvolumeclaims"), json!({"metadata": meta("data-db-0", Some("default")),
            "spec": {"volumeName": "pv-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"]}})));
        out.push((ri("storage.k8s.io", "volumeattachments"), json!({"metadata": meta("csi-0123abcd", None),
            "spec": {"attacher": "csi.example.com", "source": {"persistentVolumeName": "pv-1"}, "nodeName": "node-2"},
            "status": {"attached": true}})));
        for ns in ["default", "kube-node-lease", "kube-public", "kube-system"] {
            out.push((
                ri("", "namespaces"),
                json!({"metadata": meta(ns, None), "status": {"phase": "Active"}}),
            ));
        }
        for n in ["node-1", "node-2", "node-3"] {
            out.push((ri("coordination.k8s.io", "leases"), json!({"metadata": meta(n, Some("kube-node-lease")), "spec": {"holderIdentity": n}})));
        }
        let events = [
            core_event(
                "bare.17a2",
                ("Started", "Normal"),
                ("Pod", "bare"),
                "Started container main",
                "node-2",
                1,
            ),
            core_event(
                "crashy.17a3",
                ("BackOff", "Warning"),
                ("Pod", "crashy"),
                "Back-off restarting failed container main in pod crashy_default(uid)",
                "node-1",
                12,
            ),
            core_event(
                "node-2.17a1",
                ("NodeReady", "Normal"),
                ("Node", "node-2"),
                "Node node-2 status is now: NodeReady",
                "node-2",
                1,
            ),
        ];
        out.extend(events.into_iter().map(|e| (ri("", "events"), e)));
        out
    }

    /// Serves `sample_objects()` as Tables for list paths (what the real server would answer).
    fn table_stub() -> axum::Router {
        axum::Router::new().fallback(|req: axum::extract::Request| async move {
            let path: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
            let (group, version, rest) = match path.as_slice() {
                ["api", v, rest @ ..] => ("", *v, rest),
                ["apis", g, v, rest @ ..] => (*g, *v, rest),
                _ => return crate::discovery::not_found(),
            };
            let (ns, plural) = match rest {
                [plural] => (None, *plural),
                ["namespaces", ns, plural] => (Some(*ns), *plural),
                _ => return crate::discovery::not_found(),
            };
            let Some(r) = lookup(group, version, plural) else {
                return crate::discovery::not_found();
            };
            let items: Vec<Value> = sample_objects()
                .into_iter()
                .filter(|(x, o)| *x == r && ns.is_none_or(|ns| o["metadata"]["namespace"] == ns))
                .map(|(_, o)| o)
                .collect();
            let accept = req
                .headers()
                .get("accept")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            assert!(wants_table(accept), "kubectl asks for Tables: {accept}");
            let body = table(
                r,
                &items,
                IncludeObject::Metadata,
                json!({"resourceVersion": "100"}),
                now(),
                true,
            );
            axum::response::IntoResponse::into_response((
                [("content-type", "application/json")],
                body.to_string(),
            ))
        })
    }

    /// The real kubectl prints our Tables byte-for-byte as the api-surface §d samples
    /// (testdata/kubectl_get.txt, copied verbatim from the spec).
    #[tokio::test]
    async fn real_kubectl_prints_the_samples() {
        use crate::discovery::kubectl_harness::{Harness, bin_dir};
        let Some(dir) = bin_dir() else {
            eprintln!("SKIPPED: kubectl.1.27/kubectl.1.33 not found (set KLAB_KUBECTL_DIR)");
            return;
        };
        let app = crate::discovery::routes()
            .merge(crate::openapi::routes())
            .merge(table_stub());
        let h = Harness::start(dir, app).await;
        let samples = include_str!("testdata/kubectl_get.txt");
        let mut checked = 0;
        for block in samples.split("$ kubectl ").filter(|b| !b.trim().is_empty()) {
            let (cmd, expected) = block.split_once('\n').unwrap();
            let expected = expected.trim_end_matches('\n').to_string() + "\n";
            let args: Vec<&str> = cmd.split_whitespace().collect();
            for version in ["1.33", "1.27"] {
                let (ok, out, err) = h.kubectl(version, &args).await;
                assert!(ok, "kubectl.{version} {cmd}: {err}");
                assert_eq!(out, expected, "kubectl.{version} {cmd}\nstderr: {err}");
            }
            checked += 1;
        }
        assert_eq!(checked, 19);
    }

    #[test]
    fn scale_table_matches_print_scale() {
        let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED, "resourceVersion": "12"},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}});
        let t = scale_table(&scale, IncludeObject::Metadata, now(), true);
        assert_eq!(t["rows"][0]["cells"], json!(["web", 3, 2, "3d4h"]));
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Desired", "Available", "Age"]);
        assert_eq!(t["columnDefinitions"][0]["format"], "");
        assert_eq!(t["metadata"]["resourceVersion"], "12");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            scale_table(&scale, IncludeObject::Object, now(), false)["rows"][0]["object"],
            scale
        );
    }
}
