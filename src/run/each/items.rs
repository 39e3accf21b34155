//! Reading `--each` items (contract §15): the non-empty lines of a file or stdin, each read
//! with memory bounded by the item limit (a longer line is skipped over, not held), a
//! trailing `\r` stripped, lines of only whitespace skipped. A line that is a JSON object is
//! an object item, one starting with `{` that is not valid JSON a failed item, any other a
//! text item.

use std::io::{BufRead, ErrorKind};

use super::template::{Item, Template};

/// The largest item (bytes of its line); a longer one fails as its own task.
pub const MAX_ITEM_BYTES: usize = 1024 * 1024;
/// The most items a file may hold; past it the run stops reading and fails.
pub const MAX_ITEMS: u64 = 1_000_000;

/// One physical line, as much of it as the limit lets us keep.
#[derive(Debug, Default)]
struct Line {
    /// The line's bytes (without `\n` and a trailing `\r`) when it fits the limit.
    bytes: Vec<u8>,
    /// Its whole length.
    len: usize,
    /// Whether every byte not kept was ASCII whitespace.
    blank_tail: bool,
}

/// Reads the next line into `line`; false at the end of the input.
fn read_line<R: BufRead>(r: &mut R, max: usize, line: &mut Line) -> std::io::Result<bool> {
    line.bytes.clear();
    line.len = 0;
    line.blank_tail = true;
    let mut any = false;
    let mut last = 0u8;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let room = (max + 1).saturating_sub(line.bytes.len());
        let keep = chunk.len().min(room);
        line.bytes.extend_from_slice(&chunk[..keep]);
        if !chunk[keep..].iter().all(u8::is_ascii_whitespace) {
            line.blank_tail = false;
        }
        line.len += chunk.len();
        if let Some(&b) = chunk.last() {
            last = b;
        }
        let used = chunk.len() + usize::from(done);
        r.consume(used);
        if done {
            break;
        }
    }
    if last == b'\r' {
        line.len -= 1;
        if line.bytes.len() > line.len {
            line.bytes.truncate(line.len);
        }
    }
    Ok(any)
}

/// What one line is.
#[derive(Debug, PartialEq)]
enum Parsed {
    Item(Item),
    /// An item that fails as its own task, with why.
    Bad(String),
}

/// A line that is not blank.
fn parse(line: &Line) -> Parsed {
    let kept = &line.bytes;
    if kept.len() != line.len || line.len > MAX_ITEM_BYTES {
        return Parsed::Bad(format!("the item is over 1 MiB ({} bytes)", line.len));
    }
    let Ok(text) = std::str::from_utf8(kept) else {
        return Parsed::Bad("the item is not UTF-8".into());
    };
    if text.trim_start().starts_with('{') {
        return match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(o)) => Parsed::Item(Item::Object(o)),
            Ok(_) => Parsed::Bad("invalid JSON: not an object".into()),
            Err(e) => Parsed::Bad(format!("invalid JSON: {e}")),
        };
    }
    Parsed::Item(Item::Text(text.to_string()))
}

/// An item ready to start: its index and its prompt, or why it fails.
#[derive(Debug, PartialEq)]
pub struct Prepared {
    pub index: u64,
    pub prompt: Result<String, String>,
}

/// What the reader hands the run.
#[derive(Debug, PartialEq)]
pub enum Next {
    Item(Prepared),
    /// The input ended; `Err` says why the run must fail (too many items, a read error).
    End(Result<(), String>),
}

/// Which items exist for this run (`--shard K/N`: index mod N == K-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based: K-1.
    pub k: u64,
    pub n: u64,
}

impl Shard {
    pub const WHOLE: Shard = Shard { k: 0, n: 1 };

    /// `K/N` with 1 ≤ K ≤ N ≤ 10000.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard '{s}' must be K/N with 1 <= K <= N <= 10000 (e.g. 2/3)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let num = |t: &str| {
            (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse::<u64>().ok())
                .flatten()
        };
        match (num(k), num(n)) {
            (Some(k), Some(n)) if 1 <= k && k <= n && n <= 10_000 => Ok(Shard { k: k - 1, n }),
            _ => Err(bad()),
        }
    }

    pub fn has(&self, index: u64) -> bool {
        index % self.n == self.k
    }

    /// An item's place among this shard's items.
    pub fn rank(&self, index: u64) -> u64 {
        index / self.n
    }
}

/// Reads items from `input` and hands each one of the shard to `send`, rendered with
/// `template`, until the input ends or `send` says stop (false). Runs on a thread of its own.
pub fn read_items<R: BufRead>(
    mut input: R,
    template: &Template,
    shard: Shard,
    max_items: u64,
    mut send: impl FnMut(Next) -> bool,
) {
    let mut line = Line::default();
    let mut index = 0u64;
    skip_bom(&mut input);
    loop {
        match read_line(&mut input, MAX_ITEM_BYTES, &mut line) {
            Ok(true) => {}
            Ok(false) => {
                send(Next::End(Ok(())));
                return;
            }
            Err(e) => {
                send(Next::End(Err(format!("cannot read the --each input: {e}"))));
                return;
            }
        }
        if is_blank(&line) {
            continue;
        }
        if index >= max_items {
            send(Next::End(Err(too_many(max_items))));
            return;
        }
        let this = index;
        index += 1;
        // Other shards' items are counted, not parsed.
        if !shard.has(this) {
            continue;
        }
        let prompt = match parse(&line) {
            Parsed::Item(item) => template.render(this, &item),
            Parsed::Bad(why) => Err(why),
        };
        let prompt = prompt.map_err(|why| format!("Item {this}: {why}"));
        if !send(Next::Item(Prepared {
            index: this,
            prompt,
        })) {
            return;
        }
    }
}

/// How many of the input's items belong to `shard` (at most `max` items are looked at).
pub fn count_items<R: BufRead>(mut input: R, shard: Shard, max: u64) -> std::io::Result<u64> {
    let mut line = Line::default();
    let (mut index, mut mine) = (0u64, 0u64);
    skip_bom(&mut input);
    while index < max && read_line(&mut input, MAX_ITEM_BYTES, &mut line)? {
        if is_blank(&line) {
            continue;
        }
        mine += u64::from(shard.has(index));
        index += 1;
    }
    Ok(mine)
}

/// Skips the UTF-8 byte order mark some Windows tools start a file with: it belongs to no
/// item (else a JSONL file's first object would read as text).
fn skip_bom<R: BufRead>(input: &mut R) {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    if input.fill_buf().is_ok_and(|b| b.starts_with(BOM)) {
        input.consume(BOM.len());
    }
}

/// Whether a line is only whitespace (not an item). A line too long to keep whole is
/// blank when every byte is ASCII whitespace; one kept whole by its text.
fn is_blank(line: &Line) -> bool {
    if !line.blank_tail {
        return false;
    }
    if line.bytes.len() != line.len {
        return line.bytes.iter().all(u8::is_ascii_whitespace);
    }
    std::str::from_utf8(&line.bytes).is_ok_and(|t| t.trim().is_empty())
}

fn too_many(max: u64) -> String {
    format!("the --each input has more than {max} items; the run stopped reading there")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn lines(input: &[u8], max: usize) -> Vec<(Vec<u8>, usize, bool)> {
        let mut r = std::io::BufReader::with_capacity(4, Cursor::new(input.to_vec()));
        let mut out = Vec::new();
        let mut l = Line::default();
        while read_line(&mut r, max, &mut l).unwrap() {
            out.push((l.bytes.clone(), l.len, l.blank_tail));
        }
        out
    }

    #[test]
    fn lines_are_read_with_bounded_memory_and_crlf_stripped() {
        let got = lines(b"ab\r\n\ncdefghij\nxy\r", 5);
        assert_eq!(got[0], (b"ab".to_vec(), 2, true));
        assert_eq!(got[1], (vec![], 0, true));
        // Kept up to the limit + 1 (so "too long" is known), the rest only counted.
        assert_eq!(got[2], (b"cdefgh".to_vec(), 8, false));
        assert_eq!(got[3], (b"xy".to_vec(), 2, true));
        assert_eq!(got.len(), 4);
        let long_blank = lines(b"a          \n", 3);
        assert_eq!(long_blank[0].1, 11);
        assert!(long_blank[0].2);
    }

    fn all(input: &str, template: &str, shard: Shard, max: u64) -> Vec<Next> {
        let mut out = Vec::new();
        read_items(
            Cursor::new(input.as_bytes().to_vec()),
            &Template::parse(template),
            shard,
            max,
            |n| {
                out.push(n);
                true
            },
        );
        out
    }

    fn item(index: u64, prompt: Result<&str, &str>) -> Next {
        Next::Item(Prepared {
            index,
            prompt: prompt.map(str::to_string).map_err(str::to_string),
        })
    }

    #[test]
    fn a_leading_byte_order_mark_belongs_to_no_item() {
        let got = all(
            "\u{feff}{\"id\": 1}\r\n{\"id\": 2}\r\n",
            "{{id}}",
            Shard::WHOLE,
            100,
        );
        assert_eq!(got[0], item(0, Ok("1")));
        assert_eq!(got[1], item(1, Ok("2")));
        let input = Cursor::new("\u{feff}a\nb\n".as_bytes().to_vec());
        assert_eq!(count_items(input, Shard::WHOLE, 100).unwrap(), 2);
    }

    #[test]
    fn text_object_blank_and_broken_lines() {
        let input = "plain\r\n  \n{\"a\": \"x\"}\n {not json\n\t\n[1,2]\n{\"b\": 1}\n";
        let got = all(input, "{{index}}={{item}}", Shard::WHOLE, 100);
        assert_eq!(got[0], item(0, Ok("0=plain")));
        assert_eq!(got[1], item(1, Ok(r#"1={"a":"x"}"#)));
        match &got[2] {
            Next::Item(Prepared {
                index: 2,
                prompt: Err(e),
            }) => {
                assert!(e.starts_with("Item 2: invalid JSON: "), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(got[3], item(3, Ok("3=[1,2]")));
        assert_eq!(got[4], item(4, Ok(r#"4={"b":1}"#)));
        assert_eq!(got[5], Next::End(Ok(())));
        let absent = all("{\"b\": 1}\n", "{{a}}", Shard::WHOLE, 10);
        assert_eq!(absent[0], item(0, Err("Item 0: the item has no field 'a'")));
    }

    #[test]
    fn oversized_and_non_utf8_items_fail_alone() {
        let mut input = vec![b'x'; MAX_ITEM_BYTES + 1];
        input.extend_from_slice(b"\n\xff\xfe\nok\n");
        let mut out = Vec::new();
        read_items(
            Cursor::new(input),
            &Template::parse("{{item}}"),
            Shard::WHOLE,
            10,
            |n| {
                out.push(n);
                true
            },
        );
        assert_eq!(
            out[0],
            item(0, Err("Item 0: the item is over 1 MiB (1048577 bytes)"))
        );
        assert_eq!(out[1], item(1, Err("Item 1: the item is not UTF-8")));
        assert_eq!(out[2], item(2, Ok("ok")));
        // Exactly 1 MiB is allowed.
        let mut exact = vec![b'y'; MAX_ITEM_BYTES];
        exact.push(b'\n');
        let mut n = 0;
        read_items(
            Cursor::new(exact),
            &Template::parse("{{item}}"),
            Shard::WHOLE,
            10,
            |x| {
                if let Next::Item(p) = x {
                    assert_eq!(p.prompt.unwrap().len(), MAX_ITEM_BYTES);
                    n += 1;
                }
                true
            },
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn shards_partition_the_items_and_keep_their_indexes() {
        let input: String = (0..10).map(|i| format!("t{i}\n\n")).collect();
        let mut seen = Vec::new();
        for k in 0..3 {
            for n in all(&input, "{{item}}", Shard { k, n: 3 }, 100) {
                if let Next::Item(p) = n {
                    assert_eq!(p.index % 3, k);
                    assert_eq!(p.prompt, Ok(format!("t{}", p.index)));
                    seen.push(p.index);
                }
            }
        }
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn past_the_item_limit_the_reader_stops_with_an_error() {
        let got = all("a\nb\nc\nd\n", "{{item}}", Shard::WHOLE, 3);
        assert_eq!(got.len(), 4);
        assert!(matches!(&got[3], Next::End(Err(e)) if e.contains("more than 3 items")));
        assert_eq!(
            all("a\nb\nc\n", "{{item}}", Shard::WHOLE, 3).last(),
            Some(&Next::End(Ok(())))
        );
        // Another shard's items count too.
        let other = all("a\nb\nc\nd\n", "{{item}}", Shard { k: 1, n: 2 }, 3);
        assert!(matches!(other.last(), Some(Next::End(Err(_)))), "{other:?}");
    }

    #[test]
    fn items_are_counted_by_the_same_rules() {
        let input = b"a\n\n  \n{\"x\": 1}\n\xff\nb\r\nc\n";
        let count = |shard, max| count_items(Cursor::new(input.to_vec()), shard, max).unwrap();
        assert_eq!(count(Shard::WHOLE, 100), 5);
        assert_eq!(count(Shard { k: 1, n: 2 }, 100), 2);
        assert_eq!(count(Shard::WHOLE, 3), 3);
    }

    #[test]
    fn shard_syntax() {
        assert_eq!(Shard::parse("1/1"), Ok(Shard::WHOLE));
        assert_eq!(Shard::parse("3/10000"), Ok(Shard { k: 2, n: 10_000 }));
        for bad in [
            "0/3", "4/3", "1/10001", "1", "a/b", "1/3/4", "-1/3", "+1/3", " 1/3", "1/",
        ] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
