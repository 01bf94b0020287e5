// Package adminapi is the admin API's backend (admin.Backend): package
// admin's HTTP surface answers the operator from it. It turns admin's
// requests into the control plane's own declarations (config.HomeDecl,
// registry.App) and hands them to the registrar, and turns what the
// gateway knows of homes and apps into admin's views: homes and their
// detail (backend.go, homes.go, detail.go, a page of homes in page.go, a
// provider refresh in refresh.go), apps and routes and the operations on
// them (apps.go), leases, the fleet's instances, reload (ReloadView), and
// the log of access refusals that the request path fills (Denials,
// denials.go).
//
// It holds no state of its own beyond the denial log. It asks the
// registrar, the home and app tables, the engine, the app observer, the
// sessions, the leases and the gateway's own state through small
// interfaces declared in deps.go, which control.Registrar, the gateway's
// tables, the lifecycle engine, the app observer and the session count
// implement (the gateway checks that they do, gateway/capabilities.go). It imports
// package control for the control plane's conversions (DeclSpec,
// ResolveToken) and values (ServedApp, ReloadSummary); control knows
// neither it nor package admin. A provider's optional powers (logs,
// restarts, usage, containment) are found by capability, never by type.
//
// DESIGN rules that live here: the operator's side of 15 (an If-Match
// that names a stale generation is a conflict, fault.StaleIfMatch; the
// registrar's writes are compare-and-sets on generation and owner) and of
// 31 (a home's views hold no secret: endpoints lose their user info and
// query, environment entries show their names only, and the relay token is
// masked in its log). The rule that the config wins over the admin API
// is the registrar's (control.Registrar), which answers its refusals.
package adminapi
