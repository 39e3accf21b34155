//! Images (contract §14 "Vision"): `view_image` and `--image` end to end, the request
//! bodies the mock received, and what never carries an image (events, cassettes).

use std::io::Cursor;
use std::path::Path;

use base64::Engine;
use image::{DynamicImage, ImageFormat, RgbImage};
use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Run};
use super::openai_http::{assert_no_panic, config};
use crate::support::{MockServer, Reply};

/// An image of `w`×`h` in `format`, with detail so that it does not compress to nothing.
fn encoded(w: u32, h: u32, format: ImageFormat) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x ^ y) % 256) as u8])
    });
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img)
        .write_to(&mut out, format)
        .unwrap();
    out.into_inner()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `deerflow -c CONFIG run --json -C WS ARGS… PROMPT`.
fn run_with(cfg: &Path, ws: &Path, args: &[&str], prompt: &str) -> Run {
    let mut all = vec![
        "-c",
        cfg.to_str().unwrap(),
        "run",
        "--json",
        "-C",
        ws.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    all.push(prompt);
    deerflow(all)
}

/// No base64 of an image (a PNG's or JPEG's first bytes, or a data URL) in `text`.
fn assert_no_image(what: &str, text: &str) {
    for needle in ["iVBORw0KGgo", "/9j/", "base64,"] {
        assert!(!text.contains(needle), "{needle} in {what}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_chat_gets_the_task_image_and_the_viewed_one_and_nothing_else_does() {
    let server = MockServer::start().await;
    server.push_reply(Reply::tool_calls(vec![(
        "call_v",
        "view_image",
        json!({"image_path": "shots/screen.png"}),
    )]));
    server.push_reply(Reply::text("A gradient."));
    let ws = workspace();
    let task_png = encoded(12, 8, ImageFormat::Png);
    let shot = encoded(30, 20, ImageFormat::Png);
    std::fs::write(ws.path().join("task.png"), &task_png).unwrap();
    std::fs::create_dir(ws.path().join("shots")).unwrap();
    std::fs::write(ws.path().join("shots/screen.png"), &shot).unwrap();
    let cfg = config(
        ws.path(),
        "openai",
        &server.url(),
        ", supports_vision: true",
    );
    let rec = ws.path().join("rec.json");
    let task_arg = ws.path().join("task.png");
    let out = run_with(
        &cfg,
        ws.path(),
        &[
            "--image",
            task_arg.to_str().unwrap(),
            "--record",
            rec.to_str().unwrap(),
        ],
        "what do you see?",
    )
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The lead is offered view_image; the task's image follows the task.
    let tools: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"view_image"), "{tools:?}");
    let first = reqs[0].body["messages"].as_array().unwrap();
    assert_eq!(
        first[1],
        json!({"role": "user", "content": "what do you see?"})
    );
    let task_url = format!("data:image/png;base64,{}", b64(&task_png));
    assert_eq!(
        first[2],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": task_url}}]})
    );
    // The viewed image: a user message right after the tool result.
    let second = reqs[1].body["messages"].as_array().unwrap();
    let n = second.len();
    assert_eq!(second[n - 2]["role"], "tool");
    assert_eq!(
        second[n - 2]["content"],
        "Image read: shots/screen.png (30x20)"
    );
    let shot_url = format!("data:image/png;base64,{}", b64(&shot));
    assert_eq!(
        second[n - 1],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": shot_url}}]})
    );
    assert_eq!(
        out.first("tool_result")["output"],
        "Image read: shots/screen.png (30x20)"
    );
    assert_no_image("the events", &out.stdout);
    assert_no_image("stderr", &out.stderr);
    assert_no_image("the cassette", &std::fs::read_to_string(&rec).unwrap());
}

/// The image in an Anthropic request's `tool_result`, decoded.
fn anthropic_result_image(body: &Value) -> (String, image::DynamicImage) {
    let messages = body["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("a tool_result");
    assert_eq!(
        result["content"][0]["text"],
        "Image read: big.jpg (4000x3000)"
    );
    let source = &result["content"][1]["source"];
    assert_eq!(source["type"], "base64");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(source["data"].as_str().unwrap())
        .unwrap();
    assert!(bytes.len() <= 5 * 1024 * 1024);
    (
        source["media_type"].as_str().unwrap().to_string(),
        image::load_from_memory(&bytes).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_gets_a_large_image_scaled_inside_the_tool_result() {
    let server = MockServer::start().await;
    server.push_reply(Reply::anthropic_tool_uses(vec![(
        "toolu_1",
        "view_image",
        json!({"image_path": "big.jpg"}),
    )]));
    server.push_reply(Reply::anthropic_text("Seen."));
    let ws = workspace();
    std::fs::write(
        ws.path().join("big.jpg"),
        encoded(4000, 3000, ImageFormat::Jpeg),
    )
    .unwrap();
    let cfg = config(
        ws.path(),
        "anthropic",
        &server.anthropic_url(),
        ", supports_vision: true",
    );
    let out = run_with(&cfg, ws.path(), &[], "look at big.jpg")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (mime, img) = anthropic_result_image(&server.requests()[1].body);
    assert_eq!(mime, "image/jpeg");
    assert_eq!((img.width(), img.height()), (2048, 1536));
    assert_no_image("the events", &out.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_without_vision_gets_no_view_image_and_refuses_image_with_78() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("ok"));
    let ws = workspace();
    std::fs::write(ws.path().join("a.png"), encoded(4, 4, ImageFormat::Png)).unwrap();
    let cfg = config(ws.path(), "openai", &server.url(), "");
    let out = run_with(&cfg, ws.path(), &[], "hi").json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let body = server.last_request().unwrap().body.to_string();
    assert!(!body.contains("view_image"), "{body}");

    let a = ws.path().join("a.png");
    let out = run_with(&cfg, ws.path(), &["--image", a.to_str().unwrap()], "hi")
        .output()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("'mock'"), "{}", out.stderr);
    assert!(out.stderr.contains("supports_vision"), "{}", out.stderr);
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_or_non_image_file_is_a_usage_error_naming_it() {
    let ws = workspace();
    std::fs::write(ws.path().join("notes.txt"), "not an image").unwrap();
    // A usage error wins over the configuration: no model is even needed.
    let cfg = ws.path().join("none.yaml");
    std::fs::write(&cfg, "models: []\n").unwrap();
    for (file, says) in [
        ("notes.txt", "not a PNG, JPEG, GIF or WebP image (text)"),
        ("missing.png", "No such file"),
    ] {
        let out = run_with(&cfg, ws.path(), &["--image", file], "hi")
            .cwd(ws.path())
            .output()
            .await;
        assert_eq!(out.code, 2, "{file}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("--image {file}")),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert!(out.stdout.is_empty());
        assert_no_panic(&out);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replay_model_counts_as_seeing() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.gif"), encoded(4, 4, ImageFormat::Gif)).unwrap();
    let c = cassette(
        ws.path(),
        json!({"version": 1, "lead": [
            {"tool_calls": [{"id": "c1", "name": "view_image", "arguments": {"image_path": "a.gif"}}]},
            {"text": "a small picture"}
        ]}),
    );
    let model = format!("replay:{}", c.display());
    let out = deerflow([
        "run",
        "--json",
        "-m",
        &model,
        "--image",
        "a.gif",
        "-C",
        ".",
        "what is it?",
    ])
    .cwd(ws.path())
    .json()
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.first("tool_result")["output"],
        "Image read: a.gif (4x4)"
    );
    assert_eq!(out.completed()["final_message"], "a small picture");
}

/// `--image` with `--each`: every item's task message carries the image (§14), and a
/// model without vision is refused before any event.
#[tokio::test(flavor = "multi_thread")]
async fn each_item_gets_the_images_and_a_blind_item_model_is_refused() {
    let server = MockServer::start().await;
    server.push_reply(Reply::text("one"));
    server.push_reply(Reply::text("two"));
    let ws = workspace();
    let png = encoded(10, 6, ImageFormat::Png);
    std::fs::write(ws.path().join("task.png"), &png).unwrap();
    std::fs::write(ws.path().join("items.txt"), "a\nb\n").unwrap();
    let items = ws.path().join("items.txt");
    let image = ws.path().join("task.png");
    let args = [
        "--each",
        items.to_str().unwrap(),
        "--image",
        image.to_str().unwrap(),
        "--max-concurrent",
        "1",
    ];
    let seeing = config(
        ws.path(),
        "openai",
        &server.url(),
        ", supports_vision: true",
    );
    let out = run_with(&seeing, ws.path(), &args, "describe {{item}}")
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let url = format!("data:image/png;base64,{}", b64(&png));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        let messages = r.body["messages"].as_array().unwrap();
        let with_image =
            json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]});
        assert!(messages.contains(&with_image), "{messages:?}");
    }
    assert_no_image("the events", &out.stdout);

    let blind = config(ws.path(), "openai", &server.url(), "");
    let out = run_with(&blind, ws.path(), &args, "describe {{item}}")
        .output()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains("--image: model"), "{}", out.stderr);
    assert_eq!(server.requests().len(), 2, "no call for a refused run");
}
