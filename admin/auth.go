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
// and applies the Host and cross-site checks.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Request-Id", s.requestID())
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		if !s.o.Hosts[strings.ToLower(r.Host)] {
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

// requireToken checks the bearer token in constant time, rate limiting
// failures per client IP.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		if d := s.fails.blocked(ip); d > 0 {
			if s.o.OnRateLimited != nil {
				s.o.OnRateLimited()
			}
			s.fail(w, r, fault.New(fault.Limited, "rate_limited",
				"too many failed token checks from this address; wait and try again").WithRetry(d))
			return
		}
		idx := s.tokenIndex(r.Header.Get("Authorization"))
		if idx < 0 {
			s.fails.fail(ip)
			if s.o.OnAuthFailure != nil {
				s.o.OnAuthFailure()
			}
			e := fault.New(fault.Unauthorized, "unauthorized",
				"a valid admin token is required (Authorization: Bearer TOKEN)").WithField("Authorization")
			e.Header = http.Header{"Www-Authenticate": {`Bearer realm="wakegate-admin"`}}
			s.fail(w, r, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, s.tokenNames[idx])))
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

// failures rate limits failed token checks per client IP. Entries idle for
// failIdle are swept once the table grows past failSweep.
type failures struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	m     map[string]*failEntry
}

type failEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

const (
	failSweep = 4096
	failIdle  = 10 * time.Minute
)

// newFailures allows perMinute failures a minute (at least 1) per IP.
func newFailures(perMinute int) *failures {
	perMinute = max(perMinute, 1)
	return &failures{limit: rate.Every(time.Minute / time.Duration(perMinute)), burst: perMinute, m: map[string]*failEntry{}}
}

func (f *failures) entry(ip string) *failEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
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

// blocked reports how long ip must wait before its next attempt (0: it may
// try now).
func (f *failures) blocked(ip string) time.Duration {
	f.mu.Lock()
	e := f.m[ip]
	f.mu.Unlock()
	if e == nil {
		return 0
	}
	tok := e.lim.Tokens()
	if tok >= 1 {
		return 0
	}
	return time.Duration((1 - tok) / float64(f.limit) * float64(time.Second))
}

// fail records a failed attempt of ip.
func (f *failures) fail(ip string) { f.entry(ip).lim.Allow() }
