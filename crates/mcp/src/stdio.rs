//! The stdio transport: one JSON-RPC message per line on the server's stdout, read under
//! [`MAX_MESSAGE_BYTES`]. rmcp's own line transport grows its buffer without bound (one
//! endless line took deerflow to 3.2 GB) and drops the reason it stopped; this one stops at
//! the bound and records why it stopped in the session's [`Fault`].

use std::sync::Arc;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::fault::{not_json_rpc, too_large, Fault, MAX_MESSAGE_BYTES};

pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    line: Vec<u8>,
    writer: Arc<Mutex<Option<W>>>,
    fault: Fault,
}

impl<R: AsyncRead + Unpin, W> LineTransport<R, W> {
    pub fn new(read: R, write: W, fault: Fault) -> Self {
        Self {
            reader: BufReader::new(read),
            line: Vec::new(),
            writer: Arc::new(Mutex::new(Some(write))),
            fault,
        }
    }

    /// The next message; `None` once the stream ended or broke (the fault says why).
    async fn next_message(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            self.line.clear();
            match read_line(&mut self.reader, &mut self.line, MAX_MESSAGE_BYTES).await {
                Ok(Line::Eof) => return None,
                Ok(Line::TooLong) => {
                    self.fault.set(too_large());
                    // Memory goes back at once: the session is over.
                    self.line = Vec::new();
                    return None;
                }
                Ok(Line::Read) => {}
                Err(e) => {
                    self.fault.set(format!("its stdout could not be read: {e}"));
                    return None;
                }
            }
            let text = self.line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<ServerJsonRpcMessage>(text) {
                Ok(message) => return Some(message),
                // As rmcp does: a notification deerflow does not know is skipped.
                Err(_) if is_notification(text) => {
                    deerflow_base::logging::debug("mcp: skipped a notification it does not know");
                }
                Err(_) => {
                    self.fault.set(not_json_rpc(text));
                    return None;
                }
            }
        }
    }
}

/// A JSON object with a `method` and no `id`.
fn is_notification(text: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(text).is_ok_and(|v| {
        v.get("method").is_some_and(serde_json::Value::is_string) && v.get("id").is_none()
    })
}

#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line (without its `\n`), or the last bytes before the end of the stream.
    Read,
    Eof,
    /// More than `max` bytes came without a newline; what was read is in `line`.
    TooLong,
}

/// Appends the next line of `reader` to `line`, never holding more than `max` bytes of it.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                Line::Eof
            } else {
                Line::Read
            });
        }
        let (take, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max {
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(take + usize::from(end));
        if end {
            return Ok(Line::Read);
        }
    }
}

impl<R, W> Transport<RoleClient> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn name() -> std::borrow::Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move {
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            let mut writer = writer.lock().await;
            let Some(w) = writer.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.next_message()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the pipe closes the server's stdin: the first step of stopping it (§9).
        drop(self.writer.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(Line, String)> {
        let mut r = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let mut line = Vec::new();
            let l = read_line(&mut r, &mut line, max).await.unwrap();
            let stop = l != Line::Read;
            out.push((l, String::from_utf8_lossy(&line).into_owned()));
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_across_buffers_and_bounded() {
        let got = lines(b"ab\ncdefgh\n\nlast", 8).await;
        let want = [
            (Line::Read, "ab"),
            (Line::Read, "cdefgh"),
            (Line::Read, ""),
            (Line::Read, "last"),
            (Line::Eof, ""),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((l, s), (wl, ws)) in got.iter().zip(want) {
            assert_eq!((l, s.as_str()), (&wl, ws));
        }
        let got = lines(b"0123456789\n", 8).await;
        assert_eq!(got[0].0, Line::TooLong);
        assert!(got[0].1.len() <= 8);
    }

    #[tokio::test]
    async fn garbage_and_oversized_lines_end_the_stream_with_a_reason() {
        let fault = Fault::default();
        let mut t = LineTransport::new(
            &b"\n{\"jsonrpc\":\"2.0\",\"method\":\"x/y\"}\nnot json\n"[..],
            tokio::io::sink(),
            fault.clone(),
        );
        // Blank lines are skipped and a notification is read; then the garbage ends it.
        assert!(t.next_message().await.is_some());
        assert!(t.next_message().await.is_none());
        assert_eq!(
            fault.get().unwrap(),
            "answered something that is not MCP JSON-RPC: not json"
        );
        let big = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        let fault = Fault::default();
        let mut t = LineTransport::new(&big[..], tokio::io::sink(), fault.clone());
        assert!(t.next_message().await.is_none());
        assert!(fault.get().unwrap().contains("larger than 16 MiB"));
    }
}
