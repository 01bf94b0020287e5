package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Whom the CLI talks to on the admin socket. A socket is only a file: a
// home's user, or anyone who can write where the CLI looks (./data when
// run from a home's folder), can leave one that answers like a gateway,
// and the CLI would print its answer as the gateway's and send it what an
// operator types. So the CLI uses a socket only when it is owned by root,
// by the user running the CLI (a gateway started by that user), or by the
// user named in WAKEGATE_ADMIN_OWNER (a gateway running as a service user
// of its own, reached by the members of admin.socket_group); and, once
// connected, only when the process listening there (SO_PEERCRED) runs as
// one of those users too. Anything else is refused with the owner named.

// adminOwnerEnv names the gateway's user for operators who reach its
// socket through admin.socket_group: a user name or a uid.
const adminOwnerEnv = "WAKEGATE_ADMIN_OWNER"

// socketOwners are the uids whose admin socket the CLI trusts.
func socketOwners() ([]int, error) {
	owners := []int{0, os.Geteuid()}
	name := os.Getenv(adminOwnerEnv)
	if name == "" {
		return owners, nil
	}
	if uid, err := strconv.Atoi(name); err == nil {
		return append(owners, uid), nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", adminOwnerEnv, name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: uid %q: %w", adminOwnerEnv, name, u.Uid, err)
	}
	return append(owners, uid), nil
}

// trustedUID reports whether uid is one of owners.
func trustedUID(uid int, owners []int) bool {
	for _, o := range owners {
		if uid == o {
			return true
		}
	}
	return false
}

// userName is uid with its name, when it has one: "61999" or "1000 (ann)".
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%d (%s)", uid, u.Username)
	}
	return strconv.Itoa(uid)
}

// untrustedSocket is the refusal of a socket, or of the process behind
// it, that runs as someone the CLI does not trust.
func untrustedSocket(path, what string, uid int) error {
	return fmt.Errorf("refusing the admin socket %s: %s uid %s, not root nor you (uid %d); it may not be "+
		"the gateway's\n  hint: if uid %d is the gateway's user, set %s=%d; else remove the socket, or pass "+
		"--admin with the gateway's address", path, what, userName(uid), os.Geteuid(), uid, adminOwnerEnv, uid)
}

// checkSocketOwner refuses the socket at path unless its owner is
// trusted (the symbolic link itself, when path is one, and what it
// names).
func checkSocketOwner(path string, owners []int) error {
	for _, stat := range []func(string) (os.FileInfo, error){os.Lstat, os.Stat} {
		fi, err := stat(path)
		if err != nil {
			return fmt.Errorf("admin socket %s: %w", path, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("admin socket %s: its owner cannot be read here", path)
		}
		if !trustedUID(int(st.Uid), owners) {
			return untrustedSocket(path, "it is owned by", int(st.Uid))
		}
	}
	return nil
}

// dialTrusted connects to the admin socket at path and keeps the
// connection only when the process listening there runs as a trusted
// user.
func dialTrusted(ctx context.Context, path string, owners []int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("admin socket %s: not a Unix socket connection", path)
	}
	uid, err := listenerUID(uc)
	if err == nil && !trustedUID(uid, owners) {
		err = untrustedSocket(path, "the process listening there runs as", uid)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// listenerUID is the uid of the process that listens at c's other end,
// as the kernel recorded it.
func listenerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("admin socket peer: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("admin socket peer: %w", err)
	}
	if serr != nil {
		return 0, fmt.Errorf("admin socket peer: %w", serr)
	}
	if cred == nil {
		return 0, errors.New("admin socket peer: the kernel named no peer")
	}
	return int(cred.Uid), nil
}
