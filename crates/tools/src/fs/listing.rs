//! A listing's text as `ls` builds it: cut as it grows, each entry shown as
//! `display_path` would show it.

use std::ffi::OsStr;
use std::path::Path;

use deerflow_base::text::{cut, Keep};

/// A listing's lines as far as `max` characters and one line beyond, and how many characters
/// the lines after those would add: what `cut(.., max, Keep::Head).marked(0)` of the whole
/// text shows, without building (or sorting) the part it cuts — most of a large listing.
pub(super) struct Listing {
    text: String,
    /// Characters in `text`.
    chars: usize,
    lines: usize,
    /// Characters of the lines past `text`, newlines included.
    rest: usize,
    max: usize,
}

impl Listing {
    pub(super) fn new(max: usize) -> Self {
        Listing {
            text: String::new(),
            chars: 0,
            lines: 0,
            rest: 0,
            max,
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.chars > self.max
    }

    pub(super) fn push(&mut self, prefix: &ChildPrefix<'_>, name: &OsStr, is_dir: bool) {
        let newline = usize::from(self.lines > 0);
        self.lines += 1;
        if self.is_full() {
            self.rest += newline + prefix.chars_of(name) + usize::from(is_dir);
            return;
        }
        let start = self.text.len();
        if newline > 0 {
            self.text.push('\n');
        }
        prefix.push(&mut self.text, name);
        if is_dir {
            self.text.push('/');
        }
        self.chars += self.text[start..].chars().count();
    }

    pub(super) fn finish(self) -> String {
        if self.lines == 0 {
            return cut("(empty)", self.max, Keep::Head).marked(0);
        }
        // `text` holds more than `max` characters whenever anything was left out, so its cut
        // keeps the same head the whole text's would, and `rest` completes the count.
        cut(&self.text, self.max, Keep::Head).marked(self.rest)
    }
}

/// How a directory's entries are shown: [`Workspace::display_path`] of each, made once per
/// directory rather than once per entry (it compares path components: 15 % of the time of a
/// listing of 100,000 files).
///
/// [`Workspace::display_path`]: deerflow_workspace::Workspace::display_path
pub(super) struct ChildPrefix<'w> {
    /// What comes before an entry's name (`src/`, `/mnt/skills/demo/`, or nothing at the
    /// workspace root), and its length in characters; `None` if that could not be told (each
    /// entry is then shown alone).
    text: Option<(String, usize)>,
    dir: &'w Path,
    ws: &'w deerflow_workspace::Workspace,
}

impl<'w> ChildPrefix<'w> {
    pub(super) fn new(ws: &'w deerflow_workspace::Workspace, dir: &'w Path) -> Self {
        // A child's path is shown as the directory's shown prefix then its name; a probe name
        // tells what that prefix is wherever the directory lies (workspace, skills, elsewhere).
        let probe = ws.display_path(&dir.join("x"));
        let text = probe
            .strip_suffix('x')
            .map(|p| (p.to_string(), p.chars().count()));
        ChildPrefix { text, dir, ws }
    }

    /// Adds how the entry `name` is shown. A lossy name joins a prefix ending in '/' exactly as
    /// the whole path would be shown lossily.
    pub(super) fn push(&self, out: &mut String, name: &OsStr) {
        match &self.text {
            Some((prefix, _)) => {
                out.push_str(prefix);
                out.push_str(&name.to_string_lossy());
            }
            None => out.push_str(&self.ws.display_path(&self.dir.join(name))),
        }
    }

    /// The characters `push` would add.
    pub(super) fn chars_of(&self, name: &OsStr) -> usize {
        match &self.text {
            Some((_, chars)) => chars + name.to_string_lossy().chars().count(),
            None => self.ws.display_path(&self.dir.join(name)).chars().count(),
        }
    }
}
