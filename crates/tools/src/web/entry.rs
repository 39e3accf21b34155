//! One resolved `tools:` entry (contract §14): what a web tool's backend needs, read from the
//! config once so backends never see YAML.

use std::time::Duration;

/// A `tools:` entry naming a web tool, with its `$VAR`s expanded.
#[derive(Clone, PartialEq)]
pub struct WebEntry {
    /// The tool's name as offered to the model (`web_search`, `web_fetch`, `image_search`).
    pub name: String,
    /// DeerFlow's `use:` (`deerflow.community.tavily.tools:web_search_tool`), or `direct`.
    pub use_path: String,
    /// The service's address; `None` means the backend's documented default.
    pub base_url: Option<String>,
    /// A credential: never printed (see the `Debug` impl), never in events, logs or errors.
    pub api_key: Option<String>,
    /// The cap on results per call (`web_search`, `image_search`); `None` means 5.
    pub max_results: Option<usize>,
    /// Per request; 30 s unless the entry says otherwise.
    pub timeout: Duration,
    /// DeerFlow's key that lifts the network guard for this entry.
    pub allow_private_addresses: bool,
    /// A proxy URL the guarded requests go through (`proxy:`).
    pub proxy: Option<String>,
    /// Take the proxy from `HTTP(S)_PROXY`/`ALL_PROXY` (`trust_env: true`).
    pub trust_env: bool,
    /// Backend keys deerflow reads that are not above (Crawl4AI's `token`, …), already
    /// expanded; a key here is treated as a credential when its name says so.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl WebEntry {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    pub const DEFAULT_MAX_RESULTS: usize = 5;

    /// The entry `--web` offers for `name`, with the given `use:` and key.
    pub fn new(name: &str, use_path: &str) -> Self {
        Self {
            name: name.to_string(),
            use_path: use_path.to_string(),
            base_url: None,
            api_key: None,
            max_results: None,
            timeout: Self::DEFAULT_TIMEOUT,
            allow_private_addresses: false,
            proxy: None,
            trust_env: false,
            extra: serde_json::Map::new(),
        }
    }

    pub fn max_results(&self) -> usize {
        self.max_results.unwrap_or(Self::DEFAULT_MAX_RESULTS)
    }
}

/// Keys and tokens stay out of every rendering (a `{:?}` in a log or an error included).
impl std::fmt::Debug for WebEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebEntry")
            .field("name", &self.name)
            .field("use_path", &self.use_path)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_results", &self.max_results)
            .field("timeout", &self.timeout)
            .field("allow_private_addresses", &self.allow_private_addresses)
            .field("proxy", &self.proxy.as_ref().map(|_| "<set>"))
            .field("trust_env", &self.trust_env)
            .field("extra", &self.extra.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_key() {
        let mut e = WebEntry::new(
            "web_search",
            "deerflow.community.tavily.tools:web_search_tool",
        );
        e.api_key = Some("tvly-SECRET".into());
        assert!(!format!("{e:?}").contains("SECRET"));
        assert_eq!(e.max_results(), 5);
    }
}
