#!/usr/bin/env bash
# A real ACP client, for dsh's ACP tests: the official TypeScript SDK of the Agent Client
# Protocol (@agentclientprotocol/sdk, npm) and its required peer dependency zod, installed
# pinned into a cache directory (reused while the pinned versions and the lock match), with
# the dependencies locked by sdk-lock.json (`npm ci`; the lock has no `resolved` URLs: npm
# fetches each name@version from the configured registry and checks its integrity).
# client.mjs beside this script is the scenario driver that uses it (see its header).
#
# Then it writes $cache/env.sh and prints the same `export` lines on stdout (everything else
# goes to stderr), so either of these works:
#   eval "$(scripts/acp/install.sh)"
#   scripts/acp/install.sh >/dev/null && . target/acp/env.sh
# The variables:
#   DSH_ACP_NODE          the node that runs the driver
#   DSH_ACP_CLIENT        <this checkout>/scripts/acp/client.mjs, the driver:
#                           $DSH_ACP_NODE $DSH_ACP_CLIENT SCENARIO.json -- AGENT ARGV...
#   DSH_ACP_NODE_MODULES  the node_modules holding the SDK; the driver imports the SDK from
#                         there (by absolute path, so it needs no NODE_PATH)
#   DSH_ACP_SDK_VERSION   the SDK version installed
#   DSH_ACP_CACHE         the cache
#
# Usage: scripts/acp/install.sh
# Environment: DSH_ACP_CACHE (default target/acp) is where the SDK is installed.
# DSH_ACP_RELOCK=1 re-resolves the dependencies from the pinned versions alone and rewrites
# sdk-lock.json beside this script (after bumping a version here).
# Only the npm registry is contacted, during the install.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/acp

SDK_VERSION=2.4.0
# The SDK's required peer dependency (^3.25.76 || ^4.0.0); its other peer,
# @modelcontextprotocol/server, is optional and left out.
ZOD_VERSION=4.6.7

if (($#)); then
  echo "usage: $0" >&2
  exit 2
fi

cache=${DSH_ACP_CACHE:-$root/target/acp}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
relock=${DSH_ACP_RELOCK:-0}

say() { echo "acp: $*" >&2; }
now() { date +%s; }
t_all=$(now)

node_bin=$(command -v node) || { say "node is not on PATH"; exit 1; }
command -v npm >/dev/null || { say "npm is not on PATH"; exit 1; }

name=@agentclientprotocol/sdk
dir=$cache/sdk-$SDK_VERSION
lock=$here/sdk-lock.json
if [[ $relock == 1 ]]; then
  say "$name $SDK_VERSION: resolving its dependencies afresh into $lock"
  rm -rf "$dir"
elif [[ ! -f $lock ]]; then
  say "$lock is missing: run with DSH_ACP_RELOCK=1 to make it"
  exit 1
fi
stamp_of() { echo "$name $SDK_VERSION zod $ZOD_VERSION $(cksum <"$lock")"; }
if [[ $relock != 1 && -f $dir/node_modules/$name/package.json &&
  -f $dir/node_modules/zod/package.json &&
  "$(cat "$dir/.installed" 2>/dev/null)" == "$(stamp_of)" ]]; then
  say "$name $SDK_VERSION: cached in $dir"
else
  say "$name $SDK_VERSION: installing into $dir (npm)"
  t0=$(now)
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '{\n  "name": "dsh-acp-sdk",\n  "private": true,\n  "dependencies": {"%s": "%s", "zod": "%s"}\n}\n' \
    "$name" "$SDK_VERSION" "$ZOD_VERSION" >"$dir/package.json"
  # --ignore-scripts: neither package has an install script; none may run.
  npm_flags=(--prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error)
  if [[ $relock == 1 ]]; then
    npm install "${npm_flags[@]}" --omit-lockfile-registry-resolved </dev/null >&2
    cp "$dir/package-lock.json" "$lock"
  else
    cp "$lock" "$dir/package-lock.json"
    npm ci "${npm_flags[@]}" </dev/null >&2
  fi
  stamp_of >"$dir/.installed"
  say "$name installed in $(($(now) - t0)) s"
fi

# --- environment ---------------------------------------------------------------------------

quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

vars=(
  DSH_ACP_CACHE "$cache"
  DSH_ACP_NODE "$node_bin"
  DSH_ACP_CLIENT "$here/client.mjs"
  DSH_ACP_NODE_MODULES "$dir/node_modules"
  DSH_ACP_SDK_VERSION "$SDK_VERSION"
)
{
  echo "# Written by scripts/acp/install.sh; source it to find the ACP test client."
  for ((i = 0; i < ${#vars[@]}; i += 2)); do
    echo "export ${vars[i]}=$(quote "${vars[i + 1]}")"
  done
} >"$cache/env.sh.tmp"
mv "$cache/env.sh.tmp" "$cache/env.sh"
say "ready in $(($(now) - t_all)) s; the environment is in $cache/env.sh"

grep '^export ' "$cache/env.sh"
