//! DeerFlow compatibility: which keys deerflow uses (everything else is ignored and named),
//! and how DeerFlow's `use:` class paths map to deerflow's providers.

use serde_yaml_ng::Value;

use super::keypath::KeyPath;
use super::providers;
use super::schema::ProviderKind;

/// The shape of the keys deerflow reads. Keys outside it are stripped before decoding.
enum Shape {
    /// Any value; decoding checks its type.
    Leaf,
    /// A mapping with a fixed set of keys.
    Map(&'static [(&'static str, Shape)]),
    /// A list of the inner shape.
    List(&'static Shape),
    /// A mapping with free keys (agent names) of the inner shape.
    Dict(&'static Shape),
}

use Shape::{Dict, Leaf, List, Map};

static MODEL: Shape = Map(&[
    ("name", Leaf),
    ("use", Leaf),
    ("model", Leaf),
    ("api_key", Leaf),
    ("base_url", Leaf),
    ("api_base", Leaf),
    ("cassette", Leaf),
    ("max_tokens", Leaf),
    ("temperature", Leaf),
    ("timeout", Leaf),
    ("request_timeout", Leaf),
    ("default_request_timeout", Leaf),
    ("stream_idle_timeout", Leaf),
    ("max_retries", Leaf),
    ("price", PRICE),
    ("pricing", PRICE),
]);

// A const (not a static) so MODEL can embed it twice, as `price` and as `pricing`.
const PRICE: Shape = Map(&[
    ("input_per_mtok", Leaf),
    ("output_per_mtok", Leaf),
    ("input_cache_hit_per_mtok", Leaf),
    ("input_per_million", Leaf),
    ("output_per_million", Leaf),
    ("input_cache_hit_per_million", Leaf),
]);

static AGENT_OVERRIDE: Shape = Map(&[
    ("timeout_seconds", Leaf),
    ("max_turns", Leaf),
    ("model", Leaf),
    ("skills", Leaf),
]);

static CUSTOM_AGENT: Shape = Map(&[
    ("description", Leaf),
    ("system_prompt", Leaf),
    ("tools", Leaf),
    ("disallowed_tools", Leaf),
    ("skills", Leaf),
    ("model", Leaf),
    ("max_turns", Leaf),
    ("timeout_seconds", Leaf),
]);

static ROOT: Shape = Map(&[
    ("models", List(&MODEL)),
    (
        "subagents",
        Map(&[
            ("enabled", Leaf),
            ("max_concurrent", Leaf),
            ("max_total_per_run", Leaf),
            ("timeout_seconds", Leaf),
            ("max_turns", Leaf),
            ("agents", Dict(&AGENT_OVERRIDE)),
            ("custom_agents", Dict(&CUSTOM_AGENT)),
        ]),
    ),
    (
        "sandbox",
        Map(&[
            ("use", Leaf),
            ("allow_host_bash", Leaf),
            ("bash_command_timeout", Leaf),
            ("bash_output_max_chars", Leaf),
            ("read_file_output_max_chars", Leaf),
            ("ls_output_max_chars", Leaf),
        ]),
    ),
    ("skills", Map(&[("path", Leaf)])),
    (
        "loop_detection",
        Map(&[
            ("enabled", Leaf),
            ("warn_threshold", Leaf),
            ("hard_limit", Leaf),
            ("window_size", Leaf),
            ("tool_freq_warn", Leaf),
            ("tool_freq_hard_limit", Leaf),
        ]),
    ),
    (
        "token_budget",
        Map(&[("enabled", Leaf), ("max_tokens", Leaf)]),
    ),
]);

/// Removes every key deerflow does not use (recording its dotted path in `ignored`) and
/// every `null` value of a used key (null means "default", as if absent). Runs before
/// `$VAR` expansion, so variables inside ignored sections are never read.
pub fn strip_ignored(root: &mut Value, ignored: &mut Vec<String>) {
    strip(root, &ROOT, &KeyPath::root(), ignored);
}

fn strip(value: &mut Value, shape: &Shape, path: &KeyPath, ignored: &mut Vec<String>) {
    match (shape, value) {
        (Map(keys), Value::Mapping(map)) => {
            // One pass in document order, so the ignored list reads like the file.
            let mut dropped = Vec::new();
            for (k, v) in map.iter_mut() {
                match k
                    .as_str()
                    .and_then(|k| keys.iter().find(|(name, _)| *name == k))
                {
                    Some(_) if v.is_null() => dropped.push(k.clone()),
                    Some((name, inner)) => strip(v, inner, &path.key(name), ignored),
                    None => {
                        ignored.push(path.key(&key_text(k)).to_string());
                        dropped.push(k.clone());
                    }
                }
            }
            map.retain(|k, _| !dropped.contains(k));
        }
        (List(inner), Value::Sequence(items)) => {
            for (i, item) in items.iter_mut().enumerate() {
                strip(item, inner, &path.index(i), ignored);
            }
        }
        (Dict(inner), Value::Mapping(map)) => {
            map.retain(|_, v| !v.is_null());
            for (k, v) in map.iter_mut() {
                strip(v, inner, &path.key(&key_text(k)), ignored);
            }
        }
        // A leaf, or a value of the wrong kind: decoding reports the type error.
        _ => {}
    }
}

fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => serde_yaml_ng::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

/// Maps a model's `use:` to a provider. Plain names are deerflow's own; anything with a
/// `:` or `.` is a DeerFlow (LangChain) class path.
pub fn provider_of(use_: &str) -> ProviderKind {
    let trimmed = use_.trim();
    if let Some(row) = providers::by_name(&trimmed.to_ascii_lowercase()) {
        return row.kind.clone();
    }
    let (module, class) = trimmed.rsplit_once(':').unwrap_or(("", trimmed));
    if is_gemini_native(module, class) {
        ProviderKind::Unsupported(trimmed.to_string())
    } else if class.contains("Anthropic") {
        ProviderKind::Anthropic
    } else {
        // ChatOpenAI, ChatDeepSeek, DeerFlow's patched classes, vLLM, Ollama, … all speak
        // (or are served through) the OpenAI chat-completions API.
        ProviderKind::OpenAi
    }
}

/// Gemini's native SDK classes speak Google's own API, which deerflow has no client for.
fn is_gemini_native(module: &str, class: &str) -> bool {
    module.starts_with("langchain_google_genai")
        || module.starts_with("langchain_google_vertexai")
        || class.contains("GoogleGenerativeAI")
        || class.contains("VertexAI")
}

/// Ollama's native class points at the server root; its OpenAI-compatible API is under `/v1`.
pub fn is_ollama(use_: &str) -> bool {
    use_.trim().ends_with(":ChatOllama")
}

/// DeerFlow's local sandbox provider is deerflow's only sandbox.
pub fn normalize_sandbox(use_: &str) -> Option<&'static str> {
    match use_.trim() {
        "local" | "deerflow.sandbox.local:LocalSandboxProvider" => Some("local"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_path_table() {
        let o = ProviderKind::OpenAi;
        let a = ProviderKind::Anthropic;
        let cases = [
            ("openai", o.clone()),
            ("OpenAI", o.clone()),
            ("anthropic", a.clone()),
            ("replay", ProviderKind::Replay),
            ("langchain_openai:ChatOpenAI", o.clone()),
            ("langchain_deepseek:ChatDeepSeek", o.clone()),
            (
                "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
                o.clone(),
            ),
            (
                "deerflow.models.patched_openai:PatchedChatOpenAI",
                o.clone(),
            ),
            ("deerflow.models.vllm_provider:VllmChatModel", o.clone()),
            ("langchain_ollama:ChatOllama", o.clone()),
            ("langchain_anthropic:ChatAnthropic", a.clone()),
            ("my.pkg:PatchedChatAnthropic", a.clone()),
            ("something:Else", o.clone()),
            (
                "langchain_google_genai:ChatGoogleGenerativeAI",
                ProviderKind::Unsupported("langchain_google_genai:ChatGoogleGenerativeAI".into()),
            ),
        ];
        for (use_, want) in cases {
            assert_eq!(provider_of(use_), want, "{use_}");
        }
        assert!(is_ollama("langchain_ollama:ChatOllama"));
        assert!(!is_ollama("openai"));
    }

    #[test]
    fn strips_unknown_keys_and_nulls() {
        let mut v: Value = serde_yaml_ng::from_str(
            "memory: {enabled: true, key: $SECRET}\nmodels:\n  - {name: a, display_name: A, pricing: {currency: CNY, input_per_million: 1, output_per_million: 2}}\n\
             token_budget: {enabled: false, max_input_tokens: null}\nsubagents: {max_turns: null, agents: {bash: {token_budget: {}}}}\n",
        )
        .unwrap();
        let mut ignored = Vec::new();
        strip_ignored(&mut v, &mut ignored);
        assert_eq!(
            ignored,
            [
                "memory",
                "models[0].display_name",
                "models[0].pricing.currency",
                "token_budget.max_input_tokens",
                "subagents.agents.bash.token_budget",
            ]
        );
        assert!(v.get("memory").is_none());
        assert!(v["subagents"].get("max_turns").is_none());
        assert_eq!(
            v["models"][0]["pricing"]["input_per_million"],
            Value::from(1)
        );
    }

    #[test]
    fn sandbox_names() {
        assert_eq!(normalize_sandbox("local"), Some("local"));
        assert_eq!(
            normalize_sandbox("deerflow.sandbox.local:LocalSandboxProvider"),
            Some("local")
        );
        assert_eq!(
            normalize_sandbox("deerflow.community.aio_sandbox:AioSandboxProvider"),
            None
        );
    }
}
