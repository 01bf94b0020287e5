package wakerecord

import (
	"strconv"
	"testing"
)

// TestWakeHistoryRing keeps the last HistorySize wakes, newest first.
func TestWakeHistoryRing(t *testing.T) {
	for _, n := range []int{0, 1, HistorySize - 1, HistorySize, HistorySize + 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var h History
			for i := range n {
				h.Add(Record{Joined: i})
			}
			got := h.List()
			if want := min(n, HistorySize); len(got) != want {
				t.Fatalf("%d records, want %d", len(got), want)
			}
			for i, r := range got {
				if r.Joined != n-1-i {
					t.Fatalf("record %d is wake %d, want %d (newest first)", i, r.Joined, n-1-i)
				}
			}
		})
	}
}
