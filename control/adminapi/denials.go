package adminapi

import (
	"cmp"
	"slices"
	"sync"

	"github.com/wakegate/wakegate/admin"
)

// DenialsKept is how many of the last access refusals the admin API shows.
const DenialsKept = 200

// Denials keeps the last refusals in a ring and counts every refusal by
// policy and code, for GET /admin/access/denials.
type Denials struct {
	mu     sync.Mutex
	ring   []admin.Denial
	next   int // where the next refusal goes
	full   bool
	counts map[[2]string]uint64
}

// NewDenials returns a log that keeps the last n refusals.
func NewDenials(n int) *Denials {
	return &Denials{ring: make([]admin.Denial, n), counts: map[[2]string]uint64{}}
}

// Add records a refusal; the request path calls it.
func (l *Denials) Add(d admin.Denial) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = d
	l.next = (l.next + 1) % len(l.ring)
	l.full = l.full || l.next == 0
	l.counts[[2]string{d.Policy, d.Code}]++
}

// view returns the refusals newest first and the counts by policy, code.
func (l *Denials) view() admin.DenialLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := admin.DenialLog{Recent: []admin.Denial{}, Counts: []admin.DenialCount{}}
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	for i := 1; i <= n; i++ {
		v.Recent = append(v.Recent, l.ring[(l.next-i+len(l.ring))%len(l.ring)])
	}
	for k, c := range l.counts {
		v.Counts = append(v.Counts, admin.DenialCount{Policy: k[0], Code: k[1], Count: c})
	}
	slices.SortFunc(v.Counts, func(a, b admin.DenialCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Code, b.Code))
	})
	return v
}

// AccessDenials returns the gateway's last access refusals.
func (a *Backend[H]) AccessDenials() admin.DenialLog { return a.d.Denials.view() }
