// Package config is wakegate's configuration: Load reads a YAML file into
// a *Config, in four steps that each run once: decode (unknown fields and
// badly typed values are errors), expand ${VAR} and ${VAR:-default},
// fill every default (defaults.go, the one place defaults are written;
// nothing downstream tests for zero again), and check every section
// (check.go). Every problem is reported, in line order, with the file, the
// line and the dotted field, and with the fix where there is one. The
// types' doc comments say each field's default, unit and what zero means;
// internal/configdoc writes docs/config.md from them.
//
// A loaded Config is a value the gateway reads, of plain values: a field
// whose zero differs from leaving it out is told apart inside Load
// (unset.go) and holds its default after. It serves no request and
// imports no package that does, nor any provider: Load is handed the
// providers' table (Providers, providers.go; package provider/all has the
// standard one) and checks homes and provider sections with it. What
// the request path needs in resolved form (trusted proxy networks, no-wake
// patterns, admin tokens, the waiting page's template) is resolved once by
// the checks and read through accessors (resolved.go); the checks made per
// request live where requests are handled.
//
// A reload compares the running config with the one it read here
// (reload.go): which settings differ, and which of them a running gateway
// keeps until its next start (KeepRestartOnly).
//
// DESIGN rules that live here: 30's config part (a file that sets nothing
// is told apart, Config.Empty, and check-config warns of it, warn.go) and
// its reload part (a file that is empty or would remove every home and app
// is refused with the way out unless confirmed, RemovesEverything,
// reload.go), 31's warnings (isolation.go: homes of several
// owners on one origin, homes sharing a relay token) and the operator's
// side of 23 (errors name the file, line and field, never echo a secret).
package config
