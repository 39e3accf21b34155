//! Helpers shared by the provider tests: feeding bytes in chunks, and a tiny scripted
//! HTTP responder on 127.0.0.1.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// `text` as a stream of byte chunks cut at `cuts` (sorted offsets).
pub fn chunked(
    text: &str,
    cuts: &[usize],
) -> impl futures_util::Stream<Item = Result<Vec<u8>, Infallible>> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(start, bytes.len());
        pieces.push(Ok(bytes[start..cut].to_vec()));
        start = cut;
    }
    futures_util::stream::iter(pieces)
}

/// `text` assembled by `A` as the body of a streamed answer cut at `cuts`.
pub async fn assemble_cut<A: crate::http::Assembler>(
    text: &str,
    cuts: &[usize],
    provider: &str,
) -> Result<crate::ModelResponse, crate::ModelError> {
    let idle = std::time::Duration::from_secs(5);
    crate::http::assemble::<A, _, _, _>(chunked(text, cuts), idle, provider).await
}

/// A reported usage with no cache writes, as the providers' tests expect it.
pub fn usage(input: u64, output: u64, total: u64, cached: Option<u64>) -> Option<crate::Usage> {
    Some(crate::Usage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: total,
        cache_read_tokens: cached,
        cache_write_tokens: None,
        unreported: Default::default(),
    })
}

/// One canned HTTP response.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn sse(body: &str) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body: body.to_string(),
        }
    }
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }
}

/// A captured request: head (request line + headers) and body.
#[derive(Debug, Clone)]
pub struct Captured {
    pub head: String,
    pub body: String,
}

/// Serves `replies` in order, one per connection, then stops accepting.
/// Returns the base URL and the requests it saw.
pub async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Captured>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let captured = read_request(&mut socket).await;
            log.lock().unwrap().push(captured);
            let mut out = format!("HTTP/1.1 {} X\r\n", reply.status);
            for (k, v) in &reply.headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str(&format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                reply.body.len(),
                reply.body
            ));
            let _ = socket.write_all(out.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (format!("http://{addr}"), seen)
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Captured {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = content_length(&head);
            while buf.len() < end + 4 + len {
                let n = socket.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = String::from_utf8_lossy(&buf[end + 4..]).to_string();
            return Captured { head, body };
        }
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return Captured {
                head: String::from_utf8_lossy(&buf).to_string(),
                body: String::new(),
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &str) -> usize {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}
