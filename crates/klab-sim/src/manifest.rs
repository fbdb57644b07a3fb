//! Kubernetes manifests in scenarios: multi-document YAML split and checked up front (with line
//! numbers), then created through the admin client the way `kubectl create -f` / a first
//! `kubectl apply -f` does.

use klab_apiserver::registry::{self, ResourceInfo};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

use crate::scenario::ScenarioError;

/// One object to create.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub object: Value,
    pub resource: &'static ResourceInfo,
    /// `file:line` of the document, for messages.
    pub source: String,
}

impl Manifest {
    pub fn kind(&self) -> &str {
        self.resource.kind
    }

    pub fn name(&self) -> &str {
        self.object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The namespace the object is created in (`default` when the manifest names none).
    pub fn namespace(&self) -> Option<&str> {
        if !self.resource.namespaced {
            return None;
        }
        Some(
            self.object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default"),
        )
    }

    /// `kind/name` as kubectl prints it (`deployment.apps/web`).
    pub fn display(&self) -> String {
        let k = self.resource.kind.to_ascii_lowercase();
        let g = if self.resource.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.resource.group)
        };
        let name = if self.name().is_empty() {
            self.object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        } else {
            self.name().to_string()
        };
        format!("{k}{g}/{name}")
    }

    /// Creates the object as the client's identity and returns the stored object.
    pub async fn create(&self, client: &kube::Client) -> Result<DynamicObject, kube::Error> {
        let ar = api_resource(self.resource);
        let api: Api<DynamicObject> = match self.namespace() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let obj: DynamicObject =
            serde_json::from_value(self.object.clone()).map_err(kube::Error::SerdeError)?;
        api.create(&PostParams::default(), &obj).await
    }
}

/// kube's dynamic description of one of klab's resources.
pub fn api_resource(ri: &ResourceInfo) -> ApiResource {
    ApiResource {
        group: ri.group.into(),
        version: ri.version.into(),
        api_version: ri.api_version(),
        kind: ri.kind.into(),
        plural: ri.plural.into(),
    }
}

/// Splits multi-document YAML on `---` lines and checks each document. `line_offset` is added to
/// line numbers (inline manifests start part-way into the scenario file).
pub fn parse_documents(
    text: &str,
    file: &str,
    line_offset: u64,
) -> Result<Vec<Manifest>, ScenarioError> {
    let mut out = Vec::new();
    let mut chunk = String::new();
    let mut chunk_start = 1u64;
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim_end() == "---" || l.starts_with("--- ") {
            flush(&chunk, chunk_start, file, line_offset, &mut out)?;
            chunk.clear();
            chunk_start = i as u64 + 2;
        } else {
            chunk.push_str(l);
            chunk.push('\n');
        }
    }
    flush(&chunk, chunk_start, file, line_offset, &mut out)?;
    Ok(out)
}

fn flush(
    chunk: &str,
    start: u64,
    file: &str,
    offset: u64,
    out: &mut Vec<Manifest>,
) -> Result<(), ScenarioError> {
    let meaningful = chunk.lines().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    });
    if !meaningful {
        return Ok(());
    }
    let base = start + offset; // line number of the chunk's first line in `file`
    let at = |line: u64, msg: String| ScenarioError::At {
        file: file.into(),
        line,
        msg,
    };
    let value: Value = serde_saphyr::from_str(chunk).map_err(|e| {
        let first = crate::scenario::yaml_message(&e);
        let line = e
            .location()
            .map(|l| l.line())
            .filter(|l| *l > 0)
            .unwrap_or(1);
        at(base + line - 1, format!("malformed manifest: {first}"))
    })?;
    // First non-blank, non-comment line: where the document visibly starts.
    let doc_line = base
        + chunk
            .lines()
            .position(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#')
            })
            .unwrap_or(0) as u64;
    let obj = value.as_object().ok_or_else(|| {
        at(
            doc_line,
            "malformed manifest: a document must be a mapping".into(),
        )
    })?;
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| at(doc_line, "malformed manifest: missing apiVersion".into()))?;
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| at(doc_line, "malformed manifest: missing kind".into()))?;
    let resource = registry::lookup_kind(api_version, kind).ok_or_else(|| {
        at(
            doc_line,
            format!("malformed manifest: no resource for apiVersion {api_version:?} kind {kind:?}"),
        )
    })?;
    let meta = obj.get("metadata").and_then(Value::as_object);
    let has_name = meta.is_some_and(|m| {
        m.get("name")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
            || m.get("generateName")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
    });
    if !has_name {
        return Err(at(
            doc_line,
            format!("malformed manifest: {kind} needs metadata.name or metadata.generateName"),
        ));
    }
    out.push(Manifest {
        object: value,
        resource,
        source: format!("{file}:{doc_line}"),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_finds_resources() {
        let text = "# app\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: x\n";
        let m = parse_documents(text, "f.yaml", 0).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].kind(), "Deployment");
        assert_eq!(m[0].source, "f.yaml:2");
        assert_eq!(m[0].namespace(), Some("default"));
        assert_eq!(m[1].name(), "p");
        assert_eq!(m[1].namespace(), Some("x"));
        assert_eq!(m[1].source, "f.yaml:8");
        assert_eq!(m[0].display(), "deployment.apps/web");
    }

    #[test]
    fn rejects_malformed_documents_with_their_line() {
        let cases = [
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\nkind: Pod\nmetadata: {name: q}\n",
                5,
                "missing apiVersion",
            ),
            (
                "apiVersion: v1\nkind: Pood\nmetadata: {name: p}\n",
                11,
                "no resource for apiVersion \"v1\" kind \"Pood\"",
            ),
            (
                "apiVersion: v1\nkind: Pod\nspec: {}\n",
                11,
                "needs metadata.name",
            ),
            ("- a\n- b\n", 11, "must be a mapping"),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n",
                13,
                "malformed manifest",
            ),
        ];
        for (text, line, msg) in cases {
            let offset = if line > 10 { 10 } else { 0 };
            let err = parse_documents(text, "s.yaml", offset).unwrap_err();
            let s = err.to_string();
            assert!(s.contains(msg), "{s}");
            if line != 13 {
                assert!(s.starts_with(&format!("s.yaml:{line}:")), "{s}");
            } else {
                assert!(s.starts_with("s.yaml:1"), "{s}");
            }
        }
    }
}
