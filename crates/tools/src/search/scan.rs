//! `grep`'s search of the files a walk found: in parallel and in path order, each file
//! passed over in one scan of its bytes when a prefilter shows it cannot match.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use regex::{Regex, RegexBuilder};
use tokio_util::sync::CancellationToken;

use crate::fs::looks_binary;
use crate::walk::{walk_threads, Cancelled};

/// Files larger than this are skipped by grep (generated data, logs, bundles).
pub(super) const GREP_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Matched lines are cut to this many characters.
const GREP_LINE_CHARS: usize = 200;

/// What a grep looks for in each line, and how many lines it shows at most.
pub(super) struct LineSearch {
    regex: Regex,
    /// Finds the files that may match in one pass over their bytes; `None` when the pattern
    /// could match a line on its own but not inside the whole file (see [`prefilter`]).
    prefilter: Option<regex::bytes::Regex>,
    pub(super) max: usize,
}

impl LineSearch {
    /// The regex `source`, case-insensitive unless `case_sensitive`.
    pub(super) fn new(
        source: &str,
        case_sensitive: bool,
        max: usize,
    ) -> Result<LineSearch, regex::Error> {
        let regex = RegexBuilder::new(source)
            .case_insensitive(!case_sensitive)
            .build()?;
        let prefilter = prefilter(source, case_sensitive);
        Ok(LineSearch {
            regex,
            prefilter,
            max,
        })
    }

    /// Matching lines of `files` in order, up to `max`. Files are searched in parallel, taken
    /// in order; once the files searched without a gap hold more than `max` lines the rest is
    /// left alone, so the answer is the one a search file by file would give.
    pub(super) fn search<'f>(
        &self,
        files: &'f [PathBuf],
        cancel: &CancellationToken,
    ) -> Result<Found<'f>, Cancelled> {
        let next = AtomicUsize::new(0);
        let enough = AtomicBool::new(false);
        let progress = Mutex::new(Progress {
            results: files.iter().map(|_| None).collect(),
            done: 0,
            hits: 0,
        });
        let worker = || {
            // One buffer per thread: files are at most 1 MB, read into memory they already
            // hold (mmap costs more than it saves on files this small).
            let mut buf = Vec::new();
            while !enough.load(Ordering::Relaxed) && !cancel.is_cancelled() {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(file) = files.get(i) else { break };
                let result = self.search_file(file, &mut buf);
                let mut p = progress.lock().unwrap_or_else(PoisonError::into_inner);
                p.results[i] = Some(result);
                while let Some(Some(done)) = p.results.get(p.done) {
                    let n = match done {
                        FileResult::Hits(hits) => hits.len(),
                        FileResult::TooLarge | FileResult::Nothing => 0,
                    };
                    p.hits += n;
                    p.done += 1;
                }
                if p.hits > self.max {
                    enough.store(true, Ordering::Relaxed);
                }
            }
        };
        let threads = walk_threads().min(files.len());
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(worker);
            }
            worker();
        });
        if cancel.is_cancelled() {
            return Err(Cancelled);
        }
        let results = progress
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .results;
        let mut found = Found::default();
        // Every file before the cut was searched, so the first gap comes after it.
        for (file, result) in files.iter().zip(results) {
            match result {
                None => break,
                Some(FileResult::Nothing) => {}
                Some(FileResult::TooLarge) => found.too_large.push(file),
                Some(FileResult::Hits(hits)) => {
                    for (n, line) in hits {
                        if found.hits.len() == self.max {
                            found.cut = true;
                            return Ok(found);
                        }
                        found.hits.push((file, n, line));
                    }
                }
            }
        }
        Ok(found)
    }

    /// One file's matching lines (at most `max + 1`: more are never shown).
    fn search_file(&self, path: &Path, buf: &mut Vec<u8>) -> FileResult {
        let Ok(mut file) = std::fs::File::open(path) else {
            return FileResult::Nothing;
        };
        let Ok(meta) = file.metadata() else {
            return FileResult::Nothing;
        };
        if meta.len() > GREP_MAX_FILE_BYTES {
            return FileResult::TooLarge;
        }
        buf.clear();
        if std::io::Read::read_to_end(&mut file, buf).is_err() {
            return FileResult::Nothing;
        }
        // Most files do not match: one scan of the bytes settles them, before any check of
        // whether they are text (a binary or non-UTF-8 file shows nothing either way).
        if let Some(pre) = &self.prefilter {
            if !pre.is_match(buf) {
                return FileResult::Nothing;
            }
        }
        if looks_binary(buf) {
            return FileResult::Nothing;
        }
        let Ok(text) = std::str::from_utf8(buf) else {
            return FileResult::Nothing;
        };
        let hits: Vec<(usize, String)> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| self.regex.is_match(line))
            .take(self.max + 1)
            .map(|(n, line)| (n + 1, clip_line(line)))
            .collect();
        if hits.is_empty() {
            FileResult::Nothing
        } else {
            FileResult::Hits(hits)
        }
    }
}

/// What one grep found: hits as (file, line number, clipped line), whether it stopped at
/// `max_results`, and the files it did not search because of their size.
#[derive(Default)]
pub(super) struct Found<'f> {
    pub(super) hits: Vec<(&'f Path, usize, String)>,
    pub(super) cut: bool,
    pub(super) too_large: Vec<&'f Path>,
}

/// What grep found in one file.
enum FileResult {
    /// Matching lines: (line number, clipped line).
    Hits(Vec<(usize, String)>),
    /// Over [`GREP_MAX_FILE_BYTES`]: named in the report as not searched.
    TooLarge,
    /// No match, or binary, not UTF-8, or unreadable.
    Nothing,
}

/// The parallel search's shared state: each file's result by index, and how many files from
/// the first are done without a gap, with their matching lines.
struct Progress {
    results: Vec<Option<FileResult>>,
    done: usize,
    hits: usize,
}

/// A regex that matches somewhere in a file whenever `source` matches one of its lines, so a
/// file it does not match can be passed over without splitting it into lines. It is `source`
/// with `^`/`$` at line boundaries (`\r\n` too, as `str::lines` strips the `\r`); whatever it
/// matches more is checked line by line. Patterns that pin a match to the whole haystack
/// (`\A`, `\z`) or turn those modes off (`(?-m)`, `(?-R)`) get no prefilter.
fn prefilter(source: &str, case_sensitive: bool) -> Option<regex::bytes::Regex> {
    let pins = source.contains("\\A") || source.contains("\\z");
    let turns_off = source.match_indices("(?").any(|(i, _)| {
        source[i + 2..]
            .chars()
            .find(|c| !c.is_ascii_alphabetic())
            .is_some_and(|c| c == '-')
    });
    if pins || turns_off {
        return None;
    }
    regex::bytes::RegexBuilder::new(source)
        .case_insensitive(!case_sensitive)
        .multi_line(true)
        .crlf(true)
        .build()
        .ok()
}

fn clip_line(line: &str) -> String {
    let line = line.trim_end_matches('\r');
    deerflow_base::text::cut(line, GREP_LINE_CHARS, deerflow_base::text::Keep::Head)
        .marked_with("...")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line the pattern matches on its own is in a file the prefilter matches.
    #[test]
    fn prefilter_never_passes_over_a_matching_file() {
        let text = "first\r\nab\r\n\nword end\nlast\r";
        let patterns = [
            "^ab$", "b$", "^$", "\\bend$", "^word", "t$", "^last\r$", "st\r", "\\Bnd", "(?i)^AB",
            "(?:ab)$", "[^x]$", "\\s$",
        ];
        for p in patterns {
            let line_re = Regex::new(p).unwrap();
            let matches_a_line = text.lines().any(|l| line_re.is_match(l));
            let pre = prefilter(p, true).unwrap_or_else(|| panic!("{p}: no prefilter"));
            assert!(!matches_a_line || pre.is_match(text.as_bytes()), "{p}");
        }
        for p in ["\\Afirst", "last\\z", "(?-m)^ab", "(?i-R)b$", "(?x-m)^ab"] {
            assert!(prefilter(p, true).is_none(), "{p}");
        }
    }

    #[test]
    fn clip_line_is_char_safe() {
        let line = "é".repeat(250);
        assert_eq!(clip_line(&line), format!("{}...", "é".repeat(200)));
        assert_eq!(clip_line("short\r"), "short");
    }
}
