package config_test

import (
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/all"
)

// A home's memory_max and cpu_max are refused at load (so at start and in
// check-config) where its home can have no cgroup, with the field's line
// and the way out.
func TestLimitsRefusedAtLoad(t *testing.T) {
	text := `listen: 127.0.0.1:0
exec:
  containment: subreaper
homes:
  - id: alice
    command: ["/bin/sleep", "60"]
    options:
      memory_max: 64MiB
`
	_, err := all.Load("limits.yaml", []byte(text))
	if err == nil {
		t.Fatal("a memory_max the machine cannot enforce was accepted")
	}
	for _, want := range []string{"limits.yaml:8", "memory_max", "exec.containment is subreaper", "remove the limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
