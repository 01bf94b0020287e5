package homeuser

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stormTable is a gateway's uid table on a registry of its own under a
// test folder, handing out first-last (far above any account of the
// machine).
func stormTable(t testing.TB, first, last uint32) (*Table, string) {
	t.Helper()
	dir := t.TempDir()
	machine := filepath.Join(dir, "machine")
	data := filepath.Join(dir, "data")
	for _, d := range []string{machine, filepath.Join(data, "exec")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	tab, err := openTable(filepath.Join(data, "exec", File), first, last)
	if err != nil {
		t.Fatal(err)
	}
	tab.registry, tab.dataDir = &uidRegistry{dir: machine}, data
	return tab, machine
}

// holdRegistry takes the registry's lock as another gateway of the
// machine would, and returns what releases it.
func holdRegistry(t *testing.T, machine string) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(machine, "uids.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { _ = f.Close() }
}

// awaitPending waits until a pass of tab runs and n homes wait for the
// next.
func awaitPending(t *testing.T, tab *Table, n int) {
	t.Helper()
	for range 2000 {
		tab.mu.Lock()
		got, running := 0, tab.allocating
		if tab.pending != nil {
			got = len(tab.pending.ids)
		}
		tab.mu.Unlock()
		if running && got == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%d homes do not wait together for the registry", n)
}

// uidsAt asks tab for the uid of each of ids at once, while the registry
// is held by another gateway until every one but the first waits, and
// returns the answers in the order of ids.
func uidsAt(t *testing.T, tab *Table, machine string, ids []string) ([]uint32, []error) {
	t.Helper()
	release := holdRegistry(t, machine)
	uids, errs := make([]uint32, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	// The first runs a pass, which waits for the lock; the others come
	// while it waits.
	wg.Go(func() { uids[0], errs[0] = tab.UIDFor(ids[0]) })
	awaitPending(t, tab, 0)
	for i := 1; i < len(ids); i++ {
		wg.Go(func() { uids[i], errs[i] = tab.UIDFor(ids[i]) })
	}
	awaitPending(t, tab, len(ids)-1)
	release()
	wg.Wait()
	return uids, errs
}

func TestHomesFirstStartingTogetherGetDistinctUIDsInOnePass(t *testing.T) {
	const first, homes = 2000000, 100
	tab, machine := stormTable(t, first, first+999)
	// Each home asks twice, as two wakes of one home could.
	var ids []string
	for i := range 2 * homes {
		ids = append(ids, fmt.Sprintf("h%03d", i%homes))
	}
	uids, errs := uidsAt(t, tab, machine, ids)
	byHome, owner := map[string]uint32{}, map[uint32]string{}
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("home %s: %v", id, errs[i])
		}
		if prev, ok := byHome[id]; ok && prev != uids[i] {
			t.Fatalf("home %s got uids %d and %d", id, prev, uids[i])
		}
		if o, ok := owner[uids[i]]; ok && o != id {
			t.Fatalf("uid %d went to homes %s and %s", uids[i], o, id)
		}
		if uids[i] < first || uids[i] > first+999 {
			t.Fatalf("home %s: uid %d outside the range", id, uids[i])
		}
		byHome[id], owner[uids[i]] = uids[i], id
	}
	if len(byHome) != homes {
		t.Fatalf("%d homes got uids, want %d", len(byHome), homes)
	}
	// Both records hold every home's uid.
	var users usersRecord
	readJSON(t, tab.path, &users)
	var reg registryRecord
	readJSON(t, filepath.Join(machine, "uids.json"), &reg)
	for id, uid := range byHome {
		if users.Homes[id] != uid {
			t.Errorf("%s gives home %s uid %d, want %d", File, id, users.Homes[id], uid)
		}
		if o := reg.UIDs[fmt.Sprint(uid)]; o.Home != id || o.DataDir != tab.dataDir {
			t.Errorf("the registry gives uid %d to %+v, want home %s", uid, o, id)
		}
	}
	// A home that has its uid keeps it.
	if uid, err := tab.UIDFor("h007"); err != nil || uid != byHome["h007"] {
		t.Fatalf("home h007 asked again: uid %d, %v; want %d", uid, err, byHome["h007"])
	}
}

func TestHomesBeyondTheRangeAreToldToWidenIt(t *testing.T) {
	const first = 2000000
	tab, machine := stormTable(t, first, first+9)
	var ids []string
	for i := range 15 {
		ids = append(ids, fmt.Sprintf("h%02d", i))
	}
	uids, errs := uidsAt(t, tab, machine, ids)
	served := map[uint32]bool{}
	refused := 0
	for i, err := range errs {
		if err != nil {
			refused++
			if !strings.Contains(err.Error(), "widen exec.users.range") || !strings.Contains(err.Error(), ids[i]) {
				t.Errorf("home %s: error %q does not name the home and the fix", ids[i], err)
			}
			continue
		}
		served[uids[i]] = true
	}
	if len(served) != 10 || refused != 5 {
		t.Fatalf("%d distinct uids handed out and %d homes refused; want the range's 10 and 5", len(served), refused)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestRegistryReadAgainAfterAnotherGatewayWrote: a gateway keeps the
// registry it wrote last and decodes the file only when it changed; a
// write by another gateway of the machine in between is read, and none of
// its uids is handed out again.
func TestRegistryReadAgainAfterAnotherGatewayWrote(t *testing.T) {
	const first, last = 3_900_000_000, 3_900_000_009
	mine, machine := stormTable(t, first, last)
	u1, err := mine.UIDFor("a")
	if err != nil {
		t.Fatal(err)
	}
	// Another gateway of the machine, on the same registry.
	other, _ := stormTable(t, first, last)
	other.registry = &uidRegistry{dir: machine}
	u2, err := other.UIDFor("b")
	if err != nil {
		t.Fatal(err)
	}
	u3, err := mine.UIDFor("c")
	if err != nil {
		t.Fatal(err)
	}
	if u1 == u2 || u2 == u3 || u1 == u3 {
		t.Fatalf("uids %d, %d (the other gateway's), %d: want three different ones", u1, u2, u3)
	}

	// Unchanged since this gateway wrote it, the file is not decoded
	// again: made unreadable in place (same size, inode and time), it
	// does not stop the next pass, while a registry that never read it
	// refuses it.
	path := filepath.Join(machine, "uids.json")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("x", int(st.Size()))), 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	fresh, _ := stormTable(t, first, last)
	fresh.registry = &uidRegistry{dir: machine}
	if _, err := fresh.UIDFor("e"); err == nil || !strings.Contains(err.Error(), "not readable") {
		t.Fatalf("a gateway reading the damaged file: %v, want it refused", err)
	}
	if _, err := mine.UIDFor("d"); err != nil {
		t.Fatalf("a pass on the registry this gateway wrote last: %v", err)
	}
}

// TestEncodeRegistryReadsBack: the hand-made uids.json decodes, with
// encoding/json, to the registry it was made from, whatever the paths and
// ids hold; an empty registry too.
func TestEncodeRegistryReadsBack(t *testing.T) {
	odd := []string{`/srv/a "quoted" dir`, `C:\back\slash`, "new\nline\ttab\x01\x1f", "é ü 日本", "</script>&", "bad \xff utf8", ""}
	uids := map[uint32]uidOwner{}
	for i, s := range odd {
		uids[uint32(61000+i)] = uidOwner{DataDir: s, Home: odd[len(odd)-1-i]}
	}
	for _, reg := range []map[uint32]uidOwner{uids, {}} {
		var rec registryRecord
		if err := json.Unmarshal(encodeRegistry(reg), &rec); err != nil {
			t.Fatalf("%s\ndoes not decode: %v", encodeRegistry(reg), err)
		}
		if len(rec.UIDs) != len(reg) {
			t.Fatalf("decoded %d entries, want %d", len(rec.UIDs), len(reg))
		}
		for uid, o := range reg {
			want := uidOwner{DataDir: strings.ToValidUTF8(o.DataDir, "\uFFFD"), Home: strings.ToValidUTF8(o.Home, "\uFFFD")}
			if got := rec.UIDs[fmt.Sprint(uid)]; got != want {
				t.Errorf("uid %d: decoded %+v, want %+v", uid, got, want)
			}
		}
	}
}

// TestEncodeUsersReadsBack: the hand-made users file decodes, with
// encoding/json, to the homes it was made from, plain names and odd ones
// alike, and to the same record as encoding/json's own form of it.
func TestEncodeUsersReadsBack(t *testing.T) {
	odd := []string{"web-1", "a", `"quoted"`, `back\slash`, "tab\there\x01", "é 日本", "</script>&", "bad \xff utf8", ""}
	homes := map[string]uint32{}
	for i, id := range odd {
		homes[id] = uint32(61184 + i)
	}
	for _, in := range []map[string]uint32{homes, {}, {"solo": 65519}} {
		var got, want usersRecord
		enc := encodeUsers(in, slices.Sorted(maps.Keys(in)))
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("%s\ndoes not decode: %v", enc, err)
		}
		std, err := json.Marshal(usersRecord{Homes: in})
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if len(got.Homes) != len(in) || !maps.Equal(got.Homes, want.Homes) {
			t.Errorf("decoded %v, encoding/json's form decodes to %v", got.Homes, want.Homes)
		}
	}
}

// TestUsersFileFollowsThePasses: after passes that add homes in any
// order, one of them failing to write the users file, the file holds
// exactly the homes the table gives uids, in the order of their names.
func TestUsersFileFollowsThePasses(t *testing.T) {
	tab, _ := stormTable(t, 3_000_000, 3_000_100)
	for _, id := range []string{"m", "c", "x", "a"} {
		if _, err := tab.UIDFor(id); err != nil {
			t.Fatal(err)
		}
	}
	// A folder where the users file's temporary copy goes: the next
	// pass cannot write the file, and its home gets no uid.
	blocker := tab.path + ".tmp"
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.UIDFor("b"); err == nil {
		t.Fatal("a pass whose users file cannot be written gave its home a uid")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"z", "b", "d", "c"} {
		if _, err := tab.UIDFor(id); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(tab.path)
	if err != nil {
		t.Fatal(err)
	}
	var rec usersRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("%s\ndoes not decode: %v", raw, err)
	}
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if !maps.Equal(rec.Homes, tab.homes) || len(rec.Homes) != 7 {
		t.Fatalf("users file %v, table %v; want the same 7 homes", rec.Homes, tab.homes)
	}
	var order []string
	for _, line := range strings.Split(string(raw), "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && name != `"homes"` {
			order = append(order, strings.Trim(name, `"`))
		}
	}
	if want := []string{"a", "b", "c", "d", "m", "x", "z"}; !slices.Equal(order, want) {
		t.Errorf("users file lists %v, want %v", order, want)
	}
}

// TestLiveUIDSkippedAndLookShared: a uid a process of the machine runs as
// is not handed out; passes within lookTTL of each other share one look
// at the machine's processes, and a pass after it looks again, so the
// uid is handed out once its process has gone.
func TestLiveUIDSkippedAndLookShared(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a process as another uid needs root")
	}
	const first = 2100000
	tab, _ := stormTable(t, first, first+99)
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: first, Gid: first}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for !liveUIDs()[first] {
		time.Sleep(time.Millisecond) // until the child runs as first
	}
	uid, err := tab.UIDFor("a")
	if err != nil || uid != first+1 {
		t.Fatalf("home a: uid %d, %v; want %d (%d runs a process)", uid, err, first+1, first)
	}
	looked := tab.registry.lookedAt
	for _, id := range []string{"b", "c"} {
		if _, err := tab.UIDFor(id); err != nil {
			t.Fatal(err)
		}
	}
	if at := tab.registry.lookedAt; !at.Equal(looked) && at.Sub(looked) < lookTTL {
		t.Fatalf("passes %v apart looked at the machine twice", at.Sub(looked))
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	time.Sleep(lookTTL + 50*time.Millisecond)
	if uid, err := tab.UIDFor("d"); err != nil || uid != first {
		t.Fatalf("home d, after the process of %d ended: uid %d, %v; want %d", first, uid, err, first)
	}
	if !tab.registry.lookedAt.After(looked) {
		t.Fatal("a pass after lookTTL did not look again")
	}
}

// BenchmarkFirstStartPass is one home's first start in a storm of them,
// for its uid: a pass of the registry and the users file when 1,000
// homes of the gateway already hold uids (as each pass of the storm's
// later half finds).
func BenchmarkFirstStartPass(b *testing.B) {
	tab, _ := stormTable(b, 3_000_000, 3_100_000)
	for i := range 1000 {
		if _, err := tab.UIDFor(fmt.Sprintf("held-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := tab.UIDFor(fmt.Sprintf("new-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
}
