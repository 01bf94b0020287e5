package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/provider"
	execprov "github.com/wakegate/wakegate/provider/exec"
)

// nopFactory builds a Static; its CheckHome wants options {"zone": "a"|"b"}.
func nopFactory(needs bool) provider.Factory {
	return provider.Factory{
		NeedsSection: needs,
		New:          func(provider.Env, provider.Section) (provider.Provider, error) { return &provider.Static{}, nil },
		CheckHome: func(s provider.Settings) []provider.Problem {
			var o struct {
				Zone string `json:"zone"`
			}
			if err := provider.DecodeOptions(s.Options, &o); err != nil {
				return []provider.Problem{provider.Problemf("options", "%v", err)}
			}
			if o.Zone != "a" && o.Zone != "b" {
				return []provider.Problem{provider.Problemf("options.zone", "want a or b, got %q", o.Zone)}
			}
			return nil
		},
	}
}

func TestRegistryRegister(t *testing.T) {
	r := provider.NewRegistry()
	if err := r.Register("zoned", nopFactory(false)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    provider.Factory
		want string
	}{
		{"zoned", nopFactory(false), "registered twice"},
		{"Bad Name", nopFactory(false), "bad name"},
		{"", nopFactory(false), "bad name"},
		{"nonew", provider.Factory{}, "Factory.New is required"},
	} {
		if err := r.Register(tc.name, tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%q): %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if got := r.Names(); len(got) != 1 || got[0] != "zoned" {
		t.Errorf("Names = %v", got)
	}
}

// TestRegistryCheckHome walks the common rules and a provider's own, as
// the config file and the admin API both apply them.
func TestRegistryCheckHome(t *testing.T) {
	r := provider.NewRegistry()
	r.MustRegister("zoned", nopFactory(false))
	r.MustRegister("remote", nopFactory(true))
	r.MustRegister("plain", provider.Factory{New: nopFactory(false).New})
	r.MustRegister("exec", execprov.Factory(execprov.Config{Command: []string{"true"}}))
	r.MustRegister("static", provider.StaticFactory())
	avail := r.Available(func(string) bool { return false })
	if strings.Join(avail, ",") != "exec,plain,static,zoned" {
		t.Fatalf("Available = %v", avail)
	}
	opts := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name     string
		provider string
		s        provider.Settings
		fields   string // the fields of the problems, comma-separated
	}{
		{"good zoned", "zoned", provider.Settings{Options: opts(`{"zone":"a"}`)}, ""},
		{"bad zone", "zoned", provider.Settings{Options: opts(`{"zone":"c"}`)}, "options.zone"},
		{"unknown option", "zoned", provider.Settings{Options: opts(`{"zone":"a","x":1}`)}, "options"},
		{"options not an object", "zoned", provider.Settings{Options: opts(`[1]`)}, "options"},
		{"unknown provider", "nope", provider.Settings{}, "provider"},
		{"provider without its section", "remote", provider.Settings{Options: opts(`{"zone":"a"}`)}, "provider"},
		{"no options taken", "plain", provider.Settings{Options: opts(`{"a":1}`)}, "options"},
		{"empty options are none", "plain", provider.Settings{Options: opts(`{}`)}, ""},
		{"empty command", "plain", provider.Settings{Command: []string{""}}, "command"},
		{"bad env", "plain", provider.Settings{Env: []string{"A=1", "nokey", "=v"}}, "env[1],env[2]"},
		{"exec command, env, dir", "exec", provider.Settings{Command: []string{"sh"}, Env: []string{"A=1"}, Dir: "/tmp"}, ""},
		{"exec relative dir", "exec", provider.Settings{Dir: "rel"}, "working_dir"},
		{"exec options", "exec", provider.Settings{Options: opts(`{"a":1}`)}, "options"},
		{"static endpoint", "static", provider.Settings{Options: opts(`{"endpoint":"http://127.0.0.1:1"}`)}, ""},
		{"static without endpoint", "static", provider.Settings{}, "options.endpoint"},
		{"static with a command", "static", provider.Settings{Command: []string{"sh"},
			Options: opts(`{"endpoint":"https://x"}`)}, "command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range r.CheckHome(tc.provider, avail, tc.s) {
				if p.Msg == "" {
					t.Errorf("problem at %s without a message", p.Field)
				}
				got = append(got, p.Field)
			}
			if strings.Join(got, ",") != tc.fields {
				t.Errorf("problems at %v, want %q (%v)", got, tc.fields, r.CheckHome(tc.provider, avail, tc.s))
			}
		})
	}
}

// section is a Section that decodes from JSON.
type section string

func (s section) Decode(v any) error { return json.Unmarshal([]byte(s), v) }

func TestRegistryBuild(t *testing.T) {
	r := provider.NewRegistry()
	var got struct{ URL string }
	var gotEnv provider.Env
	r.MustRegister("sect", provider.Factory{
		NeedsSection: true,
		CheckSection: func(sec provider.Section) []provider.Problem {
			if err := sec.Decode(&got); err != nil || got.URL == "" {
				return []provider.Problem{provider.Problemf("url", "required")}
			}
			return nil
		},
		New: func(env provider.Env, sec provider.Section) (provider.Provider, error) {
			gotEnv = env
			if err := sec.Decode(&got); err != nil {
				return nil, err
			}
			return &provider.Static{}, nil
		},
	})
	if ps := r.CheckSection("sect", section(`{}`)); len(ps) != 1 || ps[0].Field != "url" {
		t.Errorf("CheckSection of an empty section: %v", ps)
	}
	if ps := r.CheckSection("nope", section(`{}`)); len(ps) != 1 {
		t.Errorf("CheckSection of an unknown provider: %v", ps)
	}
	if _, err := r.Build("sect", provider.Env{DataDir: "/d"}, section(`{"URL":"u"}`)); err != nil {
		t.Fatal(err)
	}
	if got.URL != "u" || gotEnv.DataDir != "/d" || gotEnv.Log == nil || gotEnv.OnChange == nil {
		t.Errorf("New saw section %+v and env %+v", got, gotEnv)
	}
	if _, err := r.Build("sect", provider.Env{}, section(`{`)); err == nil || !strings.HasPrefix(err.Error(), "provider sect: ") {
		t.Errorf("Build with a bad section: %v", err)
	}
}

func TestError(t *testing.T) {
	cause := errors.New("429 from the API")
	err := fmt.Errorf("fly wake h1: %w", &provider.Error{Op: "wake", Reason: provider.ReasonRateLimited,
		RetryAfter: 7 * time.Second, Err: cause})
	pe, ok := provider.AsError(err)
	if !ok || pe.RetryAfter != 7*time.Second || !errors.Is(err, cause) {
		t.Fatalf("AsError = %+v, %v", pe, ok)
	}
	if want := "fly wake h1: wake: rate_limited: 429 from the API"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

// TestStaticOptions: a static home's endpoint comes from its options.
func TestStaticOptions(t *testing.T) {
	s := &provider.Static{Endpoints: map[string]string{"old": "http://127.0.0.1:2"}}
	r, err := s.Wake(context.Background(), provider.Spec{ID: "h", Options: json.RawMessage(`{"endpoint":"http://127.0.0.1:1"}`)})
	if err != nil || r.Endpoint != "http://127.0.0.1:1" {
		t.Errorf("Wake with options = %+v, %v", r, err)
	}
	if r, err := s.Wake(context.Background(), provider.Spec{ID: "old"}); err != nil || r.Endpoint != "http://127.0.0.1:2" {
		t.Errorf("Wake from Endpoints = %+v, %v", r, err)
	}
	if _, err := s.Wake(context.Background(), provider.Spec{ID: "none"}); err == nil {
		t.Error("Wake of a home with no endpoint succeeded")
	}
}

func TestNormalizeState(t *testing.T) {
	for in, want := range map[string]provider.State{
		"started": provider.StateRunning, "Paused": provider.StateSuspended, "standby": provider.StateSuspended,
		"suspended": provider.StateSuspended, "stopped": provider.StateStopped, "destroyed": provider.StateStopped,
		"crashed": provider.StateFailed, "replacing": provider.StateUnknown, "": provider.StateUnknown,
	} {
		if got := provider.NormalizeState(in); got != want {
			t.Errorf("NormalizeState(%q) = %s, want %s", in, got, want)
		}
	}
}
