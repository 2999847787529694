#!/usr/bin/env bash
# The compatibility suite: `dsh exec` against real third-party model servers, in both wire
# formats (crates/dsh-cli/tests/compat.rs holds the cases).
#
# It installs pinned versions of two servers into a cache directory (reused while the pinned
# version matches), starts them on free 127.0.0.1 ports with the configurations beside this
# script, waits until they answer, runs the cases and always stops the servers again:
#   - llmposter (crates.io), built with `cargo install`: fixtures in llmposter.yaml;
#   - the LiteLLM proxy (PyPI), in a virtualenv, every model a mock: litellm.yaml.
#
# Usage: scripts/compat/run.sh [extra arguments for the test binary, e.g. a test name]
# Environment: DSH_COMPAT_CACHE (default target/compat) is where the servers are installed.
# Only the package registries are contacted (during the install); afterwards 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/compat

LLMPOSTER_VERSION=0.5.0
LITELLM_VERSION=1.81.16

cache=${DSH_COMPAT_CACHE:-$root/target/compat}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
logs=$cache/logs
rm -rf "$logs"
mkdir -p "$logs"

say() { echo "compat: $*"; }
now() { date +%s; }

# --- install -----------------------------------------------------------------------------

# llmposter: the CLI alone (no recording, OAuth or file watching: nothing the cases use).
lp_dir=$cache/llmposter-$LLMPOSTER_VERSION
lp_stamp="llmposter $LLMPOSTER_VERSION --no-default-features"
if [[ -x $lp_dir/bin/llmposter && "$(cat "$lp_dir/.installed" 2>/dev/null)" == "$lp_stamp" ]]; then
  say "llmposter $LLMPOSTER_VERSION: cached in $lp_dir"
else
  say "llmposter $LLMPOSTER_VERSION: installing into $lp_dir (cargo install, a few minutes)"
  t0=$(now)
  rm -rf "$lp_dir"
  cargo install llmposter --version "=$LLMPOSTER_VERSION" --locked --no-default-features \
    --root "$lp_dir" --quiet </dev/null
  echo "$lp_stamp" >"$lp_dir/.installed"
  say "llmposter installed in $(($(now) - t0)) s"
fi

# LiteLLM: the proxy extra, its dependencies pinned by litellm-constraints.txt.
ll_dir=$cache/litellm-$LITELLM_VERSION
ll_stamp="litellm[proxy] $LITELLM_VERSION $(cksum <"$here/litellm-constraints.txt")"
if [[ -x $ll_dir/bin/litellm && "$(cat "$ll_dir/.installed" 2>/dev/null)" == "$ll_stamp" ]]; then
  say "litellm $LITELLM_VERSION: cached in $ll_dir"
else
  say "litellm $LITELLM_VERSION: installing into $ll_dir (pip, about a minute)"
  t0=$(now)
  rm -rf "$ll_dir"
  python3 -m venv "$ll_dir"
  PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$ll_dir/bin/pip" install --quiet \
    -c "$here/litellm-constraints.txt" "litellm[proxy]==$LITELLM_VERSION" </dev/null
  echo "$ll_stamp" >"$ll_dir/.installed"
  say "litellm installed in $(($(now) - t0)) s"
fi

# --- start -------------------------------------------------------------------------------

pids=()
stop_servers() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Polls URL until it answers 200, for at most SECONDS; fails early if PID died.
wait_for() {
  local name=$1 url=$2 pid=$3 seconds=$4 log=$5
  local deadline=$(($(now) + seconds))
  until python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()' "$url" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "$name exited before answering; its log:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    if (($(now) >= deadline)); then
      say "$name did not answer $url within $seconds s; its log:" >&2
      tail -n 40 "$log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# Any outgoing HTTP(S) a server might attempt goes to a closed local port instead of the
# network; 127.0.0.1 stays direct.
offline=(HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
  http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
  NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost)

lp_port=$(free_port)
env "${offline[@]}" "$lp_dir/bin/llmposter" --fixtures "$here/llmposter.yaml" \
  --bind 127.0.0.1 --port "$lp_port" </dev/null >"$logs/llmposter.log" 2>&1 &
pids+=($!)
lp_pid=$!

ll_port=$(free_port)
env "${offline[@]}" LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_TELEMETRY=False \
  DISABLE_ADMIN_UI=True NO_DOCS=True \
  "$ll_dir/bin/litellm" --config "$here/litellm.yaml" --host 127.0.0.1 --port "$ll_port" \
  --telemetry False --num_workers 1 </dev/null >"$logs/litellm.log" 2>&1 &
pids+=($!)
ll_pid=$!

t0=$(now)
wait_for llmposter "http://127.0.0.1:$lp_port/health" "$lp_pid" 30 "$logs/llmposter.log"
wait_for litellm "http://127.0.0.1:$ll_port/health/liveliness" "$ll_pid" 120 "$logs/litellm.log"
say "servers up in $(($(now) - t0)) s: llmposter on $lp_port, litellm on $ll_port (logs in $logs)"

# --- run ---------------------------------------------------------------------------------

export DSH_COMPAT_LLMPOSTER=http://127.0.0.1:$lp_port
export DSH_COMPAT_LITELLM=http://127.0.0.1:$ll_port
# With the servers up, a case that finds no URL is a failure, not a skip.
export DSH_COMPAT_REQUIRED=1
t0=$(now)
status=0
# The README's test command's flags, so the test binary it built is reused, not rebuilt.
cargo test --workspace --locked --features dsh-cli/fault-injection --test compat -- --test-threads=1 "$@" </dev/null || status=$?
say "cases ran in $(($(now) - t0)) s"
if ((status != 0)); then
  say "failed; the servers' logs are in $logs" >&2
fi
exit "$status"
