package provider

import "github.com/wakegate/wakegate/internal/provconf"

// ResolveSecret reads a secret reference, "env:NAME" or "file:PATH" (the
// file's content with surrounding white space trimmed); see
// provconf.ResolveSecret.
func ResolveSecret(ref string) (string, error) { return provconf.ResolveSecret(ref) }
