//! Key paths into the YAML tree (`models[0].timeout`), shared by error messages, the ignored
//! list, `--set` and the line locator.

use std::fmt;

/// A problem at a key path (the file line is added by the loader, who has the text).
pub type Problem = (KeyPath, String);

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path from the document root, rendered the way users read it: `models[0].timeout`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn root() -> Self {
        Self(Vec::new())
    }

    pub fn key(&self, k: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.to_string()));
        Self(v)
    }

    pub fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        Self(v)
    }

    /// Appends the path serde_path_to_error recorded inside a sub-tree decoded on its own.
    pub fn join_serde(&self, p: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment;
        let mut v = self.0.clone();
        for seg in p.iter() {
            match seg {
                Segment::Map { key } => v.push(Seg::Key(key.clone())),
                Segment::Seq { index } => v.push(Seg::Index(*index)),
                // Enums and unknown steps do not occur in this schema; stop rather than guess.
                _ => break,
            }
        }
        Self(v)
    }

    /// Whether a `--set` path (dotted segments, numbers index lists) leads to or into `self`.
    pub fn starts_with_set(&self, set: &[String]) -> bool {
        set.len() <= self.0.len()
            && set.iter().zip(&self.0).all(|(s, seg)| match seg {
                Seg::Key(k) => k == s,
                Seg::Index(i) => s.parse::<usize>().ok() == Some(*i),
            })
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if n == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}
