//! `read_file`'s reader: a file streamed in chunks, keeping only the lines asked for and
//! only up to the output limit (contract §12: memory bounded by the output, whatever the
//! file's size). What lies past the limit is counted, not kept; reading stops after the
//! last line asked for.

use std::io::Read;

/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub enum Excerpt {
    /// The text kept and how many characters of the range were cut after it.
    Text { kept: String, cut: usize },
    /// The range is not in the file (the message the model sees).
    BadRange(String),
    /// NUL bytes near the start or invalid UTF-8 anywhere read.
    Binary,
}

/// Reads lines `start..=end` (1-based; both optional) of `source`, at most `max_chars`
/// characters of them. `sniff` bytes at the start are checked for NUL (binary files).
pub fn read_range(
    mut source: impl Read,
    start: Option<u64>,
    end: Option<u64>,
    max_chars: usize,
    sniff: usize,
) -> std::io::Result<Excerpt> {
    let first = start.unwrap_or(1);
    if start == Some(0) || end == Some(0) {
        return Ok(Excerpt::BadRange(
            "Error: line numbers are 1-based; start_line and end_line must be at least 1".into(),
        ));
    }
    if let Some(end) = end.filter(|e| *e < first) {
        return Ok(Excerpt::BadRange(format!(
            "Error: start_line ({first}) is after end_line ({end})"
        )));
    }
    let mut state = State {
        ranged: start.is_some() || end.is_some(),
        first,
        last: end,
        max_chars,
        line: 1,
        kept: String::new(),
        kept_chars: 0,
        cut: 0,
        seen_any: false,
        at_line_start: true,
    };
    let mut buf = vec![0u8; CHUNK];
    let mut carry: Vec<u8> = Vec::new();
    let mut read_so_far = 0usize;
    loop {
        let n = source.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if read_so_far < sniff && buf[..n.min(sniff - read_so_far)].contains(&0) {
            return Ok(Excerpt::Binary);
        }
        read_so_far += n;
        carry.extend_from_slice(&buf[..n]);
        let valid = match std::str::from_utf8(&carry) {
            Ok(_) => carry.len(),
            // An incomplete character at the end waits for the next chunk.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => return Ok(Excerpt::Binary),
        };
        let text = std::str::from_utf8(&carry[..valid]).unwrap_or_default();
        if state.take(text) {
            return Ok(state.finish(true));
        }
        carry.drain(..valid);
    }
    if !carry.is_empty() {
        return Ok(Excerpt::Binary);
    }
    Ok(state.finish(false))
}

struct State {
    /// A line range was asked for (a whole read of an empty file is no error).
    ranged: bool,
    first: u64,
    last: Option<u64>,
    max_chars: usize,
    /// The line the next character belongs to.
    line: u64,
    kept: String,
    kept_chars: usize,
    cut: usize,
    /// Any character read at all (an empty file has no lines).
    seen_any: bool,
    at_line_start: bool,
}

impl State {
    /// Takes text; true once every line asked for has been read.
    fn take(&mut self, text: &str) -> bool {
        for c in text.chars() {
            self.seen_any = true;
            self.at_line_start = false;
            if self.last.is_some_and(|l| self.line > l) {
                return true;
            }
            if self.line >= self.first {
                if self.kept_chars < self.max_chars {
                    self.kept.push(c);
                    self.kept_chars += 1;
                } else {
                    self.cut += 1;
                }
            }
            if c == '\n' {
                self.line += 1;
                self.at_line_start = true;
            }
        }
        self.last.is_some_and(|l| self.line > l)
    }

    fn finish(self, stopped_early: bool) -> Excerpt {
        // Lines in the file: a last line without its newline counts.
        let lines = if !self.seen_any {
            0
        } else if self.at_line_start {
            self.line - 1
        } else {
            self.line
        };
        if self.ranged && !stopped_early && self.first > lines {
            return Excerpt::BadRange(format!(
                "Error: start_line ({}) is beyond the end of the file ({lines} lines)",
                self.first
            ));
        }
        Excerpt::Text {
            kept: self.kept,
            cut: self.cut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, start: Option<u64>, end: Option<u64>, max: usize) -> Excerpt {
        read_range(text.as_bytes(), start, end, max, 8000).unwrap()
    }

    fn kept(k: &str, cut: usize) -> Excerpt {
        Excerpt::Text {
            kept: k.into(),
            cut,
        }
    }

    #[test]
    fn ranges_are_one_based_inclusive_and_clamped() {
        let t = "a\nb\nc\n";
        assert_eq!(read(t, None, None, 100), kept(t, 0));
        assert_eq!(read(t, Some(2), Some(2), 100), kept("b\n", 0));
        assert_eq!(read(t, Some(2), Some(99), 100), kept("b\nc\n", 0));
        assert_eq!(read("a\nb", Some(2), None, 100), kept("b", 0));
        assert_eq!(read("", None, None, 100), kept("", 0));
        assert!(
            matches!(read(t, Some(4), None, 100), Excerpt::BadRange(m) if m.contains("beyond the end of the file (3 lines)"))
        );
        assert!(
            matches!(read(t, Some(0), None, 100), Excerpt::BadRange(m) if m.contains("1-based"))
        );
        assert!(
            matches!(read(t, Some(3), Some(2), 100), Excerpt::BadRange(m) if m.contains("after end_line (2)"))
        );
    }

    #[test]
    fn the_limit_keeps_the_head_and_counts_the_rest() {
        assert_eq!(read("héllo wörld\n", None, None, 4), kept("héll", 8));
        assert_eq!(read("a\nbb\nccc\n", Some(2), Some(3), 3), kept("bb\n", 4));
    }

    #[test]
    fn binary_and_broken_text_are_refused() {
        assert_eq!(read("ab\0cd", None, None, 100), Excerpt::Binary);
        assert_eq!(
            read_range(&b"ok\n\xff\xfe"[..], None, None, 100, 8000).unwrap(),
            Excerpt::Binary
        );
    }

    /// A source that yields one byte at a time splits every character somewhere.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn characters_split_across_reads_are_kept_whole() {
        let t = "ünï\ncødé\n";
        let got = read_range(Trickle(t.as_bytes()), Some(2), None, 100, 8000).unwrap();
        assert_eq!(got, kept("cødé\n", 0));
    }

    /// An endless source: reading stops after the last line asked for.
    struct Endless;

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = if i % 10 == 9 { b'\n' } else { b'x' };
            }
            Ok(buf.len())
        }
    }

    #[test]
    fn a_range_stops_reading_after_its_last_line() {
        let got = read_range(Endless, Some(1), Some(3), 1000, 8000).unwrap();
        assert_eq!(got, kept(&"xxxxxxxxx\n".repeat(3), 0));
    }
}
