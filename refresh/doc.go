// Package refresh makes a home's stored record agree with what its
// provider says of it (Provider.Status): an operator's refresh (POST
// /admin/homes/{id}/refresh) and the refreshes of the homes a gateway
// adopts at start, which run in the background, a few at a time (Queue).
// It asks the lifecycle engine for a home's lifecycle lock, its record and
// its verdict through Homes and Held, implemented by package wake; it
// imports neither the engine nor the request path.
//
// DESIGN rules that live here: the refresh's side of 5 (a refresh never
// grants a verdict: only the next wake's probe proves a home ready) and of
// 16 (a refresh is a lifecycle operation like a wake or a suspend, refused
// as busy while another one holds the home); the fleet's side of 28 (a
// home another live gateway runs is refreshed there) is asked of Held.
package refresh
