package gateway

import (
	"fmt"
	"net"
	"strings"
)

// Warnings returns what a valid config serves that an operator may not
// mean: check-config prints each, and the gateway logs each at start.
func (c *Config) Warnings() []string {
	var out []string
	if len(c.Admin.tokens) > 0 && *c.Admin.Listen != "" {
		if w := adminListenWarning(*c.Admin.Listen); w != "" {
			out = append(out, w)
		}
	}
	return append(out, c.IsolationWarnings()...)
}

// adminListenWarning says what is wrong with an admin listener on listen
// that other machines can reach; "" for a loopback one.
func adminListenWarning(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	const fix = "every machine that reaches it may try admin tokens, and with one runs the gateway; " +
		"bind it to 127.0.0.1 (on this machine the CLI uses the admin socket) or keep the port on a private network"
	ip := net.ParseIP(strings.Trim(host, "[]"))
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return fmt.Sprintf("admin.listen %q serves the admin API on every interface: %s", listen, fix)
	case strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback()):
		return ""
	}
	return fmt.Sprintf("admin.listen %q is not a loopback address: %s", listen, fix)
}
