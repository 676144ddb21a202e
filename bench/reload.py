#!/usr/bin/env python3
"""The reload row: what a client on a new connection waits while `moat
serve` reloads a component it has never compiled.

The server serves FROM (with --no-cache, so every load is a compile);
wrk holds it under load on new connections (`Connection: close`: every
request opens one, as clients behind a load balancer do); after
--settle seconds TO is copied over the served file and the server gets
SIGHUP. From the SIGHUP until stderr says "moat: reloaded", a probe opens
one new connection after another and times each request to its last
byte. A round without the reload, same load, same length, is the
baseline.

The server is pinned to CPU 0 and wrk to CPU 1; the probe (one request
at a time) runs beside wrk. The compile is the server's own work, on its
core, as it is in production.

Usage:
    bench/reload.py --moat PATH --from WASM --to WASM
        [--rounds 3] [--seconds 20] [--settle 2] [--connections 4]

Prints a Markdown table: the compile time the server reported, requests
probed during it and their slowest, and wrk's requests/s, p99 and max
over the whole run, each as the median of the rounds with min..max.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, timeout=60):
    """One GET / on a new connection; seconds to the response's end."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
        head = b""
        while chunk := s.recv(65536):
            head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"the probe got {head[:40]!r}")
    return time.monotonic() - began


def wait_ready(port, proc):
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"moat serve exited ({proc.returncode}) before serving")
        try:
            request(port, timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("moat serve never answered")


def seconds(text):
    """wrk's latency figure ("456.00us", "1.23ms", "1.50s", "2.00m") in seconds."""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def parse_wrk(out):
    latency = re.search(r"^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)\s*$", out, re.M)
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p99": seconds(p99.group(1)),
        "max": seconds(latency.group(3)),
    }


def one_round(args, reload):
    work = tempfile.mkdtemp(prefix="moat-reload-bench-")
    served = os.path.join(work, "handler.wasm")
    shutil.copyfile(args.from_, served)
    port = free_port()
    log = open(os.path.join(work, "stderr"), "w+")
    proc = subprocess.Popen(
        ["taskset", "-c", "0", args.moat, "serve", "--no-cache", f"--addr=127.0.0.1:{port}", served],
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_ready(port, proc)
        wrk = subprocess.Popen(
            ["taskset", "-c", "1", "wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s",
             "--timeout", "60s", "--latency", "-H", "Connection: close",
             f"http://127.0.0.1:{port}/"],
            stdout=subprocess.PIPE, text=True)
        time.sleep(args.settle)
        probed, compile_s = [], None
        if reload:
            shutil.copyfile(args.to, served + ".new")
            os.rename(served + ".new", served)
            proc.send_signal(signal.SIGHUP)
            done = threading.Event()

            def probe():
                while not done.is_set():
                    probed.append(request(port))

            prober = threading.Thread(target=probe)
            prober.start()
            deadline = time.monotonic() + 300
            while compile_s is None and time.monotonic() < deadline:
                log.seek(0)
                text = log.read()
                m = re.search(r"moat: reloaded .* in ([\d.]+) s", text)
                if m:
                    compile_s = float(m.group(1))
                elif "moat: reload failed" in text:
                    raise SystemExit("the reload failed; stderr is in " + log.name)
                else:
                    time.sleep(0.05)
            done.set()
            prober.join()
            if compile_s is None:
                raise SystemExit("the reload never finished")
        out, _ = wrk.communicate()
        row = parse_wrk(out)
        row["compile"] = compile_s
        row["probed"] = len(probed)
        row["probe_max"] = max(probed) if probed else None
        return row
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def spread(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}..{fmt(max(values))})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--moat", required=True)
    parser.add_argument("--from", dest="from_", required=True)
    parser.add_argument("--to", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--settle", type=float, default=2)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()

    rows = {"steady": [], "reload": []}
    for _ in range(args.rounds):
        for name in rows:
            rows[name].append(one_round(args, name == "reload"))

    ms = lambda s: f"{s * 1e3:.1f} ms"  # noqa: E731
    print("| run | compile | probed | slowest probed | wrk requests/s | wrk p99 | wrk max |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        print(f"| {name} | {spread([r['compile'] for r in runs], lambda s: f'{s:.1f} s')} "
              f"| {spread([r['probed'] for r in runs], lambda n: f'{n:.0f}')} "
              f"| {spread([r['probe_max'] for r in runs], ms)} "
              f"| {spread([r['rps'] for r in runs], lambda n: f'{n:.0f}')} "
              f"| {spread([r['p99'] for r in runs], ms)} "
              f"| {spread([r['max'] for r in runs], ms)} |")


if __name__ == "__main__":
    main()
