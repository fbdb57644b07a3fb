//! `klab sim --report` opened in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/run` installs) lays the page out, a probe script measures the drawn timeline (lanes,
//! segments, links, markers must have real boxes inside the SVG), and a screenshot is saved
//! under the test's target directory for people to look at.

use std::path::Path;
use std::process::Command;

/// The probe appended to a copy of the report: it measures what the browser drew and writes the
/// numbers into a `<pre id="probe">` that `--dump-dom` prints. The report itself carries no
/// script; only this copy does.
const PROBE: &str = r#"<script>
const out = [];
const svg = document.getElementById('timeline');
const sb = svg.getBoundingClientRect();
out.push('svg ' + Math.round(sb.width) + ' ' + Math.round(sb.height));
const boxed = (sel) => {
  const all = [...document.querySelectorAll(sel)];
  const drawn = all.filter((e) => { const b = e.getBBox(); return b.width > 0 && b.height > 0; });
  const inside = drawn.filter((e) => {
    const r = e.getBoundingClientRect();
    return r.left >= sb.left - 1 && r.right <= sb.right + 1 && r.top >= sb.top - 1 && r.bottom <= sb.bottom + 1;
  });
  out.push(sel + ' ' + all.length + ' ' + drawn.length + ' ' + inside.length);
};
boxed('g.lane.node');
boxed('g.lane.pod');
boxed('rect.seg');
boxed('path.link');
boxed('circle');
const lanes = [...document.querySelectorAll('g.lane')].map((g) => g.getBBox());
let overlaps = 0;
for (let i = 1; i < lanes.length; i++) {
  if (lanes[i].y < lanes[i - 1].y + lanes[i - 1].height - 0.5) overlaps++;
}
out.push('overlaps ' + overlaps);
document.body.insertAdjacentHTML('beforeend', '<pre id="probe">' + out.join('\n') + '</pre>');
</script>"#;

fn chromium(args: &[&str], profile: &Path) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1600,1200",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium (Debian package `chromium`; .ci/run installs it)")
}

/// Reads the probe's `name n1 n2 …` line as numbers.
fn probe_line(dom: &str, name: &str) -> Vec<u64> {
    let line = dom
        .lines()
        .map(|l| l.rsplit("<pre id=\"probe\">").next().unwrap_or(l))
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("probe line {name:?} missing from the DOM:\n{dom}"));
    line[name.len()..]
        .split_whitespace()
        .map(|n| n.trim_end_matches("</pre>").parse().unwrap_or(0))
        .collect()
}

#[test]
fn the_sim_report_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("power-off.html");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/node/power-off-over-5m.yaml"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_klab"))
        .args(["sim", scenario, "--quiet", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(
        !page.contains("<script"),
        "the report itself needs no script"
    );

    // Measure the layout in the browser, on a copy that carries the probe.
    let probed = dir.path().join("probed.html");
    std::fs::write(&probed, page.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let profile = dir.path().join("profile");
    let o = chromium(
        &["--dump-dom", &format!("file://{}", probed.display())],
        &profile,
    );
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let svg = probe_line(&dom, "svg");
    assert!(svg[0] > 400 && svg[1] > 100, "timeline drawn at {svg:?}");
    // Three nodes, every lane with a real box inside the SVG.
    assert_eq!(probe_line(&dom, "g.lane.node"), vec![3, 3, 3]);
    let pods = probe_line(&dom, "g.lane.pod");
    assert!(
        pods[0] >= 4 && pods[0] == pods[1] && pods[1] == pods[2],
        "{pods:?}"
    );
    let segs = probe_line(&dom, "rect.seg");
    assert!(segs[0] > 10 && segs[2] == segs[1], "{segs:?}");
    // The evicted pod's replacement is linked, and the link is drawn inside the timeline.
    assert_eq!(probe_line(&dom, "path.link"), vec![1, 1, 1]);
    let marks = probe_line(&dom, "circle");
    assert!(marks[0] > 10 && marks[2] == marks[1], "{marks:?}");
    assert_eq!(probe_line(&dom, "overlaps"), vec![0]);

    // A screenshot of the report as a person sees it.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("power-off-report.png");
    let _ = std::fs::remove_file(&shot);
    let o = chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", report.display()),
        ],
        &profile,
    );
    assert!(
        o.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000);
    eprintln!("screenshot: {}", shot.display());
}
