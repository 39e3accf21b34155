//! `str_replace` without holding the file: the file is read in chunks and searched as it
//! streams (a match may straddle two chunks), first to count the matches, then again to
//! write the edited copy. Memory is a chunk plus the search string, whatever the file's size.

use std::io::{self, Read, Write};

/// Bytes read at a time.
pub(crate) const CHUNK: usize = 64 * 1024;

/// Why a file cannot be edited as text.
#[derive(Debug)]
pub(crate) enum ScanError {
    Io(io::Error),
    /// A NUL byte near the start, or bytes that are not UTF-8 (what `read_file` refuses too).
    NotText,
}

impl From<io::Error> for ScanError {
    fn from(e: io::Error) -> Self {
        ScanError::Io(e)
    }
}

/// What a scan checks besides the matches.
pub(crate) struct TextCheck {
    /// Leading bytes in which a NUL means binary.
    pub sniff: usize,
}

/// Streams `input` to `out` with every non-overlapping occurrence of `old` (leftmost first,
/// as `str::replace` finds them) replaced by `new`, reading `chunk` bytes at a time; returns
/// how many there were. With `check`, input that is not text fails the scan. `old` must not
/// be empty.
pub(crate) fn replace_stream(
    input: &mut impl Read,
    out: &mut impl Write,
    old: &[u8],
    new: &[u8],
    chunk: usize,
    check: Option<&TextCheck>,
) -> Result<u64, ScanError> {
    let mut buf: Vec<u8> = Vec::with_capacity(chunk + old.len());
    // Offset in the file of `buf[0]`, and how much of `buf` is known to be valid UTF-8.
    let (mut base, mut valid) = (0usize, 0usize);
    let mut count = 0u64;
    loop {
        let filled = buf.len();
        buf.resize(filled + chunk.max(1), 0);
        let n = read_some(input, &mut buf[filled..])?;
        buf.truncate(filled + n);
        let eof = n == 0;
        if let Some(c) = check {
            sniff(&buf[filled..], base + filled, c.sniff)?;
            valid += utf8_prefix(&buf[valid..], eof)?;
        }
        let mut pos = 0;
        while let Some(i) = find(&buf[pos..], old) {
            out.write_all(&buf[pos..pos + i])?;
            out.write_all(new)?;
            count += 1;
            pos += i + old.len();
        }
        // The last `old.len() - 1` bytes may begin a match the next chunk completes; a
        // character not yet validated stays too.
        let mut keep_from = if eof {
            buf.len()
        } else {
            pos.max(buf.len().saturating_sub(old.len().saturating_sub(1)))
        };
        if check.is_some() {
            keep_from = keep_from.min(valid.max(pos));
        }
        out.write_all(&buf[pos..keep_from.max(pos)])?;
        let drop_to = keep_from.max(pos);
        buf.drain(..drop_to);
        base += drop_to;
        valid = valid.saturating_sub(drop_to);
        if eof {
            return Ok(count);
        }
    }
}

/// One `read`, retried on EINTR.
fn read_some(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A NUL among the file's first `limit` bytes (`bytes` start at offset `at`) means binary.
fn sniff(bytes: &[u8], at: usize, limit: usize) -> Result<(), ScanError> {
    let head = limit.saturating_sub(at).min(bytes.len());
    if bytes[..head].contains(&0) {
        return Err(ScanError::NotText);
    }
    Ok(())
}

/// How many leading bytes of `bytes` are whole UTF-8 characters; a character cut at the end
/// is left for the next chunk unless the file ended there.
fn utf8_prefix(bytes: &[u8], eof: bool) -> Result<usize, ScanError> {
    match std::str::from_utf8(bytes) {
        Ok(_) => Ok(bytes.len()),
        Err(e) if e.error_len().is_none() && !eof => Ok(e.valid_up_to()),
        Err(_) => Err(ScanError::NotText),
    }
}

/// The first occurrence of `needle` (not empty) in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut from = 0;
    while hay.len() - from >= needle.len() {
        let i = from
            + hay[from..=hay.len() - needle.len()]
                .iter()
                .position(|&b| b == first)?;
        if &hay[i + 1..i + needle.len()] == rest {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: TextCheck = TextCheck { sniff: 8192 };

    fn edit(text: &[u8], old: &str, new: &str, chunk: usize) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let n = replace_stream(
            &mut &text[..],
            &mut out,
            old.as_bytes(),
            new.as_bytes(),
            chunk,
            Some(&CHECK),
        )
        .unwrap();
        (out, n)
    }

    #[test]
    fn every_chunk_size_gives_what_str_replace_gives() {
        let texts = [
            "foo bar foo baz",
            "aaaaaaa",
            "abababab",
            "héllo wörld héllo, ünïcode ✓ spans ✓✓",
            "",
            "xyz",
        ];
        let pairs = [
            ("foo", "X"),
            ("aa", "b"),
            ("aba", "-"),
            ("héllo", "hi"),
            ("✓", "ok"),
            ("z", ""),
            ("not there", "y"),
            ("foo bar foo baz!", "long"),
        ];
        for text in texts {
            for (old, new) in pairs {
                let want = (text.replace(old, new), text.matches(old).count() as u64);
                for chunk in 1..=text.len() + 2 {
                    let (out, n) = edit(text.as_bytes(), old, new, chunk);
                    assert_eq!(
                        (String::from_utf8(out).unwrap(), n),
                        want,
                        "{text:?} {old:?} chunk {chunk}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_match_across_a_chunk_border_is_found_once() {
        let text = b"0123456789NEEDLE0123456789";
        for chunk in [3, 7, 11, 12, 13, 16] {
            let (out, n) = edit(text, "NEEDLE", "pin", chunk);
            assert_eq!((out.as_slice(), n), (&b"0123456789pin0123456789"[..], 1));
        }
    }

    #[test]
    fn binary_and_invalid_utf8_are_not_text() {
        for bad in [&b"ab\0cd"[..], b"ab\xffcd", b"ends in half a char \xc3"] {
            for chunk in [1, 2, 64] {
                let r = replace_stream(
                    &mut &bad[..],
                    &mut io::sink(),
                    b"a",
                    b"b",
                    chunk,
                    Some(&CHECK),
                );
                assert!(matches!(r, Err(ScanError::NotText)), "{bad:?} {chunk}");
            }
        }
        // A NUL past the sniffed head is text, as read_file has it.
        let late = [&[b'a'; 20][..], b"\0"].concat();
        let r = replace_stream(
            &mut &late[..],
            &mut io::sink(),
            b"a",
            b"b",
            4,
            Some(&TextCheck { sniff: 8 }),
        );
        assert_eq!(r.unwrap(), 20);
    }
}
