//! Text rules every layer shares: how seconds are written and how long text is cut. A leaf
//! module (it imports nothing of the crate), so any layer may use it without a cycle.

/// The longest duration a flag or config key may give (one year, contract §12): longer ones
/// are mistakes, and would overflow deadlines.
pub const MAX_SECONDS: f64 = 31_536_000.0;

/// The most bytes deerflow reads from a prompt, a config or a schema file (contract §12).
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Reads `source` to its end, or `None` when it holds more than [`MAX_INPUT_BYTES`]: at most
/// one byte past the limit is read, so an endless source (`/dev/zero`) stops at once.
pub fn read_at_most(source: impl std::io::Read) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    source.take(MAX_INPUT_BYTES + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= MAX_INPUT_BYTES).then_some(bytes))
}

/// [`read_at_most`] as UTF-8 text; the error says which limit or rule it broke.
pub fn read_text_at_most(source: impl std::io::Read) -> std::io::Result<String> {
    let bytes = read_at_most(source)?.ok_or_else(|| std::io::Error::other("larger than 16 MiB"))?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not valid UTF-8"))
}

/// Seconds as people write them and as the contract's messages show them: `1800`, `0.5`.
pub fn secs(s: f64) -> String {
    match whole(s) {
        Some(n) => n.to_string(),
        None => format!("{s}"),
    }
}

/// `s` as an integer when it is a whole number of seconds (so JSON shows `1800`, not
/// `1800.0`); `None` for fractions and values too large to be exact.
pub fn whole(s: f64) -> Option<i64> {
    (s.fract() == 0.0 && s.abs() < 1e15).then_some(s as i64)
}

/// A duration as a clock shows it while something runs: `7s`, `2m05s`.
pub fn clock(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Milliseconds to a tenth of a second, as a summary line shows a finished run: `1.3s`.
pub fn tenths(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// `s` on one line with every control character made visible (`\n`, `\u{1b}`), so text
/// from providers, models or tools can neither forge log lines nor drive a terminal.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` for a terminal that shows it as lines: newlines and tabs stay, every other control
/// character (escape sequences that would set the clipboard, the title, clear the screen)
/// is made visible. A model's answer printed on a TTY goes through here.
pub fn for_terminal(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    let escaped: String = s
        .split_inclusive('\n')
        .map(|line| {
            let (body, nl) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            let body: String = body
                .split('\t')
                .map(|part| escape_controls(part).into_owned())
                .collect::<Vec<_>>()
                .join("\t");
            format!("{body}{nl}")
        })
        .collect();
    std::borrow::Cow::Owned(escaped)
}

/// An `http(s)` URL with a host and nothing a header or a request line cannot carry: what
/// a configured base URL must be, so it fails at load rather than after `run_started`.
pub fn is_http_url(url: &str) -> bool {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
                && !rest.is_empty()
                && !rest.starts_with(['/', '?', '#'])
                && !url.chars().any(|c| c.is_control() || c.is_whitespace())
        }
        None => false,
    }
}

/// `s` with the `user:password@` of every URL in it replaced by `[redacted]@`, for config
/// output and messages.
pub fn without_url_credentials(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("://") || !s.contains('@') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or whitespace.
        let end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str("[redacted]");
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Which part of a text survives a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The start (file contents, listings: what comes first matters).
    Head,
    /// The end (a log's last lines).
    Tail,
    /// Both ends, half each (command output: the command's start and its verdict).
    Middle,
}

/// A text cut to at most `max` characters: what is kept before and after the cut, and how
/// many characters were cut. Never splits a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut<'a> {
    pub head: &'a str,
    pub tail: &'a str,
    pub cut: usize,
}

/// Cuts `text` to `max` characters, keeping `keep`. A `Middle` cut of a text that fits is
/// still split at its middle, so a marker for characters lost earlier lands there.
pub fn cut(text: &str, max: usize, keep: Keep) -> Cut<'_> {
    let whole = Cut {
        head: text,
        tail: "",
        cut: 0,
    };
    // Fast path without counting characters: a text of at most `max` bytes fits.
    if text.len() <= max && keep != Keep::Middle {
        return whole;
    }
    let total = text.chars().count();
    let keep_chars = max.min(total);
    let (head_chars, tail_chars) = match keep {
        _ if total <= max && keep != Keep::Middle => return whole,
        Keep::Head => (keep_chars, 0),
        Keep::Tail => (0, keep_chars),
        Keep::Middle => (keep_chars / 2, keep_chars - keep_chars / 2),
    };
    Cut {
        head: &text[..byte_at_char(text, head_chars)],
        tail: &text[byte_at_char(text, total - tail_chars)..],
        cut: total - keep_chars,
    }
}

impl Cut<'_> {
    pub fn is_cut(&self) -> bool {
        self.cut > 0
    }

    /// The kept text with nothing marking the cut.
    pub fn plain(&self) -> String {
        format!("{}{}", self.head, self.tail)
    }

    /// The kept text with `mark` where the cut was (`…` for one-line labels).
    pub fn marked_with(&self, mark: &str) -> String {
        if !self.is_cut() {
            return self.plain();
        }
        format!("{}{mark}{}", self.head, self.tail)
    }

    /// The kept text with a line saying how much was cut (what models and tool results
    /// see), `extra` characters lost earlier added to the count.
    pub fn marked(&self, extra: usize) -> String {
        let n = self.cut + extra;
        if n == 0 {
            return self.plain();
        }
        let mut s = String::with_capacity(self.head.len() + self.tail.len() + 40);
        s.push_str(self.head);
        if !self.head.is_empty() {
            s.push('\n');
        }
        s.push_str(&format!("... [{n} characters truncated] ..."));
        if !self.tail.is_empty() {
            s.push('\n');
            s.push_str(self.tail);
        }
        s
    }
}

/// The first `max` characters of `text`, `…` marking a cut (labels, error excerpts).
pub fn clip(text: &str, max: usize) -> String {
    cut(text, max, Keep::Head).marked_with("…")
}

/// The byte offset of the `n`-th char (or the end), so slicing never splits a character.
fn byte_at_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_written_as_people_write_them() {
        assert_eq!(secs(1800.0), "1800");
        assert_eq!(secs(0.5), "0.5");
        assert_eq!(secs(1e16), "10000000000000000");
        assert_eq!(whole(2.0), Some(2));
        assert_eq!(whole(2.5), None);
        assert_eq!(clock(std::time::Duration::from_secs(7)), "7s");
        assert_eq!(clock(std::time::Duration::from_secs(125)), "2m05s");
        assert_eq!(clock(std::time::Duration::from_millis(7_900)), "7s");
        assert_eq!(tenths(1340), "1.3s");
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(escape_controls("plain ünïcode"), "plain ünïcode");
        assert_eq!(
            escape_controls("a\nb\r\t\u{1b}]52;c;x\u{7}"),
            "a\\nb\\r\\t\\u{1b}]52;c;x\\u{7}"
        );
    }

    #[test]
    fn url_credentials_are_redacted() {
        assert_eq!(
            without_url_credentials("https://user:pa55@example.com:8443/v1?x=1"),
            "https://[redacted]@example.com:8443/v1?x=1"
        );
        assert_eq!(
            without_url_credentials("see http://a@h/x and https://b:c@h2"),
            "see http://[redacted]@h/x and https://[redacted]@h2"
        );
        assert_eq!(without_url_credentials("mail me@x.org"), "mail me@x.org");
        assert_eq!(
            without_url_credentials("https://h/path@not-userinfo"),
            "https://h/path@not-userinfo"
        );
    }

    #[test]
    fn terminal_text_keeps_lines_and_tabs_only() {
        assert_eq!(for_terminal("a\n\tb\n"), "a\n\tb\n");
        assert_eq!(
            for_terminal("x\u{1b}]52;c;aGk=\u{7}\r\ny"),
            "x\\u{1b}]52;c;aGk=\\u{7}\\r\ny"
        );
    }

    #[test]
    fn cuts_keep_the_named_part_and_count_characters() {
        let t = "héllo wörld";
        assert_eq!(cut(t, 50, Keep::Head).plain(), t);
        assert!(!cut(t, 11, Keep::Middle).is_cut());
        let h = cut(t, 4, Keep::Head);
        assert_eq!((h.head, h.tail, h.cut), ("héll", "", 7));
        let tl = cut(t, 4, Keep::Tail);
        assert_eq!((tl.head, tl.tail, tl.cut), ("", "örld", 7));
        let m = cut(t, 5, Keep::Middle);
        assert_eq!((m.head, m.tail, m.cut), ("hé", "rld", 6));
    }

    #[test]
    fn markers_say_how_much_was_cut() {
        assert_eq!(
            cut("abcdefgh", 4, Keep::Head).marked(0),
            "abcd\n... [4 characters truncated] ..."
        );
        assert_eq!(
            cut("abcdefgh", 4, Keep::Middle).marked(3),
            "ab\n... [7 characters truncated] ...\ngh"
        );
        assert_eq!(cut("abc", 4, Keep::Middle).marked(0), "abc");
        assert_eq!(
            cut("abc", 4, Keep::Middle).marked(2),
            "a\n... [2 characters truncated] ...\nbc"
        );
        assert_eq!(
            cut("ééééé", 3, Keep::Middle).marked(0),
            "é\n... [2 characters truncated] ...\néé"
        );
        assert_eq!(
            cut("abcd", 4, Keep::Middle).marked(10),
            "ab\n... [10 characters truncated] ...\ncd"
        );
        assert_eq!(
            cut("héllo", 2, Keep::Head).marked(0),
            "hé\n... [3 characters truncated] ..."
        );
        assert_eq!(cut("abcdef", 3, Keep::Head).marked_with("…"), "abc…");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3, Keep::Head).marked_with("…"), "abc");
    }
}
