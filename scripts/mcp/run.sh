#!/usr/bin/env bash
# The MCP suite against real servers from the ecosystem (crates/dsh-cli/tests/mcp_servers.rs
# holds the cases): installs them pinned (scripts/mcp/install.sh, into a cache reused while
# the pins match), then runs the cases with their locations in the environment. Without these
# variables (`cargo test --workspace`) every case says it was skipped; here a missing one is
# a failure.
#
# Usage: scripts/mcp/run.sh [extra arguments for the test binary, e.g. a test name]
# Environment: DSH_MCP_CACHE (default target/mcp) is where the servers are installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/mcp/install.sh)"
export DSH_MCP_REQUIRED=1
t0=$(date +%s)
status=0
# The README's test command's flags, so the test binary it built is reused, not rebuilt.
cargo test --workspace --locked --features dsh-cli/fault-injection --test mcp_servers -- --test-threads=2 "$@" </dev/null || status=$?
echo "mcp: cases ran in $(($(date +%s) - t0)) s" >&2
exit "$status"
