package registry

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Records are stored as the JSON that encoding/json writes for them. A
// gateway with 100,000 homes reads every home record and every target
// claim at start, and encoding/json's reflection made that most of the
// start. Decode reads the two records read in bulk (Home and Claim)
// with a decoder written for the shape the store writes: one flat object
// of known keys, in any order, whose values are strings, integers, booleans
// and times (nested settings and lists are handed to encoding/json). The
// moment a record is anything else (an unknown or repeated key, an escape
// in a string, null, a float, a syntax error), the whole record goes to
// json.Unmarshal: every record decodes exactly as json.Unmarshal decodes
// it, errors included (TestDecodeRecordMatchesJSON, FuzzDecodeHome).

// Decode decodes the stored record raw into v, which is zero.
func Decode[T any](raw []byte, v *T) error {
	switch p := any(v).(type) {
	case *Home:
		if decodeHome(raw, p) {
			return nil
		}
		*p = Home{}
	case *Claim:
		if decodeClaim(raw, p) {
			return nil
		}
		*p = Claim{}
	}
	return json.Unmarshal(raw, v)
}

// decodeHome is the fast decoder of a home record; false means "ask
// encoding/json" (h may then hold part of the record).
func decodeHome(raw []byte, h *Home) bool {
	s := recScan{b: raw}
	var seen uint32
	ok := s.object(func(key []byte) bool {
		f, ok := s.homeField(key, h)
		if f == 0 || seen&f != 0 {
			return false
		}
		seen |= f
		return ok
	})
	if ok && h.Target == h.ID {
		// Most homes route at their id: one string serves both, which a
		// gateway holds in memory for each of its homes.
		h.Target = h.ID
	}
	return ok
}

// homeField reads the value of a home record's key into h, and returns
// the key's bit among the record's fields: 0 for a key the fast decoder
// does not know.
func (s *recScan) homeField(key []byte, h *Home) (f uint32, ok bool) {
	switch string(key) {
	case "id":
		f = 1 << 0
		h.ID, ok = s.str()
	case "target":
		f = 1 << 1
		h.Target, ok = s.str()
	case "provider":
		f = 1 << 2
		h.Provider, ok = common(s, "exec", "static", "fly", "http")
	case "provider_ref":
		f = 1 << 3
		h.ProviderRef, ok = s.str()
	case "endpoint":
		f = 1 << 4
		h.Endpoint, ok = s.str()
	case "relay_token_ref":
		f = 1 << 5
		h.RelayTokenRef, ok = s.str()
	case "version":
		f = 1 << 6
		h.Version, ok = common(s, "1")
	case "status":
		f = 1 << 7
		h.Status, ok = common(s, StatusSleeping, StatusRunning, StatusSuspended, StatusWaking,
			StatusSuspending, StatusRestoring, StatusFailed, StatusUnknown)
	case "verdict":
		f = 1 << 8
		h.Verdict, ok = common(s, VerdictHealthy, VerdictDegraded)
	case "reason":
		f = 1 << 9
		h.Reason, ok = s.str()
	case "want_running":
		f = 1 << 10
		h.WantRunning, ok = s.boolean()
	case "last_wake_at":
		f = 1 << 11
		h.LastWakeAt, ok = s.time()
	case "last_wake_latency":
		f = 1 << 12
		h.LastWakeLatency, ok = s.duration()
	case "last_ready_at":
		f = 1 << 13
		h.LastReadyAt, ok = s.time()
	case "dynamic":
		f = 1 << 14
		h.Dynamic, ok = s.boolean()
	case "idle_timeout":
		f = 1 << 15
		h.IdleTimeout, ok = s.duration()
	case "probe":
		f = 1 << 16
		h.Probe, ok = common(s, "auto", "ws", "http", "tcp")
	case "settings":
		f = 1 << 17
		ok = s.nested(&h.Settings)
	case "command":
		f = 1 << 18
		ok = s.nested(&h.Command)
	case "image":
		f = 1 << 19
		h.Image, ok = s.str()
	case "generation":
		f = 1 << 20
		h.Generation, ok = s.uint()
	case "owner":
		f = 1 << 21
		h.Owner, ok = s.str()
	case "runner":
		f = 1 << 22
		h.Runner, ok = s.str()
	case "runner_machine":
		f = 1 << 23
		h.RunnerMachine, ok = s.str()
	}
	return f, ok
}

// decodeClaim is the fast decoder of a claim record, like decodeHome.
func decodeClaim(raw []byte, c *Claim) bool {
	s := recScan{b: raw}
	var seen uint8
	return s.object(func(key []byte) bool {
		var f uint8
		var ok bool
		switch string(key) {
		case "target":
			f = 1
			c.Target, ok = s.str()
		case "home":
			f = 2
			c.Home, ok = s.str()
		case "generation":
			f = 4
			c.Generation, ok = s.uint()
		case "owner":
			f = 8
			c.Owner, ok = s.str()
		default:
			return false
		}
		if seen&f != 0 {
			return false
		}
		seen |= f
		return ok
	})
}

// recScan reads one JSON record from b; each method reports false for
// anything it does not read exactly as encoding/json would.
type recScan struct {
	b []byte
	i int
}

// object reads a whole object of b, calling field with each key (the
// scanner then stands at its value), and checks that nothing but space
// follows it.
func (s *recScan) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return s.end()
	}
	for {
		s.space()
		key, ok := s.raw()
		if !ok || !s.next(':') {
			return false
		}
		s.space()
		if !field(key) {
			return false
		}
		if s.next(',') {
			continue
		}
		if s.next('}') {
			return s.end()
		}
		return false
	}
}

func (s *recScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips space and then c, if c is next.
func (s *recScan) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *recScan) end() bool {
	s.space()
	return s.i == len(s.b)
}

// raw reads a string with no escapes and returns its bytes (inside b).
// Valid UTF-8 reads as itself in encoding/json; anything else is left to
// it.
func (s *recScan) raw() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start, ascii := s.i+1, true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			s.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string value. One with escapes (a provider's ref is JSON
// inside a string) is decoded by encoding/json, by itself.
func (s *recScan) str() (string, bool) {
	start := s.i
	if v, ok := s.raw(); ok {
		return string(v), true
	}
	s.i = start
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	if !s.skipString() {
		return "", false
	}
	var v string
	if json.Unmarshal(s.b[start:s.i], &v) != nil {
		return "", false
	}
	return v, true
}

// common reads a string that is usually one of known (statuses, provider
// names): those are not allocated again for every record.
func common[T ~string](s *recScan, known ...T) (T, bool) {
	v, ok := s.raw()
	if !ok {
		return "", false
	}
	for _, k := range known {
		if string(v) == string(k) {
			return k, true
		}
	}
	return T(v), true
}

func (s *recScan) boolean() (bool, bool) {
	switch {
	case s.literal("true"):
		return true, true
	case s.literal("false"):
		return false, true
	}
	return false, false
}

func (s *recScan) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// uint reads an unsigned integer in JSON's form (no leading zero, no
// fraction or exponent) that fits in 64 bits.
func (s *recScan) uint() (uint64, bool) {
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// duration reads a time.Duration, which encoding/json writes as its
// integer nanoseconds.
func (s *recScan) duration() (time.Duration, bool) {
	n, ok := s.int()
	return time.Duration(n), ok
}

// int reads a signed integer that fits in 64 bits.
func (s *recScan) int() (int64, bool) {
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	n, ok := s.uint()
	switch {
	case !ok:
		return 0, false
	case neg && n <= 1<<63:
		return int64(-n), true //nolint:gosec // -n of at most 1<<63 is the int64 wanted
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// zeroTime is how encoding/json writes the zero time.Time.
const zeroTime = `"0001-01-01T00:00:00Z"`

// time reads a time the way encoding/json does (time.Time's
// UnmarshalJSON), with the zero time, in every record never woken, read
// without parsing.
func (s *recScan) time() (time.Time, bool) {
	if s.literal(zeroTime) {
		return time.Time{}, true
	}
	start := s.i
	if _, ok := s.raw(); !ok {
		return time.Time{}, false
	}
	var t time.Time
	if err := t.UnmarshalJSON(s.b[start:s.i]); err != nil {
		return time.Time{}, false
	}
	return t, true
}

// nested hands the value at the scanner (an object or a list) to
// encoding/json, which decodes it into v as it would inside the record.
func (s *recScan) nested(v any) bool {
	start := s.i
	if !s.skip() {
		return false
	}
	return json.Unmarshal(s.b[start:s.i], v) == nil
}

// skip moves past one value: a string, or an object or list with what it
// holds. It does not check what it skips (json.Unmarshal does, in nested).
func (s *recScan) skip() bool {
	depth := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch c {
		case '"':
			if !s.skipString() {
				return false
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth <= 0 {
			// A scalar that is not a string (a number, null) ends at the
			// next delimiter; nested gets only objects, lists and strings
			// here, or json.Unmarshal refuses what it got.
			return depth == 0 && (c == '"' || c == '}' || c == ']')
		}
	}
	return false
}

// skipString moves past the rest of a string whose opening quote was read.
func (s *recScan) skipString() bool {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
			continue
		case '"':
			s.i++
			return true
		}
		s.i++
	}
	return false
}
