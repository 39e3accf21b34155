//! Call ids unique within one agent's transcript (contract §3: the task id is the call id,
//! made unique by the harness if the model repeats or omits it).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use deerflow_model::ToolCall;

/// The ids given so far in one transcript.
///
/// The ids are remembered by a 64-bit hash, not copied: a fan-out's transcript holds its
/// ids once. Two different ids with one hash (about 1 in 10^10 over 100,000 ids) only cost
/// the second a needless suffix.
#[derive(Debug, Default)]
pub(super) struct CallIds {
    seen: HashSet<u64>,
    /// For each id that came again, the next suffix to try: without it the n-th repeat
    /// of one id tried `-2` … `-n` first, and 10,000 repeats took 14.6 s (issue 20).
    next_suffix: HashMap<u64, u64>,
}

impl CallIds {
    /// Gives every call an id unique in this transcript: a repeated id gets a `-2`, `-3`, …
    /// suffix and a missing one `call_<turn>_<n>`, so `tool_call`, `tool_result`, the task
    /// id and the provider's transcript all agree.
    ///
    /// Linear overall: a suffix is skipped only when the id it makes is already taken, and
    /// each taken id is `BASE-K` for one base only, so it is skipped at most once.
    pub(super) fn assign(&mut self, calls: &mut [ToolCall], turn: usize) {
        for (i, c) in calls.iter_mut().enumerate() {
            if c.id.trim().is_empty() {
                c.id = format!("call_{turn}_{}", i + 1);
            }
            let base = hash(&c.id);
            if self.seen.insert(base) {
                continue;
            }
            let k = self.next_suffix.entry(base).or_insert(2);
            let id = loop {
                let candidate = format!("{}-{k}", c.id);
                *k += 1;
                if self.seen.insert(hash(&candidate)) {
                    break candidate;
                }
            };
            c.id = id;
        }
    }
}

fn hash(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn ids(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.id.as_str()).collect()
    }

    fn calls(ids: &[&str]) -> Vec<ToolCall> {
        ids.iter()
            .map(|id| ToolCall::new(*id, "ls", serde_json::json!({})))
            .collect()
    }

    #[test]
    fn repeats_get_suffixes_past_ids_already_taken() {
        let mut seen = CallIds::default();
        let mut first = calls(&["x", "x-2", "x", "", "x"]);
        seen.assign(&mut first, 1);
        assert_eq!(ids(&first), ["x", "x-2", "x-3", "call_1_4", "x-4"]);
        let mut second = calls(&["x", "x-3", "call_1_4"]);
        seen.assign(&mut second, 2);
        assert_eq!(ids(&second), ["x-5", "x-3-2", "call_1_4-2"]);
    }

    /// 10,000 copies of one id took 14.6 s when each repeat tried every suffix before its
    /// own; linear, it is a few milliseconds (a generous bound for a loaded debug build).
    #[test]
    fn ten_thousand_repeats_of_one_id_are_linear() {
        let mut many = calls(&vec!["dup"; 10_000]);
        let start = Instant::now();
        CallIds::default().assign(&mut many, 1);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(many[9_999].id, "dup-10000");
        let unique: HashSet<&str> = many.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(unique.len(), 10_000);
    }
}
