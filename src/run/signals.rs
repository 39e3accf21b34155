//! SIGINT, SIGTERM and SIGHUP stop the run (each task ends with its terminal event, then
//! `run_completed`); a second SIGINT kills every child process group and exits at once.

use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};

use crate::agent::RunControl;
use crate::outcome::{StopCause, EXIT_SIGINT};
use crate::workspace::sandbox::Sandbox;
use crate::workspace::Workspace;

pub fn watch(control: Arc<RunControl>, workspace: Arc<Workspace>, sandbox: Arc<dyn Sandbox>) {
    // Seen even while the runtime's thread waits on a stalled stdout.
    crate::events::watch_stop_signals();
    let kinds = [
        (SignalKind::interrupt(), StopCause::Sigint),
        (SignalKind::terminate(), StopCause::Sigterm),
        (SignalKind::hangup(), StopCause::Sighup),
    ];
    for (kind, cause) in kinds {
        let Ok(mut stream) = signal(kind) else {
            crate::logging::warn(
                "cannot install a signal handler; signals will end the run abruptly",
            );
            continue;
        };
        let (control, workspace, sandbox) = (control.clone(), workspace.clone(), sandbox.clone());
        tokio::spawn(async move {
            let mut seen = 0;
            while stream.recv().await.is_some() {
                seen += 1;
                if seen > 1 && cause == StopCause::Sigint {
                    workspace.processes().kill_all();
                    crate::workspace::process::kill_orphans();
                    // Containers too, but only briefly: this exit is meant to be at once.
                    let quick = std::time::Duration::from_millis(1000);
                    let _ = tokio::time::timeout(quick, sandbox.stop()).await;
                    // The run's stored tool results go with it on this path too.
                    if let Some(dir) = workspace.tool_results_root() {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    crate::ui::restore_terminal();
                    std::process::exit(EXIT_SIGINT);
                }
                let at = crate::events::stop_signalled_at().unwrap_or_else(std::time::Instant::now);
                control.stop_at(cause, at);
            }
        });
    }
}
