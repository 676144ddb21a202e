"""py-handler: a wasi:http 0.2 proxy (exports incoming-handler) built by
componentize-py. Every request gets 200 and the body

    hello from python
    METHOD PATH
"""

from componentize_py_types import Ok
from wit_world import exports
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    Method_Other,
    OutgoingBody,
    OutgoingResponse,
    ResponseOutparam,
)


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: IncomingRequest, response_out: ResponseOutparam) -> None:
        method = request.method()
        name = method.value if isinstance(method, Method_Other) else type(method).__name__.split("_")[-1].upper()
        text = f"hello from python\n{name} {request.path_with_query() or '/'}\n".encode()

        response = OutgoingResponse(
            Fields.from_list([("content-type", b"text/plain"), ("content-length", str(len(text)).encode())])
        )
        response.set_status_code(200)
        body = response.body()
        ResponseOutparam.set(response_out, Ok(response))
        stream = body.write()
        stream.blocking_write_and_flush(text)
        # The stream is the body's child: drop it before finishing the body.
        stream.__exit__(None, None, None)
        OutgoingBody.finish(body, None)
