//! Telling a text file from a binary one, as the reading tools and `grep` do.

/// How much of a file's start is checked for NUL bytes.
pub(super) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// A NUL byte near the start means binary (what git and grep assume too).
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Decodes a file as text, or `None` when it is binary (NUL bytes or invalid UTF-8).
pub(crate) fn decode_text(bytes: Vec<u8>) -> Option<String> {
    if looks_binary(&bytes) {
        return None;
    }
    String::from_utf8(bytes).ok()
}
