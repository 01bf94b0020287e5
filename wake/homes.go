package wake

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"

	"github.com/wakegate/wakegate/registry"
)

// homeSet is the engine's table of homes, built so that nothing the engine
// does per request or per idle tick costs in proportion to the number of
// registered homes:
//
//   - byID is read on every request under a read lock: one map hit. A
//     registration or removal is one insert or delete, not a copy of the
//     table. A plain map (rather than a sync.Map, whose every entry is an
//     object of its own) keeps 100,000 homes in a few large arrays that
//     the garbage collector marks quickly.
//   - awake holds the homes whose status is running: the only ones the idle
//     loop and eager rolls look at. A home joins and leaves it when its
//     status changes (setStatusLocked), never by a scan.
//   - tokens finds the home of a relay token (POST /_wakegate/ready) by the
//     token's SHA-256, so that the lookup neither walks every home nor
//     compares the token with any secret but the one it names.
//   - timed holds the homes with running hours, whose window starts the
//     idle loop looks for (schedule.go).
type homeSet struct {
	// idMu guards byID; it is taken last, after any other lock, and
	// nothing is called while it is held.
	idMu sync.RWMutex
	byID map[string]*home
	n    atomic.Int64

	mu     sync.Mutex
	awake  map[string]*home
	timed  map[string]*home               // homes with running hours (Spec.Schedule)
	tokens map[[sha256.Size]byte][]string // token digest -> ids (usually one)

	// visits counts homes the idle loop and eager rolls looked at: a test
	// reads it to prove that a tick costs the awake homes, not all homes.
	visits atomic.Int64
}

func newHomeSet() *homeSet {
	return &homeSet{byID: map[string]*home{}, awake: map[string]*home{}, timed: map[string]*home{}, tokens: map[[sha256.Size]byte][]string{}}
}

// get returns home id, or nil.
func (s *homeSet) get(id string) *home {
	s.idMu.RLock()
	h := s.byID[id]
	s.idMu.RUnlock()
	return h
}

// swap makes h the home of id (nil removes it) and returns the one it
// replaced, or nil.
func (s *homeSet) swap(id string, h *home) *home {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	prev := s.byID[id]
	if h == nil {
		delete(s.byID, id)
	} else {
		s.byID[id] = h
	}
	switch {
	case prev == nil && h != nil:
		s.n.Add(1)
	case prev != nil && h == nil:
		s.n.Add(-1)
	}
	return prev
}

// put makes h the home of its id, in place of any other. Locks are taken
// in one order everywhere: a home's mu, then the set's.
func (s *homeSet) put(h *home) {
	id := h.spec.ID
	s.mu.Lock()
	if prev := s.swap(id, h); prev != nil {
		s.dropTokenLocked(prev)
		delete(s.awake, id)
		delete(s.timed, id)
	}
	if h.spec.Schedule != nil {
		s.timed[id] = h
	}
	if tok := h.spec.RelayToken; tok != "" {
		d := sha256.Sum256([]byte(tok))
		s.tokens[d] = append(s.tokens[d], id)
	}
	s.mu.Unlock()
	// The status is read under h.mu: a wake adopted by Register may have
	// settled already, and any change from now on goes through
	// statusChanged itself.
	h.mu.Lock()
	s.statusChanged(h, h.status)
	h.mu.Unlock()
}

// remove forgets home id; it reports whether it was known.
func (s *homeSet) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.swap(id, nil)
	if prev == nil {
		return false
	}
	s.dropTokenLocked(prev)
	delete(s.awake, id)
	delete(s.timed, id)
	return true
}

func (s *homeSet) dropTokenLocked(h *home) {
	tok := h.spec.RelayToken
	if tok == "" {
		return
	}
	d := sha256.Sum256([]byte(tok))
	ids := s.tokens[d]
	for i, id := range ids {
		if id == h.spec.ID {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(s.tokens, d)
		return
	}
	s.tokens[d] = ids
}

// withToken returns the ids of the homes whose relay token has the digest
// of tok.
func (s *homeSet) withToken(tok string) []string {
	d := sha256.Sum256([]byte(tok))
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens[d]...)
}

// statusChanged keeps h's membership of the awake set in step with its
// status st; h.mu is held by the caller. A home that is no longer the one
// registered under its id (replaced, removed) is left alone.
func (s *homeSet) statusChanged(h *home, st registry.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get(h.spec.ID) != h {
		return
	}
	if st == registry.StatusRunning {
		s.awake[h.spec.ID] = h
	} else {
		delete(s.awake, h.spec.ID)
	}
}

// awakeHomes returns the homes whose status is running, counting them as
// visited.
func (s *homeSet) awakeHomes() []*home {
	s.mu.Lock()
	out := make([]*home, 0, len(s.awake))
	for _, h := range s.awake {
		out = append(out, h)
	}
	s.mu.Unlock()
	s.visits.Add(int64(len(out)))
	return out
}
