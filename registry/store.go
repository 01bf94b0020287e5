package registry

import (
	"context"
	"errors"
	"time"

	"github.com/wakegate/wakegate/fault"
)

// Errors returned by every Store. Callers test them with errors.Is; each
// but ErrLeaseLost knows its fault kind (fault.Classify answers it).
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = fault.NewSentinel("registry: not found", fault.NotFound, "not_found", "no such record")
	// ErrConflict means a compare-and-set failed: the stored generation or
	// owner token differs from the one the writer read. The writer must read
	// again and decide afresh; it never overwrites silently.
	ErrConflict = fault.NewSentinel("registry: conflict", fault.Conflict, "conflict",
		"the record changed since it was read (stale If-Match or a concurrent write)").
		Fielded("If-Match").Hinted("read the record again and retry with its ETag")
	// ErrLocked means a lifecycle lock is held by another holder whose lease
	// has not expired.
	ErrLocked = fault.NewSentinel("registry: locked", fault.Busy, "home_busy",
		"the home has sessions or another operation on it is in progress").
		Hinted("end its sessions (or wait for the operation) and retry")
	// ErrLeaseLost means a lease being renewed or released is no longer the
	// current one (it expired and was taken, or its fencing token is stale).
	ErrLeaseLost = errors.New("registry: lease lost")
)

// Status is the lifecycle state of a home as the gateway last saw it.
type Status string

// Home statuses.
const (
	StatusSleeping   Status = "sleeping"   // registered, never woken or stopped
	StatusWaking     Status = "waking"     // a wake is in progress
	StatusRunning    Status = "running"    // woken and proven ready
	StatusSuspending Status = "suspending" // an idle suspend is in progress
	StatusSuspended  Status = "suspended"  // suspended or stopped while idle
	StatusRestoring  Status = "restoring"  // a roll is in progress
	StatusFailed     Status = "failed"     // the provider gave up; Reason says why
	StatusUnknown    Status = "unknown"    // state cannot be asserted (a failed rollback)
)

// Verdict is the health verdict of a home.
type Verdict string

// Verdicts.
const (
	VerdictNone     Verdict = ""
	VerdictHealthy  Verdict = "healthy"
	VerdictDegraded Verdict = "degraded"
)

// Home is the stored record of one sleepable backend.
type Home struct {
	ID       string `json:"id"`
	Target   string `json:"target"`   // the name in /node/{target}; never changed by a wake or roll
	Provider string `json:"provider"` // provider name, e.g. "exec"
	// ProviderRef is the provider's opaque handle (for exec: the recorded
	// process identity). A wake that returns a new ref persists it.
	ProviderRef string `json:"provider_ref,omitempty"`
	// Endpoint is the upstream base URL, e.g. http://127.0.0.1:40123.
	Endpoint      string  `json:"endpoint,omitempty"`
	RelayTokenRef string  `json:"relay_token_ref,omitempty"` // env:NAME or file:PATH
	Version       string  `json:"version,omitempty"`
	Status        Status  `json:"status"`
	Verdict       Verdict `json:"verdict,omitempty"`
	Reason        string  `json:"reason,omitempty"` // why the status is failed or unknown
	// WantRunning is the desired state: true while the home should run.
	// Stop and suspend clear it (and persist it) before signalling anything.
	WantRunning     bool          `json:"want_running"`
	LastWakeAt      time.Time     `json:"last_wake_at,omitempty"`
	LastWakeLatency time.Duration `json:"last_wake_latency,omitempty"`
	LastReadyAt     time.Time     `json:"last_ready_at,omitempty"`

	// Dynamic is true for a home registered through the admin API rather
	// than declared in the config: a gateway registers stored dynamic homes
	// again at start (a config home with the same id or target wins).
	Dynamic bool `json:"dynamic,omitempty"`
	// IdleTimeout is the home's resolved idle timeout (zero: never
	// suspended when idle), kept so that a dynamic home is registered again
	// as it was. Config homes take theirs from the config.
	IdleTimeout time.Duration `json:"idle_timeout,omitempty"`
	// Probe is the home's readiness probe kind ("auto", "ws", "http", "tcp"; ""
	// for the gateway's default), kept for the same reason.
	Probe string `json:"probe,omitempty"`
	// Settings are the home's own settings (command, env, working dir,
	// probe details, ready timeout, provider options), kept for the same
	// reason.
	Settings HomeSettings `json:"settings,omitzero"`

	// Command and Image are what Version runs from: the command template
	// and image of the roll target that named it (nil and "" for the
	// provider's defaults). A roll writes them with the version, so a home
	// on an older version wakes and rolls back with its own release after
	// a gateway restart.
	Command []string `json:"command,omitempty"`
	Image   string   `json:"image,omitempty"`

	// Runner is the gateway instance whose provider runs the home's
	// process, for a home that lives on one machine (exec): only that
	// gateway starts, adopts, restarts or stops the process (DESIGN rule
	// 28). "" when no process is known to run. Written with the endpoint
	// and ref by the wake that started or adopted the process, cleared by
	// a proven stop.
	Runner string `json:"runner,omitempty"`
	// RunnerMachine names the machine the runner runs on (its host name
	// and boot), so that a gateway on another machine does not look for a
	// loopback endpoint on its own.
	RunnerMachine string `json:"runner_machine,omitempty"`

	// Generation counts writes; 0 means the record has never been stored.
	Generation uint64 `json:"generation"`
	// Owner is the token of the last writer (a gateway instance or a lease).
	Owner string `json:"owner,omitempty"`
}

// Cond is the condition of a compare-and-set write: the generation and owner
// token the writer read. Generation 0 means "create; fail if it exists".
// A write made under a lifecycle lock also carries the lease's Fence (see
// Cond.Fenced): the store then refuses it with ErrLeaseLost unless that
// lease is still the live one, in the same atomic step.
type Cond struct {
	Generation uint64
	Owner      string
	Fence      Fence
}

// Record is a stored record written with a compare-and-set: a home, an
// app, an app's desired state, a claim or the target.
type Record interface {
	// Stamp returns the record's generation and owner token.
	Stamp() (generation uint64, owner string)
}

// Stamp returns h's generation and owner token.
func (h Home) Stamp() (uint64, string) { return h.Generation, h.Owner }

// Stamp returns a's generation and owner token.
func (a App) Stamp() (uint64, string) { return a.Generation, a.Owner }

// Stamp returns t's generation and owner token.
func (t Target) Stamp() (uint64, string) { return t.Generation, t.Owner }

// CondOf returns the condition that matches h as it was read.
func CondOf(h Home) Cond { return Cond{Generation: h.Generation, Owner: h.Owner} }

// Target is the version homes should run, and the last version known bad.
type Target struct {
	Version string `json:"version"`
	// Image is what image-based providers run the version from.
	Image string `json:"image,omitempty"`
	// Command is the exec provider's command template for this version.
	Command []string `json:"command,omitempty"`
	// BadVersion is the last target version whose roll failed. No home rolls
	// onto it; registering a newer target lifts the brake.
	BadVersion string    `json:"bad_version,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	Generation uint64    `json:"generation"`
	Owner      string    `json:"owner,omitempty"`
}

// Lease is a held lifecycle lock.
type Lease struct {
	Name   string // lock name, e.g. "home/h1"
	Holder string // who holds it (gateway instance id plus a nonce)
	// Token is the fencing token: strictly increasing per lock name across
	// every acquisition, so a holder whose lease expired can be told apart
	// from the current one by any writer that records it.
	Token     uint64
	ExpiresAt time.Time
}

// Store is wakegate's state.
//
// Contract:
//   - Safe for concurrent use by many goroutines (and, for shared stores,
//     many gateway processes).
//   - Every method honours ctx: it returns ctx.Err() (wrapped) once ctx is
//     done, and never blocks past it.
//   - Missing records give ErrNotFound (wrapped), distinct from I/O errors.
//   - Writes of homes, apps and the target are compare-and-set on generation and
//     owner token (Cond). On success the stored generation is cond+1 and the
//     stored owner is the written record's Owner; the stored record is
//     returned. On mismatch: ErrConflict and nothing is written.
//   - A write whose Cond carries a Fence is also refused, with ErrLeaseLost
//     and nothing written, unless the fence's lease is the live lease of its
//     lock; the store checks it atomically with generation and owner, so a
//     holder whose lease expired can never write after the next holder.
//   - A backend that does not answer gives ErrUnavailable (wrapped), at the
//     latest when ctx is done or the store's own timeouts run out.
//   - Changed (Notifier) wakes waiters on every instance sharing the store
//     when a lock is released or a record written.
//   - Locks are leases with a TTL and a fencing token. A lock taken by a
//     caller must be re-checked against state after taking it (what you read
//     before may be stale). Release with context.WithoutCancel(ctx) so a
//     cancelled caller still frees it; an expired lease frees itself.
//   - Session counts are reported per gateway instance and expire with a TTL,
//     so a crashed instance does not pin homes awake for ever.
//   - The target index (Claims, claims.go) is written with the same
//     compare-and-set as homes, apps and the target: every kind of record
//     is one shape (Tables, Records; records.go).
type Store interface {
	// Tables are the records, every kind in one shape: Records[T] over
	// them (Homes, Apps, AppStates, TargetIndex, Targets).
	Tables
	// TypedRecords are the same records through typed methods, which
	// every backend takes from Typed.
	TypedRecords
	Locker
	SessionReports
	Notifier

	// Close releases the store's resources.
	Close() error
}

// TypedRecords are a store's records through one method per kind and
// operation (GetHome, PutApp, ...). A backend does not write them: it
// embeds Typed, which implements them over its Tables.
type TypedRecords interface {
	Claims

	// GetHome returns one home by id.
	GetHome(ctx context.Context, id string) (Home, error)
	// ListHomes returns every home, ordered by id.
	ListHomes(ctx context.Context) ([]Home, error)
	// PutHome writes h if the stored record matches cond (see Cond).
	PutHome(ctx context.Context, h Home, cond Cond) (Home, error)
	// DeleteHome removes a home if the stored record matches cond.
	DeleteHome(ctx context.Context, id string, cond Cond) error

	// GetApp returns one app registered at runtime, by slug.
	GetApp(ctx context.Context, slug string) (App, error)
	// ListApps returns every stored app, ordered by slug.
	ListApps(ctx context.Context) ([]App, error)
	// PutApp writes a if the stored record matches cond (see Cond).
	PutApp(ctx context.Context, a App, cond Cond) (App, error)
	// DeleteApp removes an app if the stored record matches cond.
	DeleteApp(ctx context.Context, slug string, cond Cond) error

	// GetAppState returns the operator's desired state of an app (config
	// or runtime), by slug; ErrNotFound when none was stored.
	GetAppState(ctx context.Context, slug string) (AppState, error)
	// ListAppStates returns every stored desired state, ordered by slug.
	ListAppStates(ctx context.Context) ([]AppState, error)
	// PutAppState writes s if the stored record matches cond (see Cond).
	PutAppState(ctx context.Context, s AppState, cond Cond) (AppState, error)

	// GetTarget returns the roll target, or ErrNotFound when none is set.
	GetTarget(ctx context.Context) (Target, error)
	// PutTarget writes the target if the stored one matches cond.
	PutTarget(ctx context.Context, t Target, cond Cond) (Target, error)
}

// Locker takes lifecycle locks: leases with a TTL and a fencing token
// (DESIGN rules 16 and 32).
type Locker interface {
	// Lock takes the named lock for holder for ttl. It returns ErrLocked at
	// once when another holder's lease is live; it does not wait.
	Lock(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// Renew extends a held lease; ErrLeaseLost if it is no longer current.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// Unlock releases a held lease; ErrLeaseLost if it is no longer current.
	Unlock(ctx context.Context, l Lease) error
}

// SessionReports are every instance's live session counts.
type SessionReports interface {
	// ReportSessions records this instance's live session count per home,
	// replacing its previous report. Counts expire after ttl.
	ReportSessions(ctx context.Context, instance string, counts map[string]int, ttl time.Duration) error
	// FleetSessions returns the sum of unexpired session counts for a home
	// over every instance.
	FleetSessions(ctx context.Context, homeID string) (int, error)
}
