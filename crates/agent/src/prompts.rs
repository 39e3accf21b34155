//! System prompts, written for this project.

/// A sub-agent type as the lead's delegation guidance lists it.
pub struct DelegationInfo {
    pub max_concurrent: u32,
    pub types: Vec<(String, String)>,
}

/// The workspace notes every agent gets.
pub fn workspace_notes(bash_allowed: bool) -> String {
    let mut s = String::from(
        "## Workspace\n\
         You work in a workspace directory. Tool paths are relative to it (absolute paths inside it \
         also work; `/mnt/user-data/workspace/...` is the workspace, `/mnt/user-data/outputs/...` is its \
         `outputs/` directory, and `/mnt/skills/...` holds read-only skills). Paths outside the \
         workspace are refused. Nobody can answer questions during the run: work with what you have.\n",
    );
    if !bash_allowed {
        s.push_str("Shell commands are not available in this run.\n");
    }
    s
}

pub fn lead_system(bash_allowed: bool, delegation: Option<&DelegationInfo>) -> String {
    let mut s = String::from(
        "You are deerflow's lead agent, running unattended inside a script or CI job. \
         Complete the user's task with the tools you have, then reply with a concise final answer \
         (no tool calls). Read before you write; keep edits minimal; say what you changed. \
         Use ask_clarification only when the task cannot be done without an answer: it ends the run. \
         Use present_files to mark files you produced as the run's outputs.\n\n",
    );
    s.push_str(&workspace_notes(bash_allowed));
    if let Some(d) = delegation {
        s.push('\n');
        s.push_str(&delegation_guidance(d));
    }
    s
}

fn delegation_guidance(d: &DelegationInfo) -> String {
    let mut s = format!(
        "## Delegating to sub-agents\n\
         The `task` tool starts a sub-agent that works on a self-contained sub-task in the same \
         workspace and reports back. Delegate only when it clearly helps: independent parts that \
         can run in parallel, work that needs a specialist, or a large exploration whose details \
         would crowd your context. Do not delegate dependent steps, trivial work, or anything you \
         could answer directly.\n\
         - Put at most {n} task calls in one response; they run in parallel. More sub-tasks go in \
         later batches: look at each batch's results before you plan the next.\n\
         - A sub-agent sees only its `prompt`: make it self-contained (goal, files, constraints, \
         the form of the answer). `description` is a 3-5 word label.\n\
         - Results come back as the tool results; no polling is needed.\n\
         - Finally, synthesize the results into one answer; do not just paste them.\n\
         Available sub-agent types:\n",
        n = d.max_concurrent
    );
    for (name, desc) in &d.types {
        s.push_str(&format!("- `{name}`: {desc}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guidance_lists_types_and_batch_size() {
        let d = DelegationInfo {
            max_concurrent: 4,
            types: vec![("general-purpose".into(), "does things".into())],
        };
        let s = lead_system(false, Some(&d));
        assert!(s.contains("at most 4 task calls"));
        assert!(s.contains("`general-purpose`: does things"));
        assert!(s.contains("not available"));
        assert!(!lead_system(true, None).contains("task` tool"));
    }
}
