//! MCP server entries (contract §9): the `mcp_servers:` section, DeerFlow's
//! `extensions_config.json` and `--mcp-config` files, merged by server name (later sources
//! win), checked, and resolved into what the run starts.
//!
//! Entries keep their raw `$VAR` strings (so `config show` never prints a value read from the
//! environment); `resolve` expands them, for enabled servers only: a disabled entry's
//! variables are never read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml_ng::{Mapping, Value};

use super::decode::decode_doc;
use super::dollar::{claude_names, expand_claude, expand_strict, DollarError};
use super::env::{var_name, Env};
use super::keypath::KeyPath;
use super::schema::{McpOrigin, McpServerEntry};
use super::validate::duration_problem;

/// The file DeerFlow keeps its MCP servers in, beside its `config.yaml`.
pub const EXTENSIONS_FILE: &str = "extensions_config.json";
/// Names another extensions file (DeerFlow's variable).
pub const EXTENSIONS_ENV: &str = "DEER_FLOW_EXTENSIONS_CONFIG_PATH";

/// How deerflow talks to a server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set on top of the filtered environment (contract §6).
        env: Vec<(String, String)>,
        /// Relative to the workspace; `None` is the workspace.
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl McpTransport {
    /// As `mcp_server_started.transport` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "http",
        }
    }
}

/// An enabled server, its `$VAR`s expanded: what the run starts.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub name: String,
    pub transport: McpTransport,
    pub required: bool,
    pub tool_name_prefix: bool,
    pub session_init_timeout: f64,
    pub tool_call_timeout: f64,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
}

/// The enabled servers in name order, with the names of the environment variables their
/// `env` and `headers` were read from (secrets no tool's child may inherit).
pub fn resolve_mcp(
    servers: &BTreeMap<String, McpServerEntry>,
    env: &Env,
) -> Result<(Vec<McpServer>, Vec<String>), Vec<String>> {
    let mut out = Vec::new();
    let mut secrets = Vec::new();
    let mut problems = Vec::new();
    for (name, entry) in servers.iter().filter(|(_, e)| e.enabled) {
        match resolve_one(name, entry, env, &mut secrets) {
            Ok(s) => out.push(s),
            Err(mut p) => problems.append(&mut p),
        }
    }
    if problems.is_empty() {
        Ok((out, secrets))
    } else {
        Err(problems)
    }
}

fn resolve_one(
    name: &str,
    e: &McpServerEntry,
    env: &Env,
    secrets: &mut Vec<String>,
) -> Result<McpServer, Vec<String>> {
    let at = e.key_path(name);
    let claude = matches!(e.origin, McpOrigin::McpConfig(_));
    let mut problems = Vec::new();
    let mut get = |raw: &str, key: String, secret: bool| -> String {
        if secret {
            if claude {
                secrets.extend(claude_names(raw));
            } else {
                secrets.extend(var_name(raw).map(String::from));
            }
        }
        let expanded = if claude {
            expand_claude(raw, env)
        } else {
            expand_strict(raw, env)
        };
        expanded.unwrap_or_else(|err| {
            problems.push(match err {
                DollarError::Unset(var) => format!(
                    "{key}: ${var} is not set (set it, or disable the server with enabled: false)"
                ),
                DollarError::Malformed(why) => format!("{key}: {why}"),
            });
            String::new()
        })
    };
    let kind = match (e.type_.as_deref(), &e.command, &e.url) {
        (Some("stdio"), _, _) | (None, Some(_), _) => "stdio",
        (Some("http" | "streamable_http" | "streamable-http" | "streamableHttp"), _, _)
        | (None, None, Some(_)) => "http",
        (Some("sse"), _, _) => {
            return Err(vec![format!(
                "{at}.type: server '{name}' uses the legacy SSE transport, which deerflow does not support; \
                 use its streamable HTTP endpoint with type: http"
            )])
        }
        (Some(other), _, _) => {
            return Err(vec![format!(
                "{at}.type: server '{name}': unknown transport '{other}' (expected stdio or http)"
            )])
        }
        (None, None, None) => {
            return Err(vec![format!(
                "{at}: server '{name}' needs `command` (stdio) or `url` (http)"
            )])
        }
    };
    let transport = if kind == "stdio" {
        let Some(command) = &e.command else {
            return Err(vec![format!(
                "{at}.command: server '{name}' is stdio and needs a command"
            )]);
        };
        McpTransport::Stdio {
            command: get(command, format!("{at}.command"), false),
            args: e
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| get(a, format!("{at}.args[{i}]"), false))
                .collect(),
            env: e
                .env
                .iter()
                .map(|(k, v)| (k.clone(), get(v, format!("{at}.env.{k}"), true)))
                .collect(),
            cwd: e.cwd.as_deref().map(|c| get(c, format!("{at}.cwd"), false)),
        }
    } else {
        let Some(url) = &e.url else {
            return Err(vec![format!(
                "{at}.url: server '{name}' is http and needs a url"
            )]);
        };
        McpTransport::Http {
            url: get(url, format!("{at}.url"), false),
            headers: e
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), get(v, format!("{at}.headers.{k}"), true)))
                .collect(),
        }
    };
    if let McpTransport::Http { headers, .. } = &transport {
        problems.extend(header_problems(&at, headers));
    }
    for (key, v) in [
        ("session_init_timeout", e.session_init_timeout),
        ("tool_call_timeout", e.tool_call_timeout),
    ] {
        if let Some(why) = duration_problem(v) {
            problems.push(format!("{at}.{key}: {why}"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(McpServer {
        name: name.to_string(),
        transport,
        required: e.required,
        tool_name_prefix: e.tool_name_prefix,
        session_init_timeout: e.session_init_timeout,
        tool_call_timeout: e.tool_call_timeout,
        enabled_tools: e.enabled_tools.clone(),
        disabled_tools: e.disabled_tools.clone(),
    })
}

/// Headers no request could carry (contract §12: a pasted line break in a token is a
/// configuration error, not a server that fails later). A value is never shown.
fn header_problems(at: &str, headers: &[(String, String)]) -> Vec<String> {
    const TCHAR: &str = "!#$%&'*+-.^_`|~";
    let mut out = Vec::new();
    for (k, v) in headers {
        let shown = deerflow_base::text::escape_controls(k);
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || TCHAR.contains(c))
        {
            out.push(format!(
                "{at}.headers.{shown}: not a valid HTTP header name"
            ));
        } else if v.chars().any(char::is_control) {
            out.push(format!(
                "{at}.headers.{shown}: the value contains control characters (a line break?); remove them"
            ));
        }
    }
    out
}

impl McpServerEntry {
    /// Where server `name` is configured, as messages name it: its key path in the config
    /// (`mcp_servers.NAME`), or its file and path there (`FILE: mcpServers.NAME`).
    pub fn key_path(&self, name: &str) -> String {
        match &self.origin {
            McpOrigin::Config => format!("mcp_servers.{name}"),
            McpOrigin::Extensions(p) | McpOrigin::McpConfig(p) => {
                format!("{}: mcpServers.{name}", p.display())
            }
        }
    }
}

/// Servers read from one `{"mcpServers": {…}}` file.
#[derive(Debug, Default)]
pub struct McpFile {
    pub servers: BTreeMap<String, McpServerEntry>,
    /// Keys deerflow does not use, as `FILE: key.path`.
    pub ignored: Vec<String>,
}

/// Which rules a file's entries follow: DeerFlow's `extensions_config.json`, or a
/// `--mcp-config` file (Claude Code's `.mcp.json`, whose `${VAR}`s are expanded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpFileKind {
    Extensions,
    McpConfig,
}

/// Reads a JSON (or YAML) file holding an `mcpServers` object. `Err` is one problem line.
pub fn read_mcp_file(path: &Path, kind: McpFileKind) -> Result<McpFile, Vec<String>> {
    let shown = path.display();
    // Bounded as every config file is (contract §12): `/dev/zero` must not fill memory.
    let text = std::fs::File::open(path)
        .and_then(deerflow_base::text::read_text_at_most)
        .map_err(|e| vec![format!("cannot read MCP config {shown}: {e}")])?;
    let root: Value = serde_yaml_ng::from_str(&text).map_err(|e| {
        vec![format!(
            "{shown}: invalid JSON: {}",
            e.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )]
    })?;
    let Value::Mapping(root) = root else {
        return Err(vec![format!(
            "{shown}: expected an object with an `mcpServers` object"
        )]);
    };
    let mut file = McpFile::default();
    let mut servers = Value::Mapping(Mapping::new());
    for (k, v) in root {
        match k.as_str() {
            Some("mcpServers") => servers = v,
            _ => file
                .ignored
                .push(format!("{shown}: {}", super::tree::key_text(&k))),
        }
    }
    // The YAML section's model reads the entries, so unknown entry keys are named the same way.
    let decoded = decode_doc::<BTreeMap<String, McpServerEntry>>(
        &servers,
        &KeyPath::root().key("mcpServers"),
        None,
    );
    file.ignored
        .extend(decoded.ignored.iter().map(|p| format!("{shown}: {p}")));
    file.servers = decoded.value;
    let problems = decoded.errors;
    let origin = match kind {
        McpFileKind::Extensions => McpOrigin::Extensions(path.to_path_buf()),
        McpFileKind::McpConfig => McpOrigin::McpConfig(path.to_path_buf()),
    };
    for e in file.servers.values_mut() {
        e.origin = origin.clone();
    }
    if problems.is_empty() {
        Ok(file)
    } else {
        Err(problems
            .into_iter()
            .map(|(p, m)| format!("{shown}: {p}: {m}"))
            .collect())
    }
}

/// The extensions file for a config in `base_dir`: `$DEER_FLOW_EXTENSIONS_CONFIG_PATH`
/// (which must exist), else `extensions_config.json` beside the config, if there is one.
pub fn extensions_file(base_dir: &Path, cwd: &Path, env: &Env) -> Option<PathBuf> {
    if let Some(p) = env.get(EXTENSIONS_ENV) {
        return Some(cwd.join(p));
    }
    Some(base_dir.join(EXTENSIONS_FILE)).filter(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(yaml: &str) -> McpServerEntry {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn servers(pairs: &[(&str, &str)]) -> BTreeMap<String, McpServerEntry> {
        pairs
            .iter()
            .map(|(n, y)| (n.to_string(), entry(y)))
            .collect()
    }

    #[test]
    fn defaults_and_transport_from_the_keys() {
        let env = Env::from_pairs([("TOK", "t0k"), ("DIR", "/srv")]);
        let s = servers(&[
            ("a", "{command: srv, args: [x, $DIR], env: {TOKEN: $TOK}}"),
            ("b", "{url: 'http://h/mcp', headers: {X-Key: $TOK}, tool_name_prefix: false, required: true}"),
            ("c", "{enabled: false, command: x, env: {K: $UNSET}}"),
        ]);
        let (r, secrets) = resolve_mcp(&s, &env).unwrap();
        assert_eq!(r.len(), 2, "the disabled server is not resolved");
        assert_eq!(
            r[0].transport,
            McpTransport::Stdio {
                command: "srv".into(),
                args: vec!["x".into(), "/srv".into()],
                env: vec![("TOKEN".into(), "t0k".into())],
                cwd: None
            }
        );
        assert!(r[0].tool_name_prefix && !r[0].required);
        assert_eq!(r[0].session_init_timeout, 60.0);
        assert_eq!(r[1].transport.kind(), "http");
        assert!(!r[1].tool_name_prefix && r[1].required);
        assert_eq!(secrets, ["TOK", "TOK"]);
    }

    #[test]
    fn sse_unset_vars_and_missing_command_are_problems() {
        let env = Env::empty();
        let p = resolve_mcp(
            &servers(&[("legacy", "{type: sse, url: 'http://h/sse'}")]),
            &env,
        )
        .unwrap_err();
        assert!(p[0].contains("'legacy'") && p[0].contains("SSE"), "{p:?}");
        let p = resolve_mcp(
            &servers(&[(
                "gh",
                "{transport: stdio, command: npx, env: {GITHUB_TOKEN: $GH}}",
            )]),
            &env,
        )
        .unwrap_err();
        assert_eq!(
            p,
            ["mcp_servers.gh.env.GITHUB_TOKEN: $GH is not set (set it, or disable the server with enabled: false)"]
        );
        let p = resolve_mcp(&servers(&[("n", "{args: [x]}")]), &env).unwrap_err();
        assert!(p[0].contains("needs `command`"), "{p:?}");
        let p = resolve_mcp(&servers(&[("n", "{type: http, command: x}")]), &env).unwrap_err();
        assert!(p[0].contains("needs a url"), "{p:?}");
        let p = resolve_mcp(
            &servers(&[("n", "{command: x, tool_call_timeout: 0}")]),
            &env,
        )
        .unwrap_err();
        assert!(p[0].contains("tool_call_timeout"), "{p:?}");
    }

    fn with_origin(yaml: &str, origin: McpOrigin) -> BTreeMap<String, McpServerEntry> {
        let mut s = servers(&[("s", yaml)]);
        for e in s.values_mut() {
            e.origin = origin.clone();
        }
        s
    }

    /// Every field, under both rules: `${…}` and half-written `$` are errors naming the key
    /// in DeerFlow's formats; a `--mcp-config` file expands `${VAR}` and `${VAR:-d}`.
    #[test]
    fn each_dollar_form_in_each_field_follows_its_source_s_rule() {
        let env = Env::from_pairs([("T", "t0k"), ("H", "h")]);
        let file = McpOrigin::McpConfig(PathBuf::from("/x/.mcp.json"));
        let fields = [
            ("command", "{command: 'VAL'}"),
            ("args[0]", "{command: c, args: ['VAL']}"),
            ("env.K", "{command: c, env: {K: 'VAL'}}"),
            ("cwd", "{command: c, cwd: 'VAL'}"),
            ("url", "{url: 'VAL'}"),
            ("headers.K", "{url: 'http://h', headers: {K: 'VAL'}}"),
        ];
        for (key, yaml) in fields {
            for bad in ["${T}", "$T-x", "$", "Bearer ${T}"] {
                let e = with_origin(&yaml.replace("VAL", bad), McpOrigin::Config);
                let p = resolve_mcp(&e, &env).unwrap_err();
                assert!(p[0].starts_with(&format!("mcp_servers.s.{key}: ")), "{p:?}");
            }
            for bad in ["$T-x", "$", "${T", "${NOPE}"] {
                let e = with_origin(&yaml.replace("VAL", bad), file.clone());
                let p = resolve_mcp(&e, &env).unwrap_err();
                let at = format!("/x/.mcp.json: mcpServers.s.{key}: ");
                assert!(p[0].starts_with(&at), "{bad}: {p:?}");
            }
            let e = with_origin(&yaml.replace("VAL", "a ${T}/${N:-d}/$H"), file.clone());
            let (r, secrets) = resolve_mcp(&e, &env).unwrap();
            let shown = format!("{:?}", r[0].transport);
            assert!(shown.contains("\"a t0k/d/$H\""), "{key}: {shown}");
            if key.contains('.') {
                assert_eq!(secrets, ["T", "N"], "{key}");
            }
            let e = with_origin(&yaml.replace("VAL", "$T"), McpOrigin::Config);
            let shown = format!("{:?}", resolve_mcp(&e, &env).unwrap().0[0].transport);
            assert!(shown.contains("\"t0k\""), "{key}: {shown}");
        }
    }

    #[test]
    fn the_deerflow_example_file_loads_as_it_is() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/deerflow/extensions_config.example.json");
        if !path.exists() {
            eprintln!("skipped: {} is not there", path.display());
            return;
        }
        let f = read_mcp_file(&path, McpFileKind::Extensions).unwrap();
        assert_eq!(
            f.servers.keys().collect::<Vec<_>>(),
            ["github", "long-running-reports", "openviking", "postgres"]
        );
        assert!(f.servers.values().all(|s| !s.enabled));
        let ignored: Vec<&str> = f
            .ignored
            .iter()
            .map(|s| s.rsplit(": ").next().unwrap_or(s))
            .collect();
        assert_eq!(
            ignored,
            [
                "middlewares",
                "mcpInterceptors",
                "skills",
                "mcpServers.postgres.routing",
                "mcpServers.postgres.tools",
                "mcpServers.long-running-reports.task_toolsets",
            ]
        );
        assert!(resolve_mcp(&f.servers, &Env::empty()).unwrap().0.is_empty());
    }

    #[test]
    fn a_claude_code_file_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".mcp.json");
        std::fs::write(
            &p,
            r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv"], "env": {}}, "web": {"type": "http", "url": "https://x/mcp"}}}"#,
        )
        .unwrap();
        let f = read_mcp_file(&p, McpFileKind::McpConfig).unwrap();
        assert!(f.ignored.is_empty());
        assert_eq!(f.servers["web"].type_.as_deref(), Some("http"));
        std::fs::write(&p, r#"{"mcpServers": {"fs": {"args": "x"}}}"#).unwrap();
        let e = read_mcp_file(&p, McpFileKind::McpConfig).unwrap_err();
        assert!(e[0].contains("mcpServers.fs.args"), "{e:?}");
        std::fs::write(&p, "{").unwrap();
        assert!(read_mcp_file(&p, McpFileKind::McpConfig).unwrap_err()[0].contains("invalid JSON"));
        assert!(
            read_mcp_file(&dir.path().join("nope"), McpFileKind::McpConfig).unwrap_err()[0]
                .contains("cannot read")
        );
    }
    #[test]
    fn a_file_over_16_mib_is_refused_without_being_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.json");
        let mut text = " ".repeat(17 << 20);
        text.push_str(r#"{"mcpServers": {}}"#);
        std::fs::write(&p, text).unwrap();
        let e = read_mcp_file(&p, McpFileKind::McpConfig).unwrap_err();
        assert!(e[0].contains("larger than 16 MiB"), "{e:?}");
    }
    #[test]
    fn header_names_and_values_no_request_could_carry_are_problems() {
        let env = Env::from_pairs([("TOK", "Bearer t\r\n")]);
        let p = resolve_mcp(
            &servers(&[
                ("a", "{url: 'http://h', headers: {Authorization: $TOK}}"),
                (
                    "b",
                    "{url: 'http://h', headers: {'Bad Name': v, X-Ok: 'fine'}}",
                ),
            ]),
            &env,
        )
        .unwrap_err();
        assert_eq!(
            p,
            [
                "mcp_servers.a.headers.Authorization: the value contains control characters (a line break?); remove them",
                "mcp_servers.b.headers.Bad Name: not a valid HTTP header name",
            ]
        );
    }
}
