package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// probeAlt is one GET of an auto probe: its URL and status rules, or the
// only statuses that pass (the home's probe.statuses, for the home's own
// GET of Path; the apps' health paths keep their kind's rules).
type probeAlt struct {
	target   string
	api      bool
	statuses []int
}

// newAuto checks an auto spec and builds its URLs and client.
func (r *probeRun) newAuto() error {
	s := r.spec
	if s.Settle >= s.AttemptTimeout {
		return fmt.Errorf("settle %v must be shorter than attempt timeout %v", s.Settle, s.AttemptTimeout)
	}
	var err error
	if r.wsTarget, err = URL(s.Endpoint, cmp.Or(s.WSPath, s.Path), probeWSSchemes); err != nil {
		return err
	}
	if r.target, err = URL(s.Endpoint, s.Path, probeHTTPSchemes); err != nil {
		return err
	}
	for _, p := range s.AltPaths {
		t, err := URL(s.Endpoint, p.Path, probeHTTPSchemes)
		if err != nil {
			return fmt.Errorf("alternative path %q: %w", p.Path, err)
		}
		if t != r.target || p.API != s.API {
			r.alts = append(r.alts, probeAlt{target: t, api: p.API})
		}
	}
	r.newClient()
	return nil
}

// attemptAuto is one attempt of an auto probe: the WebSocket upgrade at
// WSPath first, its handshake bounded by WSTimeout, then, only when the
// upgrade got no 101, the GETs of the health paths of the apps inside the
// home and of Path, passing on the first that does (DESIGN rule 36).
//
// A home that completes the upgrade speaks WebSocket and is judged by it
// alone (a first frame, or a settle window without a close): a GET never
// vouches for a broker that answered an upgrade, so a 101 followed by a
// close fails the attempt whatever the GETs would answer. A home that
// refuses the upgrade with an ordinary HTTP answer, leaves it unanswered
// for WSTimeout, or drops the connection without a word (a dev server
// that wants its own subprotocol) is judged by the GETs. A connection
// that could not be opened at all (refused, a missing socket file) ends
// the attempt: the GETs would meet the same, and the port watch takes
// over.
func (r *probeRun) attemptAuto(ctx context.Context) (int, error) {
	r.note = ""
	status, dialled, err := r.attemptWS(ctx, r.wsTarget, r.spec.WSTimeout)
	if err == nil {
		return status, nil
	}
	if ctx.Err() != nil || (status == 0 && !dialled) {
		return status, err
	}
	ae := &autoProbeError{ws: err, wsStatus: status}
	switch status {
	case http.StatusSwitchingProtocols:
		ae.broker = true
		return status, ae
	case 0:
		ae.ws, ae.unanswered = r.unansweredError(err), true
	}
	gets := append(slices.Clip(r.alts), probeAlt{target: r.target, api: r.spec.API, statuses: r.spec.Statuses})
	for _, g := range gets {
		status, err = r.judgedGet(ctx, g)
		if err == nil {
			if ae.unanswered {
				r.note = fmt.Sprintf("%v; fell back to GET %s → %d; "+
					"set probe kind: http (homes[].probe.kind or wake.probe.kind) to skip the upgrade and this wait at every wake",
					ae.ws, probeURLPath(g.target), status)
			}
			return status, nil
		}
		ae.gets = append(ae.gets, autoGet{target: g.target, status: status, err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return status, ae
}

// errUpgradeUnanswered is an auto probe's upgrade that the home received
// and did not answer within WSTimeout.
var errUpgradeUnanswered = errors.New("no answer")

// unansweredError is the error of an upgrade the home received and
// answered with nothing: it waited out WSTimeout, or the home closed the
// connection first.
func (r *probeRun) unansweredError(err error) error {
	if ne, ok := errors.AsType[net.Error](err); (ok && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("ws upgrade unanswered after %v (wake.probe.ws_timeout): %w", r.spec.WSTimeout, errUpgradeUnanswered)
	}
	return fmt.Errorf("ws upgrade closed without an answer: %w", err)
}

// judgedGet is one GET of an auto attempt, judged by g's statuses when it
// has them (the home's own list decides, as for an http probe), else by
// its rules.
func (r *probeRun) judgedGet(ctx context.Context, g probeAlt) (int, error) {
	status, err := r.attemptHTTP(ctx, g.target, g.api)
	if len(g.statuses) > 0 && status != 0 {
		err = nil
		if !slices.Contains(g.statuses, status) {
			err = fmt.Errorf("http get: %w", StatusError(status))
		}
	}
	return status, err
}

// autoGet is one failed GET of an auto attempt.
type autoGet struct {
	target string
	status int
	err    error
}

// autoProbeError is a failed auto attempt: what the upgrade and each GET
// got. It unwraps to each of them.
type autoProbeError struct {
	ws       error
	wsStatus int
	gets     []autoGet
	// broker: the home completed the upgrade and then closed the socket
	// (no GET was tried). unanswered: the upgrade got no answer at all.
	broker, unanswered bool
}

func (e *autoProbeError) Error() string {
	var b strings.Builder
	b.WriteString("auto: ")
	b.WriteString(e.ws.Error())
	for _, g := range e.gets {
		fmt.Fprintf(&b, "; GET %s: %v", probeURLPath(g.target), g.err)
	}
	return b.String()
}

// Unwrap returns the upgrade's error and each GET's.
func (e *autoProbeError) Unwrap() []error {
	errs := []error{e.ws}
	for _, g := range e.gets {
		errs = append(errs, g.err)
	}
	return errs
}

// allNotFound reports whether every answer the attempt got was 404.
func (e *autoProbeError) allNotFound() bool {
	if e.wsStatus != http.StatusNotFound || len(e.gets) == 0 {
		return false
	}
	for _, g := range e.gets {
		if g.status != http.StatusNotFound {
			return false
		}
	}
	return true
}

// probeURLPath is the path and query of a probe URL, for messages.
func probeURLPath(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	return cmp.Or(u.RequestURI(), "/")
}

// errorsAsAuto finds an auto attempt's error in err's chain.
func errorsAsAuto(err error) (*autoProbeError, bool) {
	var ae *autoProbeError
	ok := errors.As(err, &ae)
	return ae, ok
}

// DefaultNotFoundSettle is how long an auto probe goes on while the home
// answers 404 to everything it tries (Spec.NotFoundSettle): long
// enough for a server that 404s while its routes load, far shorter than
// the ready timeout.
const DefaultNotFoundSettle = 5 * time.Second

// NotFoundMinAttempts is the least number of all-404 attempts in a row
// before an auto probe gives up early (Spec.NotFoundSettle).
const NotFoundMinAttempts = 3

// ErrNotFound is the cause of an auto probe that gave up because the
// home answered 404 to every upgrade and GET for NotFoundSettle.
var ErrNotFound = errors.New("the home answers 404 to every probed path")

// notFoundRun follows the all-404 attempts in a row of one auto probe.
type notFoundRun struct {
	since    time.Time // when the first of them ended; zero: none
	attempts int
}

// note counts the failed attempt err (one that ended on its own) and
// returns the probe's error once the home has answered nothing but 404
// for settle and at least NotFoundMinAttempts attempts; nil otherwise.
func (n *notFoundRun) note(err error, settle time.Duration) error {
	ae, ok := errorsAsAuto(err)
	if settle < 0 || !ok || !ae.allNotFound() {
		*n = notFoundRun{}
		return nil
	}
	now := time.Now()
	if n.since.IsZero() {
		n.since = now
	}
	n.attempts++
	if n.attempts < NotFoundMinAttempts || now.Sub(n.since) < settle {
		return nil
	}
	return fmt.Errorf("wake: probe auto: %w (%d attempts over %s): %w",
		ErrNotFound, n.attempts, now.Sub(n.since).Round(time.Millisecond), ae)
}
