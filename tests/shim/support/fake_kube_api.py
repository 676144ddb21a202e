"""The part of a Kubernetes API server the node installer uses, for its
tests (tests/shim/installer.rs): Leases in one namespace (create, which
fails with 409 when the name is taken; get; delete, honouring a
resourceVersion precondition) and a merge patch of a node's labels.

    python3 fake_kube_api.py STATE_DIR

Listens on 127.0.0.1 (a free port), writes the port to STATE_DIR/port,
and keeps what it holds as JSON files in STATE_DIR (lease-NAME.json,
node-NAME.json), so that a test can read or seed them. While the file
STATE_DIR/fail-get exists, every GET fails with 500 and a body that is
not JSON. One request at a time, as the API server's storage orders
writes to one object.
"""

import http.server
import json
import os
import re
import sys

STATE = sys.argv[1]
LEASE = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$")
NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")
version = [0]


def path(kind, name):
    return os.path.join(STATE, f"{kind}-{name}.json")


def load(kind, name):
    try:
        with open(path(kind, name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def store(kind, name, obj):
    version[0] += 1
    obj.setdefault("metadata", {})["resourceVersion"] = str(version[0])
    with open(path(kind, name) + ".tmp", "w") as f:
        json.dump(obj, f)
    os.rename(path(kind, name) + ".tmp", path(kind, name))


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self):
        m = LEASE.match(self.path)
        if not m or m.group(2):
            return self.reply(404, {})
        lease = self.body()
        name = lease["metadata"]["name"]
        if load("lease", name) is not None:
            return self.reply(409, {"reason": "AlreadyExists"})
        store("lease", name, lease)
        self.reply(201, load("lease", name))

    def do_GET(self):
        if os.path.exists(os.path.join(STATE, "fail-get")):
            body = b"<html>internal error</html>"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        m = LEASE.match(self.path)
        lease = load("lease", m.group(2)) if m and m.group(2) else None
        self.reply(200 if lease else 404, lease or {})

    def do_DELETE(self):
        m = LEASE.match(self.path)
        if not m or not m.group(2):
            return self.reply(404, {})
        lease = load("lease", m.group(2))
        if lease is None:
            return self.reply(404, {})
        want = self.body().get("preconditions", {}).get("resourceVersion")
        if want and want != lease["metadata"]["resourceVersion"]:
            return self.reply(409, {"reason": "Conflict"})
        os.remove(path("lease", m.group(2)))
        self.reply(200, {})

    def do_PATCH(self):
        m = NODE.match(self.path)
        if not m:
            return self.reply(404, {})
        node = load("node", m.group(1)) or {"metadata": {"name": m.group(1), "labels": {}}}
        for key, value in self.body().get("metadata", {}).get("labels", {}).items():
            if value is None:
                node["metadata"]["labels"].pop(key, None)
            else:
                node["metadata"]["labels"][key] = value
        store("node", m.group(1), node)
        self.reply(200, node)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(STATE, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(STATE, "port.tmp"), os.path.join(STATE, "port"))
server.serve_forever()
