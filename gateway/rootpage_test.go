package gateway_test

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRootPageAndFavicon: / answers a small page (HTML for browsers, a
// line of text otherwise) that names no home or app, and /favicon.ico a
// real icon; with server.root_redirect, / redirects there.
func TestRootPageAndFavicon(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, "homes:\n  - id: secret-home\n")
	c := e2eClient(t)
	cases := []struct {
		path, accept, ctype, want string
	}{
		{"/", "text/html", "text/html", "<code>/apps/{name}/</code>"},
		{"/", "*/*", "text/plain", "/node/{name}/"},
	}
	for _, cs := range cases {
		res, body := e2eGet(t, c, "http://"+gw.addr+cs.path, http.Header{"Accept": {cs.accept}})
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), cs.ctype) ||
			!strings.Contains(string(body), cs.want) {
			t.Errorf("GET %s (Accept %s): %d %s %q", cs.path, cs.accept, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		if strings.Contains(string(body), "secret-home") {
			t.Errorf("GET %s names a home", cs.path)
		}
	}
	res, body := e2eGet(t, c, "http://"+gw.addr+"/favicon.ico", nil)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "image/x-icon" || len(body) < 22 {
		t.Fatalf("favicon: %d %s %d bytes", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}
	var dir [3]uint16
	if err := binary.Read(bytes.NewReader(body), binary.LittleEndian, &dir); err != nil || dir != [3]uint16{0, 1, 1} {
		t.Fatalf("favicon header %v: want an icon of one image", dir)
	}
	img, err := png.Decode(bytes.NewReader(body[22:]))
	if err != nil || img.Bounds().Dx() != 32 {
		t.Fatalf("favicon image: %v", err)
	}

	redir := e2eStartInProcess(t, "server:\n  root_redirect: https://example.com/welcome\n")
	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err = nc.Get("http://" + redir.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != "https://example.com/welcome" {
		t.Fatalf("root redirect: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}
