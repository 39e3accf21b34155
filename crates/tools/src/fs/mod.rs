//! File tools, one file each: `ls` (`ls.rs`, which builds its text with `listing.rs` from
//! the entries `entries.rs` reads), `read_file` (`read.rs`), `write_file` (`write.rs`) and
//! `str_replace` (`edit.rs`), `view_image` (`view_image.rs`). Shared by them: `target.rs` resolves a path argument and opens it
//! beneath its root; `binary.rs` tells text from binary (for `grep` too).

mod binary;
mod edit;
mod entries;
mod listing;
mod ls;
mod read;
mod target;
#[cfg(test)]
pub(crate) mod tests;
mod view_image;
mod write;

pub use crate::walk::IGNORED_DIRS;
pub(crate) use binary::{decode_text, looks_binary};
pub use edit::{StrReplaceArgs, StrReplaceTool};
pub use ls::{LsArgs, LsTool};
pub use read::{ReadFileArgs, ReadFileTool};
pub(crate) use target::resolve;
pub use view_image::read_capped;
pub use view_image::{ViewImageArgs, ViewImageTool, VIEW_IMAGE};
pub use write::{WriteFileArgs, WriteFileTool};
