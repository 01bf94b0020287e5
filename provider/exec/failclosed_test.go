package execprov

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/homesdir"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
)

// closedDataDir is, for a test run as root (others skip), a data_dir under
// a folder closed to other users (t.TempDir is 0700), as a checkout under
// /root or a mktemp -d folder is, with the cleanup of its homes, cgroups
// and folders under the machine-wide folder.
func closedDataDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root gateway gives homes users of their own")
	}
	data := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() {
		killHomes(t, data)
		removeCgroups(t, data)
		_ = os.RemoveAll(homesdir.Of(homesdir.DefaultMachineDir, data))
	})
	return data
}

// A root gateway whose data_dir is closed to other users, running {self}
// from go test's closed build folder, still runs each home as a user of
// its own (never as root): its folder is laid out under the machine-wide
// folder (data_dir/homes links there) and {self} is a root-owned copy
// there. The home reads none of the gateway's files.
func TestClosedLayoutStillGivesHomesUsersOfTheirOwn(t *testing.T) {
	data := closedDataDir(t)
	cfg := testConfig(data)
	cfg.Users = Users{Mode: UsersAuto}
	e := newExec(t, cfg)
	if why, refused := e.SharedUser(), e.RefusedHomes(); why != "" || refused != "" {
		t.Fatalf("SharedUser %q, RefusedHomes %q: want homes of their own users", why, refused)
	}
	r := wake(t, e, provider.Spec{ID: "h1"})
	waitReady(t, r.Endpoint)
	in := info(t, r.Endpoint)
	if in.UID == 0 || in.UID < int(DefaultUsersFirst) || in.UID > int(DefaultUsersLast) {
		t.Fatalf("home runs as uid %d under a closed data_dir; want a uid of the range", in.UID)
	}
	want := homesdir.Of(homesdir.DefaultMachineDir, data)
	if to, err := os.Readlink(filepath.Join(data, "homes")); err != nil || to != want {
		t.Errorf("data_dir/homes links to %q (%v), want %s", to, err, want)
	}
	st, err := os.Stat(filepath.Join(want, "h1"))
	if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != in.UID || st.Mode().Perm() != 0o700 {
		t.Errorf("home folder %s: %v %v, want 0700 owned by uid %d", filepath.Join(want, "h1"), st, err, in.UID)
	}
	if !strings.HasPrefix(e.self, filepath.Join(homesdir.DefaultMachineDir, "bin")+"/") {
		t.Errorf("{self} is %s, want its copy under %s/bin", e.self, homesdir.DefaultMachineDir)
	}
	if st, err := os.Stat(e.self); err != nil || st.Mode().Perm() != 0o755 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("copy of {self}: %v %v, want root's, 0755", st, err)
	}
	for _, p := range []string{filepath.Join(data, "exec", homeuser.File), filepath.Join(data, "exec", "h1", "home.log")} {
		if got, ok := readAs(t, r.Endpoint, p); ok {
			t.Errorf("the home read %s: %q", p, got)
		}
	}
}

// A data_dir removed and made again at the same path (rm -rf to start
// afresh) finds the home folders of the one before under the machine-wide
// folder: its own new, empty data_dir/homes is replaced by the link there,
// the folders are kept, and homes still run as users of their own.
func TestClosedDataDirMadeAgainAtTheSamePath(t *testing.T) {
	data := closedDataDir(t)
	cfg := testConfig(data)
	cfg.Users = Users{Mode: UsersAuto}
	first, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	dst := homesdir.Of(homesdir.DefaultMachineDir, data)
	kept := filepath.Join(dst, "kept")
	if err := os.Mkdir(kept, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	e := newExec(t, cfg)
	if why, refused := e.SharedUser(), e.RefusedHomes(); why != "" || refused != "" {
		t.Fatalf("SharedUser %q, RefusedHomes %q after data_dir was made again: want homes of their own users", why, refused)
	}
	if to, err := os.Readlink(filepath.Join(data, "homes")); err != nil || to != dst {
		t.Errorf("data_dir/homes links to %q (%v), want %s", to, err, dst)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the folder the earlier data_dir left under %s is gone: %v", dst, err)
	}
	r := wake(t, e, provider.Spec{ID: "h1"})
	waitReady(t, r.Endpoint)
	if in := info(t, r.Endpoint); in.UID == 0 {
		t.Fatalf("home runs as uid %d, want a user of its own", in.UID)
	}
}

// Where the machine-wide folder cannot be used (another user owns it),
// users auto refuses every home with the cause and the fix, never running
// it as root; users dynamic refuses to start.
func TestUnusableMachineDirRefusesHomes(t *testing.T) {
	data := closedDataDir(t)
	machine := filepath.Join(t.TempDir(), "machine")
	if err := os.Mkdir(machine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(machine, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(data)
	cfg.Users, cfg.MachineDir = Users{Mode: UsersAuto}, machine
	e := newExec(t, cfg)
	if e.RefusedHomes() == "" || !strings.Contains(e.RefusedHomes(), "exec.users.mode off") {
		t.Fatalf("RefusedHomes = %q, want the cause and the ways out", e.RefusedHomes())
	}
	_, err := e.Wake(context.Background(), provider.Spec{ID: "h1"})
	if err == nil || !strings.Contains(err.Error(), "not run as root") || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("wake: %v, want a refusal that names the cause", err)
	}
	cfg.Users.Mode = UsersDynamic
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("New with users dynamic: %v", err)
	}
}

// Two gateways on one machine with the same (default) range never hand
// out one uid, and a users file that gives a home a uid another gateway's
// home holds is refused at start, naming both.
func TestUIDsUniqueAcrossGateways(t *testing.T) {
	a, b, c := closedDataDir(t), closedDataDir(t), closedDataDir(t)
	var uids []int
	for _, data := range []string{a, b} {
		cfg := testConfig(data)
		cfg.Users = Users{Mode: UsersAuto}
		e := newExec(t, cfg)
		r := wake(t, e, provider.Spec{ID: "h1"})
		waitReady(t, r.Endpoint)
		uids = append(uids, info(t, r.Endpoint).UID)
	}
	if uids[0] == uids[1] || uids[0] == 0 || uids[1] == 0 {
		t.Fatalf("the homes h1 of two gateways run as uids %v", uids)
	}
	if err := os.MkdirAll(filepath.Join(c, "exec"), 0o700); err != nil {
		t.Fatal(err)
	}
	taken := `{"homes": {"x": ` + strconv.Itoa(uids[0]) + `}}`
	if err := os.WriteFile(filepath.Join(c, "exec", homeuser.File), []byte(taken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(c)
	cfg.Users = Users{Mode: UsersAuto}
	_, err := New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "also the uid of home h1") || !strings.Contains(err.Error(), a) {
		t.Fatalf("New with a uid of another gateway's home: %v", err)
	}
}
