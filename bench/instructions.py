#!/usr/bin/env python3
"""What a TCP round trip costs moat's process in user space, counted, not
timed: the echo guests under `moat run`, each run under valgrind's
cachegrind, with a client on this machine sending 64-byte messages and
waiting for each echo.

Two runs per guest, of FEW and MANY round trips; what differs between
them divided by MANY - FEW is what one round trip costs, with start-up,
compilation and exit cancelled out:

    instructions   user-space instructions executed (moat, libc, the
                   guest's compiled code)
    I1 misses      first-level instruction cache misses (in the
                   caches of CACHES below, whatever this machine has)
    data refs      loads and stores

(First-level data cache misses are left out: a round trip has about
none, and the difference of two runs' totals is then noise.)

They move far less with the machine's load than time does, not at all
with its clock or its neighbours' use of the caches, so a change of a few
percent shows where a timed benchmark's rounds spread wider than that (a
shared VM). They do move a little: when the guest polls and finds
nothing yet, that poll is counted too, and how often it does depends on
timing (a few percent between runs on a loaded machine); hence ROUNDS
rounds, the builds interleaved, and each figure's median (min..max).
They do not see the kernel: the system calls and context switches of a
round trip are counted by `perf stat` in BENCHMARKS.md, not here.

Usage: bench/instructions.py [--baseline DIR] [--trips FEW,MANY]
                             [--rounds ROUNDS] [DIR]

DIR (default target) holds release/moat and
guests/wasm32-wasip2/release/*.wasm, as a `cargo build --release` and the
test guests' build leave them; --baseline DIR another such build, counted
in the same run, with the ratio of each figure.
"""

import argparse
import os
import re
import statistics
import socket
import subprocess
import sys
import tempfile

GUESTS = [
    # (row, component, its arguments before the address)
    ("std::net (wasi:sockets 0.2)", "bench-std.wasm", ["echo"]),
    ("moat:net", "echo-server.wasm", []),
]
MESSAGE = b"x" * 64
# The caches cachegrind models, fixed so that the counts are the same on
# every machine (left to itself it reads them from the CPU, or falls back
# to a guess): 32 KiB, 8-way first-level caches and a 32 MiB last level,
# the sizes of the 2-core VMs BENCHMARKS.md's runs use, apart from their
# 64 KiB L1.
CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=33554432,16,64"]
FIGURES = [
    ("instructions", r"I\s+refs:\s+([\d,]+)"),
    ("I1 misses", r"I1\s+misses:\s+([\d,]+)"),
    ("data refs", r"D\s+refs:\s+([\d,]+)"),
]


def serve_and_count(build, component, args, trips, scratch):
    """Runs the echo guest under cachegrind for `trips` round trips and
    returns cachegrind's totals for the whole process."""
    moat = os.path.join(build, "release", "moat")
    wasm = os.path.join(build, "guests", "wasm32-wasip2", "release", component)
    report = os.path.join(scratch, "cachegrind.err")
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHES,
               "--cachegrind-out-file=/dev/null",
               # wasmtime writes the guest's code at run time
               "--smc-check=all-non-file",
               moat, "run", "--allow-listen=127.0.0.1:0", wasm, *args, "127.0.0.1:0"]
    with open(report, "w") as err:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            line = server.stdout.readline()
            match = re.search(r":(\d+)\s*$", line)
            if not match:
                sys.exit(f"{moat}: expected 'listening on ADDR', got {line!r}")
            with socket.create_connection(("127.0.0.1", int(match.group(1)))) as client:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for _ in range(trips):
                    client.sendall(MESSAGE)
                    got = 0
                    while got < len(MESSAGE):
                        chunk = client.recv(65536)
                        if not chunk:
                            sys.exit(f"{moat}: the echo closed after {got} bytes")
                        got += len(chunk)
        finally:
            server.terminate()
            server.wait()
    text = open(report).read()
    totals = {}
    for name, pattern in FIGURES:
        match = re.search(pattern, text)
        if not match:
            sys.exit(f"cachegrind reported no {name}:\n{text[-2000:]}")
        totals[name] = int(match.group(1).replace(",", ""))
    return totals


def per_trip(build, component, args, few, many, scratch):
    # One run first so that both counted runs find the component compiled
    # in moat's cache (a compile in one run and not the other would not
    # cancel).
    serve_and_count(build, component, args, 1, scratch)
    low = serve_and_count(build, component, args, few, scratch)
    high = serve_and_count(build, component, args, many, scratch)
    return {name: (high[name] - low[name]) / (many - few) for name, _ in FIGURES}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", nargs="?", default="target")
    parser.add_argument("--baseline")
    parser.add_argument("--trips", default="1000,5000")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    few, many = (int(n) for n in options.trips.split(","))
    if not 0 < few < many:
        sys.exit("--trips FEW,MANY: 0 < FEW < MANY")
    builds = [("moat", options.build)]
    if options.baseline:
        builds.append(("baseline", options.baseline))
    if options.rounds < 1:
        sys.exit("--rounds: at least 1")
    with tempfile.TemporaryDirectory() as scratch:
        print(f"| guest | figure a round trip | {' | '.join(n for n, _ in builds)}"
              f"{' | moat / baseline' if options.baseline else ''} |")
        print("|---|---|" + "---|" * (len(builds) + (1 if options.baseline else 0)))
        for row, component, args in GUESTS:
            # counted[build][round]: the builds take turns, round by round.
            counted = [[] for _ in builds]
            for _ in range(options.rounds):
                for i, (_, directory) in enumerate(builds):
                    counted[i].append(per_trip(directory, component, args, few, many, scratch))
            for name, _ in FIGURES:
                medians = [statistics.median(r[name] for r in rounds) for rounds in counted]
                cells = [f"{m:,.0f} ({min(r[name] for r in rounds):,.0f}.."
                         f"{max(r[name] for r in rounds):,.0f})"
                         for m, rounds in zip(medians, counted)]
                if options.baseline:
                    cells.append(f"{medians[0] / medians[1]:.3f}" if medians[1] else "-")
                print(f"| {row} | {name} | {' | '.join(cells)} |")
                row = ""

if __name__ == "__main__":
    main()
