package route

import (
	"context"
	"net/url"
	"sync/atomic"

	"github.com/wakegate/wakegate/homes"
)

// Home is one home's entry in the home table, as the request path reads
// it: the spec the engine registered and its relay token. A home replaced
// through the admin API or a reload gets a new Home; one in the table is
// never changed, except for the hooks its first forward makes.
type Home struct {
	spec  homes.Spec
	token string
	hooks atomic.Pointer[Hooks]
}

// NewHome returns the entry of spec, whose relay token is resolved.
func NewHome(spec homes.Spec) *Home {
	return &Home{spec: spec, token: spec.RelayToken}
}

// Spec is the home as the engine registered it (control.Route).
func (h *Home) Spec() homes.Spec { return h.spec }

// ID is the home's id.
func (h *Home) ID() string { return h.spec.ID }

// Target is the name in /node/{target} that routes to the home.
func (h *Home) Target() string { return h.spec.Target }

// Token is the home's relay token ("" when it has none).
func (h *Home) Token() string { return h.token }

// Hooks are what a forward to a home hands the proxy (forward.Route's
// OnFailure and Retry): a failed forward drops the home's warm verdict,
// and a replayable one is retried once after a fresh wake. They are made
// once per home, so that a warm forward allocates none.
type Hooks struct {
	OnFailure func()
	Retry     func(ctx context.Context) (*url.URL, error)
}

// HooksOr returns h's hooks, made by mk on h's first forward.
func (h *Home) HooksOr(mk func() *Hooks) *Hooks {
	if hk := h.hooks.Load(); hk != nil {
		return hk
	}
	hk := mk()
	if !h.hooks.CompareAndSwap(nil, hk) {
		return h.hooks.Load()
	}
	return hk
}
