package wake

import (
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
)

// readyTimeout bounds h's wakes: its own, or else the engine's.
func (h *home) readyTimeout(e *Engine) time.Duration {
	if h.spec.ReadyTimeout > 0 {
		return h.spec.ReadyTimeout
	}
	return e.o.ReadyTimeout
}

// queueTimeout is how long a wake of h may wait for a slot under
// MaxConcurrent: QueueTimeout, and never less than its ready timeout.
func (e *Engine) queueTimeout(h *home) time.Duration {
	return max(e.o.QueueTimeout, h.readyTimeout(e))
}

// providerSpec is what h's provider is told to run: version from rel, with
// the ref of rec and the home's own settings. The home's own command, when
// it has one, wins over the version's: a target's command replaces the
// provider's template, not a home's own.
func (h *home) providerSpec(rec registry.Home, version string, rel rolls.Release) provider.Spec {
	st := h.spec.Settings
	s := provider.Spec{ID: h.spec.ID, Target: h.spec.Target, Version: version, Ref: rec.ProviderRef,
		Image: rel.Image, Command: rel.Command, Env: st.Env, Dir: st.Dir, Options: st.Options,
		RelayToken: h.spec.RelayToken}
	if len(st.Command) > 0 {
		s.Command = st.Command
	}
	return s
}
