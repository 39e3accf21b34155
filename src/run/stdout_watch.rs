//! Notices a stdout reader that went away while the run has nothing to write (a model call
//! in flight, human mode's answer still to come), so such a run stops as SIGPIPE would
//! stop it instead of spending tokens on output nobody will read.

/// Watches fd 1 when it is a pipe or a socket; calls `on_closed` once its reader is gone.
pub fn watch(on_closed: crate::events::OnStdoutLost) {
    if !is_pipe_or_socket() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("deerflow-stdout-watch".into())
        .spawn(move || loop {
            let mut fd = libc::pollfd {
                fd: libc::STDOUT_FILENO,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the length given; poll only writes its revents.
            let n = unsafe { libc::poll(&mut fd, 1, 250) };
            if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
            // With no events asked for, only POLLERR/POLLHUP/POLLNVAL can be reported: on a
            // pipe, POLLERR means the read end is closed.
            if fd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                on_closed(&std::io::ErrorKind::BrokenPipe.into());
                return;
            }
        });
    if spawned.is_err() {
        crate::logging::debug("cannot watch stdout; a closed reader is noticed at the next write");
    }
}

fn is_pipe_or_socket() -> bool {
    // SAFETY: fstat on a descriptor number with a zeroed, properly sized stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above; fd 1 may be closed, which fstat reports as an error.
    if unsafe { libc::fstat(libc::STDOUT_FILENO, &mut st) } != 0 {
        return false;
    }
    matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
}
