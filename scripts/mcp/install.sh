#!/usr/bin/env bash
# Real MCP servers, and a real MCP client, for dsh's MCP tests.
#
# It installs pinned versions into a cache directory (each part reused while its pinned
# version stamp matches):
#   - @modelcontextprotocol/server-everything (npm): the reference test server, every MCP
#     feature; its dependencies pinned by everything-lock.json;
#   - @modelcontextprotocol/inspector (npm): its CLI mode drives `dsh mcp serve` as a client;
#     its dependencies pinned by inspector-lock.json;
#   - mcp-server-time, mcp-server-git and mcp, the Python SDK (PyPI), in one virtualenv, their
#     dependencies pinned by python-constraints.txt; that Python also runs misbehave.py, the
#     fault-test server beside this script.
# Then it writes $cache/env.sh and prints the same `export` lines on stdout (everything else
# goes to stderr), so either of these works:
#   eval "$(scripts/mcp/install.sh)"
#   scripts/mcp/install.sh >/dev/null && . target/mcp/env.sh
#
# Each *_ARGV variable is a JSON array of strings, the server's argv (absolute paths):
#   DSH_MCP_EVERYTHING_ARGV  node .../server-everything/dist/index.js stdio
#   DSH_MCP_TIME_ARGV        .../bin/mcp-server-time --local-timezone UTC
#   DSH_MCP_GIT_ARGV         .../bin/mcp-server-git
#       Every git tool takes the repository as its `repo_path` argument; append
#       ["--repository", DIR] to confine the server to DIR (a path outside it is then an
#       isError result). DIR must be a git work tree: if it is not, the server logs an error
#       and exits 0 straight away, before answering anything.
#   DSH_MCP_MISBEHAVE_ARGV   .../bin/python <this checkout>/scripts/mcp/misbehave.py
#   DSH_MCP_INSPECTOR_ARGV   node .../inspector/clients/launcher/build/index.js --cli
#       Options go before `--`, the server's argv after it (--tool-arg takes any number of
#       pairs, so a server argv after it without `--` would be read as more pairs):
#         list tools: $INSPECTOR --format json -q --method tools/list -- SERVER ARGV...
#         call a tool: $INSPECTOR --format json -q --method tools/call --tool-name echo \
#                        --tool-args-json '{"message":"hi"}' -- SERVER ARGV...
#       (or --tool-arg message=hi b=2 ...). With --format json the answer is one JSON object
#       on stdout, {"result": <the MCP result>}; a failure is {"error": {"code": ..., "message":
#       ...}} on stderr and a non-zero exit (5 for an unknown tool, and for an isError result,
#       whose result is still on stdout). -q drops status lines and the server's stderr. The
#       server gets only HOME, PATH, SHELL and TERM from the inspector's environment, plus each
#       `-e KEY=VALUE`; `--cwd DIR` sets its working directory.
# and DSH_MCP_PYTHON is the virtualenv's python, DSH_MCP_NODE the node the argvs use,
# DSH_MCP_CACHE the cache. A test that spawns these servers should give them the offline
# proxies, as smoke.py does (HTTP(S)_PROXY=http://127.0.0.1:9, NO_PROXY=127.0.0.1,localhost):
# none of the tools the tests use goes to the network, and none may.
#
# Usage: scripts/mcp/install.sh [--smoke]   (--smoke: run smoke.py against the installs after)
# Environment: DSH_MCP_CACHE (default target/mcp) is where they are installed.
# DSH_MCP_RELOCK=1 re-resolves the dependencies from the pinned versions alone and rewrites
# the lock and constraints files beside this script (after bumping a version here).
# Only the package registries are contacted, during the install.
#
# Node.js: the inspector 2.x declares engines node >= 22.19, but its CLI mode (all the tests
# use) works on the machine's Node.js 20 (npm warns about the engine at install, hidden here).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/mcp

EVERYTHING_VERSION=2026.8.31
INSPECTOR_VERSION=2.12.0
MCP_VERSION=2.3.0
MCP_SERVER_TIME_VERSION=2026.10.19
MCP_SERVER_GIT_VERSION=2026.10.19

smoke=0
for arg in "$@"; do
  case $arg in
    --smoke) smoke=1 ;;
    *) echo "usage: $0 [--smoke]" >&2; exit 2 ;;
  esac
done

cache=${DSH_MCP_CACHE:-$root/target/mcp}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
relock=${DSH_MCP_RELOCK:-0}

say() { echo "mcp: $*" >&2; }
now() { date +%s; }
t_all=$(now)

node_bin=$(command -v node) || { say "node is not on PATH"; exit 1; }
command -v npm >/dev/null || { say "npm is not on PATH"; exit 1; }

# --- npm -----------------------------------------------------------------------------------

# npm_package KEY NAME VERSION: installs NAME@VERSION into $cache/KEY-VERSION/node_modules with
# the dependencies locked by $here/KEY-lock.json (`npm ci`). The lock has no `resolved` URLs:
# npm fetches each name@version from the configured registry and checks its integrity.
npm_package() {
  local key=$1 name=$2 version=$3
  local dir=$cache/$key-$version lock=$here/$key-lock.json
  if [[ $relock == 1 ]]; then
    say "$name $version: resolving its dependencies afresh into $lock"
    rm -rf "$dir"
  elif [[ ! -f $lock ]]; then
    say "$lock is missing: run with DSH_MCP_RELOCK=1 to make it"
    exit 1
  fi
  local stamp="$name $version"
  [[ -f $lock ]] && stamp+=" $(cksum <"$lock")"
  if [[ -f $dir/node_modules/$name/package.json &&
    "$(cat "$dir/.installed" 2>/dev/null)" == "$stamp" ]]; then
    say "$name $version: cached in $dir"
    return
  fi
  say "$name $version: installing into $dir (npm)"
  local t0
  t0=$(now)
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '{\n  "name": "dsh-mcp-%s",\n  "private": true,\n  "dependencies": {"%s": "%s"}\n}\n' \
    "$key" "$name" "$version" >"$dir/package.json"
  # --ignore-scripts: the only install script among them is the inspector's postinstall, which
  # does nothing outside the inspector's own source checkout.
  local npm_flags=(--prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error)
  if [[ $relock == 1 ]]; then
    npm install "${npm_flags[@]}" --omit-lockfile-registry-resolved </dev/null >&2
    cp "$dir/package-lock.json" "$lock"
  else
    cp "$lock" "$dir/package-lock.json"
    npm ci "${npm_flags[@]}" </dev/null >&2
  fi
  echo "$name $version $(cksum <"$lock")" >"$dir/.installed"
  say "$name installed in $(($(now) - t0)) s"
}

npm_package everything @modelcontextprotocol/server-everything "$EVERYTHING_VERSION"
npm_package inspector @modelcontextprotocol/inspector "$INSPECTOR_VERSION"
ev_dir=$cache/everything-$EVERYTHING_VERSION
in_dir=$cache/inspector-$INSPECTOR_VERSION

# --- Python --------------------------------------------------------------------------------

constraints=$here/python-constraints.txt
py_pins=("mcp==$MCP_VERSION" "mcp-server-time==$MCP_SERVER_TIME_VERSION"
  "mcp-server-git==$MCP_SERVER_GIT_VERSION")
py_dir=$cache/python-mcp-$MCP_VERSION
if [[ $relock == 1 ]]; then
  rm -rf "$py_dir"
elif [[ ! -f $constraints ]]; then
  say "$constraints is missing: run with DSH_MCP_RELOCK=1 to make it"
  exit 1
fi
py_stamp="${py_pins[*]} $(python3 --version)"
[[ -f $constraints ]] && py_stamp+=" $(cksum <"$constraints")"
if [[ -x $py_dir/bin/mcp-server-git &&
  "$(cat "$py_dir/.installed" 2>/dev/null)" == "$py_stamp" ]]; then
  say "${py_pins[*]}: cached in $py_dir"
else
  say "${py_pins[*]}: installing into $py_dir (pip)"
  t0=$(now)
  rm -rf "$py_dir"
  python3 -m venv "$py_dir"
  pip=(env PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$py_dir/bin/pip" install --quiet)
  if [[ $relock == 1 ]]; then
    "${pip[@]}" "${py_pins[@]}" </dev/null >&2
    # The constraints pin everything but the three packages pinned above.
    {
      echo "# The dependencies of ${py_pins[*]}: made by"
      echo "# DSH_MCP_RELOCK=1 scripts/mcp/install.sh (pip freeze, less those three)."
      "$py_dir/bin/pip" freeze | grep -v -i -E '^(mcp|mcp-server-time|mcp-server-git)=='
    } >"$constraints"
  else
    "${pip[@]}" -c "$constraints" "${py_pins[@]}" </dev/null >&2
  fi
  echo "${py_pins[*]} $(python3 --version) $(cksum <"$constraints")" >"$py_dir/.installed"
  say "python packages installed in $(($(now) - t0)) s"
fi

# --- environment ---------------------------------------------------------------------------

json_argv() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@"; }
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

vars=(
  DSH_MCP_CACHE "$cache"
  DSH_MCP_NODE "$node_bin"
  DSH_MCP_PYTHON "$py_dir/bin/python"
  DSH_MCP_EVERYTHING_ARGV "$(json_argv "$node_bin" \
    "$ev_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js" stdio)"
  DSH_MCP_TIME_ARGV "$(json_argv "$py_dir/bin/mcp-server-time" --local-timezone UTC)"
  DSH_MCP_GIT_ARGV "$(json_argv "$py_dir/bin/mcp-server-git")"
  DSH_MCP_MISBEHAVE_ARGV "$(json_argv "$py_dir/bin/python" "$here/misbehave.py")"
  DSH_MCP_INSPECTOR_ARGV "$(json_argv "$node_bin" \
    "$in_dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" --cli)"
)
{
  echo "# Written by scripts/mcp/install.sh; source it to find the MCP test servers."
  for ((i = 0; i < ${#vars[@]}; i += 2)); do
    echo "export ${vars[i]}=$(quote "${vars[i + 1]}")"
  done
} >"$cache/env.sh.tmp"
mv "$cache/env.sh.tmp" "$cache/env.sh"
say "ready in $(($(now) - t_all)) s; the environment is in $cache/env.sh"

if ((smoke)); then
  (
    # shellcheck source=/dev/null
    . "$cache/env.sh"
    t0=$(now)
    "$DSH_MCP_PYTHON" "$here/smoke.py" >&2
    say "smoke check passed in $(($(now) - t0)) s"
  )
fi

grep '^export ' "$cache/env.sh"
