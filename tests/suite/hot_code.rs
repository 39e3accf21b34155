//! `link/hot-code.txt` (the functions short runs execute, which build.rs has the linker put
//! together) must belong to this Cargo.lock and these manifests: its names carry hashes
//! derived from them, so after a dependency or manifest change the list names nothing and a
//! 2-turn run's RSS goes back from about 6 MiB to 13. `benches/hot-code.sh` regenerates it.

use std::path::Path;

/// FNV-1a 64 over the files' bytes in this order, as `benches/hot_code.py` computes it.
fn fingerprint(root: &Path, files: &[String]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let bytes = std::fs::read(root.join(file)).unwrap();
        for byte in bytes {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

fn inputs(root: &Path) -> Vec<String> {
    let mut manifests: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .map(|name| format!("crates/{name}/Cargo.toml"))
        .filter(|path| root.join(path).is_file())
        .collect();
    manifests.sort();
    let mut files = vec!["Cargo.lock".to_string(), "Cargo.toml".to_string()];
    files.extend(manifests);
    files
}

#[test]
fn the_hot_code_list_belongs_to_this_cargo_lock_and_these_manifests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let list = std::fs::read_to_string(root.join("link/hot-code.txt")).unwrap();
    let recorded = list
        .lines()
        .find_map(|line| line.strip_prefix("# inputs:"))
        .map(str::trim)
        .expect("an `# inputs:` header line");
    assert!(
        list.lines().any(|line| line.starts_with("# rustc: rustc ")),
        "an `# rustc:` header line"
    );
    let names = list.lines().filter(|line| !line.starts_with('#')).count();
    assert!(
        names > 1000,
        "{names} functions: a run executes more than that"
    );
    assert_eq!(
        recorded,
        fingerprint(root, &inputs(root)),
        "Cargo.lock or a manifest changed since link/hot-code.txt was made: run benches/hot-code.sh"
    );
}
