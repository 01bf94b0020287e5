# A home that forks sleepers until a fork fails (its process cap), at
# most 2000 and for at most 60 s, writes what it got to bomb.json in its
# folder, then serves HTTP on PORT.
# Arguments: PORT FOLDER
import http.server
import json
import os
import sys
import time

port, folder = int(sys.argv[1]), sys.argv[2]
forked, error = 0, ""
deadline = time.monotonic() + 60
while forked < 2000 and time.monotonic() < deadline:
    try:
        pid = os.fork()
    except OSError as e:
        error = "%s: %s" % (type(e).__name__, e)
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    forked += 1
with open(os.path.join(folder, "bomb.json"), "w") as f:
    json.dump({"forked": forked, "error": error}, f)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
