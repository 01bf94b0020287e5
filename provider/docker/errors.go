package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/wakegate/wakegate/provider"
)

// Reason codes of the provider's own, beside provider's.
const (
	// ReasonExited is a container that exited as soon as it started.
	ReasonExited = "exited"
	// ReasonPortInUse is a port the container asked for that the host has
	// given to something else.
	ReasonPortInUse = "port_in_use"
)

// engineError turns an error of the engine's API into a *provider.Error
// whose reason and hint say what the operator can do. The cause is kept
// for the log; none of it reaches a public answer.
func (p *Provider) engineError(op, id string, err error) error {
	e := &provider.Error{Op: op, Err: fmt.Errorf("home %s: engine at %s: %w", id, p.cfg.Host, err)}
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		e.Reason = provider.ReasonUnavailable
		e.Hint = fmt.Sprintf("no engine socket at %s: start the engine (systemctl start docker, or podman system service), "+
			"mount its socket into the gateway's container, or point providers.docker.host (or DOCKER_HOST) at it", p.cfg.Host)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) ||
		// The client says so in words only, without the cause.
		strings.Contains(msg, "permission denied while trying to connect"):
		e.Reason = provider.ReasonRefused
		e.Hint = fmt.Sprintf("the gateway's user may not open %s: add it to the socket's group (docker) "+
			"or run the gateway as a user that may", p.cfg.Host)
	case errors.Is(err, syscall.ECONNREFUSED) || client.IsErrConnectionFailed(err):
		e.Reason = provider.ReasonUnavailable
		e.Hint = fmt.Sprintf("nothing answers at %s: start the engine, or point providers.docker.host at it", p.cfg.Host)
	case strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use"):
		e.Reason = ReasonPortInUse
		e.Hint = "a port the home's container publishes is taken on the host: free it, or use network: bridge, " +
			"which lets the engine pick a free host port"
	case cerrdefs.IsConflict(err) && strings.Contains(msg, "name"):
		e.Reason = provider.ReasonConflict
		e.Hint = fmt.Sprintf("a container named %s exists without this gateway's labels: remove or rename it, "+
			"or give this gateway another providers.docker.name", p.containerName(id))
	case cerrdefs.IsNotFound(err) && (strings.Contains(msg, "image") || strings.Contains(msg, "manifest")):
		e.Reason = provider.ReasonNotFound
		e.Hint = "the engine has no such image: check the image template and the version, or pull or load it"
	case cerrdefs.IsNotFound(err):
		e.Reason = provider.ReasonNotFound
		e.Hint = "the engine lost the home's container or network: check providers.docker.network"
	case cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err):
		e.Reason = provider.ReasonRefused
		e.Hint = "the engine or the registry refused the credentials: log the engine in to the registry"
	case cerrdefs.IsInvalidArgument(err):
		e.Reason = provider.ReasonBadConfig
		e.Hint = "the engine refused the container's settings: check the home's options (volumes, memory, cpus) and the section's network"
	default:
		e.Reason = provider.ReasonUnavailable
	}
	return e
}

// imageError is a failed pull of img.
func (p *Provider) imageError(op, id, img string, err error) error {
	e, ok := p.engineError(op, id, fmt.Errorf("pull %s: %w", img, err)).(*provider.Error)
	if !ok || e.Hint != "" && e.Reason != provider.ReasonUnavailable && e.Reason != provider.ReasonNotFound {
		return e
	}
	if e.Reason == provider.ReasonNotFound || e.Hint == "" {
		e.Reason = provider.ReasonNotFound
		e.Hint = fmt.Sprintf("the engine could not pull %s: check the image name and tag, the registry's address and "+
			"credentials; with no registry, load the image on the engine and set pull: never", img)
	}
	return e
}

// isNotFound reports whether the engine answered 404 (no such container
// or image).
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
