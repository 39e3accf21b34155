//! ARCHITECTURE.md's dependency rules, checked on the source: every module imports only
//! modules of a lower layer, and no two files of one module import each other (directly or
//! around a loop). Test code is exempt (it may reach anything it checks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// The layers, lowest first. A module may import only modules of a lower layer; the
/// same list, with a paragraph per module, is in ARCHITECTURE.md.
const LAYERS: &[&[&str]] = &[
    &["text"],
    &["logging", "config"],
    &["model", "workspace"],
    &["usage"],
    &["events"],
    &["outcome", "schema", "tools", "ui"],
    &["agent", "mcp"],
    &["subagent"],
    &["run"],
    &["cli"],
    &["main"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

struct Source {
    /// Relative to src/, with `/`.
    rel: String,
    /// The code without its test module.
    code: String,
}

fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p: PathBuf = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if !rel.ends_with(".rs") || rel.ends_with("_tests.rs") || rel == "testing.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            out.push(Source {
                code: without_tests(&text),
                rel,
            });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// The code before its `#[cfg(test)] mod … {` (by convention the last item of a file),
/// without comment lines (a doc link is not an import).
fn without_tests(text: &str) -> String {
    let re = Regex::new(r"#\[cfg\(test\)\]\s*\n\s*(pub(\(crate\))? )?mod \w+ \{").unwrap();
    let code = match re.find(text) {
        Some(m) => &text[..m.start()],
        None => text,
    };
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn top_module(rel: &str) -> &str {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first)
}

#[test]
fn modules_import_only_lower_layers() {
    let crate_ref = Regex::new(r"\bcrate::([a-z_]+)").unwrap();
    let bin_ref = Regex::new(r"\bdeerflow::([a-z_]+)").unwrap();
    let mut wrong = Vec::new();
    for s in sources() {
        let me = top_module(&s.rel);
        if me == "lib" {
            continue;
        }
        let Some(mine) = layer(me) else {
            wrong.push(format!("{}: module '{me}' has no layer", s.rel));
            continue;
        };
        let refs = crate_ref.captures_iter(&s.code).chain(if me == "main" {
            bin_ref.captures_iter(&s.code).collect::<Vec<_>>()
        } else {
            Vec::new()
        });
        let mut seen = BTreeSet::new();
        for c in refs {
            let to = c.get(1).unwrap().as_str();
            if to == me || !seen.insert(to.to_string()) {
                continue;
            }
            match layer(to) {
                Some(l) if l < mine => {}
                Some(_) => wrong.push(format!(
                    "{}: {me} imports {to}, a layer at or above it",
                    s.rel
                )),
                None => wrong.push(format!("{}: imports '{to}', which has no layer", s.rel)),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Files of one directory (not counting its module root, `mod.rs` or `name.rs`, which
/// declares them) that import each other.
#[test]
fn sibling_files_do_not_import_each_other() {
    let all = sources();
    let mut dirs: BTreeMap<String, Vec<&Source>> = BTreeMap::new();
    for s in &all {
        let dir = s.rel.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        dirs.entry(dir).or_default().push(s);
    }
    let mut cycles = Vec::new();
    for (dir, files) in &dirs {
        let stems: BTreeSet<String> = files
            .iter()
            .map(|f| stem(&f.rel).to_string())
            .filter(|s| s != "mod")
            .collect();
        let modpath = dir.replace('/', "::");
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in files {
            let me = stem(&f.rel).to_string();
            if me == "mod" || (dir.is_empty() && (me == "lib" || me == "main")) {
                continue;
            }
            let edges = graph.entry(me.clone()).or_default();
            for other in &stems {
                if *other == me {
                    continue;
                }
                let by_super = format!(r"\bsuper::(\{{[^}}]*\b)?{other}\b");
                let by_crate = format!(r"\bcrate::{modpath}::(\{{[^}}]*\b)?{other}\b");
                let uses = Regex::new(&by_super).unwrap().is_match(&f.code)
                    || (!modpath.is_empty() && Regex::new(&by_crate).unwrap().is_match(&f.code));
                if uses {
                    edges.insert(other.clone());
                }
            }
        }
        if let Some(c) = find_cycle(&graph) {
            cycles.push(format!("{dir}/: {}", c.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

fn stem(rel: &str) -> &str {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    file.strip_suffix(".rs").unwrap_or(file)
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_checker_sees_a_cycle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    assert_eq!(
        without_tests("//! see super::load\nfn a() {}\n#[cfg(test)]\nmod tests {\n}"),
        "fn a() {}"
    );
    assert_eq!(layer("text"), Some(0));
    assert!(layer("cli") > layer("run"));
}

/// A bare clone must build and test with nothing beside it: no source, test, bench or
/// manifest may name a path above the repository (the fixtures live in tests/fixtures/).
#[test]
fn nothing_reaches_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Built from pieces so that this file does not match itself.
    let needles = [concat!("..", "/shared"), concat!("/shared", "/fixtures")];
    let mut offenders = Vec::new();
    let mut stack: Vec<PathBuf> = ["src", "tests", "benches", "fuzz", "Cargo.toml", "build.rs"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n == "target" || n == "fixtures")
            {
                continue;
            }
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            if needles.iter().any(|n| text.contains(n)) {
                offenders.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "these files reach outside: {offenders:?}"
    );
}
