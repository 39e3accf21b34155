#!/usr/bin/env bash
# `--each` at scale (issue 23, contract §15): 100,000 and 1,000,000 text items from a file
# with a replay model at --max-concurrent 64, with and without --results (in alternate runs).
# Medians of N runs of wall time and peak RSS (/usr/bin/time -v), and the final input-order
# rewrite of the results file (from the last item's terminal event to `run_completed`). With
# --state DIR (issue 23: ≤ 2 s, zero model calls): the 100,000-item run with its ledger, and
# resuming that completed run, checked to take every item from the ledger.
# Usage: benches/each.sh [RUNS]   (default 5; BIN=path/to/deerflow to skip the build).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
if [ -z "${BIN:-}" ]; then
  cargo build --profile benchmark --quiet
  BIN="$PWD/target/benchmark/deerflow"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }

# Item 5 answers 30 ms late, so the results come out of input order and get rewritten.
echo '{"version": 1, "tasks": {"item 5": [{"text": "late", "delay_ms": 30}]},
  "default_task": [{"text": "ok", "usage": {"input_tokens": 20, "output_tokens": 1}}]}' > "$TMP/c.json"
seq 0 99999 | sed 's/^/item /' > "$TMP/100k.txt"
seq 0 999999 | sed 's/^/item /' > "$TMP/1m.txt"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

run_each() { # ITEMS [more flags…]
  local items="$1"; shift
  "$BIN" run --json --max-concurrent 64 -m "replay:$TMP/c.json" -C "$TMP" --each "$TMP/$items" "$@" 'Do {{item}}'
}

# Sanity: every item of the 100k file completes, and the results file ends in input order.
run_each 100k.txt --results "$TMP/r.jsonl" > "$TMP/ev.ndjson"
tail -1 "$TMP/ev.ndjson" | grep -q '"tasks":{"total":100000,"completed":100000' \
  || { echo "the 100k run did not complete every item: $(tail -c 400 "$TMP/ev.ndjson")"; exit 1; }
python3 - "$TMP/r.jsonl" <<'PY'
import json, sys
idx = [json.loads(l)["index"] for l in open(sys.argv[1])]
assert idx == list(range(100000)), "results are not in input order"
PY

# sample KEY ITEMS [flags…]: one run's wall seconds and peak RSS (MiB), appended to
# $TMP/KEY.w and $TMP/KEY.r.
sample() {
  local key="$1" items="$2"; shift 2
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -v -o "$TMP/t" "$BIN" run --json --max-concurrent 64 -m "replay:$TMP/c.json" \
    -C "$TMP" --each "$TMP/$items" "$@" 'Do {{item}}' >/dev/null 2>"$TMP/err" || true
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", (b-a)/1e9}' >> "$TMP/$key.w"
  awk -F': ' '/Maximum resident set size/ {printf "%.1f\n", $2/1024}' "$TMP/t" >> "$TMP/$key.r"
}

row() { # LABEL KEY
  printf '| %s | %s s | %s MiB |\n' "$1" "$(median < "$TMP/$2.w")" "$(median < "$TMP/$2.r")"
}

# rewrite EVENTS: seconds from the last terminal task event to run_completed (the results
# file's input-order rewrite happens there).
rewrite() {
  python3 - "$1" <<'PY'
import json, sys, datetime
ts = lambda e: datetime.datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()
last = done = None
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["type"] in ("task_completed", "task_failed", "task_timed_out", "task_cancelled"):
        last = ts(e)
    elif e["type"] == "run_completed":
        done = ts(e)
print(f"{done - last:.3f}")
PY
}

# With and without --results in alternate runs, so the machine's drift hits both alike.
for _ in $(seq "$RUNS"); do
  sample plain 100k.txt
  sample results 100k.txt --results "$TMP/r.jsonl"
done
for _ in $(seq "$RUNS"); do sample million 1m.txt; done
echo "| --each, replay, --max-concurrent 64 | median wall | median peak RSS |"
echo "|---|---|---|"
row "100,000 items" plain
row "100,000 items, --results FILE" results
row "1,000,000 items" million
echo
echo "--results / without, median of the $RUNS pairs: $(paste "$TMP/plain.w" "$TMP/results.w" \
  | awk '{printf "%.3f\n", $2 / $1}' | median)"

spans=()
for _ in $(seq "$RUNS"); do
  run_each 100k.txt --results "$TMP/r.jsonl" > "$TMP/ev.ndjson"
  spans+=("$(rewrite "$TMP/ev.ndjson")")
done
echo
echo "| 100,000 items, --results | median last item → run_completed (the input-order rewrite) |"
echo "|---|---|"
echo "| --max-concurrent 64 | $(printf '%s\n' "${spans[@]}" | median) s |"

# --state: the run keeps a ledger (every item's response and end, fsynced by group
# commit); resuming the completed run takes every item from it, with no model call.
for _ in $(seq "$RUNS"); do
  # Each measured run starts from an empty ledger (a full one would resume).
  rm -rf "$TMP/st-measure"
  sample state 100k.txt --state "$TMP/st-measure"
done
rm -rf "$TMP/st"
run_each 100k.txt --state "$TMP/st" > /dev/null
resumes=()
for _ in $(seq "$RUNS"); do
  t0=$(date +%s%N)
  run_each 100k.txt --state "$TMP/st" > "$TMP/ev.ndjson"
  t1=$(date +%s%N)
  tail -1 "$TMP/ev.ndjson" | grep -q '"tasks":{"total":100000,"completed":100000,.*"resumed":100000}' \
    || { echo "the resumed run did not take every item from the ledger: $(tail -c 400 "$TMP/ev.ndjson")"; exit 1; }
  if grep -q '"type":"usage"' "$TMP/ev.ndjson"; then echo "the resumed run called the model"; exit 1; fi
  resumes+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b-a)/1e9}')")
done
echo
echo "| 100,000 items, --state DIR | median wall | median peak RSS |"
echo "|---|---|---|"
row "the run, keeping its ledger" state
echo "| resuming the completed run (every item from the ledger, no model call) | $(printf '%s\n' "${resumes[@]}" | median) s | |"
