# A home that writes the descriptors it holds (each with what it points
# to) to fds.json in its working folder, then serves HTTP: on PORT, or on
# the listening socket of descriptor 3 under socket activation.
# Arguments: PORT
import http.server
import json
import os
import socket
import sys

fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink("/proc/self/fd/" + name)
    except OSError:
        pass  # the listing's own descriptor, closed by now
with open("fds.json", "w") as f:
    json.dump(fds, f)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args):
        pass


if os.environ.get("LISTEN_FDS") == "1":
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    server.socket = socket.socket(fileno=3)
else:
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.serve_forever()
