//! `sandbox.use: docker` (contract §13) as the Docker sandbox takes it, or, in a build
//! without the `docker` feature, a configuration error that says so.

use std::path::Path;
#[cfg(feature = "docker")]
use std::sync::Arc;

use crate::config::{self, ConfigError};
use crate::workspace::sandbox::Sandbox;

#[cfg(feature = "docker")]
pub(super) fn sandbox(
    s: &config::SandboxConfig,
    workspace: &Path,
    skills: &Path,
) -> Result<Arc<dyn Sandbox>, ConfigError> {
    let settings = docker_settings(s, workspace, skills)?;
    Ok(Arc::new(crate::workspace::sandbox::DockerSandbox::new(
        settings,
    )))
}

#[cfg(not(feature = "docker"))]
pub(super) fn sandbox(
    _: &config::SandboxConfig,
    _: &Path,
    _: &Path,
) -> Result<std::sync::Arc<dyn Sandbox>, ConfigError> {
    Err(ConfigError::Sandbox(format!(
        "sandbox.use: docker: {}; use local or confined, or install a build with it",
        super::features::Feature::Docker.missing()
    )))
}

#[cfg(feature = "docker")]
fn docker_settings(
    s: &config::SandboxConfig,
    workspace: &Path,
    skills: &Path,
) -> Result<crate::workspace::sandbox::DockerSettings, ConfigError> {
    let environment = s
        .environment_with(&config::Env::process())
        .map_err(ConfigError::Sandbox)?;
    use crate::workspace::sandbox::{docker_host, DockerMount, DockerSettings};
    Ok(DockerSettings {
        image: s.image.clone().unwrap_or_default(),
        per_task: s.per_task,
        network: s.network,
        replicas: s.replicas,
        container_prefix: s.container_prefix.clone(),
        workspace: workspace.to_path_buf(),
        skills: Some(skills.to_path_buf()),
        mounts: s
            .mounts
            .iter()
            .map(|m| DockerMount {
                host_path: m.host_path.clone(),
                container_path: m.container_path.clone(),
                read_only: m.read_only,
            })
            .collect(),
        environment,
        user: container_user(),
        host: docker_host(std::env::var("DOCKER_HOST").ok()),
    })
}

#[cfg(feature = "docker")]
/// The container runs as deerflow's own user, so what it writes into the workspace is the
/// user's; as root, the image's own user.
fn container_user() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = std::fs::metadata("/proc/self").ok()?;
    (me.uid() != 0).then(|| format!("{}:{}", me.uid(), me.gid()))
}

#[cfg(all(test, not(feature = "docker")))]
mod tests {
    #[test]
    fn a_build_without_docker_says_so_as_a_configuration_error() {
        let s = crate::config::SandboxConfig::default();
        let dir = std::path::Path::new("/");
        let Err(err) = super::sandbox(&s, dir, dir) else {
            panic!("a build without docker has no docker sandbox");
        };
        assert!(
            err.to_string().contains("built without the docker sandbox"),
            "{err}"
        );
    }
}
