//! The web tools of contract §14 (`web_search`, `web_fetch`, `image_search`): a config entry
//! resolved into a [`WebEntry`], one backend adapter per service behind a seam per tool, and
//! the network guard every fetched URL goes through.

pub mod entry;
pub mod fetch;
pub mod guard;
pub mod search;

pub use entry::WebEntry;
