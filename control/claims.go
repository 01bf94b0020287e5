package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// The target side of the registrar (registrar.go): a home routes
// /node/{target} only while it holds the target's claim in the store's
// target index (registry/claims.go), taken with a compare-and-set like
// every other record, so that two homes never hold one target, whichever
// gateway of a fleet registers them and in whatever order:
//
//   - the admin API claims the target before it writes the home's record
//     and confirms the claim after (underClaim); a claim held by a live
//     home is a 409 target_taken naming the holder;
//   - the config's homes take their targets at start whoever holds them
//     (ClaimConfigTarget), and the log says which API home lost its route;
//   - a stored home is restored only with its target's claim
//     (claimStoredTarget);
//   - removing a home, or moving it to another target, releases its claim
//     (releaseTarget). A claim left behind by a crash is stale (its home's
//     record is gone or names another target) and the next claimant takes
//     it over.

// underClaim claims target for home id, then runs write (which stores the
// home's record naming target) and confirms the claim. When the confirm
// finds that another writer took the claim meanwhile, undo gets the
// record write stored and must put the record back as it was; the answer
// is then target_taken. A failed write releases a claim it took.
func (r *Registrar[H]) underClaim(ctx context.Context, id, target string, write func() (registry.Home, error), undo func(registry.Home) error) error {
	out, err := registry.ClaimTarget(ctx, r.d.Store, target, id, r.cfg.Instance)
	if err != nil {
		return targetTaken(err)
	}
	if out.Stale != "" {
		r.log.Info("stale target claim taken over", "target", target, "home", id, "stale_holder", out.Stale)
	}
	stored, err := write()
	if err != nil {
		if !out.Had {
			r.releaseTarget(ctx, target, id)
		}
		return fmt.Errorf("store home %s: %w", id, err)
	}
	if _, err := registry.ConfirmClaim(ctx, r.d.Store, out.Claim, r.cfg.Instance); err != nil {
		if uerr := undo(stored); uerr != nil {
			r.log.Warn("home record not put back after its target was taken", "home", id, "target", target,
				"err", uerr, "hint", "the record names a target it does not hold: PUT /admin/homes/"+id+" with another target, or DELETE it")
		}
		return targetTaken(err)
	}
	return nil
}

// targetTaken is the admin answer to a claim held by another home: 409
// target_taken, with the holder in the cause (for operators). Other errors
// pass unchanged.
func targetTaken(err error) error {
	var taken *registry.TakenError
	if !errors.As(err, &taken) {
		return err
	}
	return fault.Wrap(fault.Conflict, "target_taken", "target "+strconv.Quote(taken.Target)+" is taken by another home", taken).
		WithField("target").
		WithHint("choose another target, or remove home " + taken.Holder + " first (DELETE /admin/homes/" + taken.Holder + ")")
}

// ClaimConfigTarget gives target to the config's home id, whoever held it,
// and says in the log which live home lost its route. It returns id's
// stored record as it was before (zero when there was none), whose target
// the caller releases once the home is registered on its new one.
func (r *Registrar[H]) ClaimConfigTarget(ctx context.Context, id, target string) (registry.Home, error) {
	before, err := r.d.Store.GetHome(ctx, id)
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return registry.Home{}, fmt.Errorf("read home: %w", err)
	}
	prev, err := registry.ForceClaim(ctx, r.d.Store, target, id, r.cfg.Instance)
	if err != nil {
		return registry.Home{}, err
	}
	if prev.Home == "" {
		return before, nil
	}
	stale, err := registry.StaleClaim(ctx, r.d.Store, prev)
	switch {
	case err != nil:
		r.log.Warn("target taken by a home of the config; its previous holder could not be read", "target", target,
			"config_home", id, "home", prev.Home, "err", err)
	case stale:
		r.log.Info("stale target claim taken over", "target", target, "home", id, "stale_holder", prev.Home)
	default:
		r.log.Warn("home lost its route to a home of the config", "home", prev.Home, "target", target, "config_home", id,
			"hint", fmt.Sprintf("home %s is no longer served; give it another target with PUT /admin/homes/%s", prev.Home, prev.Home))
	}
	return before, nil
}

// claimStoredTarget claims the target of a stored dynamic home before it
// is restored; it reports whether the home may be restored, and logs why
// not. The record names the target already, so the claim needs no
// confirm: nobody can take it for stale.
func (r *Registrar[H]) claimStoredTarget(ctx context.Context, rec registry.Home) bool {
	out, err := registry.ClaimTarget(ctx, r.d.Store, rec.Target, rec.ID, r.cfg.Instance)
	var taken *registry.TakenError
	switch {
	case errors.As(err, &taken):
		holder := "home " + taken.Holder
		if r.configHomes[taken.Holder] {
			holder = "the config's home " + taken.Holder + ", and the config wins"
		}
		r.log.Warn("stored dynamic home not restored", "home", rec.ID, "target", rec.Target,
			"reason", "the target is held by "+holder,
			"hint", fmt.Sprintf("give home %s another target with PUT /admin/homes/%s", rec.ID, rec.ID))
		return false
	case err != nil:
		r.log.Warn("stored dynamic home not restored: claim its target", "home", rec.ID, "target", rec.Target, "err", err)
		return false
	case out.Stale != "":
		r.log.Info("stale target claim taken over", "target", rec.Target, "home", rec.ID, "stale_holder", out.Stale)
	}
	return true
}

// heldTargets lists the target index once: which home holds each
// target. A restore reads it instead of one claim per stored home (one
// read transaction, or one Redis round trip, for 100,000 homes); a home
// the listing does not show holding its target claims it as before
// (claimStoredTarget), which decides on the claim as it is then.
func (r *Registrar[H]) heldTargets(ctx context.Context) (map[string]string, error) {
	claims, err := r.d.Store.ListClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("list target claims: %w", err)
	}
	held := make(map[string]string, len(claims))
	for _, c := range claims {
		held[c.Target] = c.Home
	}
	return held, nil
}

// releaseTarget releases home id's claim on target, if it holds it. A
// failure is logged: the claim is then stale, and the next claimant takes
// it over.
func (r *Registrar[H]) releaseTarget(ctx context.Context, target, id string) {
	if err := registry.ReleaseClaim(context.WithoutCancel(ctx), r.d.Store, target, id); err != nil {
		r.log.Warn("target claim not released; the next claimant takes it over", "target", target, "home", id, "err", err)
	}
}
