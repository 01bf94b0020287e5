//go:build !linux

package edge

import "net"

// listenConfig is Go's default: keep-alive set on each accepted socket.
func listenConfig() *net.ListenConfig { return &net.ListenConfig{} }
