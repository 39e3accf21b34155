#!/usr/bin/env bash
# Regenerates link/hot-code.txt, the functions short runs execute, which build.rs has the
# linker put first in optimised builds (issue 21: a 2-turn run's RSS was 13 MiB, mostly code
# pages mapped around the few it runs). Builds the release profile exactly as `cargo install`
# does, and the benchmark profile, each with a link map (names for the stripped binary's
# addresses), traces representative runs with valgrind's callgrind and writes the list. Run
# it after a change to Cargo.lock, a manifest or the compiler (tests/suite/hot_code.rs fails
# until then), and after adding code a short run executes. Needs valgrind, readelf and python3.
# Usage: benches/hot-code.sh            regenerate the list
#        benches/hot-code.sh --check    how much RSS a 2-turn run of today's release build
#                                       loses to functions the list misses (exit 1 over 256 KiB)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
for tool in valgrind readelf python3; do
  command -v "$tool" >/dev/null || { echo "benches/hot-code.sh needs $tool"; exit 1; }
done
TMP="$(mktemp -d)"
trap 'kill "${MOCK:-}" 2>/dev/null || true; rm -rf "$TMP"' EXIT

python3 benches/cassettes.py "$TMP"
mkdir "$TMP/ws"
printf 'a\nb\n' > "$TMP/items.txt"
echo '{"version": 1, "default_task": [{"text": "ok"}]}' > "$TMP/each.json"
python3 benches/mock_openai.py "$TMP/port" 2 1 &
MOCK=$!
for _ in $(seq 50); do [ -s "$TMP/port" ] && break; sleep 0.1; done
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

trace() { # BIN NAME ARGS…: one callgrind trace of BIN run with ARGS
  local bin="$1" name="$2"; shift 2
  valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
    --callgrind-out-file="$TMP/$name" "$bin" "$@" >/dev/null 2>&1 </dev/null || true
}

if [ "${1:-}" = --check ]; then
  DEERFLOW_LINK_MAP="$TMP/check.map" cargo build --release --locked --quiet
  cp "$TARGET_DIR/release/deerflow" "$TMP/deerflow-check"
  trace "$TMP/deerflow-check" check run --json -m "replay:$TMP/two_turns.json" -C "$TMP" go
  python3 benches/hot_code.py coverage "$TMP/check.map" "$TMP/deerflow-check" link/hot-code.txt "$TMP/check"
  exit
fi

for profile in release benchmark; do
  # DEERFLOW_NO_HOT_CODE: the names are the same either way, and a stale list must not shape
  # the layout traced. The build script reruns, so the next build links with the new list.
  DEERFLOW_LINK_MAP="$TMP/$profile.map" DEERFLOW_NO_HOT_CODE=1 \
    cargo build --profile "$profile" --locked --quiet
  bin="$TMP/deerflow-$profile"
  cp "$TARGET_DIR/$profile/deerflow" "$bin"
  # The run the RSS target is about first: its functions lead the list.
  trace "$bin" "$profile.1" run --json -m "replay:$TMP/two_turns.json" -C "$TMP" go
  trace "$bin" "$profile.2" run -m "replay:$TMP/two_turns.json" -C "$TMP" go
  trace "$bin" "$profile.3" run --json --max-concurrent 4 -m "replay:$TMP/fan12.json" -C "$TMP" go
  OPENAI_BASE_URL="http://127.0.0.1:$(cat "$TMP/port")/v1" OPENAI_API_KEY=sk-none \
    trace "$bin" "$profile.4" run --json --max-tasks 2 -m openai:m -C "$TMP/ws" go
  trace "$bin" "$profile.5" run --json -m "replay:$TMP/each.json" -C "$TMP" --each "$TMP/items.txt" 'Do {{item}}'
  trace "$bin" "$profile.6" --version
  trace "$bin" "$profile.7" --help
  python3 benches/hot_code.py names "$TMP/$profile.map" "$bin" "$TMP/$profile".[0-9] > "$TMP/names.$profile"
done

# std's functions (precompiled, one name in both profiles) are listed once.
{ python3 benches/hot_code.py header "$(rustc -vV | head -1)"
  cat "$TMP/names.release" "$TMP/names.benchmark" | awk '!seen[$0]++'
} > link/hot-code.txt
echo "link/hot-code.txt: $(grep -vc '^#' link/hot-code.txt) functions"
