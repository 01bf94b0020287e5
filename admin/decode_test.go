package admin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// TestDecodeStrict walks what the one body decoder refuses, each with the
// key or field it names, and what it accepts. Every refusal is a
// fault.Invalid (400), except a body over the size limit (413).
func TestDecodeStrict(t *testing.T) {
	big := `{"target":"` + strings.Repeat("x", maxBody) + `"}`
	deep := `{"health":{"path":` + strings.Repeat(`[`, maxDepth) + strings.Repeat(`]`, maxDepth) + `}}`
	cases := []struct {
		name  string
		body  string
		into  func() any
		field string     // "" when accepted
		kind  fault.Kind // when refused
	}{
		{"object", `{"target":"x1","idle_timeout":"5m"}`, home, "", 0},
		{"empty object", `{}`, home, "", 0},
		{"whitespace around", " \n\t{\"target\":\"x1\"}\r\n ", home, "", 0},
		{"null field value", `{"idle_timeout":null}`, home, "", 0},
		{"trailing object", `{"target":"x1"} {"evil":1}`, home, "body", fault.Invalid},
		{"trailing garbage", `{"target":"x1"}x`, home, "body", fault.Invalid},
		{"trailing object, no space", `{"target":"x1"}{}`, home, "body", fault.Invalid},
		{"two nulls", `{} null`, home, "body", fault.Invalid},
		{"key in another case", `{"Target":"x1"}`, home, "Target", fault.Invalid},
		{"key in upper case", `{"TTL":"1m"}`, lease, "TTL", fault.Invalid},
		{"key folded by Unicode", `{"ſtrip_prefix":true,"upstream":"http://a"}`, app, "ſtrip_prefix", fault.Invalid},
		{"nested key in another case", `{"upstream":"http://a","health":{"Path":"/x"}}`, app, "health.Path", fault.Invalid},
		{"unknown key", `{"colour":"blue"}`, home, "colour", fault.Invalid},
		{"nested unknown key", `{"health":{"colour":"blue"}}`, app, "health.colour", fault.Invalid},
		{"duplicate key", `{"target":"x1","target":"x2"}`, home, "target", fault.Invalid},
		{"duplicate key, same value", `{"version":"1","version":"1"}`, target, "version", fault.Invalid},
		{"duplicate nested key", `{"health":{"path":"/a","path":"/b"}}`, app, "health.path", fault.Invalid},
		{"duplicate key after case refusal", `{"target":"a","Target":"b"}`, home, "Target", fault.Invalid},
		{"null body", `null`, home, "body", fault.Invalid},
		{"empty body", ``, home, "body", fault.Invalid},
		{"blank body", "  \n", home, "body", fault.Invalid},
		{"array body", `[{"target":"x1"}]`, home, "body", fault.Invalid},
		{"string body", `"x1"`, home, "body", fault.Invalid},
		{"number body", `1`, home, "body", fault.Invalid},
		{"truncated", `{"target":"x1"`, home, "body", fault.Invalid},
		{"bad syntax", `{"target" "x1"}`, home, "body", fault.Invalid},
		{"wrong type", `{"target":1}`, home, "target", fault.Invalid},
		{"wrong element type", `{"version":"2","command":["a",1]}`, target, "command", fault.Invalid},
		{"bad duration", `{"min_refresh":"soon"}`, app, "min_refresh", fault.Invalid},
		{"too deep", deep, app, "health", fault.Invalid},
		{"too large", big, home, "body", fault.TooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := BodyOf([]byte(tc.body)).Decode(tc.into())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := fault.As(err)
			if !ok {
				t.Fatalf("accepted or untyped error %v; want a refusal naming %q", err, tc.field)
			}
			if fe.Kind != tc.kind || fe.Field != tc.field {
				t.Fatalf("kind %v field %q (%v); want kind %v field %q", fe.Kind, fe.Field, err, tc.kind, tc.field)
			}
			if !strings.Contains(fe.Message, tc.field) {
				t.Errorf("message %q does not name %q", fe.Message, tc.field)
			}
		})
	}
}

func home() any   { return &HomeRequest{} }
func lease() any  { return &LeaseRequest{} }
func target() any { return &TargetRequest{} }
func app() any    { return &registry.App{} }

// FuzzDecode checks the decoder on any input: it never panics; a refusal
// is a fault naming a field; what it accepts is one JSON object that the
// standard decoder reads the same way, and that is accepted again once
// encoded.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"target":"x1"}`, `{"target":"x1"} {"evil":1}`, `{"Target":"x1"}`, `{"target":"a","target":"b"}`,
		`null`, ``, `[]`, `{"idle_timeout":"5m","probe":"ws","relay_token":"env:X","version":"1","provider":"exec"}`,
		`{"upstream":"http://a","health":{"path":"/h","interval":"2s"},"kind":"api"}`, `{"health":{"Path":"/"}}`,
		`{"command":["a","b"],"version":"2"}`, `{"ttl":"10m"}`, `{"\u0074arget":"x"}`, `{"target":"x"}` + "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, into := range []func() any{home, app, target, lease} {
			fuzzOne(t, raw, into)
		}
	})
}

// fuzzOne checks one decode of raw into a fresh into().
func fuzzOne(t *testing.T, raw []byte, into func() any) {
	v := into()
	err := BodyOf(raw).Decode(v)
	if err != nil {
		fe, ok := fault.As(err)
		if !ok || (fe.Kind != fault.Invalid && fe.Kind != fault.TooLarge) || fe.Field == "" {
			t.Fatalf("refusal of %q is not a fault naming a field: %#v", raw, err)
		}
		return
	}
	if !json.Valid(raw) || bytes.TrimSpace(raw)[0] != '{' {
		t.Fatalf("accepted %q, which is not one JSON object", raw)
	}
	std := into()
	if err := json.Unmarshal(raw, std); err != nil || !reflect.DeepEqual(v, std) {
		t.Fatalf("accepted %q as %+v; the standard decoder reads %+v (%v)", raw, v, std, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	if err := BodyOf(again).Decode(into()); err != nil {
		t.Fatalf("accepted %q but refuses its own encoding %s: %v", raw, again, err)
	}
}
