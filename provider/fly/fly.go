package fly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
)

// Name is the provider's config name.
const Name = "fly"

// stopMargin is how long past its stop_timeout a stop waits for the
// machine to be stopped before reporting the stop unproven.
const stopMargin = 5 * time.Second

// releaseTimeout bounds the release of a lease after a recreate, which
// runs even when the recreate's own context has ended.
const releaseTimeout = 5 * time.Second

// Options are what New needs besides the config.
type Options struct {
	// HTTPClient talks to the API and, for version_from http, to homes.
	// Nil: a client of its own with no timeout of its own (every call is
	// bounded by its context).
	HTTPClient *http.Client
	// Log receives what only operators need (a lease that could not be
	// released). Nil: slog.Default().
	Log *slog.Logger
}

// Provider runs homes as Fly Machines. It is safe for concurrent use.
type Provider struct {
	cfg Config
	cl  *client
	hc  *http.Client
	log *slog.Logger
	// unsuspendable maps a machine id to the instance that refused a
	// suspend.
	unsuspendable sync.Map
}

// New returns a provider for cfg (defaulted here, then validated) with
// the API token resolved from its secret reference.
func New(cfg Config, o Options) (*Provider, error) {
	cfg.Defaults()
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("fly: %w", errors.Join(fieldErrs(errs)...))
	}
	token, err := resolveToken(cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("fly: %w", err)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &Provider{
		cfg: cfg,
		cl:  &client{base: strings.TrimSuffix(cfg.BaseURL, "/"), app: cfg.App, token: token, http: hc, limits: &limiters{}},
		hc:  hc,
		log: log,
	}, nil
}

func fieldErrs(fe []*FieldError) []error {
	out := make([]error, len(fe))
	for i, e := range fe {
		out[i] = e
	}
	return out
}

// Name returns "fly".
func (p *Provider) Name() string { return Name }

// home decodes the home's options from its spec.
func (p *Provider) home(s provider.Spec) (HomeOptions, error) {
	var h HomeOptions
	if err := provider.DecodeOptions(s.Options, &h); err != nil {
		return h, &provider.Error{Reason: provider.ReasonBadConfig, Err: fmt.Errorf("fly: home %s: %w", s.ID, err)}
	}
	if errs := h.Validate(); len(errs) > 0 {
		return h, &provider.Error{Reason: provider.ReasonBadConfig, Hint: "give the home its machine: options: {machine: ID}",
			Err: fmt.Errorf("fly: home %s: options: %w", s.ID, errors.Join(fieldErrs(errs)...))}
	}
	return h, nil
}

// bound gives ctx the provider's call timeout when it has no deadline.
func (p *Provider) bound(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if hasDeadline(ctx) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.cfg.CallTimeout+extra)
}

// Wake starts the home's machine (a suspended one resumes) and waits for
// it to be started. A machine already started is returned as it is; one
// stopping or suspending is let finish first.
func (p *Provider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	r, err := p.wake(ctx, s)
	return r, wrap("wake", err)
}

func (p *Provider) wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	h, err := p.home(s)
	if err != nil {
		return provider.Result{}, err
	}
	m, err := p.bringUp(ctx, h.Machine, "", nil)
	if err != nil {
		return provider.Result{}, fmt.Errorf("wake %s: %w", s.ID, err)
	}
	return p.result(s, h, m), nil
}

// bringUp brings machine id to started and returns it. from, when not nil,
// is the machine as last read (the answer of an update); otherwise it is
// read first. nonce is the lease held, if any. The machine is read again
// whenever what it does changed under us: a start its state refused, a
// wait on an instance that an update replaced, a machine still being
// replaced (an update leaves it started or stopped, and no wait can ask
// for "whichever comes"), a boot that failed and that Fly will retry.
func (p *Provider) bringUp(ctx context.Context, id, nonce string, from *machine) (machine, error) {
	var pause pacer
	for {
		var m machine
		if from != nil {
			m, from = *from, nil
		} else {
			var err error
			if m, err = p.cl.get(ctx, id); err != nil {
				return m, err
			}
		}
		switch m.State {
		case stateStarted:
			return m, nil
		case stateStopping:
			if err := p.cl.wait(ctx, id, m.InstanceID, stateStopped); err != nil && !replacedErr(err) {
				return m, err
			}
			continue
		case stateDestroying, stateDestroyed, stateLaunchFailed:
			return m, &Error{Op: "wake", Machine: id, Code: CodeDestroyed, Message: "the machine is " + m.State}
		case stateReplacing, stateUpdating, stateCreating, stateReplaced, stateMigrated:
			// An update (ours or another's) or a move is under way; where it
			// leaves the machine is read when it is done.
			if err := pause.wait(ctx, id); err != nil {
				return m, err
			}
			continue
		case stateStopped, stateSuspended, stateCreated, stateFailed, stateSuspending:
			// A suspending machine is started straight away (the suspend
			// is cancelled); a host that refuses is let finish first.
			if err := p.cl.start(ctx, id, nonce); err != nil {
				e, ok := AsError(err)
				if !ok || e.Status != http.StatusPreconditionFailed {
					return m, err
				}
				if m.State == stateSuspending {
					if err := p.cl.wait(ctx, id, m.InstanceID, stateSuspended); err != nil && !replacedErr(err) {
						return m, err
					}
				}
				continue // the state moved between the read and the start
			}
		}
		// starting, restarting, or just started by us: wait for this
		// instance to be started.
		err := p.cl.wait(ctx, id, m.InstanceID, stateStarted)
		switch {
		case err == nil:
			m.State = stateStarted
			return m, nil
		case replacedErr(err):
			continue
		case unreachedErr(err):
			if err := p.failedBoot(ctx, id, err); err != nil {
				return m, err
			}
			if err := pause.wait(ctx, id); err != nil {
				return m, err
			}
			continue
		default:
			return m, err
		}
	}
}

// failedBoot decides after a wait that failed to reach started: nil when
// the machine may still get there (it runs, or Fly restarts it: its
// restart policy is not "no"), else a CodeStartFailed error.
func (p *Provider) failedBoot(ctx context.Context, id string, waitErr error) error {
	m, err := p.cl.get(ctx, id)
	if err != nil {
		return err
	}
	if m.restartPolicy() != "no" || m.State == stateStarted || m.State == stateStarting {
		return nil
	}
	msg := "the machine failed to boot and is " + m.State + "; its restart policy is no, so Fly will not boot it again"
	if e, ok := AsError(waitErr); ok && e.Message != "" {
		msg += " (" + e.Message + ")"
	}
	return &Error{Op: "wait started", Machine: id, Code: CodeStartFailed, Message: msg}
}

// pacer spaces the reads of a machine that is changing by itself: from
// 100ms, doubling, to at most a second (the API has no wait for "any
// settled state", so this is a poll; the Get limiter allows 5 a second).
type pacer struct{ n int }

func (pc *pacer) wait(ctx context.Context, id string) error {
	d := min(100*time.Millisecond<<min(pc.n, 4), time.Second)
	pc.n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &Error{Op: "settle", Machine: id, Code: CodeWaitTimeout, Err: ctx.Err()}
	case <-t.C:
		return nil
	}
}

// result is the Result of a started machine.
func (p *Provider) result(s provider.Spec, h HomeOptions, m machine) provider.Result {
	return provider.Result{Endpoint: p.endpoint(s, h, m), Ref: ref(m), State: normalise(m.State)}
}

// ref is a machine's handle: its id and the instance (version) that runs.
func ref(m machine) string { return m.ID + ":" + m.InstanceID }

func (p *Provider) endpoint(s provider.Spec, h HomeOptions, m machine) string {
	port := h.Port
	if port == 0 {
		port = p.cfg.Port
	}
	ip := m.PrivateIP
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	return expand(p.cfg.Endpoint, map[string]string{
		"machine_id": h.Machine, "app": p.cfg.App, "port": strconv.Itoa(port), "id": s.ID,
		"target": s.Target, "region": m.Region, "private_ip": ip,
	})
}

// Suspend suspends the home's machine to a snapshot and waits until it is
// suspended. A machine that is not running is left as it is. A machine
// the API will not suspend gives provider.ErrUnsupported, so the caller
// stops it instead: Fly names what suspend needs (at most 2 GB of memory,
// no swap, no schedule) but not how it refuses, so any refusal counts,
// whatever its status, but for those that say nothing of the machine
// (401, 403, 404, a lease held by another, 429). The machine's instance is
// then remembered as one that cannot suspend, and later suspends of it
// give ErrUnsupported without asking; an update (a roll) makes a new
// instance, which is asked again.
func (p *Provider) Suspend(ctx context.Context, s provider.Spec) error {
	return wrap("suspend", p.suspend(ctx, s))
}

func (p *Provider) suspend(ctx context.Context, s provider.Spec) error {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	h, err := p.home(s)
	if err != nil {
		return err
	}
	id := h.Machine
	// A 412 may be the state moving under us, or a refusal: the machine
	// is read again, and a refusal when it still runs the same instance.
	var refused412 error
	refusedOn := ""
	for {
		m, err := p.cl.get(ctx, id)
		if err != nil {
			return fmt.Errorf("suspend %s: %w", s.ID, err)
		}
		switch m.State {
		case stateSuspended, stateStopped, stateCreated, stateDestroyed:
			return nil
		case stateStopping:
			err = p.cl.wait(ctx, id, m.InstanceID, stateStopped)
		case stateSuspending:
			err = p.cl.wait(ctx, id, m.InstanceID, stateSuspended)
		default:
			if inst, ok := p.unsuspendable.Load(id); ok && inst == m.InstanceID {
				return fmt.Errorf("suspend %s: %w: machine %s refused a suspend before", s.ID, provider.ErrUnsupported, id)
			}
			if m.State == stateStarted && refused412 != nil && refusedOn == m.InstanceID {
				err = refused412
			} else {
				if m.State != stateStarted {
					if err := p.cl.wait(ctx, id, m.InstanceID, stateStarted); err != nil {
						return fmt.Errorf("suspend %s: %w", s.ID, err)
					}
				}
				if err = p.cl.suspend(ctx, id); err == nil {
					err = p.cl.wait(ctx, id, m.InstanceID, stateSuspended)
					break
				}
			}
			e, ok := AsError(err)
			if !ok || !refusal(e) {
				break
			}
			if e.Status == http.StatusPreconditionFailed && refused412 == nil {
				refused412, refusedOn = err, m.InstanceID
				continue
			}
			p.unsuspendable.Store(id, m.InstanceID)
			p.log.Warn("fly: the machine refused to suspend; it is stopped instead from now on, until its next update",
				"home", s.ID, "machine", id, "status", e.Status, "message", e.Message,
				"hint", "suspend needs at most 2 GB of memory, no swap and no schedule (fly machine status "+id+")")
			return fmt.Errorf("suspend %s: %w: %w", s.ID, provider.ErrUnsupported, err)
		}
		if err != nil {
			return fmt.Errorf("suspend %s: %w", s.ID, err)
		}
		return nil
	}
}

// refusal reports whether a failed suspend was the API declining this
// machine, as opposed to a failure that says nothing of it.
func refusal(e *Error) bool {
	switch e.Status {
	case 0, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return e.Status >= 400
}

// Stop stops the home's machine with the configured signal and timeout
// and waits until it is stopped, for at most stop_timeout and a margin of
// 5s (or ctx, if it ends first). proven is true when the API confirmed
// the stopped state (a wait for stopped returned, or the machine was read
// stopped).
func (p *Provider) Stop(ctx context.Context, s provider.Spec) (bool, error) {
	proven, err := p.stop(ctx, s)
	return proven, wrap("stop", err)
}

func (p *Provider) stop(ctx context.Context, s provider.Spec) (bool, error) {
	// The API kills the guest stop_timeout after the signal; a machine not
	// stopped a margin after that is hung, and waiting on helps nobody.
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StopTimeout+stopMargin)
	defer cancel()
	h, err := p.home(s)
	if err != nil {
		return false, err
	}
	id := h.Machine
	m, err := p.cl.get(ctx, id)
	if err != nil {
		return false, fmt.Errorf("stop %s: %w", s.ID, err)
	}
	switch m.State {
	case stateStopped, stateCreated, stateDestroyed:
		return true, nil
	case stateStopping:
	default:
		if err := p.cl.stop(ctx, id, p.cfg.StopSignal, p.cfg.StopTimeout); err != nil {
			return false, fmt.Errorf("stop %s: %w", s.ID, err)
		}
	}
	if err := p.cl.wait(ctx, id, m.InstanceID, stateStopped); err != nil {
		return false, fmt.Errorf("stop %s: not confirmed stopped: %w", s.ID, err)
	}
	return true, nil
}

// Recreate moves the home's machine onto the image of s (its Image, or
// the config's image template filled with s.Version): it takes the
// machine's lease (waiting within ctx while another client holds it),
// reads the machine's config, updates the machine with that full config,
// the new image and the version in metadata, brings the new instance up
// (Fly leaves an updated machine started or stopped: one that was not
// running usually stays stopped, and is started here), and releases the
// lease, which is renewed meanwhile. The volume stays attached: it is
// part of the config.
func (p *Provider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	r, err := p.recreate(ctx, s)
	return r, wrap("recreate", err)
}

func (p *Provider) recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	h, err := p.home(s)
	if err != nil {
		return provider.Result{}, err
	}
	id := h.Machine
	image := p.image(s)
	if image == "" {
		return provider.Result{}, &Error{Op: "recreate", Machine: id, Code: CodeNoImage,
			Message: "neither the target nor fly.image names an image for version " + s.Version}
	}
	nonce, err := p.cl.lease(ctx, id, "wakegate: recreate home "+s.ID+" on version "+s.Version, p.cfg.LeaseTTL)
	if err != nil {
		return provider.Result{}, fmt.Errorf("recreate %s on %s: %w", s.ID, s.Version, err)
	}
	defer p.release(ctx, id, nonce)
	stopRenew := p.renew(ctx, id, nonce)
	defer stopRenew() // runs before the release

	m, err := p.cl.get(ctx, id)
	if err != nil {
		return provider.Result{}, fmt.Errorf("recreate %s on %s: %w", s.ID, s.Version, err)
	}
	cfg, err := withImage(m.Config, image, p.cfg.VersionKey, s.Version)
	if err != nil {
		return provider.Result{}, &Error{Op: "recreate", Machine: id, Code: CodeRejected, Message: "the machine's config cannot be read", Err: err}
	}
	nm, err := p.cl.update(ctx, id, nonce, m.InstanceID, cfg)
	if err != nil {
		return provider.Result{}, fmt.Errorf("recreate %s on %s: %w", s.ID, s.Version, err)
	}
	if nm.ID == "" {
		nm.ID = id
	}
	from := &nm
	if nm.InstanceID == "" || nm.InstanceID == m.InstanceID {
		from = nil // the answer does not show the new instance: read it
	}
	if nm, err = p.bringUp(ctx, id, nonce, from); err != nil {
		return provider.Result{}, fmt.Errorf("recreate %s on %s: %w", s.ID, s.Version, err)
	}
	return p.result(s, h, nm), nil
}

// renew keeps the lease held with nonce alive until the returned stop is
// called (stop then waits for the renewing to end): the lease is renewed
// every third of its TTL, and at most once a second (the API's rate for
// one action of one machine), so that a roll whose update, image pull and
// boot outlast the TTL still holds the machine's lease when it starts
// the machine and releases the lease. flyctl does the same in the
// background (leasable_machine.go, refreshLeaseUntilCanceled). A renewal
// that fails is logged and tried again at the next tick.
func (p *Provider) renew(ctx context.Context, id, nonce string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	every := max(p.cfg.LeaseTTL/3, time.Second)
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := p.cl.renew(ctx, id, nonce, p.cfg.LeaseTTL); err != nil && ctx.Err() == nil {
				p.log.Warn("fly: lease not renewed; trying again", "machine", id, "every", every, "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// release gives a lease back, on a context of its own: the lease must go
// even when the recreate's deadline has passed. A failure is logged; the
// lease then ends at its TTL.
func (p *Provider) release(ctx context.Context, id, nonce string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := p.cl.release(rctx, id, nonce); err != nil {
		p.log.Warn("fly: lease not released; it ends at its TTL", "machine", id, "ttl", p.cfg.LeaseTTL, "err", err)
	}
}

// image is the image a recreate runs: the spec's own, else the template.
func (p *Provider) image(s provider.Spec) string {
	if img := s.Image; img != "" {
		return img
	}
	if p.cfg.Image == "" || s.Version == "" {
		return ""
	}
	return strings.ReplaceAll(p.cfg.Image, "{version}", s.Version)
}

// withImage returns cfg (a machine config, kept whole) with image set and
// metadata[key] = version.
func withImage(cfg json.RawMessage, image, key, version string) (json.RawMessage, error) {
	c := map[string]any{}
	if len(cfg) > 0 && string(cfg) != "null" {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return nil, err
		}
	}
	c["image"] = image
	md, _ := c["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	if version != "" {
		md[key] = version
	}
	c["metadata"] = md
	return json.Marshal(c)
}

// Version reads the version the home runs, from the configured source.
func (p *Provider) Version(ctx context.Context, s provider.Spec) (string, error) {
	v, err := p.version(ctx, s)
	return v, wrap("version", err)
}

func (p *Provider) version(ctx context.Context, s provider.Spec) (string, error) {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	h, err := p.home(s)
	if err != nil {
		return "", err
	}
	id := h.Machine
	var v string
	switch p.cfg.VersionFrom {
	case VersionExec:
		var a execAnswer
		if a, err = p.cl.exec(ctx, id, p.cfg.VersionCommand); err == nil && a.ExitCode != 0 {
			err = &Error{Op: "exec", Machine: id, Code: CodeVersion,
				Message: fmt.Sprintf("version command exited %d: %s", a.ExitCode, fault.Excerpt(strings.TrimSpace(a.Stderr)))}
		}
		v = a.Stdout
	case VersionHTTP:
		v, err = p.httpVersion(ctx, s, h)
	default:
		var md map[string]string
		if md, err = p.cl.metadata(ctx, id); err == nil && md[p.cfg.VersionKey] == "" {
			err = &Error{Op: "metadata", Machine: id, Code: CodeVersion, Message: "metadata key " + p.cfg.VersionKey + " is not set"}
		}
		v = md[p.cfg.VersionKey]
	}
	if err == nil {
		v, err = provider.VersionText(v)
	}
	if err != nil {
		return "", fmt.Errorf("version of %s: %w", s.ID, err)
	}
	return v, nil
}

// httpVersion asks GET {endpoint}/version.
func (p *Provider) httpVersion(ctx context.Context, s provider.Spec, h HomeOptions) (string, error) {
	m, err := p.cl.get(ctx, h.Machine)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.endpoint(s, h, m), "/")+"/version", nil)
	if err != nil {
		return "", err
	}
	res, err := provider.HomeClient(p.hc).Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", &Error{Op: "GET /version", Machine: h.Machine, Status: res.StatusCode, Code: CodeVersion}
	}
	return string(b), nil
}

// Status reads the machine and reports its state, normalised.
func (p *Provider) Status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	r, err := p.status(ctx, s)
	return r, wrap("status", err)
}

// machineNow reads the machine of s's home; a version that was just
// replaced or moved is read again, once, to get the active one.
func (p *Provider) machineNow(ctx context.Context, s provider.Spec) (HomeOptions, machine, error) {
	h, err := p.home(s)
	if err != nil {
		return h, machine{}, err
	}
	m, err := p.cl.get(ctx, h.Machine)
	if err == nil && (m.State == stateReplaced || m.State == stateMigrated) {
		var pause pacer
		if err = pause.wait(ctx, h.Machine); err == nil {
			m, err = p.cl.get(ctx, h.Machine)
		}
	}
	return h, m, err
}

func (p *Provider) status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	ctx, cancel := p.bound(ctx, 0)
	defer cancel()
	h, m, err := p.machineNow(ctx, s)
	if err != nil {
		return provider.Result{State: provider.StateUnknown}, fmt.Errorf("status of %s: %w", s.ID, err)
	}
	r := p.result(s, h, m)
	if r.State == provider.StateUnknown {
		r.Reason = "the machine is " + m.State
	}
	if r.State == provider.StateFailed {
		r.Reason = "the machine is " + m.State
	}
	return r, nil
}

// normalise maps a machine state onto a provider state. Transient states
// count as where they lead: starting is running, stopping stopped,
// suspending suspended. replaced and migrated name a version that is no
// longer the active one, which says nothing of the machine: unknown.
func normalise(state string) provider.State {
	switch state {
	case stateStarted, stateStarting, stateRestarting, stateReplacing, stateUpdating, stateCreating:
		return provider.StateRunning
	case stateSuspended, stateSuspending:
		return provider.StateSuspended
	case stateStopped, stateStopping, stateCreated:
		return provider.StateStopped
	case stateFailed, stateLaunchFailed, stateDestroying, stateDestroyed:
		return provider.StateFailed
	}
	return provider.StateUnknown
}

var _ provider.Provider = (*Provider)(nil)
