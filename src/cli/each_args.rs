//! The `--each` flags of `deerflow run` (contract §15), checked before anything is read:
//! `--agent`, `--results` and `--shard` need `--each`; `--results` may not name stdout
//! under `--json`; the input is opened now, so a missing file is a usage error.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::args::RunArgs;
use super::error::usage;
use crate::run::each::items::Shard;
use crate::run::output_file;

/// The checked `--each` flags, the input opened.
pub struct EachInputs {
    pub input: Box<dyn Read + Send>,
    pub agent: String,
    pub shard: Shard,
    pub results: Option<PathBuf>,
    /// The input's path when it is a regular file (the live view counts its items).
    pub count_path: Option<PathBuf>,
}

/// The type items run as when `--agent` is not given.
pub const DEFAULT_AGENT: &str = "general-purpose";

pub fn check(args: &RunArgs) -> Result<Option<EachInputs>> {
    let Some(each) = &args.each else {
        for (given, flag) in [
            (args.agent.is_some(), "--agent"),
            (args.results.is_some(), "--results"),
            (args.shard.is_some(), "--shard"),
        ] {
            if given {
                return Err(usage(format!("{flag} needs --each FILE")));
            }
        }
        return Ok(None);
    };
    let shard = match &args.shard {
        Some(s) => Shard::parse(s).map_err(usage)?,
        None => Shard::WHOLE,
    };
    if let Some(path) = &args.results {
        if args.json && output_file::names_stdout(path) {
            return Err(usage(format!(
                "--results {} names stdout, which carries the events under --json; \
                 give a file",
                path.display()
            )));
        }
        output_file::check(path).map_err(|why| {
            let sep = if why.starts_with("is a ") { " " } else { ": " };
            usage(format!("--results {}{sep}{why}", path.display()))
        })?;
    }
    for (out, flag) in [(&args.results, "--results"), (&args.record, "--record")] {
        if let Some(out) = out.as_deref().filter(|o| same_file(each, o)) {
            return Err(usage(format!(
                "{flag} {} is the --each input: writing it would destroy the items; \
                 give another file",
                out.display()
            )));
        }
    }
    if args.output_last_message.is_some() {
        return Err(usage(
            "--output-last-message has no final answer to write with --each \
             (each item's answer goes to --results)",
        ));
    }
    let agent = args.agent.clone().unwrap_or_else(|| DEFAULT_AGENT.into());
    if agent.trim().is_empty() {
        return Err(usage("--agent is empty: name a sub-agent type"));
    }
    let count_path = (each.as_os_str() != "-" && each.is_file()).then(|| each.clone());
    Ok(Some(EachInputs {
        input: open(each, args)?,
        agent,
        shard,
        results: args.results.clone(),
        count_path,
    }))
}

/// Whether writing `out` would replace the `--each` input: the same regular file by any
/// name (a link, or the file stdin was redirected from).
fn same_file(each: &Path, out: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let each = if each.as_os_str() == "-" {
        Path::new("/dev/stdin")
    } else {
        each
    };
    match (std::fs::metadata(each), std::fs::metadata(out)) {
        (Ok(a), Ok(b)) => a.is_file() && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The items' source. With `--each -` the prompt cannot come from stdin too.
fn open(each: &Path, args: &RunArgs) -> Result<Box<dyn Read + Send>> {
    if each.as_os_str() == "-" {
        let prompt_from_stdin = match (&args.prompt_arg, &args.prompt, &args.prompt_file) {
            (Some(p), _, _) | (None, Some(p), _) => p == "-",
            (None, None, Some(f)) => f.as_os_str() == "-",
            (None, None, None) => true,
        };
        if prompt_from_stdin {
            return Err(usage(
                "--each - reads the items from stdin: give the prompt as PROMPT, -p TEXT or \
                 --prompt-file FILE",
            ));
        }
        if std::io::stdin().is_terminal() {
            return Err(usage(
                "--each - reads the items from stdin, which is a terminal: pipe them in",
            ));
        }
        return Ok(Box::new(std::io::stdin()));
    }
    if each.is_dir() {
        return Err(usage(format!(
            "--each {} is a directory; give a file",
            each.display()
        )));
    }
    let f = std::fs::File::open(each)
        .map_err(|e| usage(format!("cannot read --each {}: {e}", each.display())))?;
    Ok(Box::new(f))
}
