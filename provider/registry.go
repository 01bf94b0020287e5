package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wakegate/wakegate/internal/provconf"
)

// Adding a provider
//
// A provider is a Factory registered by name in a Registry. The gateway
// builds its registry in one function (provider/all, Registry, which the
// checks of the config use too: config.Load is handed it); adding a
// provider is one Register call there, with a Factory from the provider's
// own package:
//
//	func Factory() provider.Factory {
//		return provider.Factory{
//			NeedsSection: true, // built only when providers.NAME is configured
//			CheckSection: checkSection, // optional: field problems at config load
//			CheckHome:    checkHome,    // optional: a home's options, command, env, dir
//			New: func(env provider.Env, sec provider.Section) (provider.Provider, error) {
//				var c Config
//				if err := sec.Decode(&c); err != nil {
//					return nil, err
//				}
//				return New(c, env.Log)
//			},
//		}
//	}
//
// The config section is providers.NAME in the config file, handed over as a
// Section (a *yaml.Node: decode it into a struct with yaml tags). A home
// names its provider (provider: NAME) and may carry per-home options
// (options: {...}), which reach the provider as JSON in Spec.Options on
// every call. The same CheckHome runs for homes of the config file (with
// file and line) and for homes registered through the admin API (as field
// errors), so both accept exactly the same settings.
//
// What only some providers can do is an optional interface, found with a
// type assertion by the gateway and the engine: Closer (release what New
// opened at shutdown), BudgetResetter (an operator's start forgets the
// restart budget), Historian (restart history in the admin API), LogKeeper
// (the admin API's log tail), Quiescer (stop local homes at shutdown),
// Remover (delete what a removed home leaves behind). A
// provider that sees a home change by itself (it exited and was restarted,
// or it gave up on it) reports that through Env.OnChange.
//
// Errors: return an *Error (below), or an error type of the provider's own
// with the methods of Reasoned, to say why a call failed in a way the
// caller can act on: its retry-after becomes the caller's Retry-After and
// its reason code (and an *Error's Hint) reach the operator.

// Section is a provider's own config section (provconf.Section): decode
// it into the provider's config type. A *yaml.Node is a Section.
type Section = provconf.Section

// DecodeSection decodes the section providers.NAME of a provider whose
// settings are a C with defaults (its Defaults method), and fills them. A
// missing section is an error that names the section and what it needs.
func DecodeSection[C any, PC interface {
	*C
	Defaults()
}](sec Section, name, needs string) (C, error) {
	var c C
	if sec == nil {
		return c, fmt.Errorf("the %s provider needs its section providers.%s (%s)", name, name, needs)
	}
	if err := sec.Decode(&c); err != nil {
		return c, err
	}
	PC(&c).Defaults()
	return c, nil
}

// UnknownFields checks that every key of the section is a field of C
// (C's yaml tags): each other key is a Problem naming the known ones. A
// section that is no mapping is one Problem.
func UnknownFields[C any](sec Section) []Problem {
	var raw map[string]any
	if err := sec.Decode(&raw); err != nil {
		return []Problem{Problemf("", "want a mapping: %v", err)}
	}
	t := reflect.TypeFor[C]()
	known := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			known = append(known, tag)
		}
	}
	var ps []Problem
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(known, k) {
			ps = append(ps, Problemf(k, "unknown field (known: %s)", strings.Join(known, ", ")))
		}
	}
	return ps
}

// Env is what the gateway gives every provider it builds.
type Env struct {
	// DataDir is the gateway's data directory, absolute. A provider keeps
	// its files under DataDir/homes/<id>/ (exec) or a folder of its own
	// name.
	DataDir string
	// Log is the provider's logger (never nil).
	Log *slog.Logger
	// OnChange is called when the provider sees a home change by itself:
	// its process was restarted (a new endpoint and ref to persist) or the
	// provider gave up on it (State failed, Reason for operators). It must
	// not be called while a lock of the provider is held, and returns
	// quickly. Never nil.
	OnChange func(id string, r Result)
	// MayRestart is asked before the provider restarts a home's process
	// after an exit it saw by itself (not one of its own stops). False: the
	// gateway no longer holds the home (another gateway of its fleet runs
	// or stopped it, or its own heartbeat lapsed), and the provider lets
	// the home be: no restart, no report. It may read and write the store,
	// so it is never called while a lock of the provider is held. Nil:
	// always restart.
	MayRestart func(id string) bool
}

// Settings are a home's own settings for its provider (provconf.Settings).
type Settings = provconf.Settings

// Problem is one thing wrong in a config section or a home's settings
// (provconf.Problem).
type Problem = provconf.Problem

// Problemf returns a Problem with a formatted message.
func Problemf(field, format string, args ...any) Problem {
	return provconf.Problemf(field, format, args...)
}

// Factory builds one kind of provider. New is required.
type Factory struct {
	// New builds the provider from its config section (nil when the config
	// has none) and the gateway's env. It is called once per gateway.
	New func(env Env, sec Section) (Provider, error)
	// NeedsSection makes the provider exist only when its section
	// (providers.NAME) is configured: a home naming it otherwise is a
	// config error. False: the provider is always built (exec, static).
	NeedsSection bool
	// CheckSection checks the section at config load, naming fields
	// relative to it. Nil: New's error is the only check.
	CheckSection func(sec Section) []Problem
	// CheckHome checks a home's settings beyond the common rules (Registry.
	// CheckHome: a command names a program, env entries are KEY=VALUE,
	// options are a JSON object). Nil: the provider takes no options and
	// accepts command, env and dir.
	CheckHome func(s Settings) []Problem
}

// Registry holds the providers a gateway can build, by name. It is built
// once at start (no package-level state) and read-only afterwards, so it
// is safe for concurrent reads.
type Registry struct {
	byName map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]Factory{}} }

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Register adds f under name: 1-32 of [a-z0-9_-] starting with a letter.
// A name registered twice, or a Factory without New, is an error.
func (r *Registry) Register(name string, f Factory) error {
	switch {
	case !nameRE.MatchString(name):
		return fmt.Errorf("provider registry: bad name %q", name)
	case f.New == nil:
		return fmt.Errorf("provider registry: %s: Factory.New is required", name)
	}
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("provider registry: %s registered twice", name)
	}
	r.byName[name] = f
	return nil
}

// MustRegister is Register that panics on error, for the gateway's fixed
// list of built-in providers.
func (r *Registry) MustRegister(name string, f Factory) {
	if err := r.Register(name, f); err != nil {
		panic(err)
	}
}

// Lookup returns the factory registered as name.
func (r *Registry) Lookup(name string) (Factory, bool) {
	f, ok := r.byName[name]
	return f, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Available returns the names a home may use given the configured
// sections: every provider that needs no section, and those whose section
// is configured, sorted.
func (r *Registry) Available(configured func(name string) bool) []string {
	var out []string
	for _, n := range r.Names() {
		if !r.byName[n].NeedsSection || configured(n) {
			out = append(out, n)
		}
	}
	return out
}

// CheckSection checks the section of provider name.
func (r *Registry) CheckSection(name string, sec Section) []Problem {
	f, ok := r.byName[name]
	if !ok {
		return []Problem{Problemf("", "unknown provider %q (known: %s)", name, strings.Join(r.Names(), ", "))}
	}
	if f.CheckSection == nil || sec == nil {
		return nil
	}
	return f.CheckSection(sec)
}

// CheckHome checks a home's provider name and settings: the common rules,
// then the provider's own. available lists the providers a home may name
// (Available); problems name "provider", "command", "env[i]", "working_dir" or
// "options...". The config file and the admin API both call it.
func (r *Registry) CheckHome(name string, available []string, s Settings) []Problem {
	var ps []Problem
	known := false
	for _, a := range available {
		known = known || a == name
	}
	f, registered := r.byName[name]
	switch {
	case !registered:
		return []Problem{Problemf("provider", "unknown provider %q (want %s)", name, strings.Join(available, ", "))}
	case !known:
		return []Problem{Problemf("provider", "provider %q is not configured: add its section providers.%s", name, name)}
	}
	if len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "" {
		ps = append(ps, Problemf("command", "must name a program"))
	}
	for i, kv := range s.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			ps = append(ps, Problemf(fmt.Sprintf("env[%d]", i), "want KEY=VALUE, got %q", kv))
		}
	}
	opts := bytes.TrimSpace(s.Options)
	hasOpts := len(opts) > 0 && !bytes.Equal(opts, []byte("null")) && !bytes.Equal(opts, []byte("{}"))
	if len(opts) > 0 && !bytes.Equal(opts, []byte("null")) && (opts[0] != '{' || !json.Valid(opts)) {
		return append(ps, Problemf("options", "want an object of settings"))
	}
	if f.CheckHome == nil {
		if hasOpts {
			ps = append(ps, Problemf("options", "provider %s takes no options", name))
		}
		return ps
	}
	return append(ps, f.CheckHome(s)...)
}

// Build builds provider name from its section (nil when not configured).
func (r *Registry) Build(name string, env Env, sec Section) (Provider, error) {
	f, ok := r.byName[name]
	if !ok {
		return nil, fmt.Errorf("provider %s: not registered", name)
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.OnChange == nil {
		env.OnChange = func(string, Result) {}
	}
	p, err := f.New(env, sec)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", name, err)
	}
	return p, nil
}

// DecodeOptions decodes a home's options (JSON) into v, refusing unknown
// fields; empty options leave v as it is. A provider's CheckHome and its
// calls use it alike.
func DecodeOptions(opts json.RawMessage, v any) error {
	opts = bytes.TrimSpace(opts)
	if len(opts) == 0 || bytes.Equal(opts, []byte("null")) {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(opts))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// Optional interfaces: what only some providers can do. The gateway and the
// engine find them with a type assertion.

// Closer is a provider that holds something to release when the gateway
// closes (goroutines, connections). Close does not stop homes.
type Closer interface {
	Close() error
}

// Historian is a provider that restarts homes by itself and keeps their
// recent restarts, shown in the admin API's home detail.
type Historian interface {
	// History returns home id's recent restarts, oldest first.
	History(id string) []Restart
}

// LogKeeper is a provider that keeps each home's output in files the
// gateway can read (the admin API's log tail).
type LogKeeper interface {
	// LogFiles returns the paths of home id's log, oldest first.
	LogFiles(id string) ([]string, error)
}

// Quiescer is a provider of local homes that the gateway stops at shutdown
// (keeping their desired state) so that nothing outlives it. Remote
// providers do not implement it: their homes stay as they are.
type Quiescer interface {
	// Quiesce stops the processes of homes ids, in parallel, bounded by ctx.
	Quiesce(ctx context.Context, ids []string) []Quiesced
}

// StrayEnder is a provider of local homes that can find, at a gateway's
// start, the processes of homes that an earlier run of this gateway left
// and no longer answers for: one it started and died before it recorded
// (the record names another process, or none), one a fleet has since run
// elsewhere. The engine asks it once the homes are registered, under each
// home's lifecycle lock.
type StrayEnder interface {
	// Strays lists the homes that hold processes this provider neither
	// started nor adopted in this run.
	Strays() []string
	// EndStrays ends what home s holds of an earlier run, unless s.Ref
	// (the stored record's process) names a live process among it, or,
	// when mine (no other live gateway runs the home), the provider's own
	// record does: that process is the home's, to be adopted. It returns
	// the pids it ended.
	EndStrays(ctx context.Context, s Spec, mine bool) ([]int, error)
}

// Remover is a provider that keeps something of a stopped home (a
// container, a machine) which a removal of the home deletes. The engine
// calls Remove after the home's stop, under its lifecycle lock.
type Remover interface {
	// Remove deletes what the provider keeps of home s.
	Remove(ctx context.Context, s Spec) error
}

// Error is a provider's failure that the caller can act on: a reason code
// for operators and machines, an optional retry-after, and the cause. The
// wake engine turns it into the caller's answer: its RetryAfter becomes the
// Retry-After header (503), Reason and Hint reach the log and the admin
// API, never a public body.
type Error struct {
	// Op is the operation, "wake", "suspend", "stop", "recreate", "status"
	// or "version".
	Op string
	// Reason is a short snake_case code: one of the Reason constants, or
	// the provider's own.
	Reason string
	// RetryAfter, when positive, is how long the caller should wait before
	// trying again (a rate limit's or a capacity wait's).
	RetryAfter time.Duration
	// Hint is the operator's likely fix, if any.
	Hint string
	// Err is the cause.
	Err error
}

// Reason codes of Error.
const (
	ReasonRateLimited = "rate_limited" // the provider's API limits calls
	ReasonCapacity    = "capacity"     // no room to start the home now
	ReasonUnavailable = "unavailable"  // the provider's API does not answer
	ReasonNotFound    = "not_found"    // the provider has no such home
	ReasonRefused     = "refused"      // credentials or permissions refused
	ReasonConflict    = "conflict"     // another client holds the home (a lease)
	ReasonBadConfig   = "bad_config"   // the home's settings are wrong
)

// Error returns "op: reason: cause".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op + ": ")
	}
	if e.Reason != "" {
		b.WriteString(e.Reason)
	}
	if e.Err != nil {
		if e.Reason != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ReasonCode returns Reason.
func (e *Error) ReasonCode() string { return e.Reason }

// RetryAfterHint returns RetryAfter.
func (e *Error) RetryAfterHint() time.Duration { return e.RetryAfter }

// Reasoned is an error that says why in a reason code and how long the
// caller should wait: *Error, and a provider's own error types that carry
// more (a status, a machine id) with these two methods.
type Reasoned interface {
	error
	// ReasonCode is a short snake_case code, "" when none.
	ReasonCode() string
	// RetryAfterHint is how long to wait before trying again; zero when
	// the provider gave no hint.
	RetryAfterHint() time.Duration
}

// AsError returns the first *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}

// AsReasoned returns the first Reasoned error in err's chain.
func AsReasoned(err error) (Reasoned, bool) {
	var r Reasoned
	ok := errors.As(err, &r)
	return r, ok
}

var _ Reasoned = (*Error)(nil)
