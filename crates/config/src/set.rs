//! `--set KEY=VALUE`: parsing (a clap value parser) and application to the YAML tree.

use serde_yaml_ng::{Mapping, Value};

/// One `--set` override: a dotted key path and a YAML value.
#[derive(Debug, Clone, PartialEq)]
pub struct SetOverride {
    /// Segments of the dotted path; numeric segments index lists (`models.0.model`).
    pub path: Vec<String>,
    pub value: Value,
}

impl SetOverride {
    /// The dotted key as the user typed it.
    pub fn key(&self) -> String {
        self.path.join(".")
    }
}

/// Parses `KEY=VALUE`. KEY is dotted; a list index is a number segment (`models.0.model`)
/// or a bracket (`models[0].model`). VALUE is read as a YAML scalar or flow value (`60` is
/// an integer, `[a, b]` a list); an empty VALUE is `null`, which restores the default.
pub fn parse_set(s: &str) -> Result<SetOverride, String> {
    let Some((key, raw)) = s.split_once('=') else {
        return Err(format!(
            "--set {s:?}: expected KEY=VALUE (e.g. subagents.timeout_seconds=60)"
        ));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("--set {s:?}: the key before '=' is empty"));
    }
    let mut path = Vec::new();
    for segment in key.split('.').map(str::trim) {
        if segment.is_empty() {
            return Err(format!("--set {s:?}: empty segment in key {key:?}"));
        }
        split_indexes(segment, &mut path).ok_or_else(|| {
            format!("--set {s:?}: malformed index in key {key:?} (use models[0] or models.0)")
        })?;
    }
    let value = serde_yaml_ng::from_str::<Value>(raw).map_err(|e| {
        format!(
            "--set {key}: value is not valid YAML: {}",
            one_line(&e.to_string())
        )
    })?;
    Ok(SetOverride { path, value })
}

/// `models[0][1]` → `models`, `0`, `1`, so the bracket form reads like the key paths in
/// error messages instead of becoming an unknown key `models[0]`. `None` when malformed.
fn split_indexes(segment: &str, path: &mut Vec<String>) -> Option<()> {
    let (name, mut rest) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
    if name.is_empty() || name.contains(']') {
        return None;
    }
    path.push(name.to_string());
    while !rest.is_empty() {
        let (index, after) = rest.strip_prefix('[')?.split_once(']')?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        path.push(index.to_string());
        rest = after;
    }
    Some(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Applies one override, creating mappings on the way. Fails when the path runs through a
/// scalar or indexes past the end of a list.
pub fn apply_set(root: &mut Value, set: &SetOverride) -> Result<(), String> {
    let mut node = root;
    for (n, seg) in set.path.iter().enumerate() {
        let here = &set.path[..n];
        if node.is_null() {
            *node = Value::Mapping(Mapping::new());
        }
        node = match node {
            Value::Mapping(map) => map.entry(Value::String(seg.clone())).or_insert(Value::Null),
            Value::Sequence(items) => index_into(items, seg, here, set)?,
            _ => {
                return Err(format!(
                    "--set {}: {} is not a mapping",
                    set.key(),
                    here.join(".")
                ))
            }
        };
    }
    *node = set.value.clone();
    Ok(())
}

fn index_into<'a>(
    items: &'a mut [Value],
    seg: &str,
    here: &[String],
    set: &SetOverride,
) -> Result<&'a mut Value, String> {
    let len = items.len();
    let at = here.join(".");
    let i: usize = seg.parse().map_err(|_| {
        format!(
            "--set {}: {at} is a list; use a number, not {seg:?}",
            set.key()
        )
    })?;
    items.get_mut(i).ok_or_else(|| {
        format!(
            "--set {}: index {i} is out of range ({at} has {len} entries)",
            set.key()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    #[test]
    fn parse_table() {
        let cases: &[(&str, &[&str], Value)] = &[
            (
                "subagents.timeout_seconds=60",
                &["subagents", "timeout_seconds"],
                Value::from(60),
            ),
            ("a=1.5", &["a"], Value::from(1.5)),
            (
                "sandbox.allow_host_bash=true",
                &["sandbox", "allow_host_bash"],
                Value::Bool(true),
            ),
            ("a.b=[x, y]", &["a", "b"], yaml("[x, y]")),
            ("a={x: 1}", &["a"], yaml("{x: 1}")),
            ("a=hello", &["a"], Value::from("hello")),
            ("a=hello world", &["a"], Value::from("hello world")),
            ("a=x=y", &["a"], Value::from("x=y")),
            ("a=\"60\"", &["a"], Value::from("60")),
            (
                "models.0.model=gpt-4o",
                &["models", "0", "model"],
                Value::from("gpt-4o"),
            ),
            ("a=", &["a"], Value::Null),
            (
                "models[0].name=x",
                &["models", "0", "name"],
                Value::from("x"),
            ),
            ("a[1][2].b=1", &["a", "1", "2", "b"], Value::from(1)),
            (" a.b =2", &["a", "b"], Value::from(2)),
        ];
        for (input, path, value) in cases {
            let got = parse_set(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(got.path, *path, "{input}");
            assert_eq!(&got.value, value, "{input}");
        }
    }

    #[test]
    fn parse_malformed() {
        for bad in [
            "novalue", "=1", " =1", "a..b=1", "a.=1", "a=[1,", "a={x", "a[x]=1", "a[0=1", "a]=1",
            "[0]=1", "a[]=1", "a[0]b=1",
        ] {
            let err = parse_set(bad).expect_err(bad);
            assert!(!err.contains('\n'), "{err}");
            assert!(err.starts_with("--set"), "{err}");
        }
    }

    #[test]
    fn apply_creates_and_indexes() {
        let mut root = yaml("models: [{name: a, model: x}]\nsubagents: {enabled: true}");
        apply_set(&mut root, &parse_set("models.0.model=y").unwrap()).unwrap();
        apply_set(
            &mut root,
            &parse_set("subagents.agents.bash.max_turns=5").unwrap(),
        )
        .unwrap();
        apply_set(&mut root, &parse_set("token_budget.enabled=true").unwrap()).unwrap();
        assert_eq!(root["models"][0]["model"], Value::from("y"));
        assert_eq!(
            root["subagents"]["agents"]["bash"]["max_turns"],
            Value::from(5)
        );
        assert_eq!(root["token_budget"]["enabled"], Value::Bool(true));
        let mut empty = Value::Null;
        apply_set(&mut empty, &parse_set("a.b=1").unwrap()).unwrap();
        assert_eq!(empty["a"]["b"], Value::from(1));
    }

    #[test]
    fn apply_errors() {
        let mut root = yaml("models: [{name: a}]\nsandbox: local");
        let e = apply_set(&mut root, &parse_set("models.3.model=y").unwrap()).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e = apply_set(&mut root, &parse_set("models.x=y").unwrap()).unwrap_err();
        assert!(e.contains("is a list"), "{e}");
        let e = apply_set(&mut root, &parse_set("sandbox.use=local").unwrap()).unwrap_err();
        assert!(e.contains("sandbox is not a mapping"), "{e}");
    }
}
