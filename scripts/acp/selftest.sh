#!/usr/bin/env bash
# Checks client.mjs, the ACP scenario driver, without dsh: installs the SDK
# (scripts/acp/install.sh), runs the driver against selftest-agent.mjs (an ACP agent made
# with the same SDK) and checks the transcripts.
#
# Usage: scripts/acp/selftest.sh   (prints "acp selftest: N passed, 0 failed" at the end)
# Environment: DSH_ACP_CACHE as for install.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/acp/install.sh)"
here=$PWD/scripts/acp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
agent=("$DSH_ACP_NODE" "$here/selftest-agent.mjs")

# drive NAME STATUS: runs $tmp/NAME.json against the agent; the driver must exit STATUS.
drive() {
  local status=0
  "$DSH_ACP_NODE" "$DSH_ACP_CLIENT" "$tmp/$1.json" -- "${agent[@]}" \
    >"$tmp/$1.out" 2>"$tmp/$1.err" || status=$?
  if [[ $status != "$2" ]]; then
    echo "acp selftest: $1: the driver exited $status, not $2; its stderr:" >&2
    cat "$tmp/$1.err" >&2
    exit 1
  fi
}

cat >"$tmp/main.json" <<JSON
{"tee": true, "steps": [
  {"op": "initialize"},
  {"op": "authenticate", "methodId": "x"},
  {"op": "new_session", "cwd": "$tmp", "mcpServers": []},
  {"op": "prompt", "text": "write it", "answers": ["allow_once"]},
  {"op": "prompt", "text": "again", "answers": ["wait_for_cancel"], "cancel_on": "tool_call"},
  {"op": "prompt", "text": "and again", "answers": ["allow_always", "reject_once"]},
  {"op": "prompt", "content": [{"type": "text", "text": "blocks"}], "answers": ["reject_always"]},
  {"op": "prompt", "text": "misbehave"},
  {"op": "prompt", "text": "x", "sessionId": "nope"},
  {"op": "prompt", "text": "bad stop"},
  {"op": "set_mode", "modeId": "read-only"},
  {"op": "set_mode", "modeId": "bogus"},
  {"op": "raw", "line": "{\"jsonrpc\":\"2.0\",\"id\":\"raw-1\",\"method\":\"no/such\"}", "wait_response": true},
  {"op": "raw", "line": "garbage"},
  {"op": "load_session", "sessionId": "s1", "cwd": "$tmp", "mcpServers": []},
  {"op": "close"}
]}
JSON
drive main 0

cat >"$tmp/timeout.json" <<'JSON'
{"steps": [
  {"op": "initialize"},
  {"op": "new_session", "cwd": "/"},
  {"op": "prompt", "text": "hang", "answers": ["wait_for_cancel"], "timeout_ms": 1000}
]}
JSON
drive timeout 1

"$DSH_ACP_NODE" - "$tmp" "$DSH_ACP_SDK_VERSION" <<'JS'
const fs = require("fs");
const [dir] = process.argv.slice(2);
const read = (name) =>
  fs.readFileSync(`${dir}/${name}.out`, "utf8").trimEnd().split("\n").map((l) => JSON.parse(l));
let passed = 0;
const check = (what, ok) => {
  if (!ok) {
    console.error(`acp selftest: FAILED: ${what}`);
    process.exit(1);
  }
  passed++;
};

const t = read("main");
const ev = (name) => t.filter((e) => e.event === name);
const ops = (name) => t.filter((e) => e.event === "response" || e.event === "error")
  .filter((e) => e.op === name);
const init = ops("initialize")[0];
check("initialize answered with protocol version 1", init.event === "response" && init.result.protocolVersion === 1);
check("authenticate recorded as an error", ops("authenticate")[0].error.code === -32601);
check("session s1", ops("new_session")[0].result.sessionId === "s1");
const prompts = ops("prompt");
check("seven prompt outcomes", prompts.length === 7);
check("stop reasons", JSON.stringify(prompts.map((p) => p.result && p.result.stopReason)) ===
  JSON.stringify(["end_turn", "cancelled", "end_turn", "end_turn", "end_turn", undefined, "no_such_reason"]));
check("unknown session is -32002", prompts[5].error.code === -32002);
const perms = ev("permission");
check("permission answers", JSON.stringify(perms.map((p) => p.answer && (p.answer.outcome.optionId || p.answer.outcome.outcome))) ===
  JSON.stringify(["o-allow-once", "cancelled", "o-allow-always", "o-reject-always", null]));
check("wait_for_cancel is deferred", perms[1].deferred === "wait_for_cancel");
const i = (pred) => t.findIndex(pred);
const cancel = i((e) => e.event === "cancel_sent");
check("cancel sent at the tool_call update, before the permission request",
  t.slice(0, cancel).findLast((e) => e.event === "update").params.update.sessionUpdate === "tool_call" &&
  cancel < i((e) => e.event === "permission" && e.deferred));
check("an unused answer is noted", t.some((e) => e.event === "driver_note" && /1 answer\(s\) not used/.test(e.message)));
check("update before its prompt response", i((e) => e.event === "update") < i((e) => e.event === "response" && e.op === "prompt"));
check("first update is the hi chunk", ev("update")[0].params.update.content.text === "hi");
check("garbage from the agent", ev("bad_line").some((e) => e.line === "this is not json"));
check("stray responses", ev("stray_response").map((e) => e.message.id).join() === "nobody,");
check("schema errors", ev("schema_error").map((e) => e.method).join() ===
  "session/update,session/update,session/request_permission,session/prompt");
check("schema error follows the bad response",
  t[i((e) => e.event === "response" && e.result && e.result.stopReason === "no_such_reason") + 1].event === "schema_error");
check("schema error path", JSON.stringify(ev("schema_error")[1].issues[0].path) === '["update","title"]');
check("the SDK answered the bad permission request -32602",
  ev("update").some((e) => e.params.update.content && e.params.update.content.text === "error -32602"));
check("set_mode", ops("set_mode")[0].event === "response" && ops("set_mode")[1].error.code === -32602);
check("raw request answered", ops("raw")[0].id === "raw-1" && ops("raw")[0].error.code === -32601);
check("load replays history before its response",
  i((e) => e.event === "response" && e.op === "load_session") >
  t.findLastIndex((e) => e.event === "update" && e.params.update.sessionUpdate === "user_message_chunk"));
check("wire lines teed", ev("wire").length > 20 && ev("wire").some((e) => e.line === "this is not json"));
check("exit last, status 0", t.at(-1).event === "exit" && t.at(-1).code === 0);

const to = read("timeout");
check("timeout recorded", to.some((e) => e.event === "timeout" && e.op === "prompt"));
check("driver_error last", to.at(-1).event === "driver_error");
check("agent stopped", to.some((e) => e.event === "exit"));
console.error(`acp selftest: ${passed} passed, 0 failed`);
JS
