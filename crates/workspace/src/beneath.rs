//! Opening files beneath a root directory so that the kernel, not an earlier path check, keeps
//! every open inside the root.
//!
//! [`Workspace::resolve`](super::Workspace::resolve) checks a path and returns it, but between
//! that check and an `open` a parallel process (a sub-agent's `bash` call) can swap a path
//! component for a symlink pointing outside the workspace. The functions here close that window:
//! they open the root once per call and resolve the relative path *from that descriptor*.
//!
//! * On Linux they use `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel
//!   refuses (`EXDEV`) any resolution that leaves the root — through `..`, an absolute symlink,
//!   or a relative symlink climbing out — and any `/proc` magic link, and it detects concurrent
//!   renames. Relative symlinks that stay inside the root are followed.
//! * Where `openat2` is missing (`ENOSYS` on kernels before 5.6, `EPERM` under some seccomp
//!   filters) they fall back to walking the path one component at a time with `openat`:
//!   `O_NOFOLLOW | O_DIRECTORY` for each directory, `O_NOFOLLOW` for the last component. That
//!   refuses every symlink, inside-pointing ones included. (What the walk cannot notice is a
//!   directory it already opened being *moved* out of the root mid-walk; `openat2` does.)
//!
//! In both implementations `..`, absolute paths and NUL bytes are refused up front: callers pass
//! the normalized path relative to the root that `resolve` chose, which never contains them.
//! A refusal is an [`io::Error`] for which [`is_escape`] is true.
//!
//! Files are opened with `O_NONBLOCK` so that a FIFO or device never blocks the open (a FIFO
//! opened for writing with no reader fails with `ENXIO`); it has no effect on regular files, and
//! callers are expected to refuse anything but regular files after an `fstat`.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use libc::c_int;

/// How to open the final component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; never creates.
    Read,
    /// Read and write an existing file (read-modify-write through one descriptor).
    ReadWrite,
    /// Write only.
    Write {
        create: bool,
        truncate: bool,
        append: bool,
    },
}

impl OpenMode {
    fn flags(self) -> c_int {
        let base = libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
        match self {
            OpenMode::Read => base | libc::O_RDONLY,
            OpenMode::ReadWrite => base | libc::O_RDWR,
            OpenMode::Write {
                create,
                truncate,
                append,
            } => {
                let mut flags = base | libc::O_WRONLY;
                if create {
                    flags |= libc::O_CREAT;
                }
                if truncate {
                    flags |= libc::O_TRUNC;
                }
                if append {
                    flags |= libc::O_APPEND;
                }
                flags
            }
        }
    }
}

/// Which resolution strategy to use; [`Resolver::Kernel`] is what the public functions use,
/// [`Resolver::Walk`] is exposed so tests can exercise the fallback on any kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// `openat2(RESOLVE_BENEATH)` where available, the component walk otherwise.
    Kernel,
    /// Always the component walk (refuses every symlink).
    Walk,
}

/// Permission bits for created files and directories (the umask applies).
const FILE_MODE: libc::c_uint = 0o666;
const DIR_MODE: libc::mode_t = 0o777;

/// How often an `openat2` interrupted by a concurrent rename (`EAGAIN`) or a signal is retried.
const OPENAT2_RETRIES: usize = 16;

/// Flags for directory descriptors used only as the base of further `*at` calls.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DIR_FLAGS: c_int = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const DIR_FLAGS: c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;

/// The marker inside an [`io::Error`] for a path that would leave the root.
#[derive(Debug)]
struct Escape;

impl std::fmt::Display for Escape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("path resolves outside the root directory")
    }
}

impl std::error::Error for Escape {}

fn escape() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Escape)
}

/// True when `e` is this module's refusal of a path that leaves the root (or goes through a
/// symlink the active strategy does not follow).
pub fn is_escape(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Escape>())
}

/// Opens `rel` (relative to `root`, no `..`) so that resolution cannot leave `root`.
pub fn open_beneath(root: &Path, rel: &Path, mode: OpenMode) -> io::Result<File> {
    open_beneath_with(root, rel, mode, Resolver::Kernel)
}

/// [`open_beneath`] with an explicit strategy.
pub fn open_beneath_with(
    root: &Path,
    rel: &Path,
    mode: OpenMode,
    resolver: Resolver,
) -> io::Result<File> {
    let names = components(rel)?;
    let root = open_root(root)?;
    let fd = open_at(&root, &names, mode.flags(), FILE_MODE, resolver)?;
    Ok(File::from(fd))
}

/// Replaces the file `rel` beneath `root` with `bytes` atomically: the content goes to a
/// temporary file in the same directory, which then takes the name with `renameat`. A crash
/// or a reader at any moment sees the old content or the new, never a mix or an empty file
/// (contract §12). An existing file keeps its mode; a new one gets the umask's. A final
/// component that is a symlink (allowed only when it stays beneath `root`) is written
/// through in place instead, so the link stays a link.
pub fn replace_beneath(root: &Path, rel: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_beneath_with(root, rel, |f| io::Write::write_all(f, bytes))
}

/// [`replace_beneath`] with the new content written by `fill` into the temporary file (so
/// it need not be in memory). A final symlink gets the content copied in place once `fill`
/// is done, since `fill` may still be reading the file the link points to.
pub fn replace_beneath_with(
    root: &Path,
    rel: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let names = components(rel)?;
    let Some((name, parents)) = names.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no file name"));
    };
    let root_fd = open_root(root)?;
    let dir = open_at(&root_fd, parents, DIR_FLAGS, 0, Resolver::Kernel)?;
    let existing = stat_at(&dir, name)?;
    let (tmp_name, tmp) = create_temp_at(&dir, name)?;
    let cleanup = |e: io::Error| {
        // SAFETY: `dir` is open and `tmp_name` a valid NUL-terminated string.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_name.as_ptr(), 0) };
        e
    };
    let mut file = File::from(tmp);
    fill(&mut file).map_err(cleanup)?;
    if existing.is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK) {
        let write = OpenMode::Write {
            create: false,
            truncate: true,
            append: false,
        };
        let copied = open_beneath(root, rel, write).and_then(|mut f| {
            io::Seek::rewind(&mut file)?;
            io::copy(&mut file, &mut f).map(drop)
        });
        // The temporary copy goes whether or not the copy worked.
        // SAFETY: `dir` is open and `tmp_name` a valid NUL-terminated string.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_name.as_ptr(), 0) };
        return copied;
    }
    if let Some(st) = existing {
        use std::os::unix::fs::PermissionsExt;
        let perms = std::fs::Permissions::from_mode(st.st_mode & 0o7777);
        file.set_permissions(perms).map_err(cleanup)?;
    }
    // SAFETY: both names are valid NUL-terminated strings in the open directory `dir`.
    let r = unsafe {
        libc::renameat(
            dir.as_raw_fd(),
            tmp_name.as_ptr(),
            dir.as_raw_fd(),
            name.as_ptr(),
        )
    };
    if r != 0 {
        return Err(cleanup(io::Error::last_os_error()));
    }
    Ok(())
}

/// `fstatat` without following a final symlink; `None` when nothing has the name.
fn stat_at(dir: &OwnedFd, name: &CString) -> io::Result<Option<libc::stat>> {
    // SAFETY: a zeroed `stat` is a valid value for fstatat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is open, `name` NUL-terminated, `st` a valid out-pointer.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r == 0 {
        return Ok(Some(st));
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::NotFound {
        Ok(None)
    } else {
        Err(e)
    }
}

/// A new, empty temporary file beside `name` in `dir` (a hidden name no one else uses).
fn create_temp_at(dir: &OwnedFd, name: &CString) -> io::Result<(CString, OwnedFd)> {
    let base = String::from_utf8_lossy(name.as_bytes()).into_owned();
    for _ in 0..16 {
        let tmp = format!(".{base}.deerflow-{:08x}.tmp", fastrand::u32(..));
        let tmp = CString::new(tmp)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains a NUL byte"))?;
        // Read back too: a symlink's target gets the content copied from it.
        let flags =
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        // SAFETY: `dir` is open and `tmp` a valid NUL-terminated string.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), tmp.as_ptr(), flags, FILE_MODE) };
        match owned(fd) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "cannot find a free temporary name",
    ))
}

/// Creates `rel` and its missing ancestors beneath `root`, one `mkdirat` at a time, each in a
/// directory opened beneath `root` (so no symlink can redirect a creation outside).
pub fn create_dirs_beneath(root: &Path, rel: &Path) -> io::Result<()> {
    create_dirs_beneath_with(root, rel, Resolver::Kernel)
}

/// [`create_dirs_beneath`] with an explicit strategy.
pub fn create_dirs_beneath_with(root: &Path, rel: &Path, resolver: Resolver) -> io::Result<()> {
    let names = components(rel)?;
    let root = open_root(root)?;
    for depth in 1..=names.len() {
        match open_at(&root, &names[..depth], DIR_FLAGS, 0, resolver) {
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let parent = open_at(&root, &names[..depth - 1], DIR_FLAGS, 0, resolver)?;
        let name = &names[depth - 1];
        // SAFETY: `parent` is an open descriptor owned for the whole call and `name` is a valid
        // NUL-terminated string; mkdirat never follows a symlink in its last component.
        let ret = unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), DIR_MODE) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            // Lost a race with another creator: fine, the check below decides.
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        // What now sits there must be a directory reachable beneath the root.
        open_at(&root, &names[..depth], DIR_FLAGS, 0, resolver)?;
    }
    Ok(())
}

/// The path's names as C strings; `..`, a root or a NUL byte is refused.
fn components(rel: &Path) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for part in rel.components() {
        match part {
            Component::Normal(name) => names.push(CString::new(name.as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte")
            })?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escape())
            }
        }
    }
    Ok(names)
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let path = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "root contains a NUL byte"))?;
    loop {
        // SAFETY: `path` is a valid NUL-terminated string alive across the call.
        let fd = unsafe { libc::open(path.as_ptr(), DIR_FLAGS) };
        match owned(fd) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Takes ownership of a descriptor a syscall returned, or its `errno`.
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by a successful open-like syscall, so it is a valid open
    // descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `names` beneath `root` with `flags`, by the chosen strategy.
fn open_at(
    root: &OwnedFd,
    names: &[CString],
    flags: c_int,
    mode: libc::c_uint,
    resolver: Resolver,
) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    if resolver == Resolver::Kernel {
        match openat2_beneath(root, names, flags, mode) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {}
            other => return other,
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = resolver;
    walk(root, names, flags, mode)
}

/// `struct open_how` from `<linux/openat2.h>` (libc's copy is `#[non_exhaustive]`, so it cannot
/// be built without `mem::zeroed`; this one has the same layout).
#[cfg(target_os = "linux")]
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[cfg(target_os = "linux")]
fn openat2_beneath(
    root: &OwnedFd,
    names: &[CString],
    flags: c_int,
    mode: libc::c_uint,
) -> io::Result<OwnedFd> {
    let path = join(names);
    // `mode` must be zero unless a file may be created, or openat2 says EINVAL.
    let mode = if flags & libc::O_CREAT != 0 { mode } else { 0 };
    let how = OpenHow {
        flags: u64::from(flags.unsigned_abs()),
        mode: u64::from(mode),
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    let mut attempts = 0;
    loop {
        // SAFETY: `path` is a valid NUL-terminated string and `how` a properly laid out
        // `open_how` whose size is passed alongside; both outlive the call, which only reads
        // them. `root` is an open descriptor borrowed for the call.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        let fd =
            c_int::try_from(ret).map_err(|_| io::Error::other("openat2 returned no descriptor"))?;
        match owned(fd) {
            Ok(fd) => return Ok(fd),
            Err(e) => {
                let transient = matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR));
                if transient && attempts < OPENAT2_RETRIES {
                    attempts += 1;
                    continue;
                }
                return Err(match e.raw_os_error() {
                    // EXDEV: the resolution would leave the root. ELOOP: a magic link, or a
                    // symlink chain too long to be anything but hostile.
                    Some(libc::EXDEV) | Some(libc::ELOOP) => escape(),
                    _ => e,
                });
            }
        }
    }
}

/// `a/b/c` from its names, `.` for none.
#[cfg(target_os = "linux")]
fn join(names: &[CString]) -> CString {
    if names.is_empty() {
        return c".".to_owned();
    }
    let mut bytes = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            bytes.push(b'/');
        }
        bytes.extend_from_slice(name.as_bytes());
    }
    // The names hold no NUL (they came from CStrings) and `/` is not NUL.
    CString::new(bytes).unwrap_or_default()
}

/// The fallback: one `openat(O_NOFOLLOW)` per component, so no symlink is ever followed.
fn walk(
    root: &OwnedFd,
    names: &[CString],
    flags: c_int,
    mode: libc::c_uint,
) -> io::Result<OwnedFd> {
    let Some((last, dirs)) = names.split_last() else {
        return openat(root, c".", flags, mode);
    };
    let mut current: Option<OwnedFd> = None;
    for name in dirs {
        let base = current.as_ref().unwrap_or(root);
        let next = openat(base, name, DIR_FLAGS | libc::O_NOFOLLOW, 0)
            .map_err(|e| refuse_symlink(base, name, e))?;
        current = Some(next);
    }
    let base = current.as_ref().unwrap_or(root);
    openat(base, last, flags | libc::O_NOFOLLOW, mode).map_err(|e| refuse_symlink(base, last, e))
}

fn openat(dir: &OwnedFd, name: &CStr, flags: c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: `dir` is an open descriptor borrowed for the call and `name` a valid
        // NUL-terminated string; `mode` is passed as the variadic argument openat expects.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
        match owned(fd) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `O_NOFOLLOW` reports a symlink as `ELOOP`, or as `ENOTDIR` together with `O_DIRECTORY`;
/// either becomes the escape refusal when the name really is a symlink.
fn refuse_symlink(dir: &OwnedFd, name: &CStr, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => escape(),
        Some(libc::ENOTDIR) if is_symlink_at(dir, name) => escape(),
        _ => e,
    }
}

fn is_symlink_at(dir: &OwnedFd, name: &CStr) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is an open descriptor, `name` a valid NUL-terminated string and `st` points
    // to writable memory of the size fstatat fills.
    let ret = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if ret != 0 {
        return false;
    }
    // SAFETY: fstatat returned 0, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_replace_keeps_the_mode_and_a_reader_never_sees_a_mix() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("data.txt");
        let old = "o".repeat(200_000);
        let new = "n".repeat(300_000);
        std::fs::write(&f, &old).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o754)).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (f, stop, old, new) = (f.clone(), stop.clone(), old.clone(), new.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(Ordering::SeqCst) {
                    let text = std::fs::read_to_string(&f).unwrap();
                    assert!(
                        text == old || text == new,
                        "a read saw {} bytes",
                        text.len()
                    );
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..50 {
            let body = if i % 2 == 0 { &new } else { &old };
            replace_beneath(d.path(), Path::new("data.txt"), body.as_bytes()).unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        assert!(reader.join().unwrap() > 0);
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o754);
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn a_replace_writes_through_a_symlink_inside_and_creates_new_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("real.txt"), "old").unwrap();
        symlink("real.txt", d.path().join("link.txt")).unwrap();
        replace_beneath(d.path(), Path::new("link.txt"), b"new").unwrap();
        assert!(d
            .path()
            .join("link.txt")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(d.path().join("real.txt")).unwrap(),
            "new"
        );
        replace_beneath(d.path(), Path::new("fresh.txt"), b"x").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("fresh.txt")).unwrap(),
            "x"
        );
        assert!(replace_beneath(d.path(), Path::new("../out.txt"), b"x").is_err());
    }

    const BOTH: [Resolver; 2] = [Resolver::Kernel, Resolver::Walk];

    const CREATE: OpenMode = OpenMode::Write {
        create: true,
        truncate: true,
        append: false,
    };

    /// Whether this kernel (and seccomp policy) lets `openat2` run, so `Kernel` really is it.
    fn openat2_works() -> bool {
        let root = open_root(Path::new("/")).unwrap();
        !matches!(
            openat2_beneath(&root, &[], DIR_FLAGS, 0).map_err(|e| e.raw_os_error()),
            Err(Some(libc::ENOSYS)) | Err(Some(libc::EPERM))
        )
    }

    /// A root with `inside/real.txt` and an empty outside directory.
    fn setup() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("inside")).unwrap();
        std::fs::write(root.join("inside/real.txt"), "real").unwrap();
        (ws, out, root)
    }

    fn read(root: &Path, rel: &str, r: Resolver) -> io::Result<String> {
        let mut s = String::new();
        open_beneath_with(root, Path::new(rel), OpenMode::Read, r)?.read_to_string(&mut s)?;
        Ok(s)
    }

    fn assert_escape(got: io::Result<impl std::fmt::Debug>, what: &str) {
        match got {
            Err(e) => assert!(is_escape(&e), "{what}: wrong error {e:?}"),
            Ok(v) => panic!("{what}: opened {v:?}"),
        }
    }

    fn empty(dir: &Path) -> bool {
        std::fs::read_dir(dir).unwrap().next().is_none()
    }

    #[test]
    fn plain_files_open_read_write_append() {
        let (_ws, _out, root) = setup();
        for r in BOTH {
            assert_eq!(read(&root, "inside/real.txt", r).unwrap(), "real");
            assert_eq!(read(&root, "./inside/./real.txt", r).unwrap(), "real");
            let rel = Path::new("inside/new.txt");
            open_beneath_with(&root, rel, CREATE, r)
                .unwrap()
                .write_all(b"a")
                .unwrap();
            let append = OpenMode::Write {
                create: false,
                truncate: false,
                append: true,
            };
            open_beneath_with(&root, rel, append, r)
                .unwrap()
                .write_all(b"b")
                .unwrap();
            assert_eq!(read(&root, "inside/new.txt", r).unwrap(), "ab");
            let missing = open_beneath_with(&root, Path::new("nope.txt"), OpenMode::Read, r);
            assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
            // A regular file used as a directory is ENOTDIR, not an escape.
            let err = read(&root, "inside/real.txt/x", r).unwrap_err();
            assert!(!is_escape(&err), "{r:?}");
            assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{r:?}");
            // The root itself opens (as a directory) for reading.
            let dir = open_beneath_with(&root, Path::new(""), OpenMode::Read, r).unwrap();
            assert!(dir.metadata().unwrap().is_dir());
            std::fs::remove_file(root.join(rel)).unwrap();
        }
    }

    #[test]
    fn dot_dot_and_absolute_are_refused() {
        let (_ws, _out, root) = setup();
        for r in BOTH {
            assert_escape(read(&root, "../x", r), "..");
            assert_escape(read(&root, "inside/../inside/real.txt", r), "inner ..");
            assert_escape(read(&root, "/etc/passwd", r), "absolute");
            assert_escape(
                create_dirs_beneath_with(&root, Path::new("a/../../b"), r),
                "mkdir ..",
            );
        }
    }

    #[test]
    fn symlinked_directory_to_outside_is_refused() {
        let (_ws, out, root) = setup();
        std::fs::write(out.path().join("b.txt"), "secret").unwrap();
        symlink(out.path(), root.join("a")).unwrap();
        for r in BOTH {
            assert_escape(read(&root, "a/b.txt", r), "read a/b.txt");
            assert_escape(
                open_beneath_with(&root, Path::new("a/new.txt"), CREATE, r),
                "create a/new.txt",
            );
            assert_escape(
                create_dirs_beneath_with(&root, Path::new("a/sub"), r),
                "mkdir a/sub",
            );
        }
        let names: Vec<_> = std::fs::read_dir(out.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only b.txt outside: {names:?}");
    }

    #[test]
    fn final_symlink_to_etc_passwd_is_refused() {
        let (_ws, out, root) = setup();
        symlink("/etc/passwd", root.join("pw")).unwrap();
        symlink(out.path().join("new.txt"), root.join("dangling")).unwrap();
        symlink(
            "../../../../../../../../etc/passwd",
            root.join("inside/climb"),
        )
        .unwrap();
        for r in BOTH {
            assert_escape(read(&root, "pw", r), "read pw");
            assert_escape(
                open_beneath_with(&root, Path::new("pw"), CREATE, r),
                "write pw",
            );
            assert_escape(read(&root, "inside/climb", r), "relative climb");
            // O_CREAT through a dangling link would create its target: refused.
            assert_escape(
                open_beneath_with(&root, Path::new("dangling"), CREATE, r),
                "dangling",
            );
        }
        assert!(empty(out.path()));
    }

    /// Inside-pointing symlinks: `openat2` follows relative ones that stay beneath the root (an
    /// absolute one is refused even when it names a place inside, since `RESOLVE_BENEATH` does
    /// not know the root's absolute path); the component walk refuses every symlink. The file
    /// tools never depend on this: `resolve` hands them the canonical, symlink-free path.
    #[test]
    fn inside_symlinks_follow_with_openat2_and_are_refused_by_the_walk() {
        let (_ws, _out, root) = setup();
        symlink("inside", root.join("rel_dir")).unwrap();
        symlink("real.txt", root.join("inside/rel_file")).unwrap();
        symlink(root.join("inside"), root.join("abs_dir")).unwrap();
        for rel in ["rel_dir/real.txt", "inside/rel_file"] {
            assert_escape(read(&root, rel, Resolver::Walk), rel);
            if openat2_works() {
                assert_eq!(read(&root, rel, Resolver::Kernel).unwrap(), "real", "{rel}");
            }
        }
        for r in BOTH {
            assert_escape(read(&root, "abs_dir/real.txt", r), "absolute link");
        }
        if openat2_works() {
            create_dirs_beneath_with(&root, Path::new("rel_dir/made"), Resolver::Kernel).unwrap();
            assert!(root.join("inside/made").is_dir());
        }
        assert_escape(
            create_dirs_beneath_with(&root, Path::new("rel_dir/walked"), Resolver::Walk),
            "walk mkdir through link",
        );
    }

    #[test]
    fn create_dirs_makes_every_level_beneath() {
        let (_ws, _out, root) = setup();
        for r in BOTH {
            let base = format!("{r:?}");
            let dirs = Path::new(&base).join("x/y");
            create_dirs_beneath_with(&root, &dirs, r).unwrap();
            create_dirs_beneath_with(&root, &dirs, r).unwrap();
            assert!(root.join(&dirs).is_dir());
            let file = dirs.join("z.txt");
            open_beneath_with(&root, &file, CREATE, r)
                .unwrap()
                .write_all(b"z")
                .unwrap();
            assert_eq!(std::fs::read_to_string(root.join(&file)).unwrap(), "z");
            // A file in the way is reported as such, not as an escape.
            let err = create_dirs_beneath_with(&root, &file.join("w"), r).unwrap_err();
            assert!(!is_escape(&err), "{err:?}");
        }
    }

    #[test]
    fn fifo_open_does_not_block() {
        let (_ws, _out, root) = setup();
        let status = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        for r in BOTH {
            let f = open_beneath_with(&root, Path::new("pipe"), OpenMode::Read, r).unwrap();
            assert!(!f.metadata().unwrap().is_file());
            drop(f);
            // With no reader left, a non-blocking open for writing fails instead of waiting.
            let w = open_beneath_with(&root, Path::new("pipe"), CREATE, r);
            assert_eq!(w.unwrap_err().raw_os_error(), Some(libc::ENXIO));
        }
    }

    /// A thread flips `a` between a real directory and a symlink to an outside directory while
    /// 200 creations of `a/f<i>.txt` run: whatever each open returns, nothing lands outside.
    #[test]
    fn flipping_component_never_lets_a_write_out() {
        for r in BOTH {
            let (_ws, out, root) = setup();
            std::fs::create_dir(root.join("a")).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let flipper = super::testing::spawn_flipper(&root.join("a"), out.path(), &stop);
            let mut written = 0;
            for i in 0..200 {
                std::thread::yield_now();
                let rel = PathBuf::from(format!("a/f{i}.txt"));
                if let Ok(mut f) = open_beneath_with(&root, &rel, CREATE, r) {
                    f.write_all(b"x").unwrap();
                    written += 1;
                }
            }
            stop.store(true, Ordering::SeqCst);
            let flips = flipper.join().unwrap();
            assert!(empty(out.path()), "{r:?}: a write escaped");
            assert!(flips > 0, "{r:?}: the flipper never ran");
            eprintln!("{r:?}: {written}/200 writes landed inside, {flips} flips");
        }
    }
}

/// A race double for the tests here and in the file tools.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use std::ffi::CString;
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Starts (and returns once it has begun) a thread that atomically exchanges the directory `dir` with a symlink to `outside`
    /// (`renameat2(RENAME_EXCHANGE)`, so the name never goes missing) again and again until
    /// `stop`; it returns how many exchanges it made.
    pub fn spawn_flipper(
        dir: &Path,
        outside: &Path,
        stop: &Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<usize> {
        let swap = dir.with_extension("swap");
        symlink(outside, &swap).unwrap();
        let a = CString::new(dir.as_os_str().as_bytes()).unwrap();
        let b = CString::new(swap.as_os_str().as_bytes()).unwrap();
        let stop = stop.clone();
        let (started, wait) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let mut flips = 0;
            while !stop.load(Ordering::SeqCst) {
                // SAFETY: both paths are valid NUL-terminated strings alive across the call.
                let ret = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(ret, 0, "{}", io::Error::last_os_error());
                flips += 1;
                if flips == 1 {
                    let _ = started.send(());
                }
                std::thread::yield_now();
            }
            flips
        });
        // The writers start only once the flipping has.
        wait.recv().unwrap();
        handle
    }
}
