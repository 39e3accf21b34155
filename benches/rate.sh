#!/usr/bin/env bash
# The 429 controller at scale (issue 23, contract §15): a 2,000-item `--each` run at
# --max-concurrent 64 against a mock that allows LIMIT requests in flight (each answered
# after LATENCY_MS) and answers 429 above it. Throughput = items / wall time of the run,
# against the mock's limit of LIMIT / LATENCY requests per second; medians of RUNS runs.
# Usage: benches/rate.sh [RUNS] [LIMIT] [LATENCY_MS] [RETRY_AFTER]
#   (defaults 3, 8, 50, none; BIN=path/to/deerflow to skip the build).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}" LIMIT="${2:-8}" LATENCY="${3:-50}" RETRY_AFTER="${4:-}"
ITEMS="${ITEMS:-2000}"
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
if [ -z "${BIN:-}" ]; then
  cargo build --profile benchmark --quiet
  BIN="$PWD/target/benchmark/deerflow"
fi
TMP="$(mktemp -d)"
MOCK=""
trap '[ -n "$MOCK" ] && kill "$MOCK" 2>/dev/null; rm -rf "$TMP"' EXIT
seq 0 $((ITEMS - 1)) | sed 's/^/item /' > "$TMP/items.txt"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

rates=() rejected=() halvings=()
for _ in $(seq "$RUNS"); do
  rm -f "$TMP/port"
  python3 benches/mock_limited.py "$TMP/port" "$LIMIT" "$LATENCY" $RETRY_AFTER &
  MOCK=$!
  while [ ! -s "$TMP/port" ]; do sleep 0.05; done
  PORT=$(cat "$TMP/port")
  printf 'models:\n  - {name: m, use: openai, model: m, base_url: "http://127.0.0.1:%s/v1", api_key: sk-bench}\n' \
    "$PORT" > "$TMP/config.yaml"
  t0=$(date +%s%N)
  "$BIN" -c "$TMP/config.yaml" run --json -q --max-concurrent 64 -C "$TMP" \
    --each "$TMP/items.txt" 'Do {{item}}' > "$TMP/ev.ndjson" 2>"$TMP/err" || true
  t1=$(date +%s%N)
  tail -1 "$TMP/ev.ndjson" | grep -q "\"completed\":$ITEMS" \
    || { echo "not every item completed: $(tail -c 400 "$TMP/ev.ndjson") $(tail -3 "$TMP/err")"; exit 1; }
  stats=$(curl -s "http://127.0.0.1:$PORT/stats")
  kill "$MOCK"; wait "$MOCK" 2>/dev/null || true; MOCK=""
  rates+=("$(awk -v n="$ITEMS" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", n / ((b-a)/1e9)}')")
  rejected+=("${stats#* }")
  halvings+=("$(grep -c '"code":"rate_limited"' "$TMP/ev.ndjson" || true)")
done
limit=$(awk -v l="$LIMIT" -v ms="$LATENCY" 'BEGIN {printf "%.1f", l * 1000 / ms}')
rate=$(printf '%s\n' "${rates[@]}" | median)
echo "| mock limit | Retry-After | median items/s | of the limit | median 429s | median rate_limited |"
echo "|---|---|---|---|---|---|"
printf '| %s in flight × %s ms = %s/s | %s | %s | %s %% | %s | %s |\n' "$LIMIT" "$LATENCY" "$limit" \
  "${RETRY_AFTER:-none}" "$rate" "$(awk -v r="$rate" -v l="$limit" 'BEGIN {printf "%.0f", 100 * r / l}')" \
  "$(printf '%s\n' "${rejected[@]}" | median)" "$(printf '%s\n' "${halvings[@]}" | median)"
