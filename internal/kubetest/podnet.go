package kubetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// Pod addresses. The API server refuses loopback addresses in
// EndpointSlices (127.0.0.0/8 "may not be in the loopback range"), so a
// Service could never list a pod on 127.0.0.X. When it runs as root the
// agent makes 198.18.0.0/24 (RFC 2544's range for network tests, never
// routed) local to this machine with one route on the loopback device,
//
//	ip route replace local 198.18.0.0/24 dev lo
//
// and gives pods 198.18.0.10 and up: the traffic stays on lo, as with
// 127.0.0.X. The last test binary to stop removes the route again. Without
// root (or iproute2) pods get 127.0.0.10 and up, and EndpointSlices stay
// empty.
const (
	anyIPRoute  = "198.18.0.0/24"
	anyIPPrefix = "198.18.0."
	loopPrefix  = "127.0.0."
	firstHost   = 10
	lastHost    = 250
)

// podNet hands out one address per live pod. An address is held with an
// flock on a file named after it, so test binaries running at once (the
// harness's own tests beside the provider's) never share one.
type podNet struct {
	prefix  string
	lockDir string
	netLock *os.File // shared lock on the route while this binary uses it

	mu   sync.Mutex
	next int
}

func newPodNet() (*podNet, error) {
	lockDir := filepath.Join(os.TempDir(), fmt.Sprintf("kubetest-addrs-%d", os.Getuid()))
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, err
	}
	n := &podNet{prefix: loopPrefix, lockDir: lockDir, next: firstHost}
	f, err := os.OpenFile(filepath.Join(lockDir, "route.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// Exclusive while adding the route, then shared while in use.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	if !bindable(anyIPPrefix+"1") && os.Getuid() == 0 {
		if err := exec.Command("ip", "route", "replace", "local", anyIPRoute, "dev", "lo").Run(); err == nil {
			_ = os.WriteFile(filepath.Join(lockDir, "route.added"), nil, 0o600)
		}
	}
	if bindable(anyIPPrefix + "1") {
		n.prefix = anyIPPrefix
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	n.netLock = f
	return n, nil
}

// bindable reports whether a listener can bind ip.
func bindable(ip string) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// close removes the route if this binary is the last user of a route
// kubetest added.
func (n *podNet) close() {
	if n.netLock == nil {
		return
	}
	fd := int(n.netLock.Fd())
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		marker := filepath.Join(n.lockDir, "route.added")
		if _, err := os.Stat(marker); err == nil {
			_ = exec.Command("ip", "route", "del", "local", anyIPRoute, "dev", "lo").Run()
			_ = os.Remove(marker)
		}
	}
	n.netLock.Close()
	n.netLock = nil
}

// alloc returns a free address and the function that frees it. Addresses
// are handed out in turn rather than lowest first, so a connection left
// open to a pod that is gone does not reach the next pod.
func (n *podNet) alloc() (string, func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for range lastHost - firstHost + 1 {
		ip := fmt.Sprintf("%s%d", n.prefix, n.next)
		n.next++
		if n.next > lastHost {
			n.next = firstHost
		}
		f, err := os.OpenFile(filepath.Join(n.lockDir, ip), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return "", nil, err
		}
		return ip, func() { f.Close() }, nil
	}
	return "", nil, fmt.Errorf("kubetest: no free pod address in %s%d-%d", n.prefix, firstHost, lastHost)
}
