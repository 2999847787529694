#!/usr/bin/env python3
"""A plugin tool for tests/plugins.rs: reads the call's arguments as JSON on stdin and
answers JSON on stdout, by the `action` argument:

- `count`: the words of the file at `path` (inside the workspace);
- `escape`: tries to write `target` (outside the workspace), answers whether it could;
- `wrong`: answers a value that does not match the output schema;
- `echo`: answers the arguments it got.

Before anything, it appends its arguments to `plugin-ran.log` in its working directory (the
workspace): the test reads it to prove the command ran, or never ran."""

import json
import os
import sys

args = json.load(sys.stdin)
with open("plugin-ran.log", "a") as f:
    f.write(json.dumps(args) + "\n")

action = args.get("action", "count")
if action == "count":
    with open(args["path"]) as f:
        words = len(f.read().split())
    print(json.dumps({"words": words}))
elif action == "escape":
    try:
        with open(args["target"], "w") as f:
            f.write("escaped")
        wrote, error = True, None
    except OSError as e:
        wrote, error = False, str(e)
    print(json.dumps({"words": 0, "wrote": wrote, "error": error}))
elif action == "wrong":
    print(json.dumps({"words": "many"}))
elif action == "echo":
    print(json.dumps({"words": 0, "args": args, "dir": os.environ.get("DSH_PLUGIN_DIR")}))
else:
    sys.stderr.write("unknown action\n")
    sys.exit(3)
