package gateway_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
)

// realSocketIOServer is a socket.io chat home: it serves a page that
// connects with the default transports (long-polling first, then the
// upgrade to WebSocket), greets each socket, and echoes what it is sent.
// argv: port, the socket.io package's folder.
const realSocketIOServer = `const http = require("http");
const { Server } = require(process.argv[3]);
const page = '<!doctype html><meta charset="utf-8"><title>chat</title><div id="log"></div>' +
  '<script src="/socket.io/socket.io.js"></script><script>' +
  'window.got = []; window.firstTransport = ""; window.upgraded = "";' +
  'const s = io();' +
  's.io.on("open", () => { window.firstTransport = s.io.engine.transport.name;' +
  '  s.io.engine.on("upgrade", t => { window.upgraded = t.name; }); });' +
  's.on("said", m => { window.got.push(m); document.getElementById("log").textContent = window.got.join("|"); });' +
  'window.say = m => s.emit("say", m);' +
  '</script>';
const srv = http.createServer((req, res) => { res.setHeader("content-type", "text/html"); res.end(page); });
const io = new Server(srv);
io.on("connection", s => {
  s.emit("said", "hello");
  s.on("say", m => s.emit("said", "echo:" + m));
});
srv.listen(Number(process.argv[2]), "127.0.0.1");
`

// TestRealAppSocketIO runs a socket.io app (npm socket.io) in a sleeping
// home under host routing: Chromium connects cold, long-polling upgrades
// to WebSocket through the gateway, messages go both ways, and the home
// counts a session while the page is open and none once its tab is closed.
func TestRealAppSocketIO(t *testing.T) {
	realTimed(t)
	sio, node := realNodeModule(t, "socket.io")
	realNodeModule(t, "socket.io-client") // served as /socket.io/socket.io.js
	dir := t.TempDir()
	server := filepath.Join(dir, "server.js")
	if err := os.WriteFile(server, []byte(realSocketIOServer), 0o644); err != nil {
		t.Fatal(err)
	}
	a, port := realGateway(t, "off", fmt.Sprintf(`hosts:
  apps_domain: localhost
homes:
  - id: chat
    command: [%q, %q, "{port}", %q]
    working_dir: %q
apps:
  - slug: chat
    home: chat
`, node, server, sio, dir))
	browser := realBrowser(t, "socketio.png")
	ctx, closeTab := realTab(t, browser)

	start := time.Now()
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://chat.localhost:"+port+"/"),
		realPoll(`window.upgraded === "websocket" && window.got.indexOf("hello") >= 0`, 40*time.Second))
	if err != nil {
		t.Fatalf("cold connect: %v\n%s", err, a.logs.String())
	}
	t.Logf("cold connect and upgrade: %v", time.Since(start).Round(time.Millisecond))
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.firstTransport`))
	if err != nil || first != "polling" {
		t.Errorf("first transport %q (%v), want polling", first, err)
	}
	err = chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`void window.say("over the socket")`),
		realPoll(`window.got.indexOf("echo:over the socket") >= 0`, 10*time.Second))
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if status, sessions := realHomeStatus(t, a, "chat"); status != "running" || sessions < 1 {
		t.Errorf("while the page is open: status %q, %d sessions; want running with a session", status, sessions)
	}

	closeTab()
	testbin.Eventually(t, "no session once the tab is closed", func() bool {
		_, sessions := realHomeStatus(t, a, "chat")
		return sessions == 0
	})
}
