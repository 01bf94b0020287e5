package control

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// StoreFile is the embedded store's file name inside data_dir.
const StoreFile = "state.db"

// openStore opens the embedded store under dataDir. A store file that
// exists but cannot be trusted (empty, damaged, holding records that do
// not decode) is refused and left as it is (bolt.OpenError says what
// to do), and so is a missing one while data_dir holds home folders: either
// would forget every home and the roll target. The config's ResetStore
// says the operator chose to start afresh: a refused file is then moved
// aside (named in the log) and a new store begins; a sound file is opened
// as always. Locks a crashed gateway left are released and logged.
func OpenStore(dataDir string, resetStore bool, log *slog.Logger) (*bolt.Store, error) {
	path := filepath.Join(dataDir, StoreFile)
	homes := homeFolders(dataDir)
	opts := bolt.Options{}
	if !resetStore {
		opts.MustHoldData = homes
	}
	_, statErr := os.Stat(path)
	fresh := statErr != nil
	b, err := bolt.Open(path, opts)
	var oe *bolt.OpenError
	if err != nil && resetStore && errors.As(err, &oe) &&
		(oe.Problem == bolt.ProblemEmpty || oe.Problem == bolt.ProblemDamaged || oe.Problem == bolt.ProblemBadRecord) {
		aside := fmt.Sprintf("%s.refused-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("--reset-store: move the refused store aside: %w (the store was refused: %w)", rerr, err)
		}
		log.Warn("--reset-store: the store was refused and is moved aside; starting with a new, empty store: "+
			"stored homes, apps registered through the admin API and the roll target are forgotten",
			"store", path, "moved_to", aside, "why", err.Error())
		fresh = true
		b, err = bolt.Open(path, bolt.Options{})
	}
	if err != nil {
		return nil, err
	}
	if m := b.Migration(); m.Backup != "" {
		log.Info("store migrated to this version's format; the file as it was is kept", "store", path,
			"from_version", m.From, "to_version", bolt.Schema, "copy", m.Backup)
	}
	if pid := b.LeftOpenBy(); pid != 0 {
		log.Info("the last gateway on this data_dir did not stop cleanly: homes it was waking, rolling or suspending are settled now",
			"store", path, "pid", pid)
	}
	if names := b.ReleasedLocks(); len(names) > 0 {
		log.Info("released lifecycle locks left by a gateway that did not stop cleanly", "locks", strings.Join(names, ","))
	}
	if fresh && homes != "" {
		log.Warn("started with a new, empty store (--reset-store): stored homes and the roll target are forgotten",
			"store", path, "data_dir", homes)
	}
	return b, nil
}

// homeFolders describes the home folders of the exec provider under
// dataDir ("data_dir holds home folders (homes/h1, homes/h2)"), or returns
// "" when there are none: a data_dir that has run homes before.
func homeFolders(dataDir string) string {
	entries, err := os.ReadDir(filepath.Join(dataDir, "homes"))
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, "homes/"+e.Name())
		}
	}
	if len(names) == 0 {
		return ""
	}
	more := ""
	if len(names) > 3 {
		more = fmt.Sprintf(" and %d more", len(names)-3)
		names = names[:3]
	}
	return fmt.Sprintf("data_dir holds home folders (%s%s)", strings.Join(names, ", "), more)
}

// storeBackup is a store that can copy itself while it serves.
type storeBackup interface {
	Backup(w io.Writer, size func(int64)) (int64, error)
}

// BackupHandler serves GET /admin/store/backup: a consistent copy of
// store from one read transaction (bbolt's Tx.WriteTo), with its size as
// Content-Length, so `wakegate store backup` can copy a running gateway's
// store. nil when the store cannot copy itself.
func BackupHandler(store registry.Store, log *slog.Logger) http.Handler {
	b, ok := store.(storeBackup)
	if !ok {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := b.Backup(w, func(size int64) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="state.db"`)
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
			w.WriteHeader(http.StatusOK)
		})
		if err != nil {
			// The status is sent: a short body (Content-Length) tells the
			// client the copy is incomplete.
			log.Warn("store backup", "bytes", n, "err", err)
			return
		}
		log.Info("store backup", "bytes", n, "remote", r.RemoteAddr)
	})
}
