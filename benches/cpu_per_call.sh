#!/usr/bin/env bash
# The "CPU per model call" case of benches/run.sh on its own, for before/after work: runs
# each given deerflow binary in turn (interleaved, RUNS rounds) against one zero-latency
# mock (benches/mock_openai.py, 64 sub-agents × 20 `ls` turns) and prints each binary's
# median user+sys per call the mock served. Usage: benches/cpu_per_call.sh BIN... (RUNS=7;
# WS=DIR lists DIR instead of an empty workspace)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-7}"
TMP="$(mktemp -d)"
python3 benches/mock_openai.py "$TMP/port" 64 20 &
MOCK=$!
trap 'kill "$MOCK"; rm -rf "$TMP"' EXIT
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
printf 'loop_detection: {enabled: false}\n' > "$TMP/cpu.yaml"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
URL="http://127.0.0.1:$(cat "$TMP/port")"
for _ in $(seq "$RUNS"); do
  i=0
  for bin in "$@"; do
    before=$(curl -s "$URL/calls")
    # user+sys from wait4 in microseconds (/usr/bin/time prints hundredths of a second:
    # steps of 0.0074 ms per call here).
    OPENAI_BASE_URL="$URL/v1" python3 -c '
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.execv(sys.argv[3], sys.argv[3:])
_, status, ru = os.wait4(pid, 0)
open(sys.argv[1], "w").write(f"{ru.ru_utime} {ru.ru_stime}\n")
' "$TMP/cpu" "$TMP/out.ndjson" "$bin" -c "$TMP/cpu.yaml" run --json --max-tasks 64 --max-concurrent 64 -m openai:m -C "${WS:-$TMP}" go
    after=$(curl -s "$URL/calls")
    grep -q '"status":"completed"' "$TMP/out.ndjson" || { echo "$bin: the run did not complete"; exit 1; }
    awk -v n="$((after - before))" '{printf "%.4f\n", ($1 + $2) * 1000 / n}' "$TMP/cpu" >> "$TMP/r$i"
    i=$((i + 1))
  done
done
i=0
for bin in "$@"; do
  printf '%s: median %s ms per call (runs: %s)\n' "$bin" "$(median < "$TMP/r$i")" "$(tr '\n' ' ' < "$TMP/r$i")"
  i=$((i + 1))
done
