//! Value checks that types alone cannot express (ranges, required text, the sandbox).
//! Whether a custom agent's tool names exist is the sub-agent registry's check
//! (`subagent::registry::custom_agent_tool_warnings`): the tools are not config's to know.

use std::collections::BTreeSet;

use super::keypath::{KeyPath, Problem};
use super::sandbox_kind::SandboxKind;
use super::schema::{Config, ContextSize, SafetyFinishReasonConfig, SizeKind};

pub fn validate(cfg: &mut Config, problems: &mut Vec<Problem>, warnings: &mut Vec<String>) {
    validate_models(cfg, problems, warnings);
    validate_subagents(cfg, problems);
    validate_custom_agents(cfg, problems);
    validate_sandbox(cfg, problems, warnings);
    let top = KeyPath::root();
    let ld = &cfg.loop_detection;
    let at = top.key("loop_detection");
    for (key, v) in [
        ("warn_threshold", ld.warn_threshold),
        ("hard_limit", ld.hard_limit),
        ("window_size", ld.window_size),
        ("tool_freq_warn", ld.tool_freq_warn),
        ("tool_freq_hard_limit", ld.tool_freq_hard_limit),
    ] {
        at_least_one(u64::from(v), &at.key(key), problems);
    }
    at_least_one(
        cfg.token_budget.max_tokens,
        &top.key("token_budget").key("max_tokens"),
        problems,
    );
    validate_summarization(cfg, problems);
    safety_detectors(cfg, warnings);
    at_least_one(
        cfg.tool_output.externalize_min_chars as u64,
        &top.key("tool_output").key("externalize_min_chars"),
        problems,
    );
}

/// A detector class deerflow does not implement cannot run (DeerFlow loads it by
/// reflection); it is named once, and the built-in reasons still apply.
fn safety_detectors(cfg: &Config, warnings: &mut Vec<String>) {
    let s = &cfg.safety_finish_reason;
    let at = KeyPath::root().key("safety_finish_reason").key("detectors");
    for (i, d) in s.detectors.iter().flatten().enumerate() {
        if !SafetyFinishReasonConfig::is_known(d) {
            warnings.push(format!(
                "{}: detector '{}' is not one deerflow has (it has {}); ignored, the built-in \
                 safety finish reasons still apply",
                at.index(i).key("use"),
                d.use_,
                SafetyFinishReasonConfig::KNOWN_DETECTORS.join(", ")
            ));
        }
    }
}

fn validate_summarization(cfg: &Config, problems: &mut Vec<Problem>) {
    let s = &cfg.summarization;
    let at = KeyPath::root().key("summarization");
    if s.trigger.0.is_empty() {
        problems.push((
            at.key("trigger"),
            "expected at least one trigger ({type: tokens|messages|fraction, value: N})".into(),
        ));
    }
    for (i, t) in s.trigger.0.iter().enumerate() {
        size(t, false, &at.key("trigger").index(i).key("value"), problems);
    }
    size(&s.keep, true, &at.key("keep").key("value"), problems);
    at_least_one(
        s.trim_tokens_to_summarize,
        &at.key("trim_tokens_to_summarize"),
        problems,
    );
    if s.model_name.as_deref().is_some_and(|m| m.trim().is_empty()) {
        problems.push((at.key("model_name"), "must not be empty".into()));
    }
    let names: Vec<&str> = cfg.models.iter().map(|m| m.name.as_str()).collect();
    if let Some(m) = s.model_name.as_deref().filter(|m| !m.trim().is_empty()) {
        // `PROVIDER:MODEL` specs are resolved like `--model`; anything else must be an entry.
        if !m.contains(':') && !names.contains(&m) {
            problems.push((
                at.key("model_name"),
                format!("no model named '{m}' in models: (use a models[].name or null)"),
            ));
        }
    }
}

/// Counts are whole and non-negative (a `keep` may be 0, a trigger may not); fractions lie
/// in (0, 1] (a `keep` fraction in [0, 1)).
fn size(s: &ContextSize, keep: bool, at: &KeyPath, problems: &mut Vec<Problem>) {
    let v = s.value;
    let ok = match s.kind {
        SizeKind::Tokens | SizeKind::Messages => {
            v.is_finite() && v.fract() == 0.0 && (v > 0.0 || (keep && v == 0.0))
        }
        SizeKind::Fraction if keep => v.is_finite() && (0.0..1.0).contains(&v),
        SizeKind::Fraction => v.is_finite() && v > 0.0 && v <= 1.0,
    };
    if !ok {
        let expected = match (s.kind, keep) {
            (SizeKind::Fraction, false) => "a fraction in (0, 1]",
            (SizeKind::Fraction, true) => "a fraction in [0, 1)",
            (_, false) => "a whole number of at least 1",
            (_, true) => "a whole number of at least 0",
        };
        problems.push((at.clone(), format!("expected {expected}, found {v}")));
    }
}

fn validate_models(cfg: &Config, problems: &mut Vec<Problem>, warnings: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    for (i, m) in cfg.models.iter().enumerate() {
        let at = KeyPath::root().key("models").index(i);
        if m.name.trim().is_empty() {
            problems.push((at.key("name"), "must not be empty".into()));
        } else if !seen.insert(m.name.as_str()) {
            warnings.push(format!(
                "{at}: duplicate model name '{}'; the first entry wins",
                m.name
            ));
        }
        // A models entry keeps its `$VAR`s for later, so the walk's §12 check misses these.
        for (key, v) in [("name", &m.name), ("use", &m.use_)] {
            if super::env::half_written(v) {
                problems.push((at.key(key), super::env::WHOLE_REFERENCE.to_string()));
            }
        }
        seconds(m.timeout, &at.key("timeout"), problems);
        seconds(
            m.stream_idle_timeout,
            &at.key("stream_idle_timeout"),
            problems,
        );
        if let Some(w) = m.context_window {
            at_least_one(w, &at.key("context_window"), problems);
        }
        if let Some(p) = &m.price {
            let at = at.key("price");
            let prices = [
                ("input_per_mtok", Some(p.input_per_mtok)),
                ("output_per_mtok", Some(p.output_per_mtok)),
                ("input_cache_hit_per_mtok", p.input_cache_hit_per_mtok),
                ("cache_write_per_mtok", p.cache_write_per_mtok),
            ];
            for (key, v) in prices {
                // A negative price would make costs go down as tokens are spent.
                if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    problems.push((
                        at.key(key),
                        format!("expected a price of 0 or more per million tokens, found {v}"),
                    ));
                }
            }
        }
        let rate = at.key("rate_limit");
        let limits = [
            ("requests_per_minute", m.rate_limit.requests_per_minute),
            ("tokens_per_minute", m.rate_limit.tokens_per_minute),
        ];
        for (key, v) in limits {
            if let Some(v) = v {
                at_least_one(v, &rate.key(key), problems);
            }
        }
        thinking_budget(m, &at, problems);
    }
}

/// Anthropic rejects a thinking budget that is not below the output limit (HTTP 400 on
/// every call), so it is a configuration error here.
fn thinking_budget(m: &super::schema::ModelEntry, at: &KeyPath, problems: &mut Vec<Problem>) {
    let budget = m
        .when_thinking_enabled
        .as_ref()
        .and_then(|w| w.get("thinking"))
        .and_then(|t| t.get("budget_tokens"))
        .and_then(serde_json::Value::as_u64);
    if let (true, Some(budget), Some(max)) = (m.supports_thinking, budget, m.max_tokens) {
        if budget >= max {
            problems.push((
                at.key("when_thinking_enabled")
                    .key("thinking")
                    .key("budget_tokens"),
                format!(
                    "{budget} must be less than max_tokens ({max}): the thinking budget is \
                     part of the output limit"
                ),
            ));
        }
    }
}

fn validate_subagents(cfg: &Config, problems: &mut Vec<Problem>) {
    let s = &cfg.subagents;
    let at = KeyPath::root().key("subagents");
    in_range(s.max_concurrent, 1, 64, &at.key("max_concurrent"), problems);
    in_range(
        s.max_total_per_run,
        1,
        100_000,
        &at.key("max_total_per_run"),
        problems,
    );
    seconds(s.timeout_seconds, &at.key("timeout_seconds"), problems);
    turns(s.max_turns, &at.key("max_turns"), problems);
    for (name, o) in &s.agents {
        let here = at.key("agents").key(name);
        if let Some(t) = o.timeout_seconds {
            seconds(t, &here.key("timeout_seconds"), problems);
        }
        turns(o.max_turns, &here.key("max_turns"), problems);
        agent_model(o.model.as_deref(), &here, problems);
    }
}

/// An empty `model:` reads like "inherit" but may be a `$VAR` that came out empty: the user
/// says `inherit` or names a model (the same answer in `run` and `config check`).
fn agent_model(model: Option<&str>, at: &KeyPath, problems: &mut Vec<Problem>) {
    if model.is_some_and(|m| m.trim().is_empty()) {
        problems.push((
            at.key("model"),
            "must not be empty: use `inherit` or a models[].name".into(),
        ));
    }
}

fn validate_custom_agents(cfg: &Config, problems: &mut Vec<Problem>) {
    let at = KeyPath::root().key("subagents").key("custom_agents");
    for (name, a) in &cfg.subagents.custom_agents {
        // The name becomes a `subagent_type` value the model must spell back, and appears
        // in events and logs: keep it to one plain word.
        if !is_agent_name(name) {
            problems.push((
                at.clone(),
                format!(
                    "agent name {name:?} must be non-empty and use only ASCII letters, digits, \
                     '-' and '_'"
                ),
            ));
        }
        let here = at.key(name);
        if a.description.trim().is_empty() {
            problems.push((here.key("description"), "must not be empty".into()));
        }
        if a.system_prompt.trim().is_empty() {
            problems.push((here.key("system_prompt"), "must not be empty".into()));
        }
        if let Some(t) = a.timeout_seconds {
            seconds(t, &here.key("timeout_seconds"), problems);
        }
        turns(a.max_turns, &here.key("max_turns"), problems);
        agent_model(a.model.as_deref(), &here, problems);
    }
}

fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn validate_sandbox(cfg: &mut Config, problems: &mut Vec<Problem>, warnings: &mut Vec<String>) {
    let at = KeyPath::root().key("sandbox");
    match SandboxKind::from_use(&cfg.sandbox.use_) {
        Some(kind) => {
            cfg.sandbox.kind = kind;
            cfg.sandbox.use_ = kind.as_str().to_string();
        }
        None => problems.push((
            at.key("use"),
            format!(
                "{} is not supported: use `local`, `confined` or `docker` (or remove the key)",
                cfg.sandbox.use_
            ),
        )),
    }
    seconds(
        cfg.sandbox.bash_command_timeout,
        &at.key("bash_command_timeout"),
        problems,
    );
    let s = &cfg.sandbox;
    if s.kind != SandboxKind::Docker {
        // DeerFlow's local provider takes `mounts` too; deerflow maps them only into a container.
        let docker_only = [
            ("image", s.image.is_some()),
            ("mounts", !s.mounts.is_empty()),
            ("environment", !s.environment.is_empty()),
            ("per_task", s.per_task),
        ];
        for (key, set) in docker_only {
            if set {
                warnings.push(format!(
                    "sandbox.{key} is used only with sandbox.use: docker; ignored"
                ));
            }
        }
        return;
    }
    if s.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        problems.push((
            at.key("image"),
            "required with sandbox.use: docker (an image with bash or sh, e.g. ubuntu:24.04)"
                .into(),
        ));
    }
    at_least_one(u64::from(s.replicas), &at.key("replicas"), problems);
    if !is_container_name(&s.container_prefix) {
        problems.push((
            at.key("container_prefix"),
            format!(
                "{:?} is not a valid container name start (letters, digits, then also _ . -)",
                s.container_prefix
            ),
        ));
    }
    for (i, m) in s.mounts.iter().enumerate() {
        if !m.container_path.starts_with('/') {
            problems.push((
                at.key("mounts").index(i).key("container_path"),
                format!("{:?} must be an absolute path", m.container_path),
            ));
        }
    }
    for (name, value) in &s.environment {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            problems.push((
                at.key("environment"),
                format!("{name:?} is not a variable name"),
            ));
        } else if super::env::half_written(value) {
            let here = at.key("environment").key(name);
            problems.push((here, super::env::WHOLE_REFERENCE.to_string()));
        }
    }
}

/// Docker's rule for container names: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`.
fn is_container_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

fn seconds(v: f64, at: &KeyPath, problems: &mut Vec<Problem>) {
    if let Some(why) = duration_problem(v) {
        problems.push((at.clone(), why));
    }
}

/// The one rule for every duration in the config, MCP servers' included: positive, finite
/// and at most a year (they become `Duration`s and deadlines; a larger one is a mistake,
/// contract §12). `None` when `v` keeps it.
pub fn duration_problem(v: f64) -> Option<String> {
    if !(v.is_finite() && v > 0.0) {
        Some(format!("expected a positive number of seconds, found {v}"))
    } else if v > deerflow_base::text::MAX_SECONDS {
        Some("longer than a year (at most 31536000 seconds)".to_string())
    } else {
        None
    }
}

fn in_range(v: u32, lo: u32, hi: u32, at: &KeyPath, problems: &mut Vec<Problem>) {
    if !(lo..=hi).contains(&v) {
        problems.push((at.clone(), format!("expected {lo}..={hi}, found {v}")));
    }
}

/// `max_turns`, when set, must allow at least one model call.
fn turns(v: Option<u32>, at: &KeyPath, problems: &mut Vec<Problem>) {
    if let Some(v) = v {
        at_least_one(u64::from(v), at, problems);
    }
}

fn at_least_one(v: u64, at: &KeyPath, problems: &mut Vec<Problem>) {
    if v == 0 {
        problems.push((at.clone(), "expected at least 1, found 0".into()));
    }
}
