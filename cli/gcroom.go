package cli

import (
	"log/slog"
	"os"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/internal/gcroom"
)

// startGCRoom gives the collector server.gc_headroom of room over the
// live heap for the gateway's run (package gcroom), by default a share
// of the memory the gateway may use, and returns what ends it.
func startGCRoom(cfg *config.Config, log *slog.Logger) (stop func()) {
	var room uint64
	attrs := []any{}
	if !cfg.Server.GCHeadroomDefaulted() {
		room = uint64(max(cfg.Server.GCHeadroom, 0))
	} else {
		mem := gcroom.ReadMemory("/")
		room = gcroom.DefaultHeadroom(mem)
		attrs = append(attrs, "memory_bytes", mem.Bytes, "memory_source", mem.Source)
	}
	if v := os.Getenv("GOGC"); v != "" && room > 0 {
		log.Info("collector left to GOGC from the environment; server.gc_headroom is ignored", "GOGC", v)
		return func() {}
	}
	t := gcroom.Start(room)
	if t == nil {
		return func() {}
	}
	log.Debug("collector headroom over the live heap", append([]any{"gc_headroom_bytes", room}, attrs...)...)
	return t.Stop
}
