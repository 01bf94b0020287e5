package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/registry/bolt"
)

// The store commands work on the embedded store, data_dir/state.db:
//
//	wakegate store check [--config FILE | --file PATH]
//	wakegate store backup [--config FILE] [--admin URL] [--token T] FILE
//	wakegate store drop [--config FILE | --file PATH] BUCKET/KEY...
//
// check opens the file read-only (so it needs the gateway stopped, or a
// backup to look at), checks every page and every record, prints the
// records per bucket and each problem, and exits 0 when the store is sound,
// 1 otherwise.
//
// backup writes a consistent copy to FILE (through a temp file, renamed
// when complete), then checks the copy. With the gateway stopped it reads
// the file directly; while a gateway holds it, the copy comes from that
// gateway's admin API (GET /admin/store/backup, bbolt's Tx.WriteTo inside
// one read transaction, so writes go on meanwhile), reached with --admin
// and --token or WAKEGATE_ADMIN and WAKEGATE_TOKEN.
//
// drop deletes records that cannot be read (a start refusal or a check
// names them as bucket/key, "homes/h1"), with the gateway stopped, so the
// store opens again with every other record kept.

const storeUsage = `usage: wakegate store check [--config FILE | --file PATH]
       wakegate store backup [--config FILE] [--admin URL] [--token T] FILE
       wakegate store drop [--config FILE | --file PATH] BUCKET/KEY...
`

func storeCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, storeUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return storeCheck(args[1:], stdout, stderr)
	case "backup":
		return storeBackup(args[1:], stdout, stderr)
	case "drop":
		return storeDrop(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, storeUsage)
	return 2
}

// storePath is the store file of the config at path (the embedded config
// when "").
func storePath(config string) (string, error) {
	cfg, err := loadConfig(config)
	if err != nil {
		return "", err
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return "", fmt.Errorf("data_dir: %w", err)
	}
	return filepath.Join(dir, control.StoreFile), nil
}

// printOpenError prints why a store could not be read, and what to do.
func printOpenError(w io.Writer, cmd string, err error) {
	fmt.Fprintf(w, "store %s: %v\n", cmd, err)
	var oe *bolt.OpenError
	if !errors.As(err, &oe) {
		return
	}
	hint := oe.Hint()
	if oe.Problem == bolt.ProblemInUse && cmd == "drop" {
		hint = "stop the gateway first: drop writes to the file, which one process holds at a time"
	}
	if oe.Problem == bolt.ProblemInUse && cmd == "check" {
		hint = "check reads the file with no gateway running; to check a running gateway's store, " +
			"take a backup (wakegate store backup FILE) and check that: wakegate store check --file FILE"
	}
	fmt.Fprintf(w, "  what to do: %s\n", hint)
}

func storeCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "config file whose data_dir holds the store (default: the embedded config.yaml)")
	file := fs.String("file", "", "check this store file (a backup) instead of the config's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || (*config != "" && *file != "") {
		fmt.Fprint(stderr, storeUsage)
		return 2
	}
	path := *file
	if path == "" {
		var err error
		if path, err = storePath(*config); err != nil {
			printConfigError(stderr, err)
			return 1
		}
	}
	r, err := bolt.Check(path)
	if err != nil {
		printOpenError(stderr, "check", err)
		return 1
	}
	return printReport(stdout, r)
}

// printReport prints a check's report and returns the exit status.
func printReport(w io.Writer, r bolt.Report) int {
	fmt.Fprintf(w, "store %s: %d bytes\n", r.Path, r.Size)
	for _, name := range r.Buckets() {
		fmt.Fprintf(w, "  %s: %d\n", name, r.Records[name])
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "store %s is damaged: %d problems\n", r.Path, len(r.Problems))
		return 1
	}
	fmt.Fprintln(w, "store is sound")
	return 0
}

func storeDrop(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store drop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "config file whose data_dir holds the store (default: the embedded config.yaml)")
	file := fs.String("file", "", "drop from this store file instead of the config's")
	refs, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(refs) == 0 || (*config != "" && *file != "") {
		fmt.Fprint(stderr, storeUsage)
		return 2
	}
	path := *file
	if path == "" {
		if path, err = storePath(*config); err != nil {
			printConfigError(stderr, err)
			return 1
		}
	}
	if err := bolt.DropRecords(path, refs); err != nil {
		printOpenError(stderr, "drop", err)
		return 1
	}
	for _, ref := range refs {
		fmt.Fprintf(stdout, "dropped %s from %s\n", ref, path)
	}
	return 0
}

func storeBackup(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "config file whose data_dir holds the store (default: the embedded config.yaml)")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, storeUsage)
		return 2
	}
	dst, err := filepath.Abs(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "store backup:", err)
		return 2
	}
	path, err := storePath(*config)
	if err != nil {
		printConfigError(stderr, err)
		return 1
	}
	n, err := bolt.BackupFile(path, dst)
	var oe *bolt.OpenError
	if errors.As(err, &oe) && oe.Problem == bolt.ProblemInUse {
		// A gateway holds the store: it writes the copy.
		c, cerr := client()
		if cerr != nil {
			fmt.Fprintf(stderr, "store backup: %s is in use by a running gateway, whose admin API makes the copy: %v\n", path, cerr)
			return 1
		}
		n, err = c.backup(dst)
	}
	if err != nil {
		printOpenError(stderr, "backup", err)
		return 1
	}
	r, err := bolt.Check(dst)
	if err != nil || len(r.Problems) > 0 {
		fmt.Fprintf(stderr, "store backup: the copy %s does not pass its check (%v %v)\n", dst, err, r.Problems)
		return 1
	}
	fmt.Fprintf(stdout, "backup of %s written to %s (%d bytes)\n", path, dst, n)
	return 0
}

// backup fetches a copy of the running gateway's store into dst.
func (c *adminClient) backup(dst string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/admin/store/backup", nil)
	if err != nil {
		return 0, fmt.Errorf("admin request: %w", err)
	}
	c.authorize(req)
	res, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("admin request: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return 0, fmt.Errorf("admin request: %s: %s", res.Status, body)
	}
	want, _ := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64)
	return bolt.WriteFileAtomic(dst, func(w io.Writer) (int64, error) {
		n, err := io.Copy(w, res.Body)
		if err == nil && want > 0 && n != want {
			err = fmt.Errorf("the copy ended after %d of %d bytes", n, want)
		}
		return n, err
	})
}
