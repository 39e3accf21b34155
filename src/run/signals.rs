//! SIGINT, SIGTERM and SIGHUP stop the run (each task ends with its terminal event, then
//! `run_completed`); a second SIGINT kills every child process group and exits at once.
//!
//! The handlers run on a thread of their own, with a small runtime: the run's one runtime
//! thread may be held (by an emitter waiting on a stalled stdout, by `-o` opening a FIFO no
//! one reads yet), and a second SIGINT must still be seen as a second one and exit at once.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::signal::unix::{signal, SignalKind};

use crate::agent::RunControl;
use crate::outcome::{StopCause, EXIT_SIGINT};
use crate::workspace::sandbox::Sandbox;
use crate::workspace::Workspace;

const NO_HANDLERS: &str = "cannot start the signal handlers; signals will end the run abruptly";

/// Installs the handlers and returns once they are in place: a signal that comes right
/// after (a consumer that signals as soon as it sees `run_started`) is handled.
pub fn watch(control: Arc<RunControl>, workspace: Arc<Workspace>, sandbox: Arc<dyn Sandbox>) {
    // Seen even while the runtime's thread waits on a stalled stdout.
    crate::events::watch_stop_signals();
    let (ready, installed) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("deerflow-signals".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            let Ok(runtime) = runtime else {
                crate::logging::warn(NO_HANDLERS);
                let _ = ready.send(());
                return;
            };
            runtime.block_on(async move {
                let handlers = install(&control, &workspace, &sandbox);
                let _ = ready.send(());
                futures_util::future::join_all(handlers).await;
            });
        });
    if thread.is_ok() {
        // Microseconds, once per run: the thread only registers the handlers.
        let _ = installed.recv();
    } else {
        crate::logging::warn(NO_HANDLERS);
    }
}

/// One handler per signal, registered now, each running until the process exits.
fn install(
    control: &Arc<RunControl>,
    workspace: &Arc<Workspace>,
    sandbox: &Arc<dyn Sandbox>,
) -> Vec<BoxFuture<'static, ()>> {
    let kinds = [
        (SignalKind::interrupt(), StopCause::Sigint),
        (SignalKind::terminate(), StopCause::Sigterm),
        (SignalKind::hangup(), StopCause::Sighup),
    ];
    let mut handlers: Vec<BoxFuture<'static, ()>> = Vec::new();
    for (kind, cause) in kinds {
        let Ok(mut stream) = signal(kind) else {
            crate::logging::warn(
                "cannot install a signal handler; signals will end the run abruptly",
            );
            continue;
        };
        let (control, workspace, sandbox) = (control.clone(), workspace.clone(), sandbox.clone());
        handlers.push(Box::pin(async move {
            let mut seen = 0;
            while stream.recv().await.is_some() {
                seen += 1;
                if seen > 1 && cause == StopCause::Sigint {
                    exit_at_once(&workspace, sandbox.as_ref()).await;
                }
                let at = crate::events::stop_signalled_at().unwrap_or_else(std::time::Instant::now);
                control.stop_at(cause, at);
            }
        }));
    }
    handlers
}

/// The second SIGINT: no graceful stop, no `run_completed`.
async fn exit_at_once(workspace: &Workspace, sandbox: &dyn Sandbox) -> ! {
    workspace.processes().kill_all();
    crate::workspace::process::kill_orphans();
    // Containers too, but only briefly: this exit is meant to be at once (and a client
    // connection the held runtime thread would have to drive just times out).
    let quick = std::time::Duration::from_millis(1000);
    let _ = tokio::time::timeout(quick, sandbox.stop()).await;
    // The run's stored tool results go with it on this path too.
    if let Some(dir) = workspace.tool_results_root() {
        let _ = std::fs::remove_dir_all(dir);
    }
    crate::ui::restore_terminal();
    std::process::exit(EXIT_SIGINT);
}
