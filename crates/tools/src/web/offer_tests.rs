use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::{ToolContext, ToolOutput};
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};

/// A served backend standing in for the real ones: it keeps the entries it was built from.
struct Fake(String);

impl Tool for Fake {
    fn name(&self) -> &str {
        &self.0
    }
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.0.clone(),
            description: "fake".into(),
            parameters: json!({"type": "object"}),
        }
    }
    fn call<'a>(&'a self, _: &'a ToolCall, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok("fake") })
    }
}

/// Serves the `use:`s that contain one of `served`, recording every entry it was asked for.
struct Backends {
    served: Vec<&'static str>,
    seen: Mutex<Vec<WebEntry>>,
}

impl Backends {
    fn new(served: &[&'static str]) -> Self {
        Self {
            served: served.to_vec(),
            seen: Mutex::default(),
        }
    }

    fn offer(&self, yaml: &str, web: bool, env: &Env) -> Result<WebTools, Vec<String>> {
        let entries: Vec<ToolEntry> = serde_yaml_ng::from_str(yaml).unwrap();
        offer_with(&entries, web, env, &|e: &WebEntry| {
            self.seen.lock().unwrap().push(e.clone());
            self.served
                .iter()
                .any(|s| e.use_path.contains(s))
                .then(|| Arc::new(Fake(e.name.clone())) as Arc<dyn Tool>)
        })
    }

    fn seen(&self, name: &str) -> WebEntry {
        let seen = self.seen.lock().unwrap();
        seen.iter().find(|e| e.name == name).cloned().unwrap()
    }
}

fn names(w: &WebTools) -> Vec<&str> {
    w.tools.iter().map(|t| t.name()).collect()
}

/// The tools section of DeerFlow's example config, as it is.
fn example_tools() -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/deerflow/config.example.yaml"
    ))
    .unwrap();
    let root: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    serde_yaml_ng::to_string(&root["tools"]).unwrap()
}

#[test]
fn deerflow_s_example_offers_its_three_web_tools_and_nothing_is_ignored() {
    let b = Backends::new(&["ddg_search", "jina_ai", "image_search"]);
    let w = b.offer(&example_tools(), false, &Env::empty()).unwrap();
    assert_eq!(names(&w), ["web_search", "web_fetch", "image_search"]);
    assert!(w.unavailable.is_empty() && w.notes.is_empty());
    assert!(w.ignored.is_empty(), "{:?}", w.ignored);
    assert_eq!(w.glob_max_results, Some(200));
    assert_eq!(w.grep_max_results, Some(100));
    let search = b.seen("web_search");
    assert_eq!(
        search.use_path,
        "deerflow.community.ddg_search.tools:web_search_tool"
    );
    assert_eq!(search.max_results(), 5);
    let fetch = b.seen("web_fetch");
    assert_eq!(fetch.timeout, std::time::Duration::from_secs(10));
    assert!(!fetch.allow_private_addresses);
}

#[test]
fn backend_keys_reach_the_entry_with_their_variables_read() {
    let env = Env::from_pairs([("MY_TAVILY", "tvly-1"), ("C4A", "tok-2")]);
    let b = Backends::new(&["tavily", "crawl4ai"]);
    let w = b
        .offer(
            "- {name: web_search, group: web, use: x.tavily.tools:web_search_tool, api_key: $MY_TAVILY,\n   \
               max_results: 8, base_url: 'http://127.0.0.1:9', timeout: 2.5, proxy: 'http://p:3128', trust_env: true}\n\
             - {name: web_fetch, use: x.crawl4ai.tools:web_fetch_tool, token: $C4A, allow_private_addresses: true}\n",
            false,
            &env,
        )
        .unwrap();
    assert_eq!(names(&w), ["web_search", "web_fetch"]);
    let s = b.seen("web_search");
    assert_eq!(s.api_key.as_deref(), Some("tvly-1"));
    assert_eq!(s.max_results, Some(8));
    assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:9"));
    assert_eq!(s.timeout, std::time::Duration::from_millis(2500));
    assert_eq!(s.proxy.as_deref(), Some("http://p:3128"));
    assert!(s.trust_env);
    let f = b.seen("web_fetch");
    assert_eq!(f.extra.get("token"), Some(&json!("tok-2")));
    assert!(f.allow_private_addresses);
    // Where the keys came from, and the services' own variables, are bash's to lose.
    for var in ["MY_TAVILY", "C4A", "TAVILY_API_KEY", "JINA_API_KEY"] {
        assert!(w.secrets.iter().any(|s| s == var), "{var}: {:?}", w.secrets);
    }
}

#[test]
fn an_unservable_use_is_not_offered_and_its_variables_are_never_read() {
    let b = Backends::new(&["tavily"]);
    let w = b
        .offer(
            "- {name: web_search, use: deerflow.community.infoquest.tools:web_search_tool, \
               api_key: $UNSET_KEY, search_time_range: 10, timeout: -1}\n\
             - {name: browser_navigate, use: deerflow.community.browser_automation.tools:browser_navigate_tool}\n",
            false,
            &Env::empty(),
        )
        .unwrap();
    assert!(w.tools.is_empty());
    assert_eq!(
        w.unavailable,
        [
            Unavailable {
                tool: "web_search".into(),
                class: "deerflow.community.infoquest.tools:web_search_tool".into(),
                entry: Some(0),
            },
            Unavailable {
                tool: "browser_navigate".into(),
                class: "deerflow.community.browser_automation.tools:browser_navigate_tool".into(),
                entry: Some(1),
            }
        ]
    );
    assert_eq!(
        w.unavailable[0].message(),
        "tool 'web_search' is not offered: deerflow cannot serve its use: \
         deerflow.community.infoquest.tools:web_search_tool"
    );
    assert!(w.ignored.is_empty());
}

#[test]
fn an_offered_entry_s_unset_variable_and_bad_values_are_configuration_errors() {
    let b = Backends::new(&["tavily", "jina"]);
    let err = b
        .offer(
            "- {name: web_search, use: x.tavily:web_search_tool, api_key: $UNSET_KEY, max_results: 0}\n\
             - {name: web_fetch, use: x.jina_ai:web_fetch_tool, base_url: 'ftp://h', timeout: 0,\n   \
               api_key: '${JINA}'}\n",
            false,
            &Env::empty(),
        )
        .err()
        .unwrap();
    assert_eq!(
        err,
        [
            "tools[0].api_key: $UNSET_KEY is not set (set it, or remove the 'web_search' entry)",
            "tools[0].max_results: expected at least 1, found 0",
            &format!("tools[1].api_key: {WHOLE_REFERENCE}"),
            "tools[1].base_url: 'ftp://h' is not an http(s) URL",
            "tools[1].timeout: expected a positive number of seconds, found 0",
        ]
    );
}

#[test]
fn a_key_with_a_line_break_is_an_error_that_never_shows_it() {
    let env = Env::from_pairs([("K", "secret-123\r\n")]);
    let b = Backends::new(&["tavily"]);
    let err = b
        .offer(
            "- {name: web_search, use: x.tavily:web_search_tool, api_key: $K}\n",
            false,
            &env,
        )
        .err()
        .unwrap();
    assert_eq!(
        err,
        ["tools[0].api_key contains control characters (a line break?); remove them"]
    );
}

#[test]
fn built_in_entries_keep_only_their_own_keys() {
    let b = Backends::new(&["ddg"]);
    let w = b
        .offer(
            "- {name: grep, use: deerflow.sandbox.tools:grep_tool, max_results: 50, api_key: $NOPE}\n\
             - {name: ls, use: deerflow.sandbox.tools:ls_tool, max_results: 5}\n\
             - {name: web_fetch, use: x.ddg:web_fetch_tool, max_results: 3, timeout: 5}\n",
            false,
            &Env::empty(),
        )
        .unwrap();
    assert_eq!(w.grep_max_results, Some(50));
    assert_eq!(w.glob_max_results, None);
    assert_eq!(
        w.ignored,
        [
            "tools[0].api_key",
            "tools[1].max_results",
            "tools[2].max_results"
        ]
    );
    // A built-in is never built by a web backend.
    assert_eq!(b.seen.lock().unwrap().len(), 1);
}

#[test]
fn a_second_entry_for_an_offered_tool_is_set_aside() {
    let b = Backends::new(&["jina", "exa"]);
    let w = b
        .offer(
            "- {name: web_fetch, use: x.jina_ai:web_fetch_tool}\n\
             - {name: web_fetch, use: x.exa:web_fetch_tool}\n",
            false,
            &Env::empty(),
        )
        .unwrap();
    assert_eq!(names(&w), ["web_fetch"]);
    assert_eq!(
        w.notes,
        ["tools[1]: a second entry for 'web_fetch' is ignored; tools[0] is offered"]
    );
}

#[test]
fn web_offers_direct_fetch_and_the_first_search_backend_with_a_key() {
    let b = Backends::new(&["direct", "ddg_search", "serper", "brave"]);
    let w = b.offer("[]", true, &Env::empty()).unwrap();
    assert_eq!(names(&w), ["web_fetch", "web_search"]);
    assert_eq!(b.seen("web_fetch").use_path, "direct");
    assert_eq!(b.seen("web_search").use_path, DUCKDUCKGO);

    let env = Env::from_pairs([("SERPER_API_KEY", "s-1"), ("BRAVE_SEARCH_API_KEY", "b-1")]);
    let b = Backends::new(&["direct", "ddg_search", "serper", "brave"]);
    b.offer("[]", true, &env).unwrap();
    let s = b.seen("web_search");
    assert_eq!(s.use_path, "deerflow.community.brave.tools:web_search_tool");
    assert_eq!(s.api_key.as_deref(), Some("b-1"));
}

#[test]
fn web_leaves_a_configured_tool_to_its_entry_offered_or_not() {
    let b = Backends::new(&["direct", "ddg_search", "tavily"]);
    let w = b
        .offer(
            "- {name: web_search, use: x.tavily:web_search_tool}\n",
            true,
            &Env::empty(),
        )
        .unwrap();
    assert_eq!(names(&w), ["web_search", "web_fetch"]);
    assert!(b.seen("web_search").use_path.contains("tavily"));

    let b = Backends::new(&["ddg_search"]);
    let w = b
        .offer(
            "- {name: web_fetch, use: x.infoquest:web_fetch_tool}\n",
            true,
            &Env::empty(),
        )
        .unwrap();
    assert_eq!(names(&w), ["web_search"]);
    assert_eq!(w.unavailable.len(), 1);
    assert_eq!(w.unavailable[0].class, "x.infoquest:web_fetch_tool");
}

#[test]
fn without_backends_web_tools_are_reported_unavailable() {
    let entries: Vec<ToolEntry> =
        serde_yaml_ng::from_str("- {name: web_search, use: x.nothing:web_search_tool}").unwrap();
    let w = offer_with(&entries, true, &Env::empty(), &|_: &WebEntry| None).unwrap();
    let tools: Vec<&str> = w.unavailable.iter().map(|u| u.tool.as_str()).collect();
    assert_eq!(tools, ["web_search", "web_fetch"]);
}
