package stopping

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// held is a home under its lock, kept in memory.
type held struct {
	rec    registry.Home
	writes int
}

func (h *held) ID() string            { return "h1" }
func (h *held) Record() registry.Home { return h.rec }
func (h *held) Write(_ context.Context, change func(*registry.Home)) error {
	change(&h.rec)
	h.writes++
	return nil
}
func (h *held) Save(ctx context.Context, change func(*registry.Home)) error {
	return h.Write(ctx, change)
}

// barrier answers the handshake with q and err, and remembers what the
// record said when it was asked.
type barrier struct {
	q     Quiet
	err   error
	h     *held
	asked registry.Home
}

func (b *barrier) Quiesce(context.Context, string, time.Duration) (Quiet, error) {
	b.asked = b.h.rec
	return b.q, b.err
}

func running() *held {
	return &held{rec: registry.Home{ID: "h1", WantRunning: true, Status: registry.StatusRunning, Verdict: registry.VerdictHealthy}}
}

// The fleet is asked only once the record says stopping; an idle fleet
// lets the stop go on with the mark in place.
func TestQuiesceMarksBeforeAsking(t *testing.T) {
	h := running()
	b := &barrier{h: h}
	if err := Quiesce(context.Background(), h, b, time.Second, slog.Default(), Suspend); err != nil {
		t.Fatal(err)
	}
	if b.asked.Status != registry.StatusSuspending || b.asked.WantRunning || b.asked.Verdict != registry.VerdictNone {
		t.Fatalf("the fleet was asked while the record said %+v", b.asked)
	}
	if h.rec.Status != registry.StatusSuspending {
		t.Fatalf("after an idle answer the record says %s", h.rec.Status)
	}
}

// A live session, or a gateway that did not answer, backs the stop off:
// the record is what it was, and the error is fault.Busy.
func TestQuiesceBacksOff(t *testing.T) {
	for name, b := range map[string]*barrier{
		"session":     {q: Quiet{Sessions: 1}},
		"no answer":   {err: errors.New("gateway g2 did not answer")},
		"roll's user": {q: Quiet{Sessions: 2, Waiting: 1}},
	} {
		h := running()
		b.h = h
		m := Suspend
		if name == "roll's user" {
			m = Roll
		}
		err := Quiesce(context.Background(), h, b, time.Second, slog.Default(), m)
		if !fault.Is(err, fault.Busy) {
			t.Fatalf("%s: %v, want busy", name, err)
		}
		if h.rec.Status != registry.StatusRunning || !h.rec.WantRunning || h.rec.Verdict != registry.VerdictHealthy {
			t.Fatalf("%s: the record was not put back: %+v", name, h.rec)
		}
	}
}

// Callers waiting for a roll's own wake are not users of the process; a
// suspend counts every session.
func TestQuietUsers(t *testing.T) {
	q := Quiet{Sessions: 3, Waiting: 2}
	if q.Users(true) != 1 || q.Users(false) != 3 {
		t.Fatalf("users: roll %d, suspend %d", q.Users(true), q.Users(false))
	}
	if (Quiet{Sessions: 1, Waiting: 2}).Users(true) != 0 {
		t.Fatal("users below zero")
	}
}

// Without a fleet there is no one to ask and the stop goes on.
func TestQuiesceAlone(t *testing.T) {
	h := running()
	if err := Quiesce(context.Background(), h, nil, time.Second, slog.Default(), Shutdown); err != nil {
		t.Fatal(err)
	}
	if !h.rec.WantRunning || h.rec.Status != registry.StatusSuspending {
		t.Fatalf("a shutdown's mark keeps the desired state: %+v", h.rec)
	}
}

// A shutdown sorts every home by its outcome.
func TestShutdownAllSorts(t *testing.T) {
	outs := map[string]Outcome{"a": Stopped, "b": Kept, "c": Rest, "d": Stopped}
	stopped, kept, rest := ShutdownAll([]string{"a", "b", "c", "d"}, func(id string) Outcome { return outs[id] })
	slices.Sort(stopped)
	if !slices.Equal(stopped, []string{"a", "d"}) || !slices.Equal(kept, []string{"b"}) || !slices.Equal(rest, []string{"c"}) {
		t.Fatalf("stopped %v kept %v rest %v", stopped, kept, rest)
	}
}
