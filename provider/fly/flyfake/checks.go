package flyfake

import (
	"sort"
	"time"
)

// checkStatus is one health check's status as SetCheck gave it.
type checkStatus struct {
	status, output string
	at             time.Time
}

// SetCheck gives health check name of machine id a status ("passing",
// "warning" or "critical") and an output, as Fly's checker would after a
// run of the check. The next boot of the machine clears it.
func (s *Server) SetCheck(id, name, status, output string) {
	s.with(id, func(m *machine) {
		if m.checks == nil {
			m.checks = map[string]checkStatus{}
		}
		m.checks[name] = checkStatus{status: status, output: output, at: time.Now()}
		s.broadcastLocked()
	})
}

// checksJSON is m's "checks": one entry per check its config declares, in
// name order; none when it declares none.
func (m *machine) checksJSON() []map[string]any {
	declared, _ := m.config["checks"].(map[string]any)
	names := make([]string, 0, len(declared))
	for n := range declared {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		c, ok := m.checks[n]
		if !ok {
			c = checkStatus{status: "warning", at: time.Now()}
		}
		out = append(out, map[string]any{"name": n, "status": c.status, "output": c.output,
			"updated_at": c.at.UTC().Format(time.RFC3339Nano)})
	}
	return out
}
