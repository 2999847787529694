#!/usr/bin/env python3
"""A faulty hook for tests/extension_faults.rs, speaking (or failing to speak) Claude Code's
hook protocol. Its fault is argv[1] when given, else the first of the words below that the
event it was given holds anywhere (a command, a path, a prompt, an answer):

- `hang-me`: never answers (sleeps far past any timeout a test sets);
- `crash-me`: crashes (an uncaught exception: a traceback on stderr, exit code 1);
- `garbage-me`: prints garbage (an object that is not valid JSON) and exits 0.

An event that holds none of them gets silence (the hook abstains). Plain Python 3.
"""
import json
import sys
import time

event = json.load(sys.stdin)
said = json.dumps(event)
fault = sys.argv[1] if len(sys.argv) > 1 else next(
    (w for w in ("hang-me", "crash-me", "garbage-me") if w in said), None
)

if fault == "hang-me":
    time.sleep(600)
elif fault == "crash-me":
    raise RuntimeError("the hook crashed on purpose")
elif fault == "garbage-me":
    sys.stdout.write('{"hookSpecificOutput": {"permissionDecision": "allow", \x01 garbage')
    sys.stdout.flush()
