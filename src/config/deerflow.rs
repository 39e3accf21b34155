//! DeerFlow compatibility: how DeerFlow's `use:` class paths map to deerflow's providers and
//! sandboxes. (Which of DeerFlow's keys deerflow reads is the serde model's to say:
//! `schema.rs`, `ignored.rs`.)

use super::providers;
use super::schema::ProviderKind;

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
