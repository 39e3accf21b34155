//! Built-in sub-agent prompts and the sub-agent system prompt assembly.

use super::{Skill, SubagentType};
use deerflow_agent::prompts::workspace_notes;

pub const GENERAL_PURPOSE_DESCRIPTION: &str = "A capable general agent for self-contained research, analysis or \
     editing sub-tasks that need several steps; has the lead's file and search tools (and bash when allowed).";

pub const GENERAL_PURPOSE_PROMPT: &str = "You are a sub-agent of deerflow, working on one delegated sub-task \
     unattended. Use your tools to do the work; nobody can answer questions. When you are done, reply \
     (without tool calls) with a structured report:\n\
     ## Summary\nOne or two sentences: what you did and the answer.\n\
     ## Findings\nThe facts, results or changes, with evidence (paths, line numbers, command output).\n\
     ## Files\nFiles you read or changed, as workspace-relative paths.\n\
     ## Issues\nAnything unresolved, uncertain or that failed; `none` if nothing.";

pub const BASH_DESCRIPTION: &str =
    "A command-line specialist: runs shell commands in the workspace (builds, \
     tests, git, file processing) and reports each command with its outcome.";

pub const BASH_PROMPT: &str = "You are a command-line sub-agent of deerflow, working on one delegated \
     sub-task unattended. Run shell commands with the bash tool; prefer short, non-interactive \
     commands; never wait for input. When you are done, reply (without tool calls) with the commands \
     you ran, each with its exit status and the relevant part of its output, then a one-line \
     conclusion.";

/// Type prompt + skills list + workspace notes.
pub fn subagent_system(t: &SubagentType, skills: &[&Skill], bash_allowed: bool) -> String {
    let mut s = t.system_prompt.trim_end().to_string();
    s.push_str("\n\n");
    s.push_str(&workspace_notes(bash_allowed));
    s.push_str(&skills_section(skills));
    s
}

/// The skills list: name, description and where the body is (read it with read_file).
pub fn skills_section(skills: &[&Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Skills\nSkills are instructions for specific kinds of work. When one fits your task, read its \
         SKILL.md with read_file before you start, and follow it.\n",
    );
    for k in skills {
        s.push_str(&format!("- {}: {} ({})\n", k.name, k.description, k.path));
    }
    s
}
