// Package sysfile reads and writes small files in single system calls:
// the kernel's own (/proc, cgroupfs) and the provider's small records.
//
// os.ReadFile and os.WriteFile open an *os.File, which first tries to
// register the descriptor with the runtime's poller: five more system
// calls for each file (four fcntl and an epoll_ctl the kernel refuses),
// and a stat to size the buffer. A home's start reads and writes a dozen
// such files on the way to its process, so these calls are on the wake's
// critical path; here each file costs its open, its reads and its close.
// Errors are *fs.PathError, as os's, so errors.Is(err, fs.ErrNotExist)
// and the like hold as before.
package sysfile

import (
	"errors"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// firstRead is the buffer of a read's first call: a /proc/PID/stat, a
// cgroup's interface file or a provider record fits in it.
const firstRead = 512

// Read returns the whole content of the file at path.
func Read(path string) ([]byte, error) {
	fd, err := open(path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) //nolint:errcheck // a read-only descriptor
	buf := make([]byte, 0, firstRead)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Write writes data to the file at path in one write, with os.WriteFile's
// flags and mode 0: on cgroupfs and /proc, where files are not created,
// a missing file is the same error as there (EACCES under a directory
// that exists).
func Write(path string, data []byte) error {
	return WriteFile(path, data, 0)
}

// WriteFile is Write with perm for a file it creates, as os.WriteFile:
// a record a gateway rewrites whole (written to a temporary name and
// renamed over the record).
func WriteFile(path string, data []byte, perm uint32) error {
	fd, err := open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, perm)
	if err != nil {
		return err
	}
	n, err := write(fd, data)
	cerr := unix.Close(fd)
	switch {
	case err != nil:
		return &fs.PathError{Op: "write", Path: path, Err: err}
	case n < len(data):
		return &fs.PathError{Op: "write", Path: path, Err: io.ErrShortWrite}
	case cerr != nil:
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

// Open opens path with flags (O_CLOEXEC is added) for the calls of
// package unix: a descriptor the runtime's poller never sees.
func Open(path string, flags int, mode uint32) (int, error) {
	return open(path, flags, mode)
}

func open(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, mode)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

func write(fd int, data []byte) (int, error) {
	for {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err
	}
}
