package registry

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// Capabilities: what a store may offer beside Store. A caller asks for one
// with a type assertion on the small interface (store.(registry.Fleet)),
// never on a backend's concrete type, and runs without the feature when
// the store does not offer it.

var (
	// ErrUnwritable means the store cannot write: its disk is read-only, full,
	// over quota, or failing with I/O errors. Nothing was written. Reads go
	// on. It is also ErrUnavailable (errors.Is answers true for both), so a
	// caller that serves from what it knows while a store is down does the
	// same here; one that needs a write fails fast, without a retry loop.
	ErrUnwritable = fault.NewSentinel("registry: store unwritable", fault.Unavailable, "store_unavailable",
		"the gateway cannot write its state; nothing was changed").
		Hinted("the store's disk is read-only, full or failing: free space or remount it read-write; " +
			"the gateway notices by itself (a small write is tried every second) and /readyz answers 200 again")

	// ErrNoAnswer means the instance asked did not answer in time (Fleet.Ask).
	ErrNoAnswer = errors.New("registry: no answer from the instance asked")
)

// Fleet is what a store shared by several gateways offers beside Store.
// A gateway asks its store for it (store.(registry.Fleet)) and runs alone
// when the store does not offer it; the Redis store does, the embedded
// store does not.
type Fleet interface {
	// SetVersion records instance's software version for the fleet's
	// instance list.
	SetVersion(ctx context.Context, instance, version string) error
	// Reports lists the live instances' session reports.
	Reports(ctx context.Context) ([]InstanceReport, error)
	// DropVerdict announces to every instance that home id's warm verdict
	// is gone.
	DropVerdict(ctx context.Context, id string) error
	// OnVerdictDropped sets the function called with the id of every
	// verdict another instance drops (nil stops the calls).
	OnVerdictDropped(fn func(id string))
	// AddAdminLease stores an operator's lease on home for ttl, counted
	// among the home's sessions by every instance.
	AddAdminLease(ctx context.Context, home string, ttl time.Duration) (uint64, time.Time, error)
	// EndAdminLease ends a stored lease and reports whether it was live.
	EndAdminLease(ctx context.Context, home string, lease uint64) (bool, error)
	// Epoch returns the store's epoch, creating it when it is missing: a
	// value that changes (or comes back new) tells a gateway that the
	// store lost its data (redis/fleet.go).
	Epoch(ctx context.Context) (string, error)
	// Persistence says what the server keeps across its own restart.
	Persistence(ctx context.Context) (Persistence, error)
	// Ask sends body to instance to and returns its answer (OnAsked),
	// waiting until ctx ends.
	Ask(ctx context.Context, to, body string) (string, error)
	// OnAsked sets the function that answers what other instances Ask
	// this one (nil: questions go unanswered).
	OnAsked(fn func(ctx context.Context, from, body string) string)
}

// Health is a store that knows whether its backend answers: Unavailable
// says why it does not, or nil while it does.
type Health interface {
	Unavailable() error
}

// Pinger is a store whose server can be asked whether it answers. A
// server that is paused, or cut off by a link that stops forwarding
// without closing, leaves its connections open and answers nothing: only
// a question bounded in time tells. Until a Ping passes again, the store
// reports itself unavailable (Health).
type Pinger interface {
	Ping(ctx context.Context) error
}

// WriteHealth is a store whose own disk can refuse writes (the embedded
// store): Unwritable says why, and since when; CheckDisk looks at the disk
// without writing (a read-only or full disk then counts as unwritable);
// ProbeWrite tries a small write.
type WriteHealth interface {
	Unwritable() (time.Time, error)
	CheckDisk() error
	ProbeWrite(ctx context.Context) error
}

// Blobs are opaque values under slash-separated keys ("a/b/c"), kept with
// the time they were written: the shape of what certmagic stores
// (certificates, keys, ACME accounts), shared by every gateway of a fleet.
// A key is a "file"; its leading components are implied "directories".
//
// Contract: safe for concurrent use; every method honours ctx; a missing
// key gives ErrNotFound (wrapped); a server that does not answer gives
// ErrUnavailable (wrapped). Values are small (a certificate, a key).
type Blobs interface {
	// PutBlob stores value at key, replacing any value there.
	PutBlob(ctx context.Context, key string, value []byte) error
	// GetBlob returns the value at key.
	GetBlob(ctx context.Context, key string) ([]byte, error)
	// DeleteBlobs removes key and every key under key+"/"; removing
	// nothing is not an error.
	DeleteBlobs(ctx context.Context, key string) error
	// BlobsUnder returns every key under prefix+"/" (every key when
	// prefix is ""), ordered.
	BlobsUnder(ctx context.Context, prefix string) ([]string, error)
	// StatBlob returns the size and write time of the value at key.
	StatBlob(ctx context.Context, key string) (BlobInfo, error)
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	// Size is the value's length in bytes.
	Size int64
	// Modified is when it was last written, by the server's clock.
	Modified time.Time
}

// InstanceReport is one live instance's session report.
type InstanceReport struct {
	// Instance names the gateway.
	Instance string `json:"instance"`
	// ReportedAt is when the instance last reported (its heartbeat).
	ReportedAt time.Time `json:"reported_at"`
	// Expires is when the report lapses unless the instance reports again.
	Expires time.Time `json:"expires"`
	// Sessions is the instance's live session count per home.
	Sessions map[string]int `json:"sessions"`
	// Version is the wakegate version the instance runs ("" when it did
	// not say: SetVersion).
	Version string `json:"version,omitempty"`
	// Run names the run that holds the instance name, "pid N on HOST"
	// ("" when no run claims it, as with a version that makes no claim,
	// or a store that has no claims).
	Run string `json:"run,omitempty"`
}

// Persistence is what a Redis server keeps across its own restart.
type Persistence struct {
	// Known is false when the server does not let its settings be read
	// (CONFIG is renamed or refused, as on some managed services).
	Known bool
	// AOF is true with an append-only file (appendonly yes).
	AOF bool
	// Snapshots are the server's RDB save points ("" when none).
	Snapshots string
}

// Keeps reports whether a restart of the server keeps the records: an
// append-only file or snapshots are on, or the settings are unknown.
func (p Persistence) Keeps() bool { return !p.Known || p.AOF || strings.TrimSpace(p.Snapshots) != "" }
