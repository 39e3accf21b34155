#!/usr/bin/env bash
# Regenerates link/hot-code.txt, the functions short runs execute, which build.rs has the
# linker put first in optimised builds (issue 21: a 2-turn run's RSS was 13 MiB, mostly code
# pages mapped around the few it runs). Builds the release profile exactly as `cargo install`
# does, with a link map (names for the stripped binary's addresses), traces representative
# runs with valgrind's callgrind and writes the list. Run it after a change to Cargo.lock, a
# manifest or the compiler (tests/suite/hot_code.rs fails until then), and after moving code
# a short run executes. Needs valgrind, readelf and python3. Usage: benches/hot-code.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
for tool in valgrind readelf python3; do
  command -v "$tool" >/dev/null || { echo "benches/hot-code.sh needs $tool"; exit 1; }
done
TMP="$(mktemp -d)"
trap 'kill "${MOCK:-}" 2>/dev/null || true; rm -rf "$TMP"' EXIT

# DEERFLOW_NO_HOT_CODE: the names are the same either way, and a stale list must not shape
# the layout being measured. The build script reruns, so the next build links with the list.
DEERFLOW_LINK_MAP="$TMP/deerflow.map" DEERFLOW_NO_HOT_CODE=1 cargo build --release --locked --quiet
BIN="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/deerflow"
cp "$BIN" "$TMP/deerflow"
BIN="$TMP/deerflow"

python3 benches/cassettes.py "$TMP"
mkdir "$TMP/ws"
python3 benches/mock_openai.py "$TMP/port" 2 1 &
MOCK=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done

n=0
trace() { # ARGS…: one callgrind trace of the binary run with ARGS, in the order given
  n=$((n + 1))
  valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
    --callgrind-out-file="$TMP/trace.$(printf %02d "$n")" "$BIN" "$@" >/dev/null 2>&1 </dev/null || true
}
# The run the RSS target is about first: its functions lead the list.
trace run --json -m "replay:$TMP/two_turns.json" -C "$TMP" go
trace run -m "replay:$TMP/two_turns.json" -C "$TMP" go
trace run --json --max-concurrent 4 -m "replay:$TMP/fan12.json" -C "$TMP" go
OPENAI_BASE_URL="http://127.0.0.1:$(cat "$TMP/port")/v1" OPENAI_API_KEY=sk-none \
  trace run --json --max-tasks 2 -m openai:m -C "$TMP/ws" go
printf 'a\nb\n' > "$TMP/items.txt"
echo '{"version": 1, "default_task": [{"text": "ok"}]}' > "$TMP/each.json"
trace run --json -m "replay:$TMP/each.json" -C "$TMP" --each "$TMP/items.txt" 'Do {{item}}'
trace --version
trace --help

python3 benches/hot_code.py "$TMP/deerflow.map" "$BIN" "$(rustc -vV | head -1)" link/hot-code.txt "$TMP"/trace.*
echo "link/hot-code.txt: $(grep -vc '^#' link/hot-code.txt) functions"
