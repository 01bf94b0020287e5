package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDurationReadsAndWrites(t *testing.T) {
	type holder struct {
		D Duration `json:"d" yaml:"d"`
	}
	for _, tc := range []struct {
		name, json, yaml string
		want             time.Duration
		bad              string // "" when the value is good
	}{
		{name: "seconds", json: `{"d":"2s"}`, yaml: "d: 2s", want: 2 * time.Second},
		{name: "compound", json: `{"d":"1h30m"}`, yaml: "d: 1h30m", want: 90 * time.Minute},
		{name: "bare zero", json: `{"d":0}`, yaml: "d: 0", want: 0},
		{name: "negative", json: `{"d":"-1s"}`, yaml: "d: -1s", want: -time.Second},
		{name: "no unit", json: `{"d":2}`, yaml: "d: 2", bad: `"2"`},
		{name: "words", json: `{"d":"soon"}`, yaml: "d: soon", bad: `"soon"`},
		{name: "a list", json: `{"d":["2s"]}`, yaml: "d: [2s]", bad: "want a duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j holder
			err := json.Unmarshal([]byte(tc.json), &j)
			var te *json.UnmarshalTypeError
			switch {
			case tc.bad == "" && (err != nil || j.D.Duration() != tc.want):
				t.Errorf("json %s: %v, %v; want %v", tc.json, j.D, err, tc.want)
			case tc.bad != "" && (!errors.As(err, &te) || te.Field != "d"):
				t.Errorf("json %s: %v; want a type error at field d", tc.json, err)
			}
			var y holder
			err = yaml.Unmarshal([]byte("\n"+tc.yaml), &y)
			switch {
			case tc.bad == "" && (err != nil || y.D.Duration() != tc.want):
				t.Errorf("yaml %s: %v, %v; want %v", tc.yaml, y.D, err, tc.want)
			case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), "line 2:") || !strings.Contains(err.Error(), tc.bad)):
				t.Errorf("yaml %s: %v; want an error at line 2 quoting %s", tc.yaml, err, tc.bad)
			}
		})
	}
}

func TestDurationRoundTrip(t *testing.T) {
	in := App{Slug: "a", Health: AppHealth{Interval: Duration(1500 * time.Millisecond)}, MinRefresh: Duration(time.Minute)}
	b, err := json.Marshal(in)
	if err != nil || !strings.Contains(string(b), `"interval":"1.5s"`) || !strings.Contains(string(b), `"min_refresh":"1m0s"`) {
		t.Fatalf("json: %s, %v", b, err)
	}
	var back App
	if err := json.Unmarshal(b, &back); err != nil || back.Health.Interval != in.Health.Interval || back.MinRefresh != in.MinRefresh {
		t.Fatalf("json back: %+v, %v", back, err)
	}
	y, err := yaml.Marshal(in)
	if err != nil || !strings.Contains(string(y), "interval: 1.5s") {
		t.Fatalf("yaml: %s, %v", y, err)
	}
	var yback App
	if err := yaml.Unmarshal(y, &yback); err != nil || yback.Health.Interval != in.Health.Interval {
		t.Fatalf("yaml back: %+v, %v", yback, err)
	}
}
