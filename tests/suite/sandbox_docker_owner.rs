//! A docker sandbox's containers do not outlive a deerflow killed with SIGKILL (contract
//! §13): the container ends with its owner, and a later run removes any container whose
//! owner is gone. Skipped with a notice without the test daemon, as the other docker tests.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use bollard::Docker;
use serde_json::json;

use super::harness::{processes_with, workspace};
use super::sandbox_docker::{bash_calls, config, containers, daemon, prefix, run, IMAGE};

async fn gone_within(docker: &Docker, prefix: &str, marker: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = containers(docker, prefix).await;
        if left.is_empty() && processes_with(marker).is_empty() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkilled_deerflow_s_container_and_its_command_end_with_it() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let marker = format!("{}", 500_000 + fastrand::u32(0..99_999));
    let cfg = config(
        ws.path(),
        bash_calls(&[&format!("touch started; sleep {marker}")]),
        &p,
        "",
    );
    let mut cmd = run(ws.path(), &cfg, &[]).command();
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn deerflow");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.path().join("started").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(containers(&docker, &p).await.len(), 1);
    assert!(!processes_with(&format!("sleep {marker}")).is_empty());
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert!(
        gone_within(&docker, &p, &format!("sleep {marker}"), 10).await,
        "the container or its command outlived kill -9: {:?}",
        containers(&docker, &p).await
    );
}

/// What deerflow labels its containers with, for this process.
fn owner_labels(start: &str) -> HashMap<String, String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    HashMap::from([
        ("deerflow.owner.pid".into(), std::process::id().to_string()),
        ("deerflow.owner.start".into(), start.into()),
        (
            "deerflow.owner.host".into(),
            format!("{}/{}", boot.trim(), ns.display()),
        ),
    ])
}

fn my_start_time() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().to_string()
}

async fn create_running(docker: &Docker, name: &str, labels: HashMap<String, String>) {
    let body = ContainerCreateBody {
        image: Some(IMAGE.into()),
        cmd: Some(vec!["sleep".into(), "3600".into()]),
        labels: Some(labels),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let opts = CreateContainerOptionsBuilder::default().name(name).build();
    docker.create_container(Some(opts), body).await.unwrap();
    docker.start_container(name, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_docker_run_removes_only_the_containers_whose_owner_is_gone() {
    let Some(docker) = daemon().await else { return };
    let ws = workspace();
    let p = prefix();
    let mut foreign = owner_labels("1");
    foreign.insert(
        "deerflow.owner.host".into(),
        "another-machine/pid:[1]".into(),
    );
    let mut unlabelled = HashMap::new();
    unlabelled.insert("other.label".into(), "x".into());
    // The same pid with another start time: the owner's pid was reused, the owner is gone.
    create_running(&docker, &format!("{p}-stale"), owner_labels("1")).await;
    create_running(
        &docker,
        &format!("{p}-live"),
        owner_labels(&my_start_time()),
    )
    .await;
    create_running(&docker, &format!("{p}-foreign"), foreign).await;
    create_running(&docker, &format!("{p}-unlabelled"), unlabelled).await;

    let script = json!({"version": 1, "lead": [{"text": "done"}]});
    let cfg = config(ws.path(), script, &format!("{p}-run"), "");
    let out = run(ws.path(), &cfg, &[]).json().await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let mut left = containers(&docker, &p).await;
    left.sort();
    for name in &left {
        let opts = RemoveContainerOptionsBuilder::default().force(true).build();
        let _ = docker.remove_container(name, Some(opts)).await;
    }
    assert_eq!(
        left,
        [
            format!("{p}-foreign"),
            format!("{p}-live"),
            format!("{p}-unlabelled")
        ]
    );
}
