#compdef deerflow

autoload -U is-at-least

_deerflow() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_deerflow_commands" \
"*::: :->deerflow" \
&& ret=0
    case $state in
    (deerflow)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-command-$line[1]:"
        case $line[1] in
            (run)
_arguments "${_arguments_options[@]}" : \
'(--prompt-file)-p+[The task (instead of the positional PROMPT)]:TEXT:_default' \
'(--prompt-file)--prompt=[The task (instead of the positional PROMPT)]:TEXT:_default' \
'--prompt-file=[Read the task from a file]:PATH:_files' \
'-m+[A models\[\].name from the config, or PROVIDER\:MODEL (openai\:gpt-4o-mini, anthropic\:claude-sonnet-4-5, replay\:PATH)]:NAME:_default' \
'--model=[A models\[\].name from the config, or PROVIDER\:MODEL (openai\:gpt-4o-mini, anthropic\:claude-sonnet-4-5, replay\:PATH)]:NAME:_default' \
'--max-concurrent=[Sub-agents running at once (1..=64) \[default\: 3\]]:N:_default' \
'--max-tasks=[Sub-agents started in one run (1..=100000) \[default\: 16\]]:N:_default' \
'--max-turns=[Model calls of the lead agent]:N:_default' \
'--timeout=[Deadline for the whole run (90s, 30m, 1h)]:DURATION:_default' \
'--subagent-timeout=[Overrides every sub-agent'\''s timeout (90s, 30m, 1h)]:DURATION:_default' \
'--max-tokens=[Token budget for the whole run (lead + sub-agents)]:N:_default' \
'-C+[The directory tools work in \[default\: current dir\]]:DIR:_files' \
'--workspace=[The directory tools work in \[default\: current dir\]]:DIR:_files' \
'--skills=[Skills directory \[default\: skills.path\]]:DIR:_files' \
'-o+[Write the final answer to FILE (only when the run completed)]:FILE:_files' \
'--output-last-message=[Write the final answer to FILE (only when the run completed)]:FILE:_files' \
'--output-schema=[A JSON Schema (draft 2020-12) the final answer must satisfy; an answer that does not is sent back to the model up to 2 times]:FILE:_files' \
'--record=[Write every model response of this run to a replay cassette]:FILE:_files' \
'*--set=[Override a config key by dotted path (subagents.timeout_seconds=60, models\[0\].model=x); an empty VALUE or null restores the default; repeatable]:KEY=VALUE:_default' \
'*--mcp-config=[MCP servers from a JSON file with an \`mcpServers\` object (Claude Code'\''s .mcp.json); repeatable, later files win per server name]:FILE:_files' \
'--color=[Colour on stderr (NO_COLOR is honoured)]:WHEN:(auto always never)' \
'--thinking=[Extended thinking / reasoning for models with supports_thinking \[default\: the model'\''s default, on\]]:on|off:(on off)' \
'*--image=[Attach an image (PNG, JPEG, GIF or WebP) to the task; the model needs supports_vision\: true; repeatable]:FILE:_files' \
'--each=[Run the prompt once per item of FILE (JSONL, or one item per line; - = stdin), as a template\: {{item}}, {{index}}, {{FIELD}}, {{a.b}}]:FILE:_files' \
'--agent=[With --each\: the sub-agent type each item runs as \[default\: general-purpose\]]:TYPE:_default' \
'--results=[With --each\: one JSON line per item as it finishes, rewritten in input order at the end]:FILE:_files' \
'--shard=[With --each\: run only the items whose 0-based index mod N is K-1]:K/N:_default' \
'--state=[Keep a ledger in DIR so that the same command, run again, resumes instead of redoing finished work]:DIR:_files' \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--json[NDJSON events on stdout; nothing else goes to stdout]' \
'--allow-bash[Allow the bash tool and the bash sub-agent on the host]' \
'--no-subagents[The lead agent gets no task tool]' \
'--web[Offer web_fetch and web_search (the config'\''s tools\: entries still apply and win)]' \
'-q[No progress display on stderr]' \
'--quiet[No progress display on stderr]' \
'-h[Print help]' \
'--help[Print help]' \
'::prompt_arg -- The task; `-` reads stdin to its end:_default' \
&& ret=0
;;
(agents)
_arguments "${_arguments_options[@]}" : \
'*--set=[Override a config key by dotted path, as \`run --set\` does; repeatable]:KEY=VALUE:_default' \
'*--mcp-config=[MCP servers from a JSON file with an \`mcpServers\` object, as \`run --mcp-config\` reads them; repeatable]:FILE:_files' \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--json[Print JSON instead of a table]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(config)
_arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help]' \
'--help[Print help]' \
":: :_deerflow__subcmd__config_commands" \
"*::: :->config" \
&& ret=0

    case $state in
    (config)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-config-command-$line[1]:"
        case $line[1] in
            (check)
_arguments "${_arguments_options[@]}" : \
'*--set=[Override a config key by dotted path, as \`run --set\` does; repeatable]:KEY=VALUE:_default' \
'*--mcp-config=[MCP servers from a JSON file with an \`mcpServers\` object, as \`run --mcp-config\` reads them; repeatable]:FILE:_files' \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--json[Print the report as JSON]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
'*--set=[Override a config key by dotted path, as \`run --set\` does; repeatable]:KEY=VALUE:_default' \
'*--mcp-config=[MCP servers from a JSON file with an \`mcpServers\` object, as \`run --mcp-config\` reads them; repeatable]:FILE:_files' \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--json[Print JSON instead of YAML]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_deerflow__subcmd__config__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-config-help-command-$line[1]:"
        case $line[1] in
            (check)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(schema)
_arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help]' \
'--help[Print help]' \
':shell -- bash, zsh, fish, elvish or powershell:(bash elvish fish powershell zsh)' \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(mcp)
_arguments "${_arguments_options[@]}" : \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'-h[Print help]' \
'--help[Print help]' \
":: :_deerflow__subcmd__mcp_commands" \
"*::: :->mcp" \
&& ret=0

    case $state in
    (mcp)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-mcp-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
'*--mcp-config=[MCP servers from a JSON file with an \`mcpServers\` object; repeatable]:FILE:_files' \
'-c+[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--config=[Config file (else \$DEERFLOW_CONFIG, ./deerflow.yaml, \$XDG_CONFIG_HOME/deerflow/config.yaml, ~/.config/deerflow/config.yaml)]:PATH:_files' \
'--json[Print JSON (with each tool'\''s input schema) instead of text]' \
'-h[Print help]' \
'--help[Print help]' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_deerflow__subcmd__mcp__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-mcp-help-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_deerflow__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-help-command-$line[1]:"
        case $line[1] in
            (run)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(agents)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(config)
_arguments "${_arguments_options[@]}" : \
":: :_deerflow__subcmd__help__subcmd__config_commands" \
"*::: :->config" \
&& ret=0

    case $state in
    (config)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-help-config-command-$line[1]:"
        case $line[1] in
            (check)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(schema)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(mcp)
_arguments "${_arguments_options[@]}" : \
":: :_deerflow__subcmd__help__subcmd__mcp_commands" \
"*::: :->mcp" \
&& ret=0

    case $state in
    (mcp)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:deerflow-help-mcp-command-$line[1]:"
        case $line[1] in
            (list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_deerflow_commands] )) ||
_deerflow_commands() {
    local commands; commands=(
'run:Run one task to completion (the main job)' \
'agents:List the sub-agent types the config yields, with effective settings' \
'config:Validate the config, or print the merged config (secrets redacted)' \
'schema:Print the JSON Schema of the event stream' \
'completions:Print a shell completion script' \
'man:Print the man page (roff)' \
'mcp:MCP tool servers\: start each configured server, list its tools, stop it' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__agents_commands] )) ||
_deerflow__subcmd__agents_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow agents commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__completions_commands] )) ||
_deerflow__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow completions commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config_commands] )) ||
_deerflow__subcmd__config_commands() {
    local commands; commands=(
'check:Validate the config\: exit 0, or 78 listing every problem' \
'show:Print the merged config with secrets redacted' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow config commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__check_commands] )) ||
_deerflow__subcmd__config__subcmd__check_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow config check commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__help_commands] )) ||
_deerflow__subcmd__config__subcmd__help_commands() {
    local commands; commands=(
'check:Validate the config\: exit 0, or 78 listing every problem' \
'show:Print the merged config with secrets redacted' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow config help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__help__subcmd__check_commands] )) ||
_deerflow__subcmd__config__subcmd__help__subcmd__check_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow config help check commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__help__subcmd__help_commands] )) ||
_deerflow__subcmd__config__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow config help help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__help__subcmd__show_commands] )) ||
_deerflow__subcmd__config__subcmd__help__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow config help show commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__config__subcmd__show_commands] )) ||
_deerflow__subcmd__config__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow config show commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help_commands] )) ||
_deerflow__subcmd__help_commands() {
    local commands; commands=(
'run:Run one task to completion (the main job)' \
'agents:List the sub-agent types the config yields, with effective settings' \
'config:Validate the config, or print the merged config (secrets redacted)' \
'schema:Print the JSON Schema of the event stream' \
'completions:Print a shell completion script' \
'man:Print the man page (roff)' \
'mcp:MCP tool servers\: start each configured server, list its tools, stop it' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__agents_commands] )) ||
_deerflow__subcmd__help__subcmd__agents_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help agents commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__completions_commands] )) ||
_deerflow__subcmd__help__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help completions commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__config_commands] )) ||
_deerflow__subcmd__help__subcmd__config_commands() {
    local commands; commands=(
'check:Validate the config\: exit 0, or 78 listing every problem' \
'show:Print the merged config with secrets redacted' \
    )
    _describe -t commands 'deerflow help config commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__config__subcmd__check_commands] )) ||
_deerflow__subcmd__help__subcmd__config__subcmd__check_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help config check commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__config__subcmd__show_commands] )) ||
_deerflow__subcmd__help__subcmd__config__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help config show commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__help_commands] )) ||
_deerflow__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__man_commands] )) ||
_deerflow__subcmd__help__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help man commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__mcp_commands] )) ||
_deerflow__subcmd__help__subcmd__mcp_commands() {
    local commands; commands=(
'list:Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise' \
    )
    _describe -t commands 'deerflow help mcp commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__mcp__subcmd__list_commands] )) ||
_deerflow__subcmd__help__subcmd__mcp__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help mcp list commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__run_commands] )) ||
_deerflow__subcmd__help__subcmd__run_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help run commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__help__subcmd__schema_commands] )) ||
_deerflow__subcmd__help__subcmd__schema_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow help schema commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__man_commands] )) ||
_deerflow__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow man commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__mcp_commands] )) ||
_deerflow__subcmd__mcp_commands() {
    local commands; commands=(
'list:Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow mcp commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__mcp__subcmd__help_commands] )) ||
_deerflow__subcmd__mcp__subcmd__help_commands() {
    local commands; commands=(
'list:Start every enabled MCP server, list its tools (or why it failed), stop them; exit 0 when all started, 1 otherwise' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'deerflow mcp help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__mcp__subcmd__help__subcmd__help_commands] )) ||
_deerflow__subcmd__mcp__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow mcp help help commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__mcp__subcmd__help__subcmd__list_commands] )) ||
_deerflow__subcmd__mcp__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow mcp help list commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__mcp__subcmd__list_commands] )) ||
_deerflow__subcmd__mcp__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow mcp list commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__run_commands] )) ||
_deerflow__subcmd__run_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow run commands' commands "$@"
}
(( $+functions[_deerflow__subcmd__schema_commands] )) ||
_deerflow__subcmd__schema_commands() {
    local commands; commands=()
    _describe -t commands 'deerflow schema commands' commands "$@"
}

if [ "$funcstack[1]" = "_deerflow" ]; then
    _deerflow "$@"
else
    compdef _deerflow deerflow
fi
