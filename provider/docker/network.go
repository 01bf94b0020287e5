package docker

import (
	"context"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/wakegate/wakegate/provider"
)

// A home's own network (network: home) holds its container alone: no
// other home's container is on it, and the engine keeps traffic from
// crossing between bridge networks. Docker does so for every pair of
// bridge networks; for Podman the provider also sets netavark's isolate
// option, which drops traffic between networks that carry it (Docker
// ignores it). The tests' netavark 1.4 kept two homes apart without it
// too; it is set for hosts that would route between them. The
// gateway reaches the container through its port published on 127.0.0.1,
// as on the default bridge.

// isolateOption is netavark's option that drops traffic between this
// network and every other network that has it.
const isolateOption = "isolate"

// networkName is the name of home id's own network: the container's name.
func (p *Provider) networkName(id string) string { return p.containerName(id) }

// containerNetwork is the network home id's container is attached to.
func (p *Provider) containerNetwork(id string) string {
	if p.cfg.Network == NetworkHome {
		return p.networkName(id)
	}
	return p.cfg.Network
}

// ensureNetwork makes home id's own network unless it is there already
// (made by this gateway before a restart, or by a wake that raced this
// one). A network of that name without this gateway's labels is a
// conflict the operator resolves.
func (p *Provider) ensureNetwork(ctx context.Context, op, id string) error {
	if p.cfg.Network != NetworkHome {
		return nil
	}
	name := p.networkName(id)
	for range 2 {
		ok, err := p.ownNetwork(ctx, op, id)
		if err != nil || ok {
			return err
		}
		_, err = p.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver:  "bridge",
			Options: map[string]string{isolateOption: "true"},
			Labels:  map[string]string{LabelGateway: p.cfg.Name, LabelHome: id},
		})
		if err == nil {
			p.log.Info("docker: network created", "home", id, "network", name)
			return nil
		}
		if !cerrdefs.IsConflict(err) {
			return p.networkError(op, id, err)
		}
		// Made by someone else meanwhile: look again.
	}
	return &provider.Error{Op: op, Reason: provider.ReasonConflict,
		Err: fmt.Errorf("home %s: network %s is made and gone again", id, name)}
}

// ownNetwork reports whether home id's network exists and is this
// gateway's.
func (p *Provider) ownNetwork(ctx context.Context, op, id string) (bool, error) {
	name := p.networkName(id)
	res, err := p.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	switch {
	case isNotFound(err):
		return false, nil
	case err != nil:
		return false, p.networkError(op, id, err)
	}
	l := res.Network.Labels
	if l[LabelGateway] != p.cfg.Name || l[LabelHome] != id {
		return false, &provider.Error{Op: op, Reason: provider.ReasonConflict,
			Err:  fmt.Errorf("home %s: network %s exists without this gateway's labels", id, name),
			Hint: fmt.Sprintf("remove the network (docker network rm %s), or give this gateway another providers.docker.name", name)}
	}
	return true, nil
}

// removeNetwork deletes home id's own network, if it is this gateway's.
func (p *Provider) removeNetwork(ctx context.Context, op, id string) error {
	if p.cfg.Network != NetworkHome {
		return nil
	}
	ok, err := p.ownNetwork(ctx, op, id)
	if err != nil || !ok {
		return err
	}
	if _, err := p.cli.NetworkRemove(ctx, p.networkName(id), client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
		return p.networkError(op, id, err)
	}
	p.log.Info("docker: network removed", "home", id, "network", p.networkName(id))
	return nil
}

// networkError is engineError with the fix for an engine out of
// addresses for new networks.
func (p *Provider) networkError(op, id string, err error) error {
	e := p.engineError(op, id, fmt.Errorf("network %s: %w", p.networkName(id), err))
	if pe, ok := provider.AsError(e); ok && isPoolExhausted(err) {
		pe.Reason = provider.ReasonUnavailable
		pe.Hint = "the engine has no address range left for another network (Docker's default pools hold about 30): " +
			"give it more (default-address-pools in /etc/docker/daemon.json, e.g. base 10.200.0.0/16, size 28), " +
			"or remove networks of homes that are gone (docker network ls --filter label=" + LabelGateway + ")"
	}
	return e
}

// isPoolExhausted reports whether err is an engine out of subnets for a
// new network (Docker's and Podman's words).
func isPoolExhausted(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "non-overlapping") || strings.Contains(msg, "free subnet") ||
		strings.Contains(msg, "address pool")
}
