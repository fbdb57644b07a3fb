//! Repository rules that keep the architecture true: dependency directions between crates and the
//! `//!` line every source file opens with.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The `klab-*` crates named in a manifest's `[dependencies]` section.
fn normal_dependencies(krate: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_deps = l == "[dependencies]";
            continue;
        }
        if in_deps && l.starts_with("klab-") {
            out.push(l.split(['.', ' ', '=']).next().unwrap().to_string());
        }
    }
    out
}

#[test]
fn components_reach_the_cluster_only_through_the_api() {
    // Controllers are built on the one controller runtime, itself only an API client; the
    // kubelet writes its Events through the runtime's one event recorder, the scheduler its
    // Events through the runtime's creates.
    for krate in ["klab-controllers", "klab-kubelet", "klab-scheduler"] {
        assert_eq!(
            normal_dependencies(krate),
            vec!["klab-api", "klab-runtime"],
            "{krate} may depend on klab-api and klab-runtime only"
        );
    }
    assert_eq!(
        normal_dependencies("klab-runtime"),
        vec!["klab-api"],
        "klab-runtime may depend on klab-api only"
    );
    assert!(
        normal_dependencies("klab-api").is_empty(),
        "klab-api is the bottom of the graph"
    );
    assert!(
        !normal_dependencies("klab-store")
            .iter()
            .any(|d| d != "klab-api")
    );
}

#[test]
fn every_source_file_opens_with_a_doc_line() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("crates"), &mut files);
    assert!(files.len() > 50);
    let missing: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! line: {missing:?}"
    );
}
