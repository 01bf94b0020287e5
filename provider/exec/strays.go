package execprov

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// Strays lists the homes (a group's id for its members) whose cgroups
// under this gateway's hold processes that this provider has not started
// or adopted in this run: an earlier run left them (provider.StrayEnder).
// Only cgroup containment keeps a dead run's processes where a new run
// finds them; with any other it returns nil.
func (e *Provider) Strays() []string {
	if e.contain.mode != ContainCgroup {
		return nil
	}
	ents, err := os.ReadDir(e.contain.root)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			e.log.Warn("exec: listing the homes' cgroups for processes an earlier run left", "err", err)
		}
		return nil
	}
	set := map[string]bool{}
	for _, en := range ents {
		id, ok := strings.CutPrefix(en.Name(), cgroup.Prefix)
		if !en.IsDir() || !ok || e.runs(id) {
			continue
		}
		if pop, err := cgroup.Populated(filepath.Join(e.contain.root, en.Name())); err != nil || !pop {
			continue
		}
		gid, _, _ := strings.Cut(id, "@")
		set[gid] = true
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// runs reports whether this provider watches a process of home id.
func (e *Provider) runs(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.homes[id]
	return h != nil && h.proc != nil
}

// EndStrays ends what the cgroups of home s (its members' too, for a
// group) hold of an earlier run of this gateway, unless a record names a
// live process in the home's own cgroup: s.Ref, the stored one, or, when
// mine (no other live gateway runs the home), the one this provider keeps
// in the home's directory. That process is the home's, started by the
// earlier run or adopted since by another gateway of the fleet, and a
// wake adopts it. What no record names is no one's to adopt: the earlier
// run started it and ended before it recorded it, and nothing else would
// ever end it. A home whose process this provider watches is left as it
// is (provider.StrayEnder). The caller holds the home's lifecycle lock,
// so no wake of it is under way here.
func (e *Provider) EndStrays(ctx context.Context, s provider.Spec, mine bool) ([]int, error) {
	if e.contain.mode != ContainCgroup {
		return nil, nil
	}
	entry, err := e.homeFor(s.ID)
	if err != nil {
		return nil, err
	}
	var refs []execRef
	if r, ok := parseRef(s.Ref); ok {
		refs = append(refs, r)
	}
	if r, ok := readRefFile(entry); ok && mine {
		refs = append(refs, r)
	}
	pids, _ := cgroup.ProcsTree(entry.cgroup)
	for _, r := range refs {
		if _, err := procid.Lookup(r.Identity); err == nil && slices.Contains(pids, r.PID) {
			e.log.Info("exec: the home's process an earlier run started is one a record names; kept for adoption",
				"home", s.ID, "pid", r.PID)
			return nil, nil
		}
	}
	ents, err := os.ReadDir(e.contain.root)
	if err != nil {
		return nil, fmt.Errorf("exec: listing the homes' cgroups: %w", err)
	}
	var ended []int
	var errs []error
	for _, en := range ents {
		id, ok := strings.CutPrefix(en.Name(), cgroup.Prefix)
		if !en.IsDir() || !ok || (id != s.ID && !strings.HasPrefix(id, s.ID+"@")) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return ended, err
		}
		if e.runs(id) {
			continue
		}
		h, err := e.homeFor(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		found, remain := e.endLeft(h, nil, h.cgroup)
		ended = append(ended, found...)
		if len(found) == 0 {
			continue
		}
		if remain {
			errs = append(errs, fmt.Errorf("processes %v of %s an earlier run left are still there after SIGKILL", found, id))
			continue
		}
		cgroup.Remove(h.cgroup)
		if _, err := os.Stat(h.sys); err == nil { // made by the start, unless it was cut before
			e.note(h, "wakegate: processes %v an earlier run of the gateway started were running, named by no record; killed them", found)
		}
		e.log.Warn("exec: an earlier run of the gateway left processes of the home that no record names; killed them",
			"home", id, "pids", found,
			"cause", "that run started them and ended before it recorded them: no gateway would adopt or stop them")
	}
	return ended, errors.Join(errs...)
}
