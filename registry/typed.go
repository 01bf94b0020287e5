package registry

import "context"

// Typed gives a backend the typed record methods of Store (GetHome,
// PutApp, ...) over its Tables, so that a backend implements records once
// for every kind and a new kind adds nothing to any backend. A backend
// embeds it, set to itself.
type Typed struct {
	Tables Tables
}

// GetHome returns one home by id.
func (s Typed) GetHome(ctx context.Context, id string) (Home, error) {
	return Homes(s.Tables).Get(ctx, id)
}

// ListHomes returns every home, ordered by id.
func (s Typed) ListHomes(ctx context.Context) ([]Home, error) { return Homes(s.Tables).List(ctx) }

// PutHome writes h if the stored record matches cond. A home needs a
// non-empty ID and Target.
func (s Typed) PutHome(ctx context.Context, h Home, cond Cond) (Home, error) {
	return Homes(s.Tables).Put(ctx, h, cond)
}

// DeleteHome removes a home if the stored record matches cond.
func (s Typed) DeleteHome(ctx context.Context, id string, cond Cond) error {
	return Homes(s.Tables).Delete(ctx, id, cond)
}

// GetApp returns one stored app by slug.
func (s Typed) GetApp(ctx context.Context, slug string) (App, error) {
	return Apps(s.Tables).Get(ctx, slug)
}

// ListApps returns every stored app, ordered by slug.
func (s Typed) ListApps(ctx context.Context) ([]App, error) { return Apps(s.Tables).List(ctx) }

// PutApp writes a if the stored record matches cond. An app needs a
// non-empty Slug.
func (s Typed) PutApp(ctx context.Context, a App, cond Cond) (App, error) {
	return Apps(s.Tables).Put(ctx, a, cond)
}

// DeleteApp removes an app if the stored record matches cond.
func (s Typed) DeleteApp(ctx context.Context, slug string, cond Cond) error {
	return Apps(s.Tables).Delete(ctx, slug, cond)
}

// GetAppState returns the desired state stored for slug.
func (s Typed) GetAppState(ctx context.Context, slug string) (AppState, error) {
	return AppStates(s.Tables).Get(ctx, slug)
}

// ListAppStates returns every stored desired state, ordered by slug.
func (s Typed) ListAppStates(ctx context.Context) ([]AppState, error) {
	return AppStates(s.Tables).List(ctx)
}

// PutAppState writes st if the stored record matches cond.
func (s Typed) PutAppState(ctx context.Context, st AppState, cond Cond) (AppState, error) {
	return AppStates(s.Tables).Put(ctx, st, cond)
}

// GetClaim returns the claim on target.
func (s Typed) GetClaim(ctx context.Context, target string) (Claim, error) {
	return TargetIndex(s.Tables).Get(ctx, target)
}

// ListClaims returns every claim, ordered by target.
func (s Typed) ListClaims(ctx context.Context) ([]Claim, error) {
	return TargetIndex(s.Tables).List(ctx)
}

// PutClaim writes c if the stored claim on c.Target matches cond. A claim
// needs a non-empty Target and Home.
func (s Typed) PutClaim(ctx context.Context, c Claim, cond Cond) (Claim, error) {
	return TargetIndex(s.Tables).Put(ctx, c, cond)
}

// DeleteClaim removes the claim on target if it matches cond.
func (s Typed) DeleteClaim(ctx context.Context, target string, cond Cond) error {
	return TargetIndex(s.Tables).Delete(ctx, target, cond)
}

// GetTarget returns the roll target, or ErrNotFound when none is set.
func (s Typed) GetTarget(ctx context.Context) (Target, error) {
	return Targets(s.Tables).Get(ctx, TargetRecord)
}

// PutTarget writes the target if the stored one matches cond.
func (s Typed) PutTarget(ctx context.Context, t Target, cond Cond) (Target, error) {
	return Targets(s.Tables).Put(ctx, t, cond)
}
