//! The live dashboard of `klab up --speed 20` in a real browser: headless Chromium (Debian's
//! `chromium`) opens `/ui/?token=…`, driven over the DevTools protocol (a WebSocket, JSON
//! commands) from this test. The page must show the nodes, their pods, the Deployment and the
//! Events; a real mouse click on a node's `stop kubelet` button must turn that node NotReady on
//! the page and its pods must count down to their eviction; an impossible fault shows the admin
//! endpoint's error. Screenshots are kept under the test's target directory.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::Klab;

const BOUND: Duration = Duration::from_secs(90);

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Headless Chromium with its DevTools endpoint on a free port, killed on drop.
struct Browser {
    child: Child,
    ws_url: String,
}

impl Browser {
    fn start(profile: &Path) -> Browser {
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                // klab's own CA signed the server certificate.
                "--ignore-certificate-errors",
                "--window-size=1600,1200",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run chromium (Debian package `chromium`; .ci/run installs it)");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let ws_url = loop {
            let line = lines
                .next()
                .expect("chromium ended before its DevTools endpoint was up")
                .expect("read chromium's stderr");
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                break url.trim().to_string();
            }
        };
        // Keep draining so chromium never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Browser { child, ws_url }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One DevTools session attached to a page (flat sessions over the browser's socket).
struct Page {
    ws: Ws,
    session: String,
    next_id: u64,
}

async fn command(
    ws: &mut Ws,
    id: u64,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let mut msg = json!({"id": id, "method": method, "params": params});
    if let Some(s) = session {
        msg["sessionId"] = json!(s);
    }
    ws.send(Message::text(msg.to_string())).await.expect("send");
    loop {
        let m = tokio::time::timeout(BOUND, ws.next())
            .await
            .expect("DevTools answered in time")
            .expect("DevTools socket open")
            .expect("DevTools message");
        let Message::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(&t).expect("DevTools JSON");
        if v["id"] == json!(id) {
            assert!(v.get("error").is_none(), "{method}: {v}");
            return v["result"].clone();
        }
    }
}

impl Page {
    async fn open(browser: &Browser, url: &str) -> Page {
        let (mut ws, _) = tokio_tungstenite::connect_async(&browser.ws_url)
            .await
            .expect("connect to DevTools");
        let target = command(&mut ws, 1, None, "Target.createTarget", json!({"url": url})).await;
        let attached = command(
            &mut ws,
            2,
            None,
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        )
        .await;
        Page {
            ws,
            session: attached["sessionId"].as_str().expect("sessionId").into(),
            next_id: 3,
        }
    }

    async fn send(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        command(
            &mut self.ws,
            self.next_id,
            Some(&self.session),
            method,
            params,
        )
        .await
    }

    /// Evaluates `expr` in the page and returns its JSON value.
    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .send(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Evaluates `expr` until it gives something other than null/false, within the bound (an
    /// exception, e.g. while the page is still loading, counts as not yet).
    async fn wait(&mut self, what: &str, expr: &str) -> Value {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            let r = self
                .send(
                    "Runtime.evaluate",
                    json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
                )
                .await;
            let v = match r.get("exceptionDetails") {
                Some(_) => Value::Null,
                None => r["result"]["value"].clone(),
            };
            if !(v.is_null() || v == json!(false)) {
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {BOUND:?} waiting for {what}; page: {}",
                self.eval("document.body.innerText").await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A real click: the element scrolled into view, the mouse pressed and released at its centre.
    async fn click(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).unwrap();
        let rect = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({sel}); if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
            ))
            .await;
        let (x, y) = (
            rect[0].as_f64().expect("element found"),
            rect[1].as_f64().unwrap(),
        );
        for kind in ["mousePressed", "mouseReleased"] {
            self.send(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await;
        }
    }

    async fn screenshot(&mut self, name: &str) {
        let r = self
            .send(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000);
        let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&shot, png).unwrap();
        eprintln!("screenshot: {}", shot.display());
    }
}

/// The API server's URL from the kubeconfig `klab up` wrote.
fn server_url(k: &Klab) -> String {
    let kc: Value = serde_json::from_slice(&std::fs::read(&k.kubeconfig).unwrap()).unwrap();
    kc["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server in kubeconfig")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_cluster_and_its_buttons_fail_a_node() {
    let k = Klab::start(&["--speed", "20"]);
    k.ok(
        33,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=4",
        ],
    );
    k.wait_for("web available", BOUND, || {
        let out = k.kubectl(
            33,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.availableReplicas}",
            ],
        );
        (String::from_utf8_lossy(&out.stdout).trim() == "4").then_some(())
    });
    let token = std::fs::read_to_string(k.dir.path().join("data/dashboard-token")).unwrap();
    let url = format!("{}/ui/?token={}", server_url(&k), token.trim());

    let profile = tempfile::tempdir().unwrap();
    let browser = Browser::start(profile.path());
    let mut page = Page::open(&browser, &url).await;

    // The login took the token out of the address bar and the stream is live.
    page.wait(
        "the event stream",
        "document.getElementById('conn').textContent === 'live'",
    )
    .await;
    assert!(page.eval("location.pathname + location.search").await == json!("/ui/"));
    // Three nodes, each Ready with a heartbeat and its fault buttons.
    page.wait(
        "three Ready nodes",
        "[...document.querySelectorAll('.node')].filter((n) => n.querySelector('.status').textContent === 'Ready').length === 3",
    )
    .await;
    let buttons = page
        .eval("[...document.querySelectorAll('.node[data-node=\"klab-worker\"] button.fault')].map((b) => b.dataset.fault)")
        .await;
    for f in ["stop-kubelet", "power-off", "reboot", "partition", "heal"] {
        assert!(
            buttons.as_array().unwrap().contains(&json!(f)),
            "{f} in {buttons}"
        );
    }
    page.wait(
        "heartbeat ages",
        "[...document.querySelectorAll('.node .meta b.age')].filter((b) => /^\\d+s$/.test(b.textContent)).length === 3",
    )
    .await;
    // The four pods, Running, under their nodes; the Deployment 4/4; Events listed.
    page.wait(
        "four Running pods on nodes",
        "[...document.querySelectorAll('.node .pod')].filter((p) => p.dataset.pod.startsWith('default/web-') && p.querySelector('.status').textContent.startsWith('Running')).length === 4",
    )
    .await;
    page.wait(
        "web 4/4",
        "document.querySelector('tr.workload[data-workload=\"Deployment/default/web\"] td.avail')?.textContent.startsWith('4/4')",
    )
    .await;
    let events = page
        .eval("document.querySelectorAll('#events tr.event').length")
        .await;
    assert!(events.as_u64().unwrap() > 3, "{events} events listed");
    page.screenshot("dashboard-ready.png").await;

    // Stop the kubelet of a node that runs web pods, with the mouse.
    let node = page
        .eval("document.querySelector('.node .pod[data-pod^=\"default/web-\"]').closest('.node').dataset.node")
        .await;
    let node = node.as_str().unwrap().to_string();
    let on_node = format!(".node[data-node=\"{node}\"]");
    page.click(&format!(
        "{on_node} button.fault[data-fault=\"stop-kubelet\"]"
    ))
    .await;
    page.wait(
        "the admin endpoint's answer",
        &format!("document.getElementById('notice').textContent === 'stop-kubelet {node}: done'"),
    )
    .await;
    // 50 s of grace are 2.5 s at speed 20: the node turns NotReady (Ready=Unknown) on the page.
    page.wait(
        "the node NotReady",
        &format!("document.querySelector('{on_node} .status').textContent === 'NotReady' && document.querySelector('{on_node}').classList.contains('ready-Unknown')"),
    )
    .await;
    // Its pods count down to their eviction (unreachable:NoExecute, 300 s of toleration).
    let first = page
        .wait(
            "an eviction countdown",
            &format!("(() => {{ const b = document.querySelector('{on_node} .pod .countdown b[data-due]'); return b && /^in \\d/.test(b.textContent) ? b.textContent : null; }})()"),
        )
        .await;
    page.wait(
        "the countdown ticking",
        &format!("(() => {{ const b = document.querySelector('{on_node} .pod .countdown b[data-due]'); return b && b.textContent !== {first} && /^in \\d/.test(b.textContent); }})()"),
    )
    .await;
    page.wait(
        "the unreachable taint",
        &format!("[...document.querySelectorAll('{on_node} .taint')].some((t) => t.textContent === 'node.kubernetes.io/unreachable:NoExecute')"),
    )
    .await;
    page.screenshot("dashboard-stopped-kubelet.png").await;

    // An impossible fault: the admin endpoint's refusal, shown as it is.
    page.click(&format!(
        "{on_node} button.fault[data-fault=\"stop-kubelet\"]"
    ))
    .await;
    let refused = page
        .wait(
            "the refusal",
            "(() => { const n = document.getElementById('notice'); return n.className === 'err' ? n.textContent : null; })()",
        )
        .await;
    assert!(
        refused
            .as_str()
            .unwrap()
            .starts_with(&format!("stop-kubelet {node}: 409 ")),
        "{refused}"
    );

    // Without the token, nothing but a clear refusal.
    let profile2 = tempfile::tempdir().unwrap();
    let stranger = Browser::start(profile2.path());
    let mut p = Page::open(&stranger, &format!("{}/ui/", server_url(&k))).await;
    let text = p
        .wait(
            "the refusal page",
            "document.getElementById('refused')?.textContent",
        )
        .await;
    assert!(text.as_str().unwrap().contains("login token"), "{text}");
}
