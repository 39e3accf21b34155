//! DeerFlow's `tools:` and `tool_groups:` sections (contract §14), as written.
//!
//! An entry's `name` and `use` pick a tool and its backend; the other keys are the backend's
//! settings. Which entries are served, and which of their keys a given tool reads, is the
//! tools' knowledge (`tools::web::offer`): here the entries are only decoded. The strings
//! that may name a secret are [`Expandable`], so an entry that is never offered never has
//! its variables read, and `config show` names the variable instead of the value.

use serde::{Deserialize, Serialize};

use super::expandable::Expandable;

/// One `tools:` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolEntry {
    /// The tool's name as offered (`web_search`, `web_fetch`, `image_search`, `ls`, …).
    pub name: String,
    /// DeerFlow's class path (`deerflow.community.tavily.tools:web_search_tool`), or
    /// `direct` for deerflow's own fetcher.
    #[serde(rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
    /// DeerFlow's grouping; accepted, it changes nothing here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Results per call (`web_search`, `image_search`, `glob`, `grep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_results: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Expandable>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<Expandable>,
    /// Seconds per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Lifts the network guard for this entry (DeerFlow's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_private_addresses: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Expandable>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_env: Option<bool>,
    /// Crawl4AI's bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Expandable>,
}

impl ToolEntry {
    /// The backend keys this entry sets, by their config names (`name`, `use` and `group`
    /// are not backend keys): what a tool that reads fewer of them reports as ignored.
    pub fn backend_keys(&self) -> Vec<&'static str> {
        [
            ("max_results", self.max_results.is_some()),
            ("api_key", self.api_key.is_some()),
            ("base_url", self.base_url.is_some()),
            ("timeout", self.timeout.is_some()),
            (
                "allow_private_addresses",
                self.allow_private_addresses.is_some(),
            ),
            ("proxy", self.proxy.is_some()),
            ("trust_env", self.trust_env.is_some()),
            ("token", self.token.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect()
    }

    /// `use:` as written, or `(none)` when the entry has none.
    pub fn class(&self) -> &str {
        self.use_
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .unwrap_or("(none)")
    }
}

/// One `tool_groups:` entry: accepted for DeerFlow's sake.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolGroup {
    pub name: String,
}

#[cfg(test)]
mod tests {
    use serde_yaml_ng::Value;

    use super::*;
    use crate::decode::decode_doc;
    use crate::env::Env;
    use crate::keypath::KeyPath;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Section {
        tools: Vec<ToolEntry>,
        tool_groups: Vec<ToolGroup>,
    }

    fn decode(text: &str, env: &Env) -> crate::decode::Decoded<Section> {
        let v: Value = serde_yaml_ng::from_str(text).unwrap();
        decode_doc::<Section>(&v, &KeyPath::root(), Some(env))
    }

    #[test]
    fn entries_decode_as_deerflow_writes_them_and_keep_their_variables() {
        let env = Env::from_pairs([("TAVILY_API_KEY", "tvly-1")]);
        let d = decode(
            "tool_groups: [{name: web}]\n\
             tools:\n\
             - name: web_search\n  group: web\n  use: deerflow.community.tavily.tools:web_search_tool\n  \
               max_results: 7\n  api_key: $TAVILY_API_KEY\n  timeout: 12.5\n  search_type: auto\n\
             - name: web_fetch\n  use: deerflow.community.crawl4ai.tools:web_fetch_tool\n  \
               token: $CRAWL4AI_TOKEN\n  allow_private_addresses: true\n  trust_env: true\n",
            &env,
        );
        assert!(d.errors.is_empty() && d.unset.is_empty(), "{d:?}");
        assert_eq!(d.ignored, ["tools[0].search_type"]);
        let [search, fetch] = &d.value.tools[..] else {
            panic!("{:?}", d.value.tools)
        };
        assert_eq!(search.name, "web_search");
        assert_eq!(search.group.as_deref(), Some("web"));
        assert_eq!(search.max_results, Some(7));
        assert_eq!(search.timeout, Some(12.5));
        // Kept as written: read only if the entry is offered.
        assert_eq!(search.api_key, Some(Expandable::from("$TAVILY_API_KEY")));
        assert_eq!(search.backend_keys(), ["max_results", "api_key", "timeout"]);
        assert_eq!(fetch.token, Some(Expandable::from("$CRAWL4AI_TOKEN")));
        assert_eq!(fetch.allow_private_addresses, Some(true));
        assert_eq!(
            fetch.class(),
            "deerflow.community.crawl4ai.tools:web_fetch_tool"
        );
        assert_eq!(d.value.tool_groups[0].name, "web");
        assert_eq!(ToolEntry::default().class(), "(none)");
    }

    #[test]
    fn a_wrong_type_names_the_key() {
        let d = decode(
            "tools:\n- name: web_search\n  max_results: many\n",
            &Env::empty(),
        );
        assert_eq!(d.errors.len(), 1, "{d:?}");
        assert_eq!(d.errors[0].0.to_string(), "tools[0].max_results");
    }
}
