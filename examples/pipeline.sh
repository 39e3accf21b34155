#!/usr/bin/env bash
# A pipeline step with deerflow: run, keep the event log, branch on the exit code, and pull
# figures out of the stream with jq. Offline: uses the replay cassettes in this folder.
# Usage: examples/pipeline.sh [path/to/deerflow]
# It exits with deerflow's own code, so a CI step built from it fails when the run did.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
deerflow="${1:-deerflow}"
log="$(mktemp)"

"$deerflow" run --json --subagent-timeout 2s -m "replay:$here/fanout-failure.json" \
  "Check the three services" > "$log"
code=$?

echo "exit code: $code"
case $code in
  0) echo "all good" ;;
  3) echo "a sub-agent failed:" ; jq -r 'select(.type=="task_failed") | "  \(.task_id): \(.error)"' "$log" ;;
  4) echo "a sub-agent timed out" ;;
  *) echo "the run itself did not complete: $(jq -r 'select(.type=="run_completed") | .status' "$log")" ;;
esac
jq -r 'select(.type=="task_timed_out") | "  \(.task_id): \(.error)"' "$log"
jq -r 'select(.type=="run_completed") | "tokens: \(.usage.total_tokens), tasks: \(.tasks)"' "$log"
rm -f "$log"
exit "$code"
