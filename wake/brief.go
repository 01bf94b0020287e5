package wake

import "github.com/wakegate/wakegate/registry"

// Brief is what the admin list filters a home on (status, version, a wake
// in flight), from the engine's memory: filtering 100,000 homes reads no
// record. Status and Version mirror the home's stored record as this
// engine last read or wrote it (registration, every save under the home's
// lifecycle lock); a write by another gateway of a fleet shows once this
// one reads the record again.
type Brief struct {
	Status  registry.Status
	Version string
	// Waking is true while a wake of the home is in flight here.
	Waking bool
}

// Brief returns home id's brief; ok is false for a home the engine does
// not know.
func (e *Engine) Brief(id string) (b Brief, ok bool) {
	h := e.home(id)
	if h == nil {
		return Brief{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return Brief{Status: h.status, Version: h.version, Waking: h.flight != nil}, true
}

// setVersion mirrors the version of h's stored record.
func (h *home) setVersion(v string) {
	h.mu.Lock()
	h.version = v
	h.mu.Unlock()
}
