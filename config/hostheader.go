package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The Host rules of proxy.host_header and proxy.host_headers; any other
// value is a fixed Host.
const (
	HostAuto     = "auto"
	HostClient   = "client"
	HostUpstream = "upstream"
)

// checkHostRule returns what is wrong with the Host rule v, "" if nothing.
func checkHostRule(v string) string {
	switch v {
	case HostAuto, HostClient, HostUpstream:
		return ""
	case "":
		return "empty: want auto, client, upstream or a fixed host[:port]"
	}
	if !httpguts.ValidHostHeader(v) || strings.ContainsAny(v, "%/ ") {
		return fmt.Sprintf("want auto (the client's Host; an https upstream's own), client (the client's Host), "+
			"upstream (the upstream's host:port) or a fixed host[:port], got %q", v)
	}
	return ""
}

// HostNotes say, for check-config, which Host the routes that do not
// simply get the client's receive (docs/headers.md): one line for the
// default when it is not auto, and one per route rule. None for a config
// that leaves Host alone.
func (c *Config) HostNotes() []string {
	var out []string
	p := &c.Proxy
	if p.HostHeader != HostAuto {
		out = append(out, fmt.Sprintf("proxy.host_header: every route %s", hostRuleSays(p.HostHeader)))
	}
	for _, r := range []struct {
		field, what string
		m           map[string]string
	}{{"homes", "home", p.HostHeaders.Homes}, {"apps", "app", p.HostHeaders.Apps}} {
		for _, name := range slices.Sorted(maps.Keys(r.m)) {
			out = append(out, fmt.Sprintf("proxy.host_headers.%s.%s: %s %s %s", r.field, name, r.what, name,
				hostRuleSays(r.m[name])))
		}
	}
	return out
}

// hostRuleSays is what a route with Host rule v receives, for people.
func hostRuleSays(v string) string {
	switch v {
	case HostAuto:
		return "gets the client's Host (an https upstream its own address)"
	case HostClient:
		return "gets the client's Host, toward every upstream"
	case HostUpstream:
		return "gets its upstream's address as Host: an app that compares Origin with Host refuses the browser's " +
			"requests unless it is told the public origin"
	}
	return fmt.Sprintf("gets Host %s whatever the client sent: the app's origin check must accept the public origin", v)
}
