// Package sessions counts who uses each home, in one place: in-flight HTTP
// requests, open WebSockets (until their hijacked connection closes) and
// leases (Table). The request path begins and ends a session around every
// forward; idle suspends, rolls, the fleet's session reports, the metrics
// and the admin API read the count.
//
// DESIGN rules that live here: the session count of 8 (a home with
// sessions anywhere in the fleet does not roll) and of 33 (a suspend goes
// on only when no gateway reports a live session): a count never goes
// below zero, and a home's idle time starts when its last session ends.
package sessions
