package gateway

// conf is the config the gateway runs with now: the one it started with,
// or the one the last reload applied. Code that reads what a reload may
// change (homes, apps, wake timeouts, access) reads it through conf.
func (g *Gateway) conf() *Config {
	if c := g.live.Load(); c != nil {
		return c
	}
	return g.cfg
}
