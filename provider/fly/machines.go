package fly

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Machine states, as the API names them.
const (
	stateCreated      = "created"
	stateCreating     = "creating"
	stateStarting     = "starting"
	stateStarted      = "started"
	stateStopping     = "stopping"
	stateStopped      = "stopped"
	stateSuspending   = "suspending"
	stateSuspended    = "suspended"
	stateRestarting   = "restarting"
	stateReplacing    = "replacing"
	stateUpdating     = "updating"
	stateDestroying   = "destroying"
	stateDestroyed    = "destroyed"
	stateFailed       = "failed"
	stateLaunchFailed = "launch_failed"
	// stateReplaced is the terminal state of a version an update replaced;
	// a read of the machine (not of a version) meets it only while an
	// update is taking over.
	stateReplaced = "replaced"
	// stateMigrated: the machine moved to another host; the version read
	// is no longer the active one.
	stateMigrated = "migrated"
)

// machine is the part of GET machine this provider reads. Config is kept
// whole: an update must send the full config back.
type machine struct {
	ID         string          `json:"id"`
	State      string          `json:"state"`
	Region     string          `json:"region"`
	InstanceID string          `json:"instance_id"`
	PrivateIP  string          `json:"private_ip"`
	Config     json.RawMessage `json:"config"`
	// Checks are the status of the machine's health checks ([api]
	// "checks": one entry per check the machine's config declares).
	Checks []machineCheck `json:"checks"`
}

// machineCheck is one health check's status as the API reports it:
// passing, warning or critical (Consul's words), with the check's last
// output.
type machineCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Output string `json:"output"`
}

// maxWait is the longest wait the API serves in one request; a longer
// wait is several requests.
const maxWait = 60 * time.Second

// restartPolicy is the machine's config.restart.policy ("" when unset:
// Fly's default restarts a machine that failed).
func (m machine) restartPolicy() string {
	var c struct {
		Restart struct {
			Policy string `json:"policy"`
		} `json:"restart"`
	}
	_ = json.Unmarshal(m.Config, &c)
	return c.Restart.Policy
}

func (cl *client) get(ctx context.Context, id string) (machine, error) {
	var m machine
	_, err := cl.do(ctx, call{action: actGet, op: "get", machine: id, method: http.MethodGet}, &m)
	return m, err
}

// reached returns a verify that reads the machine and finds the effect of
// a call done when its state is one of states.
func (cl *client) reached(id string, states ...string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		m, err := cl.get(ctx, id)
		if err != nil {
			return false, err
		}
		return slices.Contains(states, m.State), nil
	}
}

// startAnswer is the API's answer to a start: {"previous_state": ...}, or
// {"status": "error", "message": ...} with status 200 when the machine
// could not be started (flyctl's machine start treats it as a failure).
type startAnswer struct {
	Status        string `json:"status"`
	Message       string `json:"message"`
	PreviousState string `json:"previous_state"`
}

// start asks the machine to start; a suspended machine resumes. Without a
// lease of our own, a 409 (someone else holds the lease, for example a
// roll from another gateway) is waited out within ctx. An answer with
// status "error" is a CodeStartFailed error carrying the API's message.
func (cl *client) start(ctx context.Context, id, nonce string) error {
	var a startAnswer
	_, err := cl.do(ctx, call{action: actStart, op: "start", machine: id, method: http.MethodPost, path: "/start",
		nonce: nonce, retry409: nonce == "", verify: cl.reached(id, stateStarting, stateStarted)}, &a)
	if err == nil && a.Status == "error" {
		msg := a.Message
		if msg == "" {
			msg = "the start was answered with status error and no message"
		}
		return &Error{Op: "start", Machine: id, Status: http.StatusOK, Code: CodeStartFailed, Message: msg}
	}
	return err
}

// suspend asks a started machine to suspend to a snapshot.
func (cl *client) suspend(ctx context.Context, id string) error {
	_, err := cl.do(ctx, call{action: actSuspend, op: "suspend", machine: id, method: http.MethodPost, path: "/suspend",
		verify: cl.reached(id, stateSuspending, stateSuspended)}, nil)
	return err
}

type stopBody struct {
	Signal  string `json:"signal,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

// stop asks the machine to stop with signal, killing it after timeout.
func (cl *client) stop(ctx context.Context, id, signal string, timeout time.Duration) error {
	_, err := cl.do(ctx, call{action: actStop, op: "stop", machine: id, method: http.MethodPost, path: "/stop",
		body: stopBody{Signal: signal, Timeout: timeout.String()}, verify: cl.reached(id, stateStopping, stateStopped)}, nil)
	return err
}

// wait blocks until the machine (the instance, when given) is in state,
// for as long as ctx allows: each request asks the API to wait up to the
// time left (at most a minute) and a 408 is asked again while time is
// left. A ctx that ends first gives a CodeWaitTimeout error. An instance
// an update replaced, and a machine that failed to reach the state, are
// errors the caller reads with replacedErr and unreachedErr.
func (cl *client) wait(ctx context.Context, id, instance, state string) error {
	op := "wait " + state
	for {
		secs := int64(maxWait / time.Second)
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				return &Error{Op: op, Machine: id, Code: CodeWaitTimeout, Err: context.DeadlineExceeded}
			}
			secs = min(secs, max(1, int64(math.Ceil(left.Seconds()))))
		}
		q := url.Values{"state": {state}, "timeout": {fmt.Sprint(secs)}}
		if instance != "" {
			q.Set("instance_id", instance)
		}
		_, err := cl.do(ctx, call{action: actWait, op: op, machine: id, method: http.MethodGet, path: "/wait", query: q.Encode()}, nil)
		if err == nil {
			return nil
		}
		if e, ok := AsError(err); ok && e.Status == http.StatusRequestTimeout && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// replacedErr reports whether err is a wait on an instance that an update
// replaced meanwhile (flyctl's machine wait retries on this text).
func replacedErr(err error) bool {
	e, ok := AsError(err)
	return ok && strings.Contains(e.Message, "currently replaced")
}

// unreachedErr reports whether err is a wait the API gave up because the
// machine failed to reach the state (flyctl's WaitForStartOrStop reads
// this text and fails only when the restart policy is "no").
func unreachedErr(err error) bool {
	e, ok := AsError(err)
	return ok && strings.Contains(e.Message, "failed to reach desired state")
}

type leaseBody struct {
	Description string `json:"description,omitempty"`
	TTL         int    `json:"ttl,omitempty"`
}

type leaseAnswer struct {
	Status string `json:"status"`
	Data   struct {
		Nonce       string `json:"nonce"`
		ExpiresAt   int64  `json:"expires_at"`
		Owner       string `json:"owner"`
		Description string `json:"description"`
	} `json:"data"`
	Message string `json:"message"`
}

// lease acquires the machine's lease for ttl, waiting (within ctx) while
// another client holds it, and returns the nonce. why is made unique with
// a random tag, so that a lease whose 201 was lost is recognised as ours
// by reading the machine's lease (which carries its nonce) instead of
// being asked for again and met as someone else's until its TTL ends.
func (cl *client) lease(ctx context.Context, id, why string, ttl time.Duration) (string, error) {
	why += " [" + tag() + "]"
	var a leaseAnswer
	found := ""
	verify := func(ctx context.Context) (bool, error) {
		var l leaseAnswer
		_, err := cl.do(ctx, call{action: actGetLease, op: "get lease", machine: id, method: http.MethodGet, path: "/lease"}, &l)
		if e, ok := AsError(err); ok && e.Status == http.StatusNotFound {
			return false, nil // no lease: the create did not happen
		}
		if err != nil {
			return false, err
		}
		if l.Data.Description == why && l.Data.Nonce != "" {
			found = l.Data.Nonce
			return true, nil
		}
		return false, nil
	}
	_, err := cl.do(ctx, call{action: actLease, op: "lease", machine: id, method: http.MethodPost, path: "/lease",
		query: ttlQuery(ttl), body: leaseBody{Description: why, TTL: int(ttl / time.Second)}, retry409: true, verify: verify}, &a)
	if err != nil {
		return "", err
	}
	if found != "" {
		return found, nil
	}
	if a.Data.Nonce == "" {
		return "", &Error{Op: "lease", Machine: id, Status: http.StatusCreated, Code: CodeRejected, Message: "the lease answer carries no nonce"}
	}
	return a.Data.Nonce, nil
}

// renew extends the lease held with nonce to ttl from now (fly-go's
// RefreshLease: the create call with the nonce).
func (cl *client) renew(ctx context.Context, id, nonce string, ttl time.Duration) error {
	_, err := cl.do(ctx, call{action: actLease, op: "renew lease", machine: id, method: http.MethodPost, path: "/lease",
		query: ttlQuery(ttl), body: leaseBody{TTL: int(ttl / time.Second)}, nonce: nonce, idempotent: true}, nil)
	return err
}

// ttlQuery is a lease's TTL as a query: the reference passes it in the
// body, fly-go (AcquireLease, RefreshLease) in the query; both are sent.
func ttlQuery(ttl time.Duration) string { return "ttl=" + strconv.Itoa(int(ttl/time.Second)) }

// release gives the lease back.
func (cl *client) release(ctx context.Context, id, nonce string) error {
	_, err := cl.do(ctx, call{action: actRelease, op: "release lease", machine: id, method: http.MethodDelete, path: "/lease",
		nonce: nonce, idempotent: true}, nil)
	return err
}

// tag is a short random text that tells this process's requests apart.
func tag() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type updateBody struct {
	Config json.RawMessage `json:"config"`
}

// update replaces the machine's config (the whole of it) under the lease
// nonce and returns the machine as the API now reports it, with its new
// instance id. from is the instance before the update: an update whose
// answer was lost is found done when the machine reads with another
// instance and the new image.
func (cl *client) update(ctx context.Context, id, nonce, from string, cfg json.RawMessage) (machine, error) {
	var want struct {
		Image string `json:"image"`
	}
	_ = json.Unmarshal(cfg, &want)
	var m, seen machine
	verify := func(ctx context.Context) (bool, error) {
		var err error
		if seen, err = cl.get(ctx, id); err != nil {
			return false, err
		}
		var got struct {
			Image string `json:"image"`
		}
		_ = json.Unmarshal(seen.Config, &got)
		return seen.InstanceID != from && got.Image == want.Image, nil
	}
	a, err := cl.do(ctx, call{action: actUpdate, op: "update", machine: id, method: http.MethodPost,
		body: updateBody{Config: cfg}, nonce: nonce, verify: verify}, &m)
	if err == nil && len(a.body) == 0 {
		m = seen // the update was found done by verify
	}
	return m, err
}

// metadata returns the machine's metadata.
func (cl *client) metadata(ctx context.Context, id string) (map[string]string, error) {
	md := map[string]string{}
	_, err := cl.do(ctx, call{action: actMetadata, op: "metadata", machine: id, method: http.MethodGet, path: "/metadata"}, &md)
	return md, err
}

type execBody struct {
	Cmd     string `json:"cmd"`
	Timeout int    `json:"timeout,omitempty"`
}

type execAnswer struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// exec runs cmd in the guest and returns what it printed.
func (cl *client) exec(ctx context.Context, id, cmd string) (execAnswer, error) {
	secs := 10
	if dl, ok := ctx.Deadline(); ok {
		secs = int(max(1, min(10, math.Ceil(time.Until(dl).Seconds()))))
	}
	var a execAnswer
	_, err := cl.do(ctx, call{action: actExec, op: "exec", machine: id, method: http.MethodPost, path: "/exec",
		body: execBody{Cmd: cmd, Timeout: secs}}, &a)
	return a, err
}
