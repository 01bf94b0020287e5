package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses a log level name.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
}

// NewLogger returns the logger the config asks for, writing to w.
func NewLogger(c LogConfig, w io.Writer) *slog.Logger {
	lvl, _ := ParseLevel(c.Level) // validated at load
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
