package execprov

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/wakegate/wakegate/provider"
)

// quiesceParallel bounds how many homes Quiesce stops at once.
const quiesceParallel = 8

// Quiesce stops the process of every home this provider has started or
// adopted, and of each home in ids whose recorded process still runs, so
// that a gateway that shuts down leaves no home process behind. Each home
// is stopped as Stop does it (SIGTERM, StopGrace, SIGKILL), up to
// quiesceParallel at a time; Quiesce returns when every stop has ended,
// one entry per home, sorted by id.
//
// Unlike a caller's Stop, a quiesce carries no intent: the caller keeps
// each home's stored desired state, so the next gateway start wakes (or,
// for a process that survived, adopts) the homes that should run. Call it
// before Close; after Close every entry carries the closed error.
func (e *Provider) Quiesce(ctx context.Context, ids []string) []provider.Quiesced {
	all := map[string]bool{}
	for _, id := range ids {
		all[id] = false
	}
	e.mu.Lock()
	for id := range e.homes {
		all[id] = true
	}
	e.mu.Unlock()
	// A home this provider never started has no directory, so no record
	// of a process to stop: one listing of the homes' directories spares
	// a stop (and two record reads) for each of them, which at 100,000
	// registered homes was seconds of shutdown.
	ran, listed := e.homeDirs()
	for name := range ran {
		// The members of a group home in ids (groups.go).
		if id, _, ok := strings.Cut(name, "@"); ok {
			if _, in := all[id]; in {
				if _, known := all[name]; !known {
					all[name] = false
				}
			}
		}
	}
	out := make([]provider.Quiesced, 0, len(all))
	for id, known := range all {
		out = append(out, provider.Quiesced{ID: id, Ran: known || !listed || ran[id]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })

	sem := make(chan struct{}, quiesceParallel)
	var wg sync.WaitGroup
	for i := range out {
		q := &out[i]
		if !q.Ran {
			q.Proven = true
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			q.Proven, q.Err = e.Stop(ctx, provider.Spec{ID: q.ID})
		})
	}
	wg.Wait()
	return out
}

// homeDirs lists the homes that have a directory under the provider's
// data directory. listed is false when the listing failed for another
// reason than the directory missing: then every home is to be treated as
// one that may have run.
func (e *Provider) homeDirs() (names map[string]bool, listed bool) {
	ents, err := os.ReadDir(filepath.Join(e.cfg.DataDir, "homes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true
	}
	if err != nil {
		e.log.Warn("exec: listing the homes' directories for the shutdown; checking every home", "err", err)
		return nil, false
	}
	names = make(map[string]bool, len(ents))
	for _, ent := range ents {
		if ent.IsDir() {
			names[ent.Name()] = true
		}
	}
	return names, true
}

// Let makes the provider let home id (with its members, for a group) be
// without a signal: it stops watching its process and forgets it, so that
// neither a restart nor Quiesce acts on it. The gateway lets a home be that another gateway of
// its fleet took over (DESIGN rule 32); a later Wake knows it again.
func (e *Provider) Let(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for hid, h := range e.homes {
		if hid == id || h.group == id { // a group's members go with it
			h.wanted, h.proc = false, nil
			delete(e.homes, hid)
		}
	}
}
