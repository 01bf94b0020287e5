package procid

import (
	"errors"
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	raw := []byte("4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000000 100 18446744073709551615\n")
	st, err := ParseStat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'S' || st.Pgrp != 4242 || st.PPid != 1 || st.Threads != 1 || st.Start != 987654 {
		t.Fatalf("parsed %+v, want state S, pgrp 4242, parent 1, 1 thread, start 987654", st)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q without error", bad)
		}
	}
}

func TestReadOwnProcess(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Exe != CleanExe(self) || st.Start == 0 {
		t.Fatalf("own identity %+v, exe want %s", st, self)
	}
	if _, err := Lookup(st.Identity); err != nil {
		t.Fatalf("own identity does not match itself: %v", err)
	}
	// An exec changes the executable, not the process: pid and start time
	// (and the boot) name it.
	if _, err := Lookup(Identity{PID: st.PID, Exe: st.Exe + "-before-exec", Start: st.Start, Boot: st.Boot}); err != nil {
		t.Errorf("the same pid and start time with another executable: %v, want the same process", err)
	}
	if _, err := Lookup(Identity{PID: st.PID, Exe: st.Exe, Start: st.Start + 1, Boot: st.Boot}); !errors.Is(err, ErrReused) || !errors.Is(err, ErrGone) {
		t.Errorf("other start time: %v, want ErrReused wrapping ErrGone", err)
	}
	if _, err := Lookup(Identity{PID: st.PID, Exe: st.Exe, Start: st.Start, Boot: "an-earlier-boot"}); !errors.Is(err, ErrGone) || errors.Is(err, ErrReused) {
		t.Errorf("recorded before the machine restarted: %v, want ErrGone", err)
	}
	if _, err := Lookup(Identity{PID: 1 << 30, Exe: "/x", Start: 1}); !errors.Is(err, ErrGone) || errors.Is(err, ErrReused) {
		t.Errorf("free pid: %v, want ErrGone", err)
	}
}

func TestCleanExe(t *testing.T) {
	if got := CleanExe("/usr/bin/wakegate (deleted)"); got != "/usr/bin/wakegate" {
		t.Fatalf("CleanExe = %q", got)
	}
	if got := CleanExe("/usr/bin/wakegate"); got != "/usr/bin/wakegate" {
		t.Fatalf("CleanExe = %q", got)
	}
}
