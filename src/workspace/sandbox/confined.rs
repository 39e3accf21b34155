//! `confined`: bash on the host inside bubblewrap (contract §13). The root filesystem is
//! read-only, the workspace and a private `/tmp` are writable, the home directory is an
//! empty read-only directory (so `~/.ssh` and other credentials cannot be read), skills are
//! read-only at `/mnt/skills`, and the command has its own PID namespace (when its first
//! process ends, the kernel kills everything else in it, `setsid` daemons included) and no
//! network unless the config allows it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::{host, ExecEnd, ExecFuture, ExecOutput, ExecRequest, Sandbox};

/// The system package that provides `bwrap`, named in the error when it is missing.
pub const BWRAP_PACKAGE: &str = "bubblewrap";

/// Where DeerFlow's virtual paths point inside the sandbox, as the file tools resolve them.
const VIRTUAL_WORKSPACE: &str = "/mnt/user-data/workspace";
const VIRTUAL_SKILLS: &str = "/mnt/skills";

/// bwrap with the settings of one run.
#[derive(Debug, Clone)]
pub struct ConfinedSandbox {
    bwrap: PathBuf,
    network: bool,
    /// The home directory to hide (`$HOME` of the run), if any.
    home: Option<PathBuf>,
}

impl ConfinedSandbox {
    pub fn new(bwrap: PathBuf, network: bool, home: Option<PathBuf>) -> Self {
        Self {
            bwrap,
            network,
            home: home.filter(|h| h.is_absolute() && h.parent().is_some()),
        }
    }

    /// bwrap's arguments for a command run in `cwd`; the mounts are applied in order, so
    /// the hiding tmpfs mounts come before the binds that must show through them.
    pub fn args(&self, cwd: &Path, skills: Option<&Path>, command: &str) -> Vec<OsString> {
        let mut a = Args::default();
        a.flag("--ro-bind").path("/").path("/");
        a.flag("--dev").path("/dev");
        a.flag("--proc").path("/proc");
        a.flag("--tmpfs").path("/tmp");
        // /mnt holds the virtual paths; host mounts there are hidden rather than exposed.
        a.flag("--tmpfs").path("/mnt");
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
    fn kind(&self) -> &'static str {
        "confined"
    }

    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            let mut cmd = Command::new(&self.bwrap);
            cmd.args(self.args(req.cwd, req.skills, req.command));
            let out = host::run(cmd, "bwrap", &req).await?;
            match setup_failure(&out) {
                Some(why) => Err(format!("cannot start the confined sandbox: {why}")),
                None => Ok(out),
            }
        })
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

    #[test]
    fn mounts_hide_home_and_show_the_workspace() {
        let skills = tempfile::tempdir().unwrap();
        let s = ConfinedSandbox::new("bwrap".into(), false, Some("/home/u".into()));
        let got = text(&s.args(Path::new("/home/u/proj"), Some(skills.path()), "echo hi"));
        let want = format!(
            "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /mnt \
             --tmpfs /home/u --bind /home/u/proj /home/u/proj \
             --bind /home/u/proj /mnt/user-data/workspace --ro-bind {} /mnt/skills \
             --remount-ro /home/u --chdir /home/u/proj --unshare-pid --unshare-ipc \
             --unshare-net --die-with-parent --new-session -- bash -c echo hi",
            skills.path().display()
        );
        assert_eq!(got, want);
    }

    #[test]
    fn network_home_and_skills_are_optional() {
        let s = ConfinedSandbox::new("bwrap".into(), true, None);
        let got = text(&s.args(Path::new("/w"), Some(Path::new("/no/such/skills")), "x"));
        assert!(!got.contains("--unshare-net"), "{got}");
        assert!(!got.contains("/mnt/skills"), "{got}");
        assert!(!got.contains("--remount-ro"), "{got}");
        // A home inside the workspace (or equal to it) is not hidden over the workspace.
        let s = ConfinedSandbox::new("bwrap".into(), false, Some("/w".into()));
        assert!(!text(&s.args(Path::new("/w"), None, "x")).contains("--tmpfs /w"));
        let s = ConfinedSandbox::new("bwrap".into(), false, Some("/".into()));
        assert!(!text(&s.args(Path::new("/w"), None, "x")).contains("--remount-ro"));
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
        use crate::workspace::child_env::ChildEnv;
        use crate::workspace::process::ProcessGroups;
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
    async fn a_bwrap_that_cannot_build_the_sandbox_is_an_error() {
        use super::super::ExecRequest;
        use crate::workspace::child_env::ChildEnv;
        use crate::workspace::process::ProcessGroups;
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
