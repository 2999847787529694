#!/usr/bin/env python3
"""dsh's own peak resident set while an MCP server floods it (BENCHMARKS.md, issue 30).

    python3 scripts/mcp/flood_rss.py [--dsh PATH] [--runs N] [--timeout S]

Runs `dsh batch -` in a throwaway world (DSH_HOME, config, workspace in a temp dir) whose
stdio MCP server `h` is crates/dsh-cli/tests/servers/hostile.py, once per case:

  baseline  two calls of a well-behaved tool `t` (what the session costs without a flood);
  huge      one call answered with a single 100 MB line (over dsh's 16 MiB bound), then `t`;
  junk      one call preceded by 100 MB of lines that are not JSON-RPC, then `t`.

dsh's peak RSS is its own `VmHWM` (read from /proc every 5 ms until it exits: it only grows,
so the last reading holds the peak); GNU time or wait4 would report the server's instead,
since dsh reaps it. Prints, per case, the median over the runs of the wall time and of the
peak, and the first call's result kind. Needs only Python 3. `--timeout` is the server's
`timeout_s` (a dsh without the bound waits that long for the dropped answer).
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTILE = os.path.join(ROOT, "crates/dsh-cli/tests/servers/hostile.py")
FLOOD = 100 * 1024 * 1024


def vmhwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run(dsh, case, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        ws, cfg = os.path.join(tmp, "ws"), os.path.join(tmp, "cfg")
        os.makedirs(ws)
        os.makedirs(cfg)
        action = {"baseline": None, "huge": "huge", "junk": "junk"}[case]
        tools = [{"name": n, "description": "x", "inputSchema": {"type": "object"}}
                 for n in ("f", "t")]
        spec = {"tools": tools, "actions": {"f": action} if action else {}}
        spec_file = os.path.join(tmp, "spec.json")
        with open(spec_file, "w") as f:
            json.dump(spec, f)
        with open(os.path.join(cfg, "config.toml"), "w") as f:
            f.write(
                '[permissions]\nallow = ["mcp__h__*"]\n[mcp.servers.h]\n'
                f'command = "/usr/bin/python3"\nargs = [{json.dumps(HOSTILE)}]\n'
                f'env = {{ HOSTILE_SPEC = {json.dumps(spec_file)} }}\n'
                f"timeout_s = {timeout}\n"
            )
        first = {"name": "mcp__h__t" if case == "baseline" else "mcp__h__f",
                 "args": {"bytes": FLOOD} if action else {}}
        calls = [first, {"name": "mcp__h__t", "args": {}}]
        env = dict(os.environ, DSH_HOME=os.path.join(tmp, "home"), DSH_CONFIG_HOME=cfg,
                   HOME=tmp)
        out_file = os.path.join(tmp, "out")
        with open(out_file, "w") as out:
            started = time.monotonic()
            p = subprocess.Popen([dsh, "--workspace", ws, "batch", "-"], stdin=subprocess.PIPE,
                                 stdout=out, stderr=subprocess.DEVNULL, env=env)
            p.stdin.write("".join(json.dumps(c) + "\n" for c in calls).encode())
            p.stdin.close()
            peak = 0
            while p.poll() is None:
                peak = max(peak, vmhwm_kib(p.pid) or 0)
                time.sleep(0.005)
            wall = time.monotonic() - started
        with open(out_file) as f:
            results = [json.loads(line) for line in f if line.strip()]
        kinds = [r.get("failure_kind") or "ok" for r in results]
        return wall, peak, kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsh", default=os.path.join(ROOT, "target/debug/dsh"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=120)
    a = ap.parse_args()
    print(f"dsh: {a.dsh}, {a.runs} runs per case, median")
    for case in ("baseline", "huge", "junk"):
        got = [run(a.dsh, case, a.timeout) for _ in range(a.runs)]
        wall = statistics.median(g[0] for g in got)
        peak = statistics.median(g[1] for g in got)
        kinds = sorted({"/".join(g[2]) for g in got})
        print(f"{case:9} wall {wall:7.2f} s   peak RSS {peak / 1024:6.1f} MiB   results {kinds}")


main()
