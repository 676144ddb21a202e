"""py-json: a wasi:http 0.2 proxy (componentize-py) doing what a small real
handler does, for the bench's handler rows: it reads the method, the path
and query and the headers, and answers a small JSON document built with the
standard library's json module:

    {"method": "GET", "path": "/items", "query": {"id": ["7"]},
     "headers": 2, "agent": "wrk"}
"""

import json
from urllib.parse import parse_qs, urlsplit

from componentize_py_types import Ok
from wit_world import exports
from wit_world.imports.types import Fields, Method_Other, OutgoingBody, OutgoingResponse, ResponseOutparam


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request, response_out: ResponseOutparam) -> None:
        method = request.method()
        name = method.value if isinstance(method, Method_Other) else type(method).__name__.split("_")[-1].upper()
        url = urlsplit(request.path_with_query() or "/")
        headers = request.headers().entries()
        agent = next((v.decode("latin-1") for k, v in headers if k == "user-agent"), None)
        text = json.dumps(
            {"method": name, "path": url.path, "query": parse_qs(url.query), "headers": len(headers), "agent": agent}
        ).encode() + b"\n"
        response = OutgoingResponse(
            Fields.from_list([("content-type", b"application/json"), ("content-length", str(len(text)).encode())])
        )
        response.set_status_code(200)
        body = response.body()
        ResponseOutparam.set(response_out, Ok(response))
        stream = body.write()
        stream.blocking_write_and_flush(text)
        stream.__exit__(None, None, None)
        OutgoingBody.finish(body, None)
