// Command probe is what the docker provider's tests run inside a home's
// container (podman exec) to see it as the home does: which addresses it
// can open, where it can write, and its own process's limits.
//
//	probe dial HOST:PORT   exit 0 when a TCP connection opens
//	probe write PATH       exit 0 when PATH can be written
//	probe read PATH        print what PATH holds
//	probe status           print NoNewPrivs, CapEff, Uid and pids.max
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe dial HOST:PORT | write PATH | read PATH | status")
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", arg(), 3*time.Second)
		if err != nil {
			fail("closed: %v", err)
		}
		_ = c.Close()
		fmt.Println("open")
	case "write":
		if err := os.WriteFile(arg(), []byte("x"), 0o600); err != nil {
			fail("not written: %v", err)
		}
		fmt.Println("written")
	case "read":
		b, err := os.ReadFile(arg())
		if err != nil {
			fail("not read: %v", err)
		}
		fmt.Println(string(b))
	case "status":
		status()
	default:
		fail("unknown command %q", os.Args[1])
	}
}

func arg() string {
	if len(os.Args) < 3 {
		fail("%s wants an argument", os.Args[1])
	}
	return os.Args[2]
}

// status prints the lines of /proc/self/status the tests judge, and the
// pids limit of the container's cgroup (v1 or v2).
func status() {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		for _, k := range []string{"NoNewPrivs:", "CapEff:", "CapBnd:", "Uid:"} {
			if strings.HasPrefix(l, k) {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"} {
		if b, err := os.ReadFile(p); err == nil {
			fmt.Println("pids.max: " + strings.TrimSpace(string(b)))
			return
		}
	}
	fmt.Println("pids.max: none")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
