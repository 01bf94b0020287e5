package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// tokenKey is the request context key of the name of the token that
// authorised the request.
type tokenKey struct{}

// tokenName names the token at position i of admin.tokens in the log: its
// position and the first bytes of its SHA-256, which tell tokens apart
// without revealing them.
func tokenName(i int, sum [sha256.Size]byte) string {
	return fmt.Sprintf("admin.tokens[%d] sha256:%s", i, hex.EncodeToString(sum[:4]))
}

// logWrites logs every admin request that changes something (any method
// but GET, HEAD and OPTIONS) once it is answered: who (the token's name),
// what (method and path), the status and the request id. Reads are not
// logged: the dashboard polls.
func (s *Server) logWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		token, _ := r.Context().Value(tokenKey{}).(string)
		s.log.Info("admin write", "token", token, "method", r.Method, "path", r.URL.Path,
			"status", rec.code(), "ms", float64(time.Since(start).Microseconds())/1000,
			"remote", r.RemoteAddr, "request_id", w.Header().Get("X-Request-Id"))
	})
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records code and passes it on.
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

// Flush passes a flush on, for streamed answers.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
