"""py-isolation: a wasi:http 0.2 proxy (componentize-py) for the isolation
tests. `GET /plant/SEED[/PORT]` leaves a secret derived from SEED in a
module global, in `builtins`, in `sys.modules`, in a class attribute and in
1 MiB of heap (a bytearray); with PORT it then GETs http://127.0.0.1:PORT/
and waits for the answer (a test acts on the host while the instance holds
the secret); it answers `planted`. `GET /probe/SEED` looks in each place and answers `clean`, or
`found` and the places it was found.

The secret is never in a request: both sides derive it from the seed.
"""

import builtins
import hashlib
import sys

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import outgoing_handler
from wit_world.imports import types as http
from wit_world.imports.streams import StreamError_Closed
from wit_world.imports.types import Fields, OutgoingBody, OutgoingResponse, ResponseOutparam

PLANTED = None
HEAP = []


class Holder:
    secret = None


def secret_of(seed: str) -> bytes:
    return hashlib.sha256(b"moat isolation " + seed.encode()).digest()


def wait_on(port: str) -> None:
    """GETs http://127.0.0.1:PORT/ and reads its answer to the end."""
    request = http.OutgoingRequest(http.Fields())
    request.set_method(http.Method_Get())
    request.set_scheme(http.Scheme_Http())
    request.set_authority(f"127.0.0.1:{int(port)}")
    request.set_path_with_query("/")
    body = request.body()
    future = outgoing_handler.handle(request, None)
    http.OutgoingBody.finish(body, None)
    while (answer := future.get()) is None:
        future.subscribe().block()
    response = answer.value.value
    incoming = response.consume()
    stream = incoming.stream()
    try:
        while True:
            stream.blocking_read(65536)
    except Err as e:
        if not isinstance(e.value, StreamError_Closed):
            raise
    # Children go before their parents, or the host traps.
    stream.__exit__(None, None, None)
    http.IncomingBody.finish(incoming)


def plant(secret: bytes) -> str:
    global PLANTED
    PLANTED = secret
    builtins.moat_isolation_secret = secret
    sys.modules["moat_isolation_secret"] = type(sys)("moat_isolation_secret")
    sys.modules["moat_isolation_secret"].value = secret
    Holder.secret = secret
    HEAP.append(bytearray(secret * (1 << 15)))
    return "planted\n"


def probe(secret: bytes) -> str:
    places = []
    if PLANTED == secret:
        places.append("global")
    if getattr(builtins, "moat_isolation_secret", None) == secret:
        places.append("builtins")
    module = sys.modules.get("moat_isolation_secret")
    if module is not None and getattr(module, "value", None) == secret:
        places.append("sys.modules")
    if Holder.secret == secret:
        places.append("class")
    if any(chunk[: len(secret)] == secret for chunk in HEAP):
        places.append("heap")
    return "found " + " ".join(places) + "\n" if places else "clean\n"


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request, response_out: ResponseOutparam) -> None:
        parts = (request.path_with_query() or "/").strip("/").split("/")
        status, text = 404, "not found\n"
        if len(parts) in (2, 3) and parts[0] == "plant":
            status, text = 200, plant(secret_of(parts[1]))
            if len(parts) == 3:
                wait_on(parts[2])
        elif len(parts) == 2 and parts[0] == "probe":
            status, text = 200, probe(secret_of(parts[1]))
        body_bytes = text.encode()
        response = OutgoingResponse(
            Fields.from_list([("content-type", b"text/plain"), ("content-length", str(len(body_bytes)).encode())])
        )
        response.set_status_code(status)
        body = response.body()
        ResponseOutparam.set(response_out, Ok(response))
        stream = body.write()
        stream.blocking_write_and_flush(body_bytes)
        stream.__exit__(None, None, None)
        OutgoingBody.finish(body, None)
