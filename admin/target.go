package admin

import (
	"net/http"
	"strings"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// TargetRequest is the body of PUT /admin/target.
type TargetRequest struct {
	// Version is the version homes roll onto. Required, at most
	// MaxVersionLen characters.
	Version string `json:"version"`
	// Image is what image-based providers run the version from.
	Image string `json:"image"`
	// Command is the exec provider's command template for the version;
	// empty for the provider's default.
	Command []string `json:"command"`
}

// MaxVersionLen bounds a version string: the bound of a version a home
// reports.
const MaxVersionLen = provider.MaxVersionLen

// check names the first bad field of a target request.
func (req TargetRequest) check() error {
	switch {
	case strings.TrimSpace(req.Version) == "" || len(req.Version) > MaxVersionLen:
		return fault.New(fault.Invalid, "invalid", "version: required, at most 128 characters").WithField("version")
	case len(req.Command) > 0 && req.Command[0] == "":
		return fault.New(fault.Invalid, "invalid", "command: the first element must name a program").WithField("command")
	}
	return nil
}

func (s *Server) getTarget(w http.ResponseWriter, r *http.Request) {
	t, err := s.b.GetTarget(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(t.Generation))
	writeJSON(w, http.StatusOK, t)
}

// putTarget registers the roll target. If-Match, when given, must be the
// stored target's generation.
func (s *Server) putTarget(w http.ResponseWriter, r *http.Request) {
	gen, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req TargetRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := req.check(); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.b.SetTarget(r.Context(), registry.Target{Version: req.Version, Image: req.Image, Command: req.Command}, gen)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("roll target set", "version", t.Version)
	w.Header().Set("ETag", etag(t.Generation))
	writeJSON(w, http.StatusOK, t)
}
