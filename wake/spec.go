package wake

import (
	"slices"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// release is what one version runs from: the command template (exec) and
// the image (image-based providers) of the target that named it. The zero
// release is the provider's defaults.
type release struct {
	command []string
	image   string
}

// releaseOf is t's release.
func releaseOf(t registry.Target) release {
	return release{command: slices.Clone(t.Command), image: t.Image}
}

// readyTimeout bounds h's wakes: its own, or else the engine's.
func (h *home) readyTimeout(e *Engine) time.Duration {
	if h.spec.ReadyTimeout > 0 {
		return h.spec.ReadyTimeout
	}
	return e.o.ReadyTimeout
}

// providerSpec is what h's provider is told to run: version from rel, with
// the ref of rec and the home's own settings. The home's own command, when
// it has one, wins over the version's: a target's command replaces the
// provider's template, not a home's own.
func (h *home) providerSpec(rec registry.Home, version string, rel release) provider.Spec {
	st := h.spec.Settings
	s := provider.Spec{ID: h.spec.ID, Target: h.spec.Target, Version: version, Ref: rec.ProviderRef,
		Image: rel.image, Command: rel.command, Env: st.Env, Dir: st.Dir, Options: st.Options,
		RelayToken: h.spec.RelayToken}
	if len(st.Command) > 0 {
		s.Command = st.Command
	}
	return s
}
