package admin

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/refresh"
)

// RefreshView is the answer of POST /admin/homes/{id}/refresh: what the
// refresh found (the provider's state) and changed, and the home as it is
// afterwards.
type RefreshView struct {
	Refresh refresh.Result `json:"refresh"`
	Home    HomeView       `json:"home"`
}

// refreshHome asks the home's provider for its state and makes the record
// agree: 200 with what was found and done, also when the provider did not
// answer (refresh.provider is then unknown, with the reason and the hint);
// 409 while a wake or another operation on the home runs.
func (s *Server) refreshHome(w http.ResponseWriter, r *http.Request) {
	v, err := s.b.RefreshHome(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(v.Home.Generation))
	writeJSON(w, http.StatusOK, v)
}
