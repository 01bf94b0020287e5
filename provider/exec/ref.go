package execprov

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/procid"
)

// execRef is the persisted provider ref of an exec home.
type execRef struct {
	procid.Identity
	Port    int    `json:"port,omitempty"`
	Socket  string `json:"socket,omitempty"` // the Unix socket, instead of Port
	Version string `json:"version"`
	// Made is what a group's member was started from (runSpec.made).
	Made string `json:"made,omitempty"`
}

// current returns the home's process as this provider knows it, or, when
// it knows none, the live recorded one (see recorded), adopted: watched and
// installed (wanted as given). It returns nil when no live process is known.
// The returned process may have died since.
func (e *Provider) current(ctx context.Context, h *home, s provider.Spec, wanted bool) (*proc, error) {
	var p *proc
	if err := e.settled(ctx, h, func() { p = h.proc }); err != nil {
		return nil, err
	}
	if p != nil {
		return p, nil
	}
	ref, _, found, err := e.recorded(h, s)
	if err != nil || !found {
		return nil, err
	}
	ap, err := e.adopt(h, ref, s)
	if err != nil || ap == nil {
		return nil, err
	}
	e.mu.Lock()
	installed := h.proc == nil
	early := false
	if installed {
		h.wanted = wanted
		if wanted {
			h.failed = ""
		}
		early = e.installLocked(h, ap)
	}
	cur := h.proc
	e.mu.Unlock()
	if early {
		e.redeliver(h, ap)
	}
	if !installed {
		// Only this call adopts for h (calls per home are serialised) and
		// the supervisor only replaces a process it saw exit, so this does
		// not happen; if it does, the process is left alone.
		return cur, nil
	}
	e.record(h, ap)
	e.log.Info("exec: adopted running home", "home", h.id, "pid", ap.PID, ap.attr(), "version", ap.spec.version)
	return ap, nil
}

// live returns the home's process and its /proc reading if it is alive,
// without adopting it; nil when there is none.
func (e *Provider) live(ctx context.Context, h *home, s provider.Spec) (*proc, procid.Stat, error) {
	var p *proc
	if err := e.settled(ctx, h, func() { p = h.proc }); err != nil {
		return nil, procid.Stat{}, err
	}
	if p == nil {
		ref, _, found, err := e.recorded(h, s)
		if err != nil || !found {
			return nil, procid.Stat{}, err
		}
		p = ref.proc()
	}
	st, err := procid.Lookup(p.Identity)
	if err != nil {
		if errors.Is(err, procid.ErrGone) {
			return nil, procid.Stat{}, nil
		}
		return nil, procid.Stat{}, err
	}
	return p, st, nil
}

// recorded finds the live process of h when this provider knows none: the
// one s.Ref names or, failing that, the one this provider last started for
// h, from its record in h's directory (newer than s.Ref when the caller did
// not persist the Result of a restart). found is false when neither names
// a live process; a pid now used by another process is logged and skipped.
func (e *Provider) recorded(h *home, s provider.Spec) (ref execRef, st procid.Stat, found bool, err error) {
	var refs []execRef
	if r, ok := parseRef(s.Ref); ok {
		refs = append(refs, r)
	} else if s.Ref != "" {
		e.log.Warn("exec: ignoring unreadable ref", "home", h.id, "ref", s.Ref)
	}
	if r, ok := readRefFile(h); ok && (len(refs) == 0 || r != refs[0]) {
		refs = append(refs, r)
	}
	for i, r := range refs {
		st, err := procid.Lookup(r.Identity)
		if err == nil && procid.CleanExe(st.Exe) != r.Exe {
			// Pid, start time and boot match, the executable does not
			// (design rule 17): not adopted. A home that execs another
			// program has it recorded once the provider sees it
			// (refreshExe), so its own record matches.
			err = fmt.Errorf("pid %d runs %s, recorded %s: %w", r.PID, procid.CleanExe(st.Exe), r.Exe, procid.ErrChanged)
		}
		switch {
		case err == nil:
			if i > 0 {
				e.log.Warn("exec: ref names no live process; using the provider's own record", "home", h.id, "pid", r.PID)
			}
			return r, st, true, nil
		case errors.Is(err, procid.ErrChanged) && i+1 < len(refs):
			// The provider's own record, next, may name the program the
			// home execs into.
			e.log.Debug("exec: recorded process runs another program; trying the provider's own record", "home", h.id, "err", err)
		case errors.Is(err, procid.ErrReused), errors.Is(err, procid.ErrChanged):
			e.log.Warn("exec: recorded process identity does not match; not adopting", "home", h.id, "err", err)
		case !errors.Is(err, procid.ErrGone):
			return execRef{}, procid.Stat{}, false, err
		}
	}
	return execRef{}, procid.Stat{}, false, nil
}

// adopt starts watching the live process ref names, which this gateway did
// not start. It returns nil when it turns out not to be that process.
func (e *Provider) adopt(h *home, ref execRef, s provider.Spec) (*proc, error) {
	p := ref.proc()
	if s.Target != "" {
		p.spec.target = s.Target
	}
	p.spec.command = s.Command
	if len(p.spec.command) == 0 {
		p.spec.command = e.cfg.Command
	}
	// A restart of an adopted process starts it as the home is declared.
	p.spec.env, p.spec.dir, p.spec.relayToken = append([]string(nil), s.Env...), s.Dir, s.RelayToken
	p.spec.user = homeUser(s.Options)
	p.spec.activate = e.homeActivated(s.Options)
	p.spec.limits = limitsOf(s.Options, e.cfg.PidsMax)
	if h.cgroup != "" {
		p.cgroup = e.contain.cgroupOfStart(h, p.PID)
	}
	// Another gateway started it: this one's folder of the home's own
	// files (home.ref, home.log) may not exist yet.
	if err := os.MkdirAll(h.sys, 0o700); err != nil {
		return nil, fmt.Errorf("home dir: %w", err)
	}
	if err := e.watch(h, p); err != nil {
		if errors.Is(err, procid.ErrGone) {
			return nil, nil
		}
		return nil, err
	}
	return p, nil
}

// leftBehind checks, for a home with no live recorded process, that the
// process groups its records name are empty. A recorded process that is
// gone (its pid free, or a zombie) may have left processes in its group;
// those are reported, not signalled: with the leader gone, nothing but the
// group's id says they are the home's (design rule 17). A recorded pid
// that now names another process proves the group gone: the kernel does
// not hand out a pid that is still a process group's id. So does a record
// from an earlier boot.
func (e *Provider) leftBehind(h *home, s provider.Spec) error {
	var refs []execRef
	if r, ok := parseRef(s.Ref); ok {
		refs = append(refs, r)
	}
	if r, ok := readRefFile(h); ok {
		refs = append(refs, r)
	}
	for _, r := range refs {
		if r.Boot != "" && r.Boot != procid.BootID() {
			continue
		}
		if st, err := procid.ReadStat(r.PID); err == nil && st.Start != r.Start {
			continue // reused: the old group is gone
		}
		if procid.GroupGone(r.PID) {
			continue
		}
		left, _ := procid.GroupMembers(r.PID)
		return fmt.Errorf("pid %d is gone, but processes %v of its process group run on; "+
			"they are not signalled, as only their group id ties them to the home: end them by hand", r.PID, left)
	}
	return nil
}

// refFile is where the provider records the last process it started for a
// home, inside the home's directory.
const refFile = "home.ref"

// readRefFile reads the provider's own record of h's last process.
func readRefFile(h *home) (execRef, bool) {
	b, err := sysfile.Read(filepath.Join(h.sys, refFile))
	if err != nil {
		return execRef{}, false
	}
	return parseRef(string(b))
}

// record writes p, just installed as h's process, to h's directory.
func (e *Provider) record(h *home, p *proc) {
	h.recMu.Lock()
	defer h.recMu.Unlock()
	if err := writeRefFile(h, p); err != nil {
		e.log.Warn("exec: recording process", "home", h.id, "err", err)
	}
}

// refreshExe records again the program that p, h's watched process, runs
// now, when it differs from the recorded one: a home started through a
// wrapper that execs its program (`sh -c 'exec …'`, env, a version
// manager's shim) keeps its pid and start time, and its record must name
// what it runs for a later gateway to adopt it (recorded compares the
// executable, design rule 17). The pidfd this provider holds on p proves
// that it is the same process. Only the record in h's directory changes;
// p's identity in memory keeps the executable it was started with. A p
// that is no longer h's process leaves the record alone: it names p's
// replacement.
func (e *Provider) refreshExe(h *home, p *proc, st procid.Stat) {
	now := procid.CleanExe(st.Exe)
	if now == "" || now == p.Exe {
		return
	}
	h.recMu.Lock()
	defer h.recMu.Unlock()
	e.mu.Lock()
	replaced := h.proc != p
	e.mu.Unlock()
	if replaced {
		return
	}
	if r, ok := readRefFile(h); ok && r.PID == p.PID && r.Start == p.Start && r.Exe == now {
		return
	}
	if err := writeRef(h, p, now); err != nil {
		e.log.Warn("exec: recording the home's program", "home", h.id, "err", err)
		return
	}
	e.log.Info("exec: the home runs another program than it started with; recorded", "home", h.id, "pid", p.PID,
		"started", p.Exe, "runs", now)
}

// writeRefFile records p as h's last process, atomically.
func writeRefFile(h *home, p *proc) error { return writeRef(h, p, p.Exe) }

// writeRef records p as h's last process, running exe, atomically.
func writeRef(h *home, p *proc, exe string) error {
	path := filepath.Join(h.sys, refFile)
	id := p.Identity
	id.Exe = exe
	ref, _ := json.Marshal(execRef{Identity: id, Port: p.port, Socket: p.socket, Version: p.spec.version, Made: p.spec.made})
	// A temp file of its own: two writers (a start and a status) never
	// write into one file.
	f, err := os.CreateTemp(h.sys, refFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("record process: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(ref)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record process: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record process: %w", err)
	}
	return nil
}

// result is the running Result of p, with its ref.
func (p *proc) result() provider.Result {
	ref, _ := json.Marshal(execRef{Identity: p.Identity, Port: p.port, Socket: p.socket, Version: p.spec.version, Made: p.spec.made})
	return provider.Result{Endpoint: p.endpoint(), Ref: string(ref), State: provider.StateRunning, Queued: p.spec.activate}
}

// parseRef reads a ref written by proc.result; ok is false for an empty or
// unusable one.
func parseRef(s string) (execRef, bool) {
	if s == "" {
		return execRef{}, false
	}
	var r execRef
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return execRef{}, false
	}
	if r.PID <= 0 || r.Exe == "" {
		return execRef{}, false
	}
	if r.Socket != "" {
		if r.Port != 0 || endpoint.CheckSocketPath(r.Socket) != nil {
			return execRef{}, false
		}
	} else if r.Port <= 0 || r.Port > 65535 {
		return execRef{}, false
	}
	return r, true
}

// proc is an unwatched, adopted-style process record for the ref.
func (r execRef) proc() *proc {
	return &proc{
		Identity: r.Identity,
		listenAt: listenAt{port: r.Port, socket: r.Socket},
		spec:     runSpec{version: r.Version, made: r.Made},
		exited:   make(chan struct{}),
	}
}
