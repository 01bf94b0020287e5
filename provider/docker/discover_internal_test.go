package docker

import (
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
)

// TestParseLabels: the labels' defaults, and each bad label named with
// its container.
func TestParseLabels(t *testing.T) {
	one := network.PortSet{network.MustParsePort("3000/tcp"): {}}
	two := network.PortSet{network.MustParsePort("3000/tcp"): {}, network.MustParsePort("9000/tcp"): {}}
	for _, c := range []struct {
		name   string
		labels map[string]string
		ports  network.PortSet
		want   Found
		err    string
	}{
		{"web", map[string]string{}, one, Found{ID: "web", Target: "web", Container: "web"}, ""},
		{"web", map[string]string{LabelID: "w1", LabelTarget: "site", LabelPort: "8080", LabelProbe: "tcp", LabelIdleTimeout: "5m"}, nil,
			Found{ID: "w1", Target: "site", Container: "web", Port: 8080, Probe: "tcp", IdleTimeout: "5m"}, ""},
		{"web", map[string]string{LabelPort: "http"}, one, Found{}, "container web: label wakegate.port: not a port number"},
		{"web", map[string]string{LabelPort: "70000"}, one, Found{}, "container web: label wakegate.port: not a port number"},
		{"web", map[string]string{}, two, Found{}, "container web: label wakegate.port: not set, and its image exposes 2 TCP ports"},
		{"web", map[string]string{}, nil, Found{}, "container web: label wakegate.port: not set"},
		{"My_App", map[string]string{LabelPort: "80"}, nil, Found{}, "container My_App: label wakegate.id: the container's name is no home id"},
		{"web", map[string]string{LabelID: "A", LabelPort: "80"}, nil, Found{}, "container web: label wakegate.id: want"},
		{"web", map[string]string{LabelTarget: "a/b", LabelPort: "80"}, nil, Found{}, "container web: label wakegate.target: want"},
		{"web", map[string]string{LabelProbe: "grpc", LabelPort: "80"}, nil, Found{}, "container web: label wakegate.probe: want one of auto, ws, http, tcp"},
		{"web", map[string]string{LabelIdleTimeout: "soon", LabelPort: "80"}, nil, Found{}, "container web: label wakegate.idle_timeout: want a duration"},
		{"web", map[string]string{LabelIdleTimeout: "-1m", LabelPort: "80"}, nil, Found{}, "container web: label wakegate.idle_timeout: want a duration"},
	} {
		got, err := parseLabels(c.name, &container.Config{Labels: c.labels, ExposedPorts: c.ports})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %v: %v", c.name, c.labels, err)
		case c.err == "" && got != c.want:
			t.Errorf("%s %v: %+v, want %+v", c.name, c.labels, got, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s %v: error %v, want %q", c.name, c.labels, err, c.err)
		}
	}
}
