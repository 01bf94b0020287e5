package execprov

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor of the process above 2
// close-on-exec, so that a home gets stdio and what its start hands it
// (its listening socket) and nothing else (design rule 34). Go opens its
// own descriptors close-on-exec, but leaves those the gateway inherited
// (a file a shell redirected, a pipe of the service manager) open across
// every exec: each home would hold them. The gateway keeps using them;
// only its children lose them. Socket activation of the gateway itself
// (LISTEN_FDS) is unaffected: its listeners are open in the gateway.
func closeInheritedOnExec() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("inherited descriptors: %w", err)
	}
	for _, en := range ents {
		fd, err := strconv.Atoi(en.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile (the listing's own), or already marked
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return fmt.Errorf("inherited descriptor %d: %w", fd, err)
		}
	}
	return nil
}
