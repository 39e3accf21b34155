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
    print(&String::from_utf8_lossy(&buf))
}

/// One page: the top-level command, then each subcommand's synopsis and options, then
/// exit status, environment and files.
pub fn man_page() -> std::io::Result<String> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    man.render_subcommands_section(&mut buf)?;
    for sub in cmd.get_subcommands() {
        let name = format!("deerflow-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(name.clone())
            .bin_name(name.clone());
        buf.extend_from_slice(
            format!(".SH \"{}\"\n", name.replace('-', " ").to_uppercase()).as_bytes(),
        );
        if let Some(about) = sub.get_about() {
            buf.extend_from_slice(format!("{}\n", roff_escape(&about.to_string())).as_bytes());
        }
        let sub_man = clap_mangen::Man::new(sub);
        sub_man.render_synopsis_section(&mut buf)?;
        sub_man.render_options_section(&mut buf)?;
    }
    buf.extend_from_slice(MAN_TAIL.as_bytes());
    Ok(String::from_utf8_lossy(&buf).into_owned())
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
\fBOPENAI_API_KEY\fR, \fBOPENAI_BASE_URL\fR, \fBANTHROPIC_API_KEY\fR, \fBANTHROPIC_BASE_URL\fR
keys and endpoints for \-\-model openai:NAME and anthropic:NAME
.TP
\fBDEERFLOW_LOG\fR, \fBRUST_LOG\fR
log level on stderr (error, warn, info, debug, trace)
.TP
\fBNO_COLOR\fR
no colour on stderr
.SH FILES
\fI./deerflow.yaml\fR, \fI$XDG_CONFIG_HOME/deerflow/config.yaml\fR, \fI~/.config/deerflow/config.yaml\fR
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
