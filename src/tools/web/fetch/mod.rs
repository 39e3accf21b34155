//! `web_fetch` backends and the network guard (contract §14).

use std::sync::Arc;

use super::WebEntry;
use crate::tools::Tool;

/// The tool an entry names, or `None` when its `use:` is not served.
pub fn build(_entry: &WebEntry) -> Option<Arc<dyn Tool>> {
    None
}
