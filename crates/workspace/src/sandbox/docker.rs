//! `docker`: bash in a container started through the Docker Engine API (contract §13), on
//! `$DOCKER_HOST` or the default socket. The run's container is created before the first
//! model call (so a daemon, image, mount or network the daemon refuses fails the run there);
//! with `per_task`, each sub-agent gets its own at its first command, at most `replicas` at
//! once, removed when the sub-agent ends. Every command is one `docker exec`: a small `sh`
//! prelude reports its process id (a new session inside the container, so also its process
//! group) and then becomes `bash -c COMMAND` (or `sh -c` in an image without bash); a timeout
//! or cancellation kills that group with a second exec. Every container the run created
//! carries a label with the run's key and is removed by [`Sandbox::stop`]; when deerflow is
//! killed without a chance to stop, its containers end with it (see [`owner`]).

mod owner;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::{Stream, StreamExt};
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};

use self::owner::{Leash, Owner};
use super::capture::{exec_output, Capture};
use super::{ExecEnd, ExecFuture, ExecOutput, ExecRequest, Sandbox, SandboxFuture, SandboxKind};

/// Where §13 puts things inside the container.
pub const VIRTUAL_WORKSPACE: &str = "/mnt/user-data/workspace";
pub const VIRTUAL_OUTPUTS: &str = "/mnt/user-data/outputs";
pub const VIRTUAL_SKILLS: &str = "/mnt/skills";

/// The label every container of a run carries: its value is the run's key.
const LABEL: &str = "deerflow.sandbox";
/// The daemon's default socket, when `DOCKER_HOST` is not set.
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";
/// How long the daemon has to answer the first request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Any one API request (not a command's output, which streams without a bound).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a running command is asked whether it has exited: a backgrounded child can
/// hold the output stream open after the command itself is gone.
const EXIT_POLL: Duration = Duration::from_millis(200);
/// How long output is still read after the command exits, or after it was killed.
const DRAIN: Duration = Duration::from_secs(1);
/// A kill, a removal: bounded so a stuck daemon cannot hold a run's end.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The prelude every command runs through: its process id on the first line of stdout,
/// then the command itself in the same process (so that id is the group to kill).
const PRELUDE: &str = "printf '%s\\n' \"$$\"; if command -v bash >/dev/null 2>&1; then \
                       exec bash -c \"$1\"; fi; exec sh -c \"$1\"";

/// One extra bind mount (DeerFlow's `sandbox.mounts`).
#[derive(Debug, Clone, PartialEq)]
pub struct DockerMount {
    pub host_path: PathBuf,
    pub container_path: String,
    pub read_only: bool,
}

/// Everything a docker sandbox needs, resolved from the config before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerSettings {
    pub image: String,
    pub per_task: bool,
    pub network: bool,
    pub replicas: u32,
    pub container_prefix: String,
    /// The workspace on the host.
    pub workspace: PathBuf,
    pub skills: Option<PathBuf>,
    pub mounts: Vec<DockerMount>,
    /// The container's environment, `$VAR`s already read.
    pub environment: Vec<(String, String)>,
    /// `uid:gid` to run as (so files written into the workspace are the user's), or `None`
    /// for the image's own user.
    pub user: Option<String>,
    /// The daemon's address (see [`docker_host`]).
    pub host: String,
}

/// The daemon's address: `$DOCKER_HOST` when set, else the default socket.
pub fn docker_host(env_value: Option<String>) -> String {
    env_value
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| DEFAULT_HOST.to_string())
}

/// What the run's sandbox and its per-task sandboxes share.
#[derive(Debug)]
struct Shared {
    settings: DockerSettings,
    /// Names the run's containers (and labels them), so runs never share one.
    key: String,
    docker: OnceLock<Docker>,
    /// The run's container, created by `start`.
    run_box: OnceCell<String>,
    replicas: Arc<Semaphore>,
    tasks: AtomicU32,
    /// Every container name this run created, in case the daemon cannot list them at the end.
    created: Mutex<Vec<String>>,
    /// Set by `stop`: a container created after it is removed at once.
    stopped: AtomicBool,
    /// This process, named on every container so a later run can tell when it is gone.
    owner: Option<Owner>,
    /// Each live container's attach connection: the container ends when it closes.
    leashes: Mutex<HashMap<String, Leash>>,
}

/// Commands in a container; see the module docs.
#[derive(Debug, Clone)]
pub struct DockerSandbox {
    shared: Arc<Shared>,
}

impl DockerSandbox {
    pub fn new(settings: DockerSettings) -> Self {
        let replicas = Arc::new(Semaphore::new(settings.replicas.max(1) as usize));
        let key = format!("{:08x}", fastrand::u32(..));
        Self {
            shared: Arc::new(Shared {
                settings,
                key,
                docker: OnceLock::new(),
                run_box: OnceCell::new(),
                replicas,
                tasks: AtomicU32::new(0),
                created: Mutex::new(Vec::new()),
                stopped: AtomicBool::new(false),
                owner: Owner::current(),
                leashes: Mutex::default(),
            }),
        }
    }

    /// The run's container name.
    fn run_name(&self) -> String {
        format!(
            "{}-{}",
            self.shared.settings.container_prefix, self.shared.key
        )
    }

    async fn start_inner(&self) -> Result<(), String> {
        let s = &self.shared.settings;
        let docker = connect(&s.host).await?;
        if let Some(me) = &self.shared.owner {
            let n = owner::remove_stale(&docker, me).await;
            if n > 0 {
                deerflow_base::logging::info(&format!(
                    "docker sandbox: removed {n} container(s) left by deerflow processes that were killed"
                ));
            }
        }
        ensure_image(&docker, &s.image).await?;
        // A bind mount's source must exist; `outputs` is the one deerflow itself provides.
        let outputs = s.workspace.join("outputs");
        std::fs::create_dir_all(&outputs)
            .map_err(|e| format!("cannot create {}: {e}", outputs.display()))?;
        let _ = self.shared.docker.set(docker);
        let name = self.run_name();
        self.shared
            .run_box
            .get_or_try_init(|| async {
                self.shared.create(&name).await?;
                Ok::<_, String>(name.clone())
            })
            .await?;
        Ok(())
    }
}

impl Shared {
    fn docker(&self) -> Result<&Docker, String> {
        self.docker
            .get()
            .ok_or_else(|| "internal error: the docker sandbox was not started".to_string())
    }

    fn remember(&self, name: &str) {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.to_string());
    }

    /// Creates and starts a container named `name`.
    async fn create(&self, name: &str) -> Result<(), String> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err("the run is ending".into());
        }
        let docker = self.docker()?;
        let opts = CreateContainerOptionsBuilder::default().name(name).build();
        self.remember(name);
        let body = container_body(&self.settings, &self.key, self.owner.as_ref());
        docker
            .create_container(Some(opts), body)
            .await
            .map_err(|e| format!("cannot create container {name}: {}", describe(&e)))?;
        tracing::debug!(container = name, image = %self.settings.image, "docker sandbox: container created");
        self.leash(docker, name).await?;
        let started = docker.start_container(name, None).await;
        if self.stopped.load(Ordering::SeqCst) {
            remove(docker, name).await;
            return Err("the run is ending".into());
        }
        started.map_err(|e| format!("cannot start container {name}: {}", describe(&e)))
    }

    /// Attaches to the new container's stdin before it starts (see [`owner`]); a container
    /// that cannot be leashed is removed, as one that cannot be started.
    async fn leash(&self, docker: &Docker, name: &str) -> Result<(), String> {
        match owner::leash(docker, name).await {
            Ok(l) => {
                self.leashes_lock().insert(name.to_string(), l);
                Ok(())
            }
            Err(e) => {
                remove(docker, name).await;
                Err(format!(
                    "cannot attach to container {name}: {}",
                    describe(&e)
                ))
            }
        }
    }

    fn leashes_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Leash>> {
        self.leashes.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let Some(docker) = self.docker.get() else {
            return;
        };
        let mut names = self
            .created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // The label also finds a container whose creation was still in flight when its
        // caller was dropped.
        let filters = HashMap::from([("label", vec![format!("{LABEL}={}", self.key)])]);
        let opts = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        if let Ok(Ok(list)) =
            tokio::time::timeout(CLEANUP_TIMEOUT, docker.list_containers(Some(opts))).await
        {
            names.extend(list.into_iter().filter_map(|c| c.id));
        }
        futures_util::future::join_all(names.iter().map(|n| remove(docker, n))).await;
        self.leashes_lock().clear();
    }

    /// Runs one command in `container`.
    async fn exec_in(&self, container: &str, req: &ExecRequest<'_>) -> Result<ExecOutput, String> {
        let docker = self.docker()?.clone();
        let opts = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(vec!["sh", "-c", PRELUDE, "sh", req.command]),
            working_dir: Some(VIRTUAL_WORKSPACE),
            user: self.settings.user.as_deref(),
            ..Default::default()
        };
        let cannot = |e: DockerError| {
            format!(
                "cannot run the command in container {container}: {}",
                describe(&e)
            )
        };
        let exec = docker.create_exec(container, opts).await.map_err(cannot)?;
        let StartExecResults::Attached { output, .. } =
            docker.start_exec(&exec.id, None).await.map_err(cannot)?
        else {
            return Err("internal error: the command started detached".into());
        };
        let pid = Arc::new(OnceLock::new());
        let mut killer = KillOnDrop {
            docker: docker.clone(),
            container: container.to_string(),
            pid: pid.clone(),
            user: self.settings.user.clone(),
            armed: true,
        };
        let stdout = Capture::new(req.output_max_chars);
        let stderr = Capture::new(req.output_max_chars);
        let mut reader = tokio::spawn(read_output(
            output,
            stdout.clone(),
            stderr.clone(),
            pid.clone(),
        ));
        let deadline = tokio::time::sleep(req.timeout);
        tokio::pin!(deadline);
        let mut poll = tokio::time::interval(EXIT_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stream_done = false;
        let stop = loop {
            tokio::select! {
                _ = &mut reader => {
                    stream_done = true;
                    break None;
                }
                _ = &mut deadline => break Some(ExecEnd::TimedOut),
                _ = req.cancel.cancelled() => break Some(ExecEnd::Cancelled),
                _ = poll.tick() => {
                    if exit_code(&docker, &exec.id).await.is_some() {
                        break None;
                    }
                }
            }
        };
        if stop.is_some() {
            killer.kill().await;
        }
        if !stream_done {
            let _ = tokio::time::timeout(DRAIN, &mut reader).await;
            reader.abort();
        }
        let end = match stop {
            Some(end) => end,
            None => {
                let code = wait_exit(&docker, &exec.id).await;
                // What the command left running in its group goes with it (as on the host).
                killer.kill().await;
                code.map_or_else(
                    || ExecEnd::WaitFailed(std::io::Error::other("the daemon lost the command")),
                    ExecEnd::Exited,
                )
            }
        };
        killer.armed = false;
        Ok(exec_output(end, &stdout, &stderr))
    }
}

impl Sandbox for DockerSandbox {
    fn kind(&self) -> SandboxKind {
        SandboxKind::Docker
    }

    fn image(&self) -> Option<&str> {
        Some(&self.shared.settings.image)
    }

    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            let name = self
                .shared
                .run_box
                .get()
                .ok_or("internal error: the docker sandbox was not started")?;
            self.shared.exec_in(name, &req).await
        })
    }

    fn start(&self) -> SandboxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.start_inner()
                .await
                .map_err(|e| format!("docker sandbox: {e}"))
        })
    }

    fn stop(&self) -> SandboxFuture<'_, ()> {
        Box::pin(self.shared.stop())
    }

    fn for_task(&self, _task_id: &str) -> Option<Arc<dyn Sandbox>> {
        if !self.shared.settings.per_task {
            return None;
        }
        let n = self.shared.tasks.fetch_add(1, Ordering::Relaxed) + 1;
        Some(Arc::new(TaskSandbox {
            shared: self.shared.clone(),
            name: format!("{}-task{n}", self.run_name()),
            slot: OnceCell::new(),
        }))
    }
}

/// One sub-agent's container (`per_task`): created at its first command once a replica is
/// free, removed (and the replica freed) when the sub-agent's tools are dropped.
#[derive(Debug)]
struct TaskSandbox {
    shared: Arc<Shared>,
    name: String,
    slot: OnceCell<OwnedSemaphorePermit>,
}

impl TaskSandbox {
    async fn container(&self) -> Result<(), String> {
        self.slot
            .get_or_try_init(|| async {
                let permit = self
                    .shared
                    .replicas
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| "the run is ending".to_string())?;
                self.shared.create(&self.name).await?;
                Ok::<_, String>(permit)
            })
            .await
            .map(|_| ())
    }
}

impl Sandbox for TaskSandbox {
    fn kind(&self) -> SandboxKind {
        SandboxKind::Docker
    }

    fn image(&self) -> Option<&str> {
        Some(&self.shared.settings.image)
    }

    fn exec<'a>(&'a self, req: ExecRequest<'a>) -> ExecFuture<'a> {
        Box::pin(async move {
            // Waiting for a free replica ends with the sub-agent.
            tokio::select! {
                r = self.container() => r.map_err(|e| format!("docker sandbox: {e}"))?,
                _ = req.cancel.cancelled() => {
                    return Ok(ExecOutput {
                        end: ExecEnd::Cancelled,
                        stdout: String::new(),
                        stderr: String::new(),
                        cut_chars: 0,
                    });
                }
            }
            self.shared.exec_in(&self.name, &req).await
        })
    }
}

impl Drop for TaskSandbox {
    fn drop(&mut self) {
        let Some(permit) = self.slot.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return; // no runtime left: the run's `stop` has removed it already
        };
        let (shared, name) = (self.shared.clone(), std::mem::take(&mut self.name));
        rt.spawn(async move {
            if let Ok(docker) = shared.docker() {
                remove(docker, &name).await;
            }
            shared.leashes_lock().remove(&name);
            // The replica is free only once its container is gone.
            drop(permit);
        });
    }
}

/// Kills the command's process group inside the container, when told or when dropped
/// (the tool call's future itself was dropped).
struct KillOnDrop {
    docker: Docker,
    container: String,
    pid: Arc<OnceLock<u32>>,
    user: Option<String>,
    armed: bool,
}

impl KillOnDrop {
    async fn kill(&self) {
        // A command stopped at once may not have reported its id yet; it does so first thing.
        for _ in 0..25 {
            if self.pid.get().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(pid) = self.pid.get().copied() {
            let work = kill_group(&self.docker, &self.container, pid, self.user.as_deref());
            let _ = tokio::time::timeout(CLEANUP_TIMEOUT, work).await;
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some(pid) = self.pid.get().copied().filter(|_| self.armed) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (docker, container, user) = (
            self.docker.clone(),
            std::mem::take(&mut self.container),
            self.user.take(),
        );
        rt.spawn(async move {
            let work = kill_group(&docker, &container, pid, user.as_deref());
            let _ = tokio::time::timeout(CLEANUP_TIMEOUT, work).await;
        });
    }
}

/// SIGKILL to the group `pid` leads inside `container` (and to `pid` itself, should it
/// somehow not lead one), through a second exec.
async fn kill_group(docker: &Docker, container: &str, pid: u32, user: Option<&str>) {
    let script = format!("kill -9 -{pid} 2>/dev/null; kill -9 {pid} 2>/dev/null; true");
    let opts = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(vec!["sh", "-c", script.as_str()]),
        user,
        ..Default::default()
    };
    let Ok(exec) = docker.create_exec(container, opts).await else {
        return;
    };
    if let Ok(StartExecResults::Attached { mut output, .. }) =
        docker.start_exec(&exec.id, None).await
    {
        while output.next().await.is_some() {}
    }
}

type OutputStream = Pin<Box<dyn Stream<Item = Result<LogOutput, DockerError>> + Send>>;

/// Reads the exec's multiplexed output into the captures; the first stdout line is the
/// prelude's process id.
async fn read_output(
    mut output: OutputStream,
    stdout: Capture,
    stderr: Capture,
    pid: Arc<OnceLock<u32>>,
) {
    let mut head: Option<Vec<u8>> = Some(Vec::new());
    while let Some(Ok(frame)) = output.next().await {
        match frame {
            LogOutput::StdOut { message } => match head.as_mut() {
                Some(h) => {
                    h.extend_from_slice(&message);
                    if let Some(nl) = h.iter().position(|b| *b == b'\n') {
                        if let Some(p) = std::str::from_utf8(&h[..nl])
                            .ok()
                            .and_then(|l| l.trim().parse().ok())
                        {
                            let _ = pid.set(p);
                        }
                        stdout.push(&h[nl + 1..]);
                        head = None;
                    }
                }
                None => stdout.push(&message),
            },
            LogOutput::StdErr { message } => stderr.push(&message),
            _ => {}
        }
    }
    // A prelude line never finished: whatever came is output.
    if let Some(h) = head {
        stdout.push(&h);
    }
}

/// The exec's exit code once it has exited, `None` while it runs (or cannot be asked).
async fn exit_code(docker: &Docker, exec_id: &str) -> Option<i32> {
    let info = docker.inspect_exec(exec_id).await.ok()?;
    if info.running == Some(false) {
        info.exit_code.map(|c| i32::try_from(c).unwrap_or(i32::MAX))
    } else {
        None
    }
}

/// The exit code after the output stream ended (the daemon may record the exit a moment
/// after it closes the stream).
async fn wait_exit(docker: &Docker, exec_id: &str) -> Option<i32> {
    for _ in 0..50 {
        if let Some(code) = exit_code(docker, exec_id).await {
            return Some(code);
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    None
}

/// A client for the daemon at `host` that has answered.
async fn connect(host: &str) -> Result<Docker, String> {
    let unreachable = |why: String| {
        format!(
            "cannot reach the Docker daemon at {host}: {why} (start it, or point DOCKER_HOST at its socket)"
        )
    };
    let docker = Docker::connect_with_host(host)
        .map_err(|e| unreachable(describe(&e)))?
        .with_timeout(REQUEST_TIMEOUT);
    match tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version()).await {
        Ok(Ok(d)) => Ok(d),
        Ok(Err(e)) => Err(unreachable(describe(&e))),
        Err(_) => Err(unreachable(format!(
            "no answer within {} seconds",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// The image, pulled once when the daemon does not have it.
async fn ensure_image(docker: &Docker, image: &str) -> Result<(), String> {
    match docker.inspect_image(image).await {
        Ok(_) => return Ok(()),
        Err(DockerError::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => return Err(format!("cannot inspect image {image}: {}", describe(&e))),
    }
    deerflow_base::logging::info(&format!("docker sandbox: pulling image {image}"));
    let (from, tag) = split_reference(image);
    let opts = CreateImageOptionsBuilder::default()
        .from_image(from)
        .tag(tag)
        .build();
    let mut pull = docker.create_image(Some(opts), None, None);
    while let Some(step) = pull.next().await {
        step.map_err(|e| format!("cannot pull image {image}: {}", describe(&e)))?;
    }
    docker.inspect_image(image).await.map(|_| ()).map_err(|e| {
        format!(
            "image {image} is missing after pulling it: {}",
            describe(&e)
        )
    })
}

/// An image reference as the pull API takes it: the repository, and the tag or digest
/// (`latest` when none is given: an empty tag would pull every tag).
fn split_reference(image: &str) -> (&str, &str) {
    if let Some((repo, digest)) = image.split_once('@') {
        return (repo, digest);
    }
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(i) => (&image[..name_start + i], &image[name_start + i + 1..]),
        None => (image, "latest"),
    }
}

async fn remove(docker: &Docker, name: &str) {
    let opts = RemoveContainerOptionsBuilder::default().force(true).build();
    let r = tokio::time::timeout(CLEANUP_TIMEOUT, docker.remove_container(name, Some(opts))).await;
    match r {
        Ok(Ok(())) => tracing::debug!(container = name, "docker sandbox: container removed"),
        // Already gone, or its removal already under way.
        Ok(Err(DockerError::DockerResponseServerError {
            status_code: 404 | 409,
            ..
        })) => {}
        Ok(Err(e)) => deerflow_base::logging::warn(&format!(
            "docker sandbox: cannot remove container {name}: {}",
            describe(&e)
        )),
        Err(_) => deerflow_base::logging::warn(&format!(
            "docker sandbox: removing container {name} took too long"
        )),
    }
}

/// A daemon error's own message, on one line.
fn describe(e: &DockerError) -> String {
    let text = match e {
        DockerError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn bind(host: &Path, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.to_string()),
        source: Some(host.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    }
}

/// The container of a run (or of one sub-agent): §13's mounts, the configured
/// environment and nothing else from the host, no network unless allowed, and a main
/// process that only waits on the stdin deerflow holds open (see [`owner`]): it ends, and
/// the daemon removes the container, when deerflow closes it or dies.
fn container_body(s: &DockerSettings, key: &str, owner: Option<&Owner>) -> ContainerCreateBody {
    let mut mounts = vec![
        bind(&s.workspace, VIRTUAL_WORKSPACE, false),
        bind(&s.workspace.join("outputs"), VIRTUAL_OUTPUTS, false),
    ];
    if let Some(skills) = s.skills.as_deref().filter(|p| p.is_dir()) {
        mounts.push(bind(skills, VIRTUAL_SKILLS, true));
    }
    mounts.extend(
        s.mounts
            .iter()
            .map(|m| bind(&m.host_path, &m.container_path, m.read_only)),
    );
    let mut env: Vec<String> = s
        .environment
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    // A user id the image does not know gets `/` as its home, which it cannot write.
    if s.user.is_some() && !s.environment.iter().any(|(k, _)| k == "HOME") {
        env.push("HOME=/tmp".to_string());
    }
    let mut labels = HashMap::from([(LABEL.to_string(), key.to_string())]);
    labels.extend(owner.into_iter().flat_map(Owner::labels));
    ContainerCreateBody {
        image: Some(s.image.clone()),
        entrypoint: Some(vec!["sh".to_string()]),
        cmd: Some(vec!["-c".to_string(), "read _".to_string()]),
        open_stdin: Some(true),
        working_dir: Some(VIRTUAL_WORKSPACE.to_string()),
        env: Some(env),
        user: s.user.clone(),
        stdin_once: Some(true),
        labels: Some(labels),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            // `true` leaves the daemon's default network (normally `bridge`: outbound
            // access, nothing of the host's own network namespace).
            network_mode: (!s.network).then(|| "none".to_string()),
            auto_remove: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> DockerSettings {
        DockerSettings {
            image: "img:1".into(),
            per_task: false,
            network: false,
            replicas: 2,
            container_prefix: "pre".into(),
            workspace: "/w".into(),
            skills: None,
            mounts: vec![DockerMount {
                host_path: "/data".into(),
                container_path: "/mnt/data".into(),
                read_only: true,
            }],
            environment: vec![("A".into(), "1".into())],
            user: None,
            host: "unix:///nowhere".into(),
        }
    }

    #[test]
    fn references_split_into_repository_and_tag() {
        assert_eq!(split_reference("ubuntu"), ("ubuntu", "latest"));
        assert_eq!(split_reference("ubuntu:24.04"), ("ubuntu", "24.04"));
        assert_eq!(
            split_reference("localhost:5000/team/img"),
            ("localhost:5000/team/img", "latest")
        );
        assert_eq!(
            split_reference("localhost:5000/img:v1"),
            ("localhost:5000/img", "v1")
        );
        assert_eq!(split_reference("img@sha256:abc"), ("img", "sha256:abc"));
    }

    #[test]
    fn the_container_has_the_mounts_environment_and_network_of_the_settings() {
        let skills = tempfile::tempdir().unwrap();
        let mut s = settings();
        s.skills = Some(skills.path().to_path_buf());
        let me = Owner {
            pid: 42,
            start: 7,
            host: "boot/pid:[1]".into(),
        };
        let body = container_body(&s, "k1", Some(&me));
        let host = body.host_config.clone().unwrap();
        let mounts: Vec<(String, String, bool)> = host
            .mounts
            .unwrap()
            .into_iter()
            .map(|m| (m.source.unwrap(), m.target.unwrap(), m.read_only.unwrap()))
            .collect();
        let skills_src = skills.path().display().to_string();
        assert_eq!(
            mounts,
            [
                ("/w".into(), VIRTUAL_WORKSPACE.into(), false),
                ("/w/outputs".into(), VIRTUAL_OUTPUTS.into(), false),
                (skills_src, VIRTUAL_SKILLS.into(), true),
                ("/data".into(), "/mnt/data".into(), true),
            ]
        );
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(body.env, Some(vec!["A=1".to_string()]));
        assert_eq!(body.working_dir.as_deref(), Some(VIRTUAL_WORKSPACE));
        let labels = body.labels.unwrap();
        assert_eq!(labels[LABEL], "k1");
        assert_eq!(labels[owner::OWNER_PID], "42");
        assert_eq!(labels[owner::OWNER_START], "7");
        assert_eq!(labels[owner::OWNER_HOST], "boot/pid:[1]");
        // The main process waits on the stdin deerflow holds; the daemon removes it after.
        assert_eq!(body.cmd, Some(vec!["-c".to_string(), "read _".to_string()]));
        assert_eq!((body.open_stdin, body.stdin_once), (Some(true), Some(true)));
        assert_eq!(host.auto_remove, Some(true));
        assert_eq!(body.user, None);

        s.network = true;
        s.skills = Some("/no/such/dir".into());
        s.user = Some("1000:1000".into());
        let body = container_body(&s, "k1", None);
        assert_eq!(
            body.labels.as_ref().map(HashMap::len),
            Some(1),
            "no owner, no labels"
        );
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode, None);
        assert_eq!(
            host.mounts.unwrap().len(),
            3,
            "a missing skills dir is not mounted"
        );
        assert_eq!(
            body.env,
            Some(vec!["A=1".to_string(), "HOME=/tmp".to_string()])
        );
        assert_eq!(body.user.as_deref(), Some("1000:1000"));
    }

    #[test]
    fn per_task_sandboxes_only_with_per_task() {
        let shared = DockerSandbox::new(settings());
        assert!(shared.for_task("t1").is_none());
        let per_task = DockerSandbox::new(DockerSettings {
            per_task: true,
            ..settings()
        });
        let a = per_task.for_task("t1").unwrap();
        let b = per_task.for_task("t2").unwrap();
        assert_eq!(a.kind(), SandboxKind::Docker);
        assert_eq!(b.image(), Some("img:1"));
        assert_eq!(per_task.image(), Some("img:1"));
    }

    #[tokio::test]
    async fn an_unreachable_daemon_is_one_line_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let host = format!("unix://{}", dir.path().join("none.sock").display());
        let s = DockerSandbox::new(DockerSettings {
            workspace: dir.path().to_path_buf(),
            host: host.clone(),
            ..settings()
        });
        let err = s.start().await.unwrap_err();
        assert!(
            err.starts_with(&format!(
                "docker sandbox: cannot reach the Docker daemon at {host}: "
            )),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        // Nothing was created, so stopping has nothing to do and does not hang.
        s.stop().await;
        assert_eq!(docker_host(None), DEFAULT_HOST);
        assert_eq!(docker_host(Some(String::new())), DEFAULT_HOST);
        assert_eq!(docker_host(Some("tcp://h:2375".into())), "tcp://h:2375");
    }
}
