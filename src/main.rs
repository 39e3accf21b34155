//! The `deerflow` binary: parse, run, exit with the code the run earned.

fn main() {
    // One line on stderr instead of the default multi-line report; the run itself turns a
    // panic into `run_completed{status:"failed"}` and exit 1.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        deerflow::logging::error(&format!("internal error: {msg}"));
    }));
    if let Some(code) = deerflow::cli::version_only() {
        std::process::exit(code);
    }
    let cli = match deerflow::cli::parse() {
        Ok(cli) => cli,
        Err(code) => std::process::exit(code),
    };
    // One thread runs every agent: a run's async work is waiting on model servers and tool
    // threads, and a second worker cost more in wake-ups between the two (~15 % of the CPU
    // per model call, issue 13) than it bought (a 100,000-task fan-out takes as long on
    // one). Blocking work (tools, the event writer) has threads of its own.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            deerflow::logging::stderr_line(&format!(
                "deerflow: cannot start the async runtime: {e}"
            ));
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(deerflow::cli::main(cli));
    // Tasks still parked (a stalled stream, a blocked stdout) must not delay the exit.
    runtime.shutdown_background();
    std::process::exit(code);
}
