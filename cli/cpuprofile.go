package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// cpuProfileEnv names a file that `wakegate serve` writes a CPU profile
// of its whole run to (scripts/pgo.sh makes default.pgo from one). A
// "{pid}" in the name becomes the process id, so that several gateways
// started with the same environment (the scale benchmark's) keep one
// profile each.
const cpuProfileEnv = "WAKEGATE_CPU_PROFILE"

// startCPUProfile starts the CPU profile cpuProfileEnv asks for, if any,
// and returns what stops it and closes its file.
func startCPUProfile(stderr io.Writer) (stop func()) {
	path := strings.ReplaceAll(os.Getenv(cpuProfileEnv), "{pid}", strconv.Itoa(os.Getpid()))
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cpuProfileEnv, err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cpuProfileEnv, err)
		}
	}
}
