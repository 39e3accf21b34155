//! The web tools of contract §14 (`web_search`, `web_fetch`, `image_search`): a config entry
//! resolved into a [`WebEntry`], one backend adapter per service behind a seam per tool, and
//! the network guard every fetched URL goes through.

pub mod entry;
pub mod fetch;
pub mod guard;
pub mod offer;
pub mod replay;
pub mod search;

use std::sync::Arc;

pub use entry::WebEntry;

use super::Tool;

/// The names of the web tools, as the model calls them.
pub const WEB_TOOLS: [&str; 3] = ["web_search", "web_fetch", "image_search"];

/// The tool an entry names, built by its backend; `None` when deerflow cannot serve the
/// entry's `use:` (or the name is no web tool).
pub fn build(entry: &WebEntry) -> Option<Arc<dyn Tool>> {
    match entry.name.as_str() {
        "web_search" | "image_search" => search::build(entry),
        "web_fetch" => fetch::build(entry),
        _ => None,
    }
}
