#!/usr/bin/env bash
# Before/after on a shared, noisy machine: runs two deerflow binaries on the same replay
# cases, alternating A and B run by run so both see the same load, and prints the median
# wall time and peak RSS of each and their ratio. Usage: benches/compare.sh OLD NEW [RUNS]
# (default 9). Build each with `cargo build --profile benchmark`.
set -euo pipefail
cd "$(dirname "$0")/.."
A="$1"; B="$2"; RUNS="${3:-9}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }
python3 benches/cassettes.py "$TMP"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# one BIN ARGS...: "wall_seconds rss_mib" of one run.
one() {
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -v -o "$TMP/t" "$@" >/dev/null 2>"$TMP/err" || true
  t1=$(date +%s%N)
  printf '%s %s\n' "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b-a)/1e9}')" \
    "$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2/1024}' "$TMP/t")"
}

echo "| case | A wall | B wall | B/A | A RSS | B RSS |"
echo "|---|---|---|---|---|---|"
compare() {
  local label="$1"; shift
  : > "$TMP/a"; : > "$TMP/b"
  for _ in $(seq "$RUNS"); do
    one "$A" "$@" >> "$TMP/a"
    one "$B" "$@" >> "$TMP/b"
  done
  local aw bw ar br
  aw=$(cut -d' ' -f1 "$TMP/a" | median); bw=$(cut -d' ' -f1 "$TMP/b" | median)
  ar=$(cut -d' ' -f2 "$TMP/a" | median); br=$(cut -d' ' -f2 "$TMP/b" | median)
  printf '| %s | %s s | %s s | %s | %s MiB | %s MiB |\n' "$label" "$aw" "$bw" \
    "$(awk -v a="$aw" -v b="$bw" 'BEGIN {printf "%.2f", b/a}')" "$ar" "$br"
}

compare "--version" --version
compare "2-turn replay run" run --json -m "replay:$TMP/two_turns.json" -C "$TMP" go
compare "1000 tasks, --max-concurrent 64" run --json --max-tasks 1000 --max-concurrent 64 -m "replay:$TMP/fan1000.json" -C "$TMP" go
compare "1000 tasks, --max-concurrent 8" run --json --max-tasks 1000 --max-concurrent 8 -m "replay:$TMP/fan1000.json" -C "$TMP" go
compare "10000 tasks, --max-concurrent 64" run --json --max-tasks 10000 --max-concurrent 64 -m "replay:$TMP/fan10000.json" -C "$TMP" go
