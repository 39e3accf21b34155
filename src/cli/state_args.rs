//! `--state DIR` (contract §15): what the run is for, in the terms of the ledger's first
//! line, and the directory opened (locked, read back) before `run_started`. Every problem
//! with it — another deerflow holding it, a corrupt line, a ledger written for another run
//! — is a usage error.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;

use super::args::RunArgs;
use super::error::usage;
use crate::run::state::hash::fingerprint;
use crate::run::state::{Purpose, StateDir};

/// Opens `--state` for a run of `prompt` on `model` (as named in events); `agent` is the
/// `--each` type, `None` for a lead run.
pub fn open(
    args: &RunArgs,
    cwd: &Path,
    prompt: &str,
    agent: Option<&str>,
    model: &str,
) -> Result<Option<Arc<StateDir>>> {
    let Some(dir) = &args.state else {
        return Ok(None);
    };
    let contents = |flag: &str, p: &Path| {
        std::fs::read(cwd.join(p))
            .map(|b| fingerprint(&b))
            .map_err(|e| usage(format!("{flag} {}: {e}", p.display())))
    };
    let output_schema = match &args.output_schema {
        Some(p) => Some(contents("--output-schema", p)?),
        None => None,
    };
    let images = args
        .image
        .iter()
        .map(|p| contents("--image", p))
        .collect::<Result<Vec<_>>>()?;
    let purpose = Purpose {
        prompt: prompt.to_string(),
        each: args.each.is_some(),
        agent: agent.map(str::to_string),
        model: model.to_string(),
        output_schema,
        images,
        shard: args.shard.clone(),
    };
    // `--record` writes the responses of the tasks taken from the ledger too (§15).
    let state = StateDir::open(dir, &purpose, args.record.is_some()).map_err(usage)?;
    Ok(Some(Arc::new(state)))
}
