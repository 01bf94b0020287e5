package route

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// rootRoutes serves GET / (a small page, or the configured redirect,
// rather than a bare 404) and GET /favicon.ico on the public listener.
func (p *Path) rootRoutes(r chi.Router) {
	redirect := p.rootRedirect
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		if redirect != "" {
			http.Redirect(w, r, redirect, http.StatusFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !strings.Contains(r.Header.Get("Accept"), "text/html") {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(rootText))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "+
			"base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		_, _ = fmt.Fprintf(w, rootHTML, html.EscapeString(r.Header.Get("X-Request-Id")))
	})
	icon := favicon()
	r.Get("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write(icon)
	})
}

// rootText is GET / for clients that do not ask for HTML. It names no
// home, app or internal detail.
const rootText = "wakegate: apps are at /apps/{name}/ and homes at /node/{name}/\n"

// rootHTML is GET / for browsers; %s is the request id.
const rootHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wakegate</title><link rel="icon" href="/favicon.ico">
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222;background:#fff}
code{background:#f2f2f2;padding:0 .25rem;border-radius:3px}
small{color:#777}
@media (prefers-color-scheme: dark){body{color:#ddd;background:#161616}code{background:#2a2a2a}small{color:#999}}
</style></head>
<body><main>
<h1>wakegate</h1>
<p>This gateway wakes sleeping backends on their first request. Apps are at
<code>/apps/{name}/</code> and homes at <code>/node/{name}/</code>: follow the
link you were given.</p>
<p><small>request %s</small></p>
</main></body></html>
`

// favicon draws the gateway's icon, a crescent moon (a sleeping backend),
// as a 32x32 PNG inside an ICO container.
func favicon() []byte {
	const n = 32
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	moon := color.NRGBA{R: 0xf2, G: 0xb7, B: 0x05, A: 0xff}
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			dx, dy := float64(x)-15.5, float64(y)-15.5
			ex, ey := float64(x)-22, float64(y)-10
			if dx*dx+dy*dy <= 14*14 && ex*ex+ey*ey > 11*11 {
				img.SetNRGBA(x, y, moon)
			}
		}
	}
	var pngBuf bytes.Buffer
	_ = png.Encode(&pngBuf, img) // an in-memory image always encodes
	var b bytes.Buffer
	// ICONDIR: reserved, type 1 (icon), one image.
	_ = binary.Write(&b, binary.LittleEndian, [3]uint16{0, 1, 1})
	// ICONDIRENTRY: width, height, colours, reserved, planes, bit count,
	// size of the image data, offset of the image data.
	b.Write([]byte{n, n, 0, 0})
	_ = binary.Write(&b, binary.LittleEndian, [2]uint16{1, 32})
	_ = binary.Write(&b, binary.LittleEndian, [2]uint32{uint32(pngBuf.Len()), 6 + 16})
	b.Write(pngBuf.Bytes())
	return b.Bytes()
}
