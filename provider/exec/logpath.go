package execprov

import "path/filepath"

// LogFiles returns the paths of home id's log, oldest generation first:
// home.log.1 (the rotated part) and home.log (the file the home appends
// to). Either may not exist yet.
func (e *Provider) LogFiles(id string) ([]string, error) {
	h, err := e.homeFor(id)
	if err != nil {
		return nil, err
	}
	p := filepath.Clean(h.log.Path())
	return []string{p + ".1", p}, nil
}
