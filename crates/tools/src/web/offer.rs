//! Which web tools a run offers (contract §14): the config's `tools:` entries, read as
//! DeerFlow writes them, and `--web`.
//!
//! An entry naming a built-in tool changes only that tool's own keys; an entry naming a web
//! tool is resolved into a [`WebEntry`] (its `$VAR`s read now, so an unset one is a
//! configuration error before the run starts) and built by its backend; any other entry,
//! or one whose `use:` no backend serves, is not offered and is reported once.

use std::sync::Arc;

use crate::Tool;
use deerflow_config::{duration_problem, Env, Expandable, ToolEntry, Unexpanded, WHOLE_REFERENCE};

use super::WebEntry;

/// Built-in tools a DeerFlow config may list (and `view_image`, offered by the model's
/// `supports_vision`): their entries change nothing but the keys below.
const BUILTIN: [&str; 11] = [
    "ls",
    "read_file",
    "write_file",
    "str_replace",
    "glob",
    "grep",
    "bash",
    "present_files",
    "ask_clarification",
    "task",
    "view_image",
];

/// The variables the search and fetch services' keys live in: never seen by bash (§6).
pub const KEY_VARIABLES: [&str; 6] = [
    "TAVILY_API_KEY",
    "BRAVE_SEARCH_API_KEY",
    "SERPER_API_KEY",
    "EXA_API_KEY",
    "FIRECRAWL_API_KEY",
    "JINA_API_KEY",
];

/// `--web`'s search backend: the first whose key variable is set, else DuckDuckGo.
const WEB_FLAG_SEARCH: [(&str, &str); 4] = [
    (
        "TAVILY_API_KEY",
        "deerflow.community.tavily.tools:web_search_tool",
    ),
    (
        "BRAVE_SEARCH_API_KEY",
        "deerflow.community.brave.tools:web_search_tool",
    ),
    (
        "SERPER_API_KEY",
        "deerflow.community.serper.tools:web_search_tool",
    ),
    (
        "EXA_API_KEY",
        "deerflow.community.exa.tools:web_search_tool",
    ),
];
const DUCKDUCKGO: &str = "deerflow.community.ddg_search.tools:web_search_tool";

/// An entry that is not offered: its tool and the class deerflow cannot serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub tool: String,
    pub class: String,
    /// Its index in `tools:` (`None` for a tool `--web` would add): its other keys are
    /// not worth a `config_ignored` too.
    pub entry: Option<usize>,
}

impl Unavailable {
    /// The `tool_unavailable` warning's message.
    pub fn message(&self) -> String {
        format!(
            "tool '{}' is not offered: deerflow cannot serve its use: {}",
            self.tool, self.class
        )
    }
}

/// What the `tools:` section and `--web` give a run.
#[derive(Default)]
pub struct WebTools {
    /// The offered web tools, in entry order, then those `--web` adds.
    pub tools: Vec<Arc<dyn Tool>>,
    pub unavailable: Vec<Unavailable>,
    /// Key paths of backend keys the entry's tool does not read (`config_ignored`).
    pub ignored: Vec<String>,
    /// Other notes (`config_ignored`): a second entry for a tool already offered.
    pub notes: Vec<String>,
    /// The variables the entries' secrets come from, and the services' key variables:
    /// removed from bash's environment.
    pub secrets: Vec<String>,
    /// `max_results` of the `glob` and `grep` entries: those tools' default.
    pub glob_max_results: Option<u64>,
    pub grep_max_results: Option<u64>,
}

/// The run's web tools, built by the backends; `Err` lists the configuration errors of
/// the entries that would be offered.
pub fn offer(entries: &[ToolEntry], web_flag: bool, env: &Env) -> Result<WebTools, Vec<String>> {
    offer_with(entries, web_flag, env, &super::build)
}

/// [`offer`] with the backends given (tests stand a fake in for a served one).
pub fn offer_with(
    entries: &[ToolEntry],
    web_flag: bool,
    env: &Env,
    build: &dyn Fn(&WebEntry) -> Option<Arc<dyn Tool>>,
) -> Result<WebTools, Vec<String>> {
    let mut out = WebTools {
        secrets: secret_sources(entries),
        ..WebTools::default()
    };
    let mut problems = Vec::new();
    let mut offered: Vec<(String, usize)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("tools[{i}]");
        let name = e.name.trim();
        if BUILTIN.contains(&name) {
            builtin_entry(e, name, &at, &mut out);
            continue;
        }
        let (entry, entry_problems) = resolve(e, &at, env);
        let Some(tool) = build(&entry) else {
            out.unavailable.push(Unavailable {
                tool: name.to_string(),
                class: e.class().to_string(),
                entry: Some(i),
            });
            continue;
        };
        if let Some((_, first)) = offered.iter().find(|(n, _)| n == name) {
            out.notes.push(format!(
                "{at}: a second entry for '{name}' is ignored; tools[{first}] is offered"
            ));
            continue;
        }
        problems.extend(entry_problems);
        out.ignored.extend(unread_keys(e, name, &at));
        offered.push((name.to_string(), i));
        out.tools.push(tool);
    }
    if web_flag {
        for entry in web_flag_entries(env) {
            if entries.iter().any(|e| e.name.trim() == entry.name) {
                continue; // the config's entry wins, offered or not
            }
            match build(&entry) {
                Some(tool) => out.tools.push(tool),
                None => out.unavailable.push(Unavailable {
                    tool: entry.name.clone(),
                    class: entry.use_path.clone(),
                    entry: None,
                }),
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// A built-in tool's entry: `max_results` of `glob` and `grep`, and nothing else.
fn builtin_entry(e: &ToolEntry, name: &str, at: &str, out: &mut WebTools) {
    match name {
        "glob" => out.glob_max_results = e.max_results.or(out.glob_max_results),
        "grep" => out.grep_max_results = e.max_results.or(out.grep_max_results),
        _ => {}
    }
    out.ignored.extend(unread_keys(e, name, at));
}

/// The keys `name` reads of an entry's backend keys.
fn reads(name: &str, key: &str) -> bool {
    const SEARCH: [&str; 6] = [
        "max_results",
        "api_key",
        "base_url",
        "timeout",
        "proxy",
        "trust_env",
    ];
    const FETCH: [&str; 7] = [
        "api_key",
        "base_url",
        "timeout",
        "allow_private_addresses",
        "proxy",
        "trust_env",
        "token",
    ];
    match name {
        "glob" | "grep" => key == "max_results",
        "web_search" | "image_search" => SEARCH.contains(&key),
        "web_fetch" => FETCH.contains(&key),
        _ => false,
    }
}

fn unread_keys(e: &ToolEntry, name: &str, at: &str) -> Vec<String> {
    e.backend_keys()
        .into_iter()
        .filter(|k| !reads(name, k))
        .map(|k| format!("{at}.{k}"))
        .collect()
}

/// An entry with its `$VAR`s read, and the problems of its values (reported only if the
/// entry is offered).
fn resolve(e: &ToolEntry, at: &str, env: &Env) -> (WebEntry, Vec<String>) {
    let mut problems = Vec::new();
    let mut get = |raw: &Option<Expandable>, key: &str| -> Option<String> {
        let raw = raw.as_ref()?;
        match raw.expand(env) {
            Ok(v) => Some(v),
            Err(Unexpanded::HalfWritten) => {
                problems.push(format!("{at}.{key}: {WHOLE_REFERENCE}"));
                None
            }
            Err(Unexpanded::Unset(var)) => {
                problems.push(format!(
                    "{at}.{key}: ${var} is not set (set it, or remove the '{}' entry)",
                    e.name.trim()
                ));
                None
            }
        }
    };
    let mut entry = WebEntry::new(e.name.trim(), e.class());
    if e.use_.is_none() {
        entry.use_path = String::new();
    }
    entry.api_key = get(&e.api_key, "api_key");
    entry.base_url = get(&e.base_url, "base_url");
    entry.proxy = get(&e.proxy, "proxy");
    let token = get(&e.token, "token");
    for (key, url) in [("base_url", &entry.base_url), ("proxy", &entry.proxy)] {
        if let Some(url) = url
            .as_deref()
            .filter(|u| !deerflow_base::text::is_http_url(u))
        {
            problems.push(format!(
                "{at}.{key}: '{}' is not an http(s) URL",
                deerflow_base::text::escape_controls(
                    &deerflow_base::text::without_url_credentials(url)
                )
            ));
        }
    }
    // A secret with a control character cannot be a header value; never shown.
    for (key, secret) in [("api_key", &entry.api_key), ("token", &token)] {
        if secret
            .as_deref()
            .is_some_and(|k| k.chars().any(char::is_control))
        {
            problems.push(format!(
                "{at}.{key} contains control characters (a line break?); remove them"
            ));
        }
    }
    if let Some(token) = token {
        entry.extra.insert("token".into(), token.into());
    }
    if let Some(t) = e.timeout {
        match duration_problem(t) {
            Some(why) => problems.push(format!("{at}.timeout: {why}")),
            None => entry.timeout = std::time::Duration::from_secs_f64(t),
        }
    }
    entry.max_results = e
        .max_results
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if e.max_results == Some(0) {
        problems.push(format!("{at}.max_results: expected at least 1, found 0"));
    }
    entry.allow_private_addresses = e.allow_private_addresses.unwrap_or(false);
    entry.trust_env = e.trust_env.unwrap_or(false);
    (entry, problems)
}

/// The entries `--web` offers: `web_fetch` with the direct fetcher, `web_search` with the
/// first backend whose key is set (its key given), else DuckDuckGo.
fn web_flag_entries(env: &Env) -> [WebEntry; 2] {
    let fetch = WebEntry::new("web_fetch", "direct");
    let search = WEB_FLAG_SEARCH
        .iter()
        .find_map(|(var, class)| {
            let key = env.get(var)?;
            let mut e = WebEntry::new("web_search", class);
            e.api_key = Some(key);
            Some(e)
        })
        .unwrap_or_else(|| WebEntry::new("web_search", DUCKDUCKGO));
    [fetch, search]
}

/// Every variable an entry's secrets may come from, and the services' own.
pub fn secret_sources(entries: &[ToolEntry]) -> Vec<String> {
    let mut out: Vec<String> = KEY_VARIABLES.iter().map(|v| v.to_string()).collect();
    for e in entries {
        for raw in [&e.api_key, &e.token, &e.proxy, &e.base_url]
            .into_iter()
            .flatten()
        {
            if let Some(var) = raw.var().filter(|v| !out.iter().any(|o| o == v)) {
                out.push(var.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "offer_tests.rs"]
mod tests;
