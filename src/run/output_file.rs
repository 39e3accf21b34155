//! The files a run writes at its end (`-o`, `--record`). A regular file (or a symlink to
//! one) is replaced atomically, so a killed run never leaves half a file; anything else
//! the user named — `/dev/stdout`, `/dev/fd/N`, a FIFO, a terminal — is written through in
//! place and never replaced (contract §12).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a path is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A regular file, new or existing: written beside and renamed over. A symlink is
    /// resolved first, so the link stays and its target gets the new content.
    Replace(PathBuf),
    /// Something that is not a regular file: opened and written in place.
    WriteThrough(PathBuf),
}

/// What `path` is. `Err` names the problem in words fit for a usage error.
pub fn classify(path: &Path) -> Result<Target, String> {
    let meta = std::fs::metadata(path);
    if names_a_descriptor(path) && !meta.as_ref().is_ok_and(|m| m.is_dir()) {
        // `/dev/stdout` of a job appending to a log is that log: replacing it would swap
        // the log for a file holding only the answer (§12).
        return Ok(Target::WriteThrough(path.to_path_buf()));
    }
    match meta {
        Ok(m) if m.is_dir() => Err("is a directory; give a file path".into()),
        Ok(m) if m.is_file() => {
            let real = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
            Ok(Target::Replace(real))
        }
        Ok(_) => Ok(Target::WriteThrough(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A dangling symlink is written where it points, like a shell redirection.
            match std::fs::read_link(path) {
                Ok(to) => Ok(Target::Replace(match path.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                })),
                Err(_) => Ok(Target::Replace(path.to_path_buf())),
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Checks before the run that the end of it can write `path`: a pipeline must not learn
/// after `run_completed` that its output file was impossible.
pub fn check(path: &Path) -> Result<(), String> {
    match classify(path)? {
        Target::Replace(file) => {
            let parent = match file.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !parent.is_dir() {
                return Err(format!("directory {} does not exist", parent.display()));
            }
            tempfile::NamedTempFile::new_in(parent)
                .map(drop)
                .map_err(|e| format!("cannot write in {}: {e}", parent.display()))
        }
        // Opening a FIFO would wait for its reader; asking suffices.
        Target::WriteThrough(p) => writable(&p),
    }
}

fn writable(p: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(fd) = own_descriptor(p) {
        // The file behind `/dev/fd/8` may be writable while descriptor 8 is not (`8<log`):
        // the write goes through the descriptor, so its mode decides.
        // SAFETY: fcntl only reads its arguments; a closed `fd` is EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        if flags & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(format!("descriptor {fd} is open for reading only"));
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// `/dev/stdin|stdout|stderr`, `/dev/fd/N`, `/proc/PID/fd/N` (and `thread-self`): names
/// of an open file description, not of a file.
fn names_a_descriptor(path: &Path) -> bool {
    let Some(p) = path.to_str() else {
        return false;
    };
    if matches!(p, "/dev/stdin" | "/dev/stdout" | "/dev/stderr") || p.starts_with("/dev/fd/") {
        return true;
    }
    let mut parts = p.strip_prefix("/proc/").unwrap_or("").split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(_), Some("fd"), Some(n), None) if !n.is_empty()
    )
}

/// The descriptor of this process that `path` names, when it names one: writing through a
/// duplicate of it keeps its offset and `O_APPEND`, as a shell's redirection would.
fn own_descriptor(path: &Path) -> Option<i32> {
    let p = path.to_str()?;
    let n = match p {
        "/dev/stdin" => return Some(0),
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => p.strip_prefix("/dev/fd/").or_else(|| {
            let rest = p.strip_prefix("/proc/")?;
            let (who, n) = rest.split_once("/fd/")?;
            let me = std::process::id().to_string();
            matches!(who, "self" | "thread-self")
                .then_some(n)
                .or((who == me).then_some(n))
        })?,
    };
    n.parse().ok()
}

/// Whether `path` is written after the event stream rather than before `run_completed`:
/// this process's own stdout (the answer follows the stream it carries), and a FIFO or a
/// socket, whose reader may be the one reading the stream to its end first.
pub fn after_the_stream(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    is_stdout(path)
        || std::fs::metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            t.is_fifo() || t.is_socket()
        })
}

/// Whether `path` names this process's stdout: `/dev/stdout` and its aliases, or the file
/// stdout goes to.
pub fn names_stdout(path: &Path) -> bool {
    own_descriptor(path) == Some(1) || is_stdout(path)
}

/// Whether `path` is where this process's stdout goes.
fn is_stdout(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    // SAFETY: fstat fills `st`, a plain struct, and reads no memory of ours besides it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(1, &mut st) } != 0 {
        return false;
    }
    m.dev() == st.st_dev && m.ino() == st.st_ino
}

/// Writes `bytes` to `path` as [`classify`] says.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match classify(path).map_err(std::io::Error::other)? {
        Target::Replace(file) => replace(&file, bytes),
        Target::WriteThrough(p) => {
            let mut f = open_through(&p)?;
            f.write_all(bytes)?;
            f.flush()
        }
    }
}

/// A descriptor of ours is duplicated; anything else is opened for appending, which is
/// writing in place for a FIFO or a device and never overwrites a file another process
/// appends to.
pub fn open_through(p: &Path) -> std::io::Result<File> {
    use std::os::fd::FromRawFd;
    match own_descriptor(p) {
        Some(fd) if fd >= 0 => {
            // SAFETY: fcntl only reads its arguments; a closed `fd` is EBADF, returned below.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if dup < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `dup` is a fresh descriptor that nothing else owns.
            Ok(unsafe { File::from_raw_fd(dup) })
        }
        _ if is_fifo(p) => open_fifo(p),
        _ => OpenOptions::new().append(true).open(p),
    }
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

/// Opens a FIFO for writing, waiting for its reader as a plain open would, except that a
/// stop signal ends the wait: the run is over by then, and §8 wants the process gone
/// within 2 s, not parked in `open` until someone reads.
fn open_fifo(p: &Path) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    loop {
        let opened = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p);
        match opened {
            Ok(f) => {
                // The answer is written with ordinary blocking writes once a reader is there.
                // SAFETY: fcntl on a descriptor `f` owns; only its status flags change.
                let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
                if flags < 0
                    || unsafe {
                        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK)
                    } < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                return Ok(f);
            }
            // ENXIO: no reader yet.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if crate::events::stop_signalled_at().is_some() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "no reader opened the FIFO before the stop signal",
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes through a temporary file in the same directory and renames it into place.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    // A temporary file is private (0600); the result gets the old file's mode, else 0644.
    let perms = std::fs::metadata(path)
        .map(|m| m.permissions())
        .unwrap_or_else(|_| std::os::unix::fs::PermissionsExt::from_mode(0o644));
    tmp.as_file().set_permissions(perms)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn a_regular_file_is_replaced_keeping_its_mode() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("out.txt");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&f, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "new");
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let fresh = d.path().join("fresh.txt");
        write(&fresh, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "x");
    }

    #[test]
    fn a_symlink_stays_and_its_target_gets_the_content() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.txt");
        std::fs::write(&real, "old").unwrap();
        let link = d.path().join("link.txt");
        symlink(&real, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn a_fifo_is_written_through_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(classify(&fifo), Ok(Target::WriteThrough(fifo.clone())));
        assert_eq!(check(&fifo), Ok(()));
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write(&fifo, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), "through");
        let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ft), "still a FIFO");
    }

    #[test]
    fn descriptor_names_are_written_through_their_descriptor() {
        for p in [
            "/dev/stdout",
            "/dev/fd/1",
            "/proc/self/fd/1",
            "/proc/123/fd/4",
        ] {
            assert!(names_a_descriptor(Path::new(p)), "{p}");
        }
        for p in [
            "/dev/null",
            "/proc/self/fd",
            "/proc/1/fdinfo/1",
            "/tmp/fd/1",
        ] {
            assert!(!names_a_descriptor(Path::new(p)), "{p}");
        }
        let me = format!("/proc/{}/fd/7", std::process::id());
        assert_eq!(own_descriptor(Path::new(&me)), Some(7));
        assert_eq!(own_descriptor(Path::new("/dev/stderr")), Some(2));
        assert_eq!(own_descriptor(Path::new("/proc/1/fd/7")), None);
        // A log file behind fd N is appended to, not replaced.
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        std::fs::write(&log, "old\n").unwrap();
        let f = OpenOptions::new().append(true).open(&log).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let name = PathBuf::from(format!("/dev/fd/{fd}"));
        assert_eq!(classify(&name), Ok(Target::WriteThrough(name.clone())));
        write(&name, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "old\nnew\n");
    }

    #[test]
    fn a_descriptor_open_for_reading_only_is_refused_before_the_run() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        std::fs::write(&log, "old\n").unwrap();
        let f = File::open(&log).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        let err = check(Path::new(&format!("/dev/fd/{fd}"))).unwrap_err();
        assert_eq!(err, format!("descriptor {fd} is open for reading only"));
        let w = OpenOptions::new().append(true).open(&log).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&w);
        assert_eq!(check(Path::new(&format!("/proc/self/fd/{fd}"))), Ok(()));
    }

    #[test]
    fn directories_and_missing_parents_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(check(d.path()).unwrap_err().contains("is a directory"));
        let missing = d.path().join("no/such/file");
        assert!(check(&missing).unwrap_err().contains("does not exist"));
        assert_eq!(check(&d.path().join("ok.txt")), Ok(()));
    }
}
