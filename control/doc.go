// Package control is the gateway's control plane: the registrar, the one
// path by which homes and apps join and leave this gateway (from the
// config at start and on reload, from the admin API, from the store at
// start, and from a fleet's sync with the shared store), the home table
// the request path reads (HomeTable), the app route table the request
// path reads (AppTable: the apps' routes, one observation loop per app,
// their stored desired states, and the self-probe that publishes a route,
// selfprobe.go), the conversions between a home's declaration, its stored
// record and the engine's spec (decl.go), and what a reload did
// (ReloadSummary, reload.go). Beside the registrar: Fleet, this gateway's
// part in a fleet sharing one Redis (fleet*.go), and the embedded store's
// opening, backup and health (store.go, store_watch.go). The admin API's
// backend, which turns the operator's requests into the registrar's
// declarations and the control plane's state into admin's views, is a
// package of its own that builds on this one, control/adminapi.
//
// It changes the gateway's home table and asks the engine, the store
// and the sessions through small interfaces of its own (deps.go for the
// registrar, AppEngine for the app table, FleetEngine and FleetStore for
// the fleet), which the gateway, the engine and the sessions implement
// (the gateway checks that they do, gateway/capabilities.go); it never
// imports the gateway, adminapi or package admin, and it reads the data
// plane only through those interfaces. The registrar speaks the control
// plane's own types. A store's optional powers are found by capability
// (registry.Fleet, Health, WriteHealth, a store that can back itself up),
// never by its type.
//
// DESIGN rules that live here: 15 (every record a registration writes is
// a compare-and-set on generation and owner; a stale writer gets a
// conflict), 14 (an app joins the AppTable as a candidate; nothing but the
// self-probe, a real request from the SelfProber through the gateway's own
// listener, router and proxy, publishes it; the probe token counts only on
// a connection the prober opened, SelfProber.Admit, and the listener marks
// such a request for the request path), 28 (a machine-local home has one
// owner gateway: the fleet's peers say who is alive and ask the runner
// to stop what it runs, fleet_owner.go; a Redis that lost its data heals
// from what the gateways declare and run, fleet_heal.go; a config home
// takes its target back from whoever holds it; a fleet's sync forgets a
// home whose record is gone) and 30 (an embedded store that cannot be
// trusted, empty, damaged or undecodable, or missing while data_dir holds
// homes, is refused with the way out, and moved aside only on
// --reset-store, store.go; a reload applies its homes and apps here,
// after config.RemovesEverything refused a file that would remove
// everything, and ReloadSummary answers and logs what it did, reload.go).
// The operator's side of 15 and 31 lives in control/adminapi. Beside
// them, two rules of this package's own: the config wins over the store
// and the admin API on every conflict, and a target routes one home,
// whoever holds its claim in the store's target index. Rules 11-13 (an
// app's phase ladder, the statuses that pass, coalesced refreshes) live in
// package appstatus (appstatus.Apps); the AppTable is the route table
// that ladder checks and the owner of the loops that run it.
package control
