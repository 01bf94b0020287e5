package gateway

import (
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/control/adminapi"
	"github.com/wakegate/wakegate/proxy"
	"github.com/wakegate/wakegate/route"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// The control plane, the request path and the app observer ask for small
// interfaces of their own; the gateway hands them the concrete values,
// which must have those powers.
var (
	_ control.Engine      = (*wake.Engine)(nil)
	_ adminapi.Engine     = (*wake.Engine)(nil)
	_ control.FleetEngine = (*wake.Engine)(nil)
	_ control.AppEngine   = (*wake.Engine)(nil)
	_ adminapi.Sessions   = (*sessions.Table)(nil)
	_ route.Engine        = (*wake.Engine)(nil)
	_ route.Observer      = (*appstatus.Apps)(nil)
	_ route.Sessions      = (*sessions.Table)(nil)
	_ route.Forwarder     = (*proxy.Proxy)(nil)
	_ appstatus.Homes     = (*wake.Engine)(nil)
)
