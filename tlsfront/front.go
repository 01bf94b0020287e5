// Package tlsfront is wakegate's TLS front door: the certificates the
// public listener serves, in one of five modes (off, files, internal, acme,
// on_demand), the on-demand decision, and the plain-HTTP side that answers
// ACME HTTP-01 challenges and redirects everything else to HTTPS.
//
// Managed certificates (internal, acme, on_demand) go through certmagic:
// its cache renews them in the background, and its Storage seam holds them
// (file storage under the data directory by default; any
// certmagic.Storage can be passed in).
//
// DESIGN: the TLS part of the edge (certificates, on-demand issuance
// limits); the framing check of rule 24 runs above it.
package tlsfront

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
	"go.uber.org/zap"
)

// Mode is how the front door gets its certificates.
type Mode string

// The modes of Options.Mode.
const (
	// Off serves plain HTTP; no Front is built.
	Off Mode = "off"
	// Files serves one certificate and key from files, reloaded when they
	// change.
	Files Mode = "files"
	// Internal issues certificates for Names from a local CA kept in the
	// data directory (for development); RootPEM prints its root.
	Internal Mode = "internal"
	// ACME obtains and renews certificates for Names from an ACME CA.
	ACME Mode = "acme"
	// OnDemand obtains a certificate from an ACME CA at the first
	// handshake for a name that Options.Decider allows.
	OnDemand Mode = "on_demand"
)

// EAB is an ACME external account binding, which some CAs require.
type EAB struct {
	// KeyID is the key identifier the CA gave.
	KeyID string
	// MACKey is the base64url HMAC key the CA gave.
	MACKey string
}

// Options configure a Front. The caller fills defaults; New checks that
// the mode has what it needs.
type Options struct {
	// Mode is Files, Internal, ACME or OnDemand.
	Mode Mode
	// Names are the host names to manage (Internal, ACME).
	Names []string
	// CertFile and KeyFile are the PEM files of Files.
	CertFile, KeyFile string
	// CA is the ACME directory URL (ACME, OnDemand).
	CA string
	// Email is the ACME account's e-mail address.
	Email string
	// ClassicalKeyExchange limits handshakes to X25519 and P-256, leaving
	// out Go's default post-quantum hybrid (X25519MLKEM768): cheaper
	// handshakes, no protection of recorded traffic against a future
	// quantum computer.
	ClassicalKeyExchange bool
	// TrustedRoots are extra roots trusted for the CA's own TLS (a test
	// CA); nil means the system's.
	TrustedRoots *x509.CertPool
	// EAB is the external account binding; nil means none.
	EAB *EAB
	// AltHTTPPort and AltTLSALPNPort are the ports the CA validates
	// HTTP-01 and TLS-ALPN-01 challenges on, when they are not 80 and
	// 443 (the listeners' own ports). Zero means the standard port.
	AltHTTPPort, AltTLSALPNPort int
	// HTTP01 and TLSALPN01 enable the ACME challenge types.
	HTTP01, TLSALPN01 bool
	// DataDir holds the default certificate storage (DataDir/certificates)
	// and the internal CA (DataDir/internal-ca).
	DataDir string
	// Storage holds certificates, keys and ACME accounts. Default (nil):
	// file storage under DataDir.
	Storage certmagic.Storage
	// Decider allows or refuses on-demand names (OnDemand; required).
	Decider *Decider
	// Override, when set, is asked first at every handshake; a non-nil
	// certificate is served as is (the gateway's self-probe certificate).
	Override func(*tls.ClientHelloInfo) *tls.Certificate
	// OnEvent receives certificate events (obtained, renewed, failed);
	// it must return quickly. Default none.
	OnEvent func(Event)
	// Log receives the operator's messages. Default slog.Default().
	Log *slog.Logger
}

// Event is a certificate event from the front door.
type Event struct {
	// Name is certmagic's event name: cert_obtained, cert_failed, ...
	Name string
	// Identifier is the host name concerned, when there is one.
	Identifier string
	// Renewal is true for a renewal's events.
	Renewal bool
	// Err is the failure's cause, for cert_failed.
	Err error
}

// Front serves certificates for the public TLS listener. Start begins the
// background management; Close ends it.
type Front struct {
	opts     Options
	log      *slog.Logger
	cache    *certmagic.Cache
	magic    *certmagic.Config
	issuer   *certmagic.ACMEIssuer // ACME and OnDemand
	files    *fileCert             // Files
	ca       *LocalCA              // Internal
	inv      *inventory            // names and their last events
	ctx      context.Context
	cancel   context.CancelFunc
	stopOnce sync.Once
}

// New builds the front door for opts. It loads what it can check at once
// (files, the internal CA) and obtains nothing yet: Start does, once the
// listeners that answer challenges are up.
func New(opts Options) (*Front, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	f := &Front{opts: opts, log: opts.Log, inv: newInventory(opts.Names)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	var err error
	switch opts.Mode {
	case Files:
		f.files, err = loadFileCert(opts.CertFile, opts.KeyFile, f.log)
		return f, err
	case Internal:
		if f.ca, err = OpenLocalCA(filepath.Join(opts.DataDir, "internal-ca")); err != nil {
			return nil, err
		}
		f.newMagic(f.ca)
		return f, nil
	case ACME, OnDemand:
		if opts.Mode == OnDemand && opts.Decider == nil {
			return nil, errors.New("tls: on_demand needs a decision (a domain for host routing or an allow list)")
		}
		f.newMagic(nil)
		return f, nil
	}
	return nil, fmt.Errorf("tls: unknown mode %q", opts.Mode)
}

// newMagic builds the certmagic cache and config; issuer nil means ACME.
func (f *Front) newMagic(issuer certmagic.Issuer) {
	storage := f.opts.Storage
	if storage == nil {
		storage = &certmagic.FileStorage{Path: filepath.Join(f.opts.DataDir, "certificates")}
	}
	nop := zap.NewNop()
	f.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return f.magic, nil },
		Logger:           nop,
	})
	tmpl := certmagic.Config{Storage: storage, Logger: nop, OnEvent: f.onEvent}
	if f.opts.Mode == OnDemand {
		tmpl.OnDemand = &certmagic.OnDemandConfig{DecisionFunc: f.opts.Decider.Decide}
	}
	if f.opts.Mode == Internal && len(f.opts.Names) > 0 {
		// Clients that dial an address send no server name.
		tmpl.DefaultServerName = f.opts.Names[0]
	}
	f.magic = certmagic.New(f.cache, tmpl)
	if issuer != nil {
		f.magic.Issuers = []certmagic.Issuer{issuer}
		return
	}
	am := certmagic.ACMEIssuer{
		CA: f.opts.CA, Email: f.opts.Email, Agreed: true, TrustedRoots: f.opts.TrustedRoots,
		AltHTTPPort: f.opts.AltHTTPPort, AltTLSALPNPort: f.opts.AltTLSALPNPort, Logger: nop,
		DisableHTTPChallenge: !f.opts.HTTP01, DisableTLSALPNChallenge: !f.opts.TLSALPN01,
	}
	if e := f.opts.EAB; e != nil {
		am.ExternalAccount = &acme.EAB{KeyID: e.KeyID, MACKey: e.MACKey}
	}
	f.issuer = certmagic.NewACMEIssuer(f.magic, am)
	f.magic.Issuers = []certmagic.Issuer{f.issuer}
}

// onEvent records certmagic's obtained and failed events for the
// inventory (inventory.go), logs them with what an operator can do, and
// forwards them to Options.OnEvent.
func (f *Front) onEvent(_ context.Context, name string, data map[string]any) error {
	if name != "cert_obtained" && name != "cert_failed" {
		return nil
	}
	ev := Event{Name: name}
	ev.Identifier, _ = data["identifier"].(string)
	ev.Renewal, _ = data["renewal"].(bool)
	ev.Err, _ = data["error"].(error)
	f.inv.record(ev)
	if name == "cert_obtained" {
		f.log.Info("certificate obtained", "name", ev.Identifier, "renewal", ev.Renewal)
	} else {
		f.log.Warn("certificate not obtained", "name", ev.Identifier, "renewal", ev.Renewal, "err", ev.Err,
			"hint", "check that the name resolves to this gateway, that ports 80 and 443 reach it, and the CA's message")
	}
	if f.opts.OnEvent != nil {
		f.opts.OnEvent(ev)
	}
	return nil
}

// Start begins managing the configured names in the background (ACME,
// Internal): obtained or loaded from storage, then renewed. It returns at
// once; events report the outcome. Call it once the listeners that answer
// challenges serve.
func (f *Front) Start() error {
	if f.magic == nil || len(f.opts.Names) == 0 || f.opts.Mode == OnDemand {
		return nil
	}
	if err := f.magic.ManageAsync(f.ctx, f.opts.Names); err != nil {
		return fmt.Errorf("tls: manage %v: %w", f.opts.Names, err)
	}
	return nil
}

// TLSConfig is the public listener's TLS configuration: TLS 1.2 at least,
// HTTP/2 and HTTP/1.1 by ALPN (and ACME's TLS-ALPN-01 protocol when an
// ACME CA is used).
func (f *Front) TLSConfig() *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: f.getCertificate,
	}
	if f.opts.ClassicalKeyExchange {
		// Go's default list puts the post-quantum hybrid first.
		c.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}
	}
	if f.issuer != nil && f.opts.TLSALPN01 {
		c.NextProtos = append(c.NextProtos, "acme-tls/1")
	}
	return c
}

// errNoServerName refuses a handshake without SNI where a name decides the
// certificate.
var errNoServerName = errors.New("tls: the client sent no server name")

func (f *Front) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if f.opts.Override != nil {
		if c := f.opts.Override(hello); c != nil {
			return c, nil
		}
	}
	switch {
	case f.files != nil:
		return f.files.get()
	case hello.ServerName == "" && f.issuer != nil:
		return nil, errNoServerName
	}
	return f.magic.GetCertificate(hello)
}

// Root returns the internal CA's root certificate in PEM, or nil outside
// the Internal mode.
func (f *Front) Root() []byte {
	if f.ca == nil {
		return nil
	}
	return f.ca.RootPEM()
}

// Close stops background management (renewals, maintenance). It is safe
// after a failed New and more than once.
func (f *Front) Close() {
	if f == nil {
		return
	}
	f.stopOnce.Do(func() {
		f.cancel()
		if f.cache != nil {
			f.cache.Stop()
		}
	})
}

// SetChallengePorts tells the ACME issuer where the gateway's own
// listeners answer challenges: host, the plain-HTTP port (zero: none) and
// the HTTPS port. certmagic then finds those ports taken and relies on the
// gateway's handlers instead of listening itself. Call it before Start.
func (f *Front) SetChallengePorts(host string, httpPort, tlsPort int) {
	if f.issuer == nil {
		return
	}
	f.issuer.ListenHost = host
	if f.issuer.AltHTTPPort == 0 {
		f.issuer.AltHTTPPort = httpPort
	}
	if f.issuer.AltTLSALPNPort == 0 {
		f.issuer.AltTLSALPNPort = tlsPort
	}
	if httpPort == 0 {
		f.issuer.DisableHTTPChallenge = true
	}
}
