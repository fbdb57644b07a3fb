//! `/healthz`, `/livez`, `/readyz` (with `?verbose`, `?exclude=` and one path per check) and
//! `/metrics`, served from the cluster's supervision registry (`klab_api::supervise::Health`).
//!
//! The output follows kube-apiserver's healthz handler to the byte: `[+]<check> ok` /
//! `[-]<check> failed: reason withheld` lines, then `<probe> check passed` (only with `?verbose`;
//! otherwise plain `ok`) or, with status 500 and always verbose, `<probe> check failed`. The reason
//! of a failed check is served only on its own path (`/readyz/<check>`), as upstream does.
//!
//! Checks: `ping`, then one per supervised control-plane component
//! (`kube-controller-manager/replicaset-controller`, `kube-scheduler`, …) and one `kubelets` check
//! for all simulated kubelets together (thousands of nodes would drown the listing). A component
//! fails its check while it waits to be restarted after a panic or an exit; once running again it
//! passes, and `/metrics` keeps its restart and panic counts. A component stopped on purpose
//! (`klab component stop`) fails its check too, its reason saying it was stopped and when.

use std::fmt::Write as _;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use klab_api::supervise::{ComponentHealth, ComponentState, Health};

/// The prefix of kubelet components in the registry (`kubelet/<node>`).
pub const KUBELET_PREFIX: &str = "kubelet/";

/// One health check: its name and, when failing, the reason.
struct Check {
    name: String,
    failure: Option<String>,
}

fn describe(name: &str, c: &ComponentHealth) -> Option<String> {
    let until = match &c.state {
        ComponentState::Running => return None,
        // Not a failure: down on purpose, and said so.
        ComponentState::Stopped { since } => {
            return Some(format!(
                "{name} stopped at {} (klab component stop); it runs again when started",
                klab_api::clock::format_time(*since)
            ));
        }
        ComponentState::BackingOff { until } => until,
    };
    let last = c
        .last_failure
        .as_ref()
        .map(|f| f.to_string())
        .unwrap_or_else(|| format!("{name} failed"));
    Some(format!(
        "{last}; restarting at {} (restarts so far: {})",
        klab_api::clock::format_time(*until),
        c.restarts
    ))
}

fn checks(health: &Health) -> Vec<Check> {
    let mut out = vec![Check {
        name: "ping".into(),
        failure: None,
    }];
    let mut kubelet_failures = Vec::new();
    let mut any_kubelet = false;
    for (name, c) in health.components() {
        if name.starts_with(KUBELET_PREFIX) {
            any_kubelet = true;
            if let Some(f) = describe(&name, &c) {
                kubelet_failures.push(f);
            }
        } else {
            let failure = describe(&name, &c);
            out.push(Check { name, failure });
        }
    }
    if any_kubelet {
        out.push(Check {
            name: "kubelets".into(),
            failure: (!kubelet_failures.is_empty()).then(|| kubelet_failures.join("; ")),
        });
    }
    out
}

fn text(code: StatusCode, body: String) -> Response {
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Renders one probe (`healthz`, `livez`, `readyz`) as upstream's `handleRootHealth` does.
pub fn render_probe(
    probe: &str,
    health: &Health,
    query: &[(String, String)],
) -> (StatusCode, String) {
    let verbose = query.iter().any(|(k, _)| k == "verbose");
    let mut excluded: Vec<String> = query
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.clone())
        .collect();
    let mut listing = String::new();
    let mut failed = false;
    for c in checks(health) {
        if let Some(i) = excluded.iter().position(|e| *e == c.name) {
            excluded.remove(i);
            let _ = writeln!(listing, "[+]{} excluded: ok", c.name);
            continue;
        }
        if c.failure.is_some() {
            failed = true;
            let _ = writeln!(listing, "[-]{} failed: reason withheld", c.name);
        } else {
            let _ = writeln!(listing, "[+]{} ok", c.name);
        }
    }
    if !excluded.is_empty() {
        excluded.sort();
        excluded.dedup();
        let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        let _ = writeln!(
            listing,
            "warn: some health checks cannot be excluded: no matches for {}",
            quoted.join(",")
        );
    }
    if failed {
        // Go's http.Error appends a newline.
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{listing}{probe} check failed\n"),
        );
    }
    if !verbose {
        return (StatusCode::OK, "ok".into());
    }
    (StatusCode::OK, format!("{listing}{probe} check passed\n"))
}

/// Renders one check of a probe (`/readyz/<check>`): `ok`, or the reason with status 500.
pub fn render_check(health: &Health, name: &str) -> Option<(StatusCode, String)> {
    let c = checks(health).into_iter().find(|c| c.name == name)?;
    Some(match c.failure {
        None => (StatusCode::OK, "ok".into()),
        Some(f) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {f}\n"),
        ),
    })
}

/// The supervision counters in the Prometheus text format.
pub fn render_metrics(health: &Health) -> String {
    let components = health.components();
    let mut out = String::new();
    type Family = (
        &'static str,
        &'static str,
        &'static str,
        fn(&ComponentHealth) -> u64,
    );
    let families: [Family; 3] = [
        (
            "klab_component_up",
            "gauge",
            "1 when the supervised component is running, 0 while it waits to be restarted.",
            |c| u64::from(c.state == ComponentState::Running),
        ),
        (
            "klab_component_restarts_total",
            "counter",
            "Times the supervised component was started again after a failure.",
            |c| c.restarts,
        ),
        (
            "klab_component_panics_total",
            "counter",
            "Times the supervised component panicked.",
            |c| c.panics,
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (component, c) in &components {
            let _ = writeln!(out, "{name}{{component=\"{component}\"}} {}", value(c));
        }
    }
    out
}

async fn probe_handler(
    State(health): State<Health>,
    Path(probe): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let (code, body) = render_probe(&probe, &health, &query);
    text(code, body)
}

async fn check_handler(
    State(health): State<Health>,
    Path((_probe, check)): Path<(String, String)>,
) -> Response {
    match render_check(&health, &check) {
        Some((code, body)) => text(code, body),
        None => crate::discovery::not_found(),
    }
}

/// The probe routes over one cluster's registry (`/metrics` is the server's: it adds the API
/// server's own families).
pub fn routes(health: Health) -> Router {
    let mut r: Router<Health> = Router::new();
    for probe in ["healthz", "livez", "readyz"] {
        r = r
            .route(
                &format!("/{probe}"),
                get(
                    move |s: State<Health>, q: Query<Vec<(String, String)>>| async move {
                        probe_handler(s, Path(probe.to_string()), q).await
                    },
                ),
            )
            .route(
                &format!("/{probe}/{{*check}}"),
                get(
                    move |s: State<Health>, Path(check): Path<String>| async move {
                        check_handler(s, Path((probe.to_string(), check))).await
                    },
                ),
            );
    }
    r.with_state(health)
}

#[cfg(test)]
mod tests {
    use super::*;
    use klab_api::Clock;
    use klab_api::supervise::{RestartPolicy, supervise};
    use std::time::Duration;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn probes_list_components_and_fail_while_one_backs_off() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let c = clock.clone();
        let crashing = tokio::spawn(supervise(
            health.clone(),
            "kube-controller-manager/replicaset-controller",
            clock.clone(),
            RestartPolicy::CrashLoop,
            move || {
                let c = c.clone();
                async move {
                    c.sleep(Duration::from_secs(5)).await;
                    let boom = true;
                    if boom {
                        panic!("boom");
                    }
                    Ok(())
                }
            },
        ));
        let fine = tokio::spawn(supervise(
            health.clone(),
            "kubelet/n1",
            clock.clone(),
            RestartPolicy::Fixed(Duration::from_secs(10)),
            std::future::pending,
        ));
        tokio::task::yield_now().await;
        assert_eq!(
            render_probe("readyz", &health, &[]),
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            render_probe("readyz", &health, &q(&[("verbose", "")])).1,
            "[+]ping ok\n[+]kube-controller-manager/replicaset-controller ok\n[+]kubelets ok\nreadyz check passed\n"
        );
        clock.sleep(Duration::from_secs(6)).await;
        let (code, body) = render_probe("livez", &health, &[]);
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[+]ping ok\n[-]kube-controller-manager/replicaset-controller failed: reason withheld\n[+]kubelets ok\nlivez check failed\n"
        );
        let (code, body) =
            render_check(&health, "kube-controller-manager/replicaset-controller").unwrap();
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            body.starts_with("internal server error: kube-controller-manager/replicaset-controller panicked: boom (at "),
            "{body}"
        );
        assert!(
            body.contains("restarting at 2026-01-01T00:00:15Z (restarts so far: 0)"),
            "{body}"
        );
        // Excluding the failing check makes the probe pass, as upstream's ?exclude= does.
        let (code, body) = render_probe(
            "readyz",
            &health,
            &q(&[
                ("verbose", ""),
                ("exclude", "kube-controller-manager/replicaset-controller"),
                ("exclude", "nope"),
            ]),
        );
        assert_eq!(code, StatusCode::OK);
        assert_eq!(
            body,
            "[+]ping ok\n[+]kube-controller-manager/replicaset-controller excluded: ok\n[+]kubelets ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        );
        let m = render_metrics(&health);
        assert!(
            m.contains(
                "klab_component_up{component=\"kube-controller-manager/replicaset-controller\"} 0\n"
            ),
            "{m}"
        );
        assert!(m.contains("klab_component_panics_total{component=\"kube-controller-manager/replicaset-controller\"} 1\n"), "{m}");
        assert!(
            m.contains("klab_component_up{component=\"kubelet/n1\"} 1\n"),
            "{m}"
        );
        // Restarted at 15 s: ready again, the restart counted.
        clock.sleep(Duration::from_secs(10)).await;
        assert_eq!(render_probe("readyz", &health, &[]).0, StatusCode::OK);
        assert!(render_metrics(&health).contains("klab_component_restarts_total{component=\"kube-controller-manager/replicaset-controller\"} 1\n"));
        crashing.abort();
        fine.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_component_is_not_ready_with_its_reason_and_not_a_failure() {
        let clock = Clock::virtual_default();
        let health = Health::new();
        let task = tokio::spawn(supervise(
            health.clone(),
            "kube-scheduler",
            clock.clone(),
            RestartPolicy::CrashLoop,
            std::future::pending,
        ));
        tokio::task::yield_now().await;
        clock.sleep(Duration::from_secs(3)).await;
        let names = vec!["kube-scheduler".to_string()];
        health
            .control(&names, klab_api::supervise::ComponentOp::Stop)
            .unwrap();
        tokio::task::yield_now().await;
        let (code, body) = render_probe("readyz", &health, &[]);
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            "[+]ping ok\n[-]kube-scheduler failed: reason withheld\nreadyz check failed\n"
        );
        assert_eq!(
            render_check(&health, "kube-scheduler").unwrap().1,
            "internal server error: kube-scheduler stopped at 2026-01-01T00:00:03Z (klab component stop); it runs again when started\n"
        );
        assert!(health.failures().is_empty());
        health
            .control(&names, klab_api::supervise::ComponentOp::Start)
            .unwrap();
        tokio::task::yield_now().await;
        assert_eq!(render_probe("readyz", &health, &[]).0, StatusCode::OK);
        task.abort();
    }
}
