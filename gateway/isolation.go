package gateway

import (
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/route"
)

// isolationWarnings are the warnings of the homes the gateway routes now,
// those registered through the admin API included; relay tokens are told
// apart by their resolved secrets, so two references to one secret count
// as one token.
func (g *Gateway) isolationWarnings() []string {
	var homes []config.HomeOwnership
	g.eachHome(func(h *route.Home) bool {
		homes = append(homes, config.HomeOwnership{ID: h.Spec().ID, Target: h.Spec().Target, Relay: h.Token()})
		return true
	})
	set := g.gate.Set()
	return config.IsolationWarningsOf(g.cfg.Hosts.NodesDomain, homes, set.Owner)
}
