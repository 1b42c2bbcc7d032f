//! `report.html` as a reader's browser lays it out: a simulated nightly (one run, ten
//! nodes) and burst-500 (four runs) loaded in headless Chromium at 1400 and 800 px. No
//! chart is wider than the window, the page does not scroll sideways, chart text is at
//! least 12 px and no legend is cut. A probe script is appended to a copy of the page
//! (the report itself has none) and its findings read back from `--dump-dom`.
//!
//! Chromium is Debian's `chromium` (`.ci/run` installs it). Without it the test says so
//! and passes, except under CI (`CI` set), where a missing browser is a failure: the
//! check must never pass by not running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stampede::profile::load_and_validate;
use stampede::report::write_html;
use stampede::sim::simulate_profile;

/// Measures every chart and legend once the page is laid out; writes a JSON line.
const PROBE: &str = r#"<script>(function(){
var vw=document.documentElement.clientWidth,o={vw:vw,charts:0,wide:[],font:1e9,cut:[]};
document.querySelectorAll('svg.chart').forEach(function(s,i){o.charts++;
var r=s.getBoundingClientRect();if(r.right>vw+0.5||r.left<-0.5)o.wide.push(i+':'+r.right);
var f=parseFloat(s.getAttribute('font-size'))*r.width/s.viewBox.baseVal.width;o.font=Math.min(o.font,f);});
document.querySelectorAll('.legend').forEach(function(l,i){
if(l.scrollWidth>l.clientWidth+1||l.getBoundingClientRect().right>vw+0.5)o.cut.push(i);});
o.page=document.documentElement.scrollWidth;
var p=document.createElement('pre');p.id='probe';p.textContent=JSON.stringify(o);document.body.appendChild(p);
})();</script>"#;

fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not on PATH under CI: .ci/run must install Debian's `chromium`"
        );
        eprintln!("chromium not on PATH: skipped (apt-get install chromium to run it)");
    }
    found
}

/// The probe's findings for `page` in a `width` px window.
fn probe(browser: &str, page: &Path, width: u32, profile_dir: &Path) -> serde_json::Value {
    // The DOM goes to a file: a page larger than a pipe's buffer would block the browser
    // while this waits for it.
    let dom_file = profile_dir.with_extension("dom.html");
    let dom_out = std::fs::File::create(&dom_file).expect("dom file");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            &format!("--user-data-dir={}", profile_dir.display()),
            &format!("--window-size={width},1000"),
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .stdout(dom_out)
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("chromium status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let dom = std::fs::read_to_string(&dom_file).expect("the dumped DOM");
    let at = dom
        .find(r#"<pre id="probe">"#)
        .unwrap_or_else(|| panic!("no probe in {dom}"));
    let json = &dom[at + r#"<pre id="probe">"#.len()..];
    let json = &json[..json.find("</pre>").expect("probe end")];
    serde_json::from_str(&json.replace("&quot;", "\"")).expect("probe JSON")
}

fn page_of(profile: &str, dir: &Path) -> PathBuf {
    let p = load_and_validate(Path::new(profile)).expect("valid profile");
    let report = simulate_profile(&p).expect("simulates");
    let mut html = Vec::new();
    write_html(&report, &mut html).expect("writes");
    let html = String::from_utf8(html).expect("utf-8");
    assert!(!html.contains("<script"), "the report itself has no script");
    let name = Path::new(profile).file_stem().expect("a name");
    let path = dir.join(name).with_extension("html");
    std::fs::write(&path, html.replace("</body>", &format!("{PROBE}</body>"))).expect("writes");
    path
}

#[test]
fn report_charts_fit_the_window_at_1400_and_800_px_in_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("stampede-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    for profile in ["profiles/nightly.yaml", "profiles/burst-500.yaml"] {
        let page = page_of(profile, &dir);
        for width in [1400, 800] {
            let o = probe(
                browser,
                &page,
                width,
                &dir.join(format!("chromium-{width}")),
            );
            let at = format!("{profile} at {width} px: {o}");
            assert!(o["charts"].as_u64().unwrap_or(0) >= 4, "{at}");
            assert_eq!(o["wide"], serde_json::json!([]), "a chart overflows: {at}");
            assert_eq!(o["cut"], serde_json::json!([]), "a legend is cut: {at}");
            let vw = o["vw"].as_f64().expect("viewport");
            assert!(
                o["page"].as_f64().expect("page width") <= vw,
                "page scrolls sideways: {at}"
            );
            assert!(
                o["font"].as_f64().expect("font") >= 12.0,
                "chart text under 12 px: {at}"
            );
        }
    }
    // The probe can fail: a fixed-width chart and an unwrapped legend are caught.
    let bad = dir.join("bad.html");
    let legend: String = (0..10)
        .map(|i| format!("<span>&#9632; node-{i:02}</span> "))
        .collect();
    std::fs::write(
        &bad,
        format!(
            r#"<html><body><svg class="chart" viewBox="0 0 800 300" width="1200" font-size="14"></svg><p class="legend" style="white-space:nowrap;overflow:hidden">{legend}</p>{PROBE}</body></html>"#
        ),
    )
    .expect("writes");
    let o = probe(browser, &bad, 800, &dir.join("chromium-bad"));
    assert_ne!(o["wide"], serde_json::json!([]), "{o}");
    assert_ne!(o["cut"], serde_json::json!([]), "{o}");
    let _ = std::fs::remove_dir_all(&dir);
}
