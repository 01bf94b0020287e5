package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// The record commands read, write and remove the admin API's records:
//
//	wakegate home get|put|delete ID
//	wakegate app get|put|delete SLUG
//	wakegate target get|set [VERSION]
//
// put and set take a JSON body from --file (- for stdin) and fields as
// arguments, key=value for a string and key:=JSON for any other value
// (they win over the file's). Writes send If-Match with the generation
// read just before, so that a change made meanwhile by someone else is
// refused instead of overwritten; --if-match N pins the generation the
// caller read earlier, --force sends none.

const recordUsage = `record commands (each with --json for the API's JSON answer):
  home get|delete ID                the home with its last wakes, sessions and restarts; remove it
  home put ID [--file F] [key=value | key:=JSON ...]
                                    register or replace a home (target, version, relay_token,
                                    idle_timeout, probe)
  app get|delete SLUG               the app with its phase history and route state; remove it
  app put SLUG [--file F] [key=value | key:=JSON ...]
                                    register or replace an app (home, upstream, path, kind, ...)
  target get                        the roll target
  target set VERSION [--file F] [key=value ...]
                                    register the roll target (image, command)
  writes send If-Match with the generation read just before (--if-match N: the one you
  read; --force: none, overwrite whatever is there); a stale one exits 1 and says so
`

// recordKind is what the record commands need to know of a kind of record.
type recordKind struct {
	name  string                        // "home", "app", "target"
	path  func(id string) string        // its admin API path
	print func(io.Writer, []byte) error // its human form
	verbs map[string]bool               // what it accepts besides get
	noID  bool                          // target: one record, no id
	usage string                        // printed on a usage error
}

var recordKinds = map[string]recordKind{
	"home": {name: "home", path: func(id string) string { return "/admin/homes/" + url.PathEscape(id) },
		print: printHomeDetail, verbs: map[string]bool{"put": true, "delete": true},
		usage: "usage: wakegate home get|put|delete ID [--json] [--force | --if-match N] [--file F] [key=value ...]\n"},
	"app": {name: "app", path: func(id string) string { return "/admin/apps/" + url.PathEscape(id) },
		print: printAppDetail, verbs: map[string]bool{"put": true, "delete": true},
		usage: "usage: wakegate app get|put|delete SLUG [--json] [--force | --if-match N] [--file F] [key=value ...]\n"},
	"target": {name: "target", path: func(string) string { return "/admin/target" },
		print: printTarget, verbs: map[string]bool{"set": true}, noID: true,
		usage: "usage: wakegate target get | target set VERSION [--json] [--force | --if-match N] [--file F] [key=value ...]\n"},
}

// isRecordVerb reports whether verb is a record command of kind.
func isRecordVerb(kind, verb string) bool {
	k, ok := recordKinds[kind]
	return ok && (verb == "get" || k.verbs[verb])
}

// recordOpts are the parsed flags and arguments of one record command.
type recordOpts struct {
	verb, id string
	fields   []string // key=value and key:=JSON arguments
	asJSON   bool
	force    bool
	ifMatch  string
	file     string
}

// recordCmd runs `KIND get|put|delete|set ...`.
func recordCmd(kindName string, args []string, stdout, stderr io.Writer) int {
	k := recordKinds[kindName]
	fs := flag.NewFlagSet(kindName, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o recordOpts
	fs.BoolVar(&o.asJSON, "json", false, "print the admin API's JSON answer")
	fs.BoolVar(&o.force, "force", false, "write without If-Match, over whatever is stored")
	fs.StringVar(&o.ifMatch, "if-match", "", "the generation you read (default: the one read just before writing)")
	fs.StringVar(&o.file, "file", "", "a JSON body for put/set (- for stdin)")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if msg := o.take(k, pos); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n%s", kindName, msg, k.usage)
		return 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", kindName, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, err := o.run(ctx, c, k)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "%s %s: %v\n", kindName, o.verb, err)
			return 2
		}
		fmt.Fprintf(stderr, "%s %s%s: %s\n", kindName, o.verb, strings.TrimRight(" "+o.id, " "), explainAdminError(k, o.id, err))
		return 1
	}
	switch {
	case o.verb == "delete":
		if !o.asJSON {
			fmt.Fprintf(stdout, "%s %s removed\n", kindName, o.id)
		}
	case o.asJSON:
		printJSON(stdout, body)
	default:
		if err := k.print(stdout, body); err != nil {
			fmt.Fprintf(stderr, "%s: bad answer: %v\n", kindName, err)
			return 1
		}
	}
	return 0
}

// take reads the positional arguments: the verb, the id (the version for
// target set) and the fields. It returns a usage problem, "" when none.
func (o *recordOpts) take(k recordKind, pos []string) string {
	if len(pos) == 0 || !isRecordVerb(k.name, pos[0]) {
		return "want a command"
	}
	o.verb, pos = pos[0], pos[1:]
	switch {
	case k.noID && o.verb == "get":
	case len(pos) == 0:
		if k.noID {
			return "want the version"
		}
		return "want the " + k.name + "'s id"
	default:
		o.id, pos = pos[0], pos[1:]
	}
	if o.verb == "get" || o.verb == "delete" {
		if len(pos) > 0 || o.file != "" {
			return o.verb + " takes no body"
		}
	}
	for _, f := range pos {
		if !strings.Contains(f, "=") {
			return fmt.Sprintf("unexpected argument %q: want key=value or key:=JSON", f)
		}
	}
	if o.force && o.ifMatch != "" {
		return "--force and --if-match exclude each other"
	}
	if o.ifMatch != "" {
		if n, err := strconv.ParseUint(o.ifMatch, 10, 64); err != nil || n == 0 {
			return fmt.Sprintf("--if-match: want a generation such as 7, got %q", o.ifMatch)
		}
	}
	o.fields = pos
	return ""
}

// usageError is a mistake in the command's body arguments.
type usageError struct{ error }

// run sends the command's requests and returns the answer's body.
func (o *recordOpts) run(ctx context.Context, c *adminClient, k recordKind) ([]byte, error) {
	path := k.path(o.id)
	if o.verb == "get" {
		return c.do(ctx, http.MethodGet, path)
	}
	var reqBody []byte
	method := http.MethodDelete
	if o.verb != "delete" {
		method = http.MethodPut
		b, err := o.body(k)
		if err != nil {
			return nil, usageError{err}
		}
		reqBody = b
	}
	ifm, err := o.precondition(ctx, c, path)
	if err != nil {
		return nil, err
	}
	body, _, err := c.send(ctx, method, path, reqBody, ifm)
	return body, err
}

// precondition is the If-Match to send: none with --force, the pinned
// generation with --if-match, else the ETag of the record as read now
// (none when it does not exist yet).
func (o *recordOpts) precondition(ctx context.Context, c *adminClient, path string) (string, error) {
	switch {
	case o.force:
		return "", nil
	case o.ifMatch != "":
		return strconv.Quote(o.ifMatch), nil
	}
	_, etag, err := c.send(ctx, http.MethodGet, path, nil, "")
	var ae *adminAPIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return "", nil
	}
	return etag, err
}

// body builds the JSON body of a put or set: the file's object, then the
// fields, then (target set) the version.
func (o *recordOpts) body(k recordKind) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if o.file != "" {
		var raw []byte
		var err error
		if o.file == "-" {
			raw, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		} else {
			raw, err = os.ReadFile(o.file)
		}
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("--file %s: want a JSON object: %w", o.file, err)
		}
	}
	for _, f := range o.fields {
		if key, val, ok := strings.Cut(f, ":="); ok && !strings.Contains(key, "=") {
			if !json.Valid([]byte(val)) {
				return nil, fmt.Errorf("%s: the value after := is not JSON", key)
			}
			obj[key] = json.RawMessage(val)
			continue
		}
		key, val, _ := strings.Cut(f, "=")
		b, _ := json.Marshal(val)
		obj[key] = b
	}
	if k.noID {
		b, _ := json.Marshal(o.id)
		obj["version"] = b
	}
	return json.Marshal(obj)
}

// explainAdminError is err for a person; a stale If-Match says what
// happened and what to do.
func explainAdminError(k recordKind, id string, err error) string {
	var ae *adminAPIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Field != "If-Match" {
		return err.Error()
	}
	what := k.name
	get := "wakegate " + k.name + " get"
	if !k.noID {
		what += " " + id
		get += " " + id
	}
	return fmt.Sprintf("the %s changed since it was read (%s).\n"+
		"  Nothing was written. Read it again (%s) and retry, or pass --force to write over it.", what, ae.Message, get)
}

// printJSON prints an answer indented.
func printJSON(w io.Writer, body []byte) {
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	_, _ = w.Write(bytes.TrimRight(out.Bytes(), "\n"))
	fmt.Fprintln(w)
}

// targetCmd runs `target get|set`.
func targetCmd(args []string, stdout, stderr io.Writer) int {
	return recordCmd("target", args, stdout, stderr)
}

// printTarget prints the roll target.
func printTarget(w io.Writer, body []byte) error {
	var t struct {
		Version    string    `json:"version"`
		Image      string    `json:"image"`
		Command    []string  `json:"command"`
		BadVersion string    `json:"bad_version"`
		UpdatedAt  time.Time `json:"updated_at"`
		Generation uint64    `json:"generation"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return fmt.Errorf("decode target: %w", err)
	}
	fmt.Fprintf(w, "target version %s (generation %d, updated %s)\n", cell(t.Version), t.Generation, when(t.UpdatedAt))
	if t.Image != "" {
		fmt.Fprintln(w, "image:", t.Image)
	}
	if len(t.Command) > 0 {
		fmt.Fprintln(w, "command:", strings.Join(t.Command, " "))
	}
	if t.BadVersion != "" {
		note := ""
		if t.BadVersion == t.Version {
			note = ": no home rolls onto it until a newer target is registered"
		}
		fmt.Fprintf(w, "bad version: %s%s\n", cell(t.BadVersion), note)
	}
	return nil
}

// when is a time for people, local.
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// dur is milliseconds for people: "850 ms", "1.25 s".
func dur(ms float64) string {
	if ms < 1000 {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.2f s", ms/1000)
}

// secs is seconds for people, rounded: "4m59s".
func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}
