//go:build !linux

package h1serve

import "io"

// floorSplice has no kernel copy here: the body is copied.
func (c *conn) floorSplice(io.Reader) (int64, bool, error) { return 0, false, nil }
