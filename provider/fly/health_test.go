package fly_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/fly/flyfake"
	"github.com/wakegate/wakegate/wakerecord"
)

// reporting is the world's counted provider with its health reads.
type reporting struct {
	*counted
	provider.HealthReporter
}

// engineProvider is the provider the rig's engine runs homes with: the
// counted one, reporting health when the world says so.
func (w world) engineProvider() provider.Provider {
	if w.health == nil {
		return w.prov
	}
	return reporting{w.prov, w.health}
}

// healthWorld is the fly world whose machine declares a health check,
// "alive", with the engine reading it.
func healthWorld(t *testing.T) world {
	w := flyWorld(t)
	w.srv.AddMachine(machine, flyfake.MachineSpec{State: "stopped", Image: "registry.fly.io/homes:1",
		Metadata: map[string]string{"wakegate_version": "1"},
		Config:   map[string]any{"checks": map[string]any{"alive": map[string]any{"type": "tcp", "port": w.guest.port}}}})
	w.health = w.prov.Provider.(provider.HealthReporter)
	return w
}

// wakeWhileChecked starts a wake of the rig's home and returns once it
// waits for the machine's check (phase health-pending) while the guest
// already answers; the wake's error arrives on the channel.
func wakeWhileChecked(t *testing.T, r *engineRig) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := r.request()
		done <- err
	}()
	testbin.Eventually(t, "the wake waiting for the machine's check while its port answers", func() bool {
		phase, _, _ := r.eng.Progress(home)
		if phase != wakerecord.HealthPending {
			return false
		}
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", r.w.guest.port))
		if err != nil {
			return false
		}
		res.Body.Close()
		return true
	})
	// The port answers, and the wake still waits for the check.
	select {
	case err := <-done:
		t.Fatalf("the wake ended (%v) before the machine's check passed", err)
	case <-time.After(300 * time.Millisecond):
	}
	if phase, _, _ := r.eng.Progress(home); phase != wakerecord.HealthPending {
		t.Fatalf("phase %q while the check is unknown, want %q", phase, wakerecord.HealthPending)
	}
	return done
}

// A machine whose check has not passed is not ready even though its port
// answers; once the check passes the wake completes.
func TestHealthCheckPassingCompletesWake(t *testing.T) {
	r := newEngineRig(t, healthWorld(t), rigTimes{})
	done := wakeWhileChecked(t, r)
	r.w.srv.SetCheck(machine, "alive", "passing", "Success")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wake after the check passed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wake did not complete after the check passed")
	}
}

// A critical check fails the wake: the operator's hint names the machine
// and the check's output, the public sentence names neither.
func TestHealthCheckCriticalFailsWake(t *testing.T) {
	r := newEngineRig(t, healthWorld(t), rigTimes{})
	done := wakeWhileChecked(t, r)
	const output = "dial tcp [fdaa::2]:8080: connect: connection refused"
	r.w.srv.SetCheck(machine, "alive", "critical", output)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wake did not end after the check turned critical")
	}
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != homefault.CodeHomeUnhealthy {
		t.Fatalf("wake error %v, want code %s", err, homefault.CodeHomeUnhealthy)
	}
	if !strings.Contains(fe.Hint, "machine "+machine) || !strings.Contains(fe.Hint, output) {
		t.Fatalf("hint %q does not name the machine and the check's output", fe.Hint)
	}
	if strings.Contains(fe.Message, output) || strings.Contains(fe.Message, machine) {
		t.Fatalf("public sentence %q carries the check's output or the machine", fe.Message)
	}
}

// A machine that declares no check is judged by the probe alone, and its
// wake does not wait in health-pending.
func TestNoHealthCheckWakesAsBefore(t *testing.T) {
	w := flyWorld(t)
	w.health = w.prov.Provider.(provider.HealthReporter)
	r := newEngineRig(t, w, rigTimes{})
	if _, err := r.request(); err != nil {
		t.Fatalf("wake of a machine without checks: %v", err)
	}
}
