"""py-client: a wasi:cli/run 0.2 command built by componentize-py.

    tcp HOST PORT MESSAGE   asyncio client: send MESSAGE, print the answer
    http URL                GET through wasi:http/outgoing-handler

`tcp` goes through CPython's own socket module, as any Python program
would. asyncio.run() makes its self-pipe with socket.socketpair(), which
on WASI falls back to listening on 127.0.0.1:0 and connecting to itself,
so a host must let the program do that before the real connect.

Success prints one `got: ...` line (tcp) or `status: N` then the body
(http) and exits 0. Failure prints `error: TYPE ...` and exits 1; for an
OSError, `errno=N NAME` (WASI's numbers are not Linux's: EACCES is 2).
"""

import asyncio
import encodings.idna  # noqa: F401 (see tcp())
import errno
import ipaddress
import socket
import sys
from urllib.parse import urlsplit

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import outgoing_handler
from wit_world.imports import wasi_http_types as http
from wit_world.imports.streams import StreamError_Closed

USAGE = "usage: py-client tcp HOST PORT MESSAGE | http URL"


class Run(exports.Run):
    def run(self) -> None:
        args = sys.argv[1:]
        try:
            if len(args) == 4 and args[0] == "tcp":
                data = asyncio.run(tcp(args[1], int(args[2]), args[3].encode()))
                say("got: " + data.decode(errors="replace"))
            elif len(args) == 2 and args[0] == "http":
                status, body = http_get(args[1])
                say(f"status: {status}")
                say(body.decode(errors="replace"))
            else:
                say(USAGE)
                raise Err(None)
        except Err:
            raise
        except OSError as e:
            # WASI numbers errno its own way (EACCES is 2): print the name too.
            name = errno.errorcode.get(e.errno, "?")
            say(f"error: {type(e).__name__} errno={e.errno} {name} {e.strerror or e}")
            raise Err(None)
        except Exception as e:
            say(f"error: {type(e).__name__} {e}")
            raise Err(None)


def say(line: str) -> None:
    print(line, flush=True)


async def tcp(host: str, port: int, message: bytes) -> bytes:
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        # asyncio looks names up on a thread pool, which this CPython lacks
        # (concurrent.futures.thread is not there): look it up first, and
        # try each address in turn, as asyncio would. The lookup encodes the
        # name with the idna codec, which componentize-py bundles only if the
        # app imports it at build time (above).
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [info[4][0] for info in infos]

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        for address in addresses[:-1]:
            try:
                return await asyncio.open_connection(address, port)
            except OSError:
                pass
        return await asyncio.open_connection(addresses[-1], port)

    async def exchange() -> bytes:
        reader, writer = await connect()
        writer.write(message)
        await writer.drain()
        data = b""
        # An echo server answers as many bytes as it got; others may close.
        while len(data) < len(message):
            chunk = await reader.read(65536)
            if not chunk:
                break
            data += chunk
        writer.close()
        await writer.wait_closed()
        return data

    return await asyncio.wait_for(exchange(), 30)


class HttpError(Exception):
    pass


def http_get(url: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    request = http.OutgoingRequest(http.Fields())
    request.set_method(http.Method_Get())
    request.set_scheme(http.Scheme_Https() if parts.scheme == "https" else http.Scheme_Http())
    request.set_authority(parts.netloc)
    request.set_path_with_query((parts.path or "/") + ("?" + parts.query if parts.query else ""))
    # A GET has no body, but the request's body must be finished before the
    # host can send it.
    body = request.body()
    try:
        future = outgoing_handler.handle(request, None)
    except Err as e:
        raise HttpError(f"request refused: {e.value}")
    http.OutgoingBody.finish(body, None)

    while (answer := future.get()) is None:
        future.subscribe().block()
    if isinstance(answer, Err) or isinstance(answer.value, Err):
        error = answer.value if isinstance(answer, Ok) else answer
        raise HttpError(f"{error.value}")
    response = answer.value.value

    incoming = response.consume()
    stream = incoming.stream()
    data = b""
    while True:
        try:
            data += stream.blocking_read(65536)
        except Err as e:
            if isinstance(e.value, StreamError_Closed):
                break
            raise HttpError(f"body: {e.value}")
    # Children go before their parents, or the host traps.
    stream.__exit__(None, None, None)
    http.IncomingBody.finish(incoming)
    return response.status(), data
