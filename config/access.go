package config

// The access and limits sections (package access documents each field):
// who may reach each home and app, and the abuse limits, both checked
// before anything wakes a home.

// validateAccess reports the problems of the access and limits sections.
func (c *Config) validateAccess(k checker) {
	for _, p := range c.Access.Problems() {
		k.in("access").bad(p.Field, "%s", p.Msg)
	}
	for _, p := range c.Limits.Problems() {
		k.in("limits").bad(p.Field, "%s", p.Msg)
	}
}
