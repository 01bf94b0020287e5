package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/wakegate/wakegate/provider/kubernetes/kapi"
)

// podCache is the pods of one namespace as one watch sees them: listed,
// then watched from the list's resourceVersion, listed again when the
// server says the version is gone (410) and after a broken stream. Every
// home of the namespace reads it; nothing polls the API for a pod.
type podCache struct {
	ns  string
	c   *kapi.Client
	log *slog.Logger

	mu      sync.Mutex
	pods    map[string]*kapi.Pod // by name
	synced  bool
	lastErr error
	changed chan struct{} // closed and replaced at every change
}

func newPodCache(c *kapi.Client, ns string, log *slog.Logger) *podCache {
	return &podCache{ns: ns, c: c, log: log, pods: map[string]*kapi.Pod{}, changed: make(chan struct{})}
}

// run keeps the cache current until ctx ends.
func (pc *podCache) run(ctx context.Context) {
	pc.c.Reflect(ctx, "/api/v1/namespaces/"+pc.ns+"/pods", pc.reset, func(ev kapi.Event) error {
		var p kapi.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			return fmt.Errorf("decode a pod event: %w", err)
		}
		pc.apply(ev.Type, &p)
		return nil
	}, pc.fail)
}

// reset replaces the cache with a fresh list.
func (pc *podCache) reset(items []json.RawMessage) error {
	pods := make(map[string]*kapi.Pod, len(items))
	for _, raw := range items {
		var p kapi.Pod
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("decode a pod of %s: %w", pc.ns, err)
		}
		pods[p.Metadata.Name] = &p
	}
	pc.mu.Lock()
	pc.pods, pc.synced, pc.lastErr = pods, true, nil
	pc.broadcast()
	pc.mu.Unlock()
	return nil
}

func (pc *podCache) apply(typ string, p *kapi.Pod) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if typ == "DELETED" {
		delete(pc.pods, p.Metadata.Name)
	} else {
		pc.pods[p.Metadata.Name] = p
	}
	pc.broadcast()
}

// fail records why the cache could not be filled, for waiters.
func (pc *podCache) fail(err error) {
	if err == nil {
		return
	}
	pc.mu.Lock()
	first := pc.lastErr == nil
	pc.lastErr = err
	pc.broadcast()
	pc.mu.Unlock()
	if first {
		pc.log.Warn("kubernetes: the pod watch broke; listing again", "namespace", pc.ns, "err", err)
	}
}

// broadcast wakes every waiter; mu is held.
func (pc *podCache) broadcast() {
	close(pc.changed)
	pc.changed = make(chan struct{})
}

// await calls check with the pods of the namespace (not to be kept or
// changed) at once and after every change, until it returns done or an
// error, or ctx ends. Before the first list, check is not called; a list
// that fails is returned as the error once ctx ends.
func (pc *podCache) await(ctx context.Context, check func(pods map[string]*kapi.Pod) (bool, error)) error {
	for {
		pc.mu.Lock()
		ch, synced, lastErr := pc.changed, pc.synced, pc.lastErr
		var done bool
		var err error
		if synced {
			done, err = check(pc.pods)
		}
		pc.mu.Unlock()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if !synced && lastErr != nil {
				return lastErr
			}
			return ctx.Err()
		case <-ch:
		}
	}
}

// snapshot calls read with the pods once the cache is filled (or ctx ends).
func (pc *podCache) snapshot(ctx context.Context, read func(pods map[string]*kapi.Pod)) error {
	return pc.await(ctx, func(pods map[string]*kapi.Pod) (bool, error) {
		read(pods)
		return true, nil
	})
}
