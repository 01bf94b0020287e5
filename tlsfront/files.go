package tlsfront

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// fileCheckEvery bounds how often a handshake looks at the files' modification
// times; a change is served from the first handshake after it.
const fileCheckEvery = time.Second

// fileCert is the Files mode's certificate: loaded from a certificate and
// a key file, and loaded again at a handshake once either file changed. A
// pair that fails to load (half written, mismatched) is logged and the
// previous one keeps being served until the files change again. No
// goroutine watches the files: handshakes do, at most once a second.
type fileCert struct {
	certFile, keyFile string
	cur               atomic.Pointer[loadedCert]
	mu                sync.Mutex // one reload at a time
	checked           atomic.Int64
	log               *slog.Logger
	failedMod         time.Time // the certificate file's time at the last failed reload
}

type loadedCert struct {
	cert            *tls.Certificate
	certMod, keyMod time.Time
}

func loadFileCert(certFile, keyFile string, log *slog.Logger) (*fileCert, error) {
	fc := &fileCert{certFile: certFile, keyFile: keyFile, log: log}
	lc, err := fc.load()
	if err != nil {
		return nil, err
	}
	fc.cur.Store(lc)
	fc.checked.Store(time.Now().UnixNano())
	return fc, nil
}

func (fc *fileCert) load() (*loadedCert, error) {
	cm, km, err := fc.mtimes()
	if err != nil {
		return nil, err
	}
	c, err := tls.LoadX509KeyPair(fc.certFile, fc.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls files: %w", err)
	}
	return &loadedCert{cert: &c, certMod: cm, keyMod: km}, nil
}

func (fc *fileCert) mtimes() (time.Time, time.Time, error) {
	ci, err := os.Stat(fc.certFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls files: %w", err)
	}
	ki, err := os.Stat(fc.keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("tls files: %w", err)
	}
	return ci.ModTime(), ki.ModTime(), nil
}

// get returns the current certificate, reloading it first when the files
// changed since the last look (at most once per fileCheckEvery).
func (fc *fileCert) get() (*tls.Certificate, error) {
	cur := fc.cur.Load()
	last := fc.checked.Load()
	now := time.Now().UnixNano()
	if now-last < int64(fileCheckEvery) || !fc.checked.CompareAndSwap(last, now) {
		return cur.cert, nil
	}
	cm, km, err := fc.mtimes()
	if err != nil || (cm.Equal(cur.certMod) && km.Equal(cur.keyMod)) {
		return cur.cert, nil
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	lc, err := fc.load()
	if err != nil {
		// Keep serving the last good pair; the next look tries again.
		if !cm.Equal(fc.failedMod) {
			fc.failedMod = cm
			fc.log.Warn("certificate files changed but do not load; serving the previous pair", "err", err,
				"hint", "write the key and the certificate to temporary files and rename them into place")
		}
		return cur.cert, nil
	}
	fc.log.Info("certificate files reloaded", "cert_file", fc.certFile)
	fc.cur.Store(lc)
	return lc.cert, nil
}
