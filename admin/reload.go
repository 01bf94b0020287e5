package admin

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/fault"
)

// Reloader is what a Backend that can read its config file again adds:
// POST /admin/reload applies the file, as SIGHUP does.
type Reloader interface {
	// Reload reads the config file again, checks it, and applies what
	// changed. A file that does not pass the checks changes nothing: the
	// error (fault.Invalid) names each problem by file, line and field.
	Reload(ctx context.Context) (Reload, error)
}

// Reload is what a reload did. Every list is sorted; empty lists are
// left out.
type Reload struct {
	// File is the config file read.
	File string `json:"file"`
	// HomesAdded, HomesChanged and HomesRemoved are home ids; a changed
	// home was registered again (its warm verdict goes with it), an
	// unchanged one was left as it was.
	HomesAdded   []string `json:"homes_added,omitempty"`
	HomesChanged []string `json:"homes_changed,omitempty"`
	HomesRemoved []string `json:"homes_removed,omitempty"`
	// HomesKept are homes the file no longer declares that could not be
	// removed yet, each with the reason ("alice: the home has sessions").
	HomesKept []string `json:"homes_kept,omitempty"`
	// AppsAdded, AppsChanged and AppsRemoved are app slugs.
	AppsAdded   []string `json:"apps_added,omitempty"`
	AppsChanged []string `json:"apps_changed,omitempty"`
	AppsRemoved []string `json:"apps_removed,omitempty"`
	// Applied are the other settings that changed and now apply, by
	// field ("wake.hold", "access").
	Applied []string `json:"applied,omitempty"`
	// NeedRestart are the settings that changed in the file but apply
	// only at the next start ("listen", "server.drain_grace"); the gateway
	// keeps running with the values it started with.
	NeedRestart []string `json:"need_restart,omitempty"`
}

// reloadRoutes adds POST /admin/reload.
func (s *Server) reloadRoutes(r chi.Router) {
	r.Post("/admin/reload", s.postReload)
}

// postReload serves POST /admin/reload.
func (s *Server) postReload(w http.ResponseWriter, r *http.Request) {
	rl, ok := s.b.(Reloader)
	if !ok {
		s.fail(w, r, fault.New(fault.Unavailable, "reload_unavailable", "this gateway cannot reload its config"))
		return
	}
	res, err := rl.Reload(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
