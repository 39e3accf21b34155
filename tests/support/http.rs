//! Just enough HTTP/1.1 for one request per connection: the server always answers with
//! `Connection: close`, so there is no keep-alive or pipelining to handle.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Refuse absurd heads instead of buffering forever on a confused client.
const MAX_HEAD: usize = 64 * 1024;

/// A parsed request before it is recorded.
pub(crate) struct RawRequest {
    pub method: String,
    pub path: String,
    /// Lowercased names, trimmed values, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one request (head and body). `Ok(None)` when the client closed before sending a
/// full head, which is normal for probes and cancelled clients.
pub(crate) async fn read_request<R: AsyncRead + Unpin>(
    r: &mut R,
) -> io::Result<Option<RawRequest>> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        if read_more(r, &mut buf).await? == 0 {
            return Ok(None);
        }
    };
    let rest = buf.split_off(head_end + 4);
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut req = parse_head(&head)?;
    req.body = read_body(r, &req, rest).await?;
    Ok(Some(req))
}

fn parse_head(head: &str) -> io::Result<RawRequest> {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or_default().split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad request line",
        ));
    };
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(RawRequest {
        method: method.into(),
        path: path.into(),
        headers,
        body: Vec::new(),
    })
}

async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    req: &RawRequest,
    mut buf: Vec<u8>,
) -> io::Result<Vec<u8>> {
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        return read_chunked(r, buf).await;
    }
    let len: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < len {
        if read_more(r, &mut buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// Decodes a chunked request body; trailers are ignored.
async fn read_chunked<R: AsyncRead + Unpin>(r: &mut R, mut buf: Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(pos) = find(&buf, b"\r\n") {
                break pos;
            }
            if read_more(r, &mut buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]);
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        buf.drain(..line_end + 2);
        if size == 0 {
            return Ok(body);
        }
        while buf.len() < size + 2 {
            if read_more(r, &mut buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn read_more<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut tmp = [0u8; 8192];
    let n = r.read(&mut tmp).await?;
    buf.extend_from_slice(&tmp[..n]);
    Ok(n)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The response head. `content_length: None` means a close-delimited body (used for SSE).
pub(crate) fn response_head(
    code: u16,
    content_type: &str,
    content_length: Option<usize>,
    extra: &[(String, String)],
) -> String {
    let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
    // A scripted `content-type` header replaces the default instead of duplicating it.
    if !extra
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str(&format!("content-type: {content_type}\r\n"));
    }
    if let Some(len) = content_length {
        head.push_str(&format!("content-length: {len}\r\n"));
    } else {
        head.push_str("cache-control: no-cache\r\n");
    }
    head.push_str("connection: close\r\n");
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}
