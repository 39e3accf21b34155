//! `sandbox.use: confined` (contract §13): bash inside bubblewrap, driven through the binary
//! with replay cassettes that call bash. Skipped with a notice where bwrap cannot run.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{cassette, deerflow, workspace, Output};

/// Whether bwrap is on PATH and can make the namespaces the sandbox uses.
fn bwrap_works() -> bool {
    let ok = std::process::Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args([
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "true",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "notice: bubblewrap (bwrap) is missing or cannot create namespaces here; \
             the confined sandbox tests are skipped"
        );
    }
    ok
}

fn bash_calls(commands: &[&str]) -> Value {
    let calls: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"tool_calls": [{"id": format!("c{i}"), "name": "bash", "arguments": {"command": c}}]}))
        .chain([json!({"text": "done"})])
        .collect();
    json!({"version": 1, "lead": calls})
}

/// Writes the config and runs the cassette with `--allow-bash`, HOME set to `home`.
async fn run_confined(ws: &Path, home: &Path, sandbox: &str, commands: &[&str]) -> Output {
    let c = cassette(ws, bash_calls(commands));
    let skills = ws.join("skills-src");
    std::fs::create_dir_all(skills.join("demo")).unwrap();
    std::fs::write(
        skills.join("demo/SKILL.md"),
        "---\nname: demo\ndescription: a demo skill\n---\nSKILL-BODY\n",
    )
    .unwrap();
    let cfg = ws.join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsandbox: {sandbox}\nskills: {{path: {}}}\n",
            c.display(),
            skills.display()
        ),
    )
    .unwrap();
    deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-c",
        cfg.to_str().unwrap(),
        "go",
    ])
    .cwd(ws)
    .env("HOME", home.to_str().unwrap())
    .json()
    .await
}

/// The tool_result outputs, in call order.
fn results(out: &Output) -> Vec<String> {
    out.of_type("tool_result")
        .iter()
        .map(|e| e["output"].as_str().unwrap_or_default().to_string())
        .collect()
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

fn gone_within(marker: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if !process_with(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !process_with(marker)
}

#[tokio::test(flavor = "multi_thread")]
async fn confined_bash_keeps_home_network_and_daemons_in_while_the_workspace_works() {
    if !bwrap_works() {
        return;
    }
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "SSH-PRIVATE-KEY\n").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let private_tmp = format!("/tmp/deerflow-confined-{}", fastrand::u64(..));
    let commands = [
        "echo pwned > \"$HOME/planted\"; echo rc=$?".to_string(),
        "cat ~/.ssh/id_rsa; ls -a ~".to_string(),
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"),
        "setsid sleep 918273 </dev/null >/dev/null 2>&1 & echo started".to_string(),
        format!(
            "printf '#!/bin/sh\\necho built-and-ran\\n' > tool.sh && chmod +x tool.sh && ./tool.sh \
             && mkdir -p out && echo made > out/artifact && echo private > {private_tmp} \
             && cat {private_tmp} && if command -v cc >/dev/null; then \
             printf 'int main(void){{return 0;}}' > m.c && cc m.c -o m && ./m && echo cc-ok; \
             else echo cc-ok; fi"
        ),
        "cat /mnt/skills/demo/SKILL.md; touch /mnt/skills/demo/x; touch /etc/deerflow-x; \
         cat /mnt/user-data/workspace/out/artifact"
            .to_string(),
    ];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let out = run_confined(ws.path(), home.path(), "{use: confined}", &refs).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let started = out.first("run_started");
    assert_eq!(
        started["sandbox"],
        json!({"use": "confined", "image": null})
    );
    let r = results(&out);
    assert_eq!(r.len(), 6, "{r:#?}");

    // $HOME is read-only and empty: nothing planted, no key read.
    assert!(r[0].contains("Read-only file system"), "{}", r[0]);
    assert!(!home.path().join("planted").exists());
    assert!(!r[1].contains("SSH-PRIVATE-KEY"), "{}", r[1]);
    assert!(r[1].contains("No such file or directory"), "{}", r[1]);
    // No network: the host's listener saw no connection.
    assert!(!r[2].contains("CONNECTED"), "{}", r[2]);
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a connection reached the host"
    );
    // The setsid daemon died with the command's PID namespace.
    assert!(r[3].contains("started"), "{}", r[3]);
    assert!(gone_within("sleep 918273", 5), "a setsid daemon survived");
    // The workspace is writable and executable; /tmp is private.
    assert!(r[4].contains("built-and-ran"), "{}", r[4]);
    assert!(r[4].contains("private"), "{}", r[4]);
    assert!(r[4].contains("cc-ok"), "{}", r[4]);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/artifact")).unwrap(),
        "made\n"
    );
    assert!(!Path::new(&private_tmp).exists(), "/tmp was the host's");
    // Skills read-only at /mnt/skills, the root read-only, the virtual workspace path there.
    assert!(r[5].contains("SKILL-BODY"), "{}", r[5]);
    assert!(
        r[5].contains("touch: cannot touch '/mnt/skills/demo/x': Read-only file system"),
        "{}",
        r[5]
    );
    assert!(
        r[5].contains("touch: cannot touch '/etc/deerflow-x': Read-only file system"),
        "{}",
        r[5]
    );
    assert!(r[5].contains("made"), "{}", r[5]);
    assert!(!ws.path().join("skills-src/demo/x").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn confined_network_is_opt_in() {
    if !bwrap_works() {
        return;
    }
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED");
    let out = run_confined(
        ws.path(),
        home.path(),
        "{use: confined, network: true}",
        &[&cmd],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(results(&out), ["CONNECTED\n"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn confined_still_needs_allow_bash_and_a_bwrap_on_path() {
    let ws = workspace();
    let c = cassette(ws.path(), bash_calls(&["echo ran"]));
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsandbox: {{use: confined}}\n",
            c.display()
        ),
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-c",
        cfg.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .env("PATH", empty.path().to_str().unwrap())
    .output()
    .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    assert!(out.stderr.contains("bwrap"), "{}", out.stderr);
    assert!(out.stderr.contains("bubblewrap"), "{}", out.stderr);
    assert!(out.events.is_empty(), "{}", out.stdout);

    if !bwrap_works() {
        return;
    }
    let out = deerflow(["run", "--json", "-c", cfg.to_str().unwrap(), "go"])
        .cwd(ws.path())
        .json()
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = results(&out);
    // Without --allow-bash, bash is not offered at all, confined or not.
    assert!(r[0].starts_with("Error: unknown tool 'bash'"), "{r:?}");
    assert!(!r[0].contains("ran"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_and_config_show_name_the_sandbox() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(&cfg, "sandbox: {use: confined, network: true}\n").unwrap();
    let c = cfg.to_str().unwrap();
    let out = deerflow(["agents", "--json", "-c", c]).text().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        list[0]["sandbox"],
        json!({"use": "confined", "image": null})
    );
    let table = deerflow(["agents", "-c", c]).text().await;
    let header = table.stdout.lines().next().unwrap_or_default().to_string();
    assert!(header.trim_end().ends_with("SANDBOX"), "{}", table.stdout);
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("general-purpose"))
        .unwrap_or_default();
    assert!(row.trim_end().ends_with("confined"), "{}", table.stdout);
    let shown = deerflow(["config", "show", "--json", "-c", c]).text().await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let v: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(v["sandbox"]["use"], "confined");
    assert_eq!(v["sandbox"]["network"], true);
    // DeerFlow's local provider class is shown as what it means.
    std::fs::write(
        &cfg,
        "sandbox: {use: deerflow.sandbox.local:LocalSandboxProvider}\n",
    )
    .unwrap();
    let list = deerflow(["agents", "--json", "-c", c]).text().await;
    let list: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list[0]["sandbox"]["use"], "local");
}

/// A bash sub-agent's confined command, with a `setsid` daemon, stopped by SIGTERM: the
/// sub-agent ran in the same sandbox (its write to $HOME failed) and nothing survives.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_a_sub_agents_confined_command_and_its_daemon() {
    if !bwrap_works() {
        return;
    }
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let marker = format!("4144{}", fastrand::u32(10_000..99_999));
    let command = format!(
        "echo x > \"$HOME/sub-planted\"; setsid sleep {marker}1 </dev/null >/dev/null 2>&1 & sleep {marker}2"
    );
    let c = cassette(
        ws.path(),
        json!({"version": 1,
        "lead": [{"tool_calls": [{"name": "task", "arguments": {"description": "sleeper", "prompt": "sleep", "subagent_type": "bash"}}]},
                 {"text": "never"}],
        "tasks": {"sleeper": [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "woke"}]}}),
    );
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(
        &cfg,
        format!(
            "models:\n  - {{name: demo, use: replay, cassette: {}}}\nsandbox: {{use: confined}}\n",
            c.display()
        ),
    )
    .unwrap();
    let mut cmd = deerflow([
        "run",
        "--json",
        "--allow-bash",
        "-c",
        cfg.to_str().unwrap(),
        "go",
    ])
    .cwd(ws.path())
    .env("HOME", home.path().to_str().unwrap())
    .command();
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn deerflow");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(process_with(&format!("sleep {marker}1")) && process_with(&format!("sleep {marker}2")))
    {
        assert!(
            Instant::now() < deadline,
            "the confined sleeps never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("running") as i32;
    // SAFETY: kill only sends a signal to the child this test spawned.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("deerflow did not stop")
        .unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(
        gone_within(&format!("sleep {marker}1"), 3),
        "the daemon survived"
    );
    assert!(gone_within(&format!("sleep {marker}2"), 3));
    assert!(!home.path().join("sub-planted").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn config_check_reports_a_missing_bwrap() {
    let ws = workspace();
    let cfg = ws.path().join("deerflow.yaml");
    std::fs::write(&cfg, "sandbox: {use: confined}\n").unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = deerflow(["config", "check", "--json", "-c", cfg.to_str().unwrap()])
        .env("PATH", empty.path().to_str().unwrap())
        .text()
        .await;
    assert_eq!(out.code, 78, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("install the bubblewrap package"),
        "{problems}"
    );
    if bwrap_works() {
        let out = deerflow(["config", "check", "-c", cfg.to_str().unwrap()])
            .text()
            .await;
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
}

/// A host Unix socket outside /tmp and $HOME (where the Docker socket, D-Bus and agents
/// live) is not even visible inside: the sandbox mounts what commands need, not the host's
/// root. Without network, an abstract socket is out of reach too.
#[tokio::test(flavor = "multi_thread")]
async fn confined_bash_cannot_reach_host_unix_sockets() {
    use std::os::unix::net::UnixListener;
    if !bwrap_works() {
        return;
    }
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all("/var/tmp").unwrap();
    let outside = tempfile::Builder::new()
        .prefix("dfsock")
        .tempdir_in("/var/tmp")
        .unwrap();
    let sock = outside.path().join("s");
    let listener = UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("dfabs{}", fastrand::u64(..));
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    let s = sock.display();
    // python3 (or `nc -U`) is the client where the system has one; the socket file's absence
    // is checked either way.
    let python = |address: &str| {
        format!(
            "python3 -c 'import socket; c=socket.socket(socket.AF_UNIX); \
             c.connect(\"{address}\"); print(\"CONNECTED\")'"
        )
    };
    let commands = [
        format!(
            "test -e {s} && echo VISIBLE || echo ABSENT; if command -v python3 >/dev/null; \
             then {}; elif command -v nc >/dev/null; then nc -U {s} </dev/null && echo CONNECTED; \
             else echo no-client; fi",
            python(&s.to_string())
        ),
        format!(
            "command -v python3 >/dev/null && {} || echo no-client",
            python(&format!("\\0{abstract_name}"))
        ),
        "ls /run /var/run /var 2>&1; echo w > written && cat written; echo t > /tmp/t && cat /tmp/t"
            .to_string(),
    ];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let out = run_confined(ws.path(), home.path(), "{use: confined}", &refs).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = results(&out);
    assert_eq!(r.len(), 3, "{r:#?}");
    assert!(r[0].starts_with("ABSENT\n"), "{}", r[0]);
    for got in &r[..2] {
        assert!(!got.contains("CONNECTED"), "{got}");
    }
    for l in [&listener, &abstract_listener] {
        assert!(
            matches!(l.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
            "a connection reached the host's socket"
        );
    }
    for gone in ["/run", "/var/run", "/var"] {
        assert!(
            r[2].contains(&format!(
                "ls: cannot access '{gone}': No such file or directory"
            )),
            "{}",
            r[2]
        );
    }
    assert!(r[2].contains("w\nt\n"), "{}", r[2]);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("written")).unwrap(),
        "w\n"
    );
}
