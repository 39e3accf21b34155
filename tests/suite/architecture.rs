//! ARCHITECTURE.md's dependency rules, checked on the manifests and the source: every crate
//! depends only on crates of a lower layer, the modules inside a crate import only modules
//! of a lower layer, and no two files of one module import each other (directly or around a
//! loop). Test code is exempt (it may reach anything it checks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// The crates, lowest first; a crate may depend only on crates of a lower layer. The same
/// list, with a paragraph per crate, is in ARCHITECTURE.md.
const CRATE_LAYERS: &[&[&str]] = &[
    &["base"],
    &["config"],
    &["model", "workspace"],
    &["events"],
    &["tools"],
    &["agent", "mcp"],
    &["subagent"],
    &["deerflow"],
];

/// The crates that hold more than one module: their modules' layers, lowest first. A file
/// belongs to the module of its first path component (`usage.rs`, `cli/run.rs`); every other
/// file is the crate's root module (named by the crate).
const MODULE_LAYERS: &[(&str, &[&[&str]])] = &[
    ("base", &[&["text"], &["logging"]]),
    ("events", &[&["usage"], &["events"], &["outcome"]]),
    (
        "deerflow",
        &[
            &["deerflow"],
            &["schema", "ui"],
            &["run"],
            &["cli"],
            &["main"],
        ],
    ),
];

fn crate_layer(name: &str) -> Option<usize> {
    CRATE_LAYERS.iter().position(|l| l.contains(&name))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate: its short name and its directory.
fn crates() -> Vec<(String, PathBuf)> {
    let mut out = vec![("deerflow".to_string(), root().to_path_buf())];
    for e in std::fs::read_dir(root().join("crates")).unwrap() {
        let p = e.unwrap().path();
        if p.join("Cargo.toml").is_file() {
            out.push((p.file_name().unwrap().to_string_lossy().into_owned(), p));
        }
    }
    out.sort();
    out
}

/// The `deerflow-*` crates a manifest section names.
fn deerflow_deps(manifest: &str, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if let Some(name) = line.strip_prefix("deerflow-") {
            if inside {
                out.push(name.split(['=', ' ']).next().unwrap().to_string());
            }
        }
    }
    out
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let mut wrong = Vec::new();
    for (name, dir) in crates() {
        let Some(mine) = crate_layer(&name) else {
            wrong.push(format!("crate '{name}' has no layer"));
            continue;
        };
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for section in ["dependencies", "dev-dependencies"] {
            for dep in deerflow_deps(&manifest, section) {
                match crate_layer(&dep) {
                    Some(l) if l < mine => {}
                    _ => wrong.push(format!("{name} [{section}] names deerflow-{dep}")),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

struct Source {
    /// The crate's short name.
    krate: String,
    /// Relative to the crate's src/, with `/`.
    rel: String,
    /// The code without its test module.
    code: String,
}

fn sources() -> Vec<Source> {
    let mut out = Vec::new();
    for (krate, dir) in crates() {
        let src = dir.join("src");
        let mut stack = vec![src.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p: PathBuf = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                let rel = p
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let is_test = rel.ends_with("_tests.rs") || rel.ends_with("/tests.rs");
                if !rel.ends_with(".rs") || is_test || rel == "testing.rs" {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                out.push(Source {
                    krate: krate.clone(),
                    code: without_tests(&text),
                    rel,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.krate, &a.rel).cmp(&(&b.krate, &b.rel)));
    out
}

/// The code before its first `#[cfg(test)]` module (by convention the last items of a
/// file), without comment lines (a doc link is not an import).
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

fn module_layers(krate: &str) -> Option<&'static [&'static [&'static str]]> {
    MODULE_LAYERS
        .iter()
        .find(|(k, _)| *k == krate)
        .map(|(_, l)| *l)
}

/// The module a name at the crate root belongs to: a listed module, else the root's.
fn module_of<'a>(krate: &'a str, first: &'a str) -> &'a str {
    let listed = module_layers(krate)
        .into_iter()
        .flatten()
        .any(|l| l.contains(&first));
    if listed && first != krate {
        first
    } else {
        krate
    }
}

fn module_layer(krate: &str, module: &str) -> Option<usize> {
    module_layers(krate)?
        .iter()
        .position(|l| l.contains(&module))
}

#[test]
fn modules_of_a_crate_import_only_lower_layers() {
    let crate_ref = Regex::new(r"\bcrate::([a-z_]+)").unwrap();
    let mut wrong = Vec::new();
    for s in sources() {
        if module_layers(&s.krate).is_none() || s.rel == "lib.rs" {
            continue;
        }
        let first = s.rel.split('/').next().unwrap();
        let me = module_of(&s.krate, first.strip_suffix(".rs").unwrap_or(first));
        let mine = module_layer(&s.krate, me).unwrap();
        let mut seen = BTreeSet::new();
        for c in crate_ref.captures_iter(&s.code) {
            let to = module_of(&s.krate, c.get(1).unwrap().as_str());
            if to == me || !seen.insert(to.to_string()) {
                continue;
            }
            if module_layer(&s.krate, to).is_none_or(|l| l >= mine) {
                wrong.push(format!(
                    "{}/{}: {me} imports {to}, a layer at or above it",
                    s.krate, s.rel
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Files of one directory (not counting its module root, `mod.rs`, `lib.rs` or `name.rs`,
/// which declares them) that import each other.
#[test]
fn sibling_files_do_not_import_each_other() {
    let all = sources();
    let mut dirs: BTreeMap<(String, String), Vec<&Source>> = BTreeMap::new();
    for s in &all {
        let dir = s.rel.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        dirs.entry((s.krate.clone(), dir)).or_default().push(s);
    }
    let mut cycles = Vec::new();
    for ((krate, dir), files) in &dirs {
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
                let by_crate = if modpath.is_empty() {
                    format!(r"\bcrate::(\{{[^}}]*\b)?{other}\b")
                } else {
                    format!(r"\bcrate::{modpath}::(\{{[^}}]*\b)?{other}\b")
                };
                let uses = Regex::new(&by_super).unwrap().is_match(&f.code)
                    || Regex::new(&by_crate).unwrap().is_match(&f.code);
                if uses {
                    edges.insert(other.clone());
                }
            }
        }
        if let Some(c) = find_cycle(&graph) {
            cycles.push(format!("{krate}: {dir}/: {}", c.join(" -> ")));
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
fn the_checker_sees_a_cycle_a_wrong_layer_and_every_crate() {
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
    assert!(crate_layer("deerflow") > crate_layer("subagent"));
    assert!(crate_layer("model") < crate_layer("tools"));
    assert_eq!(
        deerflow_deps(
            "[dependencies]\ndeerflow-model = { path = \"x\" }\n[features]\ndeerflow-x = []\n",
            "dependencies"
        ),
        ["model"]
    );
    assert_eq!(module_of("events", "usage"), "usage");
    assert_eq!(module_of("events", "queue"), "events");
    assert!(module_layer("deerflow", "cli") > module_layer("deerflow", "run"));
    assert_eq!(
        crates().len(),
        CRATE_LAYERS.iter().map(|l| l.len()).sum::<usize>()
    );
}

/// A bare clone must build and test with nothing beside it: no source, test, bench or
/// manifest may name a path above the repository (the fixtures live in tests/fixtures/).
#[test]
fn nothing_reaches_outside_the_repository() {
    // Built from pieces so that this file does not match itself.
    let needles = [concat!("..", "/shared"), concat!("/shared", "/fixtures")];
    let mut offenders = Vec::new();
    let mut stack: Vec<PathBuf> = [
        "src",
        "crates",
        "tests",
        "benches",
        "fuzz",
        "Cargo.toml",
        "build.rs",
    ]
    .iter()
    .map(|p| root().join(p))
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
                offenders.push(p.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    offenders.sort();
    assert!(
        offenders.is_empty(),
        "these files reach outside: {offenders:?}"
    );
}
