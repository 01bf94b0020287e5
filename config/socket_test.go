package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/all"
)

// TestConfigSocketPathChecked: a home on {socket} whose socket path would
// pass the 107 bytes of a Unix socket's address is refused by the config
// check, at the home's command or, for exec.command, at its id.
func TestConfigSocketPathChecked(t *testing.T) {
	long := "/srv/" + strings.Repeat("d", 80)
	checkMarks(t, "socket.yaml", fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
exec:
  command: ["{self}", "demo-home", "--unix", "{socket}", "--target", "{target}"]
homes:
  - id: a-rather-long-home-name-0001  # want homes[0].id
  - id: own
    command: ["/bin/home", "{socket}"] # want homes[1].command
  - id: tcp
    command: ["/bin/home", "{port}"]
`, long))
	// The same homes under a short data_dir pass.
	text := `listen: "127.0.0.1:0"
data_dir: "/srv/wg"
exec:
  command: ["{self}", "demo-home", "--unix", "{socket}", "--target", "{target}"]
homes:
  - id: a-rather-long-home-name-0001
`
	if _, err := all.Load("short.yaml", []byte(text)); err != nil {
		t.Fatalf("short data_dir refused: %v", err)
	}
}
