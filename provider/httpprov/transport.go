package httpprov

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
)

// maxAnswer is the largest answer body read, in bytes.
const maxAnswer = 1 << 20

// call is one request of the contract, retried as a whole.
type call struct {
	op, home string
	method   string
	target   string // path and query below the base URL
	body     []byte
	key      string        // idempotency key; empty for a GET
	timeout  time.Duration // bound on one attempt
}

// reply is a successful answer (200 or 202).
type reply struct {
	a          Answer
	status     int
	retryAfter time.Duration
}

// post sends operation op for s with a fresh idempotency key; every retry
// of it carries the same key.
func (p *Provider) post(ctx context.Context, op string, s provider.Spec) (Answer, error) {
	body := Request{ID: s.ID, Target: s.Target, Version: s.Version, Command: s.Command, Ref: s.Ref}
	if p.c.Options != nil {
		body.Options = p.c.Options(s.ID)
	}
	if dl, ok := ctx.Deadline(); ok {
		body.Deadline = dl.UTC()
	}
	setImage(&body, s)
	b, err := json.Marshal(body)
	if err != nil {
		return Answer{}, fmt.Errorf("http provider: %s %s: encode request: %w", op, s.ID, err)
	}
	var k [16]byte
	if _, err := rand.Read(k[:]); err != nil {
		return Answer{}, fmt.Errorf("http provider: %s %s: idempotency key: %w", op, s.ID, err)
	}
	r, err := p.do(ctx, call{op: op, home: s.ID, method: http.MethodPost,
		target: homePath(s.ID) + "/" + op, body: b, key: op + "-" + hex.EncodeToString(k[:]),
		timeout: p.c.RequestTimeout})
	return r.a, err
}

// get reads the home's state; query, if any, asks for a long poll.
func (p *Provider) get(ctx context.Context, op, id, query string) (Answer, time.Duration, error) {
	target, timeout := homePath(id), p.c.RequestTimeout
	if query != "" {
		target += "?" + query
		timeout += p.c.LongPoll
	}
	r, err := p.do(ctx, call{op: op, home: id, method: http.MethodGet, target: target, timeout: timeout})
	return r.a, r.retryAfter, err
}

func homePath(id string) string { return "/homes/" + url.PathEscape(id) }

// do sends c, retrying connection failures, 408, 409, 425, 429 and 5xx
// (but 501) with backoff or the control plane's Retry-After, as long as
// the retry fits in ctx's deadline.
func (p *Provider) do(ctx context.Context, c call) (reply, error) {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		r, err := p.once(ctx, c)
		var e *Error
		if err == nil || !errors.As(err, &e) || !retryable(e) || attempt >= p.c.Retries {
			return r, err
		}
		wait := max(e.RetryAfter, backoff/2+mrand.N(backoff/2+1))
		backoff = min(2*backoff, 5*time.Second)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return r, err
		}
		if err := sleep(ctx, wait); err != nil {
			return r, deadlineError(c.op, c.home, "waiting to retry after: "+e.Error(), err)
		}
	}
}

// retryable reports whether the failure may pass on a second try.
func retryable(e *Error) bool {
	switch e.Status {
	case 0:
		return e.Code == CodeUnreachable
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented:
		return false
	}
	return e.Status >= 500
}

// once sends c one time, signed now.
func (p *Provider) once(ctx context.Context, c call) (reply, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := p.base.String() + c.target
	req, err := http.NewRequestWithContext(actx, c.method, u, bytes.NewReader(c.body))
	if err != nil {
		return reply{}, fmt.Errorf("http provider: %s %s: %w", c.op, c.home, err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set(HeaderIdempotencyKey, c.key)
	}
	if err := Sign(req, c.body, p.c.Secret, p.c.Now()); err != nil {
		return reply{}, fmt.Errorf("http provider: %s %s: %w", c.op, c.home, err)
	}
	res, err := p.c.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, deadlineError(c.op, c.home, "no answer from the control plane", ctx.Err())
		}
		return reply{}, &Error{Op: c.op, Home: c.home, Code: CodeUnreachable, Err: err,
			Hint: "check that the control plane runs and that http.base_url points at it"}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return reply{}, &Error{Op: c.op, Home: c.home, Code: CodeUnreachable, Err: fmt.Errorf("read answer: %w", err)}
	}
	return p.answer(c, res, raw)
}

// answer interprets one answer.
func (p *Provider) answer(c call, res *http.Response, raw []byte) (reply, error) {
	var a Answer
	jsonErr := json.Unmarshal(raw, &a)
	r := reply{a: a, status: res.StatusCode, retryAfter: retryAfter(res.Header, a, p.c.Now())}
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusAccepted {
		if jsonErr != nil && len(bytes.TrimSpace(raw)) > 0 {
			return r, &Error{Op: c.op, Home: c.home, Status: res.StatusCode, Code: CodeBadAnswer,
				Reason: "the answer is not a JSON state", Err: jsonErr}
		}
		return r, nil
	}
	e := &Error{Op: c.op, Home: c.home, Status: res.StatusCode, Code: a.Code, Reason: a.Reason, RetryAfter: r.retryAfter}
	if e.Code == "" {
		e.Code = "http_" + strconv.Itoa(res.StatusCode)
	}
	if e.Reason == "" && jsonErr != nil {
		e.Reason = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	}
	switch res.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Code, e.Reason = CodeRefused, cmpOr(a.Reason, a.Code, e.Reason)
		e.Hint = "check that the gateway and the control plane share http.secret and that their clocks agree within its replay window"
	case http.StatusNotImplemented:
		e.Err = provider.ErrUnsupported
	}
	return r, e
}

func cmpOr(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// retryAfter reads the Retry-After header (seconds or an HTTP date) or,
// without one, the answer's retry_after.
func retryAfter(h http.Header, a Answer, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 && s < 1e6 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	if a.RetryAfter > 0 && a.RetryAfter < 1e6 {
		return time.Duration(math.Round(a.RetryAfter * float64(time.Second)))
	}
	return 0
}

// sleep waits d or until ctx is done, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deadlineError is an operation whose deadline ran out.
func deadlineError(op, id, what string, err error) *Error {
	return &Error{Op: op, Home: id, Code: CodeDeadline, Reason: what + " when the deadline ran out", Err: err,
		Hint: "the control plane takes longer than the wake allows: raise wake.ready_timeout or make the home start faster"}
}
