//! `schema`, `completions` and `man`: generated from the same definitions the binary uses.

use std::io::Write;

use clap::CommandFactory;

use super::Cli;
use crate::outcome::{EXIT_FAILED, EXIT_OK, EXIT_SIGPIPE};

/// Prints text to stdout; a closed stdout is exit 141, any other write error (a full disk)
/// exit 1 with one line on stderr (§12).
pub fn print(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    let line = if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    match out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => EXIT_OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => EXIT_SIGPIPE,
        Err(e) => {
            crate::logging::stderr_line(&format!("deerflow: cannot write to stdout: {e}"));
            EXIT_FAILED
        }
    }
}

pub fn completions(shell: clap_complete::Shell) -> i32 {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "deerflow", &mut buf);
    let script = String::from_utf8_lossy(&buf);
    if shell == clap_complete::Shell::Bash {
        return print(&bash_completion(&script));
    }
    print(&script)
}

/// What clap's bash script lacks: `-m`/`--model` offers the provider prefixes and the
/// configured model names (read with `config show`, honouring a `-c` already typed), not
/// file names; and completions are file names to readline (`-o filenames`), so a directory
/// gets a `/` and no space after it.
fn bash_completion(script: &str) -> String {
    let mut out = String::with_capacity(script.len() + BASH_MODELS.len());
    out.push_str(BASH_MODELS);
    let mut lines = script.lines().peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        let trimmed = line.trim();
        if trimmed == "--model)" || trimmed == "-m)" {
            if let Some(next) = lines.peek() {
                if next.trim() == "COMPREPLY=($(compgen -f \"${cur}\"))" {
                    let indent = &next[..next.len() - next.trim_start().len()];
                    out.push_str(&format!("{indent}_deerflow_models \"${{cur}}\"\n"));
                    lines.next();
                }
            }
        }
    }
    out.replace(
        "complete -F _deerflow -o",
        "complete -F _deerflow -o filenames -o",
    )
}

const BASH_MODELS: &str = r#"# -m/--model: provider prefixes (contract §1) and the models of the config in use.
_deerflow_models() {
    local cur="$1" i cfg=() names
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            -c|--config) cfg=(-c "${COMP_WORDS[i+1]}") ;;
        esac
    done
    names="$(command "${COMP_WORDS[0]}" "${cfg[@]}" config show 2>/dev/null \
        | awk '/^models:/ {m = 1; next} /^[^ -]/ {m = 0} m && /^- name: / {print $3}')"
    COMPREPLY=($(compgen -W "openai: anthropic: gemini: replay: ${names}" -- "${cur}"))
    # A provider prefix is the start of a word, not a word.
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *: ]]; then
        compopt -o nospace 2>/dev/null
    fi
}

"#;

/// One page: the top-level command, a list of the commands, then each command's synopsis
/// and options (`config` and `mcp` by their own subcommands), then exit status,
/// environment, files and examples. There are no per-command pages: every reference stays
/// inside this one.
pub fn man_page() -> std::io::Result<String> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    let commands = leaf_commands(&cmd);
    buf.extend_from_slice(b".SH COMMANDS\n");
    for (name, sub) in &commands {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        buf.extend_from_slice(
            format!(
                ".TP\n\\fB{}\\fR\n{}\n",
                roff_escape(name),
                roff_escape(&about)
            )
            .as_bytes(),
        );
    }
    for (name, sub) in commands {
        buf.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        if let Some(about) = sub.get_about() {
            buf.extend_from_slice(format!("{}\n", roff_escape(&about.to_string())).as_bytes());
        }
        let sub = sub.display_name(name.clone()).bin_name(name);
        let sub_man = clap_mangen::Man::new(sub);
        let mut part = Vec::new();
        sub_man.render_synopsis_section(&mut part)?;
        sub_man.render_options_section(&mut part)?;
        // Inside a command's section its synopsis and options are subsections.
        let part = String::from_utf8_lossy(&part)
            .replace(".SH SYNOPSIS", ".SS Synopsis")
            .replace(".SH OPTIONS", ".SS Options");
        buf.extend_from_slice(part.as_bytes());
    }
    buf.extend_from_slice(MAN_TAIL.as_bytes());
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Every command a user types, with its full name (`deerflow config check`), in the order
/// `--help` lists them; a command with subcommands stands for them.
fn leaf_commands(cmd: &clap::Command) -> Vec<(String, clap::Command)> {
    let mut out = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("deerflow {}", sub.get_name());
        let nested: Vec<_> = sub
            .get_subcommands()
            .filter(|s| s.get_name() != "help")
            .collect();
        if nested.is_empty() {
            out.push((name.clone(), sub.clone()));
        }
        for n in nested {
            out.push((format!("{name} {}", n.get_name()), n.clone()));
        }
    }
    out
}

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

const MAN_TAIL: &str = r#".SH "EXIT STATUS"
The first row that applies wins.
.TS
l l.
130	interrupted by SIGINT
143	terminated by SIGTERM (129: SIGHUP)
141	stdout was closed
124	\-\-timeout reached
2	usage error
78	configuration error
1	the run failed
8	token budget exceeded
7	the lead agent reached \-\-max\-turns
6	the lead agent asked for clarification
3	completed; a sub\-agent failed
4	completed; a sub\-agent timed out
5	completed; a sub\-agent was cancelled
0	completed; every sub\-agent completed
.TE
.SH ENVIRONMENT
.TP
\fBDEERFLOW_CONFIG\fR
config file, when \-\-config is not given
.TP
\fBDEERFLOW_MODEL\fR
the model, when \-\-model is not given
.TP
\fBOPENAI_API_KEY\fR, \fBOPENAI_BASE_URL\fR
key and endpoint for \-\-model openai:NAME (default https://api.openai.com/v1; a base URL on
127.0.0.1 or localhost needs no key)
.TP
\fBANTHROPIC_API_KEY\fR, \fBANTHROPIC_BASE_URL\fR
key and endpoint for \-\-model anthropic:NAME (default https://api.anthropic.com)
.TP
\fBGEMINI_API_KEY\fR, \fBGEMINI_BASE_URL\fR
key and endpoint for \-\-model gemini:NAME (default https://generativelanguage.googleapis.com)
.TP
\fBDOCKER_HOST\fR
the Docker daemon for sandbox.use: docker (default: the local socket)
.TP
\fBTAVILY_API_KEY\fR, \fBBRAVE_SEARCH_API_KEY\fR, \fBSERPER_API_KEY\fR, \fBEXA_API_KEY\fR, \fBFIRECRAWL_API_KEY\fR, \fBJINA_API_KEY\fR
keys of the web tools' backends (\-\-web, the config's tools: entries); \-\-web picks the
first search backend whose key is set, else DuckDuckGo
.TP
\fBXDG_CONFIG_HOME\fR, \fBHOME\fR
where the config file is looked up
.TP
\fBDEERFLOW_LOG\fR, \fBRUST_LOG\fR
log level on stderr (error, warn, info, debug, trace, or target=level directives); DEERFLOW_LOG wins
.TP
\fBNO_COLOR\fR
no colour on stderr
.SH FILES
\fI./deerflow.yaml\fR, \fI$XDG_CONFIG_HOME/deerflow/config.yaml\fR, \fI~/.config/deerflow/config.yaml\fR
.SH EXAMPLES
.TP
\fBdeerflow run \-\-json \-m openai:gpt\-4o\-mini "Summarize the open TODOs" > events.ndjson\fR
run a task and keep the event stream; the exit code tells how it ended
.TP
\fBdeerflow run \-o answer.md \-\-timeout 10m \-\-allow\-bash "Run the tests and explain the failures"\fR
write the final answer to a file; give up after ten minutes
.TP
\fBdeerflow run \-m replay:examples/hello.json "Describe this repository"\fR
replay a recorded run offline (\-\-record FILE writes one)
.TP
\fBdeerflow config check \-\-set subagents.timeout_seconds=60 \-\-mcp\-config .mcp.json\fR
check exactly the configuration a run with the same flags would use
.TP
\fBdeerflow mcp list \-\-json\fR
start each configured MCP server, list its tools, stop it
.TP
\fBdeerflow completions bash > ~/.local/share/bash\-completion/completions/deerflow\fR
install the bash completion
"#;

pub fn man() -> i32 {
    match man_page() {
        Ok(s) => print(&s),
        Err(e) => {
            crate::logging::stderr_line(&format!("deerflow: cannot render the man page: {e}"));
            EXIT_FAILED
        }
    }
}
