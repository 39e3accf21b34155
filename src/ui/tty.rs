//! While the live view is up, the tty shows no `^C` when Ctrl-C is pressed. indicatif pads
//! each bar line to the terminal's width, leaving the cursor in the last column; the echoed
//! `^C` would wrap there, moving every bar down a line, and the final clear would then leave
//! the top bar behind. So `ECHOCTL` is turned off for the view and back on after it (also by
//! the second Ctrl-C, which exits at once).

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `quiet_control_echo` turned `ECHOCTL` off (so `restore` turns it back on).
static CHANGED: AtomicBool = AtomicBool::new(false);

fn get(fd: libc::c_int) -> Option<libc::termios> {
    let mut t = MaybeUninit::<libc::termios>::uninit();
    // SAFETY: tcgetattr fills the struct when it returns 0.
    (unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) } == 0).then(|| unsafe { t.assume_init() })
}

fn set_echoctl(on: bool) -> bool {
    let fd = libc::STDERR_FILENO;
    let Some(mut t) = get(fd) else {
        return false;
    };
    if on {
        t.c_lflag |= libc::ECHOCTL;
    } else {
        t.c_lflag &= !libc::ECHOCTL;
    }
    // SAFETY: a valid termios from tcgetattr, for the same fd.
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) == 0 }
}

/// Turns `ECHOCTL` off on stderr's terminal, if it is on and this process is in the
/// foreground (a background process changing the tty would be stopped by SIGTTOU).
pub fn quiet_control_echo() {
    let fd = libc::STDERR_FILENO;
    // SAFETY: plain queries of this process and its terminal.
    let foreground = unsafe { libc::tcgetpgrp(fd) == libc::getpgrp() };
    let echoing = get(fd).is_some_and(|t| t.c_lflag & libc::ECHOCTL != 0);
    if foreground && echoing && set_echoctl(false) {
        CHANGED.store(true, Ordering::SeqCst);
    }
}

/// Turns `ECHOCTL` back on if `quiet_control_echo` turned it off; idempotent.
pub fn restore() {
    if CHANGED.swap(false, Ordering::SeqCst) {
        set_echoctl(true);
    }
}
