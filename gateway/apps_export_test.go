package gateway

// ProbeToken returns this process's internal probe token, for the tests
// that prove an outside caller cannot use it. It exists in tests only.
func (g *Gateway) ProbeToken() string { return g.routeTab.probe.Token() }
