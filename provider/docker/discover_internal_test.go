package docker

import (
	"reflect"
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
		case c.err == "" && !reflect.DeepEqual(got, c.want):
			t.Errorf("%s %v: %+v, want %+v", c.name, c.labels, got, c.want)
		case c.err != "" && (err == nil || !strings.HasPrefix(err.Error(), c.err)):
			t.Errorf("%s %v: error %v, want %q", c.name, c.labels, err, c.err)
		}
	}
}

// TestJoinGroup: containers with the same wakegate.group are one home with
// the entry's labels; compose's depends_on orders the members (services
// outside the group left out) unless wakegate.depends_on does; each
// problem names the group, and the container and label at fault.
func TestJoinGroup(t *testing.T) {
	port := network.PortSet{network.MustParsePort("3000/tcp"): {}}
	read := func(name string, kv ...string) Found {
		t.Helper()
		l := map[string]string{LabelGroup: "shop"}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		f, err := parseLabels(name, &container.Config{Labels: l, ExposedPorts: port})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	app := read("shop-app-1", composeService, "app", LabelEntry, "true", LabelTarget, "store", LabelIdleTimeout, "5m",
		composeDependsOn, "db:service_healthy:false,proxy:service_started:false")
	db := read("shop-db-1", composeService, "db", LabelPort, "not read: db is no entry")
	worker := read("shop-worker-1", composeService, "worker", LabelDependsOn, "app, db", composeDependsOn, "db:service_started:false")
	got, err := joinGroup("shop", []Found{worker, app, db})
	if err != nil {
		t.Fatal(err)
	}
	want := Found{ID: "shop", Target: "store", Container: "shop-app-1", IdleTimeout: "5m", Members: []Member{
		{Name: "app", Container: "shop-app-1", Entry: true, DependsOn: []string{"db"}},
		{Name: "db", Container: "shop-db-1"},
		{Name: "worker", Container: "shop-worker-1", DependsOn: []string{"app", "db"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("group %+v, want %+v", got, want)
	}

	for _, c := range []struct {
		name string
		fs   []Found
		err  string
	}{
		{"no entry", []Found{db, worker}, "group shop: label wakegate.entry: want it true on exactly one of its containers (shop-db-1, shop-worker-1), got 0"},
		{"two entries", []Found{app, read("shop-app-2", composeService, "app2", LabelEntry, "true"), db},
			"group shop: label wakegate.entry: want it true on exactly one of its containers (shop-app-1, shop-app-2, shop-db-1), got 2"},
		{"unknown member", []Found{app, db, read("shop-w-1", LabelMember, "w", LabelDependsOn, "cache")},
			`group shop: container shop-w-1: label wakegate.depends_on: no member is named "cache" (members: app, db, w)`},
		{"same name", []Found{app, db, read("shop-db-2", composeService, "db")},
			"group shop: container shop-db-2: label wakegate.member: member db is container shop-db-1 already"},
		{"cycle", []Found{app, read("shop-db-1", composeService, "db", LabelDependsOn, "app")},
			"group shop: label wakegate.depends_on: the members' order makes a cycle: app -> db -> app"},
	} {
		if _, err := joinGroup("shop", c.fs); err == nil || err.Error() != c.err {
			t.Errorf("%s: %v, want %s", c.name, err, c.err)
		}
	}
	for _, c := range []struct {
		labels map[string]string
		err    string
	}{
		{map[string]string{LabelGroup: "Shop"}, "container web: label wakegate.group: want 1-63"},
		{map[string]string{LabelGroup: "shop", LabelEntry: "yes"}, `container web: label wakegate.entry: want true or false, got "yes"`},
		{map[string]string{LabelGroup: "shop", composeService: "my_db"}, `container web: label wakegate.member: the member's name "my_db"`},
		{map[string]string{LabelGroup: "shop", LabelEntry: "true"}, "container web: label wakegate.port: not set"},
	} {
		if _, err := parseLabels("web", &container.Config{Labels: c.labels}); err == nil || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%v: %v, want %s", c.labels, err, c.err)
		}
	}
}
