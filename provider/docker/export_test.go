package docker

// EngineError is engineError of a provider with the default section, for
// the tests of its classification.
func EngineError(op, id string, err error) error {
	c := Config{}
	c.Defaults()
	return (&Provider{cfg: c}).engineError(op, id, err)
}
