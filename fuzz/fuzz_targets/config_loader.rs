//! Arbitrary bytes as a `--config` file through the loader with the built-in provider
//! table, then through `config check` and `config show`: errors are fine, a panic is not.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use deerflow::config::{check_report_with, load_with, show_json, show_yaml, Env, LoadOptions};
use libfuzzer_sys::fuzz_target;

struct Setup {
    _dir: tempfile::TempDir,
    cwd: PathBuf,
    file: PathBuf,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let cwd = dir.path().to_path_buf();
        let file = cwd.join("config.yaml");
        Setup {
            _dir: dir,
            cwd,
            file,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let s = setup();
    std::fs::write(&s.file, data).expect("write config");
    let opts = LoadOptions {
        explicit: Some(s.file.clone()),
        sets: Vec::new(),
        cwd: s.cwd.clone(),
        providers: deerflow::model::registry::providers(),
        mcp_configs: Vec::new(),
        model: None,
    };
    // An empty environment: the host's variables must not change what a run finds.
    let env = Env::empty();
    if let Ok(loaded) = load_with(&opts, &env) {
        let _ = check_report_with(&loaded, &env, &s.cwd);
        let _ = show_json(&loaded);
        let _ = show_yaml(&loaded);
    }
});
