package httpprov

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
	op      string
	method  string
	target  string // path and query below the base URL
	body    []byte
	key     string        // idempotency key; empty for a GET
	timeout time.Duration // bound on one attempt
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
	body := Request{ID: s.ID, Target: s.Target, Version: s.Version, Image: s.Image, Command: s.Command,
		Ref: s.Ref, Options: s.Options}
	if dl, ok := ctx.Deadline(); ok {
		body.Deadline = dl.UTC()
	}
	b, err := json.Marshal(body)
	if err != nil {
		return Answer{}, badAnswer(op, fmt.Errorf("encode the request: %w", err))
	}
	var k [16]byte
	if _, err := rand.Read(k[:]); err != nil {
		return Answer{}, fmt.Errorf("%s: idempotency key: %w", op, err)
	}
	r, err := p.do(ctx, call{op: op, method: http.MethodPost,
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
	r, err := p.do(ctx, call{op: op, method: http.MethodGet, target: target, timeout: timeout})
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
		if err == nil || !retryable(err) || attempt >= p.c.Retries {
			return r, err
		}
		wait := backoff/2 + mrand.N(backoff/2+1)
		if pe, ok := provider.AsError(err); ok {
			wait = max(wait, pe.RetryAfter)
		}
		backoff = min(2*backoff, 5*time.Second)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return r, err
		}
		if serr := sleep(ctx, wait); serr != nil {
			return r, deadlineFailure(c.op, "waiting to retry after "+err.Error(), serr)
		}
	}
}

// once sends c one time, signed now.
func (p *Provider) once(ctx context.Context, c call) (reply, error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := p.base.String() + c.target
	req, err := http.NewRequestWithContext(actx, c.method, u, bytes.NewReader(c.body))
	if err != nil {
		return reply{}, fmt.Errorf("%s: %w", c.op, err)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set(HeaderIdempotencyKey, c.key)
	}
	if err := Sign(req, c.body, p.c.Secret, p.c.Now()); err != nil {
		return reply{}, fmt.Errorf("%s: %w", c.op, err)
	}
	res, err := p.c.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, deadlineFailure(c.op, "no answer from the control plane", ctx.Err())
		}
		return reply{}, &provider.Error{Op: c.op, Reason: provider.ReasonUnavailable, Hint: hintUnreachable, Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return reply{}, &provider.Error{Op: c.op, Reason: provider.ReasonUnavailable, Hint: hintUnreachable,
			Err: fmt.Errorf("read the answer: %w", err)}
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
			return r, badAnswer(c.op, fmt.Errorf("a %d answer is not a JSON state: %w", res.StatusCode, jsonErr))
		}
		return r, nil
	}
	ae := &AnswerError{Status: res.StatusCode, Code: a.Code, Reason: a.Reason}
	if jsonErr != nil {
		ae.Reason = strings.TrimSpace(string(raw[:min(len(raw), 200)]))
	}
	return r, answerFailure(c.op, ae, r.retryAfter)
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
