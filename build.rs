//! Link flags for the `deerflow` binary only.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    let linux_gnu = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    // Relative relocations packed (DT_RELR, GNU ld ≥ 2.38 and glibc ≥ 2.36): the loader
    // applies ~60k of them at start-up, and the packed table is a few KiB instead of 1.4 MiB
    // it would otherwise read, so a short run maps less.
    if linux_gnu && env::var_os("DEERFLOW_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    // benches/hot-code.sh asks for the link map: it names the functions at the addresses a
    // traced run executes.
    if let Some(map) = env::var_os("DEERFLOW_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,-Map={}",
            map.to_string_lossy()
        );
    }
    if linux_gnu && env::var("OPT_LEVEL").as_deref() != Ok("0") {
        hot_code_first();
    }
    for var in [
        "DEERFLOW_NO_RELR",
        "DEERFLOW_LINK_MAP",
        "DEERFLOW_NO_HOT_CODE",
        "RUSTC_LINKER",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
}

/// Puts the functions a short run executes next to each other at the start of the code.
///
/// A run executes about 1 MiB of the binary's 18 MiB of code, but spread over the whole of
/// it, and the kernel maps the 64 KiB around every page a process touches: a 2-turn run's
/// code alone was 8.8 MiB of RSS. `link/hot-code.txt` lists those functions, as measured by
/// `benches/hot-code.sh`, for the linker's `--symbol-ordering-file` and a small linker script
/// (lld, the linker rustc uses on this target; a link that refuses them, GNU ld's or mold's,
/// is left as it was). Its names carry the hashes of this `Cargo.lock`, these manifests and
/// the compiler named in its header: another compiler would match none of them, so it is not
/// passed then. A stale list costs RSS, never correctness: a name the binary lacks is
/// skipped.
fn hot_code_first() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let list = manifest_dir.join("link/hot-code.txt");
    println!("cargo:rerun-if-changed={}", list.display());
    if env::var_os("DEERFLOW_NO_HOT_CODE").is_some() {
        return;
    }
    let Ok(text) = fs::read_to_string(&list) else {
        return;
    };
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let built_by = header(&text, "rustc");
    if built_by.is_none() || built_by != rustc_release(&rustc).as_deref() {
        return;
    }
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let names = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && !line.is_empty());
    let (order, script) = (out_dir.join("hot-code.txt"), out_dir.join("hot-code.ld"));
    let (symbols, sections) = ordering(names);
    if fs::write(&order, symbols).is_err() || fs::write(&script, sections).is_err() {
        return;
    }
    let args = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
        format!("-Wl,-T,{}", script.display()),
    ];
    if linker_accepts(&rustc, &out_dir, &args) {
        for arg in args {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
}

/// The symbol-ordering file, and a linker script for the names ThinLTO gave a
/// `.llvm.<hash>` suffix: that hash is of the codegen unit's contents, so any edit there
/// renames them, while the name before it (with its own hash of the instance) stays. The
/// script places those functions, whatever their suffix, in an output section just before
/// `.text`, at whose start the ordering file puts the others.
fn ordering<'a>(names: impl Iterator<Item = &'a str>) -> (String, String) {
    let (mut symbols, mut patterns) = (String::new(), String::new());
    for name in names {
        match name.split_once(".llvm.") {
            Some((base, _)) if !base.contains(['*', '?', '[', ']', '\\']) => {
                // LLVM puts a function it deems cold in `.text.unlikely.<name>`.
                patterns.push_str(&format!(
                    "    *(.text.{base}.llvm.* .text.unlikely.{base}.llvm.*)\n"
                ));
            }
            _ => symbols.push_str(&format!("{name}\n")),
        }
    }
    let script =
        format!("SECTIONS {{\n  .text.hot : {{\n{patterns}  }}\n}}\nINSERT BEFORE .text;\n");
    (symbols, script)
}

/// The value of a `# key: value` header line.
fn header<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .map_while(|line| line.strip_prefix('#'))
        .find_map(|line| line.trim().strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// `rustc 1.95.0 (59807616e 2026-04-14)`: the first line of `rustc -vV`.
fn rustc_release(rustc: &str) -> Option<String> {
    let out = Command::new(rustc).arg("-vV").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().next().map(|line| line.trim().to_string())
}

/// Links an empty program with `args` the way cargo links ours (same compiler, target,
/// flags and configured linker): whether this build's linker takes them.
fn linker_accepts(rustc: &str, out_dir: &Path, args: &[String]) -> bool {
    let mut cmd = Command::new(rustc);
    cmd.args([
        "-",
        "--crate-type",
        "bin",
        "--crate-name",
        "hot_code_probe",
        "--out-dir",
    ])
    .arg(out_dir);
    if let Ok(target) = env::var("TARGET") {
        cmd.args(["--target", &target]);
    }
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        cmd.arg(format!("-Clinker={linker}"));
    }
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(flags.split('\x1f').filter(|flag| !flag.is_empty()));
    }
    for arg in args {
        cmd.arg(format!("-Clink-arg={arg}"));
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let Ok(mut child) = cmd.spawn() else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        if stdin.write_all(b"fn main() {}\n").is_err() {
            return false;
        }
    }
    child.wait().is_ok_and(|status| status.success())
}
