//! The ledger's first line: what it was written for (contract §15). A run that differs in
//! any of it is a usage error naming the difference, so a ledger never resumes a run it was
//! not written for.

use serde::{Deserialize, Serialize};

/// The format of the ledger's lines; a ledger of another version is not read.
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub deerflow_ledger: u32,
    pub written_for: Purpose,
}

/// What a run is: the same purpose, the same work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purpose {
    /// The prompt, or the `--each` template.
    pub prompt: String,
    /// Whether the prompt runs once per item of `--each`.
    pub each: bool,
    /// The `--agent` type items run as (`--each` only).
    pub agent: Option<String>,
    /// The resolved model, as named in events.
    pub model: String,
    /// The fingerprint of the `--output-schema` file's contents.
    pub output_schema: Option<String>,
    /// The fingerprints of the `--image` files' contents, in order.
    pub images: Vec<String>,
    /// `--shard K/N`.
    pub shard: Option<String>,
}

impl Purpose {
    /// The first way `self` (the run) differs from `was` (the ledger's), in words.
    pub fn difference(&self, was: &Purpose) -> Option<String> {
        let shown = |o: &Option<String>, none: &str| o.clone().unwrap_or_else(|| none.into());
        if self.each != was.each {
            let with = |b: bool| if b { "with --each" } else { "without --each" };
            return Some(format!(
                "was written for a run {}, this one runs {}",
                with(was.each),
                with(self.each)
            ));
        }
        if self.prompt != was.prompt {
            let what = if self.each { "template" } else { "prompt" };
            return Some(format!(
                "was written for another {what} ({}), not this one ({})",
                excerpt(&was.prompt),
                excerpt(&self.prompt)
            ));
        }
        if self.agent != was.agent {
            return Some(format!(
                "was written for --agent {}, not --agent {}",
                shown(&was.agent, "(none)"),
                shown(&self.agent, "(none)")
            ));
        }
        if self.model != was.model {
            return Some(format!(
                "was written for model {}, not {}",
                was.model, self.model
            ));
        }
        if self.output_schema != was.output_schema {
            return Some(match (&was.output_schema, &self.output_schema) {
                (None, _) => "was written without --output-schema".into(),
                (_, None) => "was written with an --output-schema, this run has none".into(),
                _ => "was written for another --output-schema (its contents differ)".into(),
            });
        }
        if self.images != was.images {
            return Some(format!(
                "was written for other --image contents ({} image(s); this run has {})",
                was.images.len(),
                self.images.len()
            ));
        }
        if self.shard != was.shard {
            return Some(format!(
                "was written for --shard {}, not --shard {}",
                shown(&was.shard, "(none)"),
                shown(&self.shard, "(none)")
            ));
        }
        None
    }
}

/// The start of a prompt, on one line, for a message.
fn excerpt(s: &str) -> String {
    let one_line: String = s
        .chars()
        .take(60)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().count() > 60 {
        format!("\"{one_line}…\"")
    } else {
        format!("\"{one_line}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purpose() -> Purpose {
        Purpose {
            prompt: "Summarize {{item}}".into(),
            each: true,
            agent: Some("general-purpose".into()),
            model: "demo".into(),
            output_schema: None,
            images: vec![],
            shard: Some("1/3".into()),
        }
    }

    #[test]
    fn each_difference_is_named() {
        let was = purpose();
        assert_eq!(purpose().difference(&was), None);
        let mut p = purpose();
        p.prompt = "Translate {{item}}".into();
        let d = p.difference(&was).unwrap();
        assert!(
            d.contains("another template") && d.contains("Summarize"),
            "{d}"
        );
        let mut p = purpose();
        p.shard = Some("2/3".into());
        assert!(p
            .difference(&was)
            .unwrap()
            .contains("--shard 1/3, not --shard 2/3"));
        let mut p = purpose();
        p.model = "other".into();
        assert!(p
            .difference(&was)
            .unwrap()
            .contains("model demo, not other"));
        let mut p = purpose();
        p.output_schema = Some("ab".into());
        assert!(p
            .difference(&was)
            .unwrap()
            .contains("without --output-schema"));
        let mut p = purpose();
        p.images = vec!["cd".into()];
        assert!(p.difference(&was).unwrap().contains("--image"));
        let mut p = purpose();
        p.agent = Some("bash".into());
        assert!(p
            .difference(&was)
            .unwrap()
            .contains("--agent general-purpose, not --agent bash"));
    }
}
