//! Key paths into the YAML tree (`models[0].timeout`), shared by error messages, the ignored
//! list, `--set` and the line locator.

use std::fmt;

/// A problem at a key path (the file line is added by the loader, who has the text).
pub type Problem = (KeyPath, String);

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path from the document root, rendered the way users read it: `models[0].timeout`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
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
