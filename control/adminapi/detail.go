package adminapi

import (
	"context"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// The detail of one home for the admin API: its last wakes, sessions by
// kind, verdict age, roll state, and where its log is.

// suspendIn is how long until the idle suspend of home h (running, stored
// as rec): nil when none is due (sessions, not running, or never idle).
func (a *Backend[H]) suspendIn(h H, rec registry.Home) *float64 {
	s := h.Spec()
	if rec.Status != registry.StatusRunning || s.IdleTimeout <= 0 {
		return nil
	}
	since := a.d.Sessions.IdleSince(s.ID)
	if since.IsZero() {
		return nil
	}
	left := max(s.IdleTimeout-time.Since(since), 0).Round(100 * time.Millisecond).Seconds()
	return &left
}

// enrich adds to v what only the answers about one home carry.
func (a *Backend[H]) enrich(ctx context.Context, h H, rec registry.Home, v *admin.HomeView) {
	s := h.Spec()
	v.Wakes = a.d.Engine.WakeHistory(s.ID)
	k := a.d.Sessions.Kinds(s.ID)
	sk := &admin.SessionKinds{Requests: k.Requests, WebSockets: k.WebSockets, Leases: []admin.LeaseEntry{}}
	for _, l := range k.Leases {
		sk.Leases = append(sk.Leases, admin.LeaseEntry{Lease: strconv.FormatUint(l.ID, 10), ExpiresAt: l.ExpiresAt})
	}
	v.SessionKinds = sk
	if !rec.LastReadyAt.IsZero() && rec.Verdict != "" {
		age := time.Since(rec.LastReadyAt).Round(100 * time.Millisecond).Seconds()
		v.VerdictAgeS = &age
	}
	roll := &admin.RollView{}
	if t, err := a.d.Engine.Target(ctx); err == nil {
		roll.TargetVersion, roll.BadVersion = t.Version, t.BadVersion
	}
	roll.State = admin.RollState(string(rec.Status), rec.Version, roll.TargetVersion, roll.BadVersion)
	v.Roll = roll
}

// HomeLog says where an exec home's log is; the relay token is masked.
func (a *Backend[H]) HomeLog(id string) (admin.LogSource, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.LogSource{}, err
	}
	lk, ok := a.d.Providers[h.Spec().Provider].(provider.LogKeeper)
	if !ok {
		return admin.LogSource{}, fault.New(fault.NotFound, "no_log", "the gateway keeps no log for this home").
			WithHint("only homes of providers that keep a log the gateway holds (exec) have one here; read a " +
				h.Spec().Provider + " home's log where its provider keeps it")
	}
	files, err := lk.LogFiles(id)
	if err != nil {
		return admin.LogSource{}, err
	}
	return admin.LogSource{Files: files, Secrets: []string{h.Spec().RelayToken}}, nil
}
