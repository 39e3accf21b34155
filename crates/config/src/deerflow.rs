//! DeerFlow compatibility: how DeerFlow's `use:` class paths map to deerflow's providers and
//! sandboxes. (Which of DeerFlow's keys deerflow reads is the serde model's to say:
//! `schema.rs`, `ignored.rs`.)

use super::providers::{DeerFlowClasses, ProviderInfo, Providers};

/// Maps a model's `use:` to a row of the provider table. Plain names are the rows' own
/// (case-insensitive); anything else is a DeerFlow (LangChain) class path, which goes to
/// the row whose [`DeerFlowClasses`] claim it, else to the `Rest` row. Google's SDK classes
/// go only to a row that claims them (Gemini's native API is no OpenAI-compatible one), and
/// Vertex AI's to none. `None`: no row serves it, an error only when the model is used.
pub fn provider_of(use_: &str, providers: &Providers) -> Option<&'static ProviderInfo> {
    let trimmed = use_.trim();
    if let Some(row) = providers.by_name(&trimmed.to_ascii_lowercase()) {
        return Some(row);
    }
    let (module, class) = trimmed.rsplit_once(':').unwrap_or(("", trimmed));
    if is_vertex(module, class) {
        return None;
    }
    let claimed = providers.iter().find(|p| match p.deerflow_classes {
        DeerFlowClasses::NameContains(part) => class.contains(part),
        DeerFlowClasses::None | DeerFlowClasses::Rest => false,
    });
    if is_gemini_native(module, class) {
        return claimed;
    }
    claimed.or_else(|| {
        providers
            .iter()
            .find(|p| p.deerflow_classes == DeerFlowClasses::Rest)
    })
}

/// Why a `use:` that [`provider_of`] maps to no row cannot be served, and what to do.
pub fn unsupported(use_: &str, providers: &Providers) -> String {
    let trimmed = use_.trim();
    let (module, class) = trimmed.rsplit_once(':').unwrap_or(("", trimmed));
    if is_vertex(module, class) {
        return format!(
            "use: {trimmed} is not supported (deerflow has no client for Vertex AI); use \
             use: gemini with a Gemini API key, or an OpenAI-compatible endpoint with use: \
             openai and base_url"
        );
    }
    if is_gemini_native(module, class) {
        return format!(
            "use: {trimmed} is not supported (deerflow has no client for Gemini's native \
             API); point it at an OpenAI-compatible endpoint with use: openai and base_url"
        );
    }
    let names: Vec<&str> = providers.iter().map(|p| p.name).collect();
    format!(
        "use: {trimmed} is not supported (no provider serves it); use one of: {}",
        names.join(", ")
    )
}

/// The Gemini API's SDK classes (`langchain_google_genai`) speak Google's own API.
fn is_gemini_native(module: &str, class: &str) -> bool {
    module.starts_with("langchain_google_genai") || class.contains("GoogleGenerativeAI")
}

/// Vertex AI's classes speak Google Cloud's API (OAuth, projects, regions), whatever the
/// model behind them.
fn is_vertex(module: &str, class: &str) -> bool {
    module.starts_with("langchain_google_vertexai") || class.contains("VertexAI")
}

/// Ollama's native class points at the server root; its OpenAI-compatible API is under `/v1`.
pub fn is_ollama(use_: &str) -> bool {
    use_.trim().ends_with(":ChatOllama")
}

/// Where a DeerFlow class that is served by another provider's row talks to by default: its
/// own service, key and variables, as its LangChain package has them. Without this its
/// entries would get the row's (OpenAI's) URL and key, and send the service's key to OpenAI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassEndpoint {
    pub key_var: &'static str,
    pub url_var: &'static str,
    pub default_url: &'static str,
    /// A base URL on this host needs a key, like the provider rows' hosted APIs.
    pub hosted: &'static str,
}

/// langchain_deepseek's `ChatDeepSeek` (and its subclasses, DeerFlow's
/// `PatchedChatDeepSeek`) reads `$DEEPSEEK_API_KEY` and `$DEEPSEEK_API_BASE`, default
/// DeepSeek's API.
const DEEPSEEK: ClassEndpoint = ClassEndpoint {
    key_var: "DEEPSEEK_API_KEY",
    url_var: "DEEPSEEK_API_BASE",
    default_url: "https://api.deepseek.com/v1",
    hosted: "api.deepseek.com",
};

/// The class's own default endpoint, for a class path that has one.
pub fn class_endpoint(use_: &str) -> Option<ClassEndpoint> {
    let (module, class) = use_.trim().rsplit_once(':')?;
    (module.starts_with("langchain_deepseek") || class.contains("DeepSeek")).then_some(DEEPSEEK)
}

#[cfg(test)]
mod tests {
    use super::super::providers::testing;
    use super::*;

    #[test]
    fn class_path_table() {
        let providers = testing::providers();
        let cases = [
            ("openai", Some("openai")),
            ("OpenAI", Some("openai")),
            ("anthropic", Some("anthropic")),
            ("replay", Some("replay")),
            ("langchain_openai:ChatOpenAI", Some("openai")),
            ("langchain_deepseek:ChatDeepSeek", Some("openai")),
            (
                "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
                Some("openai"),
            ),
            (
                "deerflow.models.patched_openai:PatchedChatOpenAI",
                Some("openai"),
            ),
            (
                "deerflow.models.vllm_provider:VllmChatModel",
                Some("openai"),
            ),
            ("langchain_ollama:ChatOllama", Some("openai")),
            ("langchain_anthropic:ChatAnthropic", Some("anthropic")),
            ("my.pkg:PatchedChatAnthropic", Some("anthropic")),
            ("something:Else", Some("openai")),
            ("langchain_google_genai:ChatGoogleGenerativeAI", None),
            // Google's SDKs speak Google's API whatever the class is named.
            (
                "langchain_google_vertexai.model_garden:ChatAnthropicVertex",
                None,
            ),
        ];
        for (use_, want) in cases {
            assert_eq!(
                provider_of(use_, &providers).map(|p| p.name),
                want,
                "{use_}"
            );
        }
        assert!(is_ollama("langchain_ollama:ChatOllama"));
        assert!(!is_ollama("openai"));
    }

    #[test]
    fn deepseek_classes_have_deepseeks_endpoint() {
        for use_ in [
            "langchain_deepseek:ChatDeepSeek",
            "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
        ] {
            let c = class_endpoint(use_).unwrap_or_else(|| panic!("{use_}"));
            assert_eq!(
                (c.key_var, c.url_var, c.default_url),
                (
                    "DEEPSEEK_API_KEY",
                    "DEEPSEEK_API_BASE",
                    "https://api.deepseek.com/v1"
                )
            );
        }
        for use_ in [
            "openai",
            "deepseek",
            "langchain_openai:ChatOpenAI",
            "deerflow.models.patched_mimo:PatchedChatMiMo",
        ] {
            assert_eq!(class_endpoint(use_), None, "{use_}");
        }
    }

    #[test]
    fn classes_go_only_where_a_row_claims_them() {
        // Without a `Rest` row, an unclaimed class has no provider.
        let no_rest = Providers::new(&testing::ROWS[1..]);
        assert_eq!(provider_of("langchain_openai:ChatOpenAI", &no_rest), None);
        assert_eq!(
            provider_of("x:ChatAnthropic", &no_rest).map(|p| p.name),
            Some("anthropic")
        );
        assert_eq!(
            unsupported("langchain_openai:ChatOpenAI", &no_rest),
            "use: langchain_openai:ChatOpenAI is not supported (no provider serves it); \
             use one of: anthropic, replay"
        );
        assert_eq!(
            unsupported(" langchain_google_genai:ChatGoogleGenerativeAI", &no_rest),
            "use: langchain_google_genai:ChatGoogleGenerativeAI is not supported (deerflow \
             has no client for Gemini's native API); point it at an OpenAI-compatible \
             endpoint with use: openai and base_url"
        );
    }

    #[test]
    fn google_classes_go_only_to_a_row_that_claims_them() {
        static GEMINI: ProviderInfo = ProviderInfo {
            name: "gemini",
            example_model: Some("gemini-2.5-flash"),
            endpoint: None,
            deerflow_classes: DeerFlowClasses::NameContains("GoogleGenerativeAI"),
        };
        let with = Providers::new(testing::ROWS.iter().chain([&GEMINI]));
        let genai = "langchain_google_genai:ChatGoogleGenerativeAI";
        assert_eq!(provider_of(genai, &with).map(|p| p.name), Some("gemini"));
        // Without such a row it is unserved, never the OpenAI-compatible `Rest` row.
        assert_eq!(provider_of(genai, &testing::providers()), None);
        for vertex in [
            "langchain_google_vertexai:ChatVertexAI",
            "langchain_google_vertexai.model_garden:ChatAnthropicVertex",
        ] {
            assert_eq!(provider_of(vertex, &with), None, "{vertex}");
            assert!(
                unsupported(vertex, &with).contains("no client for Vertex AI"),
                "{vertex}"
            );
        }
    }
}
