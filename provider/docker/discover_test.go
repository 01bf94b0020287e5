package docker_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// labelled creates (without starting) a container of the test image named
// name that serves as target, with labels (KEY=VALUE) besides the
// gateway's, by which the rig's cleanup finds it.
func (r *rig) labelled(t *testing.T, name, target string, labels ...string) {
	t.Helper()
	args := []string{"create", "--name", name, "--label", "wakegate.gateway=" + r.name, "-p", "127.0.0.1::8080"}
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	args = append(args, imageRepo+":1", "demo-home", "--addr", "0.0.0.0:8080", "--target", target, "--version", "1")
	if out, err := r.e.podman(args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// state is the engine's state of container name.
func (r *rig) state(t *testing.T, name string) string {
	t.Helper()
	out, err := r.e.podman("inspect", "--format", "{{.State.Status}}", name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGatewayDiscoversLabelledContainers: with discover: true, a stopped
// labelled container made before the gateway starts is a home without a
// config entry, woken by a request and stopped after its idle timeout; a
// container made later is found from the event stream and its home
// removed with it; a container with a bad label is logged by name and
// label and skipped, the others found; a config home keeps its id.
func TestGatewayDiscoversLabelledContainers(t *testing.T) {
	r := newRig(t)
	pre, post, bad, clash := r.name+"-pre", r.name+"-post", r.name+"-bad", r.name+"-clash"
	r.labelled(t, bad, "bad", "wakegate.enable=true", "wakegate.port=http")
	r.labelled(t, pre, "pre", "wakegate.enable=true", "wakegate.target=pre", "wakegate.port=8080", "wakegate.idle_timeout=1s")
	r.labelled(t, clash, "clash", "wakegate.enable=true", "wakegate.id=d1", "wakegate.port=8080")
	cfg := r.config("    discover: true\n", "", "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 0s}\n")
	r.serve(t, cfg)

	testbin.Eventually(t, "the bad label logged", func() bool {
		return strings.Contains(r.gw.Output(), "container "+bad+": label wakegate.port: not a port number")
	})
	testbin.Eventually(t, "the clash with the config's home logged", func() bool {
		return strings.Contains(r.gw.Output(), "the config declares a home d1, and the config wins")
	})
	if s := r.state(t, pre); s != "created" {
		t.Fatalf("container %s is %s before the first request, want created", pre, s)
	}
	testbin.Eventually(t, "the home of "+pre+" registered", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/"+pre, nil, nil)
		return code == http.StatusOK
	})
	if code, v := r.version(t, "pre"); code != http.StatusOK || v != "1" {
		t.Fatalf("request to the discovered home: %d %q\n%s", code, v, r.gw.Output())
	}
	testbin.Eventually(t, "the idle discovered home's container stops", func() bool {
		return r.state(t, pre) == "exited"
	})
	testbin.Eventually(t, "the discovered home recorded suspended", func() bool {
		return r.home(t, pre).Status == "suspended"
	})
	if code, v := r.version(t, "d1"); code != http.StatusOK || v != "1" {
		t.Fatalf("the config's home d1: %d %q", code, v)
	}

	// Made after the start: found from the event stream.
	r.labelled(t, post, "post", "wakegate.enable=true", "wakegate.target=post", "wakegate.port=8080")
	made := time.Now()
	testbin.Eventually(t, "the later container's home registered", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/"+post, nil, nil)
		return code == http.StatusOK
	})
	t.Logf("registered %s after its creation", time.Since(made).Round(time.Millisecond))
	testbin.Eventually(t, "the later container's home served", func() bool {
		code, _ := r.get(t, "/node/post/")
		return code == http.StatusOK
	})
	t.Logf("served %s after its creation", time.Since(made).Round(time.Millisecond))
	if out, err := r.e.podman("rm", "--force", "--time", "0", post); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	gone := time.Now()
	testbin.Eventually(t, "the removed container's route answers 404", func() bool {
		code, _ := r.get(t, "/node/post/")
		return code == http.StatusNotFound
	})
	t.Logf("404 %s after the removal", time.Since(gone).Round(time.Millisecond))
	testbin.Eventually(t, "a log line for the removed home", func() bool {
		return strings.Contains(r.gw.Output(), "home removed, its container is gone")
	})
	if n := strings.Count(r.gw.Output(), "the config wins"); n != 1 {
		t.Errorf("the clash with the config's home logged %d times, want once", n)
	}
	// The gateway removed no container of its own accord.
	if s := r.state(t, pre); s != "exited" {
		t.Errorf("container %s is %s, want exited", pre, s)
	}

	// A container removed while no gateway runs: the next start removes
	// its home (restored from the store) and its route.
	r.gw.Stop()
	if out, err := r.e.podman("rm", "--force", "--time", "0", pre); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r.serve(t, cfg)
	testbin.Eventually(t, "the home of the container removed while down removed", func() bool {
		return strings.Contains(r.gw.Output(), "home removed, its container is gone")
	})
	if code, _ := r.get(t, "/node/pre/"); code != http.StatusNotFound {
		t.Errorf("/node/pre/ after the restart: %d, want 404", code)
	}
}

// TestGatewayDiscoversGroup: three labelled containers with the same
// wakegate.group are one home: a request starts them in their order
// (compose's depends_on label for the entry, wakegate.depends_on for the
// worker) and is answered by the entry; a member killed while the group
// runs fails the home, and the next request wakes the group again; the
// idle suspend stops all three. A group with two entries is logged with
// its containers and not served.
func TestGatewayDiscoversGroup(t *testing.T) {
	r := newRig(t)
	db, app, worker := r.name+"-db", r.name+"-app", r.name+"-worker"
	r.labelled(t, db, "db", "wakegate.enable=true", "wakegate.group=shop", "com.docker.compose.service=db")
	r.labelled(t, app, "shop", "wakegate.enable=true", "wakegate.group=shop", "wakegate.entry=true",
		"com.docker.compose.service=app", "com.docker.compose.depends_on=db:service_started:false",
		"wakegate.port=8080", "wakegate.idle_timeout=10s")
	r.labelled(t, worker, "worker", "wakegate.enable=true", "wakegate.group=shop", "wakegate.member=worker",
		"wakegate.depends_on=app,db")
	for _, n := range []string{"a", "b"} {
		r.labelled(t, r.name+"-two-"+n, "two", "wakegate.enable=true", "wakegate.group=two", "wakegate.entry=true", "wakegate.port=8080")
	}
	r.serve(t, noBackoff(r.config("    discover: true\n", "", "  []\n")))

	testbin.Eventually(t, "the group with two entries logged", func() bool {
		return strings.Contains(r.gw.Output(), "group two: label wakegate.entry: want it true on exactly one of its containers ("+
			r.name+"-two-a, "+r.name+"-two-b), got 2")
	})
	testbin.Eventually(t, "the group's home registered", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/shop", nil, nil)
		return code == http.StatusOK
	})
	if code, v := r.version(t, "shop"); code != http.StatusOK || v != "1" {
		t.Fatalf("request to the group: %d %q\n%s", code, v, r.gw.Output())
	}
	for _, c := range []string{db, app, worker} {
		if s := r.state(t, c); s != "running" {
			t.Fatalf("%s is %s after the wake, want running", c, s)
		}
	}
	if d, a, w := r.e.nanos(t, db, "StartedAt"), r.e.nanos(t, app, "StartedAt"), r.e.nanos(t, worker, "StartedAt"); d >= a || a >= w {
		t.Fatalf("started db %d, app %d, worker %d: want db, app, worker", d, a, w)
	}
	if code, _ := r.get(t, "/node/two/"); code != http.StatusNotFound {
		t.Errorf("/node/two/: %d, want 404", code)
	}

	r.killMember(t, "shop", "worker", worker)
	testbin.Eventually(t, "the idle suspend stopping every member", func() bool {
		return r.state(t, db) == "exited" && r.state(t, app) == "exited" && r.state(t, worker) == "exited"
	})
	if a, d := r.e.nanos(t, app, "FinishedAt"), r.e.nanos(t, db, "FinishedAt"); a > d {
		t.Errorf("app finished at %d, db at %d: want db stopped last", a, d)
	}
}

// TestGatewayDiscoveryReconnects: with the gateway's engine connection
// going through a relay, a labelled container made while the relay is
// frozen, then cut and refusing, is found once the relay is back: the
// stream is opened again after its backoff and the containers listed.
func TestGatewayDiscoveryReconnects(t *testing.T) {
	r := newRig(t)
	rl := newRelay(t, r.e.host)
	before, during := r.name+"-before", r.name+"-during"
	r.labelled(t, before, "before", "wakegate.enable=true", "wakegate.port=8080")
	cfg := strings.Replace(r.config("    discover: true\n", "", "  []\n"), "host: \""+r.e.host+"\"", "host: \"unix://"+rl.sock+"\"", 1)
	r.serve(t, cfg)
	registered := func(id string) func() bool {
		return func() bool {
			code, _ := r.adm(t, "GET", "/admin/homes/"+id, nil, nil)
			return code == http.StatusOK
		}
	}
	testbin.Eventually(t, "the first container's home registered", registered(before))

	rl.set(true, false) // frozen: the event of the next create is held
	r.labelled(t, during, "during", "wakegate.enable=true", "wakegate.port=8080")
	rl.set(true, true)  // cut, and refusing, the held bytes dropped
	rl.set(false, true) // the cut connections' pipes end
	testbin.Eventually(t, "the break logged", func() bool {
		return strings.Contains(r.gw.Output(), "the engine's event stream broke")
	})
	rl.set(false, false)
	back := time.Now()
	testbin.Eventually(t, "the container made during the break registered", registered(during))
	t.Logf("found %s after the relay was back (%d breaks logged)", time.Since(back).Round(time.Millisecond),
		strings.Count(r.gw.Output(), "the engine's event stream broke"))
	if code, v := r.version(t, during); code != http.StatusOK || v != "1" {
		t.Fatalf("request to the container found after the break: %d %q\n%s", code, v, r.gw.Output())
	}
}

// TestGatewayRouteFollowsContainers: a labelled container started by the
// test (running, no config entry) is served at /node/<id>/ once found, and
// its route answers 404 once it is removed; the times from the engine's
// record of its creation to the first 200, and from the removal to the
// first 404, are logged for a few containers.
func TestGatewayRouteFollowsContainers(t *testing.T) {
	r := newRig(t)
	r.serve(t, r.config("    discover: true\n", "", "  []\n"))
	const runs = 5
	var served, gone []time.Duration
	for i := range runs {
		id := fmt.Sprintf("%s-run%d", r.name, i)
		out, err := r.e.podman("run", "--detach", "--name", id, "--label", "wakegate.gateway="+r.name,
			"--label", "wakegate.enable=true", "--label", "wakegate.port=8080", "-p", "127.0.0.1::8080",
			imageRepo+":1", "demo-home", "--addr", "0.0.0.0:8080", "--target", id, "--version", "1")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		created, err := time.Parse(time.RFC3339Nano, r.e.inspectF(t, id, "{{.Created.Format \"2006-01-02T15:04:05.999999999Z07:00\"}}"))
		if err != nil {
			t.Fatal(err)
		}
		if !testbin.Poll(30*time.Second, 5*time.Millisecond, func() bool { code, _ := r.get(t, "/node/"+id+"/"); return code == http.StatusOK }) {
			t.Fatalf("%s never served\n%s", id, r.gw.Output())
		}
		served = append(served, time.Since(created))
		if out, err := r.e.podman("rm", "--force", "--time", "0", id); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		removed := time.Now()
		if !testbin.Poll(30*time.Second, 5*time.Millisecond, func() bool { code, _ := r.get(t, "/node/"+id+"/"); return code == http.StatusNotFound }) {
			t.Fatalf("%s still routed after its removal\n%s", id, r.gw.Output())
		}
		gone = append(gone, time.Since(removed))
	}
	t.Logf("creation to the first 200: %v, median %v", served, median(served))
	t.Logf("removal to the first 404: %v, median %v", gone, median(gone))
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
