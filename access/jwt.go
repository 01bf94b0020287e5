package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/wakegate/wakegate/fault"
)

// JWT allows requests that carry a valid signed token whose claim names the
// home they reach. The token is read from Authorization: Bearer, then the
// configured cookie, then the query parameter (removed before forwarding:
// StripQuery).
type JWT struct {
	cfg    JWTConfig
	parser *jwt.Parser
	// lenient checks only signatures (credentials.go).
	lenient *jwt.Parser
	keys    jwt.Keyfunc
	jwks    keyfunc.Keyfunc // nil with a shared secret
	stop    context.CancelFunc
}

// NewJWT builds a jwt policy from cfg (defaults filled). With a JWKS URL it
// fetches the set once, bounded by cfg.JWKSTimeout (a failure goes to
// onRefreshError and tokens are refused until a fetch succeeds), and keeps
// refreshing it until Close.
func NewJWT(cfg JWTConfig, onRefreshError func(error)) (*JWT, error) {
	opts := []jwt.ParserOption{jwt.WithValidMethods(cfg.Algorithms), jwt.WithLeeway(cfg.Leeway),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt()}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	p := &JWT{cfg: cfg, parser: jwt.NewParser(opts...),
		lenient: jwt.NewParser(jwt.WithValidMethods(cfg.Algorithms), jwt.WithoutClaimsValidation())}
	if cfg.Secret != "" {
		secret := []byte(cfg.Secret)
		p.keys = func(*jwt.Token) (any, error) { return secret, nil }
		return p, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	// One refresh for unknown keys per tenth of the refresh interval at
	// most: a rotation is picked up at its first token, and a flood of
	// made-up key ids costs one fetch per period.
	every := cfg.JWKSRefresh / 10
	// A JWKS that cannot be fetched at start does not stop the gateway:
	// the refresher logs it and tokens are refused until a fetch works.
	yes := true
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
		Client:            &http.Client{Timeout: cfg.JWKSTimeout},
		HTTPTimeout:       cfg.JWKSTimeout,
		RefreshInterval:   cfg.JWKSRefresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(every), 1),
		// The key set library bounds the fetch for an unknown key by this
		// wait too, not only the wait for the limiter: it must allow a
		// whole fetch. A wait the limiter cannot grant within it fails at
		// once, so a flood of unknown key ids still does not queue.
		RateLimitWaitMax:          cfg.JWKSTimeout,
		NoErrorReturnFirstHTTPReq: &yes,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				if onRefreshError != nil {
					onRefreshError(fmt.Errorf("refresh JWKS %s: %w", u, err))
				}
			}
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("jwt: JWKS %s: %w", cfg.JWKSURL, err)
	}
	p.jwks, p.stop = k, cancel
	return p, nil
}

// Close stops the JWKS refresher.
func (p *JWT) Close() {
	if p.stop != nil {
		p.stop()
	}
}

// Check allows r if it carries a valid token whose claim equals s.Target or
// s.Owner (any valid token for an app outside a home).
func (p *JWT) Check(ctx context.Context, r *http.Request, s Subject) (Decision, error) {
	raw, from := p.token(r)
	if raw == "" {
		return Decision{}, unauthorized("token_missing", "A token is required.", errors.New("no token in the request"))
	}
	keys := p.keys
	if p.jwks != nil {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.JWKSTimeout)
		defer cancel()
		keys = p.jwks.KeyfuncCtx(ctx)
	}
	claims := jwt.MapClaims{}
	if _, err := p.parser.ParseWithClaims(raw, claims, keys); err != nil {
		return Decision{}, tokenError(err)
	}
	who, _ := claims[p.cfg.Claim].(string)
	if s.Target != "" && (who == "" || (who != s.Target && who != s.Owner)) {
		return Decision{Who: who}, fault.Wrap(fault.Forbidden, "token_not_for_home", "This token does not give access to this home.",
			fmt.Errorf("claim %s %q names neither the target %q nor the owner %q", p.cfg.Claim, who, s.Target, s.Owner))
	}
	d := Decision{Who: who}
	if !p.cfg.ForwardToken {
		// The gateway's credential is for the gateway: the home gets the
		// request without it (the query parameter goes in any case).
		switch from {
		case fromHeader:
			d.Strip = []string{"Authorization"}
		case fromCookie:
			d.DropCookies = []string{p.cfg.Cookie}
		}
	}
	return d, nil
}

// Where a request's token came from.
const (
	fromHeader = iota + 1
	fromCookie
	fromQuery
)

// token returns the request's token and where it was found: Authorization:
// Bearer, the cookie, then the query parameter.
func (p *JWT) token(r *http.Request) (string, int) {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:]), fromHeader
	}
	if p.cfg.Cookie != "" {
		if c, err := r.Cookie(p.cfg.Cookie); err == nil && c.Value != "" {
			return c.Value, fromCookie
		}
	}
	if q := p.cfg.QueryParam; q != "-" && r.URL.RawQuery != "" {
		return r.URL.Query().Get(q), fromQuery
	}
	return "", 0
}

// QueryParam is the query parameter that may carry a token ("" for none):
// the gateway removes it before forwarding.
func (p *JWT) QueryParam() string {
	if p.cfg.QueryParam == "-" {
		return ""
	}
	return p.cfg.QueryParam
}

// tokenError names why a token was refused: the code says it in a word,
// the sentence for people, the cause keeps the library's words.
func tokenError(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthorized("token_expired", "The token has expired.", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return unauthorized("token_not_yet_valid", "The token is not valid yet.", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthorized("token_wrong_issuer", "The token was issued by another issuer.", err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthorized("token_wrong_audience", "The token is for another audience.", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return unauthorized("token_bad_signature", "The token's signature is not valid.", err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthorized("token_malformed", "The token is malformed.", err)
	}
	return unauthorized("token_invalid", "The token is not valid.", err)
}

func unauthorized(code, msg string, cause error) *fault.Error {
	e := fault.Wrap(fault.Unauthorized, code, msg, cause)
	e.Header = http.Header{"Www-Authenticate": {`Bearer realm="wakegate"`}}
	return e
}

var (
	_ Policy = (*JWT)(nil)
	_ Closer = (*JWT)(nil)
)
