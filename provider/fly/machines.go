package fly

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
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
}

// maxWait is the longest wait the API serves in one request; a longer
// wait is several requests.
const maxWait = 60 * time.Second

func (cl *client) get(ctx context.Context, id string) (machine, error) {
	var m machine
	_, err := cl.do(ctx, call{action: actGet, op: "get", machine: id, method: http.MethodGet}, &m)
	return m, err
}

// start asks the machine to start; a suspended machine resumes. Without a
// lease of our own, a 409 (someone else holds the lease, for example a
// roll from another gateway) is waited out within ctx.
func (cl *client) start(ctx context.Context, id, nonce string) error {
	_, err := cl.do(ctx, call{action: actStart, op: "start", machine: id, method: http.MethodPost, path: "/start",
		nonce: nonce, retry409: nonce == ""}, nil)
	return err
}

// suspend asks a started machine to suspend to a snapshot.
func (cl *client) suspend(ctx context.Context, id string) error {
	_, err := cl.do(ctx, call{action: actSuspend, op: "suspend", machine: id, method: http.MethodPost, path: "/suspend"}, nil)
	return err
}

type stopBody struct {
	Signal  string `json:"signal,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

// stop asks the machine to stop with signal, killing it after timeout.
func (cl *client) stop(ctx context.Context, id, signal string, timeout time.Duration) error {
	_, err := cl.do(ctx, call{action: actStop, op: "stop", machine: id, method: http.MethodPost, path: "/stop",
		body: stopBody{Signal: signal, Timeout: timeout.String()}}, nil)
	return err
}

// wait blocks until the machine (the instance, when given) is in state,
// for as long as ctx allows: each request asks the API to wait up to the
// time left (at most a minute) and a 408 is asked again while time is
// left. A ctx that ends first gives a CodeWaitTimeout error.
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

type leaseBody struct {
	Description string `json:"description,omitempty"`
	TTL         int    `json:"ttl,omitempty"`
}

type leaseAnswer struct {
	Status string `json:"status"`
	Data   struct {
		Nonce     string `json:"nonce"`
		ExpiresAt int64  `json:"expires_at"`
		Owner     string `json:"owner"`
	} `json:"data"`
	Message string `json:"message"`
}

// lease acquires the machine's lease for ttl, waiting (within ctx) while
// another client holds it, and returns the nonce.
func (cl *client) lease(ctx context.Context, id, why string, ttl time.Duration) (string, error) {
	var a leaseAnswer
	_, err := cl.do(ctx, call{action: actLease, op: "lease", machine: id, method: http.MethodPost, path: "/lease",
		body: leaseBody{Description: why, TTL: int(ttl / time.Second)}, retry409: true}, &a)
	if err != nil {
		return "", err
	}
	if a.Data.Nonce == "" {
		return "", &Error{Op: "lease", Machine: id, Status: http.StatusCreated, Code: CodeRejected, Message: "the lease answer carries no nonce"}
	}
	return a.Data.Nonce, nil
}

// release gives the lease back.
func (cl *client) release(ctx context.Context, id, nonce string) error {
	_, err := cl.do(ctx, call{action: actRelease, op: "release lease", machine: id, method: http.MethodDelete, path: "/lease", nonce: nonce}, nil)
	return err
}

type updateBody struct {
	Config json.RawMessage `json:"config"`
}

// update replaces the machine's config (the whole of it) under the lease
// nonce and returns the machine as the API now reports it, with its new
// instance id.
func (cl *client) update(ctx context.Context, id, nonce string, cfg json.RawMessage) (machine, error) {
	var m machine
	_, err := cl.do(ctx, call{action: actUpdate, op: "update", machine: id, method: http.MethodPost,
		body: updateBody{Config: cfg}, nonce: nonce}, &m)
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
