#!/usr/bin/env bash
# The benchmark harness. Builds deerflow with the LTO `benchmark` profile and measures
# offline replay runs (no network): medians of N runs of wall time and peak RSS from
# /usr/bin/time -v. Usage: benches/run.sh [RUNS]   (default 5). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# BIN=path/to/deerflow benches/run.sh measures that binary instead of building one.
if [ -z "${BIN:-}" ]; then
  cargo build --profile benchmark --quiet
  BIN="$PWD/target/benchmark/deerflow"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }

# Cassettes: a 2-turn lead run; N one-turn tasks with a latency; many instant tasks.
python3 benches/cassettes.py "$TMP"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# measure LABEL CMD... : median wall seconds and peak RSS (MiB) over RUNS.
measure() {
  local label="$1"; shift
  local walls=() rss=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -v -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || true
    t1=$(date +%s%N)
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b-a)/1e9}')")
    rss+=("$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2/1024}' "$TMP/t")")
  done
  printf '| %s | %s s | %s MiB |\n' "$label" "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${rss[@]}" | median)"
}

# span FILE: seconds from the first task_started to the last terminal task event.
span() {
  python3 - "$1" <<'PY'
import json, sys, datetime
ev = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ts = lambda e: datetime.datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()
start = min(ts(e) for e in ev if e["type"] == "task_started")
end = max(ts(e) for e in ev if e["type"] in ("task_completed", "task_failed", "task_timed_out", "task_cancelled"))
print(f"{end - start:.3f}")
PY
}

echo "| benchmark | median wall | median peak RSS |"
echo "|---|---|---|"
# Sanity: the fan-out really runs every task (a guard stopping it would make it look fast).
done_tasks=$("$BIN" run --json --max-tasks 1000 --max-concurrent 64 -m "replay:$TMP/fan1000.json" -C "$TMP" go | grep -c '"type":"task_completed"')
[ "$done_tasks" = 1000 ] || { echo "fan-out completed $done_tasks of 1000 tasks"; exit 1; }

measure "deerflow --version" "$BIN" --version
measure "2-turn replay run (--json)" "$BIN" run --json -m "replay:$TMP/two_turns.json" -C "$TMP" "go"
measure "200 replay tasks, --max-concurrent 64" "$BIN" run --json --max-tasks 1000 --max-concurrent 64 -m "replay:$TMP/fan200.json" -C "$TMP" "go"
measure "1000 replay tasks, --max-concurrent 64" "$BIN" run --json --max-tasks 1000 --max-concurrent 64 -m "replay:$TMP/fan1000.json" -C "$TMP" "go"
measure "1000 replay tasks, --max-concurrent 8" "$BIN" run --json --max-tasks 1000 --max-concurrent 8 -m "replay:$TMP/fan1000.json" -C "$TMP" "go"

echo
echo "| 12 one-turn tasks of 1 s latency | median span (first task_started → last terminal) | target |"
echo "|---|---|---|"
for c in 3 12; do
  spans=()
  for _ in $(seq "$RUNS"); do
    "$BIN" run --json --max-concurrent "$c" -m "replay:$TMP/fan12.json" -C "$TMP" "go" > "$TMP/ev.ndjson"
    spans+=("$(span "$TMP/ev.ndjson")")
  done
  target=$([ "$c" = 3 ] && echo "≤ 4.12 s" || echo "≤ 1.03 s")
  echo "| --max-concurrent $c | $(printf '%s\n' "${spans[@]}" | median) s | $target |"
done

# A long agent: 200 lead turns, each reading a different 20 KB file (read_file results stay
# inline), with summarization on (trigger at 50,000 estimated tokens, keep 10 messages) and
# off. RSS is sampled from /proc while the run goes (each response takes 15 ms): with
# compaction it stays flat, without it grows with the history.
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
for i in range(200):
    with open(f"{d}/f{i}.txt", "w") as f:
        for j in range(200):
            f.write(f"{i:03d}-{j:03d} " + "x" * 91 + "\n")
lead = [{"tool_calls": [{"name": "read_file", "arguments": {"path": f"f{i}.txt"}}], "delay_ms": 15}
        for i in range(200)] + [{"text": "done"}]
json.dump({"version": 1, "lead": lead}, open(f"{d}/long200.json", "w"))
open(f"{d}/ctx_on.yaml", "w").write(
    "summarization: {trigger: {type: tokens, value: 50000}, keep: {type: messages, value: 10}}\n"
    "loop_detection: {enabled: false}\n")
open(f"{d}/ctx_off.yaml", "w").write("summarization: {enabled: false}\nloop_detection: {enabled: false}\n")
PY
echo
echo "| 200 turns × 20 KB results | RSS at 25 % / 50 % / 75 % / end of the run | context_compacted |"
echo "|---|---|---|"
for mode in on off; do
  "$BIN" -c "$TMP/ctx_$mode.yaml" run --json --max-turns 1000 -m "replay:$TMP/long200.json" -C "$TMP" go > "$TMP/long.ndjson" 2>/dev/null &
  pid=$!
  : > "$TMP/rss"
  while kill -0 "$pid" 2>/dev/null; do
    awk '/VmRSS/ {printf "%.1f\n", $2/1024}' "/proc/$pid/status" 2>/dev/null >> "$TMP/rss" || true
    sleep 0.05
  done
  wait "$pid" || true
  curve=$(awk '{a[NR]=$1} END {printf "%s / %s / %s / %s MiB", a[int(NR/4)+1], a[int(NR/2)+1], a[int(3*NR/4)+1], a[NR]}' "$TMP/rss")
  echo "| summarization $mode | $curve | $(grep -c '"type":"context_compacted"' "$TMP/long.ndjson" || true) |"
done

# Large fan-outs (issue 13): wall, peak RSS and the RSS slope per task from 10k to 100k.
echo
echo "| replay tasks, --max-concurrent 64 | median wall | median peak RSS |"
echo "|---|---|---|"
for n in 10000 50000 100000; do
  measure "$n tasks" "$BIN" run --json --max-tasks "$n" --max-concurrent 64 -m "replay:$TMP/fan$n.json" -C "$TMP" go | tee "$TMP/row$n"
done
slope=$(awk -F'|' '{gsub(/[^0-9.]/, "", $4); r[NR]=$4} END {printf "%.2f", (r[3]-r[1])*1024/90000}' "$TMP/row10000" "$TMP/row50000" "$TMP/row100000")
echo
echo "RSS slope 10k → 100k tasks: $slope KiB per task"

# Event throughput to a file: lines of the 10k fan-out over its wall time, every line parsed.
echo
echo "| events to a file (10k fan-out, --json > file) | median events/s | lines |"
echo "|---|---|---|"
rates=()
for _ in $(seq "$RUNS"); do
  t0=$(date +%s%N)
  "$BIN" run --json --max-tasks 10000 --max-concurrent 64 -m "replay:$TMP/fan10000.json" -C "$TMP" go > "$TMP/ev10k.ndjson"
  t1=$(date +%s%N)
  lines=$(wc -l < "$TMP/ev10k.ndjson")
  rates+=("$(awk -v n="$lines" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n/((b-a)/1e9)}')")
done
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$TMP/ev10k.ndjson" || { echo "invalid event line"; exit 1; }
echo "| 10k fan-out | $(printf '%s\n' "${rates[@]}" | median) | $lines |"

# Harness CPU per model call (issue 13): 64 sub-agents at once, each making 20 tool turns
# against a zero-latency OpenAI-compatible mock over real HTTP (benches/mock_openai.py).
# deerflow's own user+sys CPU (from /usr/bin/time) over the calls the mock served. The
# sub-agents list a workspace of their own (as benches/cpu_per_call.sh does): listing the
# cases' 200 files above would measure `ls` more than the harness.
mkdir "$TMP/cpu_ws"
python3 benches/mock_openai.py "$TMP/port" 64 20 &
MOCK=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
printf 'loop_detection: {enabled: false}\n' > "$TMP/cpu.yaml"
cpus=()
for _ in $(seq "$RUNS"); do
  before=$(curl -s "http://127.0.0.1:$(cat "$TMP/port")/calls")
  OPENAI_BASE_URL="http://127.0.0.1:$(cat "$TMP/port")/v1" /usr/bin/time -f '%U %S' -o "$TMP/cpu" \
    "$BIN" -c "$TMP/cpu.yaml" run --json --max-tasks 64 --max-concurrent 64 -m openai:m -C "$TMP/cpu_ws" go > "$TMP/cpu.ndjson"
  after=$(curl -s "http://127.0.0.1:$(cat "$TMP/port")/calls")
  grep -q '"status":"completed"' "$TMP/cpu.ndjson" || { echo "the CPU run did not complete"; kill "$MOCK"; exit 1; }
  cpus+=("$(awk -v n="$((after - before))" '{printf "%.3f", ($1 + $2) * 1000 / n}' "$TMP/cpu")")
done
kill "$MOCK"
echo
echo "| 64 sub-agents × 20 tool turns, zero-latency HTTP mock | median CPU per model call | target |"
echo "|---|---|---|"
echo "| user+sys / calls | $(printf '%s\n' "${cpus[@]}" | median) ms | ≤ 0.2 ms |"

# grep/glob/ls on a generated tree: TREE_FILES files of ~4 KB (default 100,000, ~400 MB) in
# directories of 1000, one line of which holds the needle. grep and glob are compared with
# ripgrep where it is installed (`rg -n`, and `rg --files -g` for glob; skipped with a notice
# where it is not); ls (the root and its directories, two levels: every file of this tree,
# sorted per directory, cut to ls_output_max_chars) with `find -maxdepth 2`, which lists the
# same entries unsorted.
TREE_FILES="${TREE_FILES:-100000}"
python3 - "$TMP/tree" "$TREE_FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
line = "the quick brown fox jumps over the lazy dog while the harness keeps count\n"
body = line * 55
for i in range(n):
    d = f"{root}/d{i // 1000:03d}"
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i}_{i % 100}.txt", "w") as f:
        f.write(body)
        if i == n // 2:
            f.write("here is the needle_4d3f9a\n")
PY
echo
echo "| search on $TREE_FILES files | deerflow median wall | peer | peer median wall | ratio |"
echo "|---|---|---|---|---|"
got=$("$BIN" run --json -m "replay:$TMP/grep.json" -C "$TMP/tree" go | grep -c 'needle_4d3f9a' || true)
[ "$got" -ge 1 ] || { echo "grep did not find the needle"; exit 1; }
wall() { measure x "$@" | awk -F'|' '{gsub(/[^0-9.]/, "", $3); print $3}'; }
for tool in grep glob ls; do
  ours=$(wall "$BIN" run --json -m "replay:$TMP/$tool.json" -C "$TMP/tree" go)
  case $tool in
    grep) peer=(rg -n needle_4d3f9a .); peer_label="rg -n needle_4d3f9a ." ;;
    glob) peer=(rg --files -g '*_77.txt' .); peer_label="rg --files -g '*_77.txt' ." ;;
    ls) peer=(find . -maxdepth 2); peer_label="find . -maxdepth 2" ;;
  esac
  if command -v "${peer[0]}" >/dev/null; then
    theirs=$(cd "$TMP/tree" && wall "${peer[@]}")
    echo "| $tool | $ours s | \`$peer_label\` | $theirs s | $(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f×", a/b}') |"
  else
    echo "| $tool | $ours s | (${peer[0]} not installed: apt-get install ripgrep) | | |"
  fi
done
