#!/usr/bin/env bash
# Replay: a recorded `dsh exec` session (examples/sessions/fix-typo.jsonl, 10 tool calls)
# re-judged by today's gates 1 and 3 — nothing runs, nobody is asked — first under the rules
# it ran with (nothing changes, exit 0), then under stricter ones (three decisions change,
# exit 4). Throwaway state and config dirs; the repository is left unchanged.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export DSH_HOME="$tmp/home" DSH_CONFIG_HOME="$tmp/cfg"
# shellcheck source=examples/dsh-bin.sh
. "$here/dsh-bin.sh"
cd "$tmp"
echo "# replay under the rules it ran with: every decision as recorded" >&2
"${dsh[@]}" replay "$here/sessions/fix-typo.jsonl" --config "$here/sessions/same.toml"
echo "exit $?" >&2
echo >&2
echo "# replay under stricter rules (tightened.toml): the decisions that would change say CHANGED" >&2
"${dsh[@]}" replay "$here/sessions/fix-typo.jsonl" --config "$here/sessions/tightened.toml"
echo "exit $? (4: a decision changed)" >&2
