//! The `deerflow` binary: parse, run, exit with the code the run earned.

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("deerflow: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(deerflow::cli::main());
    // Tasks still parked (a stalled stream, a blocked stdout) must not delay the exit.
    runtime.shutdown_background();
    std::process::exit(code);
}
