//! `confined`: bash on the host inside bubblewrap (contract §13). The sandbox's root is an
//! empty read-only tmpfs into which only what a command needs is mounted: the system
//! directories read-only (`/usr`, `/bin`, `/lib*`, `/sbin`, `/etc`; a symlink such as a
//! merged-`/usr` `/bin` stays a symlink), a fresh `/dev` and `/proc`, a private `/tmp`, the
//! workspace writable, skills read-only at `/mnt/skills`, and the home directory as an empty
//! read-only directory (so `~/.ssh` and other credentials cannot be read). Nothing else of the
//! host exists inside: not `/run`, `/var/run` or `/var` (so no host Unix socket — the Docker
//! socket, D-Bus, SSH or GPG agents — can be reached by path), and without network the
//! abstract sockets are another namespace's. The command has its own PID namespace (when its
//! first process ends, the kernel kills everything else in it, `setsid` daemons included).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::{host, ExecEnd, ExecFuture, ExecOutput, ExecRequest, Sandbox, SandboxKind};

/// The system package that provides `bwrap`, named in the error when it is missing.
pub const BWRAP_PACKAGE: &str = "bubblewrap";

/// Where DeerFlow's virtual paths point inside the sandbox, as the file tools resolve them.
const VIRTUAL_WORKSPACE: &str = "/mnt/user-data/workspace";
const VIRTUAL_SKILLS: &str = "/mnt/skills";

/// The host directories a command may need to run programs (binaries, libraries, their
/// configuration), shown read-only when the host has them. `/var`, `/run`, `/srv`, `/opt`,
/// `/home`, `/root`, `/mnt`, `/media` and `/sys` are left out: sockets and user data live
/// there, not programs.
const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// How one of [`SYSTEM_DIRS`] appears inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemEntry {
    /// A directory, bound read-only.
    Dir(PathBuf),
    /// A symlink (merged `/usr`: `/bin -> usr/bin`), recreated with the same target.
    Symlink { path: PathBuf, target: PathBuf },
}

/// What the host has of [`SYSTEM_DIRS`].
pub fn system_entries() -> Vec<SystemEntry> {
    SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .filter_map(|p| {
            let meta = p.symlink_metadata().ok()?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(p).ok()?;
                Some(SystemEntry::Symlink {
                    path: p.to_path_buf(),
                    target,
                })
            } else {
                meta.is_dir().then(|| SystemEntry::Dir(p.to_path_buf()))
            }
        })
        .collect()
}

/// bwrap with the settings of one run.
#[derive(Debug, Clone)]
pub struct ConfinedSandbox {
    bwrap: PathBuf,
    network: bool,
    /// The home directory to hide (`$HOME` of the run), if any.
    home: Option<PathBuf>,
    system: Vec<SystemEntry>,
    /// With network: the file `/etc/resolv.conf` points to when it is a symlink out of
    /// `/etc` (systemd-resolved keeps it under `/run`), bound alone so names still resolve.
    resolv: Option<PathBuf>,
}

impl ConfinedSandbox {
    pub fn new(bwrap: PathBuf, network: bool, home: Option<PathBuf>) -> Self {
        let resolv = network
            .then(|| std::fs::canonicalize("/etc/resolv.conf").ok())
            .flatten();
        Self::with_system(bwrap, network, home, system_entries(), resolv)
    }

    /// As [`ConfinedSandbox::new`], with the system entries given (tests).
    pub fn with_system(
        bwrap: PathBuf,
        network: bool,
        home: Option<PathBuf>,
        system: Vec<SystemEntry>,
        resolv: Option<PathBuf>,
    ) -> Self {
        let resolv = resolv.filter(|r| !system_covers(&system, r));
        Self {
            bwrap,
            network,
            home: home.filter(|h| h.is_absolute() && h.parent().is_some()),
            system,
            resolv,
        }
    }

    /// bwrap's arguments for a command run in `cwd`; the mounts are applied in order, so
    /// the hiding tmpfs mounts come before the binds that must show through them, and the
    /// root becomes read-only once every mount point on it exists.
    pub fn args(&self, cwd: &Path, skills: Option<&Path>, command: &str) -> Vec<OsString> {
        let mut a = Args::default();
        for entry in &self.system {
            match entry {
                SystemEntry::Dir(p) => a.flag("--ro-bind").path(p).path(p),
                SystemEntry::Symlink { path, target } => {
                    a.flag("--symlink").path(target).path(path)
                }
            };
        }
        if let Some(r) = &self.resolv {
            a.flag("--ro-bind-try").path(r).path(r);
        }
        a.flag("--dev").path("/dev");
        a.flag("--proc").path("/proc");
        a.flag("--tmpfs").path("/tmp");
        // A home that contains the workspace is still hidden; the workspace is bound back
        // into it below. A home inside the workspace is the workspace's business.
        let home = self.home.as_deref().filter(|h| !h.starts_with(cwd));
        if let Some(h) = home {
            a.flag("--tmpfs").path(h);
        }
        a.flag("--bind").path(cwd).path(cwd);
        a.flag("--bind").path(cwd).path(VIRTUAL_WORKSPACE);
        if let Some(s) = skills.filter(|s| s.is_dir()) {
            a.flag("--ro-bind").path(s).path(VIRTUAL_SKILLS);
        }
        if let Some(h) = home {
            a.flag("--remount-ro").path(h);
        }
        a.flag("--remount-ro").path("/");
        a.flag("--chdir").path(cwd);
        a.flag("--unshare-pid");
        a.flag("--unshare-ipc");
        if !self.network {
            a.flag("--unshare-net");
        }
        a.flag("--die-with-parent");
        a.flag("--new-session");
        a.flag("--");
        a.flag("bash").flag("-c").flag(command);
        a.0
    }
}

/// Whether `path` is already visible through a bound system directory.
fn system_covers(system: &[SystemEntry], path: &Path) -> bool {
    system
        .iter()
        .any(|e| matches!(e, SystemEntry::Dir(d) if path.starts_with(d)))
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flag(&mut self, s: &str) -> &mut Self {
        self.0.push(s.into());
        self
    }
    fn path(&mut self, p: impl AsRef<OsStr>) -> &mut Self {
        self.0.push(p.as_ref().to_owned());
        self
    }
}

impl Sandbox for ConfinedSandbox {
    fn kind(&self) -> SandboxKind {
        SandboxKind::Confined
    }

    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            let mut cmd = Command::new(&self.bwrap);
            cmd.args(self.args(req.cwd, req.skills, req.command));
            // SAFETY: the closure runs in the forked child before exec and makes only
            // fcntl/close_range system calls, which are async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    close_inherited();
                    Ok(())
                });
            }
            let out = host::run(cmd, "bwrap", &req).await?;
            match setup_failure(&out) {
                Some(why) => Err(format!("cannot start the confined sandbox: {why}")),
                None => Ok(out),
            }
        })
    }
}

/// Marks every descriptor above stderr close-on-exec. What deerflow inherited without that
/// flag (a socket its parent passed on, a `3>file` redirection) would otherwise reach the
/// command inside the sandbox: a connected host socket needs no path to be used.
/// For `pre_exec`: async-signal-safe.
fn close_inherited() {
    // SAFETY: close_range takes plain integers; with CLOSE_RANGE_CLOEXEC it closes nothing.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if !done {
        // Linux before 5.11: one descriptor at a time, as far as they usually go.
        for fd in 3..4096 {
            // SAFETY: fcntl on a descriptor that is not open fails with EBADF, harmlessly.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
}

/// bwrap's own error when it could not build the sandbox (no user namespaces, a mount it
/// cannot make): it then exits 1 with a `bwrap: ` message and the command never ran, which
/// is an error rather than a command's output (§6: unable to start).
fn setup_failure(out: &ExecOutput) -> Option<&str> {
    let ran = !matches!(out.end, ExecEnd::Exited(1)) || !out.stdout.is_empty();
    let msg = out.stderr.trim();
    (!ran && msg.starts_with("bwrap: ") && !msg.contains('\n')).then_some(msg)
}

/// `bwrap` on `path` (a `PATH`-style list), as an executable file.
pub fn find_bwrap(path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("bwrap"))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn merged_usr() -> Vec<SystemEntry> {
        vec![
            SystemEntry::Dir("/usr".into()),
            SystemEntry::Symlink {
                path: "/bin".into(),
                target: "usr/bin".into(),
            },
            SystemEntry::Dir("/etc".into()),
        ]
    }

    fn sandbox(network: bool, home: Option<&str>, resolv: Option<&str>) -> ConfinedSandbox {
        ConfinedSandbox::with_system(
            "bwrap".into(),
            network,
            home.map(Into::into),
            merged_usr(),
            resolv.map(Into::into),
        )
    }

    #[test]
    fn mounts_show_only_the_system_the_workspace_and_skills() {
        let skills = tempfile::tempdir().unwrap();
        let s = sandbox(false, Some("/home/u"), None);
        let got = text(&s.args(Path::new("/home/u/proj"), Some(skills.path()), "echo hi"));
        let want = format!(
            "--ro-bind /usr /usr --symlink usr/bin /bin --ro-bind /etc /etc \
             --dev /dev --proc /proc --tmpfs /tmp \
             --tmpfs /home/u --bind /home/u/proj /home/u/proj \
             --bind /home/u/proj /mnt/user-data/workspace --ro-bind {} /mnt/skills \
             --remount-ro /home/u --remount-ro / --chdir /home/u/proj --unshare-pid \
             --unshare-ipc --unshare-net --die-with-parent --new-session -- bash -c echo hi",
            skills.path().display()
        );
        assert_eq!(got, want);
    }

    #[test]
    fn the_host_root_and_its_sockets_are_never_mounted() {
        let s = ConfinedSandbox::new("bwrap".into(), false, Some("/home/u".into()));
        let args = s.args(Path::new("/w"), None, "x");
        let got = text(&args);
        assert!(!got.contains("--bind / /"), "{got}");
        for hidden in ["/run", "/var", "/home/u/", "/mnt "] {
            assert!(!got.contains(&format!("{hidden} ")), "{hidden}: {got}");
        }
        // Every host path bound in is a system directory, the workspace or the skills.
        let sources: Vec<&OsString> = args
            .windows(2)
            .filter(|w| w[0] == "--ro-bind" || w[0] == "--bind" || w[0] == "--ro-bind-try")
            .map(|w| &w[1])
            .collect();
        for src in sources {
            let src = Path::new(src);
            assert!(
                src == Path::new("/w") || SYSTEM_DIRS.iter().any(|d| src == Path::new(d)),
                "{}",
                src.display()
            );
        }
    }

    #[test]
    fn network_home_and_skills_are_optional() {
        let s = sandbox(true, None, None);
        let got = text(&s.args(Path::new("/w"), Some(Path::new("/no/such/skills")), "x"));
        assert!(!got.contains("--unshare-net"), "{got}");
        assert!(!got.contains("/mnt/skills"), "{got}");
        assert!(!got.contains("--remount-ro /home"), "{got}");
        // A home inside the workspace (or equal to it) is not hidden over the workspace.
        let s = sandbox(false, Some("/w"), None);
        assert!(!text(&s.args(Path::new("/w"), None, "x")).contains("--tmpfs /w"));
        let s = sandbox(false, Some("/"), None);
        let got = text(&s.args(Path::new("/w"), None, "x"));
        assert!(got.ends_with("--remount-ro / --chdir /w --unshare-pid --unshare-ipc --unshare-net --die-with-parent --new-session -- bash -c x"), "{got}");
        assert!(!got.contains("--tmpfs / "), "{got}");
        // With network, a resolv.conf kept outside /etc is bound alone; inside it, nothing.
        let s = sandbox(true, None, Some("/run/systemd/resolve/stub-resolv.conf"));
        let got = text(&s.args(Path::new("/w"), None, "x"));
        let r = "/run/systemd/resolve/stub-resolv.conf";
        assert!(got.contains(&format!("--ro-bind-try {r} {r}")), "{got}");
        let s = sandbox(true, None, Some("/etc/resolv.conf"));
        assert!(!text(&s.args(Path::new("/w"), None, "x")).contains("--ro-bind-try"));
    }

    fn process_with(marker: &str) -> bool {
        std::fs::read_dir("/proc").is_ok_and(|dir| {
            dir.filter_map(Result::ok).any(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(marker)
                })
            })
        })
    }

    async fn gone_within(marker: &str, secs: u64) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < deadline {
            if !process_with(marker) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        !process_with(marker)
    }

    /// The real bwrap, when this machine has one that can make the namespaces.
    fn real() -> Option<ConfinedSandbox> {
        let bwrap = find_bwrap(std::env::var_os("PATH").as_deref())?;
        let probe = std::process::Command::new(&bwrap)
            .args([
                "--ro-bind",
                "/",
                "/",
                "--unshare-pid",
                "--unshare-net",
                "true",
            ])
            .status();
        if !probe.is_ok_and(|s| s.success()) {
            eprintln!("notice: bwrap cannot run here; confined sandbox unit test skipped");
            return None;
        }
        Some(ConfinedSandbox::new(bwrap, false, None))
    }

    #[tokio::test]
    async fn timeout_and_cancellation_kill_everything_inside() {
        use super::super::{ExecEnd, ExecRequest};
        use crate::child_env::ChildEnv;
        use crate::process::ProcessGroups;
        use tokio_util::sync::CancellationToken;
        let Some(sandbox) = real() else { return };
        let dir = tempfile::tempdir().unwrap();
        let env = ChildEnv::from_process(&[], &[]);
        let groups = ProcessGroups::default();
        let cancel = CancellationToken::new();
        let req = |command, timeout| ExecRequest {
            command,
            cwd: dir.path(),
            skills: None,
            env: &env,
            timeout,
            output_max_chars: 1000,
            cancel: &cancel,
            processes: &groups,
            mark: None,
        };
        let secs = std::time::Duration::from_secs;
        let out = sandbox
            .exec(req("echo up; setsid sleep 827364 & sleep 827365", secs(1)))
            .await
            .unwrap();
        assert!(matches!(out.end, ExecEnd::TimedOut), "{out:?}");
        assert_eq!(out.stdout, "up\n");
        assert!(
            gone_within("sleep 827364", 3).await,
            "daemon survived a timeout"
        );
        assert!(gone_within("sleep 827365", 3).await);
        assert!(groups.live().is_empty());

        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            canceller.cancel();
        });
        let out = sandbox
            .exec(req("setsid sleep 827366 & sleep 827367", secs(60)))
            .await
            .unwrap();
        assert!(matches!(out.end, ExecEnd::Cancelled), "{out:?}");
        assert!(
            gone_within("sleep 827366", 3).await,
            "daemon survived cancellation"
        );
        assert!(gone_within("sleep 827367", 3).await);
    }

    #[tokio::test]
    async fn descriptors_deerflow_inherited_do_not_reach_the_command() {
        use super::super::ExecRequest;
        use crate::child_env::ChildEnv;
        use crate::process::ProcessGroups;
        use tokio_util::sync::CancellationToken;
        let Some(sandbox) = real() else { return };
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::open(dir.path()).unwrap();
        // Without close-on-exec, as a parent's socket or `3>file` arrives.
        // SAFETY: fcntl duplicates a descriptor `file` keeps open; it touches no memory.
        let fd = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_DUPFD, 700) };
        assert!(fd >= 700);
        let (env, groups, cancel) = (
            ChildEnv::from_process(&[], &[]),
            ProcessGroups::default(),
            CancellationToken::new(),
        );
        let out = sandbox
            .exec(ExecRequest {
                command: "ls /proc/self/fd",
                cwd: dir.path(),
                skills: None,
                env: &env,
                timeout: std::time::Duration::from_secs(10),
                output_max_chars: 1000,
                cancel: &cancel,
                processes: &groups,
                mark: None,
            })
            .await
            .unwrap();
        // SAFETY: `fd` is the duplicate made above, owned by nothing else.
        unsafe { libc::close(fd) };
        let fds: Vec<&str> = out.stdout.split_whitespace().collect();
        assert!(!fds.contains(&fd.to_string().as_str()), "{fds:?}");
        assert!(fds.contains(&"2"), "{out:?}");
    }

    #[tokio::test]
    async fn a_bwrap_that_cannot_build_the_sandbox_is_an_error() {
        use super::super::ExecRequest;
        use crate::child_env::ChildEnv;
        use crate::process::ProcessGroups;
        use std::os::unix::fs::PermissionsExt;
        use tokio_util::sync::CancellationToken;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bwrap");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (env, groups, cancel) = (
            ChildEnv::default(),
            ProcessGroups::default(),
            CancellationToken::new(),
        );
        let req = ExecRequest {
            command: "true",
            cwd: dir.path(),
            skills: None,
            env: &env,
            timeout: std::time::Duration::from_secs(10),
            output_max_chars: 1000,
            cancel: &cancel,
            processes: &groups,
            mark: None,
        };
        let got = ConfinedSandbox::new(fake, false, None).exec(req).await;
        assert_eq!(
            got.unwrap_err(),
            "cannot start the confined sandbox: bwrap: No permissions to creating new namespace"
        );
        // A command's own failure, even one mentioning bwrap, stays its output.
        let out = |code, stdout: &str, stderr: &str| ExecOutput {
            end: ExecEnd::Exited(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            cut_chars: 0,
        };
        assert_eq!(setup_failure(&out(1, "", "bwrap: x\n")), Some("bwrap: x"));
        assert_eq!(setup_failure(&out(2, "", "bwrap: x")), None);
        assert_eq!(setup_failure(&out(1, "y", "bwrap: x")), None);
        assert_eq!(setup_failure(&out(1, "", "make: bwrap: x")), None);
    }

    #[test]
    fn bwrap_is_found_on_path_only_as_an_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()]).unwrap();
        assert_eq!(find_bwrap(Some(&path)), None, "not executable");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_bwrap(Some(&path)), Some(fake));
        assert_eq!(find_bwrap(None), None);
        assert_eq!(find_bwrap(Some(OsStr::new("relative/dir"))), None);
    }
}
