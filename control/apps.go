package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// The app side of the registrar (registrar.go). An app registered through
// the admin API is held to the config's rules (registry.App.Check), stored in the
// registry (so that a restarted gateway registers it again) and carries
// the stored record's generation, which If-Match names. It joins the route
// table as a candidate exactly like an app of the config (Apps.Install):
// only its self-probe publishes it. Registrations and removals of apps are
// serialised by the table's lock (Apps.Lock).

// AppConflict says why an app from src may not take slug (nil when it
// may): the config wins, over the store and over the admin API. The
// caller holds the app table's lock.
func (r *Registrar[H]) AppConflict(src Source, slug string) error {
	if src == FromConfig || !r.configApps[slug] {
		return nil
	}
	if src == FromStore {
		return errors.New("the config declares the same slug, and the config wins")
	}
	return fault.New(fault.Conflict, "config_app", "app "+strconv.Quote(slug)+" is declared in the config file").
		WithField("slug").WithHint("change or remove it in the config file")
}

// RegisterConfigApps installs apps of the config (New calls it once with
// every app, after the config's homes and before restore; a reload with
// those it adds or changes). Each is a candidate until its self-probe
// passes; Serve starts their observation loops.
func (r *Registrar[H]) RegisterConfigApps(apps []registry.App) {
	t := r.d.Apps
	t.Lock()
	defer t.Unlock()
	for _, ac := range apps {
		t.Install(ac, 0)
	}
}

// Restore registers again, after the config's, the homes and then the
// apps stored through the admin API; New calls it once.
func (r *Registrar[H]) Restore(ctx context.Context) error {
	if err := r.RestoreHomes(ctx); err != nil {
		return err
	}
	return r.RestoreApps(ctx)
}

// RestoreApps registers the apps stored through the admin API again, at
// start, after every home. An app the config also declares, or whose
// record no longer passes the checks (its home is gone), is skipped with a
// warning; its record is kept.
func (r *Registrar[H]) RestoreApps(ctx context.Context) error {
	recs, err := r.d.Store.ListApps(ctx)
	if err != nil {
		return fmt.Errorf("restore apps: %w", err)
	}
	r.d.Apps.Lock()
	defer r.d.Apps.Unlock()
	for _, rec := range recs {
		if err := r.AppConflict(FromStore, rec.Slug); err != nil {
			r.log.Warn("stored app not restored", "app", rec.Slug, "reason", err.Error())
			continue
		}
		ac := rec
		ac.Default()
		var bad fault.FieldErrors
		ac.Check(r.HomeKnown, bad.Add)
		if len(bad) > 0 {
			r.log.Warn("stored app not restored", "app", rec.Slug, "problems", bad.Error())
			continue
		}
		r.d.Apps.Install(ac, rec.Generation)
		r.log.Info("app restored", "app", rec.Slug, "generation", rec.Generation)
	}
	return nil
}

// HomeKnown reports whether a home with id is routed here.
func (r *Registrar[H]) HomeKnown(id string) bool { _, ok := r.d.Homes.WithID(id); return ok }

// AppFromRequest fills the defaults of an app decoded from a PUT body for
// slug and checks it with the config's rules, naming every bad field. The
// fields the gateway keeps (generation, owner, updated_at) are not the
// caller's to set: If-Match names the generation a caller read.
func (r *Registrar[H]) AppFromRequest(slug string, ac registry.App) (registry.App, error) {
	var bad fault.FieldErrors
	if ac.Slug != "" && ac.Slug != slug {
		bad.Add("slug", "the body names app %q but the URL names %q", ac.Slug, slug)
	}
	if ac.Generation != 0 {
		bad.Add("generation", "set by the gateway; send the generation you read in If-Match")
	}
	if ac.Owner != "" || !ac.UpdatedAt.IsZero() {
		bad.Add("owner", "owner and updated_at are set by the gateway")
	}
	ac.Slug = slug
	ac.Default()
	ac.Check(r.HomeKnown, bad.Add)
	return ac, bad.Invalid()
}

// PutAPIApp registers or replaces an app from an admin request: the
// stored record is written (compare-and-set on ifMatch when not 0, and on
// the generation this gateway serves), then the app is installed as a
// candidate. It returns the stored generation and whether the app is new.
func (r *Registrar[H]) PutAPIApp(ctx context.Context, ac registry.App, ifMatch uint64) (gen uint64, created bool, err error) {
	t, slug := r.d.Apps, ac.Slug
	t.Lock() // configApps is read under it (a reload changes it)
	defer t.Unlock()
	if err := r.AppConflict(FromAPI, slug); err != nil {
		return 0, false, err
	}
	curGen, served := t.Generation(slug)
	if err := appIfMatch(curGen, served, ifMatch); err != nil {
		return 0, false, err
	}
	rec := ac
	rec.Owner, rec.UpdatedAt = r.cfg.Instance, time.Now().UTC()
	prev, err := r.d.Store.GetApp(ctx, slug)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		if served {
			// Served here but gone from the store: another writer removed it.
			return 0, false, appRemovedMeanwhile()
		}
		rec, err = r.d.Store.PutApp(ctx, rec, registry.Cond{})
	case err != nil:
	case served && prev.Generation != curGen:
		return 0, false, appServedStale(prev.Generation, curGen)
	default:
		// A stored app not served here (skipped at start) is replaced too.
		rec, err = r.d.Store.PutApp(ctx, rec, registry.AppCond(prev))
	}
	if err != nil {
		return 0, false, fmt.Errorf("store app %s: %w", slug, err)
	}
	t.Install(ac, rec.Generation)
	r.log.Info("app registered", "app", slug, "generation", rec.Generation, "replaced", served)
	return rec.Generation, !served, nil
}

// RemoveAPIApp removes an app registered through the admin API: its
// stored record is deleted (compare-and-set as in PutAPIApp), then its
// loop stops and its route goes.
func (r *Registrar[H]) RemoveAPIApp(ctx context.Context, slug string, ifMatch uint64) error {
	t := r.d.Apps
	t.Lock()
	defer t.Unlock()
	curGen, served := t.Generation(slug)
	if !served {
		return AppNotFound(slug)
	}
	if err := r.AppConflict(FromAPI, slug); err != nil {
		return err
	}
	if err := appIfMatch(curGen, served, ifMatch); err != nil {
		return err
	}
	prev, err := r.d.Store.GetApp(ctx, slug)
	switch {
	case errors.Is(err, registry.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read app %s: %w", slug, err)
	case prev.Generation != curGen:
		return appServedStale(prev.Generation, curGen)
	default:
		if err := r.d.Store.DeleteApp(ctx, slug, registry.AppCond(prev)); err != nil {
			return fmt.Errorf("delete app %s: %w", slug, err)
		}
	}
	t.Uninstall(slug)
	r.log.Info("app removed", "app", slug)
	return nil
}

// appIfMatch checks an If-Match generation against the app served here
// (at generation gen when served).
func appIfMatch(gen uint64, served bool, ifMatch uint64) error {
	switch {
	case ifMatch == 0:
		return nil
	case !served:
		return fault.StaleIfMatch("app", ifMatch, 0)
	case gen != ifMatch:
		return fault.StaleIfMatch("app", ifMatch, gen)
	}
	return nil
}

// AppNotFound is the answer to a request for an app not served here.
func AppNotFound(slug string) error {
	return fault.New(fault.NotFound, "app_not_found", "no app with slug "+strconv.Quote(slug)).WithField("slug")
}

func appRemovedMeanwhile() error {
	return fault.New(fault.Conflict, "conflict", "the stored app was removed meanwhile").WithField("If-Match").
		WithHint("read the app again")
}

func appServedStale(stored, served uint64) error {
	return fault.New(fault.Conflict, "conflict",
		fmt.Sprintf("the stored app is at generation %d, this gateway serves %d", stored, served)).WithField("If-Match").
		WithHint("read the app again")
}
