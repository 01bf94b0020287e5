package gateway

import (
	"io"
	"log/slog"

	"github.com/wakegate/wakegate/config"
)

// NewLogger returns the logger the config asks for, writing to w.
func NewLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	lvl, _ := config.ParseLevel(c.Level) // validated at load
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
