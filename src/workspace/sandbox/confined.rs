//! `confined`: bash on the host inside bubblewrap (contract §13). The root filesystem is
//! read-only, the workspace and a private `/tmp` are writable, the home directory is an
//! empty read-only directory (so `~/.ssh` and other credentials cannot be read), skills are
//! read-only at `/mnt/skills`, and the command has its own PID namespace (when its first
//! process ends, the kernel kills everything else in it, `setsid` daemons included) and no
//! network unless the config allows it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::{host, ExecFuture, ExecRequest, Sandbox};

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
            host::run(cmd, "bwrap", &req).await
        })
    }
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
