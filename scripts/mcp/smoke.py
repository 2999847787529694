"""A standalone check of the MCP servers scripts/mcp/install.sh installs, without dsh.

Run it with the virtualenv's Python and install.sh's environment (`install.sh --smoke` does):

    . target/mcp/env.sh && "$DSH_MCP_PYTHON" scripts/mcp/smoke.py

Through the Python SDK's client (stdio_client + ClientSession) it lists the everything
server's tools and calls its echo, calls mcp-server-time's get_current_time, calls
mcp-server-git's git_status in a fresh repository, and calls misbehave.py's echo, count and
huge. Speaking raw JSON-RPC it checks misbehave's faults (die, garbage, hang, a cancelled
slow, its start-up traces). Through the inspector's CLI mode it lists tools and calls one.
Every server gets the offline proxies: nothing may reach the network.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

OFFLINE = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def argv(var: str) -> list[str]:
    value = os.environ.get(var)
    if not value:
        sys.exit(f"smoke: {var} is not set: source the env.sh that scripts/mcp/install.sh wrote")
    return json.loads(value)


def say(msg: str) -> None:
    print(f"smoke: {msg}", flush=True)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


TMP = Path(tempfile.mkdtemp(prefix="dsh-mcp-smoke-"))


@asynccontextmanager
async def session(
    name: str, cmd: list[str], env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=OFFLINE | (env or {}))
    with open(TMP / f"{name}.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                say(
                    f"{name}: {init.server_info.name} {init.server_info.version}, "
                    f"protocol {init.protocol_version}"
                )
                yield s


def text_of(result: Any) -> str:
    check(not result.is_error, f"tool error: {result}")
    return "".join(c.text for c in result.content if c.type == "text")


async def everything() -> None:
    async with session("everything", argv("DSH_MCP_EVERYTHING_ARGV")) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        say(f"everything: {len(tools)} tools: {', '.join(tools)}")
        for name in ("echo", "get-sum", "get-structured-content", "trigger-long-running-operation"):
            check(name in tools, f"everything has no {name}")
        check(text_of(await s.call_tool("echo", {"message": "hello"})) == "Echo: hello", "echo")
        r = await s.call_tool("get-structured-content", {"location": "Chicago"})
        check(isinstance(r.structured_content, dict) and "temperature" in r.structured_content,
              f"structured content: {r}")
        say("everything: echo and get-structured-content answered")


async def time_server() -> None:
    async with session("time", argv("DSH_MCP_TIME_ARGV")) as s:
        tools = (await s.list_tools()).tools
        say(f"time: tools {', '.join(t.name for t in tools)}")
        r = await s.call_tool("get_current_time", {"timezone": "UTC"})
        check(not r.is_error and r.structured_content["timezone"] == "UTC",
              f"get_current_time: {r}")
        say(f"time: get_current_time UTC = {r.structured_content['datetime']}")


async def git_server() -> None:
    repo = TMP / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "hello.txt").write_text("hello\n")
    async with session("git", argv("DSH_MCP_GIT_ARGV") + ["--repository", str(repo)]) as s:
        tools = (await s.list_tools()).tools
        say(f"git: tools {', '.join(t.name for t in tools)}")
        out = text_of(await s.call_tool("git_status", {"repo_path": str(repo)}))
        check("Untracked files" in out and "hello.txt" in out, f"git_status: {out!r}")
        outside = await s.call_tool("git_status", {"repo_path": str(TMP)})
        check(outside.is_error, "git_status outside --repository was not an error")
        say("git: git_status answered, and refused a path outside --repository")


async def misbehave() -> None:
    log, starts = TMP / "misbehave.log", TMP / "misbehave.starts"
    env = {"MISBEHAVE_LOG": str(log), "MISBEHAVE_STARTS": str(starts)}
    async with session("misbehave", argv("DSH_MCP_MISBEHAVE_ARGV"), env) as s:
        check(text_of(await s.call_tool("echo", {"text": "hi there"})) == "hi there", "echo")
        r = await s.call_tool("echo", {"text": "structured"})
        check(r.structured_content == {"result": "structured"}, f"echo structured: {r}")
        check(text_of(await s.call_tool("count", {})) == "1", "first count")
        r = await s.call_tool("count", {})
        check(text_of(r) == "2" and r.structured_content == {"result": 2}, f"second count: {r}")
        t0 = time.monotonic()
        big = text_of(await s.call_tool("huge", {"mb": 1}))
        check(len(big) == 1024 * 1024 and set(big) == {"x"}, f"huge: {len(big)} characters")
        say(f"misbehave: echo, count, huge{{mb:1}} answered "
            f"(huge in {time.monotonic() - t0:.2f} s)")
    check(starts.read_text().startswith("started pid="), "MISBEHAVE_STARTS has no start line")
    check("misbehave started pid=" in (TMP / "misbehave.stderr").read_text(), "no start on stderr")


class Raw:
    """misbehave.py spoken to in raw JSON-RPC lines, initialized."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            argv("DSH_MCP_MISBEHAVE_ARGV"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=os.environ | OFFLINE | env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "smoke", "version": "0"},
                },
            }
        )
        check(json.loads(self.line(10))["id"] == 0, "no initialize answer")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, msg: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, rid: int, tool: str, args: dict[str, Any] | None = None) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": tool, "arguments": args or {}},
            }
        )

    def line(self, timeout: float) -> bytes:
        return self.lines.get(timeout=timeout)

    def silent(self, seconds: float) -> bool:
        try:
            self.line(seconds)
            return False
        except queue.Empty:
            return True

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def misbehave_faults() -> None:
    log = TMP / "faults.log"
    env = {"MISBEHAVE_LOG": str(log)}

    raw = Raw(env)
    raw.call(1, "die")
    check(raw.proc.wait(10) == 3, f"die: exit status {raw.proc.returncode}")
    check(raw.silent(0.5), "die answered")

    raw = Raw(env)
    raw.call(1, "garbage")
    line = raw.line(10)
    try:
        json.loads(line)
        raise AssertionError(f"garbage wrote valid JSON: {line!r}")
    except json.JSONDecodeError:
        pass
    check(raw.silent(1), "garbage answered after its garbage")
    raw.kill()

    raw = Raw(env)
    raw.call(1, "hang")
    check(raw.silent(1.5), "hang answered")
    raw.call(2, "slow", {"seconds": 30})
    time.sleep(0.5)
    raw.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    )
    raw.call(3, "slow", {"seconds": 0.2})
    answer = json.loads(raw.line(10))
    check(answer["id"] == 3 and answer["result"]["content"][0]["text"] == "slept 0.2 s",
          f"slow: {answer}")
    check(raw.silent(0.5), "a cancelled call answered")
    t0 = time.monotonic()
    raw.proc.terminate()
    check(raw.proc.wait(5) is not None, "hang did not end on SIGTERM")
    lines = log.read_text().splitlines()
    for want in ("started slow id=2", "cancelled id=2", "interrupted slow id=2",
                 "started slow id=3", "finished slow id=3"):
        check(want in lines, f"{want!r} not in the log: {lines}")
    check("finished slow id=2" not in lines, "the cancelled slow finished")
    say(f"misbehave: die, garbage, hang, a cancelled slow behave (SIGTERM took "
        f"{time.monotonic() - t0:.2f} s); log: {lines}")


def inspector() -> None:
    ins, ev = argv("DSH_MCP_INSPECTOR_ARGV"), argv("DSH_MCP_EVERYTHING_ARGV")

    def run(*args: str) -> dict[str, Any]:
        p = subprocess.run(
            ins + ["--format", "json", "-q", *args, "--", *ev],
            capture_output=True,
            env=os.environ | OFFLINE,
            timeout=60,
            cwd=TMP,
        )
        check(p.returncode == 0, f"inspector {args}: status {p.returncode}: {p.stderr!r}")
        return json.loads(p.stdout)

    listed = run("--method", "tools/list")["result"]["tools"]
    check("echo" in [t["name"] for t in listed], "inspector listed no echo")
    called = run("--method", "tools/call", "--tool-name", "echo",
                 "--tool-args-json", '{"message": "via inspector"}')
    check(called["result"]["content"][0]["text"] == "Echo: via inspector", f"inspector: {called}")
    say(f"inspector: tools/list ({len(listed)} tools) and tools/call echo through --cli")


async def main() -> None:
    await everything()
    await time_server()
    await git_server()
    await misbehave()
    misbehave_faults()
    inspector()
    say("all passed")


if __name__ == "__main__":
    try:
        anyio.run(main)
    except BaseException:
        say(f"failed; the servers' stderr is in {TMP}")
        raise
    else:
        import shutil

        shutil.rmtree(TMP, ignore_errors=True)
