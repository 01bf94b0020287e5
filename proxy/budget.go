package proxy

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// LimitMarker is a response writer that keeps the name of the limit that
// refused its request, for the access log (the public listener's
// recorder).
type LimitMarker interface {
	MarkLimit(scope string)
}

// MarkLimit records on w, or a writer it wraps, that a limit of scope
// refused the request; nothing when no writer keeps it.
func MarkLimit(w http.ResponseWriter, scope string) {
	for range 16 {
		switch x := w.(type) {
		case LimitMarker:
			x.MarkLimit(scope)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// The body budget: what the read-ahead of request bodies (spool.go) may
// hold at once, in memory and spool files together, per client address
// and over all clients. A body is admitted only when its reservation fits
// both: the bytes it can hold at most (its length, when known, up to
// BodyBuffer plus BodySpool), or, for a body of unknown length, its
// memory buffer first and then its spool a piece at a time. A body that
// cannot be admitted gets 503 with Retry-After (413 when it could never
// fit, being larger than a budget by itself); one of unknown length whose
// next piece does not fit stops spooling there and is forwarded as it
// arrives, as a body past the spool is. Nothing already admitted is
// touched: a budget only refuses new bytes.

// BodyBudgetRetry is the Retry-After of a body refused for the budget.
const BodyBudgetRetry = 5 * time.Second

// spoolPiece is how much spool a body of unknown length reserves at a
// time.
const spoolPiece = 1 << 20

// bodyBudget is the budget's books. Its methods are safe for concurrent
// use; a nil budget admits everything.
type bodyBudget struct {
	perClient, total int64 // zero: no limit

	mu      sync.Mutex
	used    int64
	clients map[string]int64
	// refused counts the bodies refused, for metrics.
	refused atomic.Int64
}

func newBodyBudget(perClient, total int64) *bodyBudget {
	if perClient <= 0 && total <= 0 {
		return nil
	}
	return &bodyBudget{perClient: perClient, total: total, clients: map[string]int64{}}
}

// never reports whether n bytes could never fit, whatever else is held.
func (b *bodyBudget) never(n int64) bool {
	return b != nil && ((b.perClient > 0 && n > b.perClient) || (b.total > 0 && n > b.total))
}

// take reserves n bytes for client; false when they do not fit now.
func (b *bodyBudget) take(client string, n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if (b.perClient > 0 && b.clients[client]+n > b.perClient) || (b.total > 0 && b.used+n > b.total) {
		return false
	}
	b.clients[client] += n
	b.used += n
	return true
}

// give returns n bytes of client's reservation.
func (b *bodyBudget) give(client string, n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.clients[client] -= n; b.clients[client] <= 0 {
		delete(b.clients, client)
	}
}

// BodyBudgetStats are the body budget's figures now.
type BodyBudgetStats struct {
	// Used is the bytes reserved by bodies being read ahead, in memory
	// and spool files, and Clients the client addresses holding some.
	Used    int64 `json:"used_bytes"`
	Clients int   `json:"clients"`
	// PerClient and Total are the budgets (0: none).
	PerClient int64 `json:"per_client_bytes"`
	Total     int64 `json:"total_bytes"`
	// Refused counts the bodies refused since the start.
	Refused int64 `json:"refused"`
}

// BodyBudget returns the body budget's figures; zero when there is none.
func (p *Proxy) BodyBudget() BodyBudgetStats {
	b := p.budget
	if b == nil {
		return BodyBudgetStats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return BodyBudgetStats{Used: b.used, Clients: len(b.clients), PerClient: b.perClient, Total: b.total,
		Refused: b.refused.Load()}
}

// overBudget is the answer to a body the budget cannot admit now; never
// when it could not be admitted at all.
func overBudget(never bool) *fault.Error {
	if never {
		return fault.New(fault.TooLarge, "body_over_budget", "The request body is too large for this gateway.")
	}
	return fault.New(fault.NotReady, "body_budget_full",
		"Too many request bodies are being received; try again shortly.").WithRetry(BodyBudgetRetry)
}

// budgetRefused is the error spool returns when the budget refused a body.
type budgetRefused struct{ fe *fault.Error }

func (e *budgetRefused) Error() string { return e.fe.Error() }

// bodyRefused answers a request whose body the budget refused, before
// anything of it was read: the connection closes after the answer (the
// body is unread), the access log names the limit, and the operator's
// log says what to raise.
func (p *Proxy) bodyRefused(w http.ResponseWriter, r *http.Request, route *forwarding, fe *fault.Error) {
	st := p.BodyBudget()
	p.opts.Log.Info("request limited", "scope", "body", "route", route.Name, "code", fe.Code,
		"client", p.clientIP(r), "length", r.ContentLength, "used", st.Used,
		"request_id", r.Header.Get("X-Request-Id"),
		"hint", "request bodies being read ahead hold more than proxy.body_budget_client (per client) or "+
			"proxy.body_budget_total allows: raise them, or lower proxy.body_spool")
	MarkLimit(w, "body")
	w.Header().Set("Connection", "close")
	WriteError(w, r, fe)
}
