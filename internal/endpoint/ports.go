package endpoint

import (
	"os"
	"strconv"
	"strings"
)

// HomePortLow is the first loopback port the exec provider gives a home;
// tests pick theirs below it.
const HomePortLow = 20000

// EphemeralLow is the first port of the kernel's ephemeral range, from
// which every outgoing connection and every :0 listener take their ports
// (32768 when it cannot be read or leaves too little room below it). A
// port chosen below it cannot be taken by such a socket between its choice
// and the bind that uses it.
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < HomePortLow+1000 {
		return 32768
	}
	return n
}
