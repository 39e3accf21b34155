//! Images on each of the four wires (contract §14): where a `view_image` result's image and
//! an `--image` of the task go in the request body.

use std::sync::Arc;

use image::ImageFormat;
use serde_json::{json, Value};

use crate::image::testing::{encoded, test_png};
use crate::image::Image;
use crate::{AgentId, ChatRequest, HttpSettings, Message, ToolCall};

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        system: "be brief".into(),
        messages: Arc::new(messages),
        tools: Arc::from([]),
        tool_choice_none: false,
        agent: AgentId::Lead,
        turn: 1,
        output_schema: None,
        purpose: Default::default(),
        lineage: None,
    }
}

/// The task, a response calling `view_image` and `read_file`, both results, then the image
/// the first showed.
fn viewed(image: &Image) -> ChatRequest {
    request(vec![
        Message::User("look".into()),
        Message::Assistant {
            text: None,
            tool_calls: vec![
                ToolCall::new("c1", "view_image", json!({"image_path": "a.png"})),
                ToolCall::new("c2", "read_file", json!({"path": "b.txt"})),
            ],
            reasoning: Default::default(),
        },
        Message::Tool {
            call_id: "c1".into(),
            name: "view_image".into(),
            content: "Image read: a.png (3x2)".into(),
        },
        Message::Tool {
            call_id: "c2".into(),
            name: "read_file".into(),
            content: "b".into(),
        },
        Message::Images {
            call_id: Some("c1".into()),
            images: vec![image.clone()],
        },
    ])
}

/// The task with an attached image (`--image`).
fn attached(image: &Image) -> ChatRequest {
    request(vec![
        Message::User("what is this?".into()),
        Message::Images {
            call_id: None,
            images: vec![image.clone()],
        },
    ])
}

fn settings() -> HttpSettings {
    let mut s = HttpSettings::new("m", "http://127.0.0.1:1/v1", None);
    s.prompt_cache = false;
    s
}

#[test]
fn openai_chat_sends_a_user_message_of_image_url_parts_after_the_results() {
    use super::openai_chat::request_body;
    let img = test_png(3, 2);
    let url = format!("data:image/png;base64,{}", img.base64());
    let messages = &request_body(&settings(), &viewed(&img))["messages"];
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(messages[3]["content"], "Image read: a.png (3x2)");
    assert_eq!(
        messages[5],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]})
    );
    let messages = &request_body(&settings(), &attached(&img))["messages"];
    assert_eq!(messages[1]["content"], "what is this?");
    assert_eq!(messages[2]["content"][0]["image_url"]["url"], json!(url));
}

#[test]
fn responses_sends_input_image_after_the_call_outputs() {
    use super::openai_responses::request_body;
    let img = test_png(3, 2);
    let input = &request_body(&settings(), &viewed(&img))["input"];
    let types: Vec<&str> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "user",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "user"
        ]
    );
    assert_eq!(
        input[5],
        json!({"role": "user", "content": [
            {"type": "input_image", "image_url": format!("data:image/png;base64,{}", img.base64())}
        ]})
    );
}

#[test]
fn anthropic_puts_the_image_inside_its_tool_result() {
    use super::anthropic::request_body;
    let img = test_png(3, 2);
    let image_block = json!({"type": "image", "source":
        {"type": "base64", "media_type": "image/png", "data": img.base64()}});
    let messages = &request_body(&settings(), &viewed(&img))["messages"];
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": [
                {"type": "text", "text": "Image read: a.png (3x2)"},
                image_block,
            ]},
            {"type": "tool_result", "tool_use_id": "c2", "content": "b"},
        ]})
    );
    let messages = &request_body(&settings(), &attached(&img))["messages"];
    assert_eq!(
        messages,
        &json!([{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            image_block,
        ]}])
    );
    // With the prompt cache on, the latest block (the image's result) carries the mark.
    let mut cached = settings();
    cached.prompt_cache = true;
    let body = request_body(&cached, &viewed(&img));
    assert_eq!(
        body["messages"][2]["content"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

fn gemini_user_parts(req: &ChatRequest) -> Value {
    let contents = super::gemini::request_body(&settings(), req)["contents"].clone();
    contents.as_array().unwrap().last().unwrap()["parts"].clone()
}

#[test]
fn gemini_sends_inline_data_in_the_user_turn() {
    let img = test_png(3, 2);
    let parts = gemini_user_parts(&viewed(&img));
    assert_eq!(parts[0]["functionResponse"]["name"], "view_image");
    assert_eq!(parts[1]["functionResponse"]["name"], "read_file");
    assert_eq!(
        parts[2],
        json!({"inline_data": {"mime_type": "image/png", "data": img.base64()}})
    );
    let parts = gemini_user_parts(&attached(&img));
    assert_eq!(parts[0], json!({"text": "what is this?"}));
    assert_eq!(parts[1]["inline_data"]["mime_type"], "image/png");
}

#[test]
fn gemini_gets_a_gif_as_png_and_the_others_as_gif() {
    let gif = Image::from_bytes(encoded(4, 3, ImageFormat::Gif)).unwrap();
    let parts = gemini_user_parts(&viewed(&gif));
    assert_eq!(parts[2]["inline_data"]["mime_type"], "image/png");
    let data = parts[2]["inline_data"]["data"].as_str().unwrap();
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(image::guess_format(&png).unwrap(), ImageFormat::Png);
    let anthropic = super::anthropic::request_body(&settings(), &viewed(&gif));
    let block = &anthropic["messages"][2]["content"][0]["content"][1];
    assert_eq!(block["source"]["media_type"], "image/gif");
    let chat = super::openai_chat::request_body(&settings(), &viewed(&gif));
    let url = chat["messages"][5]["content"][0]["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(url.starts_with("data:image/gif;base64,"), "{url}");
}
