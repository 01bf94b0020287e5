package gateway_test

import (
	"strings"
	"testing"
)

// TestStartLogsConfigWarnings checks that what check-config warns of is
// also in the log of a gateway that serves the file.
func TestStartLogsConfigWarnings(t *testing.T) {
	t.Parallel()
	gw := e2eStartWithCommand(t, `["/bin/sleep", "600"]`, `
homes:
  - id: deaf
    target: deaf
`)
	if !strings.Contains(gw.logs.String(), `level=WARN msg="config: home deaf: `) {
		t.Fatal("no config warning about home deaf in the log")
	}
}
