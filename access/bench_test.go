package access

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkCheck measures one policy decision: public, and jwt over an
// HS256 secret and over an ES256 key from a JWKS (cached).
func BenchmarkCheck(b *testing.B) {
	secret := strings.Repeat("s", 32)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := key.PublicKey.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "k", "x": enc(pub[1:33]), "y": enc(pub[33:])}}})
	}))
	defer jwks.Close()
	claims := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	hsTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	esT := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	esT.Header["kid"] = "k"
	esTok, _ := esT.SignedString(key)

	mk := func(c JWTConfig) Policy {
		cfg := Config{Default: "p", Policies: []PolicyConfig{{Name: "p", Type: "jwt", JWT: c}}}
		cfg.Defaults()
		p, err := NewJWT(cfg.Policies[0].JWT, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	s := Subject{Kind: "node", Name: "alice", Target: "alice"}
	for _, c := range []struct {
		name  string
		p     Policy
		token string
	}{
		{"public", Public{}, ""},
		{"jwt-HS256", mk(JWTConfig{Secret: secret}), hsTok},
		{"jwt-ES256", mk(JWTConfig{JWKSURL: jwks.URL}), esTok},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/node/alice/x", nil)
			r.Header.Set("Authorization", "Bearer "+c.token)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.p.Check(ctx, r, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
