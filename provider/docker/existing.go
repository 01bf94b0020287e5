package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"

	"github.com/wakegate/wakegate/provider"
)

// A home with options.container refers to a container that exists
// already (made by compose or by hand, or found by discovery, discover.go):
// the provider starts, stops, pauses and inspects it, and never makes,
// recreates or deletes it. Its image, command, limits and network are the
// container's own; a roll is unsupported (the home is woken without one).

// existing reports whether s names an existing container, and s's options.
func existing(s provider.Spec) (HomeOptions, bool) {
	var o HomeOptions
	if err := provider.DecodeOptions(s.Options, &o); err != nil {
		return o, false
	}
	return o, o.Container != ""
}

// lookup returns s's container: the one options.container names, or the
// one the provider made for s (find). A container that is gone is nil.
func (p *Provider) lookup(ctx context.Context, op string, s provider.Spec) (*container.InspectResponse, error) {
	o, ok := existing(s)
	if !ok {
		return p.find(ctx, op, s.ID)
	}
	return p.inspect(ctx, op, s.ID, o.Container)
}

// wakeExisting starts (or resumes) the container s names.
func (p *Provider) wakeExisting(ctx context.Context, s provider.Spec, o HomeOptions) (provider.Result, error) {
	c, err := p.inspect(ctx, "wake", s.ID, o.Container)
	if err != nil {
		return provider.Result{}, err
	}
	if c == nil {
		return provider.Result{}, &provider.Error{Op: "wake", Reason: provider.ReasonNotFound,
			Err:  fmt.Errorf("container %s of home %s is not on the engine", o.Container, s.ID),
			Hint: "a home with options.container refers to a container the gateway does not make: create it, or remove the home"}
	}
	return p.start(ctx, "wake", s, c)
}

// endpointOf is where the gateway reaches s's container c.
func (p *Provider) endpointOf(s provider.Spec, c *container.InspectResponse) (string, error) {
	o, ok := existing(s)
	if !ok {
		return p.endpoint(c)
	}
	port := o.Port
	if port == 0 {
		var err error
		if port, err = exposedPort(c.Config); err != nil {
			return "", fmt.Errorf("container %s: %w", o.Container, err)
		}
	}
	return existingEndpoint(c, port, p.cfg.Network)
}

// exposedPort is the one TCP port cfg exposes.
func exposedPort(cfg *container.Config) (int, error) {
	var ports []int
	if cfg != nil {
		for k := range cfg.ExposedPorts {
			if k.Proto() == network.TCP {
				ports = append(ports, int(k.Num()))
			}
		}
	}
	if len(ports) != 1 {
		sort.Ints(ports)
		return 0, fmt.Errorf("its image exposes %d TCP ports %v, not exactly one: name the port",
			len(ports), ports)
	}
	return ports[0], nil
}

// existingEndpoint is where the gateway reaches port of c, a container it
// did not make: a host port it is published at, else its address on
// network (the section's, when c is on it) or on the first of its
// networks by name.
func existingEndpoint(c *container.InspectResponse, port int, netName string) (string, error) {
	if ep, ok := publishedAt(c, port); ok {
		return ep, nil
	}
	if c.NetworkSettings == nil {
		return "", fmt.Errorf("container %s has no network settings", short(c.ID))
	}
	names := make([]string, 0, len(c.NetworkSettings.Networks))
	for n := range c.NetworkSettings.Networks {
		names = append(names, n)
	}
	sort.Strings(names)
	if _, ok := c.NetworkSettings.Networks[netName]; ok {
		names = append([]string{netName}, names...)
	}
	for _, n := range names {
		if e := c.NetworkSettings.Networks[n]; e != nil && e.IPAddress.IsValid() {
			return "http://" + net.JoinHostPort(e.IPAddress.String(), strconv.Itoa(port)), nil
		}
	}
	return "", fmt.Errorf("container %s neither publishes port %d/tcp nor has an address on a network", short(c.ID), port)
}

// checkExisting checks, into ps, options.container and options.port: the
// port belongs to an existing container, and what only a container the
// gateway makes can have is refused beside one.
func (o *HomeOptions) checkExisting(ps map[string]string) {
	if o.Port < 0 || o.Port > 65535 {
		ps["port"] = fmt.Sprintf("want a port 1-65535, got %d", o.Port)
	}
	if o.Container == "" {
		if o.Port != 0 {
			ps["port"] = "only a home of an existing container (options.container) names its port; the section's port is every made container's"
		}
		return
	}
	made := map[string]bool{"image": o.Image != "", "command": len(o.Command) > 0, "env": len(o.Env) > 0,
		"volumes": len(o.Volumes) > 0, "memory_max": o.MemoryMax != 0, "cpu_max": o.CPUMax != 0, "memory": o.Memory != "",
		"cpus": o.CPUs != 0, "pids_max": o.PidsMax != 0, "cap_add": len(o.CapAdd) > 0, "user": o.User != "",
		"read_only": o.ReadOnly != nil,
		"members":   slices.ContainsFunc(o.Members, func(m Member) bool { return m.Container == "" })}
	for f, set := range made {
		if set {
			ps[f] = "a home of an existing container (options.container) runs as that container was made: set this on the container"
		}
	}
}

// publishedAt is the address on the host that c's TCP port is published
// at, if it is (an unspecified host address read as 127.0.0.1).
func publishedAt(c *container.InspectResponse, port int) (string, bool) {
	if c.NetworkSettings == nil {
		return "", false
	}
	for k, bs := range c.NetworkSettings.Ports {
		if int(k.Num()) != port || k.Proto() != network.TCP {
			continue
		}
		for _, b := range bs {
			if b.HostPort == "" {
				continue
			}
			host := "127.0.0.1"
			if b.HostIP.IsValid() && !b.HostIP.IsUnspecified() {
				host = b.HostIP.String()
			}
			return "http://" + net.JoinHostPort(host, b.HostPort), true
		}
	}
	return "", false
}

// A group of existing containers (options.container with members that
// each name a container, as discovery registers a labelled group) is
// woken, stopped and read as a group the gateway made, in its members'
// order; its containers are never made, replaced or deleted.

// checkExistingMember checks, into ps under prefix f, member m of a group
// of existing containers whose entry is container entry.
func checkExistingMember(ps map[string]string, f, entry string, m Member) {
	switch {
	case m.Container == "":
		ps[f+"container"] = "required in a group of existing containers (options.container): the member's container"
	case m.Entry && m.Container != entry:
		ps[f+"container"] = fmt.Sprintf("the entry is options.container, %q, got %q", entry, m.Container)
	}
	if m.Image != "" || len(m.Command) > 0 || len(m.Env) > 0 || len(m.Volumes) > 0 {
		ps[f+"image"] = "a member of a group of existing containers runs as its container was made: " +
			"image, command, env and volumes are set on the container"
	}
}

// startExistingMember starts member m of a group of existing containers
// (m.Container), which must be on the engine.
func (p *Provider) startExistingMember(ctx context.Context, op, id string, m Member) error {
	c, err := p.inspect(ctx, op, id, m.Container)
	if err != nil {
		return err
	}
	if c == nil {
		return &provider.Error{Op: op, Reason: provider.ReasonNotFound,
			Err:  errors.New("the container is not on the engine"),
			Hint: "a group of existing containers is started, never made: create the container, or remove the home"}
	}
	return p.runMember(ctx, op, id, m, c)
}
