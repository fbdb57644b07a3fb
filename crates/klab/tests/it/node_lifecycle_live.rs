//! Spec §11 on a live `klab up` with real kubectl: `kubectl delete node` while the node's kubelet
//! runs (the Node stays deleted, the node lifecycle controller emits RemovingNode), `klab node
//! rejoin` (the restarted kubelet registers a new Node: new UID), and a machine joining and
//! leaving the running cluster (`klab node add --zone`, `klab node remove`).

use std::time::Duration;

use crate::harness::Klab;

const BOUND: Duration = Duration::from_secs(60);

fn uid(k: &Klab, node: &str) -> Option<String> {
    let out = k.kubectl(33, &["get", "node", node, "-o", "jsonpath={.metadata.uid}"]);
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !uid.is_empty()).then_some(uid)
}

fn ready(k: &Klab, node: &str) -> bool {
    let out = k.kubectl(33, &["get", "node", node, "--no-headers"]);
    out.status.success()
        && String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(1)
            == Some("Ready")
}

fn node_events(k: &Klab, node: &str) -> String {
    k.ok(
        33,
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.kind=Node,involvedObject.name={node}"),
            "-o",
            "custom-columns=REASON:.reason,MESSAGE:.message",
            "--no-headers",
        ],
    )
}

#[test]
fn delete_node_rejoin_add_and_remove_on_a_live_cluster() {
    let k = Klab::start(&["--speed", "20"]);
    let node = "klab-worker2";
    k.wait_for("klab-worker2 Ready", BOUND, || {
        ready(&k, node).then_some(())
    });
    // The node lifecycle controller announces the removal only of a node it knew: a node
    // deleted before its first monitor pass saw it gets no RemovingNode, as upstream's
    // `knownNodeSet` (the kubelet can be Ready a few monitor periods before that pass).
    k.wait_for("RegisteredNode", BOUND, || {
        node_events(&k, node)
            .contains(&format!("Registered Node {node} in Controller"))
            .then_some(())
    });
    let old = uid(&k, node).expect("uid");

    // kubectl 1.27 and 1.33 print the same line for the delete.
    assert_eq!(
        k.ok(27, &["delete", "node", node]).trim(),
        format!("node \"{node}\" deleted")
    );
    k.wait_for("RemovingNode", BOUND, || {
        let events = node_events(&k, node);
        let events: Vec<&str> = events.split_whitespace().collect();
        events
            .join(" ")
            .contains(&format!(
                "RemovingNode Node {node} event: Removing Node {node} from Controller"
            ))
            .then_some(())
    });
    // A running kubelet does not register again by itself.
    assert_eq!(uid(&k, node), None);

    let out = k.klab(&["node", "rejoin", node]);
    assert!(
        out.starts_with(&format!("node/{node}: rejoin done")),
        "{out}"
    );
    let new = k.wait_for("re-registration", BOUND, || uid(&k, node));
    assert_ne!(new, old, "the re-registered Node is a new object");
    k.wait_for("klab-worker2 Ready again", BOUND, || {
        ready(&k, node).then_some(())
    });

    let out = k.klab(&["node", "add", "klab-extra", "--zone", "z9"]);
    assert!(out.starts_with("node/klab-extra: added"), "{out}");
    k.wait_for("klab-extra Ready", BOUND, || {
        ready(&k, "klab-extra").then_some(())
    });
    let zone = k.ok(
        33,
        &[
            "get",
            "node",
            "klab-extra",
            "-o",
            "jsonpath={.metadata.labels.topology\\.kubernetes\\.io/zone}",
        ],
    );
    assert_eq!(zone, "z9");
    assert!(k.klab(&["node", "list"]).contains("klab-extra"));

    let out = k.klab(&["node", "remove", "klab-extra"]);
    assert!(out.starts_with("node/klab-extra: removed"), "{out}");
    assert_eq!(uid(&k, "klab-extra"), None);
    let events = node_events(&k, "klab-extra");
    let events: Vec<&str> = events.split_whitespace().collect();
    assert!(
        events.join(" ").contains(
            "DeletingNode Deleting node klab-extra because it does not exist in the cloud provider"
        ),
        "{events:?}"
    );
    assert!(!k.klab(&["node", "list"]).contains("klab-extra"));
    let out = k.kubectl(33, &["get", "nodes", "--no-headers"]);
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(names.contains(&node.to_string()), "{names:?}");
    assert!(!names.contains(&"klab-extra".to_string()), "{names:?}");
}
