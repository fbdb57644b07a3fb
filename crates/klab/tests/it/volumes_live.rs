//! Volumes on a live `klab up --speed 30` with the real kubectl 1.33, the seed-003 story: a
//! StatefulSet with a claim (default class `standard`, provisioned by `csi.klab.dev`),
//! `kubectl get pv,pvc,volumeattachments`, a second pod wanting the RWO volume on another node
//! (`describe pod` shows the Multi-Attach event), then the node powered off and the seed's own
//! command, `kubectl taint nodes <node> node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`:
//! the pod is force-deleted, the volume detached at once and web-0 runs on another node.

use std::time::Duration;

use crate::harness::{Klab, mask_ages};

const STATEFULSET: &str = "apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: nginx
          image: nginx
          volumeMounts: [{name: data, mountPath: /usr/share/nginx/html}]
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Gi}}
";

/// (status, node) of a pod, if it exists.
fn pod(k: &Klab, name: &str) -> Option<(String, String)> {
    let out = k.kubectl(33, &["get", "pod", name, "-o", "wide", "--no-headers"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let c: Vec<&str> = text.split_whitespace().collect();
    (c.len() > 6).then(|| (c[2].to_string(), c[6].to_string()))
}

/// The seed-003 story under the default `Node,RBAC`: the binder, attach/detach, the CSI driver
/// and the kubelets under their upstream identities and roles, none ever refused.
#[test]
fn seed_003_volume_failover_with_kubectl_1_33() {
    let k = Klab::start(&["--speed", "30"]);
    seed_003_story(&k);
    k.assert_no_component_denials();
}

/// The same story with everything allowed: nothing changes.
#[test]
fn seed_003_under_always_allow() {
    seed_003_story(&Klab::start(&[
        "--speed",
        "30",
        "--authorization-mode",
        "AlwaysAllow",
    ]));
}

fn seed_003_story(k: &Klab) {
    let bound = Duration::from_secs(90);
    assert_eq!(
        mask_ages(&k.ok(33, &["get", "storageclass"])),
        "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE\n\
         standard (default) csi.klab.dev Delete WaitForFirstConsumer true AGE"
    );
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(STATEFULSET));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = k.wait_for("web-0 Running", bound, || {
        pod(k, "web-0").and_then(|(s, n)| (s == "Running").then_some(n))
    });
    let pv = k.ok(
        33,
        &[
            "get",
            "pvc",
            "data-web-0",
            "-o",
            "jsonpath={.spec.volumeName}",
        ],
    );
    assert!(pv.starts_with("pvc-"), "{pv}");
    let listing = mask_ages(&k.ok(33, &["get", "pv,pvc,volumeattachments"]));
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(
        lines[0],
        "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE"
    );
    assert_eq!(
        lines[1],
        format!(
            "persistentvolume/{pv} 1Gi RWO Delete Bound default/data-web-0 standard <unset> AGE"
        )
    );
    assert!(
        listing.contains(&format!(
            "persistentvolumeclaim/data-web-0 Bound {pv} 1Gi RWO standard <unset> AGE"
        )),
        "{listing}"
    );
    assert!(
        listing.contains("NAME ATTACHER PV NODE ATTACHED AGE"),
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("volumeattachment.storage.k8s.io/csi-")
                && l.ends_with(&format!("csi.klab.dev {pv} {node} true AGE"))),
        "{listing}"
    );

    // A second pod wanting the RWO volume on another node: Multi-Attach, shown by describe.
    let nodes = k.ok(
        33,
        &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    let other = nodes
        .split_whitespace()
        .find(|n| *n != node)
        .expect("a second node")
        .to_string();
    let overrides = format!(
        r#"{{"spec":{{"nodeName":"{other}","volumes":[{{"name":"d","persistentVolumeClaim":{{"claimName":"data-web-0"}}}}],"containers":[{{"name":"c","image":"nginx","volumeMounts":[{{"name":"d","mountPath":"/d"}}]}}]}}}}"#
    );
    k.ok(
        33,
        &[
            "run",
            "intruder",
            "--image=nginx",
            &format!("--overrides={overrides}"),
        ],
    );
    let want = format!(
        "Warning FailedAttachVolume AGE attachdetach-controller Multi-Attach error for volume \"{pv}\" Volume is already used by pod(s) web-0"
    );
    k.wait_for("the Multi-Attach event", bound, || {
        let d = mask_ages(&k.ok(33, &["describe", "pod", "intruder"]));
        d.contains(&want).then_some(())
    });
    assert_eq!(
        pod(k, "intruder").map(|p| p.0).as_deref(),
        Some("ContainerCreating")
    );
    k.ok(
        33,
        &["delete", "pod", "intruder", "--grace-period=0", "--force"],
    );

    // The node dies; the seed's command frees the pod and its volume at once.
    k.klab(&["node", "power-off", &node]);
    k.wait_for("node NotReady", bound, || {
        let out = k.ok(33, &["get", "node", &node, "--no-headers"]);
        (out.split_whitespace().nth(1) == Some("NotReady")).then_some(())
    });
    assert_eq!(
        k.ok(
            33,
            &[
                "taint",
                "nodes",
                &node,
                "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
            ]
        )
        .trim(),
        format!("node/{node} tainted")
    );
    let new_node = k.wait_for("web-0 Running elsewhere", bound, || {
        pod(k, "web-0").and_then(|(s, n)| (s == "Running" && n != node).then_some(n))
    });
    let vas = mask_ages(&k.ok(33, &["get", "volumeattachments"]));
    let rows: Vec<&str> = vas.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{vas}");
    assert!(
        rows[0].ends_with(&format!("csi.klab.dev {pv} {new_node} true AGE")),
        "{vas}"
    );
    // The same claim, still bound to the same volume.
    assert_eq!(
        k.ok(
            33,
            &[
                "get",
                "pvc",
                "data-web-0",
                "-o",
                "jsonpath={.spec.volumeName}"
            ]
        ),
        pv
    );
}

/// CSINodes, ReadWriteOncePod and volume topology with kubectl 1.33 on `klab up --zones a,b`:
/// `kubectl get csinodes` lists one driver per node (nodeID, zone topology key, attach limit,
/// the Node's `csi.volume.kubernetes.io/nodeid` annotation); a claim mixing ReadWriteOncePod with
/// another mode is refused; a second pod on an RWOP claim is Pending with VolumeRestrictions'
/// message; a zonal StatefulSet replica whose zone dies stays Pending with `node(s) had volume
/// node affinity conflict` in `describe pod`.
#[test]
fn csinodes_rwop_and_volume_topology_with_kubectl_1_33() {
    let k = Klab::start(&["--speed", "30", "--nodes", "2", "--zones", "a,b"]);
    let bound = Duration::from_secs(90);
    let nodes: Vec<String> = k.wait_for("two nodes", bound, || {
        let names: Vec<String> = k
            .ok(
                33,
                &["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"],
            )
            .split_whitespace()
            .map(String::from)
            .collect();
        (names.len() == 2).then_some(names)
    });
    let csinodes = k.wait_for("two CSINodes with the driver", bound, || {
        let out = mask_ages(&k.ok(33, &["get", "csinodes"]));
        (out.lines().filter(|l| l.ends_with(" 1 AGE")).count() == 2).then_some(out)
    });
    assert_eq!(csinodes.lines().next(), Some("NAME DRIVERS AGE"));
    for (n, zone) in nodes.iter().zip(["a", "b"]) {
        let driver = k.ok(
            33,
            &[
                "get",
                "csinode",
                n,
                "-o",
                "jsonpath={.spec.drivers[0].name} {.spec.drivers[0].nodeID} {.spec.drivers[0].topologyKeys[0]} {.spec.drivers[0].allocatable.count} {.metadata.ownerReferences[0].kind}",
            ],
        );
        assert_eq!(
            driver,
            format!("csi.klab.dev {n} topology.csi.klab.dev/zone 39 Node")
        );
        let labels = k.ok(
            33,
            &[
                "get",
                "node",
                n,
                "-o",
                "jsonpath={.metadata.annotations.csi\\.volume\\.kubernetes\\.io/nodeid} {.metadata.labels.topology\\.csi\\.klab\\.dev/zone}",
            ],
        );
        assert_eq!(labels, format!("{{\"csi.klab.dev\":\"{n}\"}} {zone}"));
    }

    // ReadWriteOncePod alone only
    let mixed = "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: mixed}
spec:
  accessModes: [ReadWriteOncePod, ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
";
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(mixed));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rwop = "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: solo}
spec:
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: first}
spec:
  containers: [{name: c, image: nginx, volumeMounts: [{name: d, mountPath: /d}]}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: solo}}]
";
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(rwop));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    k.wait_for("first Running", bound, || {
        pod(&k, "first").and_then(|(s, _)| (s == "Running").then_some(()))
    });
    let second = rwop
        .split("---\n")
        .nth(1)
        .unwrap()
        .replace("name: first", "name: second");
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(&second));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.";
    k.wait_for("second refused", bound, || {
        let d = mask_ages(&k.ok(33, &["describe", "pod", "second"]));
        d.contains(want).then_some(())
    });
    k.ok(
        33,
        &[
            "delete",
            "pod",
            "first",
            "second",
            "--grace-period=0",
            "--force",
        ],
    );

    // a zonal replica cannot follow its volume's zone away
    let out = k.kubectl_stdin(33, &["apply", "-f", "-"], Some(STATEFULSET));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let node = k.wait_for("web-0 Running", bound, || {
        pod(&k, "web-0").and_then(|(s, n)| (s == "Running").then_some(n))
    });
    let pv = k.ok(
        33,
        &[
            "get",
            "pvc",
            "data-web-0",
            "-o",
            "jsonpath={.spec.volumeName}",
        ],
    );
    let zone = if node == nodes[0] { "a" } else { "b" };
    assert_eq!(
        k.ok(
            33,
            &[
                "get",
                "pv",
                &pv,
                "-o",
                "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].key}={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}",
            ],
        ),
        format!("topology.csi.klab.dev/zone={zone}")
    );
    k.klab(&["node", "power-off", &node]);
    k.wait_for("node NotReady", bound, || {
        let out = k.ok(33, &["get", "node", &node, "--no-headers"]);
        (out.split_whitespace().nth(1) == Some("NotReady")).then_some(())
    });
    k.ok(
        33,
        &[
            "taint",
            "nodes",
            &node,
            "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
        ],
    );
    k.wait_for("web-0 Pending on its zonal volume", bound, || {
        // Between the force deletion and the StatefulSet's new web-0 there is no pod to describe.
        let out = k.kubectl(33, &["describe", "pod", "web-0"]);
        let d = mask_ages(&String::from_utf8_lossy(&out.stdout));
        (d.contains("Status: Pending") && d.contains("1 node(s) had volume node affinity conflict"))
            .then_some(())
    });
}
