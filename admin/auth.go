package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/fault"
)

// AllowedHosts lists the Host values an admin listener answers: its bound
// address, the configured listen host on the bound port, the loopback
// names when it listens on loopback or on every address, and extra (a
// host without a port gets the bound port). Values are lower case.
func AllowedHosts(listen string, bound net.Addr, extra []string) map[string]bool {
	out := map[string]bool{}
	_, port, _ := net.SplitHostPort(bound.String())
	out[strings.ToLower(bound.String())] = true
	host, _, _ := net.SplitHostPort(listen)
	if host != "" {
		out[strings.ToLower(net.JoinHostPort(host, port))] = true
	}
	ip := net.ParseIP(host)
	if host == "" || host == "localhost" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			out[net.JoinHostPort(h, port)] = true
		}
	}
	for _, h := range extra {
		h = strings.ToLower(strings.TrimSpace(h))
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), port)
		}
		out[h] = true
	}
	return out
}

// guard numbers the request, sets the headers every admin answer carries,
// and applies the Host and cross-site checks. The Host check guards
// against DNS rebinding, which needs a browser and TCP: a request on the
// admin socket (PeerFrom) skips it.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Request-Id", s.requestID())
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		_, onSocket := PeerFrom(r.Context())
		if !onSocket && !s.o.Hosts[strings.ToLower(r.Host)] {
			s.fail(w, r, fault.New(fault.Forbidden, "bad_host",
				"the admin listener does not answer to host "+strconv.Quote(r.Host)).WithField("Host").
				WithHint("call the admin listener by its own address, or add the name to admin.allowed_hosts"))
			return
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			s.fail(w, r, fault.New(fault.Forbidden, "cross_site", "cross-site requests are refused").WithField("Sec-Fetch-Site"))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "http://"+r.Host) {
			s.fail(w, r, fault.New(fault.Forbidden, "cross_site", "requests from origin "+strconv.Quote(o)+" are refused").WithField("Origin"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken lets a request through with a valid bearer token, checked
// first and in constant time, whatever its client failed before: failed
// attempts are limited (failures), never valid ones, so a local process
// that floods the listener with wrong tokens cannot lock the operator out.
// A request on the admin socket whose peer the listener accepted
// (PeerFrom) is authenticated by that peer and needs no token.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := PeerFrom(r.Context()); ok {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, "peer uid "+strconv.Itoa(p.UID))))
			return
		}
		if idx := s.tokenIndex(r.Header.Get("Authorization")); idx >= 0 {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, s.tokenNames[idx])))
			return
		}
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		if d := s.fails.fail(ip); d > 0 {
			if s.o.OnRateLimited != nil {
				s.o.OnRateLimited()
			}
			s.fail(w, r, fault.New(fault.Limited, "rate_limited",
				"too many failed token checks; wait and try again (a valid token is never refused)").WithRetry(d))
			return
		}
		if s.o.OnAuthFailure != nil {
			s.o.OnAuthFailure()
		}
		e := fault.New(fault.Unauthorized, "unauthorized",
			"a valid admin token is required (Authorization: Bearer TOKEN)").WithField("Authorization")
		e.Header = http.Header{"Www-Authenticate": {`Bearer realm="wakegate-admin"`}}
		s.fail(w, r, e)
	})
}

// tokenIndex returns the position of the configured token the
// Authorization header h carries, or -1. Every token is compared, in
// constant time, whatever matched.
func (s *Server) tokenIndex(h string) int {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return -1
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	idx := -1
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokens[i][:]) == 1 {
			idx = i
		}
	}
	return idx
}

// failures rate limits failed token checks: per client IP, and in all
// (failGlobalFactor times the per-client rate), so that many addresses
// together cannot try tokens faster either. Only failures are counted and
// only failures are refused. Entries idle for failIdle are swept once the
// table grows past failSweep.
type failures struct {
	limit  rate.Limit
	burst  int
	global *rate.Limiter
	mu     sync.Mutex
	m      map[string]*failEntry
}

type failEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

const (
	failSweep        = 4096
	failIdle         = 10 * time.Minute
	failGlobalFactor = 10
)

// newFailures allows perMinute failures a minute (at least 1) per IP, and
// failGlobalFactor times as many from all clients together.
func newFailures(perMinute int) *failures {
	perMinute = max(perMinute, 1)
	every := time.Minute / time.Duration(perMinute)
	return &failures{limit: rate.Every(every), burst: perMinute, m: map[string]*failEntry{},
		global: rate.NewLimiter(rate.Every(every/failGlobalFactor), perMinute*failGlobalFactor)}
}

// entry returns ip's limiter, creating it.
func (f *failures) entry(ip string, now time.Time) *failEntry {
	e := f.m[ip]
	if e == nil {
		if len(f.m) >= failSweep {
			for k, v := range f.m {
				if now.Sub(v.seen) > failIdle {
					delete(f.m, k)
				}
			}
		}
		e = &failEntry{lim: rate.NewLimiter(f.limit, f.burst)}
		f.m[ip] = e
	}
	e.seen = now
	return e
}

// fail records a failed attempt of ip and returns how long ip must wait
// before its next failure is answered 401 again (0: this one may be).
func (f *failures) fail(ip string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	e := f.entry(ip, now)
	if !e.lim.AllowN(now, 1) {
		return wait(e.lim, now)
	}
	if !f.global.AllowN(now, 1) {
		return wait(f.global, now)
	}
	return 0
}

// wait is how long until lim has a token again (at least a second, as
// Retry-After counts whole seconds).
func wait(lim *rate.Limiter, now time.Time) time.Duration {
	d := time.Duration((1 - lim.TokensAt(now)) / float64(lim.Limit()) * float64(time.Second))
	return max(d, time.Second)
}
