package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// restoreConfig is the config of a gateway whose data lives in dir, with
// one home of its own (cfg) and an exec provider that never runs.
func restoreConfig(tb testing.TB, dir string) *config.Config {
	tb.Helper()
	return oneHomeConfig(tb, "restore.yaml", dir, "")
}

// oneHomeConfig is the config file name of a gateway whose data lives in
// dir, with one home of its own (cfg at target cfgt), an exec provider
// that never runs and the YAML extra appended at the top level.
func oneHomeConfig(tb testing.TB, name, dir, extra string) *config.Config {
	tb.Helper()
	text := fmt.Sprintf(`listen: "127.0.0.1:0"
data_dir: %q
admin:
  listen: ""
exec:
  command: ["/bin/true", "{port}"]
homes:
  - id: cfg
    target: cfgt
%s`, dir, extra)
	cfg, err := all.Load(name, []byte(text))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return cfg
}

// seedStoredHomes fills the store under dir with n homes registered
// through the admin API (h000000..): one is registered through the
// registrar, the others are copies of its stored record and claim, seeded
// in one transaction.
func seedStoredHomes(tb testing.TB, dir string, n int) {
	tb.Helper()
	ctx := context.Background()
	g, err := New(ctx, restoreConfig(tb, dir), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	first := "h000000"
	if _, _, err := g.adminBackend().PutHome(ctx, first, admin.HomeRequest{Provider: "exec", Probe: registry.HomeProbe{Kind: "http"}}, 0); err != nil {
		tb.Fatal(err)
	}
	rec, err := g.store.GetHome(ctx, first)
	if err != nil {
		tb.Fatal(err)
	}
	claim, err := g.store.GetClaim(ctx, rec.Target)
	if err != nil {
		tb.Fatal(err)
	}
	g.Close()
	b, err := bolt.Open(filepath.Join(dir, control.StoreFile), bolt.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	homes, claims := copiesOf(rec, claim, n-1)
	if err := b.SeedHomes(ctx, homes, claims); err != nil {
		tb.Fatal(err)
	}
}

// copiesOf returns n copies of a home's record and claim, as homes
// h000001.. at their own ids.
func copiesOf(rec registry.Home, claim registry.Claim, n int) ([]registry.Home, []registry.Claim) {
	homes := make([]registry.Home, 0, n)
	claims := make([]registry.Claim, 0, n)
	for i := 1; i <= n; i++ {
		h, c := rec, claim
		h.ID = fmt.Sprintf("h%06d", i)
		h.Target, c.Target, c.Home = h.ID, h.ID, h.ID
		homes, claims = append(homes, h), append(claims, c)
	}
	return homes, claims
}

// BenchmarkRestore times New on a store holding 100,000 homes registered
// through the admin API (WAKEGATE_RESTORE_HOMES overrides the count): the
// start of a large gateway, up to serving. For a profile:
//
//	go test -run '^$' -bench Restore -benchtime 3x -cpuprofile cpu.out ./gateway/
func BenchmarkRestore(b *testing.B) {
	n := 100000
	if s := os.Getenv("WAKEGATE_RESTORE_HOMES"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			b.Fatalf("WAKEGATE_RESTORE_HOMES: %v", err)
		}
	}
	dir := filepath.Join(b.TempDir(), "data")
	seedStoredHomes(b, dir, n)
	cfg := restoreConfig(b, dir)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		g, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatalf("New: %v", err)
		}
		if got := g.homeCount(); got != n+1 {
			b.Fatalf("%d homes restored, want %d", got, n+1)
		}
		b.StopTimer()
		g.Close()
		b.StartTimer()
	}
}
