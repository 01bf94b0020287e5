package adminapi

import (
	"context"

	"github.com/wakegate/wakegate/admin"
)

// RefreshHome asks home id's provider for its state, makes the stored
// record agree (Engine.Refresh), and answers what it found with the
// home as it is afterwards.
func (a *Backend[H]) RefreshHome(ctx context.Context, id string) (admin.RefreshView, error) {
	h, err := a.home(id)
	if err != nil {
		return admin.RefreshView{}, err
	}
	res, err := a.d.Engine.Refresh(ctx, id)
	if err != nil {
		return admin.RefreshView{}, err
	}
	v, err := a.detail(ctx, h)
	if err != nil {
		return admin.RefreshView{}, err
	}
	return admin.RefreshView{Refresh: res, Home: v}, nil
}
