package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/wakegate/wakegate/forward"
)

// originApp is an upstream with its own origin check, as Jupyter's and
// code-server's: a request whose Origin names another host than its Host
// is refused (403), WebSocket upgrades included (gorilla's default
// CheckOrigin makes the same comparison). Every other request is answered
// with the fields the gateway sets, one "Name: value" a line.
func originApp(t *testing.T) *url.URL {
	t.Helper()
	up := websocket.Upgrader{} // CheckOrigin nil: Origin's host must equal Host
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return // the upgrader answered 403
			}
			defer c.Close()
			_ = c.WriteMessage(websocket.TextMessage, []byte("host="+r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if ou, err := url.Parse(o); err != nil || !strings.EqualFold(ou.Host, r.Host) {
				http.Error(w, "Blocking Cross Origin API request. Origin: "+o+", Host: "+r.Host, http.StatusForbidden)
				return
			}
		}
		var b strings.Builder
		b.WriteString("Host: " + r.Host + "\n")
		for _, k := range []string{"X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-For", "Forwarded", "X-Real-Ip", "Origin"} {
			b.WriteString(k + ": " + strings.Join(r.Header[k], ",") + "\n")
		}
		_, _ = io.WriteString(w, b.String())
	})
	return up0(t, u)
}

func up0(t *testing.T, u *upstream) *url.URL { return u.url(t, "/") }

// fronts are the four ways a request reaches a proxy in these tests:
// net/http or h1serve's loop, each with the direct path or forced
// through ReverseProxy.
func fronts(t *testing.T, o Options, route func() *forward.Route) map[string]string {
	t.Helper()
	d, _ := frontFor(t, o, route, "")
	rp, prp := frontFor(t, o, route, "")
	prp.noDirect = true
	ld, _ := loopFrontFor(t, o, route, diffHost, nil)
	lrp, plrp := loopFrontFor(t, o, route, diffHost, nil)
	plrp.noDirect = true
	return map[string]string{"net/http direct": d.URL, "net/http ReverseProxy": rp.URL,
		"loop direct": ld, "loop ReverseProxy": lrp}
}

// TestOriginCheckPasses checks that an app that compares Origin with Host
// accepts a browser's same-origin requests through the gateway, by
// default, on every forward path, WebSockets included: the app gets the
// client's Host.
func TestOriginCheckPasses(t *testing.T) {
	app := originApp(t)
	route := func() *forward.Route { return &forward.Route{Kind: "node", Name: "nb", HomeID: "h", Upstream: app} }
	for name, base := range fronts(t, testOptions(), route) {
		t.Run(name, func(t *testing.T) {
			req := newReq(t, http.MethodPost, base+"/node/nb/api/contents", strings.NewReader("{}"))
			req.Host = diffHost
			req.Header.Set("Origin", "http://"+diffHost)
			res, body := do(t, req)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("POST with the page's Origin: %d %q", res.StatusCode, body)
			}
			want := "Host: " + diffHost + "\nX-Forwarded-Host: " + diffHost + "\nX-Forwarded-Proto: http\n" +
				"X-Forwarded-For: 127.0.0.1\nForwarded: \nX-Real-Ip: 127.0.0.1\nOrigin: http://" + diffHost + "\n"
			if body != want {
				t.Errorf("the app received\n%s\nwant\n%s", body, want)
			}
		})
	}
	// The WebSocket relay, through both servers.
	for name, base := range fronts(t, testOptions(), route) {
		if strings.HasSuffix(name, "direct") {
			continue // upgrades never take the direct path
		}
		t.Run(name+" websocket", func(t *testing.T) {
			d := websocket.Dialer{NetDialContext: (&net.Dialer{}).DialContext}
			h := http.Header{"Origin": {"http://" + diffHost}, "Host": {diffHost}}
			c, res, err := d.Dial(strings.Replace(base, "http://", "ws://", 1)+"/node/nb/api/kernels/k/channels", h)
			if err != nil {
				st := 0
				if res != nil {
					st = res.StatusCode
				}
				t.Fatalf("WebSocket with the page's Origin: %v (status %d)", err, st)
			}
			defer c.Close()
			_, msg, err := c.ReadMessage()
			if err != nil || string(msg) != "host="+diffHost {
				t.Fatalf("first message %q, %v; want host=%s", msg, err, diffHost)
			}
		})
	}
}

// TestHostOverride checks the per-route choices of Host: the upstream's
// address, a fixed value, and the client's even toward https upstreams'
// default; on every forward path.
func TestHostOverride(t *testing.T) {
	app := originApp(t)
	for _, c := range []struct {
		rule, want string
	}{{HostUpstream, app.Host}, {"notebook.internal:8888", "notebook.internal:8888"}, {HostClient, diffHost}} {
		o := testOptions()
		o.Host = HostPolicy{Default: HostClient, Homes: map[string]string{"nb": c.rule}}
		route := func() *forward.Route { return &forward.Route{Kind: "node", Name: "nb", HomeID: "h", Upstream: app} }
		for name, base := range fronts(t, o, route) {
			t.Run(c.rule+"/"+name, func(t *testing.T) {
				req := newReq(t, http.MethodGet, base+"/node/nb/", nil)
				req.Host = diffHost
				_, body := do(t, req)
				if !strings.HasPrefix(body, "Host: "+c.want+"\nX-Forwarded-Host: "+diffHost+"\n") {
					t.Errorf("with host %q the app received\n%s\nwant Host %s", c.rule, body, c.want)
				}
			})
		}
	}
	// An app that no rule names gets the default; the default of the
	// default is the client's Host.
	o := testOptions()
	o.Host = HostPolicy{Homes: map[string]string{"other": HostUpstream}}
	route := func() *forward.Route { return &forward.Route{Kind: "app", Name: "nb", Upstream: app} }
	for name, base := range fronts(t, o, route) {
		req := newReq(t, http.MethodGet, base+"/apps/nb/", nil)
		req.Host = diffHost
		if _, body := do(t, req); !strings.HasPrefix(body, "Host: "+diffHost+"\n") {
			t.Errorf("%s: an app no rule names received\n%s", name, body)
		}
	}
}

// rawNames is an upstream that records the field names of each request
// head as they were written on the wire (no canonical form), as a WSGI
// server reads them, and answers 200.
type rawNames struct {
	mu    sync.Mutex
	heads [][]string
}

func newRawNames(t *testing.T) (*rawNames, *url.URL) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rn := &rawNames{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					var names []string
					for first := true; ; first = false {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						line = strings.TrimRight(line, "\r\n")
						if line == "" {
							break
						}
						if !first {
							name, _, _ := strings.Cut(line, ":")
							names = append(names, name+"="+strings.TrimSpace(line[len(name)+1:]))
						}
					}
					rn.mu.Lock()
					rn.heads = append(rn.heads, names)
					rn.mu.Unlock()
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
						return
					}
				}
			}()
		}
	}()
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	return rn, u
}

func (rn *rawNames) last() []string {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if len(rn.heads) == 0 {
		return nil
	}
	return rn.heads[len(rn.heads)-1]
}

// TestNoForgedIdentity checks that no spelling of an identity header (the
// gateway's own, or one a policy sets: X-User here) reaches an upstream
// from a client: dashes or underscores, any case, on every path.
func TestNoForgedIdentity(t *testing.T) {
	rn, u := newRawNames(t)
	o := testOptions()
	o.Protected = func(name string) bool { return name == "X-User" || name == "X-Email" }
	route := func() *forward.Route {
		return &forward.Route{Kind: "node", Name: "n", HomeID: "h", Upstream: u, RelayToken: testToken}
	}
	forged := []string{"X_User", "x_user", "X_USER", "x_User", "X_email", "X_Real_Ip", "x_forwarded_host",
		"X_Wakegate_Relay", "x_wakegate_probe", "Forwarded"}
	for name, base := range fronts(t, o, route) {
		t.Run(name, func(t *testing.T) {
			req := newReq(t, http.MethodGet, base+"/node/n/", nil)
			req.Host = diffHost
			for _, k := range forged {
				req.Header[k] = []string{"admin"}
			}
			req.Header["X_Keep"] = []string{"kept"} // no protected name: untouched
			res, body := do(t, req)
			if res.StatusCode != http.StatusOK || body != "ok" {
				t.Fatalf("%d %q", res.StatusCode, body)
			}
			got := rn.last()
			kept := false
			for _, f := range got {
				name, v, _ := strings.Cut(f, "=")
				n := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
				switch {
				case n == "x-keep":
					kept = true
				case v == "admin":
					t.Errorf("forged %s reached the upstream", name)
				}
			}
			if !kept {
				t.Errorf("X_Keep did not reach the upstream: %q", got)
			}
		})
	}
}
