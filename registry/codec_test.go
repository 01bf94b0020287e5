package registry

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"time"
)

// codecHomes are records as the store writes them, from the smallest to
// one with every field set.
func codecHomes() []Home {
	woke := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	return []Home{
		{ID: "h1", Target: "h1", Provider: "exec", Status: StatusSleeping},
		{ID: "h000042", Target: "alice", Provider: "exec", Version: "1", Status: StatusSleeping, Dynamic: true,
			IdleTimeout: time.Hour, Probe: "http", Generation: 3, Owner: "gw-1"},
		{ID: "ü-home", Target: "ü", Provider: "fly", ProviderRef: `{"pid":12,"exe":"/usr/bin/x"}`,
			Endpoint: "http://127.0.0.1:40123", RelayTokenRef: "env:TOKEN", Version: "v2.3", Status: StatusFailed,
			Verdict: VerdictDegraded, Reason: "gave up after 3 restarts\n\"quoted\"", WantRunning: true,
			LastWakeAt: woke, LastWakeLatency: 1234 * time.Millisecond, LastReadyAt: woke.Add(time.Second).In(time.FixedZone("x", 3600)),
			Dynamic: true, IdleTimeout: -1, Probe: "ws",
			Settings: HomeSettings{Command: []string{"run", "{port}"}, Env: []string{"A=1"}, WorkingDir: "/srv",
				ProbePath: "/health", ProbeStatuses: []int{200, 204}, ProbeSettle: Duration(time.Second),
				ReadyTimeout: Duration(time.Minute), Options: json.RawMessage(`{"region":"ams"}`)},
			Command: []string{"old", "{port}"}, Image: "registry/img:1", Generation: 1<<64 - 1, Owner: "gw-2",
			Runner: "gw-1", RunnerMachine: "host/3b2f"},
	}
}

// TestDecodeRecordMatchesJSON decodes records as the store writes them,
// and records the fast decoder leaves to encoding/json, and checks that
// every one decodes exactly as json.Unmarshal decodes it.
func TestDecodeRecordMatchesJSON(t *testing.T) {
	var inputs []string
	for _, h := range codecHomes() {
		raw, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(raw))
	}
	inputs = append(inputs,
		`{}`, ` { "id" : "a" , "target":"b" } `,
		`{"ID":"upper case key"}`, `{"id":"a","id":"b"}`, `{"id":"\u0061"}`, `{"id":null}`,
		`{"generation":1.5}`, `{"generation":-1}`, `{"generation":18446744073709551616}`, `{"generation":01}`,
		`{"idle_timeout":-9223372036854775808}`, `{"idle_timeout":9223372036854775808}`, `{"idle_timeout":1e3}`,
		`{"last_wake_at":"2026-01-02T03:04:05.5+02:00"}`, `{"last_wake_at":"yesterday"}`, `{"last_wake_at":null}`,
		`{"settings":{"command":["a"]},"command":["b","c"]}`, `{"settings":"x"}`, `{"settings":{"probe_settle":"2s"}}`,
		`{"settings":{"command":["a\"]}"]}}`, `{"command":[1]}`, `{"want_running":tru}`, `{"dynamic":true}x`,
		`{"id":"a","runner":"gw-1","runner_machine":"host/boot"}`, `{"runner":1}`,
		`{"id":"a",}`, `{"id":"a"`, `{"unknown":1}`, "{\"id\":\"\xff\"}", "{\"id\":\"tab\there\"}", `[]`, ``, `null`,
	)
	for _, in := range inputs {
		var want, got Home
		werr := json.Unmarshal([]byte(in), &want)
		gerr := Decode([]byte(in), &got)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", in, got, gerr, want, werr)
		}
	}
	for _, in := range []string{`{"target":"t","home":"h","generation":7,"owner":"o"}`, `{"target":"t","Home":"h"}`,
		`{"target":"t","target":"u"}`, `{"generation":"7"}`} {
		var want, got Claim
		werr := json.Unmarshal([]byte(in), &want)
		gerr := Decode([]byte(in), &got)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Errorf("claim %s: got %+v, %v; want %+v, %v", in, got, gerr, want, werr)
		}
	}
}

// TestDecodeRecordTakesTheFastPath checks that the records the store
// writes are read by the fast decoder, not handed to encoding/json: the
// start of a large gateway depends on it.
func TestDecodeRecordTakesTheFastPath(t *testing.T) {
	for _, h := range codecHomes() {
		raw, _ := json.Marshal(h)
		var got Home
		if !decodeHome(raw, &got) {
			t.Errorf("record %s went to encoding/json", raw)
		}
	}
	raw, _ := json.Marshal(Claim{Target: "t", Home: "h", Generation: 2, Owner: "o"})
	var c Claim
	if !decodeClaim(raw, &c) {
		t.Errorf("claim %s went to encoding/json", raw)
	}
}

// TestDecodeRecordMutations mutates records as the store writes them
// (bytes replaced, dropped and added, from JSON's punctuation) and checks
// that each decodes as json.Unmarshal decodes it: a deterministic share
// of what FuzzDecodeHome explores.
func TestDecodeRecordMutations(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var seeds [][]byte
	for _, h := range codecHomes() {
		raw, _ := json.Marshal(h)
		seeds = append(seeds, raw)
	}
	alpha := []byte(`{}[]",:\ 0123456789-.eEtruefalsn` + "\xff\x01")
	for i := 0; i < 20000; i++ {
		in := append([]byte(nil), seeds[r.Intn(len(seeds))]...)
		for k := r.Intn(4) + 1; k > 0; k-- {
			p := r.Intn(len(in))
			switch r.Intn(3) {
			case 0:
				in[p] = alpha[r.Intn(len(alpha))]
			case 1:
				in = append(in[:p], in[p+1:]...)
			case 2:
				in = append(in[:p], append([]byte{alpha[r.Intn(len(alpha))]}, in[p:]...)...)
			}
		}
		decodesAsJSON(t, in)
	}
}

// decodesAsJSON fails t unless in decodes as json.Unmarshal decodes it:
// the same error or none, and the same record.
func decodesAsJSON(t *testing.T, in []byte) {
	t.Helper()
	var want, got Home
	werr := json.Unmarshal(in, &want)
	gerr := Decode(in, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: error %v, encoding/json %v", in, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %+v\nwant %+v", in, got, want)
	}
}

// FuzzDecodeHome checks that any input decodes as json.Unmarshal decodes
// it, error or not.
func FuzzDecodeHome(f *testing.F) {
	for _, h := range codecHomes() {
		raw, _ := json.Marshal(h)
		f.Add(raw)
	}
	f.Add([]byte(`{"id":"a","settings":{"env":["x"]},"generation":0}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		decodesAsJSON(t, in)
	})
}

// BenchmarkDecodeHome compares the fast decoder with encoding/json on a
// record of a home registered through the admin API.
func BenchmarkDecodeHome(b *testing.B) {
	raw, _ := json.Marshal(codecHomes()[1])
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var h Home
			if err := Decode(raw, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var h Home
			if err := json.Unmarshal(raw, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
