//! `bash`: runs a command in the workspace through the run's sandbox (contract §6, §13).
//!
//! Where and how the command runs (host session, bubblewrap) is the sandbox's business; this
//! tool only formats what came back.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::args::{lenient, spec, with_args};
use super::{Tool, ToolContext, ToolOutput};
use crate::ToolError;
use deerflow_model::{BoxFuture, ToolCall, ToolSpec};
use deerflow_workspace::sandbox::{ExecEnd, ExecOutput, ExecRequest};

pub const DISABLED: &str = "Error: host bash is disabled. It runs commands unconfined with the \
                            user's account; run deerflow with --allow-bash to enable it.";

/// `bash`: a shell command in the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

/// `bash`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// A few words on why this command runs (for the log).
    #[serde(default, deserialize_with = "lenient::opt_string")]
    pub description: Option<String>,
    /// The bash command line to run.
    pub command: String,
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    /// The same command, whatever its description says.
    fn loop_key(&self, args: &deerflow_model::ToolArgs) -> u64 {
        super::loop_key::arguments(args, &["command"])
    }

    fn spec(&self) -> ToolSpec {
        spec::<BashArgs>(
            "bash",
            "Run a bash command in the workspace directory (stdin is empty). Returns \
             stdout, then stderr after 'Std Error:', then 'Exit Code: N' when the \
             exit code is not 0. Long output keeps its start and end. The command and \
             everything it starts are killed on timeout; background processes do not \
             survive the call.",
        )
    }

    fn call<'a>(&'a self, call: &'a ToolCall, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        // Refused before its arguments are looked at, as it always was.
        if !ctx.limits.allow_host_bash {
            return Box::pin(async { ToolError::Refused(DISABLED.into()).into() });
        }
        with_args(&call.arguments, move |a: BashArgs| async move {
            run_command(&a.command, ctx).await
        })
    }
}

async fn run_command(command: &str, ctx: &ToolContext) -> ToolOutput {
    let timeout_secs = ctx.limits.bash_command_timeout_secs;
    let req = ExecRequest {
        command,
        cwd: ctx.workspace.root(),
        skills: ctx.workspace.skills_root(),
        env: &ctx.limits.child_env,
        timeout: timeout_of(timeout_secs),
        output_max_chars: ctx.limits.bash_output_max_chars,
        cancel: &ctx.cancel,
        processes: ctx.workspace.processes(),
        mark: ctx.limits.task_mark.as_ref(),
    };
    let sandbox = ctx.limits.sandbox.kind().as_str();
    let start = std::time::Instant::now();
    let result = ctx.limits.sandbox.exec(req).await;
    let ms = start.elapsed().as_millis() as u64;
    match result {
        Ok(out) => {
            let (end, code) = match &out.end {
                ExecEnd::Exited(code) => ("exited", Some(*code)),
                ExecEnd::TimedOut => ("timed_out", None),
                ExecEnd::Cancelled => ("cancelled", None),
                ExecEnd::WaitFailed(_) => ("wait_failed", None),
            };
            tracing::debug!(
                sandbox,
                command = %deerflow_base::text::clip(command, 200),
                end,
                code,
                ms,
                "command"
            );
            finish(out, ctx.limits.bash_output_max_chars, timeout_secs)
        }
        Err(e) => {
            tracing::debug!(sandbox, error = %e, ms, "command could not start");
            ToolError::Message(e).into()
        }
    }
}

/// A usable timeout from the configured seconds (nonsense values fall back to the default).
fn timeout_of(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(600))
}

fn finish(out: ExecOutput, max: usize, timeout_secs: f64) -> ToolOutput {
    let code = match &out.end {
        ExecEnd::Exited(code) => *code,
        _ => 0,
    };
    let body = deerflow_base::text::cut(
        &compose(&out.stdout, &out.stderr, code),
        max,
        deerflow_base::text::Keep::Middle,
    )
    .marked(out.cut_chars);
    match out.end {
        ExecEnd::Exited(_) => ToolOutput::ok(body),
        ExecEnd::TimedOut => ToolError::Message(format!(
            "command timed out after {timeout_secs} seconds\n{body}"
        ))
        .into(),
        ExecEnd::Cancelled => ToolError::Message(format!("command cancelled\n{body}")).into(),
        ExecEnd::WaitFailed(e) => {
            ToolError::failed("waiting for the command", format!("{e}\n{body}")).into()
        }
    }
}

/// stdout, then stderr after a label, then the exit code when it is not 0.
pub fn compose(stdout: &str, stderr: &str, code: i32) -> String {
    let mut out = stdout.to_string();
    if !stderr.is_empty() {
        out.push_str("\nStd Error:\n");
        out.push_str(stderr);
    }
    if code != 0 {
        out.push_str(&format!("\nExit Code: {code}"));
    }
    if out.is_empty() {
        out.push_str("(no output)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tests::{ctx_with, run};
    use crate::SandboxLimits;
    use crate::ToolStatus::{Error as E, Ok as O};
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Instant;

    fn limits(timeout: f64) -> SandboxLimits {
        SandboxLimits {
            allow_host_bash: true,
            bash_command_timeout_secs: timeout,
            ..Default::default()
        }
    }

    /// Whether any live process has `marker` in its command line.
    fn process_with(marker: &str) -> bool {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return false;
        };
        dir.filter_map(Result::ok).any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(marker)
                })
                .unwrap_or(false)
        })
    }

    async fn gone_within(marker: &str, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if !process_with(marker) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        !process_with(marker)
    }

    #[tokio::test]
    async fn refused_without_allow() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), SandboxLimits::default());
        let got = run(&BashTool, &c, json!({"command": "touch x"})).await;
        assert_eq!(got, (E, DISABLED.to_string()));
        assert!(DISABLED.contains("--allow-bash"));
        assert!(!dir.path().join("x").exists());
    }

    #[tokio::test]
    async fn output_format_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.txt"), "").unwrap();
        let c = ctx_with(dir.path(), limits(30.0));
        let cases = [
            ("echo hi", O, "hi\n"),
            ("true", O, "(no output)"),
            ("echo out; echo err >&2", O, "out\n\nStd Error:\nerr\n"),
            (
                "echo out; echo err >&2; exit 3",
                O,
                "out\n\nStd Error:\nerr\n\nExit Code: 3",
            ),
            ("exit 7", O, "\nExit Code: 7"),
            ("echo err >&2", O, "\nStd Error:\nerr\n"),
            ("ls", O, "here.txt\n"),
            ("cat; echo done", O, "done\n"),
            ("kill -9 $$", O, "\nExit Code: 137"),
        ];
        for (command, status, want) in cases {
            assert_eq!(
                run(&BashTool, &c, json!({"command": command})).await,
                (status, want.to_string()),
                "{command}"
            );
        }
        let missing = run(&BashTool, &c, json!({})).await;
        assert_eq!(
            missing,
            (
                E,
                "Error: missing required string argument 'command'".to_string()
            )
        );
    }

    #[tokio::test]
    async fn output_is_middle_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(
            dir.path(),
            SandboxLimits {
                bash_output_max_chars: 10,
                ..limits(30.0)
            },
        );
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "printf 'abcdefghijklmnopqrstuvwxyz'"}),
        )
        .await;
        assert_eq!(
            (s, text.as_str()),
            (O, "abcde\n... [16 characters truncated] ...\nvwxyz")
        );
    }

    #[tokio::test]
    async fn huge_output_is_bounded_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(
            dir.path(),
            SandboxLimits {
                bash_output_max_chars: 100,
                ..limits(30.0)
            },
        );
        // 2 MB of 'a' then a final marker line: head and tail survive, the count is exact.
        let cmd = "head -c 2000000 /dev/zero | tr '\\0' a; echo; echo END";
        let (s, text) = run(&BashTool, &c, json!({"command": cmd})).await;
        assert_eq!(s, O);
        assert!(text.starts_with(&"a".repeat(50)), "{text}");
        assert!(text.ends_with("\nEND\n"), "{text}");
        let total = 2_000_000 + 1 + 4;
        assert!(
            text.contains(&format!("... [{} characters truncated] ...", total - 100)),
            "{text}"
        );
    }

    #[tokio::test]
    async fn timeout_kills_backgrounded_children() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(1.0));
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "echo started; sleep 987654 & sleep 987655; echo never"}),
        )
        .await;
        assert_eq!(s, E);
        assert!(
            text.starts_with("Error: command timed out after 1 seconds\nstarted\n"),
            "{text}"
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(
            gone_within("sleep 987654", 3).await,
            "backgrounded child survived the timeout"
        );
        assert!(gone_within("sleep 987655", 3).await);
        assert!(c.workspace.processes().live().is_empty());
    }

    #[tokio::test]
    async fn backgrounded_child_does_not_hold_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let start = Instant::now();
        let got = run(
            &BashTool,
            &c,
            json!({"command": "sleep 876543 & echo quick"}),
        )
        .await;
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(got, (O, "quick\n".to_string()));
        assert!(
            gone_within("sleep 876543", 3).await,
            "background child outlived the call"
        );
    }

    #[tokio::test]
    async fn cancellation_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let cancel = c.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "sleep 765432 & sleep 765433"}),
        )
        .await;
        assert_eq!(s, E);
        assert!(text.starts_with("Error: command cancelled"), "{text}");
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(gone_within("sleep 765432", 3).await);
        assert!(gone_within("sleep 765433", 3).await);
    }

    #[tokio::test]
    async fn kill_all_stops_a_running_command() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_with(dir.path(), limits(60.0));
        let groups = c.workspace.processes().clone();
        tokio::spawn(async move {
            // Wait until the command registered its group, then kill everything.
            for _ in 0..100 {
                if !groups.live().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            groups.kill_all();
        });
        let start = Instant::now();
        let (s, text) = run(
            &BashTool,
            &c,
            json!({"command": "sleep 654321 & sleep 654322"}),
        )
        .await;
        assert_eq!((s, text.as_str()), (O, "\nExit Code: 137"));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(gone_within("sleep 654321", 3).await);
    }

    /// A sandbox that runs nothing: it records what it was asked and answers as told.
    #[derive(Debug, Default)]
    struct Recording(std::sync::Mutex<Vec<(String, std::path::PathBuf, Duration)>>);

    impl deerflow_workspace::sandbox::Sandbox for Recording {
        fn kind(&self) -> deerflow_workspace::sandbox::SandboxKind {
            deerflow_workspace::sandbox::SandboxKind::Local
        }
        fn exec<'a>(&'a self, req: ExecRequest<'a>) -> deerflow_workspace::sandbox::ExecFuture<'a> {
            self.0.lock().unwrap().push((
                req.command.to_string(),
                req.cwd.to_path_buf(),
                req.timeout,
            ));
            Box::pin(async move {
                if req.command == "unstartable" {
                    return Err("cannot start bwrap: not found".to_string());
                }
                Ok(ExecOutput {
                    end: ExecEnd::Exited(2),
                    stdout: "out".into(),
                    stderr: "err".into(),
                    cut_chars: 0,
                })
            })
        }
    }

    #[tokio::test]
    async fn commands_go_through_the_configured_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Arc::new(Recording::default());
        let c = ctx_with(
            dir.path(),
            SandboxLimits {
                sandbox: sandbox.clone(),
                ..limits(7.0)
            },
        );
        let got = run(&BashTool, &c, json!({"command": "touch x"})).await;
        assert_eq!(got, (O, "out\nStd Error:\nerr\nExit Code: 2".to_string()));
        let got = run(&BashTool, &c, json!({"command": "unstartable"})).await;
        assert_eq!(got, (E, "Error: cannot start bwrap: not found".to_string()));
        let seen = sandbox.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, "touch x");
        assert_eq!(seen[0].1, c.workspace.root());
        assert_eq!(seen[0].2, Duration::from_secs(7));
        assert!(!dir.path().join("x").exists(), "the host ran it");
    }

    #[test]
    fn compose_formats() {
        assert_eq!(compose("", "", 0), "(no output)");
        assert_eq!(compose("a", "", 1), "a\nExit Code: 1");
        assert_eq!(compose("a", "b", 0), "a\nStd Error:\nb");
    }

    #[test]
    fn schema_matches_what_the_argument_type_accepts() {
        crate::args::assert_schema_matches::<BashArgs>(
            &["command"],
            json!({"description": "why", "command": "true"}),
        );
    }
}
