//! `klab up`: a live cluster served over TLS for kubectl, on the durable redb store.
//!
//! The data directory keeps the store (`store.redb`), the PKI and the kubeconfig, and the
//! cluster's timeline (`timeline`): with `--speed X` object timestamps run ahead of the wall clock,
//! so a restart continues from the later of the wall clock and the saved timeline instead of
//! jumping back (which would make every AGE column `<invalid>`). The simulated machines' state
//! (`machines.json`: running containers, boot ids, images) is saved too, so a restart of `klab up`
//! is a control-plane restart — containers keep running and restart counts do not move — unless
//! `--cold-start` asks for every node to boot fresh.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use klab_api::{Clock, DetRng};
use klab_apiserver::ApiServer;
use klab_cluster::{Cluster, ClusterConfig};
use klab_store::redb_store::RedbStore;

use crate::{Pki, kubeconfig::write_kubeconfig, serve::tls_config, serve_tls_with};

/// Options of `klab up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Where to write the kubeconfig (default: `<data-dir>/kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// Objects' time runs this many times faster than the wall clock.
    pub speed: f64,
    /// The cluster: nodes and component configuration.
    pub cluster: ClusterConfig,
    /// Boot every machine fresh instead of restoring the ones a previous run saved (as if every
    /// node had lost power while klab was down).
    pub cold_start: bool,
}

/// The simulated machines' state in the data directory, saved every second and at shutdown.
const MACHINES_FILE: &str = "machines.json";

fn load_machines(
    dir: &std::path::Path,
) -> std::collections::BTreeMap<String, klab_cluster::Machine> {
    let path = dir.join(MACHINES_FILE);
    let Ok(text) = std::fs::read(&path) else {
        return Default::default();
    };
    match serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("machines").cloned())
        .map(serde_json::from_value)
    {
        Some(Ok(m)) => m,
        _ => {
            tracing::warn!(
                "{}: unreadable; the nodes boot fresh (as after a power loss)",
                path.display()
            );
            Default::default()
        }
    }
}

/// Saves every node's machine (crash-safe, 0600).
pub fn save_machines(dir: &std::path::Path, cluster: &Cluster) -> std::io::Result<()> {
    // Serialized straight from the snapshot: a `json!` document would copy every machine once
    // more into a `Value` tree.
    #[derive(serde::Serialize)]
    struct Doc {
        version: u32,
        machines: std::collections::BTreeMap<String, klab_cluster::Machine>,
    }
    let doc = Doc {
        version: 1,
        machines: cluster.machines(),
    };
    let bytes = serde_json::to_vec(&doc).map_err(std::io::Error::other)?;
    crate::files::write_private(&dir.join(MACHINES_FILE), &bytes)
}

/// Node names a user of a kind-like cluster expects: `klab-worker`, `klab-worker2`, …
pub fn default_node_names(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| {
            if i == 1 {
                "klab-worker".to_string()
            } else {
                format!("klab-worker{i}")
            }
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum UpError {
    #[error("{0}")]
    Pki(#[from] crate::pki::PkiError),
    #[error("store: {0}")]
    Store(#[from] klab_store::StoreError),
    #[error("cluster: {0}")]
    Cluster(#[from] klab_cluster::ClusterError),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Serve(#[from] crate::ServeError),
    #[error("starting the serving threads: {0}")]
    Threads(std::io::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A started `klab up`: the API server and where kubectl finds it.
pub struct Running {
    pub cluster: Arc<Cluster>,
    pub api: ApiServer,
    pub kubeconfig: PathBuf,
    pub server_url: String,
    pub local_addr: SocketAddr,
    /// The live dashboard with its login token (`https://…/ui/?token=…`).
    pub dashboard_url: String,
}

fn host_names(listen: &SocketAddr) -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let ip = listen.ip();
    if !ip.is_unspecified() && !hosts.contains(&ip.to_string()) {
        hosts.push(ip.to_string());
    }
    if let Ok(h) = std::fs::read_to_string("/etc/hostname") {
        let h = h.trim().to_string();
        if !h.is_empty() && !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    hosts
}

/// The timeline to resume: the later of the wall clock and what a previous run saved.
fn resume_clock(data_dir: &std::path::Path, speed: f64) -> Clock {
    let wall = Clock::scaled(1.0).now();
    let saved = std::fs::read_to_string(data_dir.join("timeline"))
        .ok()
        .and_then(|s| s.trim().parse::<jiff::Timestamp>().ok());
    match saved {
        Some(t) if t > wall => Clock::scaled_from(t, speed),
        _ => Clock::scaled_from(wall, speed),
    }
}

/// Starts the API server and the TLS listener; returns once serving. The listener runs until
/// `shutdown` completes.
pub async fn start(
    opts: UpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(Running, Serving), UpError> {
    let dir = &opts.data_dir;
    crate::files::private_dir(dir).map_err(|source| UpError::Io {
        path: dir.clone(),
        source,
    })?;
    // Bind first: a busy address must fail before any component starts.
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|source| UpError::Listen {
            addr: opts.listen,
            source,
        })?;
    let store_path = dir.join("store.redb");
    crate::files::private_file(&store_path).map_err(|source| UpError::Io {
        path: store_path.clone(),
        source,
    })?;
    let store: klab_store::DynStorage = RedbStore::open(&store_path)?;
    let clock = resume_clock(dir, opts.speed);
    let local_addr = listener.local_addr().map_err(|source| UpError::Listen {
        addr: opts.listen,
        source,
    })?;
    let pki = Pki::load_or_create(&dir.join("pki"), &host_names(&local_addr))?;
    let mut config = opts.cluster.clone();
    // Pods find the cluster CA in every namespace's `kube-root-ca.crt`.
    config.controllers.serviceaccount.root_ca_pem = Some(pki.ca_cert_pem.clone());
    // A restart of `klab up` is a control-plane restart: the machines kept running.
    if !opts.cold_start {
        config.restore_machines = load_machines(dir);
    }
    let cluster =
        Arc::new(Cluster::start(store, clock.clone(), DetRng::from_entropy(), config).await?);
    let api = cluster.api().clone();
    let host = if local_addr.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        local_addr.ip().to_string()
    };
    let server_url = format!("https://{host}:{}", local_addr.port());
    let kubeconfig = opts
        .kubeconfig
        .clone()
        .unwrap_or_else(|| dir.join("kubeconfig"));
    write_kubeconfig(&kubeconfig, &server_url, &pki).map_err(|source| UpError::Io {
        path: kubeconfig.clone(),
        source,
    })?;
    // Persist the timeline every second so a restart never goes back in the objects' time;
    // crash-safe (a torn write would lose the timeline and jump back to the wall clock).
    // The machines' state is saved with it, so that a restart (even after a kill) finds them.
    // Saving the machines costs time in proportion to the cluster (5 000 machines with 5 000 pods
    // took over 100 ms), so a save waits at least `SAVE_COST_FACTOR` times as long as the last
    // one took: saving then never takes more than about 1/20 of a core, and a small cluster still
    // saves every second.
    const SAVE_COST_FACTOR: u32 = 20;
    let timeline = dir.join("timeline");
    let tclock = clock.clone();
    let (sdir, scluster) = (dir.clone(), cluster.clone());
    tokio::spawn(async move {
        let mut next_save = tokio::time::Instant::now();
        loop {
            let now = klab_api::clock::format_time(tclock.now());
            let start = tokio::time::Instant::now();
            let save = start >= next_save;
            let (path, d, c) = (timeline.clone(), sdir.clone(), scluster.clone());
            let _ = tokio::task::spawn_blocking(move || {
                let _ = crate::files::write_private(&path, now.as_bytes());
                if save && let Err(e) = save_machines(&d, &c) {
                    tracing::warn!("saving the machines' state: {e}");
                }
            })
            .await;
            if save {
                let end = tokio::time::Instant::now();
                let wait = (end - start).saturating_mul(SAVE_COST_FACTOR);
                next_save = end.checked_add(wait).unwrap_or(end);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let tls = tls_config(&pki)?;
    let token = crate::dashboard::load_or_create_token(dir).map_err(|source| UpError::Io {
        path: dir.join(crate::dashboard::TOKEN_FILE),
        source,
    })?;
    let dashboard_url = format!("{server_url}/ui/?token={token}");
    let router = crate::dashboard::router(cluster.clone(), token).merge(api.router());
    // The admin endpoint on a Unix socket as well: the one way in while the API server (and so
    // its TLS listener) is stopped.
    let socket = dir.join(ADMIN_SOCKET);
    let _ = std::fs::remove_file(&socket);
    let admin = tokio::net::UnixListener::bind(&socket).map_err(|source| UpError::Io {
        path: socket.clone(),
        source,
    })?;
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|source| UpError::Io {
            path: socket.clone(),
            source,
        })?;
    let admin_router = klab_cluster::admin::admin_router(cluster.clone());
    let plane = cluster.watch_plane();
    // Both listeners move to the front door's runtime, whose I/O driver then polls them.
    let listener = listener.into_std().map_err(|source| UpError::Listen {
        addr: local_addr,
        source,
    })?;
    let admin = admin.into_std().map_err(|source| UpError::Io {
        path: socket.clone(),
        source,
    })?;
    let handle = front_door(move || async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let admin = tokio::net::UnixListener::from_std(admin)?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut admin_stop = stop_rx.clone();
        tokio::spawn(crate::serve_unix(admin, admin_router, async move {
            let _ = admin_stop.wait_for(|s| *s).await;
        }));
        serve_api(
            listener,
            local_addr,
            tls,
            router,
            async move {
                shutdown.await;
                let _ = stop_tx.send(true);
            },
            plane,
        )
        .await
    })
    .map_err(UpError::Threads)?;
    Ok((
        Running {
            cluster,
            api,
            kubeconfig,
            server_url,
            local_addr,
            dashboard_url,
        },
        handle,
    ))
}

/// How `klab up`'s serving ends: the front door's result, or an error if its thread died.
pub type Serving = tokio::sync::oneshot::Receiver<Result<(), crate::ServeError>>;

/// Runs the connections' side of `klab up` — the TLS listener (kubectl, the dashboard) and the
/// admin socket — on a runtime of its own, with its own threads.
///
/// At scale the cluster's components (thousands of kubelets, the controllers, the scheduler)
/// keep the main runtime's workers busy, and a request served there waited behind all of them at
/// every `.await`: with 5 000 nodes binding pods, a 500-node page of `kubectl get nodes` took
/// 0.5–1.4 s for about 25 ms of work. Upstream's API server is a process of its own and its
/// clients are elsewhere; threads of its own are the nearest thing in one process, and the OS
/// shares the cores between them and the cluster's. In-process clients are unaffected: their
/// requests run in their own tasks, on the cluster's runtime. Work a request starts that belongs
/// to the cluster (the admin routes, the dashboard's feed) goes back to the cluster's runtime.
/// The runtime ends with `serve` — dropping its connections, as the listener's own shutdown does.
fn front_door<F, Fut>(serve: F) -> std::io::Result<Serving>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), crate::ServeError>>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("klab-serve")
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("klab-serve".into())
        .spawn(move || {
            let result = rt.block_on(serve());
            let _ = tx.send(result);
        })?;
    Ok(rx)
}

/// The admin endpoint's Unix socket in the data directory (`klab component` uses it when it is
/// there, so that a stopped API server can be started again).
pub const ADMIN_SOCKET: &str = "admin.sock";

/// Serves the API on `listener` as a kube-apiserver process would be there: while the API
/// server is stopped (`klab component stop kube-apiserver`) the port is closed — connections
/// are refused and every open one (watches included) was ended — and it is bound again on the
/// same address when it starts, the store as it was; a restart ends every open connection.
async fn serve_api(
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    router: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    mut plane: tokio::sync::watch::Receiver<klab_cluster::control::PlaneState>,
) -> Result<(), crate::ServeError> {
    let cfg = crate::ServeConfig {
        end_connections_on_shutdown: true,
        ..Default::default()
    };
    tokio::pin!(shutdown);
    let mut listener = Some(listener);
    loop {
        if let Some(l) = listener.take() {
            let epoch = plane.borrow_and_update().epoch;
            let mut p = plane.clone();
            let stops = async move {
                let _ = p.wait_for(|s| s.api_down || s.epoch != epoch).await;
            };
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                r = serve_tls_with(l, tls.clone(), router.clone(), stops, cfg.clone()) => r?,
            }
        }
        // Stopped (the listener is dropped) or restarted: wait until it runs, then bind again.
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = plane.wait_for(|s| !s.api_down) => if r.is_err() { return Ok(()) },
        }
        let mut delay = Duration::from_millis(10);
        loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    listener = Some(l);
                    break;
                }
                Err(e) => {
                    tracing::warn!("binding {addr} again: {e}; retrying in {delay:?}");
                    tokio::select! {
                        _ = &mut shutdown => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                    delay = delay.saturating_mul(2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// Runs `klab up` until Ctrl-C.
pub async fn run(opts: UpOptions) -> Result<(), UpError> {
    let data_dir = opts.data_dir.clone();
    let (running, handle) = start(opts, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    let kc = running.kubeconfig.display();
    println!(
        "klab is serving the Kubernetes API at {}",
        running.server_url
    );
    println!("kubeconfig: {kc}");
    println!("dashboard: {}", running.dashboard_url);
    println!();
    println!("Try:  kubectl --kubeconfig {kc} get nodes");
    let result = match handle.await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!("the serving thread ended without a result");
            Ok(())
        }
    };
    if let Err(e) = save_machines(&data_dir, &running.cluster) {
        tracing::warn!("saving the machines' state: {e}");
    }
    result?;
    println!("klab stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Output};
    use std::sync::mpsc;

    /// The real kubectl (the newest one beside the `kubectl` on PATH).
    fn kubectl_binary() -> PathBuf {
        let on_path = std::env::var_os("PATH")
            .and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("kubectl"))
                    .find(|p| p.is_file())
            })
            .expect("kubectl on PATH");
        let real = std::fs::canonicalize(&on_path).unwrap_or(on_path);
        real.with_file_name("kubectl.1.33")
    }

    /// A one-node `klab up` started on a runtime with one worker, so that one task holding it
    /// starves everything spawned on the cluster's runtime.
    struct Up {
        rt: tokio::runtime::Runtime,
        dir: tempfile::TempDir,
        running: Running,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        serving: Option<Serving>,
    }

    impl Up {
        fn start(speed: f64) -> Up {
            let dir = tempfile::tempdir().unwrap();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let opts = UpOptions {
                data_dir: dir.path().join("data"),
                listen: "127.0.0.1:0".parse().unwrap(),
                kubeconfig: None,
                speed,
                cluster: ClusterConfig {
                    nodes: vec![klab_cluster::NodeSpec::new("klab-worker")],
                    ..Default::default()
                },
                cold_start: false,
            };
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let (running, serving) = rt
                .block_on(start(opts, async move {
                    let _ = stopped.await;
                }))
                .unwrap();
            let up = Up {
                rt,
                dir,
                running,
                stop: Some(stop),
                serving: Some(serving),
            };
            // The kubelet registers its Node (a minute at most).
            let registered = (0..300).any(|_| {
                let out = up.kubectl(&["get", "nodes", "-o", "name"]);
                let listed = String::from_utf8_lossy(&out.stdout).contains("node/klab-worker");
                if !listed {
                    std::thread::sleep(Duration::from_millis(200));
                }
                listed
            });
            assert!(registered, "the node never registered");
            up
        }

        fn kubectl(&self, args: &[&str]) -> Output {
            Command::new(kubectl_binary())
                .arg("--kubeconfig")
                .arg(&self.running.kubeconfig)
                .arg("--cache-dir")
                .arg(self.dir.path().join("cache"))
                .args(args)
                .output()
                .expect("kubectl runs")
        }

        /// Ends serving: the front door's runtime, and every task on it, is gone.
        fn stop_serving(&mut self) {
            let _ = self.stop.take().expect("serving").send(());
            let serving = self.serving.take().expect("serving");
            self.rt.block_on(serving).unwrap().unwrap();
        }
    }

    /// kubectl is answered while every thread of the cluster's runtime is busy: connections are
    /// served on the front door's own threads, as a separate kube-apiserver process would be.
    #[test]
    fn kubectl_is_answered_while_the_clusters_runtime_is_busy() {
        let mut up = Up::start(1.0);
        // Hold the runtime's one worker until kubectl has its answer (or a minute has passed).
        let (held_tx, held_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = up.rt.spawn(async move {
            let _ = held_tx.send(());
            release_rx.recv_timeout(Duration::from_secs(60)).is_ok()
        });
        held_rx.recv().unwrap();
        let out = up.kubectl(&["get", "nodes", "-o", "name", "--request-timeout=20s"]);
        let _ = release_tx.send(());
        assert!(
            up.rt.block_on(holder).unwrap(),
            "the worker was let go before kubectl answered"
        );
        assert!(
            out.status.success(),
            "kubectl failed while the cluster's runtime was busy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "node/klab-worker\n");
        up.stop_serving();
    }

    /// A kubelet the admin endpoint starts (a reboot) runs on the cluster's runtime, not on the
    /// front door's that served the request: it keeps renewing its Lease after serving ends.
    #[test]
    fn a_kubelet_started_through_the_admin_endpoint_outlives_the_front_door() {
        use k8s_openapi::api::coordination::v1::Lease;
        // Objects' time runs 20 times faster, so that a Lease renewal (every 10 s) comes in 0.5 s.
        let mut up = Up::start(20.0);
        // With kubectl's `?timeout=`, which the admin endpoint lets pass.
        let out = up.kubectl(&[
            "create",
            "--raw",
            "/klab/v1/nodes/klab-worker/reboot",
            "-f",
            "-",
            "--request-timeout=20s",
        ]);
        assert!(
            out.status.success(),
            "reboot through the admin endpoint: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        up.stop_serving();
        let _in_runtime = up.rt.enter();
        let leases: kube::Api<Lease> =
            kube::Api::namespaced(up.running.cluster.kubectl_client(), "kube-node-lease");
        let renewed = |leases: &kube::Api<Lease>| {
            up.rt
                .block_on(leases.get_opt("klab-worker"))
                .unwrap()
                .and_then(|l| l.spec?.renew_time)
        };
        let first = renewed(&leases);
        // Three renewal intervals of objects' time, at most.
        let later = (0..30).find_map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            renewed(&leases).filter(|t| Some(t) != first.as_ref())
        });
        assert!(
            later.is_some(),
            "the rebooted kubelet stopped renewing its Lease when serving ended (last {first:?})"
        );
    }
}
