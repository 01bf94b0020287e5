package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// Registrar is the one path by which homes and apps join and leave
// this gateway: the engine knows them, the route tables route them, and
// (for those registered through the admin API) the store keeps them. It
// serves three callers:
//
//   - the config, at start (New): every home and app the file declares;
//   - the admin API: PUT and DELETE of homes and apps;
//   - the store, at start (restore): every home and app registered through
//     the admin API before, registered again after the config's.
//
// The config wins on conflict, and that rule lives in Conflict (home ids),
// the target claims (claims.go) and AppConflict (apps): a
// stored home whose id the config declares is not restored (a config home
// with the id of a stored dynamic one takes the record over: it is no
// longer dynamic); a config home takes its target's claim from any other
// home; a stored app whose slug the config declares is not restored; and
// the admin API cannot replace or remove an app of the config. A target
// routes one home: whoever holds its claim in the store's target index.
type Registrar[H Route] struct {
	d   Deps[H]
	cfg *config.Config // the instance, the wake defaults
	log *slog.Logger
	// provs checks a home's provider and settings with the config's rules
	// (Config.ProviderTable).
	provs config.ProviderTable
	// claimMu serialises this gateway's admin writes of homes (claim,
	// record, confirm), so that they do not take each other's claims for
	// stale while one is between its claim and its record. The claims
	// themselves are what keeps a target to one home across a fleet.
	claimMu sync.Mutex
	// configHomes and configApps are the ids and slugs the config declares.
	configHomes map[string]bool
	configApps  map[string]bool
}

// Source is where a registration comes from.
type Source uint8

// The sources of a registration.
const (
	FromConfig Source = iota
	FromAPI
	FromStore
)

// NewRegistrar returns the registrar of d's tables, which knows the homes
// and apps of cfg as the config's.
func NewRegistrar[H Route](d Deps[H], cfg *config.Config) *Registrar[H] {
	r := &Registrar[H]{d: d, cfg: cfg, log: d.Log.With("component", "registrar"), provs: cfg.ProviderTable(),
		configHomes: map[string]bool{}, configApps: map[string]bool{}}
	for _, hc := range cfg.Homes {
		r.configHomes[hc.ID] = true
	}
	for _, ac := range cfg.Apps {
		r.configApps[ac.Slug] = true
	}
	return r
}

// Conflict says why a home from src may not be registered with id (nil
// when it may): the config wins over the store. Who may take a target is
// the target index's to say (underClaim, ClaimConfigTarget).
func (r *Registrar[H]) Conflict(src Source, id string) error {
	if src == FromStore && r.configHomes[id] {
		return errors.New("the config declares a home with the same id, and the config wins")
	}
	return nil
}

// RegisterHome makes spec's home served: the engine knows it (its stored
// record is created or adopted) and the route table routes /node/{target}
// to it, in place of any home with its id. The caller has checked
// Conflict.
func (r *Registrar[H]) RegisterHome(ctx context.Context, spec homes.Spec) (H, error) {
	if err := r.d.Engine.Register(ctx, spec); err != nil {
		var none H
		return none, err
	}
	h := r.d.Homes.New(spec)
	r.d.Homes.Set(spec.ID, h)
	return h, nil
}

// RegisterConfigHomes registers homes of the config (New calls it once
// with every home, before the apps and before restore; a reload with those
// it adds or changes). Each takes its target's claim, from whichever home
// held it.
func (r *Registrar[H]) RegisterConfigHomes(ctx context.Context, homes []config.HomeConfig) error {
	for _, hc := range homes {
		d, err := hc.Decl()
		if err != nil {
			return fmt.Errorf("home %s: options: %w", hc.ID, err)
		}
		spec := DeclSpec(d, "")
		if err := ResolveToken(&spec, hc.RelayToken); err != nil {
			return fmt.Errorf("home %s: relay_token: %w", hc.ID, err)
		}
		prev, err := r.ClaimConfigTarget(ctx, hc.ID, hc.Target)
		if err != nil {
			return fmt.Errorf("home %s: %w", hc.ID, err)
		}
		if _, err := r.RegisterHome(ctx, spec); err != nil {
			return err
		}
		if prev.Target != "" && prev.Target != hc.Target {
			r.releaseTarget(ctx, prev.Target, hc.ID)
		}
	}
	return nil
}

// ResolveToken resolves spec's relay token reference (none when ref is "").
func ResolveToken(spec *homes.Spec, ref string) error {
	if ref == "" {
		return nil
	}
	tok, err := provider.ResolveSecret(ref)
	if err != nil {
		return err
	}
	spec.RelayToken = tok
	return nil
}

// RestoreHomes registers again every home stored by the admin API (with
// Dynamic set), unless the config wins; New calls it after the config's
// homes and apps. A home that cannot be restored is logged and skipped.
// Homes the config declared once and no longer does release their targets
// first.
func (r *Registrar[H]) RestoreHomes(ctx context.Context) error {
	recs, err := r.d.Store.ListHomes(ctx)
	if err != nil {
		return fmt.Errorf("restore homes: %w", err)
	}
	for _, rec := range recs {
		if !rec.Dynamic && !r.configHomes[rec.ID] {
			r.releaseTarget(ctx, rec.Target, rec.ID)
		}
	}
	held, err := r.heldTargets(ctx)
	if err != nil {
		return fmt.Errorf("restore homes: %w", err)
	}
	before := r.d.Homes.Count()
	for _, rec := range recs {
		if rec.Dynamic {
			r.restoreHome(ctx, rec, held[rec.Target] == rec.ID)
		}
	}
	r.log.Info("stored homes restored", "homes", r.d.Homes.Count()-before)
	return nil
}

// restoreHome registers one stored dynamic home again; holds says that
// the target index, as listed at the start of the restore, gives the
// home its target already (the usual case: then no claim is written). A
// fleet's sync calls it too, holding claimMu.
func (r *Registrar[H]) restoreHome(ctx context.Context, rec registry.Home, holds bool) {
	if err := r.Conflict(FromStore, rec.ID); err != nil {
		r.log.Warn("stored dynamic home not restored", "home", rec.ID, "target", rec.Target, "reason", err.Error())
		if _, err := registry.UpdateHome(ctx, r.d.Store, rec, r.cfg.Instance, func(h *registry.Home) { h.Dynamic = false }); err != nil {
			r.log.Warn("clear the dynamic mark of a config home", "home", rec.ID, "err", err)
		}
		return
	}
	if !holds && !r.claimStoredTarget(ctx, rec) {
		return
	}
	spec := DeclSpec(DeclFromRecord(rec, &r.cfg.Wake), "")
	if err := ResolveToken(&spec, rec.RelayTokenRef); err != nil {
		r.log.Warn("stored dynamic home not restored: relay_token", "home", rec.ID, "err", err)
		return
	}
	if err := r.registerRead(ctx, spec, rec); err != nil {
		r.log.Warn("stored dynamic home not restored", "home", rec.ID, "err", err)
		return
	}
}

// PutAPIHome registers or replaces the home of d, a declaration of the
// admin API that passed the config's checks (spec is its engine spec, the
// relay token resolved): it claims the target, writes the stored record
// (compare-and-set on ifMatch when not 0), confirms the claim and
// registers the home; a target another home holds is a 409 target_taken.
// A home the config does not declare is stored as dynamic, with what its
// restore needs. created reports whether the home is new.
func (r *Registrar[H]) PutAPIHome(ctx context.Context, d config.HomeDecl, spec homes.Spec, ifMatch uint64) (h H, created bool, err error) {
	id := d.ID
	r.claimMu.Lock()
	prev, created, err := r.storeAPIHome(ctx, &spec, d, ifMatch)
	r.claimMu.Unlock()
	if err != nil {
		return h, false, err
	}
	if h, err = r.RegisterHome(ctx, spec); err != nil {
		return h, false, err
	}
	if !created && prev.Target != spec.Target {
		r.releaseTarget(ctx, prev.Target, id)
	}
	r.log.Info("home registered", "home", id, "target", spec.Target, "created", created)
	return h, created, nil
}

// storeAPIHome writes the stored record of spec, an admin request's home,
// under its target's claim. It returns the record it replaced (zero when
// created reports a new one).
func (r *Registrar[H]) storeAPIHome(ctx context.Context, spec *homes.Spec, d config.HomeDecl, ifMatch uint64) (prev registry.Home, created bool, err error) {
	id := spec.ID
	base := registry.Home{Status: registry.StatusSleeping}
	cond := registry.Cond{}
	cur, err := r.d.Store.GetHome(ctx, id)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		if ifMatch != 0 {
			return prev, false, fault.StaleIfMatch("home", ifMatch, 0)
		}
		created = true
	case err != nil:
		return prev, false, fmt.Errorf("read home %s: %w", id, err)
	case ifMatch != 0 && cur.Generation != ifMatch:
		return prev, false, fault.StaleIfMatch("home", ifMatch, cur.Generation)
	default:
		if _, known := r.d.Homes.WithID(id); !known && !cur.Dynamic {
			return prev, false, fault.New(fault.Conflict, "conflict", "a stored home with this id exists but is not served here").
				WithField("id").WithHint("remove the stored home first, or use another id")
		}
		spec.Version, d.Version = cur.Version, cur.Version // a roll changes versions, not a PUT
		base, cond, prev = cur, registry.CondOf(cur), cur
	}
	err = r.underClaim(ctx, id, spec.Target, func() (registry.Home, error) {
		return r.d.Store.PutHome(ctx, r.record(base, d), cond)
	}, func(stored registry.Home) error {
		if created {
			return r.d.Store.DeleteHome(ctx, id, registry.CondOf(stored))
		}
		back := prev
		back.Owner = r.cfg.Instance
		_, err := r.d.Store.PutHome(ctx, back, registry.CondOf(stored))
		return err
	})
	return prev, created, err
}

// record is rec carrying what d's registration needs (the fields restore
// reads back), owned by this instance.
func (r *Registrar[H]) record(rec registry.Home, d config.HomeDecl) registry.Home {
	storeDecl(d, &rec)
	rec.Owner, rec.Dynamic = r.cfg.Instance, !r.configHomes[d.ID]
	return rec
}

// RemoveHome stops and removes h: refused while an app runs in it. It
// leaves the route table first, so that no new request starts on it, and
// comes back if the engine refuses.
func (r *Registrar[H]) RemoveHome(ctx context.Context, h H, ifMatch uint64) error {
	spec := h.Spec()
	id := spec.ID
	// A fleet's sync (fleet_sync.go) must not see the record before it
	// goes and register the home again.
	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	if slug, ok := r.d.Apps.InHome(id); ok {
		return fault.New(fault.Conflict, "home_in_use", "app "+slug+" runs in this home").WithField("id").
			WithHint("remove the app first")
	}
	r.d.Homes.Drop(id)
	if err := r.d.Engine.Remove(ctx, id, ifMatch); err != nil {
		r.d.Homes.Set(id, h)
		return err
	}
	r.releaseTarget(ctx, spec.Target, id)
	r.d.Homes.Forget(id)
	r.log.Info("home removed", "home", id)
	return nil
}

// WakeDefaults are the config's wake settings, which fill what a home's
// declaration leaves out.
func (r *Registrar[H]) WakeDefaults() *config.WakeConfig { return &r.cfg.Wake }

// CheckHome checks d with the config's rules (config.HomeDecl.Check)
// against the providers this gateway built.
func (r *Registrar[H]) CheckHome(d config.HomeDecl) []provider.Problem {
	return d.Check(r.provs, r.d.Avail)
}

// ConfigHomeIDs lists the homes the config declares, sorted.
func (r *Registrar[H]) ConfigHomeIDs() []string {
	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	return slices.Sorted(maps.Keys(r.configHomes))
}

// IsConfigApp reports whether the config declares slug; the caller holds
// the app table's lock.
func (r *Registrar[H]) IsConfigApp(slug string) bool { return r.configApps[slug] }
