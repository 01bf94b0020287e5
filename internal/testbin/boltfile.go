package testbin

import (
	"encoding/binary"
	"io"
	"os"
	"testing"
)

// BoltTxID returns the id of the last transaction committed to the bbolt
// file at path, read from its two meta pages (the newer of the two is the
// file's state). It reads the file directly, so it works while a gateway
// holds the file's lock: each commit raises the id by one, so an id that
// did not change means that nothing was written.
func BoltTxID(t testing.TB, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("bbolt txid: %v", err)
	}
	defer f.Close()
	// A page: a 16-byte header, then the meta: magic, version, page size
	// and flags (4 bytes each), the root bucket (16), the freelist and
	// high-water page ids (8 each), then the txid (8).
	const meta, pageSizeAt, txidAt = 16, 8, 48
	head := make([]byte, meta+txidAt+8)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatalf("bbolt txid: read the first meta page of %s: %v", path, err)
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[meta+pageSizeAt:]))
	id := binary.LittleEndian.Uint64(head[meta+txidAt:])
	second := make([]byte, len(head))
	if _, err := f.ReadAt(second, pageSize); err != nil {
		t.Fatalf("bbolt txid: read the second meta page of %s: %v", path, err)
	}
	return max(id, binary.LittleEndian.Uint64(second[meta+txidAt:]))
}
