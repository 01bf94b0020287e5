package procid

import (
	"errors"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcVanished: a /proc read that fails because the process is gone
// (the entry missing, or the process torn down during the read, ESRCH)
// means gone; any other failure is an error to report.
func TestProcVanished(t *testing.T) {
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{&fs.PathError{Op: "open", Path: "/proc/1/stat", Err: unix.ENOENT}, true},
		{&fs.PathError{Op: "read", Path: "/proc/1/stat", Err: unix.ESRCH}, true},
		{&fs.PathError{Op: "readlink", Path: "/proc/1/exe", Err: unix.ESRCH}, true},
		{&fs.PathError{Op: "open", Path: "/proc/1/stat", Err: unix.EACCES}, false},
		{errors.New("something else"), false},
	} {
		if got := Vanished(c.err); got != c.gone {
			t.Errorf("Vanished(%v) = %v, want %v", c.err, got, c.gone)
		}
	}
	if _, err := ReadStat(1 << 30); !errors.Is(err, ErrGone) {
		t.Errorf("ReadStat of a pid that cannot exist: %v, want ErrGone", err)
	}
}
