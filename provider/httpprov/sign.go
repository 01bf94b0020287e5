package httpprov

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Canonical returns the string a request's signature covers: the lines
// "v1", the timestamp, the nonce, the method, the request target (path
// and raw query as sent), the idempotency key (empty for a GET) and the
// hex SHA-256 of the body, joined by "\n".
func Canonical(timestamp, nonce, method, target, idemKey string, body []byte) string {
	sum := sha256.Sum256(body)
	return strings.Join([]string{"v1", timestamp, nonce, method, target, idemKey, hex.EncodeToString(sum[:])}, "\n")
}

// Signature returns the Wakegate-Signature value for a canonical string:
// "v1=" and the hex HMAC-SHA256 under secret.
func Signature(secret []byte, canonical string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(canonical))
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Sign sets the timestamp, a fresh nonce and the signature on r, whose
// body is body. The idempotency key, if any, must be set before.
func Sign(r *http.Request, body []byte, secret []byte, now time.Time) error {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return fmt.Errorf("sign request: nonce: %w", err)
	}
	ts, nonce := strconv.FormatInt(now.Unix(), 10), hex.EncodeToString(n[:])
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderNonce, nonce)
	c := Canonical(ts, nonce, r.Method, r.URL.RequestURI(), r.Header.Get(HeaderIdempotencyKey), body)
	r.Header.Set(HeaderSignature, Signature(secret, c))
	return nil
}

// Why a Verifier refused a request.
var (
	ErrUnsigned     = errors.New("the request is not signed")
	ErrBadSignature = errors.New("the signature does not match")
	ErrStale        = errors.New("the timestamp is outside the replay window")
	ErrReplayed     = errors.New("the nonce was seen before")
)

// Verifier checks the signatures of wakegate's requests, for a control
// plane written in Go. It refuses a request whose signature does not
// match, whose timestamp is further than Window from its clock, or whose
// nonce it has seen within the window (a replay). Safe for concurrent
// use; it remembers nonces in memory, so several replicas of a control
// plane should share one (or keep nonces in their own store).
type Verifier struct {
	secret []byte
	window time.Duration
	now    func() time.Time
	// maxBody is the largest body read, in bytes: 1 MiB.
	maxBody int64

	mu    sync.Mutex
	seen  map[string]time.Time // nonce -> when it may be forgotten
	order []string             // the nonces in seen, oldest first
}

// NewVerifier returns a verifier for secret with a replay window of
// window (zero means 5 minutes) either side of now (nil means time.Now).
func NewVerifier(secret []byte, window time.Duration, now func() time.Time) *Verifier {
	if window <= 0 {
		window = 5 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &Verifier{secret: secret, window: window, now: now, maxBody: 1 << 20, seen: map[string]time.Time{}}
}

// Verify reads r's body, checks its signature, timestamp and nonce, and
// returns the body. r.Body is replaced so a handler can read it again.
func (v *Verifier) Verify(r *http.Request) ([]byte, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, v.maxBody+1))
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
		if int64(len(b)) > v.maxBody {
			return nil, fmt.Errorf("body over %d bytes", v.maxBody)
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	ts, nonce, sig := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderNonce), r.Header.Get(HeaderSignature)
	if ts == "" || nonce == "" || sig == "" {
		return nil, ErrUnsigned
	}
	// The request target as it came in the request line: what was signed.
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI()
	}
	want := Signature(v.secret, Canonical(ts, nonce, r.Method, target, r.Header.Get(HeaderIdempotencyKey), body))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return nil, ErrBadSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrStale, ts)
	}
	now := v.now()
	if skew := now.Sub(time.Unix(sec, 0)).Abs(); skew > v.window {
		return nil, fmt.Errorf("%w: %s off (window %s)", ErrStale, skew.Round(time.Second), v.window)
	}
	if err := v.remember(nonce, now); err != nil {
		return nil, err
	}
	return body, nil
}

// remember records nonce until it can no longer pass the timestamp check
// and forgets the oldest nonces that have expired.
func (v *Verifier) remember(nonce string, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for len(v.order) > 0 && now.After(v.seen[v.order[0]]) {
		delete(v.seen, v.order[0])
		v.order = v.order[1:]
	}
	if _, ok := v.seen[nonce]; ok {
		return ErrReplayed
	}
	// A request signed at the far edge of the window is still accepted
	// up to window later: keep its nonce for twice the window.
	v.seen[nonce] = now.Add(2 * v.window)
	v.order = append(v.order, nonce)
	return nil
}

// Middleware refuses requests that fail Verify with 401 and an error
// answer, and passes the others to next with their body intact.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := v.Verify(r); err != nil {
			WriteAnswer(w, http.StatusUnauthorized, Answer{Code: "bad_signature", Reason: err.Error()})
			return
		}
		next.ServeHTTP(w, r)
	})
}
