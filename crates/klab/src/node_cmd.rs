//! `klab node …` and `klab component …`: node faults, re-registration, machines joining and
//! leaving, and supervised components of a running `klab up`, through its admin endpoint.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::Value;

async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).with_context(|| {
        format!(
            "reading {} (is `klab up` running with this data directory?)",
            kubeconfig.display()
        )
    })?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .context("loading the kubeconfig")?;
    kube::Client::try_from(cfg).context("building a client")
}

fn describe(s: &Value) -> String {
    let yes = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
    format!(
        "power {}, kubelet {}, network {}{}",
        if yes("powered") { "on" } else { "off" },
        if yes("kubeletRunning") {
            "running"
        } else {
            "stopped"
        },
        if yes("partitioned") {
            "partitioned"
        } else {
            "connected"
        },
        if yes("frozen") { ", frozen" } else { "" },
    )
}

fn api_error(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => anyhow::anyhow!("{}", s.message),
        other => anyhow::anyhow!(other),
    }
}

/// Lists the cluster's simulated nodes.
pub async fn list(kubeconfig: &Path) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let req = http::Request::get("/klab/v1/nodes").body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    println!(
        "{:<20} {:<6} {:<8} {:<12} {:<7} {:<38} CONTAINERS",
        "NAME", "POWER", "KUBELET", "NETWORK", "FROZEN", "BOOT-ID"
    );
    for n in v
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let b = |k: &str| n.get(k).and_then(Value::as_bool).unwrap_or(false);
        println!(
            "{:<20} {:<6} {:<8} {:<12} {:<7} {:<38} {}",
            n.get("name").and_then(Value::as_str).unwrap_or(""),
            if b("powered") { "on" } else { "off" },
            if b("kubeletRunning") {
                "running"
            } else {
                "stopped"
            },
            if b("partitioned") {
                "partitioned"
            } else {
                "connected"
            },
            if b("frozen") { "yes" } else { "no" },
            n.get("bootID").and_then(Value::as_str).unwrap_or(""),
            n.get("runningContainers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Applies one fault to one node.
pub async fn fault(kubeconfig: &Path, fault: &str, node: &str) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let req = http::Request::post(format!("/klab/v1/nodes/{node}/{fault}")).body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    println!("node/{node}: {fault} done ({})", describe(&v));
    Ok(ExitCode::SUCCESS)
}

/// Percent-encodes everything but unreserved characters (the server parses the value).
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `klab node clock-skew NAME --offset D`: the machine's clock runs D ahead (or behind).
pub async fn clock_skew(kubeconfig: &Path, node: &str, offset: &str) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let req = http::Request::post(format!(
        "/klab/v1/nodes/{node}/clock-skew?offset={}",
        encode(offset)
    ))
    .body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    println!("node/{node}: clock skewed by {offset} ({})", describe(&v));
    Ok(ExitCode::SUCCESS)
}

/// A query string of the given pairs, values percent-encoded.
fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(v))))
        .collect();
    if q.is_empty() {
        String::new()
    } else {
        format!("?{}", q.join("&"))
    }
}

/// `klab node condition NAME --type T --status S [--reason R] [--message M]`, or
/// `clear-condition NAME --type T`: the node's kubelet reports (or stops reporting) a chosen
/// condition, as a scenario's `node-condition` / `clear-node-condition`.
pub async fn condition(
    kubeconfig: &Path,
    node: &str,
    type_: &str,
    report: Option<(&str, Option<&str>, Option<&str>)>,
) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let (fault, q) = match report {
        Some((st, reason, message)) => (
            "condition",
            query(&[
                ("type", Some(type_)),
                ("status", Some(st)),
                ("reason", reason),
                ("message", message),
            ]),
        ),
        None => ("clear-condition", query(&[("type", Some(type_))])),
    };
    let req = http::Request::post(format!("/klab/v1/nodes/{node}/{fault}{q}")).body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    match report {
        Some((st, _, _)) => println!(
            "node/{node}: the kubelet reports {type_}={st} ({})",
            describe(&v)
        ),
        None => println!(
            "node/{node}: the kubelet's own {type_} condition again ({})",
            describe(&v)
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `klab node image-pull-fail|image-pull-heal NAME|--all IMAGE [--message E]`.
pub async fn image_pull(
    kubeconfig: &Path,
    node: Option<&str>,
    image: &str,
    fail: bool,
    message: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let q = query(&[("image", Some(image)), ("message", message)]);
    let path = match node {
        Some(n) => format!(
            "/klab/v1/nodes/{n}/{}{q}",
            if fail {
                "image-pull-fail"
            } else {
                "image-pull-heal"
            }
        ),
        None => format!("/klab/v1/images/{}{q}", if fail { "fail" } else { "heal" }),
    };
    let _: Value = c
        .request(http::Request::post(path).body(Vec::new())?)
        .await
        .map_err(api_error)?;
    let on = node.map_or("every node".to_string(), |n| format!("node/{n}"));
    if fail {
        println!("{on}: pulls of {image:?} fail");
    } else {
        println!("{on}: pulls of {image:?} work again");
    }
    Ok(ExitCode::SUCCESS)
}

/// `klab node reboot NAME --cpu C --memory M --label k=v …`: the machine reboots into changed
/// hardware or `--node-labels`.
pub async fn reboot_with(
    kubeconfig: &Path,
    node: &str,
    cpu: Option<&str>,
    memory: Option<&str>,
    labels: &[String],
) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let joined = labels.join(",");
    let q = query(&[
        ("cpu", cpu),
        ("memory", memory),
        ("labels", (!labels.is_empty()).then_some(joined.as_str())),
    ]);
    let req = http::Request::post(format!("/klab/v1/nodes/{node}/reboot{q}")).body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    println!("node/{node}: reboot done ({})", describe(&v));
    Ok(ExitCode::SUCCESS)
}

/// A node-pressure fault (`memory-pressure NAME --available 80Mi`) or `relieve`.
pub async fn pressure(
    kubeconfig: &Path,
    fault: &str,
    node: &str,
    available: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    // Percent-encode everything but unreserved characters: the server parses the quantity.
    let query = available
        .map(|a| format!("?available={}", encode(a)))
        .unwrap_or_default();
    let req =
        http::Request::post(format!("/klab/v1/nodes/{node}/{fault}{query}")).body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    match available {
        Some(a) => println!(
            "node/{node}: {fault} done (available {a}; {})",
            describe(&v)
        ),
        None => println!("node/{node}: {fault} done ({})", describe(&v)),
    }
    Ok(ExitCode::SUCCESS)
}

/// Adds a machine: it boots and its kubelet registers a new Node.
pub async fn add(kubeconfig: &Path, node: &str, zone: Option<&str>) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let body = serde_json::to_vec(&serde_json::json!({"name": node, "zone": zone}))?;
    let req = http::Request::post("/klab/v1/nodes")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    println!("node/{node}: added ({})", describe(&v));
    Ok(ExitCode::SUCCESS)
}

/// Removes a machine for good: powered off, its Node deleted.
pub async fn remove(kubeconfig: &Path, node: &str) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let req = http::Request::delete(format!("/klab/v1/nodes/{node}")).body(Vec::new())?;
    let _: Value = c.request(req).await.map_err(api_error)?;
    println!("node/{node}: removed (powered off, Node deleted)");
    Ok(ExitCode::SUCCESS)
}

/// How `klab component` reaches the admin endpoint: the running `klab up`'s Unix socket when
/// there is one beside the kubeconfig (the data directory's own kubeconfig: the administrator's)
/// — reachable while the API server, and so its TLS port, is stopped — else through the
/// kubeconfig's server. Another user's kubeconfig elsewhere never borrows the socket.
pub struct Admin {
    pub kubeconfig: std::path::PathBuf,
    pub socket: Option<std::path::PathBuf>,
}

impl Admin {
    pub fn find(kubeconfig: std::path::PathBuf) -> Admin {
        let socket = kubeconfig
            .parent()
            .map(|d| d.join(klab_server::up::ADMIN_SOCKET))
            .filter(|p| p.exists());
        Admin { kubeconfig, socket }
    }

    async fn post(&self, uri: &str) -> anyhow::Result<Value> {
        self.call("POST", uri).await
    }

    async fn call(&self, method: &str, uri: &str) -> anyhow::Result<Value> {
        match &self.socket {
            Some(socket) => socket_call(socket, method, uri).await,
            None => {
                let c = client(&self.kubeconfig).await?;
                let req = http::Request::builder()
                    .method(method)
                    .uri(uri)
                    .body(Vec::new())?;
                c.request(req).await.map_err(api_error)
            }
        }
    }
}

/// One HTTP/1.1 request on the admin socket; a failure's `metav1.Status` message is the error.
async fn socket_call(socket: &Path, method: &str, uri: &str) -> anyhow::Result<Value> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(socket)
        .await
        .with_context(|| format!("connecting to {} (is `klab up` running?)", socket.display()))?;
    let req = format!(
        "{method} {uri} HTTP/1.1\r\nHost: klab\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("a malformed answer on {}", socket.display()))?;
    let code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("a malformed answer on {}", socket.display()))?;
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if (200..300).contains(&code) {
        Ok(v)
    } else {
        let message = v
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {code}"), str::to_string);
        Err(anyhow::anyhow!("{message}"))
    }
}

/// Lists the supervised components (controllers, scheduler, kubelets) and their restarts.
pub async fn list_components(admin: &Admin) -> anyhow::Result<ExitCode> {
    let v = admin.call("GET", "/klab/v1/components").await?;
    println!(
        "{:<50} {:<9} {:<9} {:<7} LAST FAILURE",
        "NAME", "STATE", "RESTARTS", "PANICS"
    );
    for n in v
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let num = |k: &str| n.get(k).and_then(Value::as_u64).unwrap_or(0);
        println!(
            "{:<50} {:<9} {:<9} {:<7} {}",
            n.get("name").and_then(Value::as_str).unwrap_or(""),
            n.get("state").and_then(Value::as_str).unwrap_or(""),
            num("restarts"),
            num("panics"),
            n.get("lastFailure")
                .and_then(Value::as_str)
                .unwrap_or("<none>"),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Makes one supervised component panic (it is restarted with backoff).
pub async fn panic_component(admin: &Admin, name: &str) -> anyhow::Result<ExitCode> {
    admin
        .post(&format!("/klab/v1/components/{name}/panic"))
        .await?;
    println!("component/{name}: panic injected");
    Ok(ExitCode::SUCCESS)
}

/// `klab component stop|start|restart NAME`.
pub async fn control_component(
    admin: &Admin,
    name: &str,
    action: &str,
) -> anyhow::Result<ExitCode> {
    let v = admin
        .post(&format!("/klab/v1/components/{name}/{action}"))
        .await?;
    let name = v.get("name").and_then(Value::as_str).unwrap_or(name);
    let done = match action {
        "stop" => "stopped",
        "start" => "started",
        _ => "restarted",
    };
    println!("component/{name}: {done}");
    Ok(ExitCode::SUCCESS)
}

/// `klab component brownout NAME [--latency D] [--error-rate R] [--code C] [--end]`.
pub async fn brownout(admin: &Admin, name: &str, query: &str) -> anyhow::Result<ExitCode> {
    let v = admin
        .post(&format!("/klab/v1/components/{name}/brownout?{query}"))
        .await?;
    let on = v.get("brownout").and_then(Value::as_bool).unwrap_or(false);
    println!(
        "component/{name}: brownout {}",
        if on { "started" } else { "ended" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `klab volume fail|heal NAME`: the volume's simulated backend becomes unavailable or healthy.
pub async fn volume(kubeconfig: &Path, action: &str, name: &str) -> anyhow::Result<ExitCode> {
    let c = client(kubeconfig).await?;
    let path = name.replace('/', "~");
    let req = http::Request::post(format!("/klab/v1/volumes/{path}/{action}")).body(Vec::new())?;
    let v: Value = c.request(req).await.map_err(api_error)?;
    let pv = v.get("volume").and_then(Value::as_str).unwrap_or(name);
    println!("persistentvolume/{pv}: {action} done");
    Ok(ExitCode::SUCCESS)
}
