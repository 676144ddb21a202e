#!/usr/bin/env python3
"""The handler rows: the wasi:http handlers people write, served as a user
serves them, under load from wrk.

Each handler is served by `moat serve`, by the harness's `wasmtime serve`
(`moat-bench serve-wasi-http`: wasmtime-wasi-http's own ProxyHandler, as
`wasmtime serve -Scli` sets it up), and, where one exists, by the
language's own server:

    rust        wstd-serve.wasm (examples/wstd-serve), GET /
    javascript  js-hello.wasm (componentize-js, examples/foreign/js/hello.js),
                and Node's own `http` (bench/node-hello.js)
    javascript-proxy  js-proxy-hello.wasm: the same hello in the whole
                wasi:http/proxy world (every import it names linked)
    python      py-json.wasm (componentize-py, examples/foreign/python/json),
                GET /items?id=7: parses the request, answers JSON
    big-memory  big-memory.wasm (bench/guests/big-memory): a 256 MiB initial
                memory (1 MiB of it initialized) of which a request writes
                8 KiB, GET /

The server is pinned to CPU 0 and wrk to CPU 1 (`taskset`), so the client's
cost is not the server's; the server's CPU per request is its own user and
system time (/proc/PID/stat) over the requests wrk counted. With
--both-cores, moat serve also runs unpinned (both CPUs) with wrk on CPU 1:
the client then shares a core with the server: the server's CPU per
request is still its own time alone, and wrk's own CPU per request (what
it took from the server's second core) is printed beside the row.

Usage:
    bench/handlers.py --moat PATH --harness PATH --components DIR
        [--rust WASM] [--rounds 3] [--seconds 10] [--warmup 3]
        [--connections 1,16] [--only rust,javascript,python]
        [--servers moat,wasmtime,native] [--both-cores] [--baseline MOAT]
        [--wasmtime-cli WASMTIME] [--out FILE]

--baseline MOAT serves each handler with another build of moat too
("moat serve (baseline)"), in the same rounds: an A/B. --wasmtime-cli
WASMTIME serves each with the real wasmtime CLI too (`wasmtime serve -Scli`,
its own compile cache warm after the first round), beside the harness.

Prints a Markdown table: requests/s, p50 and p99 (median of the rounds,
min..max beside), server CPU per request, the server's page faults per
request (minor and major, /proc/PID/stat), the bytes of memory moat serve
restored per request (its --metrics, moat_instance_memory_reset_bytes_total;
a moat without that figure shows -), and moat's ratio to each other server
on the same handler in the same run.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid):
    """User plus system time of `pid` and its threads, in seconds."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def faults(pid):
    """Minor plus major page faults of `pid` and its threads."""
    fields = stat_fields(pid)
    return int(fields[7]) + int(fields[9])


def reset_bytes(metrics_port):
    """moat serve's moat_instance_memory_reset_bytes_total, or None."""
    try:
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    except OSError:
        return None
    m = re.search(rb"^moat_instance_memory_reset_bytes_total (\d+)", data, re.M)
    return int(m.group(1)) if m else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, path, proc, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode}) before serving")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".encode())
                if s.recv(12).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("server never answered")


def parse_wrk(out):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(m.group(1)), m.group(2)
        return value * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    return rps, total, ms("50"), ms("99")


def run_wrk(port, path, connections, seconds, cpu="1"):
    cmd = ["taskset", "-c", cpu, "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
           f"http://127.0.0.1:{port}{path}"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    return out, proc.pid, time.monotonic() - start


def measure(server_cmd, cpus, path, connections, args, env=None):
    """One round: start, warm up, measure, stop."""
    port = free_port()
    metrics_port = free_port() if any("{MPORT}" in c for c in server_cmd) else None
    cmd = [c.replace("{PORT}", str(port)).replace("{MPORT}", str(metrics_port)) for c in server_cmd]
    proc = subprocess.Popen(["taskset", "-c", cpus] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        wait_ready(port, path, proc)
        run_wrk(port, path, connections, args.warmup)
        reset0 = reset_bytes(metrics_port) if metrics_port else None
        faults0 = faults(proc.pid)
        before = cpu_seconds(proc.pid)
        # wrk's own CPU, for the both-cores row: from its rusage.
        r0 = os.times()
        out, _, _ = run_wrk(port, path, connections, args.seconds)
        r1 = os.times()
        after = cpu_seconds(proc.pid)
        faults1 = faults(proc.pid)
        reset1 = reset_bytes(metrics_port) if metrics_port else None
        rps, total, p50, p99 = parse_wrk(out)
        client = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
        # The requests between the two scrapes: wrk's, give or take the
        # few in flight at either end.
        restored = (reset1 - reset0) / total if reset0 is not None and reset1 is not None else None
        return {"rps": rps, "p50": p50, "p99": p99,
                "cpu_us": (after - before) / total * 1e6,
                "client_cpu_us": client / total * 1e6,
                "faults": (faults1 - faults0) / total,
                "restored": restored}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kib(value):
    return f"{value / 1024:,.0f}"


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}..{fmt(max(values))})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--moat", required=True)
    p.add_argument("--harness", required=True, help="moat-bench (serve-wasi-http)")
    p.add_argument("--components", required=True, help="examples/foreign/build.sh's output")
    p.add_argument("--rust", help="wstd-serve.wasm")
    p.add_argument("--big-memory", help="big-memory.wasm (bench/guests/big-memory)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--connections", default="1,16")
    p.add_argument("--only", default="rust,javascript,javascript-proxy,python,big-memory")
    p.add_argument("--servers", default="moat,wasmtime,native")
    p.add_argument("--both-cores", action="store_true")
    p.add_argument("--baseline", help="another moat binary, served beside")
    p.add_argument("--wasmtime-cli", help="the wasmtime CLI, served beside")
    p.add_argument("--moat-flag", action="append", default=[],
                   help="an extra flag for moat serve (repeatable)")
    p.add_argument("--out")
    args = p.parse_args()

    cache = tempfile.mkdtemp(prefix="moat-handlers-")
    handlers = {
        "rust": (args.rust, "/", None),
        "javascript": (os.path.join(args.components, "js-hello.wasm"), "/",
                       ["node", os.path.join(HERE, "node-hello.js"), "{PORT}"]),
        "javascript-proxy": (os.path.join(args.components, "js-proxy-hello.wasm"), "/", None),
        "python": (os.path.join(args.components, "py-json.wasm"), "/items?id=7", None),
        "big-memory": (args.big_memory, "/", None),
    }
    wanted = args.only.split(",")
    servers = args.servers.split(",")
    rows = []
    for name in wanted:
        component, path, native = handlers[name]
        if not component or not os.path.exists(component):
            print(f"skipping {name}: no component ({component})", file=sys.stderr)
            continue
        subprocess.run([args.moat, "compile", f"--cache-dir={cache}/moat", component],
                       check=True, stdout=subprocess.DEVNULL)
        kinds = []
        if "moat" in servers:
            kinds.append(("moat serve", "0", [args.moat, "serve", f"--cache-dir={cache}/moat",
                                              "--addr=127.0.0.1:{PORT}", "--metrics=127.0.0.1:{MPORT}",
                                              *args.moat_flag, component]))
        if args.baseline:
            subprocess.run([args.baseline, "compile", f"--cache-dir={cache}/baseline", component],
                           check=True, stdout=subprocess.DEVNULL)
            kinds.append(("moat serve (baseline)", "0",
                          [args.baseline, "serve", f"--cache-dir={cache}/baseline",
                           "--addr=127.0.0.1:{PORT}", "--metrics=127.0.0.1:{MPORT}",
                           *args.moat_flag, component]))
        if "wasmtime" in servers:
            kinds.append(("wasmtime serve (harness)", "0",
                          [args.harness, "serve-wasi-http", "--cache-dir", f"{cache}/wasmtime",
                           "127.0.0.1:{PORT}", component]))
        if args.wasmtime_cli:
            kinds.append(("wasmtime serve (CLI)", "0",
                          [args.wasmtime_cli, "serve", "-Scli", "--addr=127.0.0.1:{PORT}", component]))
        if "native" in servers and native:
            kinds.append(("node http" if name == "javascript" else "native", "0", native))
        if args.both_cores and "moat" in servers:
            kinds.append(("moat serve, both cores", "0,1", kinds[0][2]))
        for connections in [int(c) for c in args.connections.split(",")]:
            for label, cpus, cmd in kinds:
                results = [measure(cmd, cpus, path, connections, args) for _ in range(args.rounds)]
                row = {"handler": name, "server": label, "connections": connections,
                       "rps": [r["rps"] for r in results], "p50": [r["p50"] for r in results],
                       "p99": [r["p99"] for r in results], "cpu": [r["cpu_us"] for r in results],
                       "client": [r["client_cpu_us"] for r in results],
                       "faults": [r["faults"] for r in results],
                       "restored": [r["restored"] for r in results if r["restored"] is not None]}
                rows.append(row)
                print(f"{name} {label} c={connections}: {spread(row['rps'], lambda v: f'{v:,.0f}')} req/s, "
                      f"p99 {spread(row['p99'], lambda v: f'{v:.2f}')} ms, "
                      f"cpu {spread(row['cpu'], lambda v: f'{v:.0f}')} us/req, "
                      f"wrk's cpu {spread(row['client'], lambda v: f'{v:.0f}')} us/req, "
                      f"faults {spread(row['faults'], lambda v: f'{v:.1f}')}/req, "
                      f"restored {spread(row['restored'], kib) if row['restored'] else '-'} KiB/req",
                      file=sys.stderr, flush=True)

    lines = ["| handler | server | conns | requests/s | p50 ms | p99 ms | server CPU µs/request "
             "| page faults/request | KiB restored/request | moat / it (req/s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        moat = next((r for r in rows if r["handler"] == row["handler"] and r["server"] == "moat serve"
                     and r["connections"] == row["connections"]), None)
        ratio = ""
        if moat and row["server"] not in ("moat serve",):
            m, o = moat["rps"], row["rps"]
            ratio = (f"{statistics.median(m) / statistics.median(o):.2f} "
                     f"({min(m) / max(o):.2f}..{max(m) / min(o):.2f})")
        cpu = row["cpu"]
        lines.append(
            f"| {row['handler']} | {row['server']} | {row['connections']} | "
            f"{spread(row['rps'], lambda v: f'{v:,.0f}')} | {spread(row['p50'], lambda v: f'{v:.2f}')} | "
            f"{spread(row['p99'], lambda v: f'{v:.2f}')} | {spread(cpu, lambda v: f'{v:.0f}')} | "
            f"{spread(row['faults'], lambda v: f'{v:.1f}')} | "
            f"{spread(row['restored'], kib) if row['restored'] else '-'} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
