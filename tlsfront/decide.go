package tlsfront

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DecisionOptions configure a Decider.
type DecisionOptions struct {
	// Known reports whether a host name maps to something the gateway
	// serves (a registered app or home under the host-routing domains).
	// Nil means none does.
	Known func(host string) bool
	// Allow are host names always allowed. Default none.
	Allow []string
	// CacheSize bounds the cached decisions, positive and negative.
	CacheSize int
	// CacheTTL is how long a decision is cached.
	CacheTTL time.Duration
	// Rate is how many new names may be allowed (and so issued for) per
	// second, with Burst at once.
	Rate  rate.Limit
	Burst int
	// OnRefuse, when set, is told every refusal's reason (ReasonNotAHost,
	// ReasonNotAllowed, ReasonRateLimited), cached ones included.
	OnRefuse func(reason string)
}

// The reasons OnRefuse is given.
const (
	ReasonNotAHost    = "not_a_host"
	ReasonNotAllowed  = "not_allowed"
	ReasonRateLimited = "rate_limited"
)

// Decider decides which names get a certificate at their first handshake
// (the on_demand mode): a name is allowed when it is in the allow list or
// Known says the gateway serves it; an IP literal, an empty name or
// anything that is not a host name is refused. Decisions are cached
// (bounded, both ways), and new allowances are rate limited, so a flood of
// handshakes for made-up names neither asks the registry each time nor
// reaches the CA.
type Decider struct {
	opts    DecisionOptions
	allow   map[string]bool
	limiter *rate.Limiter

	mu    sync.Mutex
	cache map[string]decision
}

type decision struct {
	err error
	at  time.Time
}

// Errors of Decide.
var (
	// ErrNotAllowed refuses a name that maps to nothing the gateway serves.
	ErrNotAllowed = errors.New("on-demand: the name maps to no app or home and is not in the allow list")
	// ErrRateLimited refuses a new name while issuance is rate limited.
	ErrRateLimited = errors.New("on-demand: too many new names at once; try again shortly")
)

// NewDecider builds a Decider; the caller fills every option.
func NewDecider(opts DecisionOptions) *Decider {
	d := &Decider{opts: opts, allow: map[string]bool{}, cache: map[string]decision{},
		limiter: rate.NewLimiter(opts.Rate, opts.Burst)}
	for _, n := range opts.Allow {
		d.allow[strings.ToLower(n)] = true
	}
	return d
}

// Decide allows or refuses name (certmagic's DecisionFunc).
func (d *Decider) Decide(_ context.Context, name string) error {
	reason, err := d.decide(name)
	if err != nil && d.opts.OnRefuse != nil {
		d.opts.OnRefuse(reason)
	}
	return err
}

// decide is Decide, also naming the reason of a refusal.
func (d *Decider) decide(name string) (string, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if err := checkHostName(name); err != nil {
		return ReasonNotAHost, err
	}
	now := time.Now()
	d.mu.Lock()
	c, ok := d.cache[name]
	d.mu.Unlock()
	if ok && now.Sub(c.at) < d.opts.CacheTTL {
		return ReasonNotAllowed, c.err
	}
	var err error
	switch {
	case d.allow[name] || (d.opts.Known != nil && d.opts.Known(name)):
		if !d.limiter.Allow() {
			return ReasonRateLimited, ErrRateLimited // not cached: the next handshake may pass
		}
	default:
		err = ErrNotAllowed
	}
	d.remember(name, decision{err: err, at: now})
	return ReasonNotAllowed, err
}

// remember caches a decision, making room first when the cache is full:
// expired entries go, and if none had expired, an arbitrary half.
func (d *Decider) remember(name string, c decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cache) >= d.opts.CacheSize {
		for k, v := range d.cache {
			if c.at.Sub(v.at) >= d.opts.CacheTTL {
				delete(d.cache, k)
			}
		}
		for k := range d.cache {
			if len(d.cache) < d.opts.CacheSize/2+1 {
				break
			}
			delete(d.cache, k)
		}
	}
	d.cache[name] = c
}

// Forget drops every cached decision (after apps or homes changed).
func (d *Decider) Forget() {
	d.mu.Lock()
	clear(d.cache)
	d.mu.Unlock()
}

// checkHostName refuses what may not get a certificate on demand: an
// empty name, an IP literal, and anything that is not a DNS host name of
// at least two labels.
func checkHostName(name string) error {
	switch {
	case name == "":
		return errors.New("on-demand: no server name")
	case net.ParseIP(strings.Trim(name, "[]")) != nil:
		return fmt.Errorf("on-demand: %q is an IP address", name)
	case !ValidHostName(name) || !strings.Contains(name, "."):
		return fmt.Errorf("on-demand: %q is not a host name", name)
	}
	return nil
}

// ValidHostName reports whether s is a DNS host name: labels of 1-63
// letters, digits and hyphens, not starting or ending with a hyphen, 253
// characters at most. It takes no port, no trailing dot and no wildcard.
func ValidHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
			if !letter && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}
