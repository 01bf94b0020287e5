package config

import (
	"crypto/x509"
	"net"
	"regexp"

	"github.com/wakegate/wakegate/web"
)

// What Load resolves once, read by the running gateway: the values behind
// the fields that the file writes as text (networks, patterns, secret
// references, a template file). They are read-only.

// File is the name the config was loaded under, for messages.
func (c *Config) File() string { return c.file }

// Empty reports whether the file set nothing at all: no text, only
// comments or blank lines, or an empty mapping. Such a file is more often
// a file emptied by accident than a wish to run on defaults alone, so a
// reload of it is refused unless confirmed (DESIGN rule 30).
func (c *Config) Empty() bool { return c.empty }

// DisplayName is home id's display_name; "" when it has none.
func (c *Config) DisplayName(id string) string { return c.displayNames[id] }

// WaitingTheme is home id's waiting_theme; "" when it has none.
func (c *Config) WaitingTheme(id string) string { return c.homeThemes[id] }

// GCHeadroomDefaulted reports whether server.gc_headroom was unset, so
// that the start sizes it from the memory the gateway may use.
func (s *ServerConfig) GCHeadroomDefaulted() bool { return s.gcHeadroomDefault }

// TrustedNets are server.trusted_proxies, parsed.
func (s *ServerConfig) TrustedNets() []*net.IPNet { return s.trusted }

// NoWakeAgents are wake.no_wake_user_agents, compiled.
func (w *WakeConfig) NoWakeAgents() []*regexp.Regexp { return w.noWakeUA }

// WaitingTemplate is wake.waiting_page, parsed, or wake.waiting_theme's
// built-in page; nil for the default page.
func (w *WakeConfig) WaitingTemplate() *web.WaitingTemplate { return w.waitingTmpl }

// ResolvedTokens are the admin tokens, their references resolved and
// empty entries left out: the listener is off while there is none.
func (a *AdminConfig) ResolvedTokens() []string { return a.tokens }

// SocketDefaulted reports whether admin.socket was unset, so that the
// default socket is served only if it can be.
func (a *AdminConfig) SocketDefaulted() bool { return a.socketDefault }

// SocketGID is admin.socket_group resolved to a gid; -1 for none.
func (a *AdminConfig) SocketGID() int { return a.socketGID }

// Roots are tls.trusted_roots, read; nil for the system's roots.
func (t *TLSConfig) Roots() *x509.CertPool { return t.roots }

// MAC is the EAB HMAC key, its reference resolved.
func (e EABConfig) MAC() string { return e.mac }

// UIDs are exec.users.range, parsed: the first and the last uid.
func (u ExecUsersConfig) UIDs() (first, last uint32) { return u.first, u.last }
