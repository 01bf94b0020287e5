package execprov

import (
	"slices"

	"github.com/wakegate/wakegate/provider"
)

// HistoryLimit is how many supervisor restarts a Provider remembers per home.
const HistoryLimit = 20

// History returns the supervisor's last HistoryLimit restarts of home id,
// oldest first (nil when there were none). It is read-only and safe for
// concurrent use; it lives in memory and starts empty with each Provider.
func (e *Provider) History(id string) []provider.Restart {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.homes[id]
	if h == nil || len(h.history) == 0 {
		return nil
	}
	return slices.Clone(h.history)
}

// rtRemember appends r to h's history, keeping the last HistoryLimit;
// e.mu is held.
func (h *home) rtRemember(r provider.Restart) {
	if len(h.history) >= HistoryLimit {
		h.history = slices.Delete(h.history, 0, len(h.history)-HistoryLimit+1)
	}
	h.history = append(h.history, r)
}

// ResetBudget forgets the restarts counted against home id's restart
// budget and the reason the supervisor gave up on it, if it did: an
// operator's start gives the home its full budget again. The restart
// history (History) is kept: it is a record, not a budget.
func (e *Provider) ResetBudget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h := e.homes[id]; h != nil {
		h.restarts = nil
		h.failed = ""
	}
}

var _ provider.BudgetResetter = (*Provider)(nil)
