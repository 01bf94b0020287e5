package admin

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
)

// Denial is one request an access policy refused, as operators see it.
type Denial struct {
	At     time.Time `json:"at"`
	Policy string    `json:"policy"`
	// Route is "node/{target}" or "app/{slug}".
	Route  string `json:"route"`
	Status int    `json:"status"`
	// Code is the public code the caller got; Reason is why, for
	// operators (the policy's own words: which claim, which check).
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Client    string `json:"client"`
	RequestID string `json:"request_id"`
}

// DenialCount counts the refusals of one policy with one code since the
// gateway started.
type DenialCount struct {
	Policy string `json:"policy"`
	Code   string `json:"code"`
	Count  uint64 `json:"count"`
}

// DenialLog is the answer of GET /admin/access/denials: the last refusals,
// newest first, and the counts since start.
type DenialLog struct {
	Recent []Denial      `json:"recent"`
	Counts []DenialCount `json:"counts"`
}

// Denials is what a Backend that runs access policies adds: its recent
// refusals. GET /admin/access/denials answers 404 without it.
type Denials interface {
	AccessDenials() DenialLog
}

// FleetView is the answer of GET /admin/fleet.
type FleetView struct {
	// Fleet is false for a gateway on its own store (Instances then lists
	// nothing).
	Fleet     bool            `json:"fleet"`
	Instances []FleetInstance `json:"instances"`
}

// accessRoutes mounts the views of access denials and of the fleet.
func (s *Server) accessRoutes(r chi.Router) {
	r.Get("/admin/access/denials", s.getDenials)
	r.Get("/admin/fleet", s.getFleet)
}

func (s *Server) getDenials(w http.ResponseWriter, r *http.Request) {
	d, ok := s.b.(Denials)
	if !ok {
		s.noRoute(w, r)
		return
	}
	writeJSON(w, http.StatusOK, d.AccessDenials())
}

func (s *Server) getFleet(w http.ResponseWriter, r *http.Request) {
	v := FleetView{Instances: []FleetInstance{}}
	if f, ok := s.b.(Fleet); ok {
		in, err := f.FleetInstances(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if in != nil { // nil: a gateway on its own store
			v.Fleet, v.Instances = true, in
		}
	}
	writeJSON(w, http.StatusOK, v)
}
