#!/usr/bin/env bash
# The ACP suite against a real ACP client, the official TypeScript SDK
# (crates/dsh-cli/tests/acp_client.rs holds the cases): installs it pinned
# (scripts/acp/install.sh, into a cache reused while the pins match), then runs the cases
# with its location in the environment. Without these variables (`cargo test --workspace`)
# every case says it was skipped; here a missing one is a failure.
#
# Usage: scripts/acp/run.sh [extra arguments for the test binary, e.g. a test name]
# Environment: DSH_ACP_CACHE (default target/acp) is where the SDK is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/acp/install.sh)"
export DSH_ACP_REQUIRED=1
t0=$(date +%s)
status=0
# The README's test command's flags, so the test binary it built is reused, not rebuilt.
cargo test --workspace --locked --features dsh-cli/fault-injection --test acp_client -- --test-threads=2 "$@" </dev/null || status=$?
echo "acp: cases ran in $(($(date +%s) - t0)) s" >&2
exit "$status"
