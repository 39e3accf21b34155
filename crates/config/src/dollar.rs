//! The two `$` rules a config string may follow (contract §2, §9, §12).
//!
//! - [`expand_strict`]: deerflow's and DeerFlow's rule (the YAML config, DeerFlow's
//!   `extensions_config.json`): only a whole `$NAME` value is a reference. Anything else
//!   that looks like one (`${VAR}`, `$VAR-x`, a lone `$`) is an error, never sent literally.
//! - [`expand_claude`]: Claude Code's `.mcp.json` rule (`--mcp-config` files): `${VAR}` and
//!   `${VAR:-default}` anywhere in the value, plus the whole `$NAME` of §2.
//!
//! Both return the value to use, or why there is none; the caller names the key.

use super::env::{var_name, Env};

/// Why a config string has no value to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DollarError {
    /// The variable (named) is unset or empty, and no default was given.
    Unset(String),
    /// The value is not written the way its rule reads references; the text says how to fix it.
    Malformed(String),
}

const WHOLE_NAME: &str =
    "a value starting with $ must be a whole $NAME reference (no braces, nothing around it)";

/// §12's rule: a whole `$NAME` value is the variable's value; a value that starts with `$`
/// or holds `${` otherwise is [`DollarError::Malformed`]; anything else is kept as it is.
pub fn expand_strict(raw: &str, env: &Env) -> Result<String, DollarError> {
    if let Some(name) = var_name(raw) {
        return env.get(name).ok_or_else(|| DollarError::Unset(name.into()));
    }
    if raw.trim_start().starts_with('$') {
        return Err(DollarError::Malformed(WHOLE_NAME.into()));
    }
    if raw.contains("${") {
        return Err(DollarError::Malformed(
            "${…} is not expanded here (only in --mcp-config files); write the whole value as $NAME"
                .into(),
        ));
    }
    Ok(raw.to_string())
}

/// Claude Code's rule: every `${VAR}` is the variable's value (unset: an error),
/// `${VAR:-default}` the value or the default; a whole `$NAME` value is a reference as in
/// §2; another value starting with `$` (`$VAR-x`) is [`DollarError::Malformed`].
pub fn expand_claude(raw: &str, env: &Env) -> Result<String, DollarError> {
    if let Some(name) = var_name(raw) {
        return env.get(name).ok_or_else(|| DollarError::Unset(name.into()));
    }
    if raw.trim_start().starts_with('$') && !raw.trim_start().starts_with("${") {
        return Err(DollarError::Malformed(WHOLE_NAME.into()));
    }
    let mut out = String::with_capacity(raw.len());
    for piece in claude_pieces(raw)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Var { name, default } => match (env.get(name), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => return Err(DollarError::Unset(name.into())),
            },
        }
    }
    Ok(out)
}

/// The variables a value reads under Claude Code's rule (whole `$NAME` included), for the
/// list of secrets no tool's child may inherit. A malformed value reads none.
pub fn claude_names(raw: &str) -> Vec<String> {
    if let Some(name) = var_name(raw) {
        return vec![name.to_string()];
    }
    claude_pieces(raw)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Var { name, .. } => Some(name.to_string()),
            Piece::Text(_) => None,
        })
        .collect()
}

enum Piece<'a> {
    Text(&'a str),
    Var {
        name: &'a str,
        default: Option<&'a str>,
    },
}

/// `raw` cut at its `${…}` references. The default ends at the first `}` (as in Claude
/// Code); a reference without its `}` or with a name that is no variable name is an error.
fn claude_pieces(raw: &str) -> Result<Vec<Piece<'_>>, DollarError> {
    let mut pieces = Vec::new();
    let mut rest = raw;
    while let Some(at) = rest.find("${") {
        pieces.push(Piece::Text(&rest[..at]));
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(DollarError::Malformed(
                "`${` without its closing `}` (write ${NAME} or ${NAME:-default})".into(),
            ));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if var_name(&format!("${name}")).is_none() {
            return Err(DollarError::Malformed(format!(
                "`${{{inner}}}` is no reference: write ${{NAME}} or ${{NAME:-default}}"
            )));
        }
        pieces.push(Piece::Var { name, default });
        rest = &after[end + 1..];
    }
    pieces.push(Piece::Text(rest));
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::from_pairs([("TOKEN", "t0k"), ("HOST", "h"), ("EMPTY", "")])
    }

    fn malformed(r: Result<String, DollarError>) -> bool {
        matches!(r, Err(DollarError::Malformed(_)))
    }

    #[test]
    fn strict_reads_only_whole_names() {
        let env = env();
        assert_eq!(expand_strict("$TOKEN", &env), Ok("t0k".into()));
        assert_eq!(expand_strict("plain a$b", &env), Ok("plain a$b".into()));
        assert_eq!(
            expand_strict("$NOPE", &env),
            Err(DollarError::Unset("NOPE".into()))
        );
        assert_eq!(
            expand_strict("$EMPTY", &env),
            Err(DollarError::Unset("EMPTY".into()))
        );
        for bad in [
            "${TOKEN}",
            "$TOKEN-x",
            "$",
            " $TOKEN",
            "$1",
            "Bearer ${TOKEN}",
        ] {
            assert!(malformed(expand_strict(bad, &env)), "{bad}");
        }
    }

    #[test]
    fn claude_expands_braces_anywhere_with_defaults() {
        let env = env();
        let ok = |raw: &str, want: &str| assert_eq!(expand_claude(raw, &env), Ok(want.into()));
        ok("${TOKEN}", "t0k");
        ok("Bearer ${TOKEN}", "Bearer t0k");
        ok("https://${HOST}:${PORT:-8080}/mcp", "https://h:8080/mcp");
        ok("${NOPE:-}", "");
        ok("${EMPTY:-d}", "d");
        ok("${TOKEN:-d}", "t0k");
        ok("$TOKEN", "t0k");
        ok("a$b $ c", "a$b $ c");
        assert_eq!(
            expand_claude("x ${NOPE} y", &env),
            Err(DollarError::Unset("NOPE".into()))
        );
        for bad in ["$TOKEN-x", "$", "${TOKEN", "${}", "${A B}", "x ${-d}"] {
            assert!(malformed(expand_claude(bad, &env)), "{bad}");
        }
    }

    #[test]
    fn claude_names_lists_every_variable_read() {
        assert_eq!(claude_names("$A"), ["A"]);
        assert_eq!(claude_names("${A} and ${B:-x}"), ["A", "B"]);
        assert!(claude_names("plain").is_empty());
        assert!(claude_names("${").is_empty());
    }
}
