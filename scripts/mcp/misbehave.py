"""An MCP server (stdio) that misbehaves on request, for dsh's fault tests.

Run it with the Python from scripts/mcp/install.sh's virtualenv (it needs the `mcp` package,
2.x, where FastMCP is `mcp.server.mcpserver.MCPServer`):

    "$DSH_MCP_PYTHON" scripts/mcp/misbehave.py

Tools:
  echo{text}      answers `text` (as text content, and as structuredContent {"result": text}
                  with an outputSchema);
  die{}           the process exits at once with status 3, mid-call, without answering;
  hang{}          never answers (sleeps until the call is cancelled or the process killed);
  garbage{}       writes a line of invalid JSON straight to the wire (bypassing the SDK),
                  then never answers;
  huge{mb}        answers a text content of `mb` MiB (mb * 1048576 'x' characters);
  slow{seconds}   sleeps, then answers "slept N s"; logs "started slow id=ID", then
                  "finished slow id=ID" or "interrupted slow id=ID" (the call's task was
                  cancelled: a notifications/cancelled for it, logged as "cancelled id=ID"
                  just after, or the connection closed);
  count{}         appends "count" to the log and answers how many "count" lines it holds, so
                  a test can prove that a call ran exactly once.

Environment:
  MISBEHAVE_LOG     a file that `slow` and `count` append lines to, and where every
                    notifications/cancelled received is logged as "cancelled id=ID";
                    without it nothing is logged and `count` counts in memory;
  MISBEHAVE_STARTS  a file that gets one line "started pid=N" at every start (to count
                    restarts);
  MISBEHAVE_STUBBORN=1  the process ignores SIGTERM and does not exit when its stdin closes,
                    so only SIGKILL ends it (to test a client's kill escalation).

On start it writes "misbehave started pid=N" to stderr, so a test can check where the
server's stderr goes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

LOG = os.environ.get("MISBEHAVE_LOG")
STARTS = os.environ.get("MISBEHAVE_STARTS")
STUBBORN = os.environ.get("MISBEHAVE_STUBBORN") == "1"

_log_lock = threading.Lock()
_count_in_memory = 0


def log(line: str) -> None:
    if not LOG:
        return
    with _log_lock, open(LOG, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


def wire_fd() -> int:
    """The descriptor the SDK writes the protocol to.

    While it serves stdio, mcp 2.x writes the protocol to a private duplicate of fd 1 and
    points fd 1 itself at stderr, so that stray prints cannot corrupt the wire; a raw write
    to fd 1 would land in stderr. The duplicate is found in the transport's claim table (a
    private name, of the pinned SDK); fd 1 when there is none.
    """
    try:
        from mcp.server import stdio

        claim = stdio._claims.get(1)
        if claim is not None and claim.private_fd is not None:
            return claim.private_fd
    except (ImportError, AttributeError):
        pass
    return 1


async def log_cancellations(ctx: Any, call_next: Any) -> Any:
    """Middleware: records each notifications/cancelled (the SDK then cancels the call)."""
    if ctx.method == "notifications/cancelled":
        params = ctx.params or {}
        log(f"cancelled id={params.get('requestId')}")
    return await call_next(ctx)


server = MCPServer(
    "misbehave",
    version="1.0.0",
    instructions="A test server that misbehaves on request.",
    middleware=[log_cancellations],
    subscriptions=False,
)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)


@server.tool(description="Answers the given text.", annotations=READ_ONLY)
async def echo(text: str) -> str:
    return text


@server.tool(
    description="Exits the server process (status 3) without answering.", structured_output=False
)
async def die() -> str:
    sys.stderr.write("misbehave: dying\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Never answers.", structured_output=False)
async def hang() -> str:
    await anyio.sleep_forever()
    return "unreachable"


@server.tool(
    description="Writes a line of invalid JSON to stdout, then never answers.",
    structured_output=False,
)
async def garbage() -> str:
    os.write(wire_fd(), b'{"jsonrpc": "2.0", this is not JSON\n')
    await anyio.sleep_forever()
    return "unreachable"


@server.tool(description="Answers a text of `mb` MiB.", structured_output=False)
async def huge(mb: float) -> str:
    return "x" * int(mb * 1024 * 1024)


@server.tool(description="Sleeps `seconds`, then answers.", structured_output=False)
async def slow(seconds: float, ctx: Context) -> str:
    rid = ctx.request_id
    log(f"started slow id={rid}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        log(f"interrupted slow id={rid}")
        raise
    log(f"finished slow id={rid}")
    return f"slept {seconds} s"


@server.tool(description="Counts its calls in the log file and answers the count.")
async def count() -> int:
    global _count_in_memory
    if not LOG:
        _count_in_memory += 1
        return _count_in_memory
    with _log_lock:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write("count\n")
        with open(LOG, encoding="utf-8") as f:
            return sum(1 for line in f if line.rstrip("\n") == "count")


def main() -> None:
    pid = os.getpid()
    sys.stderr.write(f"misbehave started pid={pid}\n")
    sys.stderr.flush()
    if STARTS:
        with open(STARTS, "a", encoding="utf-8") as f:
            f.write(f"started pid={pid}\n")
    if STUBBORN:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.run("stdio")
    if STUBBORN:
        sys.stderr.write("misbehave: stdin closed, staying up\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
