//! `replay:PATH` cassettes (contract §7): scripted responses keyed by agent and turn, so a
//! replay is deterministic whatever the scheduling. Also the recorder behind `--record`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::cannot_serve;
use crate::{
    AgentId, BoxFuture, CallContext, CallPurpose, ChatModel, ChatRequest, ModelError, ModelLimits,
    ModelResponse, Reasoning, ToolArgs, ToolCall, Usage,
};
use deerflow_config::ResolvedModel;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Cassette {
    pub version: u32,
    #[serde(default)]
    pub lead: Vec<ScriptedResponse>,
    #[serde(default)]
    pub tasks: BTreeMap<String, Vec<ScriptedResponse>>,
    #[serde(default)]
    pub default_task: Vec<ScriptedResponse>,
    /// Web tools' results (contract §14), by the call's id for the lead's calls and
    /// `TASK_ID/CALL_ID` for a sub-agent's: a replay answers those calls from here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_results: BTreeMap<String, RecordedTool>,
}

/// A tool's recorded result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordedTool {
    /// `ok` or `error`, as `tool_result.status` says it.
    pub status: String,
    pub output: String,
}

/// Only the recorded tool results of a cassette, read without building its scripts.
#[derive(Deserialize)]
struct ToolResultsOnly {
    #[serde(default)]
    tool_results: BTreeMap<String, RecordedTool>,
}

/// The tool results recorded in the cassette at `path` (the cassette was checked when its
/// model was built).
pub fn recorded_tool_results(path: &Path) -> Result<BTreeMap<String, RecordedTool>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read cassette {}: {e}", path.display()))?;
    serde_json::from_str::<ToolResultsOnly>(&text)
        .map(|c| c.tool_results)
        .map_err(|e| format!("cassette {} is not valid: {e}", path.display()))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScriptedResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// Reasoning text the model returned (a `reasoning` event on replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Provider blocks kept for later requests (Anthropic `thinking` with its signature).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning_blocks: Vec<Value>,
    /// Why the response ended (`length`, `content_filter`, …); absent: `stop`, or
    /// `tool_calls` when it has calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScriptedCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default)]
    pub arguments: ScriptedArgs,
    /// Fields the provider added to the call, sent back unchanged.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, Value>,
}

/// A call's arguments as the cassette has them: an object, or the text a provider sent
/// (a string) when it was no JSON object. Kept as raw JSON: a fan-out's cassette holds
/// one allocation per call, not a parsed tree.
#[derive(Clone)]
pub struct ScriptedArgs(Box<RawValue>);

impl ScriptedArgs {
    fn text(text: &str) -> Self {
        match serde_json::value::to_raw_value(text) {
            Ok(v) => Self(v),
            // Serializing a string cannot fail.
            Err(_) => Self::default(),
        }
    }

    fn object(args: &ToolArgs) -> Self {
        match RawValue::from_string(args.as_str().to_string()) {
            Ok(v) => Self(v),
            // `ToolArgs` is always one JSON object.
            Err(_) => Self::default(),
        }
    }

    /// The call these arguments make.
    fn call(&self, id: String, name: String) -> ToolCall {
        let raw = self.0.get();
        match raw.starts_with('"') {
            true => match serde_json::from_str::<String>(raw) {
                Ok(text) => ToolCall::from_raw(id, name, &text),
                Err(_) => ToolCall::from_raw(id, name, raw),
            },
            // What is not an object makes the tool answer with an error, as for a
            // provider's stream.
            false => ToolCall::from_raw(id, name, raw),
        }
    }
}

impl Default for ScriptedArgs {
    fn default() -> Self {
        Self::object(&ToolArgs::empty())
    }
}

impl PartialEq for ScriptedArgs {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl std::fmt::Debug for ScriptedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

impl Serialize for ScriptedArgs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ScriptedArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(d).map(Self)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScriptedUsage {
    /// Absent: the provider did not report it (`null` in the `usage` event). A cassette
    /// stands in for a provider, so a count that is not a non-negative integer is
    /// unreported for that field, as from a provider (§12), not a broken cassette.
    #[serde(
        default,
        deserialize_with = "crate::count",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_tokens: Option<u64>,
    #[serde(
        default,
        deserialize_with = "crate::count",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_tokens: Option<u64>,
    #[serde(
        default,
        deserialize_with = "crate::count",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_tokens: Option<u64>,
    #[serde(
        default,
        deserialize_with = "crate::count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read_tokens: Option<u64>,
    /// Prompt-cache writes (Anthropic), so a replay prices a recorded run the same.
    #[serde(
        default,
        deserialize_with = "crate::count",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_tokens: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScriptedError {
    /// The HTTP status; absent for a failure without one (a dropped connection, a broken
    /// stream), which replays as a stream error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub message: String,
}

impl Cassette {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read cassette {}: {e}", path.display()))?;
        let c: Cassette = serde_json::from_str(&text)
            .map_err(|e| format!("cassette {} is not valid: {e}", path.display()))?;
        if c.version != 1 {
            return Err(format!(
                "cassette {}: unsupported version {} (expected 1)",
                path.display(),
                c.version
            ));
        }
        c.check_delays()
            .map_err(|at| format!("cassette {}: {at}", path.display()))?;
        Ok(c)
    }

    /// A `delay_ms` over one year is a mistake (contract §12), and would overflow the
    /// timer it becomes; the error names the first one.
    fn check_delays(&self) -> Result<(), String> {
        let scripts = std::iter::once(("lead".to_string(), &self.lead))
            .chain(self.tasks.iter().map(|(k, v)| (format!("tasks.{k:?}"), v)))
            .chain(std::iter::once((
                "default_task".to_string(),
                &self.default_task,
            )));
        for (name, script) in scripts {
            for (i, r) in script.iter().enumerate() {
                match r.delay_ms {
                    Some(ms) if ms as f64 / 1000.0 > deerflow_base::text::MAX_SECONDS => {
                        return Err(format!(
                            "{name}[{i}].delay_ms: {ms} is over one year (31536000000 ms)"
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// A task's script: under its task id (how `--record` keeps apart several tasks with
    /// one description), else under its description, else the default.
    fn script_for(&self, agent: &AgentId) -> &[ScriptedResponse] {
        match agent {
            AgentId::Lead => &self.lead,
            AgentId::Task {
                description,
                task_id,
            } => self
                .tasks
                .get(task_id)
                .or_else(|| self.tasks.get(description))
                .map(Vec::as_slice)
                .unwrap_or(&self.default_task),
        }
    }
}

/// The registry's constructor: a resolved `replay` model, its cassette read now so a bad
/// one is a configuration error before the run starts.
pub fn build(r: &ResolvedModel) -> Result<Arc<dyn ChatModel>, String> {
    let Some(path) = &r.cassette else {
        return Err(cannot_serve(r));
    };
    let cassette = Cassette::load(path)?;
    let mut model = ReplayModel::new(cassette, r.model.clone());
    model.context_window = r.context_window;
    Ok(Arc::new(model))
}

pub struct ReplayModel {
    /// The task scripts (the lead's is moved to `lead`).
    cassette: Cassette,
    /// The lead's responses, each handed over when served. The lead is one agent and asks
    /// for each turn once, so none is served twice; a fan-out's calls are then not held by
    /// the cassette for the rest of the run beside the transcript's copy. Task scripts are
    /// shared (by description, and the default) and stay.
    lead: Mutex<Vec<Option<ScriptedResponse>>>,
    lead_len: usize,
    /// The path as the user typed it, for error messages.
    label: String,
    /// As configured, so summarization's `fraction` sizes can be replayed too.
    context_window: Option<u64>,
}

impl ReplayModel {
    pub fn new(mut cassette: Cassette, label: impl Into<String>) -> Self {
        let lead: Vec<Option<ScriptedResponse>> = std::mem::take(&mut cassette.lead)
            .into_iter()
            .map(Some)
            .collect();
        Self {
            lead_len: lead.len(),
            lead: Mutex::new(lead),
            cassette,
            label: label.into(),
            context_window: None,
        }
    }

    fn respond(&self, req: &ChatRequest) -> Result<(ModelResponse, Option<u64>), ModelError> {
        if req.purpose == CallPurpose::Summary {
            return Ok((summary_response(req), None));
        }
        let (r, len) = match &req.agent {
            AgentId::Lead => {
                let mut lead = self.lead.lock().unwrap_or_else(|p| p.into_inner());
                (lead.get_mut(req.turn).and_then(Option::take), self.lead_len)
            }
            task => {
                let script = self.cassette.script_for(task);
                (script.get(req.turn).cloned(), script.len())
            }
        };
        let Some(r) = r else {
            return Err(ModelError::Script(format!(
                "replay cassette {} has no response for the {} at turn {} (its script has {})",
                self.label,
                req.agent,
                req.turn + 1,
                len
            )));
        };
        if let Some(e) = &r.error {
            return Err(match e.status {
                Some(status) => ModelError::Http {
                    provider: "replay".into(),
                    status,
                    message: e.message.clone(),
                    retry_after: None,
                },
                None => ModelError::Stream {
                    provider: "replay".into(),
                    message: e.message.clone(),
                },
            });
        }
        let delay = r.delay_ms;
        Ok((to_response(r, req), delay))
    }
}

pub fn to_response(r: ScriptedResponse, req: &ChatRequest) -> ModelResponse {
    let tool_calls = if req.tool_choice_none {
        Vec::new()
    } else {
        r.tool_calls
    };
    // Not collected in place: the cassette's calls are larger than a `ToolCall`, and a
    // fan-out's transcript would keep the difference for the rest of the run.
    let mut calls = Vec::with_capacity(tool_calls.len());
    calls.extend(tool_calls.into_iter().enumerate().map(|(i, c)| {
        let id = c.id.unwrap_or_else(|| generated_id(req, i));
        // A string is the argument text as a provider sent it (`--record` writes broken
        // JSON that way); anything else is the arguments themselves.
        let mut call = c.arguments.call(id, c.name);
        call.extra = c.extra.into();
        call
    }));
    let tool_calls = calls;
    let usage = r.usage.as_ref().and_then(|u| {
        let usage = Usage::from_counts(
            u.input_tokens,
            u.output_tokens,
            u.total_tokens,
            u.cache_read_tokens,
        )?;
        Some(Usage {
            cache_write_tokens: u.cache_write_tokens,
            ..usage
        })
    });
    let finish = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    ModelResponse {
        text: r.text.filter(|t| !t.is_empty()),
        tool_calls,
        usage,
        finish_reason: Some(r.finish_reason.unwrap_or_else(|| finish.into())),
        reasoning: Reasoning {
            text: r.reasoning,
            blocks: r.reasoning_blocks,
        },
    }
}

/// A summary call is not a turn, so it takes nothing from the script: the answer is a fixed
/// text naming what was summarized (deterministic, no usage reported).
fn summary_response(req: &ChatRequest) -> ModelResponse {
    ModelResponse {
        text: Some(format!(
            "Summary of the earlier conversation of the {} (replay: {} message(s) in the request).",
            req.agent,
            req.messages.len()
        )),
        finish_reason: Some("stop".into()),
        ..Default::default()
    }
}

/// Ids are derived from the agent and turn, never from a global counter, so a replay
/// gives the same ids whatever order sub-agents run in.
fn generated_id(req: &ChatRequest, index: usize) -> String {
    match &req.agent {
        AgentId::Lead => format!("call_{}_{}", req.turn + 1, index + 1),
        AgentId::Task { task_id, .. } => format!("{task_id}_{}_{}", req.turn + 1, index + 1),
    }
}

impl ChatModel for ReplayModel {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let (resp, delay) = self.respond(req)?;
            if let Some(ms) = delay.filter(|ms| *ms > 0) {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                    _ = ctx.cancel.cancelled() => return Err(ModelError::Cancelled),
                }
            }
            Ok(resp)
        })
    }

    fn limits(&self) -> ModelLimits {
        ModelLimits {
            context_window: self.context_window,
            max_output_tokens: None,
        }
    }
}

/// Wraps a model and keeps every response it gives, to be written as a cassette.
pub struct Recorder {
    inner: Arc<dyn ChatModel>,
    log: Arc<RecordLog>,
}

#[derive(Default)]
pub struct RecordLog {
    entries: Mutex<Vec<(AgentId, usize, ScriptedResponse)>>,
    tool_results: Mutex<BTreeMap<String, RecordedTool>>,
}

impl Recorder {
    pub fn new(inner: Arc<dyn ChatModel>, log: Arc<RecordLog>) -> Self {
        Self { inner, log }
    }
}

impl ChatModel for Recorder {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let result = self.inner.complete(req, ctx).await;
            // A cassette scripts turns only; replay writes its own summaries.
            if req.purpose == CallPurpose::Summary {
                return result;
            }
            // Every response and every failure is a model call of the run: a replay must
            // meet each again (cancellation is the run's doing, not the model's).
            let failed = |status: Option<u16>, message: String| ScriptedResponse {
                error: Some(ScriptedError { status, message }),
                ..Default::default()
            };
            let scripted = match &result {
                Ok(r) => Some(from_response(r)),
                Err(ModelError::Http {
                    status, message, ..
                }) => Some(failed(Some(*status), message.clone())),
                Err(ModelError::Cancelled) => None,
                Err(e) => Some(failed(None, e.to_string())),
            };
            if let Some(s) = scripted {
                let mut g = self.log.entries.lock().unwrap_or_else(|p| p.into_inner());
                g.push((req.agent.clone(), req.turn, s));
            }
            result
        })
    }

    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
}

pub fn from_response(r: &ModelResponse) -> ScriptedResponse {
    ScriptedResponse {
        text: r.text.clone(),
        tool_calls: r
            .tool_calls
            .iter()
            .map(|c| ScriptedCall {
                id: Some(c.id.clone()),
                name: c.name.clone(),
                // Broken arguments as they were sent, so the replay breaks the same way.
                arguments: match &c.invalid_arguments {
                    Some(raw) => ScriptedArgs::text(raw),
                    None => ScriptedArgs::object(&c.arguments),
                },
                extra: c.extra.to_map(),
            })
            .collect(),
        usage: r.usage.map(|u| ScriptedUsage {
            input_tokens: u.input(),
            output_tokens: u.output(),
            total_tokens: Some(u.total_tokens),
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }),
        delay_ms: None,
        error: None,
        reasoning: r.reasoning.text.clone(),
        reasoning_blocks: r.reasoning.blocks.clone(),
        // The two a replay derives itself are left out.
        finish_reason: r
            .finish_reason
            .clone()
            .filter(|f| f != "stop" && f != "tool_calls"),
    }
}

/// Recorded responses with the turn each answered.
type Turns = Vec<(usize, ScriptedResponse)>;

impl RecordLog {
    /// Keeps a response that was not asked of a model (a `--state` ledger's, replayed).
    pub fn push(&self, agent: AgentId, turn: usize, response: ScriptedResponse) {
        let mut g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        g.push((agent, turn, response));
    }

    /// Keeps a tool's result under its key (`CALL_ID`, or `TASK_ID/CALL_ID`).
    pub fn record_tool(&self, key: String, result: RecordedTool) {
        let mut g = self.tool_results.lock().unwrap_or_else(|p| p.into_inner());
        g.insert(key, result);
    }

    /// The cassette of everything recorded: the lead's calls in turn order, each task's
    /// under its description — or, when several tasks share one, each under its task id
    /// (the lead's recorded calls carry those ids, so the replay gives them the same ones).
    pub fn cassette(&self) -> Cassette {
        let g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut lead: Vec<(usize, ScriptedResponse)> = Vec::new();
        // description → task id → its calls
        let mut tasks: BTreeMap<&str, BTreeMap<&str, Turns>> = BTreeMap::new();
        for (agent, turn, resp) in g.iter() {
            match agent {
                AgentId::Lead => lead.push((*turn, resp.clone())),
                AgentId::Task {
                    description,
                    task_id,
                } => tasks
                    .entry(description)
                    .or_default()
                    .entry(task_id)
                    .or_default()
                    .push((*turn, resp.clone())),
            }
        }
        let ordered = |mut v: Vec<(usize, ScriptedResponse)>| {
            v.sort_by_key(|(t, _)| *t);
            v.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
        };
        let mut scripts = BTreeMap::new();
        for (description, by_id) in tasks {
            let shared = by_id.len() > 1;
            for (task_id, calls) in by_id {
                let key = if shared { task_id } else { description };
                scripts.insert(key.to_string(), ordered(calls));
            }
        }
        let tool_results = self
            .tool_results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Cassette {
            version: 1,
            lead: ordered(lead),
            tasks: scripts,
            default_task: Vec::new(),
            tool_results,
        }
    }

    /// The recorded cassette as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.cassette()).unwrap_or_default() + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    fn req(agent: AgentId, turn: usize) -> ChatRequest {
        ChatRequest {
            system: "".into(),
            messages: Default::default(),
            tools: Vec::new().into(),
            tool_choice_none: false,
            agent,
            turn,
            output_schema: None,
            purpose: Default::default(),
            lineage: None,
        }
    }

    fn cassette() -> Cassette {
        serde_json::from_value(json!({
            "version": 1,
            "lead": [ {"tool_calls": [{"name": "ls", "arguments": {}}]},
                      {"text": "final", "usage": {"input_tokens": 900, "output_tokens": 40}} ],
            "tasks": {"count": [{"text": "42"}]},
            "default_task": [{"text": "done", "delay_ms": 1}],
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn usage_counts_that_are_not_whole_non_negative_numbers_are_unreported() {
        let c: Cassette = serde_json::from_value(json!({
            "version": 1,
            "lead": [ {"text": "a", "usage": {"input_tokens": -5, "output_tokens": 7,
                                             "total_tokens": "x", "cache_read_tokens": 1.5}} ],
        }))
        .unwrap();
        let m = ReplayModel::new(c, "c.json");
        let ctx = CallContext::new(CancellationToken::new());
        let u = m
            .complete(&req(AgentId::Lead, 0), &ctx)
            .await
            .unwrap()
            .usage
            .unwrap();
        assert_eq!((u.input(), u.output(), u.total_tokens), (None, Some(7), 7));
        assert_eq!(u.cache_read_tokens, None);
    }

    #[tokio::test]
    async fn scripts_by_agent_and_turn() {
        let m = ReplayModel::new(cassette(), "c.json");
        let ctx = CallContext::new(CancellationToken::new());
        let r0 = m.complete(&req(AgentId::Lead, 0), &ctx).await.unwrap();
        assert_eq!(r0.tool_calls[0].id, "call_1_1");
        assert_eq!(r0.usage, None);
        let r1 = m.complete(&req(AgentId::Lead, 1), &ctx).await.unwrap();
        assert_eq!(r1.text.as_deref(), Some("final"));
        assert_eq!(r1.usage.unwrap().total_tokens, 940);
        let t = AgentId::Task {
            description: "count".into(),
            task_id: "t".into(),
        };
        assert_eq!(
            m.complete(&req(t, 0), &ctx).await.unwrap().text.as_deref(),
            Some("42")
        );
        let d = AgentId::Task {
            description: "other".into(),
            task_id: "t2".into(),
        };
        assert_eq!(
            m.complete(&req(d, 0), &ctx).await.unwrap().text.as_deref(),
            Some("done")
        );
    }

    #[test]
    fn a_delay_over_one_year_is_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let load = |delay: u64, at: &str| {
            let body = json!({"version": 1, "lead": [{"text": "a"}],
                "tasks": {"t": [{"text": "b"}, {"text": "c", "delay_ms": 1}]}});
            let mut body = body;
            let slot = if at == "lead" {
                &mut body["lead"][0]
            } else {
                &mut body["tasks"]["t"][1]
            };
            slot["delay_ms"] = json!(delay);
            let path = dir.path().join("c.json");
            std::fs::write(&path, body.to_string()).unwrap();
            Cassette::load(&path)
        };
        assert!(load(31_536_000_000, "lead").is_ok());
        let err = load(31_536_000_001, "task").unwrap_err();
        assert!(
            err.contains("tasks.\"t\"[1].delay_ms: 31536000001 is over one year"),
            "{err}"
        );
        let err = load(u64::MAX, "lead").unwrap_err();
        assert!(err.contains("lead[0].delay_ms"), "{err}");
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_are_invalid() {
        let c: Cassette = serde_json::from_value(json!({"version": 1, "lead": [{"tool_calls": [
            {"name": "ls", "arguments": [1, 2]}, {"name": "ls", "arguments": null}, {"name": "ls"}]}]}))
        .unwrap();
        let m = ReplayModel::new(c, "c");
        let r = m
            .complete(
                &req(AgentId::Lead, 0),
                &CallContext::new(CancellationToken::new()),
            )
            .await
            .unwrap();
        assert_eq!(r.tool_calls[0].invalid_arguments.as_deref(), Some("[1,2]"));
        assert_eq!(r.tool_calls[0].arguments, json!({}));
        assert!(r.tool_calls[1].invalid_arguments.is_some());
        assert_eq!(r.tool_calls[2].invalid_arguments, None);
    }

    #[tokio::test]
    async fn past_the_end_names_cassette_agent_and_turn() {
        let m = ReplayModel::new(cassette(), "c.json");
        let ctx = CallContext::new(CancellationToken::new());
        let e = m
            .complete(&req(AgentId::Lead, 2), &ctx)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.json") && e.contains("lead") && e.contains("turn 3"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn scripted_error_is_an_http_error() {
        let c: Cassette = serde_json::from_value(
            json!({"version":1,"lead":[{"error":{"status":503,"message":"down"}}]}),
        )
        .unwrap();
        let m = ReplayModel::new(c, "c");
        let e = m
            .complete(
                &req(AgentId::Lead, 0),
                &CallContext::new(CancellationToken::new()),
            )
            .await
            .unwrap_err();
        assert!(matches!(e, ModelError::Http { status: 503, .. }));
    }

    #[tokio::test]
    async fn recorder_round_trips() {
        let log = Arc::new(RecordLog::default());
        let rec = Recorder::new(Arc::new(ReplayModel::new(cassette(), "c")), log.clone());
        let ctx = CallContext::new(CancellationToken::new());
        rec.complete(&req(AgentId::Lead, 0), &ctx).await.unwrap();
        rec.complete(&req(AgentId::Lead, 1), &ctx).await.unwrap();
        let c = log.cassette();
        assert_eq!(c.lead.len(), 2);
        assert_eq!(c.lead[0].tool_calls[0].id.as_deref(), Some("call_1_1"));
        assert_eq!(c.lead[1].usage.as_ref().unwrap().total_tokens, Some(940));
    }

    #[tokio::test]
    async fn reasoning_provider_fields_and_stop_reasons_are_recorded_and_replayed() {
        let mut call = ToolCall::from_raw("c1".into(), "f".into(), "{}");
        call.extra.insert(
            "extra_content".into(),
            json!({"google": {"thought_signature": "s"}}),
        );
        let recorded = ModelResponse {
            text: Some("cut".into()),
            tool_calls: vec![call],
            usage: None,
            finish_reason: Some("length".into()),
            reasoning: Reasoning {
                text: Some("hmm".into()),
                blocks: vec![json!({"type": "thinking", "thinking": "hmm", "signature": "sig"})],
            },
        };
        let scripted = from_response(&recorded);
        let text = serde_json::to_string(&scripted).unwrap();
        let back: ScriptedResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(to_response(back.clone(), &req(AgentId::Lead, 0)), recorded);
        // What a replay derives itself is not written.
        let plain = from_response(&ModelResponse {
            text: Some("hi".into()),
            finish_reason: Some("stop".into()),
            ..Default::default()
        });
        assert_eq!(serde_json::to_value(&plain).unwrap(), json!({"text": "hi"}));
    }

    #[test]
    fn prompt_cache_usage_is_recorded_and_replayed() {
        let recorded = ModelResponse {
            text: Some("hi".into()),
            usage: Some(Usage {
                input_tokens: 1300,
                output_tokens: 5,
                total_tokens: 1305,
                cache_read_tokens: Some(1000),
                cache_write_tokens: Some(200),
                unreported: Default::default(),
            }),
            finish_reason: Some("stop".into()),
            ..Default::default()
        };
        let text = serde_json::to_string(&from_response(&recorded)).unwrap();
        assert!(text.contains(r#""cache_write_tokens":200"#), "{text}");
        let back: ScriptedResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(to_response(back.clone(), &req(AgentId::Lead, 0)), recorded);
    }

    #[tokio::test]
    async fn a_summary_call_takes_nothing_from_the_script_and_is_not_recorded() {
        let log = Arc::new(RecordLog::default());
        let rec = Recorder::new(Arc::new(ReplayModel::new(cassette(), "c")), log.clone());
        let ctx = CallContext::new(CancellationToken::new());
        let mut summary = req(AgentId::Lead, 1);
        summary.purpose = CallPurpose::Summary;
        let s = rec.complete(&summary, &ctx).await.unwrap();
        assert!(s
            .text
            .unwrap()
            .starts_with("Summary of the earlier conversation of the lead"));
        assert_eq!((s.usage, s.tool_calls.len()), (None, 0));
        let turn = rec.complete(&req(AgentId::Lead, 1), &ctx).await.unwrap();
        assert_eq!(turn.text.as_deref(), Some("final"));
        assert_eq!(log.cassette().lead.len(), 1);
    }

    /// Recorded web results survive the trip through the cassette file, and a cassette
    /// without them still loads.
    #[test]
    fn tool_results_are_written_and_read_back() {
        let log = RecordLog::default();
        log.record_tool(
            "t1/call_2".into(),
            RecordedTool {
                status: "ok".into(),
                output: "URL: https://example.org/\n\nbody".into(),
            },
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, log.to_json()).unwrap();
        let back = recorded_tool_results(&path).unwrap();
        assert_eq!(
            back["t1/call_2"].output,
            "URL: https://example.org/\n\nbody"
        );
        assert_eq!(Cassette::load(&path).unwrap().tool_results, back);
        std::fs::write(&path, r#"{"version": 1, "lead": [{"text": "x"}]}"#).unwrap();
        assert!(recorded_tool_results(&path).unwrap().is_empty());
        assert!(!serde_json::to_string(&Cassette::load(&path).unwrap())
            .unwrap()
            .contains("tool_results"));
    }
}
