package cli

import (
	"fmt"
	"os"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestMain gives the commands the binary's embedded config, as main does,
// and removes the wakegate binary the tests built once they are done.
func TestMain(m *testing.M) {
	def, err := os.ReadFile("../config.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build = Build{Version: "dev", DefaultConfig: def}
	os.Exit(testbin.Main(m))
}
