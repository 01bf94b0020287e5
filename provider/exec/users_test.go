package execprov

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/homeuser"
)

// openToOthers makes dir and its parents up to the system's temp dir
// passable by every user (t.TempDir makes them 0700), so that a home's
// own user reaches its folder.
func openToOthers(t *testing.T, dir string) {
	t.Helper()
	root := filepath.Clean(os.TempDir())
	if closed := homeuser.ClosedToOthers(filepath.Join(root, "x"), false); closed != "" {
		t.Skipf("%s closed to other users: a home's own user could not reach a folder under it", closed)
	}
	for d := dir; d != root && d != "/" && d != "."; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
}

// selfForOthers copies the test binary into a folder every user may run
// it from (go test builds it in a folder only root may pass), and returns
// homeCommand with {self} replaced by the copy.
func selfForOthers(t *testing.T) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	openToOthers(t, dir)
	dst := filepath.Join(dir, "exec.test")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := append([]string(nil), homeCommand...)
	cmd[0] = dst
	return cmd
}

// readAs asks the home at endpoint to read path; it returns what it read
// and whether it could.
func readAs(t *testing.T, endpoint, path string) (string, bool) {
	t.Helper()
	resp, err := http.Get(endpoint + "/read?path=" + url.QueryEscape(path))
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode == http.StatusOK
}

// With users dynamic and a root gateway, each home runs as a uid of its
// own from the range (gid the same, no supplementary group), keeps it
// across a restart of the provider, owns its folder (0700), and reads
// neither another home's folder nor the provider's files; stop still
// proves it gone.
func TestHomesRunAsUsersOfTheirOwn(t *testing.T) {
	cfg, e := usersExec(t)
	dir := cfg.DataDir
	if why := e.SharedUser(); why != "" {
		t.Fatalf("SharedUser = %q with users dynamic as root", why)
	}
	// A folder from before homes had users of their own is handed over.
	old := filepath.Join(dir, "homes", "h1", "old")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("written as root"), 0o600); err != nil {
		t.Fatal(err)
	}
	r1 := wake(t, e, provider.Spec{ID: "h1"})
	r2 := wake(t, e, provider.Spec{ID: "h2"})
	waitReady(t, r1.Endpoint)
	waitReady(t, r2.Endpoint)
	in1, in2 := info(t, r1.Endpoint), info(t, r2.Endpoint)
	for _, in := range []homeInfo{in1, in2} {
		if in.UID < int(DefaultUsersFirst) || in.UID > int(DefaultUsersLast) || in.GID != in.UID || len(in.Groups) != 0 {
			t.Fatalf("home runs as uid %d gid %d groups %v; want a uid of the range, its gid, no groups", in.UID, in.GID, in.Groups)
		}
	}
	if in1.UID == in2.UID {
		t.Fatalf("two homes share uid %d", in1.UID)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
		uid  int
	}{
		{dir, 0o711, 0}, {filepath.Join(dir, "homes"), 0o711, 0}, {filepath.Join(dir, "exec"), 0o700, 0},
		{filepath.Join(dir, "homes", "h1"), 0o700, in1.UID}, {filepath.Join(dir, "homes", "h2"), 0o700, in2.UID},
	} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != c.mode || int(st.Sys().(*syscall.Stat_t).Uid) != c.uid {
			t.Errorf("%s: mode %o owner %d, want %o owned by %d", c.path, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid, c.mode, c.uid)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "homes", "h2", "private"), []byte("h2's"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, own := range []string{filepath.Join(dir, "homes", "h1", "pids"), old} {
		if got, ok := readAs(t, r1.Endpoint, own); !ok {
			t.Fatalf("home h1 cannot read %s in its own folder: %s", own, got)
		}
	}
	for _, p := range []string{
		filepath.Join(dir, "homes", "h2", "private"), filepath.Join(dir, "exec", "h1", "home.ref"),
		filepath.Join(dir, "exec", "h2", "home.log"), filepath.Join(dir, "exec", homeuser.File),
	} {
		if got, ok := readAs(t, r1.Endpoint, p); ok {
			t.Errorf("home h1 read %s: %q", p, got)
		}
	}

	// A new provider on the same data dir (a gateway restart) keeps the
	// uids: stop proves the adopted home gone, a new start has the same uid.
	e.Close()
	e2 := newExec(t, cfg)
	proven, err := e2.Stop(context.Background(), provider.Spec{ID: "h1", Ref: r1.Ref})
	if err != nil || !proven {
		t.Fatalf("Stop of a home of its own user: proven=%v err=%v", proven, err)
	}
	r1 = wake(t, e2, provider.Spec{ID: "h1"})
	waitReady(t, r1.Endpoint)
	if again := info(t, r1.Endpoint); again.UID != in1.UID {
		t.Fatalf("h1 restarted as uid %d, had %d", again.UID, in1.UID)
	}
	b, err := os.ReadFile(filepath.Join(dir, "exec", homeuser.File))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Homes map[string]uint32 `json:"homes"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Homes["h1"] != uint32(in1.UID) || rec.Homes["h2"] != uint32(in2.UID) {
		t.Fatalf("users file %s: %v", b, err)
	}
}

// users auto under a gateway that is not root runs homes as the
// gateway's user and says why with the way out; dynamic refuses instead.
// (A root gateway never does: TestClosedLayoutStillGivesHomesUsersOfTheirOwn.)
// A users file that gives one uid to two homes is refused.
func TestUsersAutoSaysWhyHomesShareTheUser(t *testing.T) {
	dir := testDataDir(t) // 0700: closed to other users
	cfg := testConfig(filepath.Join(dir, "data"))
	cfg.Users = Users{Mode: UsersAuto}
	if os.Geteuid() != 0 {
		e := newExec(t, cfg)
		if why := e.SharedUser(); !strings.Contains(why, "not root") {
			t.Fatalf("SharedUser = %q, want it to say the gateway is not root", why)
		}
		cfg.Users.Mode = UsersDynamic
		if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "not root") {
			t.Fatalf("New with users dynamic: %v, want a refusal", err)
		}
		return
	}
	openToOthers(t, dir)
	cfg.Command = selfForOthers(t)
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "exec"), 0o700); err != nil {
		t.Fatal(err)
	}
	bad := `{"homes": {"a": 61184, "b": 61184}}`
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "exec", homeuser.File), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "uid 61184 to homes") {
		t.Fatalf("New with a uid given to two homes: %v", err)
	}
}

// A home may name an account of the system to run as (option user),
// instead of the uid it would be handed; root is refused, and so is a
// named user without exec.users.
func TestHomeRunsAsNamedUser(t *testing.T) {
	cfg, e := usersExec(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	r := wake(t, e, provider.Spec{ID: "h1", Options: []byte(`{"user": "nobody"}`)})
	waitReady(t, r.Endpoint)
	if in := info(t, r.Endpoint); strconv.Itoa(in.UID) != nobody.Uid || len(in.Groups) != 0 {
		t.Fatalf("home with user nobody runs as uid %d groups %v", in.UID, in.Groups)
	}
	if _, err := e.Wake(context.Background(), provider.Spec{ID: "h2", Options: []byte(`{"user": "root"}`)}); err == nil ||
		!strings.Contains(err.Error(), "never runs as root") {
		t.Fatalf("wake as root: %v", err)
	}
	if ps := Factory(cfg).CheckHome(provider.Settings{Options: []byte(`{"user": "root"}`)}); len(ps) != 1 || ps[0].Field != "options.user" {
		t.Fatalf("CheckHome of user root: %v", ps)
	}
	cfg.Users = Users{Mode: UsersOff}
	off := newExec(t, cfg)
	if _, err := off.Wake(context.Background(), provider.Spec{ID: "h3", Options: []byte(`{"user": "nobody"}`)}); err == nil ||
		!strings.Contains(err.Error(), "needs exec.users") {
		t.Fatalf("wake as a named user with exec.users off: %v", err)
	}
}

// A program closed to the home's user fails the start with the cause and
// the way out.
func TestClosedProgramNamesTheFix(t *testing.T) {
	_, e := usersExec(t)
	closed := filepath.Join(t.TempDir(), "closed")
	if err := os.WriteFile(closed, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := e.Wake(context.Background(), provider.Spec{ID: "h1", Command: []string{closed}})
	if err == nil || !strings.Contains(err.Error(), "chmod o+rx") {
		t.Fatalf("wake of a program closed to the home's user: %v", err)
	}
}

// ProgramClosed names, before any wake, a program the home's user could
// not run, with what is closed on the way to it; a program open to every
// user, a placeholder and a home with a user setting of its own are not
// judged.
func TestProgramClosedBeforeTheWake(t *testing.T) {
	cfg, e := usersExec(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // closed to other users
		t.Fatal(err)
	}
	closed := filepath.Join(dir, "closed")
	if err := os.WriteFile(closed, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		spec    provider.Spec
		program string
		closed  string
	}{
		{"under a closed folder", provider.Spec{ID: "h1", Command: []string{closed, "{port}"}}, closed, dir},
		{"open to every user", provider.Spec{ID: "h2", Command: []string{"/bin/sh", "-c", "true"}}, "", ""},
		{"the provider's template", provider.Spec{ID: "h3"}, "", ""},
		{"a placeholder", provider.Spec{ID: "h4", Command: []string{"{self}", "demo-home"}}, "", ""},
		{"not found", provider.Spec{ID: "h5", Command: []string{"no-such-program-here"}}, "", ""},
		{"a user of its own", provider.Spec{ID: "h6", Command: []string{closed},
			Options: json.RawMessage(`{"user":"nobody"}`)}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			program, what := e.ProgramClosed(tc.spec)
			if program != tc.program || what != tc.closed {
				t.Fatalf("ProgramClosed = %q, %q; want %q, %q (template %v)", program, what, tc.program, tc.closed, cfg.Command)
			}
		})
	}
}

// usersExec is, for a test run as root (others skip), an exec provider that
// gives each home a user of its own (users dynamic) on a data dir open to
// other users, with the config it was made from.
func usersExec(t *testing.T) (Config, *Provider) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root starts processes as other users")
	}
	dir := testDataDir(t)
	openToOthers(t, dir)
	cfg := testConfig(dir)
	cfg.Command = selfForOthers(t)
	cfg.Users = Users{Mode: UsersDynamic}
	return cfg, newExec(t, cfg)
}
