package rolls

import (
	"slices"
	"sync"

	"github.com/wakegate/wakegate/registry"
)

// Release is what one version runs from: the command template (exec) and
// the image (image-based providers) of the target that named it. The zero
// Release is the provider's defaults.
type Release struct {
	Command []string
	Image   string
}

// ReleaseOf is t's release.
func ReleaseOf(t registry.Target) Release {
	return Release{Command: slices.Clone(t.Command), Image: t.Image}
}

// Stale reports whether a home on version should move to target t: it has
// a recorded version (a home with none is never stale), and it differs.
func Stale(version string, t registry.Target) bool {
	return version != "" && version != t.Version
}

// Releases keeps the release of each version seen in a target, and this
// instance's brake on a bad target. Its zero value is ready; its methods
// are safe for concurrent use.
type Releases struct {
	mu sync.Mutex
	// byVersion maps each version seen in a target to its release, so that
	// a home on a past target's version wakes and rolls back with what it
	// was started from. A roll also stores the release with the home's
	// version (its record's Command and Image), which wins over this map:
	// after a restart, a home on a version that is no longer the target
	// still wakes and rolls back with its own release.
	byVersion map[string]Release
	// localBad is a target version whose roll failed while the store could
	// not record it; it brakes this instance until a new target is set.
	localBad string
}

// Remember records t's release for its version.
func (r *Releases) Remember(t registry.Target) {
	if t.Version == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byVersion == nil {
		r.byVersion = map[string]Release{}
	}
	r.byVersion[t.Version] = ReleaseOf(t)
}

// Of is the release the home of rec runs its version from: the one stored
// with it (a roll wrote it), or else the one of the target that named its
// version.
func (r *Releases) Of(rec registry.Home) Release {
	if len(rec.Command) > 0 || rec.Image != "" {
		return Release{Command: slices.Clone(rec.Command), Image: rec.Image}
	}
	return r.For(rec.Version)
}

// For is the release of version: the one of the target that named it, or
// the zero release (the provider's defaults).
func (r *Releases) For(version string) Release {
	r.mu.Lock()
	defer r.mu.Unlock()
	rel := r.byVersion[version]
	rel.Command = slices.Clone(rel.Command)
	return rel
}

// Bad reports whether t must not be rolled onto: the store records its
// version as bad, or this instance braked on it.
func (r *Releases) Bad(t registry.Target) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.BadVersion == t.Version || r.localBad == t.Version
}

// Brake stops this instance's rolls onto version, for a failed roll the
// store could not record, until Lift.
func (r *Releases) Brake(version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.localBad = version
}

// Lift ends this instance's brake: a new target was registered.
func (r *Releases) Lift() { r.Brake("") }
