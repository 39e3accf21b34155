//! Bounded capture of a command's output stream: the first and last bytes are kept, the
//! middle is counted, so a runaway writer cannot exhaust memory.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// One output stream's capture: the first and last `cap` bytes, counting what fell between.
#[derive(Clone)]
pub(super) struct Capture {
    inner: Arc<Mutex<HeadTail>>,
}

struct HeadTail {
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Characters dropped from the middle (UTF-8 lead bytes counted).
    dropped_chars: usize,
}

impl Capture {
    /// Each end keeps at least `max_chars` characters (4 bytes each at worst), so the dropped
    /// middle always lies inside what middle truncation cuts anyway.
    pub(super) fn new(max_chars: usize) -> Self {
        let cap = max_chars.saturating_mul(4).saturating_add(4).max(4096);
        let ht = HeadTail {
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped_chars: 0,
        };
        Capture {
            inner: Arc::new(Mutex::new(ht)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeadTail> {
        // Poisoning only means a reader task panicked mid-push; the bytes are still valid.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn spawn_reader<R>(&self, pipe: Option<R>) -> JoinHandle<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let capture = self.clone();
        tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                capture.lock().push(&buf[..n]);
            }
        })
    }

    /// Adds bytes read some other way (a container's multiplexed output stream).
    #[cfg(feature = "docker")]
    pub(super) fn push(&self, data: &[u8]) {
        self.lock().push(data);
    }

    /// The captured text (lossy UTF-8) and how many characters were dropped from its middle.
    pub(super) fn text(&self) -> (String, usize) {
        let ht = self.lock();
        let mut bytes = ht.head.clone();
        bytes.extend(ht.tail.iter());
        (
            String::from_utf8_lossy(&bytes).into_owned(),
            ht.dropped_chars,
        )
    }
}

/// A finished command's output from its two captures.
pub(super) fn exec_output(
    end: super::ExecEnd,
    stdout: &Capture,
    stderr: &Capture,
) -> super::ExecOutput {
    let (out, out_cut) = stdout.text();
    let (err, err_cut) = stderr.text();
    super::ExecOutput {
        end,
        stdout: out,
        stderr: err,
        cut_chars: out_cut + err_cut,
    }
}

impl HeadTail {
    fn push(&mut self, mut data: &[u8]) {
        let room = self.cap.saturating_sub(self.head.len());
        let to_head = room.min(data.len());
        self.head.extend_from_slice(&data[..to_head]);
        data = &data[to_head..];
        // Only the last `cap` bytes of (tail + data) survive; the rest is counted, in bulk, so
        // a fast writer costs little per byte.
        let keep_from_data = data.len().min(self.cap);
        let (dropped_data, kept_data) = data.split_at(data.len() - keep_from_data);
        let overflow = (self.tail.len() + kept_data.len()).saturating_sub(self.cap);
        self.dropped_chars +=
            char_starts(self.tail.drain(..overflow)) + char_starts(dropped_data.iter().copied());
        self.tail.extend(kept_data);
    }
}

/// Characters begun by these UTF-8 bytes: continuation bytes (0b10xx_xxxx) start none.
fn char_starts(bytes: impl IntoIterator<Item = u8>) -> usize {
    bytes.into_iter().filter(|b| b & 0xC0 != 0x80).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_counts_dropped_chars() {
        let mut ht = HeadTail {
            cap: 2,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped_chars: 0,
        };
        ht.push("abcdéfg".as_bytes());
        assert_eq!(ht.head, b"ab");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"fg");
        assert_eq!(ht.dropped_chars, 3);
        ht.push(b"hijklmn");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"mn");
        assert_eq!(ht.dropped_chars, 10);
        ht.push(b"o");
        assert_eq!(ht.tail.iter().copied().collect::<Vec<u8>>(), b"no");
        assert_eq!(ht.dropped_chars, 11);
    }
}
