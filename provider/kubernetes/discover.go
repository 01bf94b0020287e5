package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// Found is a home that discovery found: an annotated Deployment.
type Found struct {
	provider.Labelled
	// Options are the home's options: kind Deployment, the Deployment's
	// name and namespace, and the port.
	Options HomeOptions
}

// Homes is where discovery registers and removes the homes it finds: the
// gateway's dynamic homes, as the admin API registers them. Put refuses a
// home whose id a home discovery did not find holds (a config's, an
// operator's).
type Homes interface {
	Put(ctx context.Context, f Found) error
	Remove(ctx context.Context, id string) error
}

// Discovers reports whether the section turns discovery on.
func (p *Provider) Discovers() bool { return p.cfg.Discover }

// Discovery keeps the homes of the annotated Deployments of the section's
// namespace current from one watch of its Deployments: those carrying
// wakegate.enable: "true" (an annotation, or a label) become homes, with
// the other keys of provider.ParseLabels (annotations win over labels);
// a Deployment that goes, or loses the key, has its home removed.
type Discovery struct {
	p     *Provider
	homes Homes
	log   *slog.Logger
	deps  map[string]*kapi.Workload // by name, as the watch sees them
	known map[string]Found          // home id -> what was put
	bad   map[string]string         // deployment -> the problem logged last
}

// Discovery returns the discovery of p's namespace, which keeps homes in h.
func (p *Provider) Discovery(h Homes) *Discovery {
	return &Discovery{p: p, homes: h, log: p.log, deps: map[string]*kapi.Workload{},
		known: map[string]Found{}, bad: map[string]string{}}
}

// Run follows the namespace's Deployments until ctx ends.
func (d *Discovery) Run(ctx context.Context) {
	ns := d.p.cfg.Namespace
	d.p.client.Reflect(ctx, "/apis/apps/v1/namespaces/"+ns+"/deployments", func(items []json.RawMessage) error {
		deps := map[string]*kapi.Workload{}
		for _, raw := range items {
			var w kapi.Workload
			if err := json.Unmarshal(raw, &w); err != nil {
				return fmt.Errorf("decode a deployment: %w", err)
			}
			deps[w.Metadata.Name] = &w
		}
		d.deps = deps
		d.sync(ctx)
		return nil
	}, func(ev kapi.Event) error {
		var w kapi.Workload
		if err := json.Unmarshal(ev.Object, &w); err != nil {
			return fmt.Errorf("decode a deployment event: %w", err)
		}
		if ev.Type == "DELETED" {
			delete(d.deps, w.Metadata.Name)
		} else {
			d.deps[w.Metadata.Name] = &w
		}
		d.sync(ctx)
		return nil
	}, func(err error) {
		d.log.Warn("kubernetes discovery: the deployment watch broke; listing again after a wait",
			"namespace", ns, "err", d.p.apiError("discover", "-", call{"watch", "deployments", ns, ""}, err))
	})
}

// sync puts and removes homes to match the annotated Deployments.
func (d *Discovery) sync(ctx context.Context) {
	found := map[string]Found{}
	problems := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(d.deps)) {
		w := d.deps[name]
		keys := maps.Clone(w.Metadata.Labels)
		if keys == nil {
			keys = map[string]string{}
		}
		maps.Copy(keys, w.Metadata.Annotations)
		if keys[provider.LabelEnable] != "true" {
			continue
		}
		f, err := d.found(w, keys)
		if err == nil {
			if other, dup := found[f.ID]; dup {
				err = fmt.Errorf("deployment %s: label %s: home %s is deployment %s's already", name, provider.LabelID, f.ID, other.Options.Name)
			}
		}
		if err != nil {
			problems[name] = err.Error()
			if d.bad[name] != err.Error() {
				d.log.Error("kubernetes discovery: deployment skipped", "err", err)
			}
			continue
		}
		found[f.ID] = f
	}
	for _, id := range slices.Sorted(maps.Keys(found)) {
		f := found[id]
		if k, ok := d.known[id]; ok && reflect.DeepEqual(k, f) {
			continue
		}
		if err := d.homes.Put(ctx, f); err != nil {
			problems[f.Options.Name] = err.Error()
			if d.bad[f.Options.Name] != err.Error() {
				d.log.Error("kubernetes discovery: deployment not served", "deployment", f.Options.Name, "home", id, "err", err)
			}
			delete(d.known, id)
			continue
		}
		d.known[id] = f
		d.log.Info("kubernetes discovery: home of an annotated deployment", "home", id,
			"namespace", f.Options.Namespace, "deployment", f.Options.Name, "target", f.Target)
	}
	for id, f := range d.known {
		if _, ok := found[id]; ok {
			continue
		}
		if err := d.homes.Remove(ctx, id); err != nil {
			d.log.Error("kubernetes discovery: remove the home of a deployment that is gone", "home", id, "deployment", f.Options.Name, "err", err)
			continue
		}
		delete(d.known, id)
		d.log.Info("kubernetes discovery: home removed, its deployment is gone or no longer annotated", "home", id,
			"namespace", f.Options.Namespace, "deployment", f.Options.Name)
	}
	d.bad = problems
}

// found reads the home of Deployment w from its keys. The port defaults
// to the first port its first container declares.
func (d *Discovery) found(w *kapi.Workload, keys map[string]string) (Found, error) {
	h, err := provider.ParseLabels("deployment", w.Metadata.Name, keys)
	if err != nil {
		return Found{}, err
	}
	if h.Port == 0 {
		if c := containerOf(w.Spec.Template.Spec.Containers, ""); len(c.Ports) > 0 {
			h.Port = c.Ports[0].ContainerPort
		}
	}
	if h.Port == 0 {
		return Found{}, fmt.Errorf("deployment %s: label %s: not set, and its first container declares no port", w.Metadata.Name, provider.LabelPort)
	}
	return Found{Labelled: h, Options: HomeOptions{Kind: KindDeployment, Name: w.Metadata.Name,
		Namespace: d.p.cfg.Namespace, Port: h.Port}}, nil
}
