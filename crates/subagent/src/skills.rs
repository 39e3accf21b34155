//! Skill discovery (contract §6): every `SKILL.md` one or two levels below the skills
//! directory, with YAML front matter. A broken skill is skipped with a warning, never fatal.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Where agents read it: `/mnt/skills/<dir>/SKILL.md`.
    pub path: String,
    pub allowed_tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    #[serde(rename = "allowed-tools", default)]
    allowed_tools: Option<AllowedTools>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AllowedTools {
    List(Vec<String>),
    Text(String),
}

/// Skills found under `dir`, in path order (the first of two with one name wins), and
/// the warnings about skipped ones.
pub fn discover(dir: &Path) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut warnings = Vec::new();
    for file in skill_files(dir) {
        let rel = file
            .strip_prefix(dir)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let path = format!("/mnt/skills/{rel}");
        match parse(&file, path) {
            Ok(s) if skills.iter().any(|k| k.name == s.name) => warnings.push(format!(
                "skill {rel} skipped: another skill is already named '{}'",
                s.name
            )),
            Ok(s) => skills.push(s),
            Err(why) => warnings.push(format!("skill {rel} skipped: {why}")),
        }
    }
    (skills, warnings)
}

fn skill_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for level1 in sorted_dirs(dir) {
        let f = level1.join("SKILL.md");
        if f.is_file() {
            found.push(f);
            continue;
        }
        for level2 in sorted_dirs(&level1) {
            let f = level2.join("SKILL.md");
            if f.is_file() {
                found.push(f);
            }
        }
    }
    found
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                // `.git`, `.cache`, a hidden draft: not skills, as DeerFlow has it (§6).
                .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn parse(file: &Path, path: String) -> Result<Skill, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
    let yaml = front_matter(&text).ok_or("no YAML front matter (--- … ---)")?;
    let fm: FrontMatter =
        serde_yaml_ng::from_str(yaml).map_err(|e| format!("invalid front matter: {e}"))?;
    let name = fm
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or("front matter has no 'name'")?;
    let description = fm
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or("front matter has no 'description'")?;
    let allowed_tools = fm.allowed_tools.map(|a| match a {
        AllowedTools::List(v) => v,
        AllowedTools::Text(s) => s
            .split([',', ' '])
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect(),
    });
    Ok(Skill {
        name: name.trim().to_string(),
        description: description.trim().to_string(),
        path,
        allowed_tools,
    })
}

fn front_matter(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---")?;
    let rest = rest
        .strip_prefix('\n')
        .or_else(|| rest.strip_prefix("\r\n"))?;
    let end = rest.find("\n---")?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/deerflow/skills")
    }

    #[test]
    fn finds_deerflows_real_skills() {
        let (skills, warnings) = discover(&fixtures());
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["code-documentation", "data-analysis", "deep-research"]
        );
        assert_eq!(skills[0].path, "/mnt/skills/code-documentation/SKILL.md");
        assert!(skills[1]
            .description
            .starts_with("Use this skill when the user uploads Excel"));
    }

    #[test]
    fn two_levels_broken_and_duplicate_skills() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str, body: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w(
            "public/a/SKILL.md",
            "---\nname: a\ndescription: first a\nallowed-tools: [read_file]\n---\nbody",
        );
        w(
            "public/e/SKILL.md",
            "---\nname: e\ndescription: tools listed\nallowed-tools: read_file, grep\n---\n",
        );
        w(
            "custom/a/SKILL.md",
            "---\nname: a\ndescription: second a\n---\n",
        );
        w("public/b/SKILL.md", "no front matter");
        w("public/c/SKILL.md", "---\nname: c\n---\n");
        w("d/SKILL.md", "---\nname: d\ndescription: top level\n---\n");
        w(
            "x/y/z/SKILL.md",
            "---\nname: too-deep\ndescription: ignored\n---\n",
        );
        let (skills, warnings) = discover(d.path());
        let names: Vec<_> = skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str()))
            .collect();
        // Path order: custom/ sorts before d/ and public/.
        assert_eq!(
            names,
            [("a", "second a"), ("d", "top level"), ("e", "tools listed")]
        );
        assert_eq!(
            skills[2].allowed_tools,
            Some(vec!["read_file".to_string(), "grep".to_string()])
        );
        assert_eq!(skills[0].allowed_tools, None);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings
            .iter()
            .any(|w| w.contains("public/a") && w.contains("already named")));
        assert!(warnings
            .iter()
            .any(|w| w.contains("public/b") && w.contains("front matter")));
        assert!(warnings
            .iter()
            .any(|w| w.contains("public/c") && w.contains("description")));
    }

    #[test]
    fn hidden_directories_are_skipped_at_both_levels() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str| {
            let p = d.path().join(rel).join("SKILL.md");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("---\nname: {rel}\ndescription: d\n---\n")).unwrap();
        };
        w(".hidden");
        w("public/.draft");
        w(".git/x");
        w("public/shown");
        let (skills, warnings) = discover(d.path());
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["public/shown"]);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn missing_directory_is_no_skills() {
        let (s, w) = discover(Path::new("/nonexistent/skills"));
        assert!(s.is_empty() && w.is_empty());
    }
}
