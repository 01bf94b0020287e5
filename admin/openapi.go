package admin

import (
	_ "embed"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
)

// openAPI is the OpenAPI 3.1 description of the admin API. A test checks
// it against the routes the server really serves, and validates it.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 description of the admin API (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// serveOpenAPI serves GET /admin/openapi.json.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// Route is one method and path pattern the admin listener serves, the
// pattern written as in OpenAPI ("/admin/homes/{id}").
type Route struct {
	Method  string
	Pattern string
}

// Routes returns every route the server serves, sorted; catch-all
// patterns (ending in "*") are left out.
func (s *Server) Routes() []Route {
	var out []Route
	_ = chi.Walk(s.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasSuffix(route, "*") {
			out = append(out, Route{Method: method, Pattern: route})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pattern != out[j].Pattern {
			return out[i].Pattern < out[j].Pattern
		}
		return out[i].Method < out[j].Method
	})
	return out
}
