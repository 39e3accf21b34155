//! The `--each` prompt template (contract §15): `{{item}}`, `{{index}}`, `{{FIELD}}` and
//! `{{a.b}}`, compiled once and rendered per item. A placeholder is `{{NAME}}` without
//! spaces, NAME matching `[A-Za-z_][A-Za-z0-9_.]*`; anything else (`{{ .Values }}`) is text,
//! and `\{{` is a literal `{{`.

use serde_json::{Map, Value};

/// One item of the file: a line's text, or the JSON object the line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Text(String),
    Object(Map<String, Value>),
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Item,
    Index,
    /// A path into an object item (`a.b` → `["a", "b"]`; `item.index` → `["index"]`).
    Field(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

impl Template {
    /// Compiles `text`. Without a placeholder, the item is appended after a blank line, so
    /// a plain instruction still sees its item.
    pub fn parse(text: &str) -> Self {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("{{") {
            let escaped = rest[..at].ends_with('\\');
            if escaped {
                lit.push_str(&rest[..at - 1]);
                lit.push_str("{{");
                rest = &rest[at + 2..];
                continue;
            }
            lit.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            match placeholder(after) {
                Some((name, len)) => {
                    if !lit.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut lit)));
                    }
                    parts.push(part_for(name));
                    rest = &after[len..];
                }
                None => {
                    // One brace is text; the next may open a placeholder (`{{{x}}}`).
                    lit.push('{');
                    rest = &rest[at + 1..];
                }
            }
        }
        lit.push_str(rest);
        let placeholders = parts.iter().any(|p| !matches!(p, Part::Text(_)));
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        if !placeholders {
            parts.push(Part::Text("\n\n".into()));
            parts.push(Part::Item);
        }
        Self { parts }
    }

    /// The prompt for the item at `index`; `Err` names the field the item lacks.
    pub fn render(&self, index: u64, item: &Item) -> Result<String, String> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Index => out.push_str(&index.to_string()),
                Part::Item => match item {
                    Item::Text(t) => out.push_str(t),
                    Item::Object(o) => out.push_str(&compact(o)),
                },
                Part::Field(path) => {
                    let v = match item {
                        Item::Object(o) => lookup(o, path),
                        Item::Text(_) => None,
                    };
                    match v {
                        Some(Value::String(s)) => out.push_str(s),
                        Some(v) => out.push_str(&v.to_string()),
                        None => return Err(absent(path, item)),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// `NAME}}` at the start of `s`: the name and the length through the closing braces.
fn placeholder(s: &str) -> Option<(&str, usize)> {
    let end = s.find("}}")?;
    let name = &s[..end];
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    ok.then_some((name, end + 2))
}

fn part_for(name: &str) -> Part {
    match name {
        "item" => Part::Item,
        "index" => Part::Index,
        _ => {
            let path = name.strip_prefix("item.").unwrap_or(name);
            Part::Field(path.split('.').map(str::to_string).collect())
        }
    }
}

fn lookup<'a>(o: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut v = o.get(first)?;
    for key in rest {
        v = match v {
            Value::Object(m) => m.get(key)?,
            // `{{tags.0}}`: a number indexes an array.
            Value::Array(a) => a.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

fn absent(path: &[String], item: &Item) -> String {
    let name = path.join(".");
    match item {
        Item::Text(_) => {
            format!("the template names field '{name}' but the item is text, not a JSON object")
        }
        Item::Object(_) => format!("the item has no field '{name}'"),
    }
}

fn compact(o: &Map<String, Value>) -> String {
    // A map of JSON values always serializes.
    serde_json::to_string(o).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Item {
        match v {
            Value::Object(o) => Item::Object(o),
            _ => panic!("not an object"),
        }
    }

    fn render(t: &str, index: u64, item: &Item) -> Result<String, String> {
        Template::parse(t).render(index, item)
    }

    #[test]
    fn builtins_fields_and_paths() {
        let item = obj(
            json!({"name": "ada", "n": 3, "a": {"b": "deep", "c": [1, "x"]}, "index": "own", "ok": true, "none": null}),
        );
        assert_eq!(
            render(
                "{{index}}: {{name}} {{n}} {{a.b}} {{a.c}} {{a.c.1}} {{ok}} {{none}}",
                4,
                &item
            )
            .unwrap(),
            r#"4: ada 3 deep [1,"x"] x true null"#
        );
        assert_eq!(
            render("{{item.index}} {{index}}", 9, &item).unwrap(),
            "own 9"
        );
        assert_eq!(
            render("{{item}}", 0, &obj(json!({"z": 1, "a": "b c"}))).unwrap(),
            r#"{"z":1,"a":"b c"}"#
        );
        assert_eq!(
            render("Say {{item}}!", 0, &Item::Text(" hi ".into())).unwrap(),
            "Say  hi !"
        );
        assert_eq!(render("{{item.name}}", 0, &item).unwrap(), "ada");
    }

    #[test]
    fn a_template_without_placeholder_gets_the_item_appended() {
        assert_eq!(
            render("Summarize.", 0, &Item::Text("t".into())).unwrap(),
            "Summarize.\n\nt"
        );
        // An escaped or malformed placeholder is not one.
        assert_eq!(
            render(
                r"keep \{{item}} and {{ .Values }}",
                0,
                &Item::Text("t".into())
            )
            .unwrap(),
            "keep {{item}} and {{ .Values }}\n\nt"
        );
    }

    #[test]
    fn literal_braces_and_odd_names() {
        let t = Item::Text("v".into());
        assert_eq!(render("{{{item}}}", 0, &t).unwrap(), "{v}");
        assert_eq!(
            render("{{item}} {{1x}} {{a-b}} {{}} {{", 0, &t).unwrap(),
            "v {{1x}} {{a-b}} {{}} {{"
        );
        assert_eq!(
            render(r"\{{index}} {{index}}", 2, &t).unwrap(),
            "{{index}} 2"
        );
        assert_eq!(render(r"a\b {{index}}", 2, &t).unwrap(), r"a\b 2");
    }

    #[test]
    fn absent_fields_name_themselves() {
        let item = obj(json!({"a": {"b": 1}, "s": "x"}));
        assert_eq!(
            render("{{a.c}}", 0, &item).unwrap_err(),
            "the item has no field 'a.c'"
        );
        assert_eq!(
            render("{{s.x}}", 0, &item).unwrap_err(),
            "the item has no field 's.x'"
        );
        assert_eq!(
            render("{{a.}}", 0, &item).unwrap_err(),
            "the item has no field 'a.'"
        );
        assert!(render("{{name}}", 0, &Item::Text("t".into()))
            .unwrap_err()
            .contains("the item is text"));
    }
}
