package admin

import "context"

// Peer is the process at the other end of an admin socket connection, as
// the kernel reports it (SO_PEERCRED).
type Peer struct {
	PID, UID, GID int
}

// peerKey is the context key of a connection's accepted Peer.
type peerKey struct{}

// WithPeer returns ctx carrying p: the listener checked p's credentials
// and accepted it, so requireToken lets its requests through without a
// token. Only the admin socket's listener may set it.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFrom returns the accepted peer ctx carries, if any.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}
