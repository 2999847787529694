#!/usr/bin/env bash
# The tour: runs examples/tour.jsonl through every gate against a throwaway copy of
# examples/tour/, with throwaway state and config dirs. The repository is left unchanged.
# It uses $DSH_BIN, else the `dsh` on PATH, else target/release/dsh (built once if missing).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -R "$here/tour" "$tmp/ws"
export DSH_HOME="$tmp/home" DSH_CONFIG_HOME="$tmp/cfg"
# shellcheck source=examples/dsh-bin.sh
. "$here/dsh-bin.sh"
echo "# the tour: 11 scripted tool calls through every gate, no model; one line each: outcome, gate, policy, why" >&2
"${dsh[@]}" --workspace "$tmp/ws" --config "$here/tour.toml" batch "$here/tour.jsonl" >"$tmp/results.jsonl"
if command -v jq >/dev/null 2>&1; then
  # One line per call: id, outcome, the gate and policy that decided, and why.
  jq -r '[.call_id, (if .ok then "ok" else .failure_kind end), .decided_by.gate,
          (.decided_by.policy // "-"),
          (if (.content | test("the full output is saved as")) then "[spilled] " else "" end)
            + (.decided_by.reason | .[0:100])] | @tsv' "$tmp/results.jsonl"
  echo
  if [ -n "${DSH_TOUR_RAW:-}" ]; then cat "$tmp/results.jsonl"; else echo "# full results: rerun with DSH_TOUR_RAW=1"; fi
else
  cat "$tmp/results.jsonl"
fi
echo "# the session journal: $(wc -l <"$DSH_HOME"/sessions/*.jsonl) hash-chained records" >&2
echo "# src/greet.py in the throwaway copy now reads:" >&2
cat "$tmp/ws/src/greet.py" >&2
