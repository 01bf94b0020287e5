package fly

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// API actions: each has its own rate limit per machine.
const (
	actGet      = "get"
	actStart    = "start"
	actStop     = "stop"
	actSuspend  = "suspend"
	actWait     = "wait"
	actUpdate   = "update"
	actLease    = "lease"
	actGetLease = "get lease"
	actRelease  = "release"
	actMetadata = "metadata"
	actExec     = "exec"
)

// NonceHeader carries the machine lease nonce on every call made while the
// lease is held.
const NonceHeader = "fly-machine-lease-nonce"

// Retry backoff: doubling from backoffMin up to backoffMax, with jitter.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 2 * time.Second
	// maxAttempts bounds the tries of one call whose context has no
	// deadline; with a deadline, the deadline bounds them.
	maxAttempts = 8
	// maxChecked bounds the tries of a call that changes something and
	// failed without an answer (a 5xx, a lost connection): each try is
	// made only after its effect was looked for and not found, and a
	// request the API keeps failing this way is not one to insist on.
	maxChecked = 3
)

// client speaks the Machines REST API for one app.
type client struct {
	base   string // e.g. https://api.machines.dev, no trailing slash
	app    string
	token  string
	http   *http.Client
	limits *limiters
}

// call is one API request.
type call struct {
	action  string // the rate-limit action, one of act*
	op      string // the operation for errors, e.g. "wait started"
	machine string
	method  string
	path    string // below /v1/apps/{app}/machines/{machine}, e.g. "/start"; "" for the machine
	query   string
	body    any    // JSON-encoded when non-nil
	nonce   string // the lease nonce, when held
	// retry409 retries a 409 (a lease held by someone else) like a 429,
	// for calls that should wait for the lease within their deadline.
	retry409 bool
	// idempotent marks a call that changes something but may be sent
	// twice with the effect of once (a lease renewal, a release): it is
	// retried after a 5xx or a lost connection like a GET.
	idempotent bool
	// verify, set on a call that changes something and is not
	// idempotent, looks for the call's effect after a 5xx or a lost
	// connection: done means the API acted and its answer was lost, and
	// the call succeeded; otherwise it is sent again. Without verify
	// such a call is never sent twice.
	verify func(ctx context.Context) (done bool, err error)
}

// answer is a final API response.
type answer struct {
	status int
	body   []byte
}

// do runs c: it waits for the rate limiter, sends, and retries with
// backoff, honouring Retry-After, for as long as ctx allows: a 429 always
// (the API did not act), a 5xx or a lost connection only on a call that
// is safe to send again (a GET, an idempotent call, or a call whose
// verify found no effect). A 2xx answer is decoded into out (when
// non-nil); any other final status is an *Error.
func (cl *client) do(ctx context.Context, c call, out any) (answer, error) {
	var last *Error
	checked := 0
	for attempt := 0; ; attempt++ {
		if err := cl.limits.wait(ctx, c.machine, c.action); err != nil {
			return answer{}, cl.giveUp(ctx, c, last, err)
		}
		a, hdr, err := cl.once(ctx, c)
		if err == nil && a.status < 300 {
			if out != nil && len(a.body) > 0 {
				if err := json.Unmarshal(a.body, out); err != nil {
					return a, &Error{Op: c.op, Machine: c.machine, Status: a.status, Code: CodeRejected,
						Message: "the answer is not the JSON expected", Err: err}
				}
			}
			return a, nil
		}
		if ctx.Err() != nil {
			return answer{}, cl.giveUp(ctx, c, last, ctx.Err())
		}
		e := cl.failure(c, a, hdr, err)
		if !cl.retryable(c, e) || (attempt+1 >= maxAttempts && !hasDeadline(ctx)) {
			return a, e
		}
		if unanswered(e) && c.verify != nil {
			checked++
			done, verr := c.verify(ctx)
			switch {
			case verr == nil && done:
				return answer{status: http.StatusOK}, nil
			case verr != nil || checked >= maxChecked:
				return a, e
			}
		}
		last = e
		delay := backoff(attempt)
		// A 409's RetryAfter is when another's lease runs out; holders
		// usually release sooner, so it is a hint for the caller, and the
		// lease is asked again on the backoff.
		if e.RetryAfter > delay && e.Status != http.StatusConflict {
			delay = e.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			// The wait the API asked for outlasts the caller: fail now,
			// passing the wait on so the caller can say when to retry.
			e.RetryAfter = max(e.RetryAfter, delay)
			return a, e
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return answer{}, cl.giveUp(ctx, c, last, ctx.Err())
		case <-t.C:
		}
	}
}

// once sends c a single time.
func (cl *client) once(ctx context.Context, c call) (answer, http.Header, error) {
	var body io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return answer{}, nil, fmt.Errorf("encode %s request: %w", c.op, err)
		}
		body = bytes.NewReader(b)
	}
	u := cl.base + "/v1/apps/" + cl.app + "/machines/" + c.machine + c.path
	if c.query != "" {
		u += "?" + c.query
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, body)
	if err != nil {
		return answer{}, nil, fmt.Errorf("build %s request: %w", c.op, err)
	}
	req.Header.Set("Authorization", "Bearer "+cl.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.nonce != "" {
		req.Header.Set(NonceHeader, c.nonce)
	}
	res, err := cl.http.Do(req)
	if err != nil {
		return answer{}, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return answer{}, nil, fmt.Errorf("read %s answer: %w", c.op, err)
	}
	return answer{status: res.StatusCode, body: b}, res.Header, nil
}

// failure turns a non-2xx answer or a transport error into an *Error.
func (cl *client) failure(c call, a answer, hdr http.Header, err error) *Error {
	if err != nil {
		return &Error{Op: c.op, Machine: c.machine, Code: CodeUnavailable, Err: err}
	}
	e := &Error{Op: c.op, Machine: c.machine, Status: a.status, Code: codeForStatus(a.status), Message: apiMessage(a.body)}
	if d, ok := retryAfter(hdr); ok {
		e.RetryAfter = d
	} else if a.status == http.StatusConflict {
		e.RetryAfter = leaseLeft(e.Message)
	}
	return e
}

// leaseLeft reads the time left on another holder's lease from the API's
// 409 message ("... lease currently held by X, expires at 2022-10-20
// 19:59:06 +0000 UTC"); zero when the message does not say.
func leaseLeft(msg string) time.Duration {
	_, at, ok := strings.Cut(msg, "expires at ")
	if !ok {
		return 0
	}
	t, err := time.Parse("2006-01-02 15:04:05 -0700 MST", strings.TrimSpace(at))
	if err != nil {
		return 0
	}
	return max(time.Until(t), 0)
}

// retryable reports whether e may be tried again: a 429 always (the API
// did not act), a 409 when the call waits for a lease, and a 5xx or a lost
// connection when the call is safe to send again: a GET, an idempotent
// call, or one whose effect is looked for first (verify). Fly's own client
// retries only GETs on its own (fly-go flaps.go, safeToRetry).
func (cl *client) retryable(c call, e *Error) bool {
	switch {
	case e.Status == http.StatusTooManyRequests:
		return true
	case e.Status == http.StatusConflict:
		return c.retry409
	case unanswered(e):
		return c.method == http.MethodGet || c.idempotent || c.verify != nil
	}
	return false
}

// unanswered reports whether e says nothing of what the API did: a 5xx
// (from the API or a proxy in front of it) or no answer at all.
func unanswered(e *Error) bool { return e.Status == 0 || e.Status >= 500 }

// giveUp is the error of a call whose context ended (or whose limiter
// could not admit it before the deadline): the last API failure seen, if
// any, else a timeout.
func (cl *client) giveUp(ctx context.Context, c call, last *Error, err error) error {
	if last != nil {
		cp := *last
		cp.Err = errors.Join(last.Err, err)
		return &cp
	}
	code := CodeWaitTimeout
	if ctx.Err() == nil {
		// The limiter refused: the deadline comes before the next token.
		code = CodeRateLimited
	}
	return &Error{Op: c.op, Machine: c.machine, Code: code, Err: err}
}

// apiMessage extracts the API's error text from a body such as
// {"error":"..."} or {"status":"error","message":"..."}.
func apiMessage(b []byte) string {
	var v struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &v) == nil {
		if v.Error != "" {
			return v.Error
		}
		if v.Message != "" {
			return v.Message
		}
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// backoff is the wait before try attempt+2: doubling from backoffMin to
// backoffMax, less up to a fifth at random so that clients spread out.
func backoff(attempt int) time.Duration {
	d := backoffMax
	if attempt < 8 {
		d = min(backoffMin<<attempt, backoffMax)
	}
	return d - time.Duration(rand.Int64N(int64(d/5)+1))
}

func hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
}
