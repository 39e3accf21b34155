# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_deerflow_global_optspecs
    string join \n c/config= h/help V/version
end

function __fish_deerflow_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_deerflow_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_deerflow_using_subcommand
    set -l cmd (__fish_deerflow_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c deerflow -n "__fish_deerflow_needs_command" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c deerflow -n "__fish_deerflow_needs_command" -s V -l version -d 'Print version'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "run" -d 'Run one task to completion (the main job)'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "agents" -d 'List the sub-agent types the config yields, with effective settings'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "config" -d 'Validate the config, or print the merged config (secrets redacted)'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "schema" -d 'Print the JSON Schema of the event stream'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "man" -d 'Print the man page (roff)'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "mcp" -d 'MCP tool servers: start each configured server, list its tools, stop it'
complete -c deerflow -n "__fish_deerflow_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s p -l prompt -d 'The task (instead of the positional PROMPT)' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l prompt-file -d 'Read the task from a file' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s m -l model -d 'A models[].name from the config, or PROVIDER:MODEL (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, replay:PATH)' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l max-concurrent -d 'Sub-agents running at once (1..=64) [default: 3]' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l max-tasks -d 'Sub-agents started in one run (1..=100000) [default: 16]' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l max-turns -d 'Model calls of the lead agent' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l timeout -d 'Deadline for the whole run (90s, 30m, 1h)' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l subagent-timeout -d 'Overrides every sub-agent\'s timeout (90s, 30m, 1h)' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l max-tokens -d 'Token budget for the whole run (lead + sub-agents)' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s C -l workspace -d 'The directory tools work in [default: current dir]' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l skills -d 'Skills directory [default: skills.path]' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s o -l output-last-message -d 'Write the final answer to FILE (only when the run completed)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l output-schema -d 'A JSON Schema (draft 2020-12) the final answer must satisfy; an answer that does not is sent back to the model up to 2 times' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l record -d 'Write every model response of this run to a replay cassette' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l set -d 'Override a config key by dotted path (subagents.timeout_seconds=60, models[0].model=x); an empty VALUE or null restores the default; repeatable' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l mcp-config -d 'MCP servers from a JSON file with an `mcpServers` object (Claude Code\'s .mcp.json); repeatable, later files win per server name' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l color -d 'Colour on stderr (NO_COLOR is honoured)' -r -f -a "auto\t''
always\t''
never\t''"
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l thinking -d 'Extended thinking / reasoning for models with supports_thinking [default: the model\'s default, on]' -r -f -a "on\t''
off\t''"
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l image -d 'Attach an image (PNG, JPEG, GIF or WebP) to the task; the model needs supports_vision: true; repeatable' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l each -d 'Run the prompt once per item of FILE (JSONL, or one item per line; - = stdin), as a template: {{item}}, {{index}}, {{FIELD}}, {{a.b}}' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l agent -d 'With --each: the sub-agent type each item runs as [default: general-purpose]' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l results -d 'With --each: one JSON line per item as it finishes, rewritten in input order at the end' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l shard -d 'With --each: run only the items whose 0-based index mod N is K-1' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l state -d 'Keep a ledger in DIR so that the same command, run again, resumes instead of redoing finished work' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l json -d 'NDJSON events on stdout; nothing else goes to stdout'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l allow-bash -d 'Allow the bash tool and the bash sub-agent on the host'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l no-subagents -d 'The lead agent gets no task tool'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -l web -d 'Offer web_fetch and web_search (the config\'s tools: entries still apply and win)'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s q -l quiet -d 'No progress display on stderr'
complete -c deerflow -n "__fish_deerflow_using_subcommand run" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand agents" -l set -d 'Override a config key by dotted path, as `run --set` does; repeatable' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand agents" -l mcp-config -d 'MCP servers from a JSON file with an `mcpServers` object, as `run --mcp-config` reads them; repeatable' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand agents" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand agents" -l json -d 'Print JSON instead of a table'
complete -c deerflow -n "__fish_deerflow_using_subcommand agents" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and not __fish_seen_subcommand_from check show help" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and not __fish_seen_subcommand_from check show help" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and not __fish_seen_subcommand_from check show help" -f -a "check" -d 'Validate the config: exit 0, or 78 listing every problem'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and not __fish_seen_subcommand_from check show help" -f -a "show" -d 'Print the merged config with secrets redacted'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and not __fish_seen_subcommand_from check show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from check" -l set -d 'Override a config key by dotted path, as `run --set` does; repeatable' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from check" -l mcp-config -d 'MCP servers from a JSON file with an `mcpServers` object, as `run --mcp-config` reads them; repeatable' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from check" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from check" -l json -d 'Print the report as JSON'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from show" -l set -d 'Override a config key by dotted path, as `run --set` does; repeatable' -r
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from show" -l mcp-config -d 'MCP servers from a JSON file with an `mcpServers` object, as `run --mcp-config` reads them; repeatable' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from show" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from show" -l json -d 'Print JSON instead of YAML'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "check" -d 'Validate the config: exit 0, or 78 listing every problem'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "show" -d 'Print the merged config with secrets redacted'
complete -c deerflow -n "__fish_deerflow_using_subcommand config; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand schema" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand schema" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand completions" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand completions" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand man" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand man" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -f -a "list" -d 'Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and not __fish_seen_subcommand_from list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from list" -l mcp-config -d 'MCP servers from a JSON file with an `mcpServers` object; repeatable' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from list" -s c -l config -d 'Config file (else $DEERFLOW_CONFIG, ./deerflow.yaml, $XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)' -r -F
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from list" -l json -d 'Print JSON (with each tool\'s input schema) instead of text'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "list" -d 'Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise'
complete -c deerflow -n "__fish_deerflow_using_subcommand mcp; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "run" -d 'Run one task to completion (the main job)'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "agents" -d 'List the sub-agent types the config yields, with effective settings'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "config" -d 'Validate the config, or print the merged config (secrets redacted)'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "schema" -d 'Print the JSON Schema of the event stream'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "completions" -d 'Print a shell completion script'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "man" -d 'Print the man page (roff)'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "mcp" -d 'MCP tool servers: start each configured server, list its tools, stop it'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and not __fish_seen_subcommand_from run agents config schema completions man mcp help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "check" -d 'Validate the config: exit 0, or 78 listing every problem'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and __fish_seen_subcommand_from config" -f -a "show" -d 'Print the merged config with secrets redacted'
complete -c deerflow -n "__fish_deerflow_using_subcommand help; and __fish_seen_subcommand_from mcp" -f -a "list" -d 'Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise'
