"""A small MCP server over stdio for dsh's own tests, in plain Python 3 (no packages):
newline-delimited JSON-RPC as the MCP stdio transport defines it. Each request runs on its
own thread, so a cancellation can arrive while a call runs.

Environment: MINI_LOG (a file: one line per event a test checks — start, count, cancelled,
finished), MINI_FAIL_START (exit at once with this message on stderr), MINI_HOLD (never
answer: a server that hangs at start-up).
"""
import json
import os
import sys
import threading
import time

LOG = os.environ.get("MINI_LOG")
lock = threading.Lock()
cancelled = set()
extra_tools = []


def log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def send(msg):
    data = json.dumps(msg) + "\n"
    with lock:
        sys.stdout.write(data)
        sys.stdout.flush()


TOOLS = [
    {
        "name": "echo",
        "description": "Says the text back, structured.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "outputSchema": {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "plain",
        "description": "Text and an image, no output schema.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "liar",
        "description": "Declares an output schema and breaks it.",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    },
    {
        "name": "fails",
        "description": "Reports an error result.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "slow",
        "description": "Sleeps for `seconds`, then answers.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "die",
        "description": "Exits mid-call.",
        "inputSchema": {"type": "object"},
        "annotations": {"destructiveHint": True},
    },
    {
        "name": "count",
        "description": "Appends a line to the log and says how many calls there were.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "grow",
        "description": "Adds a tool and says the tool list changed.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "env",
        "description": "The names of its environment variables.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "read.dotted/name",
        "description": "A name with characters dsh replaces.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
]


def text(t):
    return {"content": [{"type": "text", "text": t}]}


def call(rid, name, args):
    if name == "echo":
        return {"content": [{"type": "text", "text": args["text"]}], "structuredContent": {"echo": args["text"]}}
    if name == "plain":
        return {"content": [{"type": "text", "text": "some text"}, {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]}
    if name == "liar":
        return {"content": [{"type": "text", "text": "n is a word"}], "structuredContent": {"n": "seven"}}
    if name == "fails":
        return {"content": [{"type": "text", "text": "the thing is broken"}], "isError": True}
    if name == "slow":
        log("slow started")
        deadline = time.time() + float(args.get("seconds", 30))
        while time.time() < deadline:
            if rid in cancelled:
                log("slow cancelled")
                return None
            time.sleep(0.02)
        log("slow finished")
        return text("slept")
    if name == "die":
        sys.stderr.write("dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "count":
        log("count")
        n = sum(1 for line in open(LOG) if line.strip() == "count") if LOG else 0
        return text(str(n))
    if name == "grow":
        extra_tools.append({"name": "grown", "description": "Added later.", "inputSchema": {"type": "object"}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("grew")
    if name == "grown":
        return text("I am new")
    if name == "env":
        return text(" ".join(sorted(os.environ)))
    if name == "read.dotted/name":
        return text("dotted")
    raise KeyError(name)


def handle(msg):
    rid = msg.get("id")
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "mini", "version": "1"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS + extra_tools}})
    elif method == "tools/call":
        p = msg["params"]
        try:
            result = call(rid, p["name"], p.get("arguments") or {})
        except KeyError:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "unknown tool " + p["name"]}})
            return
        if result is not None:
            send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "notifications/cancelled":
        cancelled.add(msg["params"].get("requestId"))
        log("cancelled")
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + str(method)}})


def main():
    if os.environ.get("MINI_FAIL_START"):
        sys.stderr.write(os.environ["MINI_FAIL_START"] + "\n")
        sys.exit(7)
    sys.stderr.write("mini started pid=%d\n" % os.getpid())
    sys.stderr.flush()
    log("start")
    if os.environ.get("MINI_HOLD"):
        time.sleep(3600)
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        threading.Thread(target=handle, args=(msg,), daemon=True).start()


main()
