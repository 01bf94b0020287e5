package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/fault"
)

// Reloader is what a Backend that can read its config file again adds:
// POST /admin/reload applies the file, as SIGHUP does.
type Reloader interface {
	// Reload reads the config file again, checks it, and applies what
	// changed. A file that does not pass the checks changes nothing: the
	// error (fault.Invalid) names each problem by file, line and field. A
	// file that is empty, or that would remove every home and app of the
	// config, changes nothing either (fault.Conflict, reload_removes_all)
	// unless opts.AllowRemoveAll confirms it.
	Reload(ctx context.Context, opts ReloadOptions) (Reload, error)
}

// ReloadOptions are a reload's confirmations.
type ReloadOptions struct {
	// AllowRemoveAll applies a file that is empty or declares no home and
	// no app although the running config declares some (query
	// allow_remove_all=true). Default false: such a file is refused.
	AllowRemoveAll bool
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
	var opts ReloadOptions
	switch q := r.URL.Query().Get("allow_remove_all"); q {
	case "", "false", "0":
	case "true", "1":
		opts.AllowRemoveAll = true
	default:
		s.fail(w, r, fault.New(fault.Invalid, "invalid",
			fmt.Sprintf("allow_remove_all: want true or false, got %q", q)).WithField("allow_remove_all"))
		return
	}
	res, err := rl.Reload(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
