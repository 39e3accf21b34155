//! Large tool outputs (contract §10, DeerFlow's `tool_output`): a result longer than
//! `externalize_min_chars` is written whole to a run-scoped directory outside the workspace,
//! and the history keeps its head and tail with the path the tools read it by,
//! `/mnt/tool-results/<call_id>.txt` (read-only, like `/mnt/skills`).

use std::io::Write;
use std::path::PathBuf;

use deerflow_base::text::{cut, Keep};
use deerflow_model::ToolCall;
use deerflow_workspace::paths::VIRTUAL_TOOL_RESULTS;

/// What of an externalized result stays in the history.
const HEAD_CHARS: usize = 2_000;
const TAIL_CHARS: usize = 1_000;

pub struct ToolResultStore {
    /// The run's directory (the workspace maps `/mnt/tool-results` onto it).
    pub dir: PathBuf,
    pub min_chars: usize,
    /// Tools whose results always stay inline (`read_file`: reading a stored result back
    /// must not store it again).
    pub exempt: Vec<String>,
}

impl ToolResultStore {
    /// The text the history keeps for `content`: itself, or its head and tail with the path
    /// of the whole. A file that cannot be written leaves the result inline.
    pub fn admit(&self, call: &ToolCall, content: String) -> String {
        if self.exempt.contains(&call.name) {
            return content;
        }
        // Counting characters only when the bytes could exceed the limit.
        if content.len() <= self.min_chars {
            return content;
        }
        let total = content.chars().count();
        if total <= self.min_chars {
            return content;
        }
        let name = match self.write(&file_stem(&call.id), &content) {
            Ok(name) => name,
            Err(e) => {
                deerflow_base::logging::warn(&format!(
                    "cannot store the result of tool call {} ({e}); it stays inline",
                    call.id
                ));
                return content;
            }
        };
        let note = format!(
            "[deerflow] This result is {total} characters long. It was saved whole to \
             {VIRTUAL_TOOL_RESULTS}/{name} (read-only): read parts of it with read_file \
             (start_line/end_line) or search it with grep."
        );
        // A low `externalize_min_chars` can store a result shorter than head + tail.
        if total <= HEAD_CHARS + TAIL_CHARS {
            return format!("{note}\n{content}");
        }
        let head = cut(&content, HEAD_CHARS, Keep::Head).head;
        let tail = cut(&content, TAIL_CHARS, Keep::Tail).tail;
        let omitted = total - HEAD_CHARS - TAIL_CHARS;
        format!(
            "{note} Its start and end follow.\n{head}\n... [{omitted} characters not shown] ...\n{tail}"
        )
    }

    /// Writes `content` as `<stem>.txt`, or `<stem>-2.txt`, … when that name is taken: call
    /// ids are unique within one agent's transcript only, and sub-agents share the directory.
    /// Returns the file name.
    fn write(&self, stem: &str, content: &str) -> std::io::Result<String> {
        std::fs::create_dir_all(&self.dir)?;
        let mut n = 1;
        loop {
            let name = if n == 1 {
                format!("{stem}.txt")
            } else {
                format!("{stem}-{n}.txt")
            };
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.dir.join(&name));
            match opened {
                Ok(mut f) => {
                    f.write_all(content.as_bytes())?;
                    return Ok(name);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A call id as a file name: ids come from the model and may hold anything.
fn file_stem(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if s.is_empty() {
        "result".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}).into(),
            invalid_arguments: None,
            extra: Default::default(),
        }
    }

    fn store(dir: &std::path::Path) -> ToolResultStore {
        ToolResultStore {
            dir: dir.join("results"),
            min_chars: 100,
            exempt: vec!["read_file".into()],
        }
    }

    #[test]
    fn a_large_result_is_stored_whole_and_shown_by_head_and_tail() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        let big: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let shown = s.admit(&call("call/1", "bash"), big.clone());
        let stored = std::fs::read_to_string(d.path().join("results/call_1.txt")).unwrap();
        assert_eq!(stored, big);
        assert!(shown.contains("/mnt/tool-results/call_1.txt"), "{shown}");
        assert!(shown.contains("line 0\n") && shown.contains("line 1999\n"));
        assert!(!shown.contains("line 1000\n"));
        assert!(shown.chars().count() < HEAD_CHARS + TAIL_CHARS + 400);
    }

    #[test]
    fn the_same_call_id_from_two_agents_gets_two_files() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        let one = s.admit(&call("c1", "bash"), "1".repeat(200));
        let two = s.admit(&call("c1", "grep"), "2".repeat(200));
        assert!(one.contains("/mnt/tool-results/c1.txt"), "{one}");
        assert!(two.contains("/mnt/tool-results/c1-2.txt"), "{two}");
        // Shorter than head + tail: the model sees it all, with the path.
        assert!(two.ends_with(&format!("\n{}", "2".repeat(200))), "{two}");
        let read = |n: &str| std::fs::read_to_string(d.path().join("results").join(n)).unwrap();
        assert_eq!(read("c1.txt"), "1".repeat(200));
        assert_eq!(read("c1-2.txt"), "2".repeat(200));
    }

    #[test]
    fn small_and_exempt_results_stay_inline() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path());
        assert_eq!(s.admit(&call("a", "bash"), "short".into()), "short");
        // 100 characters is not over the limit, even in multi-byte characters.
        let exact = "é".repeat(100);
        assert_eq!(s.admit(&call("b", "bash"), exact.clone()), exact);
        let big = "x".repeat(500);
        assert_eq!(s.admit(&call("c", "read_file"), big.clone()), big);
        assert!(!d.path().join("results").exists());
    }

    #[test]
    fn an_unwritable_directory_leaves_the_result_inline() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("results"), "a file in the way").unwrap();
        let big = "y".repeat(500);
        assert_eq!(store(d.path()).admit(&call("c", "bash"), big.clone()), big);
    }
}
