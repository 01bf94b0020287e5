package access

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// LimitsConfig is the limits section: abuse limits, keyed by the real
// client address (ClientIP) or by home. A limited request gets 429 with
// Retry-After (503 at once past the waiting cap) and never wakes a home.
type LimitsConfig struct {
	// ClientRate is the requests per second one client address may make
	// on average. Default 0: no limit (the embedded config.yaml sets 100).
	ClientRate float64 `yaml:"client_rate"`
	// ClientBurst is how many requests a client may make at once above
	// ClientRate. Default 20×ClientRate (at least 1): a page served by a
	// development server loads every ES module as its own request, a
	// thousand or more on a first view, and a browser does not retry a
	// script answered 429; a flood still meets ClientRate once the burst
	// is spent. Zero means the default.
	ClientBurst int `yaml:"client_burst"`
	// WakeRate is the wakes per minute requests may start for one home on
	// average (a request that finds its home asleep starts one; callers
	// that join a wake already running take none).
	// Default 0: no limit (the embedded config.yaml sets 30).
	WakeRate float64 `yaml:"wake_rate"`
	// WakeBurst is how many wakes a home may be asked for at once above
	// WakeRate. Default 5; zero means the default.
	WakeBurst int `yaml:"wake_burst"`
	// ConnRate is the new connections per second one client address may
	// open on average, counted when a connection is accepted; one past it
	// is closed at once, before any request, and counted in
	// wakegate_rate_limited_total{scope="conn"}. This is the per-client
	// flood limit that leaves a browser alone: a browser opens a few
	// connections per origin and sends every request of a page over them
	// (keep-alive), while a flood of requests either opens connections
	// (and meets this) or is held to one request at a time per connection,
	// at most server.max_conns_per_client connections. A trusted proxy's
	// connections are not counted. Default 0: no limit (the embedded
	// config.yaml sets 20).
	ConnRate float64 `yaml:"conn_rate"`
	// ConnBurst is how many connections a client may open at once above
	// ConnRate. Default 10×ConnRate (at least 1); zero means the default.
	ConnBurst int `yaml:"conn_burst"`
	// MaxWaitingPerHome caps the callers waiting for one home to wake;
	// the excess gets 503 at once. Default 4096; zero means the default.
	MaxWaitingPerHome int `yaml:"max_waiting_per_home"`
	// MaxHolds caps browsers held for wake.hold before the waiting page,
	// over all homes; the excess gets the waiting page at once. Default
	// 4096; zero means the default.
	MaxHolds int `yaml:"max_holds"`
	// MaxClients bounds the table of per-client limiters (least recently
	// seen clients are forgotten first). Default 100000; zero means the
	// default.
	MaxClients int `yaml:"max_clients"`
}

// Defaults fills every unset field of c.
func (c *LimitsConfig) Defaults() {
	def(&c.ClientBurst, max(1, int(20*c.ClientRate)))
	def(&c.ConnBurst, max(1, int(10*c.ConnRate)))
	def(&c.WakeBurst, 5)
	def(&c.MaxWaitingPerHome, 4096)
	def(&c.MaxHolds, 4096)
	def(&c.MaxClients, 100000)
}

// Problems checks c, whose defaults are filled.
func (c *LimitsConfig) Problems() []Problem {
	var ps []Problem
	if c.ClientRate < 0 {
		ps = append(ps, Problem{Field: "client_rate", Msg: "must not be negative (0 turns the limit off)"})
	}
	if c.ConnRate < 0 {
		ps = append(ps, Problem{Field: "conn_rate", Msg: "must not be negative (0 turns the limit off)"})
	}
	if c.WakeRate < 0 {
		ps = append(ps, Problem{Field: "wake_rate", Msg: "must not be negative (0 turns the limit off)"})
	}
	for _, f := range []struct {
		n string
		v int
	}{{"client_burst", c.ClientBurst}, {"conn_burst", c.ConnBurst}, {"wake_burst", c.WakeBurst}, {"max_waiting_per_home", c.MaxWaitingPerHome},
		{"max_holds", c.MaxHolds}, {"max_clients", c.MaxClients}} {
		if f.v < 1 {
			ps = append(ps, Problem{Field: f.n, Msg: fmt.Sprintf("must be at least 1, got %d", f.v)})
		}
	}
	return ps
}

// Limits holds the limiter tables. Its methods are safe for concurrent use.
type Limits struct {
	cfg     LimitsConfig
	clients *lru // client address -> *rate.Limiter
	conns   *lru // client address -> *rate.Limiter of its new connections
	wakes   *lru // home id -> *rate.Limiter

	mu      sync.Mutex
	waiting map[string]int // home id -> callers waiting for its wake
	holds   int
}

// NewLimits returns the limits of cfg (defaults filled).
func NewLimits(cfg LimitsConfig) *Limits {
	return &Limits{cfg: cfg, clients: newLRU(cfg.MaxClients), conns: newLRU(cfg.MaxClients),
		wakes:   newLRU(cfg.MaxClients),
		waiting: map[string]int{}}
}

// Client takes one request from client's budget. It returns 0 when the
// request may go on, else how long until it would be allowed.
func (l *Limits) Client(client string) time.Duration {
	if l.cfg.ClientRate <= 0 {
		return 0
	}
	return take(l.clients.get(client, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(l.cfg.ClientRate), l.cfg.ClientBurst)
	}))
}

// Conn takes one new connection from client's budget: 0 when it may be
// served, else how long until one would be allowed.
func (l *Limits) Conn(client string) time.Duration {
	if l.cfg.ConnRate <= 0 {
		return 0
	}
	return take(l.conns.get(client, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(l.cfg.ConnRate), l.cfg.ConnBurst)
	}))
}

// Wake takes one wake from home's budget: 0 when the wake may start, else
// how long until one would be allowed.
func (l *Limits) Wake(home string) time.Duration {
	if l.cfg.WakeRate <= 0 {
		return 0
	}
	return take(l.wakes.get(home, func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(l.cfg.WakeRate/60), l.cfg.WakeBurst)
	}))
}

// take takes a token from lim: 0, or the wait for the next one.
func take(lim *rate.Limiter) time.Duration {
	now := time.Now()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Minute
	}
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

// Wait counts a caller waiting for home's wake. It returns false when
// home has MaxWaitingPerHome waiting already; else done must be called
// when the wait ends.
func (l *Limits) Wait(home string) (done func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting[home] >= l.cfg.MaxWaitingPerHome {
		return nil, false
	}
	l.waiting[home]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.waiting[home]--; l.waiting[home] <= 0 {
			delete(l.waiting, home)
		}
	}, true
}

// Hold counts a browser held before the waiting page. It returns false at
// MaxHolds; else done must be called when the hold ends.
func (l *Limits) Hold() (done func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds >= l.cfg.MaxHolds {
		return nil, false
	}
	l.holds++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.holds--
	}, true
}

// Sizes returns the number of entries of the client and wake limiter
// tables and of homes with waiting callers.
func (l *Limits) Sizes() (clients, wakes, waiting int) {
	l.mu.Lock()
	waiting = len(l.waiting)
	l.mu.Unlock()
	return l.clients.len(), l.wakes.len(), waiting
}

// lru is a bounded table of limiters: past max entries the least recently
// used one is forgotten (its client starts again with a full burst).
type lru struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *lruEntry, most recent first
	m   map[string]*list.Element
}

type lruEntry struct {
	key string
	lim *rate.Limiter
}

func newLRU(max int) *lru { return &lru{max: max, ll: list.New(), m: map[string]*list.Element{}} }

func (c *lru) get(key string, mk func() *rate.Limiter) *rate.Limiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry).lim
	}
	lim := mk()
	c.m[key] = c.ll.PushFront(&lruEntry{key: key, lim: lim})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*lruEntry).key)
	}
	return lim
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
