package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/wakegate/wakegate/provider"
)

// Labels that make a container a home without a config entry, when the
// section sets discover: true: the keys every discovering provider reads
// (provider.ParseLabels).
const (
	LabelEnable      = provider.LabelEnable
	LabelID          = provider.LabelID
	LabelTarget      = provider.LabelTarget
	LabelPort        = provider.LabelPort
	LabelProbe       = provider.LabelProbe
	LabelIdleTimeout = provider.LabelIdleTimeout
	// LabelEntry is "true" on the one container of a group (LabelGroup)
	// the gateway forwards to; the home's id is the group's, its target,
	// port, probe and idle timeout the entry's labels.
	LabelEntry = "wakegate.entry"
	// LabelDependsOn names, comma-separated, the members of its group a
	// container starts after. Default: the compose service's depends_on.
	LabelDependsOn = "wakegate.depends_on"
)

// Labels compose writes on the containers of a project.
const (
	composeService   = "com.docker.compose.service"
	composeDependsOn = "com.docker.compose.depends_on"
)

// Found is a home that discovery found: a labelled container.
type Found struct {
	ID        string
	Target    string
	Container string // the container's name: the home's options.container
	Port      int    // 0: the one port the image exposes
	Probe     string // "": wake.probe's kind
	// IdleTimeout is the label's duration as written; "": the default.
	IdleTimeout string
	// Members are a group's containers (LabelGroup), the entry's being
	// Container; none for a home of one container.
	Members []Member
	// composeDeps are the compose services a member's container depends
	// on, until its group is joined (joinGroup).
	composeDeps []string
}

// Homes is where discovery registers and removes the homes it finds: the
// gateway's dynamic homes, as the admin API registers them. Put refuses a
// home whose id a home discovery did not find holds (a config's, an
// operator's).
type Homes interface {
	Put(ctx context.Context, f Found) error
	Remove(ctx context.Context, id string) error
}

// Discovery keeps the homes of labelled containers current: it lists them
// when it starts and after every create, destroy or rename the engine's
// event stream reports; a stream that breaks is opened again after a
// backoff, and the containers listed again.
type Discovery struct {
	p     *Provider
	homes Homes
	log   *slog.Logger
	known map[string]Found  // home id -> what was put
	bad   map[string]string // container name -> the problem logged last
	// unremoved are the homes of containers that are gone whose removal
	// failed (a wake held the home's lock), with the error logged last:
	// sync tries them again MinBackoff later, without an event.
	unremoved map[string]string
	// MinBackoff and MaxBackoff bound the wait before the stream is opened
	// again (doubled after each failure). Defaults 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
}

// Discovers reports whether the section turns discovery on.
func (p *Provider) Discovers() bool { return p.cfg.Discover }

// Discovery returns the discovery of p's engine, which keeps homes in h.
func (p *Provider) Discovery(h Homes) *Discovery {
	return &Discovery{p: p, homes: h, log: p.log, known: map[string]Found{}, bad: map[string]string{}, unremoved: map[string]string{},
		MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

// Run follows the engine until ctx ends.
func (d *Discovery) Run(ctx context.Context) {
	d.load()
	delay := d.MinBackoff
	for ctx.Err() == nil {
		began := time.Now()
		err := d.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > d.MaxBackoff {
			delay = d.MinBackoff // it ran a while: a new break, not the same one
		}
		d.log.Warn("docker discovery: the engine's event stream broke; listing again after a wait",
			"err", err, "wait", delay.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, d.MaxBackoff)
	}
}

// follow opens the event stream, lists the labelled containers, then
// lists them again on every event that can change them, until the stream
// ends.
func (d *Discovery) follow(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Every container event: a removed container's labels are not in its
	// event on every engine, so the label filter would miss removals.
	stream := d.p.cli.Events(sctx, client.EventsListOptions{
		Filters: make(client.Filters).Add("type", string(events.ContainerEventType))})
	// Listed after the stream opened, so that no change between the two
	// is missed.
	if err := d.sync(ctx); err != nil {
		return err
	}
	// retry fires while a removal failed: no event may come to try again.
	retry := time.NewTimer(d.MinBackoff)
	defer retry.Stop()
	arm := func() {
		retry.Stop()
		if len(d.unremoved) > 0 {
			retry.Reset(d.MinBackoff)
		}
	}
	arm()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-stream.Err:
			if err == nil {
				err = errors.New("the stream ended")
			}
			return err
		case <-retry.C:
			if err := d.sync(ctx); err != nil {
				return err
			}
			arm()
		case m := <-stream.Messages:
			switch m.Action {
			case events.ActionCreate, events.ActionDestroy, events.ActionRemove, events.ActionRename:
				if err := d.sync(ctx); err != nil {
					return err
				}
				arm()
			}
		}
	}
}

// sync lists the labelled containers and puts and removes homes to match.
func (d *Discovery) sync(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := d.p.cli.ContainerList(lctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelEnable+"=true")})
	if err != nil {
		return fmt.Errorf("list labelled containers: %w", err)
	}
	found := map[string]Found{}
	groups := map[string][]Found{}  // group id -> its containers, one member each
	problems := map[string]string{} // container (or group) -> why it is not a home
	logProblem := func(key string, err error) {
		problems[key] = err.Error()
		if d.bad[key] != err.Error() {
			d.log.Error("docker discovery: container skipped", "err", err)
		}
	}
	for _, s := range list.Items {
		c, err := d.p.inspect(lctx, "discover", "", s.ID)
		if err != nil {
			return err
		}
		if c == nil {
			continue // gone since the list
		}
		name := strings.TrimPrefix(c.Name, "/")
		f, err := parseLabels(name, c.Config)
		switch {
		case err != nil:
			logProblem(name, err)
		case len(f.Members) > 0:
			groups[f.ID] = append(groups[f.ID], f)
		default:
			found, err = addFound(found, f, LabelID)
			if err != nil {
				logProblem(name, err)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		f, err := joinGroup(id, groups[id])
		if err == nil {
			found, err = addFound(found, f, LabelGroup)
		}
		if err != nil {
			logProblem("group "+id, err)
		}
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		f := found[id]
		if reflect.DeepEqual(d.known[id], f) {
			continue
		}
		if err := d.homes.Put(ctx, f); err != nil {
			problems[f.Container] = err.Error()
			if d.bad[f.Container] != err.Error() {
				d.log.Error("docker discovery: container not served", "container", f.Container, "home", id, "err", err)
			}
			delete(d.known, id)
			continue
		}
		d.known[id] = f
		if len(f.Members) > 0 {
			d.log.Info("docker discovery: home of a labelled group", "home", id, "entry", f.Container, "target", f.Target,
				"members", len(f.Members))
			continue
		}
		d.log.Info("docker discovery: home of a labelled container", "home", id, "container", f.Container, "target", f.Target)
	}
	for id, f := range d.known {
		if _, ok := found[id]; ok {
			delete(d.unremoved, id) // its container is back
			continue
		}
		if err := d.homes.Remove(ctx, id); err != nil {
			if d.unremoved[id] != err.Error() {
				d.log.Warn("docker discovery: remove the home of a container that is gone; trying again", "home", id,
					"container", f.Container, "err", err)
			}
			d.unremoved[id] = err.Error()
			continue
		}
		delete(d.unremoved, id)
		delete(d.known, id)
		d.log.Info("docker discovery: home removed, its container is gone", "home", id, "container", f.Container)
	}
	d.bad = problems // each logged once, until it changes
	d.save()
	return nil
}

// knownFile is where discovery keeps the ids of the homes it registered,
// so that a gateway started later removes those whose containers went
// while it was down ("" without a data folder).
func (d *Discovery) knownFile() string {
	if d.p.dir == "" {
		return ""
	}
	return filepath.Join(d.p.dir, "discovered.json")
}

// load reads the homes an earlier run registered.
func (d *Discovery) load() {
	path := d.knownFile()
	if path == "" {
		return
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var known map[string]Found
	if err == nil {
		err = json.Unmarshal(b, &known)
	}
	if err != nil {
		d.log.Warn("docker discovery: read the homes found before", "file", path, "err", err)
		return
	}
	for id, f := range known {
		f.Container = "" // put again, whatever it was
		d.known[id] = f
	}
}

// save writes the ids of the homes registered now.
func (d *Discovery) save() {
	path := d.knownFile()
	if path == "" {
		return
	}
	b, err := json.Marshal(d.known)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		d.log.Warn("docker discovery: record the homes found", "file", path, "err", err)
	}
}

// parseLabels reads the home of container name from its config's labels.
// An error names the container and the label.
func parseLabels(name string, cfg *container.Config) (Found, error) {
	var l map[string]string
	if cfg != nil {
		l = cfg.Labels
	}
	var members []Member
	var deps []string
	if g, ok := l[LabelGroup]; ok {
		m, err := memberLabels(name, l)
		if err != nil {
			return Found{}, err
		}
		if !provider.ValidName(g) {
			return Found{}, fmt.Errorf("container %s: label %s: want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", name, LabelGroup, g)
		}
		members, deps = []Member{m}, composeDeps(l)
		if !m.Entry {
			// The home's labels are its entry's.
			return Found{ID: g, Container: name, Probe: l[LabelProbe], IdleTimeout: l[LabelIdleTimeout],
				Members: members, composeDeps: deps}, nil
		}
		// The group's name is the home's id.
		l = maps.Clone(l)
		l[LabelID] = g
	}
	h, err := provider.ParseLabels("container", name, l)
	if err != nil {
		return Found{}, err
	}
	if h.Port == 0 {
		if _, err := exposedPort(cfg); err != nil {
			return Found{}, fmt.Errorf("container %s: label %s: not set, and %v", name, LabelPort, err)
		}
	}
	return Found{ID: h.ID, Target: h.Target, Container: name, Port: h.Port, Probe: h.Probe, IdleTimeout: h.IdleTimeout,
		Members: members, composeDeps: deps}, nil
}
