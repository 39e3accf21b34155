//! Containers must not outlive a deerflow that was killed with SIGKILL, which runs no
//! cleanup. Two mechanisms, one for each way a container could be left behind:
//!
//! - **The leash.** A container's main process is `sh -c 'read _'` on a stdin that deerflow
//!   holds through an attach connection, with `StdinOnce`. However deerflow dies, the kernel
//!   closes that connection; the daemon then closes the container's stdin, `read` sees EOF,
//!   the main process exits, the container's PID namespace ends (every `docker exec` in it
//!   with it), and `AutoRemove` has the daemon delete the container. Nothing polls, and
//!   nothing depends on the daemon seeing a host pid (it lives in another PID namespace, or
//!   on another machine).
//! - **Owner labels.** Every container names its owner: the pid, its start time (field 22 of
//!   `/proc/PID/stat`, clock ticks since boot, so a reused pid is told apart) and the machine
//!   and PID namespace those are valid in (the boot id and the PID namespace). A docker run's
//!   start removes every container of this machine and namespace whose owner is gone. That
//!   covers a container whose leash never held: deerflow killed between creating and
//!   attaching, or a daemon that was unreachable at the time. Only containers carrying
//!   these labels are ever touched, and those of another machine never.

use std::collections::HashMap;

use bollard::container::AttachContainerResults;
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{AttachContainerOptionsBuilder, ListContainersOptionsBuilder};
use bollard::Docker;

use super::{remove, CLEANUP_TIMEOUT};

pub const OWNER_PID: &str = "deerflow.owner.pid";
pub const OWNER_START: &str = "deerflow.owner.start";
pub const OWNER_HOST: &str = "deerflow.owner.host";

/// The deerflow process a container belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub start: u64,
    /// The boot id and PID namespace the pid and start time mean something in.
    pub host: String,
}

impl Owner {
    /// This process, where `/proc` tells who it is (Linux); elsewhere `None`, and then
    /// containers carry no owner and nothing is judged stale.
    pub fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            pid,
            start: start_time(pid)?,
            host: host_id()?,
        })
    }

    pub fn labels(&self) -> [(String, String); 3] {
        [
            (OWNER_PID.to_string(), self.pid.to_string()),
            (OWNER_START.to_string(), self.start.to_string()),
            (OWNER_HOST.to_string(), self.host.clone()),
        ]
    }

    fn from_labels(labels: &HashMap<String, String>) -> Option<Self> {
        Some(Self {
            pid: labels.get(OWNER_PID)?.parse().ok()?,
            start: labels.get(OWNER_START)?.parse().ok()?,
            host: labels.get(OWNER_HOST)?.clone(),
        })
    }

    /// Whether the process is still the one that created the container.
    fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// Field 22 of `/proc/PID/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; field 3 follows it.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(22 - 3)?
        .parse()
        .ok()
}

fn host_id() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let pid_ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(format!("{}/{}", boot.trim(), pid_ns.to_string_lossy()))
}

/// Removes the containers of this machine and namespace whose owner is gone; returns how
/// many. Bounded like every cleanup: a slow daemon only delays the start so long.
pub async fn remove_stale(docker: &Docker, me: &Owner) -> usize {
    let filters = HashMap::from([("label", vec![format!("{OWNER_HOST}={}", me.host)])]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let Ok(Ok(list)) =
        tokio::time::timeout(CLEANUP_TIMEOUT, docker.list_containers(Some(opts))).await
    else {
        return 0;
    };
    let stale: Vec<String> = list
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(Owner::from_labels)
                .is_some_and(|o| o.host == me.host && !o.is_alive())
        })
        .filter_map(|c| c.id)
        .collect();
    futures_util::future::join_all(stale.iter().map(|id| remove(docker, id))).await;
    stale.len()
}

/// The attach connection whose end ends the container (see the module docs). Held for as
/// long as the container should live.
#[derive(Debug)]
pub struct Leash {
    _attached: AttachContainerResults,
}

/// Attaches to `container`'s stdin; before it starts, so no moment exists in which it runs
/// unleashed.
pub async fn leash(docker: &Docker, container: &str) -> Result<Leash, DockerError> {
    let opts = AttachContainerOptionsBuilder::default()
        .stream(true)
        .stdin(true)
        .build();
    docker
        .attach_container(container, Some(opts))
        .await
        .map(|a| Leash { _attached: a })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_its_own_live_owner_and_labels_round_trip() {
        let me = Owner::current().expect("Linux /proc");
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_alive());
        assert!(me.host.contains("/pid:["), "{}", me.host);
        let labels: HashMap<String, String> = me.labels().into_iter().collect();
        assert_eq!(Owner::from_labels(&labels), Some(me.clone()));
        // The same pid with another start time is a reused pid: not the owner.
        let reused = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!reused.is_alive());
        let gone = Owner {
            pid: u32::MAX - 1,
            ..me
        };
        assert!(!gone.is_alive());
        let mut partial = labels;
        partial.remove(OWNER_START);
        assert_eq!(Owner::from_labels(&partial), None);
    }

    #[test]
    fn start_time_is_field_22_of_stat() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let want: u64 = stat.split_whitespace().nth(21).unwrap().parse().unwrap();
        assert_eq!(start_time(pid), Some(want));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(start_time(pid), None);
    }
}
