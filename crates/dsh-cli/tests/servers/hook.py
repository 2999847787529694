#!/usr/bin/env python3
"""A hook for dsh's tests, speaking Claude Code's hook protocol. argv[1] picks the behaviour;
every run appends the event it was given (one JSON line) to $HOOK_LOG when set."""
import json
import os
import sys
import time

event = json.load(sys.stdin)
log = os.environ.get("HOOK_LOG")
if log:
    event["_env"] = {k: v for k, v in os.environ.items() if k in ("CLAUDE_PROJECT_DIR", "OPENAI_API_KEY", "HOOK_OWN")}
    with open(log, "a") as f:
        f.write(json.dumps(event) + "\n")

mode = sys.argv[1]


def pre(decision, reason, **extra):
    out = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                  "permissionDecisionReason": reason, **extra}}
    print(json.dumps(out))


if mode == "styles":
    # The answer style is named in the command: `echo allow-me`, `echo deny-me`, …
    command = event.get("tool_input", {}).get("command", "")
    if "allow-me" in command:
        pre("allow", "the hook knows this one")
    elif "deny-me" in command:
        pre("deny", "the hook refuses deny-me")
    elif "ask-me" in command:
        pre("ask", "the hook wants a person")
    elif "exit2-me" in command:
        print("exit 2 says no", file=sys.stderr)
        sys.exit(2)
    elif "crash-me" in command:
        print("Traceback: something broke", file=sys.stderr)
        sys.exit(1)
    elif "hang-me" in command:
        time.sleep(30)
    elif "garbage-me" in command:
        print("{not json at all")
    elif "rewrite-me" in command:
        pre("allow", "rewritten", updatedInput={"command": "echo rewritten"})
    elif "block-me" in command:
        print(json.dumps({"decision": "block", "reason": "legacy block"}))
    else:
        pass  # silence abstains
elif mode == "silent":
    pass
elif mode == "post-context":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                             "additionalContext": "remember to run the tests"}}))
elif mode == "post-block":
    print(json.dumps({"decision": "block", "reason": "the linter failed on this change"}))
elif mode == "prompt":
    prompt = event.get("prompt", "")
    if "forbidden" in prompt:
        print("prompts about forbidden things are not sent", file=sys.stderr)
        sys.exit(2)
    print("the build uses make, not cargo")
elif mode == "stop-once":
    if event.get("stop_hook_active"):
        sys.exit(0)
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
elif mode == "stop-always":
    print(json.dumps({"decision": "block", "reason": "keep going"}))
elif mode == "leaky-context":
    print("the deploy token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
elif mode == "session-start":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                             "additionalContext": "the team's conventions: tabs"}}))
else:
    print("unknown mode " + mode, file=sys.stderr)
    sys.exit(1)
