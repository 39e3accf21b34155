//! Link flags for the `deerflow` binary only.

fn main() {
    // Relative relocations packed (DT_RELR, GNU ld ≥ 2.38 and glibc ≥ 2.36): the loader
    // applies ~60k of them at start-up, and the packed table is a few KiB instead of 1.4 MiB
    // it would otherwise read, so a short run maps less.
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var_os("DEERFLOW_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-env-changed=DEERFLOW_NO_RELR");
}
