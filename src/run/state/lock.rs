//! One deerflow per state directory: `DIR/lock`, held with `flock` for the life of the
//! process (the kernel releases it when the process dies, however it dies), holding the
//! host and pid of its owner so that the next one can name them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// The held lock; dropping it (the end of the process) releases it.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir`, or says who holds it.
    pub fn take(dir: &Path) -> Result<Self, String> {
        let path = dir.join("lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // SAFETY: the descriptor is the open file's own, valid while `file` lives.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
            let mut owner = String::new();
            let _ = (&file).take(256).read_to_string(&mut owner);
            let owner = match owner.trim() {
                "" => "another process".to_string(),
                o => o.to_string(),
            };
            return Err(format!(
                "is in use by another deerflow ({owner}); wait for it to end or give \
                 another directory"
            ));
        }
        let me = format!("host {}, pid {}\n", hostname(), std::process::id());
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.write_all(me.as_bytes());
        Ok(Self { _file: file })
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_the_host_and_pid_and_a_released_lock_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::take(dir.path()).unwrap();
        let e = DirLock::take(dir.path()).err().unwrap();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(e.contains(&format!("host {}", hostname())), "{e}");
        drop(held);
        assert!(DirLock::take(dir.path()).is_ok());
    }
}
