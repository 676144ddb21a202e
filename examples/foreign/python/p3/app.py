"""py-p3: a wasi:cli/run 0.3 command (async export) built by componentize-py.

    tcp HOST PORT MESSAGE   connect with wasi:sockets 0.3 (a name is looked
                            up with ip-name-lookup 0.3), send MESSAGE, print
                            the answer as `got: ...`

componentize-py's 0.3 event loop has no socket support, so this talks to
the generated wasi:sockets@0.3.0 bindings directly (CPython's own socket
module would still use wasi-libc's 0.2 sockets). Failure prints
`error: CODE` (the WIT error-code case, e.g. ErrorCode_AccessDenied) and
exits 1.
"""

import asyncio
import ipaddress
import sys

import wit_world
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import ip_name_lookup
from wit_world.imports.wasi_sockets_types import (
    IpAddress_Ipv4,
    IpAddress_Ipv6,
    IpAddressFamily,
    IpSocketAddress_Ipv4,
    IpSocketAddress_Ipv6,
    Ipv4SocketAddress,
    Ipv6SocketAddress,
    TcpSocket,
)

USAGE = "usage: py-p3 tcp HOST PORT MESSAGE"


class Run(exports.Run):
    async def run(self) -> None:
        args = sys.argv[1:]
        if len(args) != 4 or args[0] != "tcp":
            say(USAGE)
            raise Err(None)
        try:
            data = await tcp(args[1], int(args[2]), args[3].encode())
        except Err as e:
            say(f"error: {e.value}")
            raise Err(None)
        except Exception as e:
            say(f"error: {type(e).__name__} {e}")
            raise Err(None)
        say("got: " + data.decode(errors="replace"))


def say(line: str) -> None:
    print(line, flush=True)


def socket_address(ip, port: int):
    if isinstance(ip, IpAddress_Ipv4):
        return IpSocketAddress_Ipv4(Ipv4SocketAddress(port=port, address=ip.value))
    if isinstance(ip, IpAddress_Ipv6):
        return IpSocketAddress_Ipv6(Ipv6SocketAddress(port=port, flow_info=0, address=ip.value, scope_id=0))
    if ip.version == 4:
        return IpSocketAddress_Ipv4(Ipv4SocketAddress(port=port, address=tuple(ip.packed)))
    b = ip.packed
    words = tuple((b[i] << 8) | b[i + 1] for i in range(0, 16, 2))
    return IpSocketAddress_Ipv6(Ipv6SocketAddress(port=port, flow_info=0, address=words, scope_id=0))


async def connect(host: str, port: int) -> TcpSocket:
    try:
        ips = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        # A name: the host judges the lookup, then each connect.
        ips = await ip_name_lookup.resolve_addresses(host)
    failure = Err(f"no address for {host}")
    for ip in ips:
        address = socket_address(ip, port)
        family = IpAddressFamily.IPV4 if isinstance(address, IpSocketAddress_Ipv4) else IpAddressFamily.IPV6
        sock = TcpSocket.create(family)
        try:
            await sock.connect(address)
            return sock
        except Err as e:
            # Try the next address (e.g. localhost's ::1 refused, 127.0.0.1 next).
            failure = e
            sock.__exit__(None, None, None)
    raise failure


async def tcp(host: str, port: int, message: bytes) -> bytes:
    sock = await connect(host, port)

    out_writer, out_reader = wit_world.byte_stream()
    sent = sock.send(out_reader)
    incoming, received = sock.receive()

    async def send() -> None:
        with out_writer:
            await out_writer.write_all(message)

    async def read() -> bytes:
        data = b""
        with incoming:
            while len(data) < len(message):
                chunk = await incoming.read(65536)
                if not chunk and incoming.writer_dropped:
                    break
                data += chunk
        return data

    _, data = await asyncio.gather(send(), read())
    # Surface a send error (the receive side ended early without one).
    result = await sent.read()
    if isinstance(result, Err):
        raise result
    return data
