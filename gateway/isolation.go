package gateway

import "github.com/wakegate/wakegate/config"

// isolationWarnings are the warnings of the homes the gateway routes now,
// those registered through the admin API included; relay tokens are told
// apart by their resolved secrets, so two references to one secret count
// as one token.
func (g *Gateway) isolationWarnings() []string {
	var homes []config.HomeOwnership
	g.eachHome(func(h *homeRoute) bool {
		homes = append(homes, config.HomeOwnership{ID: h.spec.ID, Target: h.spec.Target, Relay: h.token})
		return true
	})
	set := g.gate.set.Load()
	return config.IsolationWarningsOf(g.cfg.Hosts.NodesDomain, homes, set.Owner)
}
