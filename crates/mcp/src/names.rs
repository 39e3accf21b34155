//! The names server tools are offered under. Providers accept tool names matching
//! `^[a-zA-Z0-9_-]{1,64}$` only, and one name they reject fails every request of the run;
//! so a name outside that rule is rewritten (the call still goes to the server under its
//! own name, see `McpTool::remote`).

use std::collections::HashSet;

/// The longest name providers accept.
pub const MAX_NAME: usize = 64;

/// Whether providers accept `name` as it is.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The offered name for each of `wanted` (in order). A valid name is kept, even when taken:
/// a real collision is the caller's to report (contract §9). Another has each invalid
/// character replaced by `_` (empty: `tool`); when that is too long, or is taken (by
/// `taken`, a valid name of the list, or an earlier rewrite), it is cut to fit an `_` and 8
/// hex digits of a hash of the original. Linear in the number of names.
pub fn offer(wanted: &[String], taken: impl Fn(&str) -> bool) -> Vec<String> {
    let used: HashSet<&str> = wanted
        .iter()
        .map(String::as_str)
        .filter(|n| is_valid(n))
        .collect();
    let mut rewritten: HashSet<String> = HashSet::new();
    wanted
        .iter()
        .map(|raw| {
            if is_valid(raw) {
                return raw.clone();
            }
            let base = replace_invalid(raw);
            let mut name = base.clone();
            let mut salt = 0u32;
            while name.len() > MAX_NAME
                || taken(&name)
                || used.contains(name.as_str())
                || rewritten.contains(&name)
            {
                name = hashed(&base, raw, salt);
                salt += 1;
            }
            rewritten.insert(name.clone());
            name
        })
        .collect()
}

fn replace_invalid(raw: &str) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "tool".into()
    } else {
        s
    }
}

/// `base` cut so that `_` and 8 hex digits of a hash of `raw` (and `salt`, when an earlier
/// try was taken) fit in [`MAX_NAME`]. `base` is ASCII, so any byte index is a boundary.
fn hashed(base: &str, raw: &str, salt: u32) -> String {
    let keep = base.len().min(MAX_NAME - 9);
    format!("{}_{:08x}", &base[..keep], fnv1a(raw, salt))
}

/// FNV-1a: stable across builds and platforms (std's hasher promises neither), so a name
/// is the same in every run and a replay cassette keeps matching.
fn fnv1a(raw: &str, salt: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in raw.bytes().chain(salt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn invalid_names_are_rewritten_valid_and_unique() {
        let long = "x".repeat(300);
        let wanted = strings(&[
            "a/b",
            "a b",
            "a_b",
            "",
            "\u{1b}]52;c;aGk=\u{7}",
            &long,
            "ok-1",
            "read file",
            "日本",
        ]);
        let out = offer(&wanted, |n| n == "read_file");
        assert!(out.iter().all(|n| is_valid(n)), "{out:?}");
        let unique: HashSet<&String> = out.iter().collect();
        assert_eq!(unique.len(), out.len(), "{out:?}");
        assert_eq!(out[2], "a_b", "a valid name keeps its name");
        assert_eq!(out[6], "ok-1");
        assert!(
            out[0].starts_with("a_b_") && out[1].starts_with("a_b_"),
            "{out:?}"
        );
        assert_eq!(out[3], "tool");
        assert!(out[5].starts_with(&"x".repeat(55)) && out[5].len() == MAX_NAME);
        assert!(
            out[7].starts_with("read_file_"),
            "a taken name is not reused: {out:?}"
        );
        assert_eq!(out[8], "__");
        assert_eq!(offer(&wanted, |n| n == "read_file"), out, "stable");
    }

    #[test]
    fn a_valid_duplicate_is_left_for_the_caller_to_report() {
        let out = offer(&strings(&["a", "a"]), |_| false);
        assert_eq!(out, ["a", "a"]);
    }

    /// Was quadratic (13–22 s for 20,000 tools): every name is now looked up in hash sets.
    /// 100,000 names, half of them rewritten, finish far inside the bound even in debug.
    #[test]
    fn a_hundred_thousand_names_are_offered_quickly() {
        let wanted: Vec<String> = (0..100_000)
            .map(|i| {
                if i % 2 == 0 {
                    format!("tool_{i}")
                } else {
                    format!("tool {i}")
                }
            })
            .collect();
        let start = std::time::Instant::now();
        let out = offer(&wanted, |_| false);
        assert_eq!(out.iter().collect::<HashSet<_>>().len(), wanted.len());
        assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    }
}
