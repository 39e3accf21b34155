//! `--results` whose reader goes away (contract §15, §4): the run stops as a closed stdout
//! stops it — exit 141, status `cancelled`.

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace};

#[tokio::test(flavor = "multi_thread")]
async fn a_results_fifo_whose_reader_leaves_cancels_the_run_with_141() {
    use std::io::BufRead;
    let ws = workspace();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "default_task": [{"text": "ok", "delay_ms": 100}]}),
    );
    let items: String = (0..30).map(|i| format!("item {i}\n")).collect();
    std::fs::write(ws.path().join("items.txt"), items).unwrap();
    let fifo = ws.path().join("pipe");
    let cpath = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
    // Reads one line, then closes the pipe.
    let reader = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(std::fs::File::open(fifo).unwrap()).lines();
        lines.next().unwrap().unwrap()
    });
    let model = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model,
        "--each",
        "items.txt",
        "--max-concurrent",
        "1",
        "--results",
        "pipe",
        "x {{item}}",
    ])
    .cwd(ws.path())
    .json()
    .await;
    let first: Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    assert_eq!(first["index"], 0);
    assert_eq!(out.code, 141, "{}", out.stderr);
    let end = out.completed();
    assert_eq!(end["status"], "cancelled", "{end}");
    assert_eq!(end["exit_code"], 141);
    assert!(end["tasks"]["total"].as_u64().unwrap() < 30, "{end}");
}
