//! The input-order rewrite at the end of a run: the index file, one entry per rank, says
//! where each line was appended; the lines are copied in rank order into a file beside the
//! results, which then replaces them. Memory holds one window of the appended file, not
//! its lines.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One index entry: offset + 1 (0: no line for this rank) and length, little-endian.
pub const ENTRY: u64 = 16;

/// Bounds of the window read from the appended file at once.
const SMALLEST: usize = 4 << 10;
const LARGEST: usize = 1 << 20;

/// Writes the lines of `file` in rank order beside it and renames the copy over it.
pub fn in_input_order(real: &Path, file: &File, index: &File) -> std::io::Result<()> {
    let dir = match real.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let perms = file.metadata()?.permissions();
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        let mut out = BufWriter::with_capacity(64 * 1024, tmp.as_file_mut());
        let mut entries = BufReader::with_capacity(64 * 1024, index);
        let mut entry = [0u8; ENTRY as usize];
        let mut window = Window::new(file);
        while read_entry(&mut entries, &mut entry)? {
            let at = u64::from_le_bytes(entry[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(entry[8..].try_into().unwrap_or_default());
            if at == 0 {
                continue;
            }
            out.write_all(window.line(at - 1, len as usize)?)?;
        }
        out.flush()?;
    }
    tmp.as_file().set_permissions(perms)?;
    tmp.as_file().sync_all()?;
    tmp.persist(real).map_err(|e| e.error)?;
    Ok(())
}

/// Reads one whole entry; false at the end of the index.
fn read_entry(r: &mut impl Read, entry: &mut [u8; ENTRY as usize]) -> std::io::Result<bool> {
    match r.read_exact(entry) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// A piece of the appended file. Items end nearly in input order, so the next rank's line
/// is usually just after the last one: one large read serves thousands of lines where a
/// read per line cost half the rewrite. Lines far out of order (a shard, items of very
/// different lengths) would make every large read serve one line, so the window shrinks
/// when little of it was used and grows back when most of it was.
struct Window<'a> {
    file: &'a File,
    start: u64,
    buf: Vec<u8>,
    size: usize,
    used: usize,
    /// Reads made and bytes read, for the tests.
    reads: usize,
    read_bytes: usize,
}

impl<'a> Window<'a> {
    fn new(file: &'a File) -> Self {
        Self {
            file,
            start: 0,
            buf: Vec::new(),
            size: 64 << 10,
            used: 0,
            reads: 0,
            read_bytes: 0,
        }
    }

    fn line(&mut self, at: u64, len: usize) -> std::io::Result<&[u8]> {
        let inside = at >= self.start && at + len as u64 <= self.start + self.buf.len() as u64;
        if !inside {
            self.size = if self.used * 2 >= self.buf.len() {
                (self.size * 2).min(LARGEST)
            } else {
                (self.size / 2).max(SMALLEST)
            };
            self.fill(at, len.max(self.size))?;
            if self.buf.len() < len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        self.used += len;
        let from = (at - self.start) as usize;
        Ok(&self.buf[from..from + len])
    }

    /// Reads up to `want` bytes from `at` (fewer at the end of the file).
    fn fill(&mut self, at: u64, want: usize) -> std::io::Result<()> {
        if self.buf.capacity() > 2 * LARGEST && want <= LARGEST {
            // A huge line's room is not kept.
            self.buf = Vec::new();
        }
        self.buf.clear();
        self.buf.resize(want, 0);
        let mut got = 0;
        while got < want {
            match self.file.read_at(&mut self.buf[got..], at + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.truncate(got);
        self.reads += 1;
        self.read_bytes += got;
        self.start = at;
        self.used = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `lines` (index, text) in the given order and writes their index entries.
    fn appended(dir: &Path, lines: &[(u64, String)]) -> (std::path::PathBuf, File, File) {
        let real = dir.join("r.jsonl");
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&real)
            .unwrap();
        let index = tempfile::tempfile().unwrap();
        let mut pos = 0u64;
        for (i, text) in lines {
            file.write_all(text.as_bytes()).unwrap();
            let mut e = [0u8; ENTRY as usize];
            e[..8].copy_from_slice(&(pos + 1).to_le_bytes());
            e[8..].copy_from_slice(&(text.len() as u64).to_le_bytes());
            index.write_all_at(&e, i * ENTRY).unwrap();
            pos += text.len() as u64;
        }
        (real, file, index)
    }

    fn check(order: &[u64], text: impl Fn(u64) -> String) {
        let d = tempfile::tempdir().unwrap();
        let lines: Vec<(u64, String)> = order.iter().map(|&i| (i, text(i))).collect();
        let (real, file, index) = appended(d.path(), &lines);
        in_input_order(&real, &file, &index).unwrap();
        let mut want: Vec<u64> = order.to_vec();
        want.sort();
        let want: String = want.into_iter().map(&text).collect();
        assert!(std::fs::read_to_string(&real).unwrap() == want);
    }

    #[test]
    fn nearly_ordered_shuffled_and_huge_lines_come_out_in_rank_order() {
        let text = |i: u64| {
            format!(
                "{{\"index\":{i},\"pad\":\"{}\"}}\n",
                "x".repeat((i % 50) as usize)
            )
        };
        // Nearly in order, with one line late and one missing, across many windows.
        let mut nearly: Vec<u64> = (0..60_000).filter(|&i| i != 777).collect();
        let late = nearly.remove(5);
        nearly.insert(300, late);
        check(&nearly, text);
        let mut shuffled: Vec<u64> = (0..5000).collect();
        fastrand::shuffle(&mut shuffled);
        check(&shuffled, text);
        // Lines longer than any window, between short ones.
        let huge = |i: u64| {
            let n = if i % 3 == 1 { 3 * LARGEST } else { 10 };
            format!("{i}:{}\n", "y".repeat(n))
        };
        check(&[4, 1, 0, 3, 2, 5], huge);
    }

    /// Walks `order`'s lines in rank order through a window: (reads, bytes read, file size).
    fn window_cost(order: &[u64]) -> (usize, usize, u64) {
        let d = tempfile::tempdir().unwrap();
        let lines: Vec<(u64, String)> = order
            .iter()
            .map(|&i| (i, format!("{{\"index\":{i}}}\n")))
            .collect();
        let (_, file, index) = appended(d.path(), &lines);
        let mut w = Window::new(&file);
        let mut entries = BufReader::new(&index);
        let mut e = [0u8; ENTRY as usize];
        while read_entry(&mut entries, &mut e).unwrap() {
            let at = u64::from_le_bytes(e[..8].try_into().unwrap());
            let len = u64::from_le_bytes(e[8..].try_into().unwrap());
            w.line(at - 1, len as usize).unwrap();
        }
        (w.reads, w.read_bytes, file.metadata().unwrap().len())
    }

    #[test]
    fn nearly_ordered_lines_are_read_in_few_large_pieces_and_shuffled_ones_in_small_ones() {
        let mut nearly: Vec<u64> = (0..100_000).collect();
        nearly.swap(5, 70);
        let (reads, _, _) = window_cost(&nearly);
        // A read per line before.
        assert!(reads < 100, "{reads} reads");
        let mut shuffled: Vec<u64> = (0..20_000).collect();
        fastrand::shuffle(&mut shuffled);
        let (reads, bytes, size) = window_cost(&shuffled);
        // About one small read per line, not a large window each.
        assert!(reads <= 20_000, "{reads} reads");
        assert!(
            bytes as u64 <= 20_000 * 2 * SMALLEST as u64 + size,
            "{bytes} bytes read"
        );
    }
}
