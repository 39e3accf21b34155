//! `deerflow config check|show`.

use std::path::PathBuf;

use serde_json::json;

use super::args::ConfigAction;
use super::docs::print;
use super::tool_name_warnings;
use crate::config;
use crate::outcome::{EXIT_CONFIG, EXIT_OK};

pub fn config(config_path: Option<PathBuf>, action: ConfigAction) -> i32 {
    let (ConfigAction::Check { overrides, .. } | ConfigAction::Show { overrides, .. }) = &action;
    let opts = overrides.load_options(config_path);
    if let ConfigAction::Check { json, .. } = action {
        return check(&opts, json);
    }
    // The tool entries are judged as a run would (§14), so the notes are the same.
    let (loaded, _web) = match super::web::load_listed(&opts) {
        Ok(l) => l,
        Err(code) => return code,
    };
    match action {
        ConfigAction::Check { .. } => EXIT_OK,
        ConfigAction::Show { json: true, .. } => {
            print(&serde_json::to_string_pretty(&config::show_json(&loaded)).unwrap_or_default())
        }
        ConfigAction::Show { json: false, .. } => print(&config::show_yaml(&loaded)),
    }
}

fn check(opts: &config::LoadOptions, as_json: bool) -> i32 {
    let report = match config::load(opts) {
        // The tool-name notes go where the loader's own notes are, before the models'.
        Ok(mut loaded) => {
            let notes = tool_name_warnings(&loaded.config);
            loaded.warnings.extend(notes);
            // The configured tools deerflow cannot serve are listed; an offered entry's
            // problem fails every run, so it is a problem here.
            let web = super::web::web_tools(&mut loaded, false);
            if let Ok(web) = &web {
                let unavailable = web.unavailable.iter().map(|u| u.message());
                loaded.warnings.extend(unavailable);
            }
            let mut report = config::check_report(&loaded);
            if let Err(e) = web {
                report.problems.extend(e.problems());
            }
            // So is an enabled MCP server in a build without MCP.
            if let Err(e) = super::features::check_mcp(&loaded.config) {
                report.problems.extend(e.problems());
            }
            // A sandbox this machine cannot provide fails every run, so it is a problem here.
            let here = std::env::current_dir().unwrap_or_else(|_| loaded.base_dir.clone());
            let skills = loaded.skills_dir();
            if let Err(e) = super::run::sandbox_of(&loaded.config.sandbox, &here, &skills) {
                report.problems.extend(e.problems());
            }
            report
        }
        Err(e) => config::CheckReport::failed(&e),
    };
    let code = if report.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_CONFIG
    };
    let source = config::config_source(opts).map(|p| p.display().to_string());
    if as_json {
        let v = json!({"ok": code == EXIT_OK, "source": source, "problems": report.problems, "warnings": report.warnings});
        let printed = print(&serde_json::to_string_pretty(&v).unwrap_or_default());
        return if printed == EXIT_OK { code } else { printed };
    }
    // A failed check is one line on stderr like every other configuration error (§1),
    // listing every problem; warnings are printed only when nothing is wrong.
    if !report.problems.is_empty() {
        let n = report.problems.len();
        let list = report.problems.join("; ");
        let head = if n == 1 {
            String::new()
        } else {
            format!("{n} problems: ")
        };
        crate::logging::stderr_line(&format!(
            "deerflow: config error: {head}{}",
            crate::text::escape_controls(&list.replace('\n', " "))
        ));
        return code;
    }
    for w in &report.warnings {
        super::warning(w);
    }
    let from = source.unwrap_or_else(|| "built-in defaults (no config file found)".into());
    print(&format!("config ok: {from}"))
}
