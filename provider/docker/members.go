package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/group"
)

// ReasonUnhealthy is a group member whose health check failed before the
// members that depend on it could start.
const ReasonUnhealthy = "member_unhealthy"

// groupOf is home s's options and its members in start order, or nil
// members for a home of one container (or options that do not decode,
// which the single home's path reports).
func groupOf(s provider.Spec) (HomeOptions, []Member) {
	o, err := homeOptions("", s)
	if err != nil || len(o.Members) == 0 {
		return o, nil
	}
	ms, cycle := startOrder(o.Members)
	if cycle != nil { // refused at load
		return o, nil
	}
	return o, ms
}

// memberName is the container name of member m of home id; the entry's
// is the home's.
func (p *Provider) memberName(id string, m Member) string {
	if m.Container != "" {
		return m.Container // an existing container's own
	}
	if m.Entry {
		return p.containerName(id)
	}
	return p.containerName(id) + "_" + m.Name
}

// memberKey is what markStopped records a member's stop under: no home id
// holds an @.
func memberKey(id string, m Member) string { return id + "@" + m.Name }

// memberAlias attaches a group member (m non-nil) to the home's network
// under its member name; nil for a single home's container.
func (p *Provider) memberAlias(id string, m *Member) *network.NetworkingConfig {
	if m == nil {
		return nil
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		p.containerNetwork(id): {Aliases: []string{m.Name}}}}
}

// groupNetwork refuses a group on a network where its members cannot find
// each other by name, or where other homes could reach them.
func (p *Provider) groupNetwork(op, id string) error {
	if p.cfg.Network == NetworkHome {
		return nil
	}
	return &provider.Error{Op: op, Reason: provider.ReasonBadConfig,
		Err:  fmt.Errorf("home %s is a group of containers on network %s", id, p.cfg.Network),
		Hint: "a group's members share the home's own network: set providers.docker.network: home"}
}

// memberError names member m's container in a failure of its own.
func (p *Provider) memberError(id string, m Member, err error) error {
	if pe, ok := provider.AsError(err); ok {
		pe.Err = fmt.Errorf("member %s (container %s): %w", m.Name, p.memberName(id, m), pe.Err)
		if pe.Hint != "" {
			pe.Hint = "member " + m.Name + " (container " + p.memberName(id, m) + "): " + pe.Hint
		}
		return pe
	}
	return fmt.Errorf("member %s (container %s): %w", m.Name, p.memberName(id, m), err)
}

// wakeGroup starts s's members in start order (ms), each once the members
// it depends on are ready, and returns the entry's result; the gateway
// then probes the entry as any home's container.
func (p *Provider) wakeGroup(ctx context.Context, s provider.Spec, o HomeOptions, ms []Member) (provider.Result, error) {
	return p.startGroup(ctx, "wake", s, o, ms, nil)
}

// startGroup starts s's members in start order; those in renew are made
// again first, and the entry too when recreate is set (renew non-nil).
func (p *Provider) startGroup(ctx context.Context, op string, s provider.Spec, o HomeOptions, ms []Member,
	renew map[string]bool) (provider.Result, error) {
	// Existing containers are on the networks they were made on.
	if o.Container == "" {
		if err := p.groupNetwork(op, s.ID); err != nil {
			return provider.Result{}, err
		}
	}
	needed := group.DependedOn(ms, Member.node)
	var res provider.Result
	for _, m := range ms {
		var err error
		if m.Entry {
			if o.Container != "" {
				res, err = p.wakeExisting(ctx, s, o)
			} else if renew != nil {
				res, err = p.recreateHome(ctx, s)
			} else {
				res, err = p.wakeHome(ctx, s)
			}
		} else {
			err = p.startMember(ctx, op, s, o, m, renew[m.Name])
		}
		if err == nil && (!m.Entry || needed[m.Name]) {
			err = p.awaitMember(ctx, op, s.ID, m)
		}
		if err != nil {
			return provider.Result{}, p.memberError(s.ID, m, err)
		}
	}
	// A member without a health check was ready once it ran: one that
	// exited since fails the wake as well.
	for _, m := range ms {
		if !m.Entry {
			if err := p.memberUp(ctx, op, s.ID, m); err != nil {
				return provider.Result{}, p.memberError(s.ID, m, err)
			}
		}
	}
	return res, nil
}

// memberConfig is the container of member m (not the entry) of home s:
// its own image, command, env and volumes, the home's isolation and
// limits, on the home's network; nothing published.
func (p *Provider) memberConfig(s provider.Spec, o HomeOptions, m Member) (*container.Config, *container.HostConfig) {
	r := p.vars(s)
	var env, cmd []string
	for _, kv := range m.Env {
		env = append(env, r.Replace(kv))
	}
	for _, a := range m.Command {
		cmd = append(cmd, r.Replace(a))
	}
	o.Volumes = m.Volumes // read-only's /tmp judged by the member's own
	is := p.isolationOf(s, o)
	img := r.Replace(m.Image)
	stop := int(p.cfg.StopTimeout / time.Second)
	cfg := &container.Config{Image: img, Env: env, Cmd: cmd, StopTimeout: &stop,
		Labels: map[string]string{LabelGateway: p.cfg.Name, LabelGroup: s.ID, LabelMember: m.Name,
			LabelImage: img, LabelIsolation: is.digest()}}
	hc := &container.HostConfig{Binds: m.Volumes}
	is.apply(cfg, hc)
	return cfg, hc
}

// findMember reads member m's container (nil when there is none); one of
// that name that is not this gateway's member is a conflict.
func (p *Provider) findMember(ctx context.Context, op, id string, m Member) (*container.InspectResponse, error) {
	name := p.memberName(id, m)
	c, err := p.inspect(ctx, op, id, name)
	if err != nil || c == nil || m.Container != "" {
		return c, err
	}
	if l := c.Config.Labels; l[LabelGateway] != p.cfg.Name || l[LabelGroup] != id || l[LabelMember] != m.Name {
		return nil, &provider.Error{Op: op, Reason: provider.ReasonConflict,
			Err:  fmt.Errorf("container %s exists without the labels of member %s of home %s", name, m.Name, id),
			Hint: "remove or rename the container, or give this gateway another providers.docker.name"}
	}
	return c, nil
}

// startMember starts member m (not the entry), making its container when
// it has none, when renew is set, or when a stopped one was made from
// another image or with other limits.
func (p *Provider) startMember(ctx context.Context, op string, s provider.Spec, o HomeOptions, m Member, renew bool) error {
	if m.Container != "" {
		return p.startExistingMember(ctx, op, s.ID, m)
	}
	cfg, hc := p.memberConfig(s, o, m)
	c, err := p.findMember(ctx, op, s.ID, m)
	if err != nil {
		return err
	}
	if c != nil && (renew || !c.State.Running && !c.State.Paused && !sameMember(c, cfg)) {
		if err := p.removeMember(ctx, op, s.ID, m, c); err != nil {
			return err
		}
		c = nil
	}
	if c == nil {
		if err := p.ensureImage(ctx, op, s.ID, cfg.Image); err != nil {
			return err
		}
		if err := p.ensureNetwork(ctx, op, s.ID); err != nil {
			return err
		}
		res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: p.memberName(s.ID, m),
			Config: cfg, HostConfig: hc, NetworkingConfig: p.memberAlias(s.ID, &m)})
		if err != nil {
			return p.engineError(op, s.ID, err)
		}
		p.log.Info("docker: member created", "home", s.ID, "member", m.Name, "container", short(res.ID), "image", cfg.Image)
		if c, err = p.inspect(ctx, op, s.ID, res.ID); err != nil {
			return err
		}
		if c == nil {
			return &provider.Error{Op: op, Reason: provider.ReasonNotFound, Err: errors.New("removed as it was made")}
		}
	}
	return p.runMember(ctx, op, s.ID, m, c)
}

// runMember starts (or resumes) member m's container c and watches it.
func (p *Provider) runMember(ctx context.Context, op, id string, m Member, c *container.InspectResponse) error {
	var err error
	p.forgetStopped(memberKey(id, m))
	switch {
	case c.State.Paused:
		_, err = p.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	case !c.State.Running:
		_, err = p.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
		p.log.Info("docker: member started", "home", id, "member", m.Name, "container", short(c.ID))
	}
	if err != nil {
		return p.engineError(op, id, err)
	}
	p.watch(memberKey(id, m), c.ID)
	return nil
}

// sameMember reports whether c was made from cfg's image with cfg's
// isolation.
func sameMember(c *container.InspectResponse, cfg *container.Config) bool {
	return c.Config.Labels[LabelImage] == cfg.Labels[LabelImage] &&
		c.Config.Labels[LabelIsolation] == cfg.Labels[LabelIsolation]
}

// memberHealth reads one member's health check, for provider.AwaitHealth.
type memberHealth struct {
	p    *Provider
	name string // the member's container
}

func (h memberHealth) Health(ctx context.Context, s provider.Spec) (provider.Health, error) {
	c, err := h.p.inspect(ctx, "wake", s.ID, h.name)
	if err != nil || c == nil || !c.State.Running {
		return provider.Health{}, err
	}
	return containerHealth(h.name, c.State.Health), nil
}

// awaitMember waits until member m is ready: its health check passes, or,
// without a check, it runs. One that exits or whose check fails fails the
// wake with the cause.
func (p *Provider) awaitMember(ctx context.Context, op, id string, m Member) error {
	name := p.memberName(id, m)
	h, err := provider.AwaitHealth(ctx, memberHealth{p: p, name: name}, provider.Spec{ID: id}, func() {
		p.log.Info("docker: waiting for a member's health check", "home", id, "member", m.Name)
	})
	if err != nil {
		return &provider.Error{Op: op, Reason: provider.ReasonUnavailable, Err: fmt.Errorf("not ready: %w", err),
			Hint: "its health check did not pass in time: read it (docker inspect " + name + ") and the member's log"}
	}
	if h.Status == provider.HealthUnhealthy {
		return &provider.Error{Op: op, Reason: ReasonUnhealthy, Err: errors.New("unhealthy: " + h.Reason),
			Hint: "its health check fails: " + h.Reason}
	}
	return p.memberUp(ctx, op, id, m)
}

// memberUp fails when member m's container is gone or not running, with
// how it ended.
func (p *Provider) memberUp(ctx context.Context, op, id string, m Member) error {
	name := p.memberName(id, m)
	c, err := p.inspect(ctx, op, id, name)
	switch {
	case err != nil:
		return err
	case c == nil:
		return &provider.Error{Op: op, Reason: provider.ReasonNotFound, Err: errors.New("removed while it started")}
	case !c.State.Running:
		reason := "the container " + p.exitReason(ctx, c)
		return &provider.Error{Op: op, Reason: ReasonExited, Err: errors.New(reason),
			Hint: "it exits at once (" + reason + "): read its log (docker logs " + name + ") and fix its image or command"}
	}
	return nil
}

// suspendGroup pauses s's members in reverse start order.
func (p *Provider) suspendGroup(ctx context.Context, s provider.Spec, ms []Member) error {
	for _, m := range slices.Backward(ms) {
		if m.Entry {
			if err := p.suspendHome(ctx, s); err != nil {
				return err
			}
			continue
		}
		c, err := p.findMember(ctx, "suspend", s.ID, m)
		if err != nil {
			return p.memberError(s.ID, m, err)
		}
		p.unwatch(memberKey(s.ID, m))
		if c == nil || !c.State.Running || c.State.Paused {
			continue
		}
		p.markStopped(memberKey(s.ID, m), c.ID)
		if _, err := p.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{}); err != nil {
			return p.memberError(s.ID, m, p.engineError("suspend", s.ID, err))
		}
	}
	return nil
}

// stopGroup stops s's members in reverse start order; the stop is proven
// when every member's is.
func (p *Provider) stopGroup(ctx context.Context, s provider.Spec, ms []Member) (bool, error) {
	proven := true
	for _, m := range slices.Backward(ms) {
		var (
			ok  bool
			err error
		)
		if m.Entry {
			ok, err = p.stopHome(ctx, s)
		} else {
			ok, err = p.stopMember(ctx, s.ID, m)
		}
		if err != nil {
			return false, p.memberError(s.ID, m, err)
		}
		proven = proven && ok
	}
	return proven, nil
}

// stopMember stops member m (not the entry) and reports whether the
// engine says it is down.
func (p *Provider) stopMember(ctx context.Context, id string, m Member) (bool, error) {
	p.unwatch(memberKey(id, m))
	c, err := p.findMember(ctx, "stop", id, m)
	if err != nil || c == nil {
		return err == nil, err
	}
	p.markStopped(memberKey(id, m), c.ID)
	if err := p.halt(ctx, "stop", id, c); err != nil {
		return false, err
	}
	p.log.Info("docker: member stopped", "home", id, "member", m.Name, "container", short(c.ID))
	now, err := p.inspect(ctx, "stop", id, c.ID)
	if err != nil {
		return false, err
	}
	return now == nil || (!now.State.Running && !now.State.Paused), nil
}

// removeMember stops and deletes member m's container c.
func (p *Provider) removeMember(ctx context.Context, op, id string, m Member, c *container.InspectResponse) error {
	p.unwatch(memberKey(id, m))
	if err := p.halt(ctx, op, id, c); err != nil {
		return err
	}
	if _, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{}); err != nil && !isNotFound(err) {
		return p.engineError(op, id, err)
	}
	p.forgetStopped(memberKey(id, m))
	p.log.Info("docker: member removed", "home", id, "member", m.Name, "container", short(c.ID))
	return nil
}

// removeMembers deletes every member container of home id but its entry,
// whatever the home's options say now.
func (p *Provider) removeMembers(ctx context.Context, id string) error {
	f := make(client.Filters).Add("label", LabelGateway+"="+p.cfg.Name, LabelGroup+"="+id)
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return p.engineError("remove", id, err)
	}
	for _, it := range list.Items {
		c, err := p.inspect(ctx, "remove", id, it.ID)
		if err != nil {
			return err
		}
		if c != nil {
			if err := p.removeMember(ctx, "remove", id, Member{Name: c.Config.Labels[LabelMember]}, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// recreateGroup replaces s's entry with one of s.Version, and of the
// other members those made from another image or with other limits than
// s now gives them, with the members that depend on them; the others
// keep running. Then it starts the group as a wake does.
func (p *Provider) recreateGroup(ctx context.Context, s provider.Spec, o HomeOptions, ms []Member) (provider.Result, error) {
	renew := map[string]bool{}
	for _, m := range ms { // start order: a member's dependencies are judged before it
		if m.Entry {
			continue
		}
		cfg, _ := p.memberConfig(s, o, m)
		c, err := p.findMember(ctx, "recreate", s.ID, m)
		if err != nil {
			return provider.Result{}, p.memberError(s.ID, m, err)
		}
		renew[m.Name] = c != nil && !sameMember(c, cfg) || slices.ContainsFunc(m.DependsOn, func(d string) bool { return renew[d] })
	}
	return p.startGroup(ctx, "recreate", s, o, ms, renew)
}

// statusGroup is the entry's status, with each member's state in the
// reason; a member that is down while the entry runs makes the group
// failed.
func (p *Provider) statusGroup(ctx context.Context, s provider.Spec, ms []Member) (provider.Result, error) {
	r, err := p.statusHome(ctx, s)
	if err != nil {
		return r, err
	}
	var states, down []string
	for _, m := range ms {
		if m.Entry {
			states = append(states, m.Name+" "+string(r.State))
			continue
		}
		c, err := p.findMember(ctx, "status", s.ID, m)
		if err != nil {
			return provider.Result{State: provider.StateUnknown, Reason: err.Error()}, err
		}
		st := "absent"
		switch {
		case c == nil:
		case c.State.Paused:
			st = "paused"
		case c.State.Running:
			st = "running"
		case c.State.ExitCode != 0 && !p.stoppedByUs(memberKey(s.ID, m), c.ID):
			st = "failed (" + p.exitReason(ctx, c) + ")"
		default:
			st = string(c.State.Status)
		}
		states = append(states, m.Name+" "+st)
		if st != "running" {
			down = append(down, m.Name)
		}
	}
	return group.Status(r, states, down), nil
}
