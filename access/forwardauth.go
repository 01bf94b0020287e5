package access

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// maxReplyBody bounds the body of an auth service's answer passed to the
// caller (a login redirect or a refusal page).
const maxReplyBody = 64 << 10

// ForwardAuth asks an auth service about every request, as nginx
// auth_request and Traefik ForwardAuth do: a GET to its URL with the
// original method, URI, host and client address in X-Forwarded-* and the
// configured request headers. A 2xx allows the request and copies the
// configured response headers onto it; a 401, 403 or 3xx goes back to the
// caller unchanged; anything else, or no answer within the timeout, refuses
// the request (fail closed).
type ForwardAuth struct {
	cfg      ForwardAuthConfig
	client   *http.Client
	clientIP func(*http.Request) string
	cache    *decisionCache // nil without cache_ttl
}

// NewForwardAuth builds a forward_auth policy from cfg (defaults filled);
// clientIP resolves the caller's address for X-Forwarded-For.
func NewForwardAuth(cfg ForwardAuthConfig, clientIP func(*http.Request) string) *ForwardAuth {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.Timeout}).DialContext,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
	}
	p := &ForwardAuth{cfg: cfg, clientIP: clientIP, client: &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// A redirect is the auth service's answer for the caller.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if cfg.CacheTTL > 0 {
		p.cache = newDecisionCache(cfg.CacheSize, cfg.CacheTTL)
	}
	return p
}

// Close drops the pooled connections to the auth service.
func (p *ForwardAuth) Close() { p.client.CloseIdleConnections() }

// Check asks the auth service about r (or the cache).
func (p *ForwardAuth) Check(ctx context.Context, r *http.Request, s Subject) (Decision, error) {
	var key string
	if p.cache != nil {
		key = p.cacheKey(r, s)
		if d, ok := p.cache.get(key); ok {
			return d, nil
		}
	}
	d, err := p.ask(ctx, r)
	if err == nil && p.cache != nil {
		p.cache.put(key, d)
	}
	return d, err
}

func (p *ForwardAuth) ask(ctx context.Context, r *http.Request) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return Decision{}, p.unavailable(err)
	}
	for _, h := range p.cfg.RequestHeaders {
		if vs := r.Header.Values(h); len(vs) > 0 {
			req.Header[http.CanonicalHeaderKey(h)] = vs
		}
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	req.Header.Set("X-Forwarded-Method", r.Method)
	req.Header.Set("X-Forwarded-Uri", r.URL.RequestURI())
	req.Header.Set("X-Forwarded-Host", r.Host)
	req.Header.Set("X-Forwarded-Proto", proto)
	if p.clientIP != nil {
		req.Header.Set("X-Forwarded-For", p.clientIP(r))
	}
	res, err := p.client.Do(req)
	if err != nil {
		return Decision{}, p.unavailable(err)
	}
	defer func() { _ = res.Body.Close() }()
	switch st := res.StatusCode; {
	case st >= 200 && st < 300:
		d := Decision{Header: http.Header{}, Strip: p.cfg.ResponseHeaders}
		for _, h := range p.cfg.ResponseHeaders {
			if vs := res.Header.Values(h); len(vs) > 0 {
				d.Header[http.CanonicalHeaderKey(h)] = vs
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxReplyBody))
		return d, nil
	case st == http.StatusUnauthorized || st == http.StatusForbidden || (st >= 300 && st < 400):
		body, err := io.ReadAll(io.LimitReader(res.Body, maxReplyBody))
		if err != nil {
			return Decision{}, p.unavailable(fmt.Errorf("read the answer: %w", err))
		}
		h := res.Header.Clone()
		for _, k := range []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Content-Length"} {
			h.Del(k)
		}
		return Decision{}, &Reply{Status: st, Header: h, Body: body,
			Cause: fmt.Errorf("forward_auth %s answered %d", p.cfg.URL, st)}
	default:
		return Decision{}, p.unavailable(fmt.Errorf("answered %d (want 2xx, 401, 403 or 3xx)", st))
	}
}

// unavailable refuses a request the auth service could not decide.
func (p *ForwardAuth) unavailable(err error) error {
	e := fault.Wrap(fault.Unavailable, "auth_unavailable", "The authentication service did not answer; try again.",
		fmt.Errorf("forward_auth %s: %w", p.cfg.URL, err))
	if errors.Is(err, context.DeadlineExceeded) {
		e.Hint = "the auth service did not answer within forward_auth.timeout"
	}
	return e
}

// cacheKey keys a decision by the route and the configured headers.
func (p *ForwardAuth) cacheKey(r *http.Request, s Subject) string {
	var b strings.Builder
	b.WriteString(s.Kind + "\x00" + s.Name)
	for _, h := range p.cfg.CacheKey {
		b.WriteByte(0)
		b.WriteString(strings.Join(r.Header.Values(h), "\x01"))
	}
	return b.String()
}

// decisionCache is a bounded LRU of allowed decisions, each kept for ttl.
type decisionCache struct {
	mu   sync.Mutex
	max  int
	ttl  time.Duration
	ll   *list.List // of *cacheEntry, most recent first
	byID map[string]*list.Element
}

type cacheEntry struct {
	key string
	d   Decision
	at  time.Time
}

func newDecisionCache(max int, ttl time.Duration) *decisionCache {
	return &decisionCache{max: max, ttl: ttl, ll: list.New(), byID: map[string]*list.Element{}}
}

func (c *decisionCache) get(key string) (Decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[key]
	if !ok {
		return Decision{}, false
	}
	ent := e.Value.(*cacheEntry)
	if time.Since(ent.at) > c.ttl {
		c.ll.Remove(e)
		delete(c.byID, key)
		return Decision{}, false
	}
	c.ll.MoveToFront(e)
	return ent.d, true
}

func (c *decisionCache) put(key string, d Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[key]; ok {
		e.Value = &cacheEntry{key: key, d: d, at: time.Now()}
		c.ll.MoveToFront(e)
		return
	}
	c.byID[key] = c.ll.PushFront(&cacheEntry{key: key, d: d, at: time.Now()})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.byID, last.Value.(*cacheEntry).key)
	}
}

var (
	_ Policy = (*ForwardAuth)(nil)
	_ Closer = (*ForwardAuth)(nil)
)
