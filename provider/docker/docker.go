// Package docker runs homes as containers of a Docker Engine, or of any
// engine that serves its API (Podman's compatible service). A home's
// container is created on its first wake, labelled with the gateway's name,
// the home's id and its version, and kept across suspends: a suspend stops
// it (or pauses it), a wake starts it again, a roll recreates it from the
// new version's image, and only a removal of the home deletes it. A home
// may also be a group of containers with one entry (group.go: the members'
// options; members.go: their start, stop and roll in dependency order).
//
// DESIGN rules that live here: 29 (a stop is proven by the engine's state
// of the container), 31 (a home's container sees its own environment and
// relay token; what it prints reaches operators only as escaped excerpts;
// it is on a network of its own, network.go, without capabilities or new
// privileges and under a pids limit, limits.go), 34 (the pids limit is
// every container's by default), 11's health rung (the container's
// HEALTHCHECK as the engine reports it, health.go; a group member's
// readiness, members.go).
//
// A home may also be a container made by someone else (options.container,
// existing.go), or a group of such containers, which the provider starts
// and stops but never makes; with discover: true, containers labelled
// wakegate.enable=true become such homes without a config entry
// (discover.go), those sharing wakegate.group one group home
// (discovergroup.go). Each running container of a home, a group's
// members too, is watched: one that exits by itself fails the home.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
)

// Name is the provider's config name.
const Name = "docker"

// Labels on every container the provider makes.
const (
	LabelGateway = "wakegate.gateway"
	LabelHome    = "wakegate.home"
	LabelVersion = "wakegate.version"
	LabelImage   = "wakegate.image"
	// LabelIsolation is a digest of what the container is allowed (its
	// network, capabilities, user, root file system and limits): a stopped
	// container made with other settings is made again.
	LabelIsolation = "wakegate.isolation"
)

// logLines is how many of a container's last log lines a failure names.
const logLines = 5

// Options are what the gateway hands the provider besides its section.
type Options struct {
	// Log is the provider's logger; nil discards.
	Log *slog.Logger
	// DataDir is where the provider keeps its few files (which containers
	// it stopped itself); "" keeps them in memory only.
	DataDir string
	// OnChange is told when a running container exits by itself.
	OnChange func(id string, r provider.Result)
}

// Provider runs homes as containers. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	cli      *client.Client
	log      *slog.Logger
	dir      string
	onChange func(string, provider.Result)
	http     *http.Client

	ctx    context.Context // ends at Close: the watchers' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	watches map[string]*watch // home id -> the watcher of its running container
	stopped map[string]string // home id -> container id this provider stopped
}

// watch is the goroutine that waits for one run of a home's container to
// end. cancel ends it without a report.
type watch struct {
	ref    string
	cancel context.CancelFunc
}

// New builds the provider from a defaulted, checked section. It does not
// contact the engine: an engine that is down fails the first wake, with a
// hint, not the gateway's start.
func New(cfg Config, o Options) (*Provider, error) {
	cfg.Defaults()
	if ps := problems("", cfg.Check()); len(ps) > 0 {
		return nil, fmt.Errorf("providers.docker.%s: %s", ps[0].Field, ps[0].Msg)
	}
	cli, err := client.New(client.WithHost(cfg.Host)) // negotiates the API version (Podman serves 1.41)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", cfg.Host, err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.OnChange == nil {
		o.OnChange = func(string, provider.Result) {}
	}
	p := &Provider{cfg: cfg, cli: cli, log: o.Log, onChange: o.OnChange,
		// A transport of its own: no proxy from the environment between
		// the gateway and a home's address on a container network.
		http:    provider.HomeClient(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}),
		watches: map[string]*watch{}, stopped: map[string]string{}}
	if o.DataDir != "" {
		p.dir = filepath.Join(o.DataDir, "docker")
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if cfg.Network != NetworkHome {
		p.log.Warn("docker: homes share a network: each home's container can open the others' ports past the gateway; "+
			"set providers.docker.network: home to give each home a network of its own", "network", cfg.Network)
	}
	return p, nil
}

// Name returns "docker".
func (p *Provider) Name() string { return Name }

// Close ends the watchers and the engine connection. Containers are left
// as they are: a restarted gateway adopts them by their labels.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true // no watcher starts after this
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return p.cli.Close()
}

// containerName is the name of home id's container.
func (p *Provider) containerName(id string) string { return p.cfg.Name + "-" + id }

// find returns home id's container, or nil when it has none.
func (p *Provider) find(ctx context.Context, op, id string) (*container.InspectResponse, error) {
	f := make(client.Filters).Add("label", LabelGateway+"="+p.cfg.Name, LabelHome+"="+id)
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, p.engineError(op, id, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	if len(list.Items) > 1 {
		return nil, &provider.Error{Op: op, Reason: provider.ReasonConflict,
			Err:  fmt.Errorf("%d containers are labelled as home %s of gateway %s", len(list.Items), id, p.cfg.Name),
			Hint: fmt.Sprintf("remove all but one (docker ps -a --filter label=%s=%s)", LabelHome, id)}
	}
	return p.inspect(ctx, op, id, list.Items[0].ID)
}

// inspect reads a container; a container that is gone is nil.
func (p *Provider) inspect(ctx context.Context, op, id, ref string) (*container.InspectResponse, error) {
	r, err := p.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, p.engineError(op, id, err)
	}
	c := r.Container
	if c.State == nil || c.Config == nil {
		return nil, &provider.Error{Op: op, Reason: provider.ReasonUnavailable,
			Err: fmt.Errorf("the engine described container %s without its state or config", short(ref))}
	}
	return &c, nil
}

// createNew makes the home's container for s and reads it back; one
// removed as soon as it was made is a not-found error.
func (p *Provider) createNew(ctx context.Context, op string, s provider.Spec) (*container.InspectResponse, error) {
	ref, err := p.create(ctx, op, s)
	if err != nil {
		return nil, err
	}
	c, err := p.inspect(ctx, op, s.ID, ref)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, &provider.Error{Op: op, Reason: provider.ReasonNotFound,
			Err: fmt.Errorf("container %s of home %s was removed as it was made", short(ref), s.ID)}
	}
	return c, nil
}

// homeOptions decodes s's options (checked at load already).
func homeOptions(op string, s provider.Spec) (HomeOptions, error) {
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		return o, &provider.Error{Op: op, Reason: provider.ReasonBadConfig, Err: err}
	}
	o.asEntry()
	return o, nil
}

// vars are the placeholders of s.
func (p *Provider) vars(s provider.Spec) *strings.Replacer {
	return strings.NewReplacer("{version}", s.Version, "{target}", s.Target, "{id}", s.ID,
		"{port}", strconv.Itoa(p.cfg.Port))
}

// image is the image s runs: the roll target's own, the home's, or the
// section's template.
func (p *Provider) image(s provider.Spec, o HomeOptions) string {
	switch {
	case s.Image != "":
		return s.Image
	case o.Image != "":
		return p.vars(s).Replace(o.Image)
	case p.cfg.Image != "":
		return p.vars(s).Replace(p.cfg.Image)
	}
	return ""
}

// command is the CMD of s's container: the home's options, the home's
// own or the roll target's command, the section's, or nil for the
// image's own.
func (p *Provider) command(s provider.Spec, o HomeOptions) []string {
	tmpl := p.cfg.Command
	switch {
	case len(o.Command) > 0:
		tmpl = o.Command
	case len(s.Command) > 0:
		tmpl = s.Command
	}
	if len(tmpl) == 0 {
		return nil
	}
	r := p.vars(s)
	out := make([]string, len(tmpl))
	for i, a := range tmpl {
		out[i] = r.Replace(a)
	}
	return out
}

// env is the environment of s's container: the section's, the home's, its
// options', then the relay token.
func (p *Provider) env(s provider.Spec, o HomeOptions) []string {
	r := p.vars(s)
	var out []string
	for _, list := range [][]string{p.cfg.Env, s.Env, o.Env} {
		for _, kv := range list {
			out = append(out, r.Replace(kv))
		}
	}
	if s.RelayToken != "" {
		out = append(out, "WAKEGATE_RELAY_TOKEN="+s.RelayToken)
	}
	return out
}

// create makes s's container, pulling its image as the pull policy says.
func (p *Provider) create(ctx context.Context, op string, s provider.Spec) (string, error) {
	o, err := homeOptions(op, s)
	if err != nil {
		return "", err
	}
	img := p.image(s, o)
	if img == "" {
		return "", &provider.Error{Op: op, Reason: provider.ReasonBadConfig,
			Err:  fmt.Errorf("home %s names no image", s.ID),
			Hint: "set providers.docker.image (a template with {version}) or the home's options.image"}
	}
	if err := p.ensureImage(ctx, op, s.ID, img); err != nil {
		return "", err
	}
	port, err := network.ParsePort(strconv.Itoa(p.cfg.Port) + "/tcp")
	if err != nil {
		return "", &provider.Error{Op: op, Reason: provider.ReasonBadConfig, Err: err}
	}
	if err := p.ensureNetwork(ctx, op, s.ID); err != nil {
		return "", err
	}
	is := p.isolationOf(s, o)
	stop := int(p.cfg.StopTimeout / time.Second)
	cfg := &container.Config{
		Image: img,
		Env:   p.env(s, o),
		Cmd:   p.command(s, o),
		Labels: map[string]string{LabelGateway: p.cfg.Name, LabelHome: s.ID,
			LabelVersion: s.Version, LabelImage: img, LabelIsolation: is.digest()},
		ExposedPorts: network.PortSet{port: {}},
		StopTimeout:  &stop,
	}
	hc := &container.HostConfig{Binds: o.Volumes}
	is.apply(cfg, hc)
	if p.publishes() {
		hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1")}}}
	}
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: p.containerName(s.ID), Config: cfg, HostConfig: hc,
		NetworkingConfig: p.memberAlias(s.ID, o.entryMember())})
	if err != nil {
		return "", p.engineError(op, s.ID, err)
	}
	p.log.Info("docker: container created", "home", s.ID, "container", short(res.ID), "image", img, "version", s.Version)
	return res.ID, nil
}

// ensureImage pulls img as the pull policy says.
func (p *Provider) ensureImage(ctx context.Context, op, id, img string) error {
	if p.cfg.Pull != PullAlways {
		_, err := p.cli.ImageInspect(ctx, img)
		switch {
		case err == nil:
			return nil
		case !isNotFound(err):
			return p.engineError(op, id, err)
		case p.cfg.Pull == PullNever:
			return &provider.Error{Op: op, Reason: provider.ReasonBadConfig,
				Err:  fmt.Errorf("image %s is not on the engine and providers.docker.pull is never", img),
				Hint: "load or pull the image on the engine (docker pull, docker load, podman import), or set pull: missing"}
		}
	}
	p.log.Info("docker: pulling image", "home", id, "image", img)
	r, err := p.cli.ImagePull(ctx, img, client.ImagePullOptions{})
	if err != nil {
		return p.imageError(op, id, img, err)
	}
	defer r.Close()
	if err := r.Wait(ctx); err != nil {
		return p.imageError(op, id, img, err)
	}
	return nil
}

// start starts (or resumes) container c of s and returns where it
// listens, watching the run it started.
func (p *Provider) start(ctx context.Context, op string, s provider.Spec, c *container.InspectResponse) (provider.Result, error) {
	p.forgetStopped(s.ID)
	var err error
	switch {
	case c.State.Paused:
		_, err = p.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	case !c.State.Running:
		_, err = p.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
	}
	if err != nil {
		return provider.Result{}, p.engineError(op, s.ID, err)
	}
	now, err := p.inspect(ctx, op, s.ID, c.ID)
	if err != nil {
		return provider.Result{}, err
	}
	if now == nil {
		return provider.Result{}, &provider.Error{Op: op, Reason: provider.ReasonNotFound,
			Err: fmt.Errorf("container %s of home %s was removed while it started", short(c.ID), s.ID)}
	}
	if !now.State.Running {
		// It exited already: the provider gives up on it here, before the
		// wake ends, so that the wake's outcome is this reason (as when it
		// exits during the probe, which the watcher reports).
		reason := "the container " + p.exitReason(ctx, now)
		p.onChange(s.ID, provider.Result{State: provider.StateFailed, Ref: now.ID, Reason: reason})
		return provider.Result{}, &provider.Error{Op: op, Reason: ReasonExited,
			Err:  fmt.Errorf("container %s of home %s: %s", short(now.ID), s.ID, reason),
			Hint: "the home's program exits at once: read its log (docker logs " + p.containerName(s.ID) + ") and fix its image or command"}
	}
	p.watch(s.ID, now.ID)
	ep, err := p.endpointOf(s, now)
	if err != nil {
		return provider.Result{}, &provider.Error{Op: op, Reason: provider.ReasonBadConfig, Err: err,
			Hint: "the container must listen on providers.docker.port and be reachable on providers.docker.network"}
	}
	return provider.Result{Endpoint: ep, Ref: now.ID, State: provider.StateRunning}, nil
}

// publishes reports whether the home's port is published on the host's
// loopback, where the gateway reaches it.
func (p *Provider) publishes() bool {
	return p.cfg.Network == NetworkHome || p.cfg.Network == NetworkBridge
}

// endpoint is where the gateway reaches c's home.
func (p *Provider) endpoint(c *container.InspectResponse) (string, error) {
	port := strconv.Itoa(p.cfg.Port)
	switch {
	case p.cfg.Network == NetworkHost:
		return "http://127.0.0.1:" + port, nil
	case p.publishes():
		if ep, ok := publishedAt(c, p.cfg.Port); ok {
			return ep, nil
		}
		return "", fmt.Errorf("container %s publishes no host port for %s/tcp", short(c.ID), port)
	}
	if c.NetworkSettings != nil {
		if n, ok := c.NetworkSettings.Networks[p.cfg.Network]; ok && n != nil && n.IPAddress.IsValid() {
			return "http://" + net.JoinHostPort(n.IPAddress.String(), port), nil
		}
	}
	return "", fmt.Errorf("container %s has no address on network %s", short(c.ID), p.cfg.Network)
}

// Wake starts home s's container, creating it on first use. A stopped
// container made for another version or image is made again; a running
// one is returned as it is (the version assert judges it). A group's
// members start first, in their order (wakeGroup).
func (p *Provider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if o, ms := groupOf(s); ms != nil {
		return p.wakeGroup(ctx, s, o, ms)
	}
	if o, ok := existing(s); ok {
		return p.wakeExisting(ctx, s, o)
	}
	return p.wakeHome(ctx, s)
}

// wakeHome starts the home's own container (a group's entry).
func (p *Provider) wakeHome(ctx context.Context, s provider.Spec) (provider.Result, error) {
	c, err := p.find(ctx, "wake", s.ID)
	if err != nil {
		return provider.Result{}, err
	}
	if c != nil && !c.State.Running {
		o, err := homeOptions("wake", s)
		if err != nil {
			return provider.Result{}, err
		}
		if c.Config.Labels[LabelVersion] != s.Version || c.Config.Labels[LabelImage] != p.image(s, o) ||
			c.Config.Labels[LabelIsolation] != p.isolationOf(s, o).digest() {
			if err := p.remove(ctx, "wake", s.ID, c.ID); err != nil {
				return provider.Result{}, err
			}
			c = nil
		}
	}
	if c == nil {
		if c, err = p.createNew(ctx, "wake", s); err != nil {
			return provider.Result{}, err
		}
	}
	return p.start(ctx, "wake", s, c)
}

// Suspend pauses the container (a group's members, in reverse order)
// when providers.docker.suspend is pause; otherwise it is unsupported and
// the caller stops the home.
func (p *Provider) Suspend(ctx context.Context, s provider.Spec) error {
	if p.cfg.Suspend != SuspendPause {
		return provider.ErrUnsupported
	}
	if _, ms := groupOf(s); ms != nil {
		return p.suspendGroup(ctx, s, ms)
	}
	return p.suspendHome(ctx, s)
}

// suspendHome pauses the home's own container.
func (p *Provider) suspendHome(ctx context.Context, s provider.Spec) error {
	p.unwatch(s.ID)
	c, err := p.lookup(ctx, "suspend", s)
	if err != nil || c == nil || !c.State.Running || c.State.Paused {
		return err
	}
	p.markStopped(s.ID, c.ID)
	if _, err := p.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{}); err != nil {
		return p.engineError("suspend", s.ID, err)
	}
	return nil
}

// Stop stops the container, waiting stop_timeout before the engine kills
// it. The stop is proven when the engine reports the container not
// running (or gone); a group's, when it reports so of every member,
// stopped in reverse order.
func (p *Provider) Stop(ctx context.Context, s provider.Spec) (bool, error) {
	if _, ms := groupOf(s); ms != nil {
		return p.stopGroup(ctx, s, ms)
	}
	return p.stopHome(ctx, s)
}

// stopHome stops the home's own container.
func (p *Provider) stopHome(ctx context.Context, s provider.Spec) (bool, error) {
	p.unwatch(s.ID)
	c, err := p.lookup(ctx, "stop", s)
	if err != nil {
		return false, err
	}
	if c == nil {
		return true, nil
	}
	if err := p.stopContainer(ctx, "stop", s.ID, c); err != nil {
		return false, err
	}
	now, err := p.inspect(ctx, "stop", s.ID, c.ID)
	if err != nil {
		return false, err
	}
	// Podman reports a paused container as not running: paused counts too.
	return now == nil || (!now.State.Running && !now.State.Paused), nil
}

// stopContainer stops c (resuming it first when it is paused, which an
// engine cannot stop).
func (p *Provider) stopContainer(ctx context.Context, op, id string, c *container.InspectResponse) error {
	p.markStopped(id, c.ID)
	return p.halt(ctx, op, id, c)
}

// halt stops c, of home id, without recording the stop.
func (p *Provider) halt(ctx context.Context, op, id string, c *container.InspectResponse) error {
	if c.State.Paused {
		if _, err := p.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{}); err != nil {
			return p.engineError(op, id, err)
		}
	}
	if !c.State.Running && !c.State.Paused {
		return nil
	}
	t := int(p.cfg.StopTimeout / time.Second)
	if _, err := p.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &t}); err != nil {
		return p.engineError(op, id, err)
	}
	return nil
}

// remove stops and deletes container ref of home id. Named volumes are
// kept; the container's own writable layer goes.
func (p *Provider) remove(ctx context.Context, op, id, ref string) error {
	p.unwatch(id)
	c, err := p.inspect(ctx, op, id, ref)
	if err != nil || c == nil {
		return err
	}
	if err := p.stopContainer(ctx, op, id, c); err != nil {
		return err
	}
	if _, err := p.cli.ContainerRemove(ctx, ref, client.ContainerRemoveOptions{}); err != nil && !isNotFound(err) {
		return p.engineError(op, id, err)
	}
	p.log.Info("docker: container removed", "home", id, "container", short(ref))
	return nil
}

// Recreate replaces the home's container with one of s.Version (its image
// and command), keeping named volumes, and starts it. Of a group's other
// members, those whose image changed are replaced (recreateGroup).
func (p *Provider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if _, ok := existing(s); ok {
		return provider.Result{}, provider.ErrUnsupported // not the gateway's to make
	}
	if o, ms := groupOf(s); ms != nil {
		return p.recreateGroup(ctx, s, o, ms)
	}
	return p.recreateHome(ctx, s)
}

// recreateHome replaces the home's own container.
func (p *Provider) recreateHome(ctx context.Context, s provider.Spec) (provider.Result, error) {
	c, err := p.find(ctx, "recreate", s.ID)
	if err != nil {
		return provider.Result{}, err
	}
	if c != nil {
		if err := p.remove(ctx, "recreate", s.ID, c.ID); err != nil {
			return provider.Result{}, err
		}
	}
	if c, err = p.createNew(ctx, "recreate", s); err != nil {
		return provider.Result{}, err
	}
	return p.start(ctx, "recreate", s, c)
}

// Remove deletes the home's container (a group's members too) and its
// own network: the home is gone for good. Named volumes stay, for an
// operator to delete.
func (p *Provider) Remove(ctx context.Context, s provider.Spec) error {
	if _, ok := existing(s); ok {
		p.unwatch(s.ID) // the container is not the gateway's: it stays
		p.forgetStopped(s.ID)
		_, ms := groupOf(s)
		for _, m := range ms {
			p.unwatch(memberKey(s.ID, m))
			p.forgetStopped(memberKey(s.ID, m))
		}
		return nil
	}
	if err := p.removeMembers(ctx, s.ID); err != nil {
		return err
	}
	c, err := p.find(ctx, "remove", s.ID)
	if err != nil {
		p.forgetStopped(s.ID)
		return err
	}
	if c != nil {
		err = p.remove(ctx, "remove", s.ID, c.ID)
	}
	p.forgetStopped(s.ID)
	if err != nil {
		return err
	}
	return p.removeNetwork(ctx, "remove", s.ID)
}

// Version asks the running home which version it runs: GET /version.
func (p *Provider) Version(ctx context.Context, s provider.Spec) (string, error) {
	c, err := p.lookup(ctx, "version", s)
	if err != nil {
		return "", err
	}
	if c == nil || !c.State.Running || c.State.Paused {
		return "", fmt.Errorf("docker version %s: the home's container is not running", s.ID)
	}
	ep, err := p.endpointOf(s, c)
	if err != nil {
		return "", fmt.Errorf("docker version %s: %w", s.ID, err)
	}
	v, err := provider.AskVersion(ctx, p.http, ep)
	if err != nil {
		return "", fmt.Errorf("docker version %s: %w", s.ID, err)
	}
	return v, nil
}

// Status reports the container's state: running (with its endpoint),
// suspended (paused), stopped (none yet, made, or stopped by this
// gateway), or failed (it exited by itself: the exit code and its last log
// lines). A group's reason names each member's state (statusGroup).
func (p *Provider) Status(ctx context.Context, s provider.Spec) (provider.Result, error) {
	if _, ms := groupOf(s); ms != nil {
		return p.statusGroup(ctx, s, ms)
	}
	return p.statusHome(ctx, s)
}

// statusHome reports the home's own container's state.
func (p *Provider) statusHome(ctx context.Context, s provider.Spec) (provider.Result, error) {
	c, err := p.lookup(ctx, "status", s)
	if err != nil {
		return provider.Result{State: provider.StateUnknown, Reason: err.Error()}, err
	}
	if c == nil {
		return provider.Result{State: provider.StateStopped, Reason: "no container yet"}, nil
	}
	r := provider.Result{Ref: c.ID}
	switch {
	case c.State.Paused:
		r.State = provider.StateSuspended
	case c.State.Running:
		r.State = provider.StateRunning
		ep, err := p.endpointOf(s, c)
		if err != nil {
			return provider.Result{State: provider.StateUnknown, Reason: err.Error()}, nil
		}
		r.Endpoint = ep
	case c.State.Status == container.StateCreated:
		r.State = provider.StateStopped
	case c.State.ExitCode != 0 && !p.stoppedByUs(s.ID, c.ID):
		r.State, r.Reason = provider.StateFailed, p.exitReason(ctx, c)
	default:
		r.State, r.Reason = provider.StateStopped, fmt.Sprintf("container stopped (exit code %d)", c.State.ExitCode)
	}
	return r, nil
}

// exitReason says how c ended: its exit code, whether it ran out of
// memory, and its last log lines.
func (p *Provider) exitReason(ctx context.Context, c *container.InspectResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exited with code %d", c.State.ExitCode)
	if c.State.OOMKilled {
		b.WriteString(" (killed: out of memory)")
	}
	if c.State.Error != "" {
		b.WriteString("; engine: " + fault.Excerpt(c.State.Error))
	}
	if tail := p.logTail(ctx, c.ID); tail != "" {
		b.WriteString("; last log lines: " + tail)
	} else {
		b.WriteString("; no log lines")
	}
	return b.String()
}

// logTail is the container's last log lines, each escaped.
func (p *Provider) logTail(ctx context.Context, ref string) string {
	rc, err := p.cli.ContainerLogs(ctx, ref, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true,
		Tail: strconv.Itoa(logLines)})
	if err != nil {
		p.log.Warn("docker: container logs", "container", short(ref), "err", err)
		return ""
	}
	defer rc.Close()
	var out strings.Builder
	lw := &limitWriter{w: &out, n: 16 << 10}
	if _, err := stdcopy.StdCopy(lw, lw, io.LimitReader(rc, 64<<10)); err != nil && out.Len() == 0 {
		p.log.Warn("docker: container logs", "container", short(ref), "err", err)
		return ""
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, fault.Excerpt(l)) // a home's text: escaped
		}
	}
	if len(lines) > logLines {
		lines = lines[len(lines)-logLines:]
	}
	return strings.Join(lines, " | ")
}

// watch waits, in a goroutine of the provider's, for container ref of home
// id (or of a group's member, id its memberKey) to stop running; unless
// the provider stopped it itself (unwatch), it reports the home failed
// with the exit code and last log lines.
func (p *Provider) watch(id, ref string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if w := p.watches[id]; w != nil {
		if w.ref == ref {
			return
		}
		w.cancel()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	w := &watch{ref: ref, cancel: cancel}
	p.watches[id] = w
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		p.await(ctx, id, w)
	}()
}

// await is a watcher's body.
func (p *Provider) await(ctx context.Context, id string, w *watch) {
	res := p.cli.ContainerWait(ctx, w.ref, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-ctx.Done():
		return
	case err := <-res.Error:
		if ctx.Err() != nil {
			return
		}
		if !isNotFound(err) {
			p.log.Warn("docker: watching container", "home", id, "container", short(w.ref), "err", err)
			return
		}
	case <-res.Result:
	}
	p.mu.Lock()
	current := p.watches[id] == w
	if current {
		delete(p.watches, id)
	}
	p.mu.Unlock()
	if !current || ctx.Err() != nil {
		return
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	c, err := p.inspect(rctx, "status", id, w.ref)
	if err != nil || ctx.Err() != nil {
		return
	}
	reason := "the container was removed outside the gateway"
	if c != nil {
		if c.State.Running {
			// Started again (by a wake that found this watcher still
			// there, or by someone else): not an end; watch the new run.
			p.watch(id, w.ref)
			return
		}
		reason = "the container " + p.exitReason(rctx, c)
	}
	// A group member's watch is keyed by memberKey: its end fails the
	// whole home, so that the next wake starts the member again.
	home, member, ok := strings.Cut(id, "@")
	if ok {
		reason = "member " + member + ": " + reason
	}
	p.log.Error("docker: home's container exited", "home", home, "container", short(w.ref), "reason", reason)
	p.onChange(home, provider.Result{State: provider.StateFailed, Ref: w.ref, Reason: reason})
}

// unwatch ends home id's watcher without a report: the provider is about
// to stop, pause or remove the container itself.
func (p *Provider) unwatch(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.watches[id]; w != nil {
		w.cancel()
		delete(p.watches, id)
	}
}

// markStopped records that this provider stopped container ref of home id,
// in memory and in a file, so that a gateway started later does not take
// the stop's exit code for a crash.
func (p *Provider) markStopped(id, ref string) {
	p.mu.Lock()
	p.stopped[id] = ref
	p.mu.Unlock()
	if p.dir == "" {
		return
	}
	if err := os.MkdirAll(p.dir, 0o700); err == nil {
		err = os.WriteFile(filepath.Join(p.dir, id+".stopped"), []byte(ref), 0o600)
		if err != nil {
			p.log.Warn("docker: record a stop", "home", id, "err", err)
		}
	}
}

// forgetStopped drops the record of markStopped: the container runs again
// (or is gone).
func (p *Provider) forgetStopped(id string) {
	p.mu.Lock()
	delete(p.stopped, id)
	p.mu.Unlock()
	if p.dir != "" {
		if err := os.Remove(filepath.Join(p.dir, id+".stopped")); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.log.Warn("docker: forget a stop", "home", id, "err", err)
		}
	}
}

// stoppedByUs reports whether this provider (or one before it on the same
// data) stopped container ref of home id.
func (p *Provider) stoppedByUs(id, ref string) bool {
	p.mu.Lock()
	got, ok := p.stopped[id]
	p.mu.Unlock()
	if ok {
		return got == ref
	}
	if p.dir == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(p.dir, id+".stopped"))
	return err == nil && strings.TrimSpace(string(b)) == ref
}

// short is the 12-character form of a container id.
func short(ref string) string {
	if len(ref) > 12 {
		return ref[:12]
	}
	return ref
}

// limitWriter keeps the first n bytes written and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if l.n <= 0 {
		return len(b), nil
	}
	k := min(len(b), l.n)
	l.n -= k
	if _, err := l.w.Write(b[:k]); err != nil {
		return 0, err
	}
	return len(b), nil
}

var (
	_ provider.Provider = (*Provider)(nil)
	_ provider.Closer   = (*Provider)(nil)
)
