#!/usr/bin/env python3
"""Where a served request's CPU goes: `moat serve` of one handler pinned to
CPU 0, wrk (16 connections) on CPU 1, `perf record -e cpu-clock` of the
server for 5 s, and the samples split into:

    wakeups      the kernel waking the load generator's thread on the
                 other CPU when a response is sent
    faults       the kernel taking page faults (the next instance touching
                 pages the last one's were handed back)
    decommit     the kernel handing pages back (madvise, unmapping, TLB
                 flushes)
    reset        libc's memcpy/memset and the kernel's PAGEMAP_SCAN (a slot
                 put back in place: finding the written pages, copying)
    guest        the guest's own code (wasmtime's JIT code)
    instantiate  wasmtime making the instance (core instances, imports,
                 function references, the pool slot)
    wasi-http    wasmtime-wasi and wasmtime-wasi-http (resources, fields,
                 streams)
    hyper        hyper, h2, http-body
    moat         moat's own code
    network      the kernel's TCP and the system calls that drive it
    other        the rest (tokio, the allocator, ...)

Software clock samples only: this machine has no hardware counters
(`perf stat -e instructions` says not supported).

Usage: bench/profile_handler.py [--top=N] MOAT COMPONENT PATH [SECONDS]

--top=N also prints the N symbols with the most samples, each with its
class.
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

CLASSES = [
    # Waking a thread on the other CPU (the load generator, when a response
    # is sent; `perf record -g` puts these under sock_def_readable): on a VM
    # the wakeup's interrupt is paid where interrupts are enabled again.
    ("wakeups", r"\[k\] (_raw_spin_unlock_irqrestore|try_to_wake_up|ttwu_)"),
    ("faults", r"\[k\] (exc_page_fault|handle_mm_fault|__handle_mm_fault|do_wp_page|do_fault|filemap_map_pages|"
               r"next_uptodate_folio|set_pte_range|set_ptes|copy_mc_|clear_page|do_anonymous_page|"
               r"folio_add_|__lruvec_stat|mod_memcg|memcg|charge_memcg|__mem_cgroup|alloc_pages|"
               r"get_page_from_freelist|__alloc_frozen|vma_alloc_folio|lock_vma_under_rcu|pte_offset|"
               r"___pte_offset|mas_walk|shmem_|get_vma_policy|vm_normal_page|filemap_|wp_page|"
               r"__rcu_read|_raw_spin|folio_|blk_cgroup|__mod_node_page_state|__list_del|get_mem_cgroup|"
               r"alloc_pages_mpol|__pte_offset|do_read_fault|do_set_pte)"),
    ("decommit", r"\[k\] (unmap_page_range|zap_|flush_tlb|free_pages_and_swap_cache|folios_put|"
                 r"tlb_|madvise|release_pages|free_unref|__tlb|page_remove_rmap|folio_remove_rmap|"
                 r"do_madvise|native_flush_tlb|smp_call_function)"),
    ("reset", r"libc\.so\.6\s+\[\.\] __mem(move|set|cpy)|\[k\] pagemap_scan"),
    ("guest", r"\[JIT\]"),
    ("instantiate", r"moat\S*\s+\[\.\] .*(wasmtime::runtime::(component::instance|vm::instance|instance::|"
                    r"module::registry|vm::instance::allocator|store::|vm::cow|vm::memory|vm::table)|"
                    r"wasmtime_environ::module_artifacts|func_loc|cranelift_bforest|lookup_vmdef|"
                    r"wasmtime_environ::key|wasmtime::runtime::component::(linker|func|store)|"
                    r"InstancePre|Instantiator)"),
    ("wasi-http", r"moat\S*\s+\[\.\] .*(wasmtime_wasi_http|wasmtime_wasi::|wasmtime_wasi_io|ResourceTable|"
                  r"wasmtime::runtime::component::resource)"),
    ("hyper", r"moat\S*\s+\[\.\] .*(hyper::|h2::|http_body|httparse|http::header)"),
    ("moat", r"moat\S*\s+\[\.\] .*moat_host"),
    ("network", r"\[k\] (tcp_|__tcp|ip_|__ip|inet_|__inet|sock_|__sock|skb|__skb|net_rx|__netif|"
                r"process_backlog|loopback|__dev_queue|dev_hard|sys_|__x64_sys|do_syscall|entry_SYSCALL|"
                r"syscall_|ep_|do_epoll|__sys_|vfs_|copy_user|_copy_to_iter|_copy_from_iter|"
                r"__check_object_size|fput|fdget|__fget)"),
]


def main():
    top = 0
    args = []
    for arg in sys.argv[1:]:
        if arg.startswith("--top="):
            top = int(arg.split("=", 1)[1])
        else:
            args.append(arg)
    if len(args) < 3:
        raise SystemExit(__doc__)
    moat, component, path = args[:3]
    seconds = int(args[3]) if len(args) > 3 else 5
    cache = tempfile.mkdtemp(prefix="moat-profile-")
    subprocess.run([moat, "compile", f"--cache-dir={cache}", component], check=True,
                   stdout=subprocess.DEVNULL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}{path}"
    server = subprocess.Popen(["taskset", "-c", "0", moat, "serve", f"--cache-dir={cache}",
                               f"--addr=127.0.0.1:{port}", component],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = os.path.join(cache, "perf.data")
    try:
        for _ in range(300):
            if subprocess.run(["curl", "-sf", "-o", "/dev/null", url]).returncode == 0:
                break
            time.sleep(0.1)
        subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c16", "-d2s", url], stdout=subprocess.DEVNULL)
        load = subprocess.Popen(["taskset", "-c", "1", "wrk", "-t1", "-c16", f"-d{seconds + 2}s", url],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-p", str(server.pid),
                        "-o", data, "--", "sleep", str(seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out, _ = load.communicate()
    finally:
        server.terminate()
        server.wait()
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)
    report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym",
                             "--stdio"], capture_output=True, text=True).stdout
    shares = {name: 0.0 for name, _ in CLASSES}
    shares["other"] = 0.0
    symbols = []
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(.*)", line)
        if not m:
            continue
        share, rest = float(m.group(1)), m.group(2)
        for name, pattern in CLASSES:
            if re.search(pattern, rest):
                break
        else:
            name = "other"
        shares[name] += share
        symbols.append((share, name, " ".join(rest.split())))
    cpu_us = 1e6 / float(rps)
    print(f"{os.path.basename(component)}: {float(rps):,.0f} requests/s on one core; "
          f"{cpu_us:.0f} µs a request")
    for name, share in shares.items():
        print(f"  {name:12} {share:5.1f}%  {share / 100 * cpu_us:6.0f} µs")
    for share, name, symbol in sorted(symbols, reverse=True)[:top]:
        print(f"  {share:5.1f}%  {name:12} {symbol[:110]}")


if __name__ == "__main__":
    main()
