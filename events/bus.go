package events

import (
	"sync"
	"sync/atomic"
	"time"
)

// Event is one thing that happened to a home or an app. Fields that do not
// apply to its type are left zero.
type Event struct {
	// Seq numbers events in publication order, from 1.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	Home string    `json:"home,omitempty"`
	App  string    `json:"app,omitempty"`
	// Phase and Reason are an app's phase and reason code, or a wake's
	// outcome details.
	Phase  string `json:"phase,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Message is a sentence for people.
	Message string `json:"message,omitempty"`
	// Version and PriorVersion name versions in roll events.
	Version      string `json:"version,omitempty"`
	PriorVersion string `json:"prior_version,omitempty"`
	// Cause is why a wake ran: "cold" (started by this caller), "adopt"
	// (a home left running by an earlier gateway), "roll", "admin", and
	// the engine's CauseVerify, CauseWaited and CauseSchedule.
	Cause string `json:"cause,omitempty"`
	// Joined is how many callers joined a wake after the first.
	Joined int `json:"joined,omitempty"`
	// StopProven, on a failed wake or a roll incident that stopped the
	// home, says whether the provider verified it is down.
	StopProven *bool `json:"stop_proven,omitempty"`
	// Signalled is true on a wake's end when its home sent its ready
	// signal during the probe (which hastens an attempt, never passes it).
	Signalled bool `json:"signalled,omitempty"`
	// Durations of a wake, in milliseconds.
	TotalMS    float64 `json:"total_ms,omitempty"`
	ProviderMS float64 `json:"provider_ms,omitempty"`
	ProbeMS    float64 `json:"probe_ms,omitempty"`
}

// Bus delivers events to subscribers and keeps the most recent ones. A slow
// subscriber never blocks a publisher: events it cannot take are dropped
// for it and counted.
type Bus struct {
	mu      sync.Mutex
	seq     uint64
	recent  []Event // ring of the last cap(recent) events
	next    int
	subs    map[*Subscription]struct{}
	dropped atomic.Uint64
	// changed holds, per home id or app slug being watched, the channel
	// the next event or Touch about it closes (Changed).
	changed map[string]chan struct{}
}

// Subscription receives events on C until it is closed.
type Subscription struct {
	// C delivers events in order.
	C   chan Event
	bus *Bus
}

// NewBus returns a bus that remembers the last keep events.
func NewBus(keep int) *Bus {
	return &Bus{recent: make([]Event, 0, keep), subs: map[*Subscription]struct{}{}, changed: map[string]chan struct{}{}}
}

// Publish stamps e with a sequence number (and the time, if unset) and
// delivers it.
func (b *Bus) Publish(e Event) {
	if b == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if len(b.recent) < cap(b.recent) {
		b.recent = append(b.recent, e)
	} else if cap(b.recent) > 0 {
		b.recent[b.next] = e
		b.next = (b.next + 1) % cap(b.recent)
	}
	for s := range b.subs {
		select {
		case s.C <- e:
		default:
			b.dropped.Add(1)
		}
	}
	b.touchLocked(e.Home)
	b.touchLocked(e.App)
}

// Changed returns a channel closed at the next event about key (a home id
// or an app slug: an event whose Home or App is key) or the next Touch of
// key. Unlike a subscription it never drops: a watcher that calls Changed
// before it reads the state it watches cannot miss a change of it. Every
// watcher of a key shares one channel, forgotten once closed. A nil Bus
// returns nil (a channel that never fires).
func (b *Bus) Changed(key string) <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := b.changed[key]
	if ch == nil {
		ch = make(chan struct{})
		b.changed[key] = ch
	}
	return ch
}

// Touch wakes the watchers of key (Changed) without an event: a change of
// state the event stream does not report (a wake moving to its next
// phase, a wake settled before its event is published).
func (b *Bus) Touch(key string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.touchLocked(key)
}

func (b *Bus) touchLocked(key string) {
	if ch := b.changed[key]; key != "" && ch != nil {
		close(ch)
		delete(b.changed, key)
	}
}

// Recent returns the remembered events, oldest first.
func (b *Bus) Recent() []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Event, 0, len(b.recent))
	out = append(out, b.recent[b.next:]...)
	return append(out, b.recent[:b.next]...)
}

// Subscribe returns a subscription with a buffer of size events. Close it
// when done.
func (b *Bus) Subscribe(size int) *Subscription {
	s := &Subscription{C: make(chan Event, size), bus: b}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Close ends the subscription; C is not closed, so a reader selects on its
// own context.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
}

// Dropped returns how many deliveries were dropped for slow subscribers.
func (b *Bus) Dropped() uint64 { return b.dropped.Load() }
