//! Table tests of endpoint conditions, ports and slice plans, and a virtual-time test of both
//! controllers against klab's in-process API server.

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::decide::*;
use crate::replicaset::util::testutil::{pod, ts};

fn svc(spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "svc-uid", "labels": {"team": "a"}},
        "spec": spec
    }))
    .unwrap()
}

fn web() -> Service {
    svc(
        json!({"selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}),
    )
}

fn with_ip(mut p: Pod, ip: &str) -> Pod {
    p.status.as_mut().unwrap().pod_ip = Some(ip.into());
    p
}

#[test]
fn conditions_follow_readiness_and_deletion() {
    let s = web();
    let ready = with_ip(pod("a").running_ready(0).node("n1").build(), "10.0.0.1");
    assert_eq!(conditions(&s, &ready), (true, true, false));
    // The node lifecycle controller marked the pod not ready: traffic stops.
    let not_ready = with_ip(
        pod("b").running_ready(0).ready(false, 5).build(),
        "10.0.0.2",
    );
    assert_eq!(conditions(&s, &not_ready), (false, false, false));
    // Terminating: never ready, serving while the pod still says Ready.
    let mut term = ready.clone();
    term.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(9)));
    assert_eq!(conditions(&s, &term), (false, true, true));
    // publishNotReadyAddresses keeps everything ready.
    let pnr = svc(
        json!({"selector": {"app": "web"}, "publishNotReadyAddresses": true, "ports": [{"port": 80}]}),
    );
    assert_eq!(conditions(&pnr, &not_ready), (true, false, false));
    assert_eq!(conditions(&pnr, &term), (true, true, true));
    // Pods without an IP or in a terminal phase are not published.
    assert!(!should_publish(&pod("c").build(), true));
    let done = with_ip(pod("d").phase("Succeeded").build(), "10.0.0.4");
    assert!(!should_publish(&done, true));
    assert!(should_publish(&term, true));
    assert!(!should_publish(&term, false));
}

#[test]
fn named_target_ports_resolve_per_pod() {
    let s = svc(json!({"selector": {"app": "web"}, "ports": [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "web"},
        {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9090}]}));
    let mut a = with_ip(pod("a").running_ready(0).build(), "10.0.0.1");
    a.spec.as_mut().unwrap().containers = vec![
        serde_json::from_value(json!(
        {"name": "c", "image": "nginx", "ports": [{"name": "web", "containerPort": 8080}]}))
        .unwrap(),
    ];
    let b = with_ip(pod("b").running_ready(0).build(), "10.0.0.2");
    let ports = |p: &Pod| -> Vec<(String, i32)> {
        endpoint_ports(&s, p)
            .into_iter()
            .map(|e| (e.name.unwrap(), e.port.unwrap()))
            .collect()
    };
    assert_eq!(
        ports(&a),
        vec![("http".into(), 8080), ("metrics".into(), 9090)]
    );
    assert_eq!(ports(&b), vec![("metrics".into(), 9090)]);
    // Two port sets: two slices.
    let groups = desired(&s, &[&a, &b], &|_| None);
    assert_eq!(groups.len(), 2);
}

#[test]
fn plans_change_as_little_as_possible_and_keep_a_placeholder() {
    let s = web();
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            with_ip(
                pod(&format!("p{i}")).running_ready(0).node("n1").build(),
                &format!("10.0.0.{i}"),
            )
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let zone = |_: &str| Some("z1".to_string());
    // First sync: one slice with three endpoints, labelled and owned.
    let p = plan(&s, &[], desired(&s, &refs, &zone));
    assert_eq!((p.create.len(), p.update.len(), p.delete.len()), (1, 0, 0));
    let mut slice: EndpointSlice = p.create[0].clone();
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/service-name"], "web");
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(labels["team"], "a");
    assert_eq!(slice.endpoints.len(), 3);
    assert_eq!(slice.endpoints[0].zone.as_deref(), Some("z1"));
    assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(8080));
    slice.metadata.name = Some("web-abcde".into());
    // Nothing changed: nothing to do.
    let p2 = plan(&s, &[&slice], desired(&s, &refs, &zone));
    assert_eq!(p2, Plan::default());
    // One pod not ready: the slice is updated in place.
    let mut changed = pods.clone();
    changed[1] = with_ip(
        pod("p1")
            .running_ready(0)
            .ready(false, 3)
            .node("n1")
            .build(),
        "10.0.0.1",
    );
    let refs2: Vec<&Pod> = changed.iter().collect();
    let p3 = plan(&s, &[&slice], desired(&s, &refs2, &zone));
    assert_eq!(
        (p3.create.len(), p3.update.len(), p3.delete.len()),
        (0, 1, 0)
    );
    assert_eq!(
        p3.update[0].endpoints[1].conditions.as_ref().unwrap().ready,
        Some(false)
    );
    // No pods: the slice becomes the placeholder (no endpoints, no ports).
    let p4 = plan(&s, &[&slice], desired(&s, &[], &zone));
    assert_eq!(
        (p4.create.len(), p4.update.len(), p4.delete.len()),
        (0, 1, 0)
    );
    let placeholder = p4.update[0].clone();
    assert_eq!(placeholder.metadata.name.as_deref(), Some("web-abcde"));
    assert!(placeholder.endpoints.is_empty() && placeholder.ports.is_none());
    assert_eq!(
        plan(&s, &[&placeholder], desired(&s, &[], &zone)),
        Plan::default()
    );
    // Pods again: the placeholder is reused.
    let p5 = plan(&s, &[&placeholder], desired(&s, &refs, &zone));
    assert_eq!(
        (p5.create.len(), p5.update.len(), p5.delete.len()),
        (0, 1, 0)
    );
    assert_eq!(p5.update[0].endpoints.len(), 3);
}

#[test]
fn slices_hold_at_most_a_hundred_endpoints() {
    let s = web();
    let pods: Vec<Pod> = (0..250)
        .map(|i| {
            with_ip(
                pod(&format!("p{i:03}")).running_ready(0).build(),
                &format!("10.0.{}.{}", i / 200, i % 200),
            )
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let p = plan(&s, &[], desired(&s, &refs, &|_| None));
    let sizes: Vec<usize> = p.create.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, vec![100, 100, 50]);
}

#[test]
fn legacy_endpoints_split_ready_and_not_ready_and_drop_terminating() {
    let s = web();
    let a = with_ip(pod("a").running_ready(0).node("n1").build(), "10.0.0.9");
    let b = with_ip(
        pod("b").running_ready(0).ready(false, 1).node("n2").build(),
        "10.0.0.2",
    );
    let mut c = with_ip(pod("c").running_ready(0).node("n1").build(), "10.0.0.1");
    c.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(9)));
    let d = with_ip(pod("d").running_ready(0).node("n3").build(), "10.0.0.3");
    let subsets = endpoints_subsets(&s, &[&a, &b, &c, &d]);
    assert_eq!(subsets.len(), 1);
    let ips = |l: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| -> Vec<String> {
        l.iter().flatten().map(|a| a.ip.clone()).collect()
    };
    assert_eq!(ips(&subsets[0].addresses), vec!["10.0.0.3", "10.0.0.9"]);
    assert_eq!(ips(&subsets[0].not_ready_addresses), vec!["10.0.0.2"]);
    assert_eq!(subsets[0].ports.as_ref().unwrap()[0].port, 8080);
    let l = endpoints_labels(&s);
    assert_eq!(l["endpointslice.kubernetes.io/skip-mirror"], "true");
}

mod live {
    //! Both controllers against klab's API server: a Service's endpoints follow its pods.
    use super::*;
    use k8s_openapi::api::core::v1::Endpoints;
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
    use std::time::Duration;

    use crate::replicaset::testkit::harness;

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn endpoints_follow_pod_readiness_and_deletion() {
        let h = harness().await;
        let svcs: Api<Service> = Api::namespaced(h.client.clone(), "default");
        svcs.create(&PostParams::default(), &web()).await.unwrap();
        let created = svcs.get("web").await.unwrap();
        let ip = created.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
        assert!(ip.starts_with("10."), "{ip}");
        tokio::spawn(super::super::run_slices(
            h.client.clone(),
            h.informers.clone(),
            h.clock.clone(),
        ));
        tokio::spawn(super::super::run_endpoints(
            h.client.clone(),
            h.informers.clone(),
            h.clock.clone(),
        ));
        settle().await;
        let slices: Api<EndpointSlice> = Api::namespaced(h.client.clone(), "default");
        let list = |slices: Api<EndpointSlice>| async move {
            slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await
                .unwrap()
                .items
        };
        // No pods yet: a placeholder slice, and empty Endpoints.
        let l = list(slices.clone()).await;
        assert_eq!(l.len(), 1);
        assert!(l[0].endpoints.is_empty());
        let eps: Api<Endpoints> = Api::namespaced(h.client.clone(), "default");
        assert!(eps.get("web").await.unwrap().subsets.is_none());

        let pods: Api<Pod> = Api::namespaced(h.client.clone(), "default");
        for (i, name) in ["web-0", "web-1"].iter().enumerate() {
            let p: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx"}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &p).await.unwrap();
            pods.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                "phase": "Running", "podIP": format!("10.244.0.{}", i + 1),
                "conditions": [{"type": "Ready", "status": "True"}]}})),
            )
            .await
            .unwrap();
        }
        settle().await;
        let l = list(slices.clone()).await;
        assert_eq!(l.len(), 1, "the placeholder is reused");
        let conds: Vec<(String, bool)> = l[0]
            .endpoints
            .iter()
            .map(|e| {
                (
                    e.addresses[0].clone(),
                    e.conditions.as_ref().unwrap().ready.unwrap(),
                )
            })
            .collect();
        assert_eq!(
            conds,
            vec![("10.244.0.1".into(), true), ("10.244.0.2".into(), true)]
        );
        // web-1 goes not ready (as the node lifecycle controller marks pods on a dead node).
        pods.patch_status(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}]}})),
        )
        .await
        .unwrap();
        settle().await;
        let l = list(slices.clone()).await;
        assert_eq!(
            l[0].endpoints[1].conditions.as_ref().unwrap().ready,
            Some(false)
        );
        let e = eps.get("web").await.unwrap();
        let ss = &e.subsets.unwrap()[0];
        assert_eq!(ss.addresses.as_ref().unwrap().len(), 1);
        assert_eq!(ss.not_ready_addresses.as_ref().unwrap()[0].ip, "10.244.0.2");
        // web-0 is deleted gracefully: terminating in the slice, gone from Endpoints.
        pods.delete("web-0", &Default::default()).await.unwrap();
        settle().await;
        let l = list(slices.clone()).await;
        let c = l[0].endpoints[0].conditions.clone().unwrap();
        assert_eq!(
            (c.ready, c.serving, c.terminating),
            (Some(false), Some(true), Some(true))
        );
        let e = eps.get("web").await.unwrap();
        assert!(e.subsets.unwrap()[0].addresses.is_none());
        // A slice deleted by hand is recreated.
        slices
            .delete(l[0].metadata.name.as_deref().unwrap(), &Default::default())
            .await
            .unwrap();
        settle().await;
        assert_eq!(list(slices.clone()).await.len(), 1);
    }
}
