package admin

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// The one decoder of admin request bodies (homes, apps, the target,
// leases). encoding/json on its own is lenient where an API that changes
// state must not be: it matches keys in any case ("Target" sets target),
// lets the last of duplicate keys win, ignores what follows the first
// value ({"target":"x1"} {"evil":1}) and takes null for an empty object.
// Decode first walks the body's tokens against the type it decodes into
// and refuses each of those, naming the key; only then does encoding/json
// fill the value.

const (
	// maxBody bounds an admin request body, in bytes.
	maxBody = 64 << 10
	// maxDepth bounds how deeply objects and arrays nest in a body.
	maxDepth = 32
	// maxKeyShown bounds how much of a refused key an error repeats.
	maxKeyShown = 64
)

// Body is a request's JSON body, read and not yet decoded.
type Body struct{ raw []byte }

// BodyOf returns a Body holding raw (for tests and tools).
func BodyOf(raw []byte) Body { return Body{raw: raw} }

// readBody reads r's body, up to maxBody.
func readBody(r *http.Request) (Body, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Body{}, tooLarge(err)
	}
	if err != nil {
		return Body{}, fault.Wrap(fault.Invalid, "bad_request", "body: the body could not be read", err).WithField("body")
	}
	return Body{raw: b}, nil
}

// decodeBody reads and decodes r's body into v.
func decodeBody(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return b.Decode(v)
}

func tooLarge(err error) error {
	return fault.Wrap(fault.TooLarge, "body_too_large", fmt.Sprintf("body: the body is over %d bytes", maxBody), err).WithField("body")
}

// Decode decodes the body into v (a pointer to a struct): exactly one JSON
// object, then nothing but white space; keys spelled exactly as the
// fields' JSON names, none unknown and none twice, at every level; at most
// maxDepth levels deep and maxBody bytes long. A refusal is a fault.Invalid
// (fault.TooLarge for the size) whose Field names the key at fault, as a
// path such as "health.path", or "body" for the body as a whole.
func (b Body) Decode(v any) error {
	if len(b.raw) > maxBody {
		return tooLarge(fmt.Errorf("%d bytes", len(b.raw)))
	}
	if err := scanBody(b.raw, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b.raw))
	dec.DisallowUnknownFields() // the scan refused them already; kept as a second guard
	if err := dec.Decode(v); err != nil {
		return decodeFault(err)
	}
	return nil
}

// decodeFault names the field of a value encoding/json could not decode.
func decodeFault(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Type == reflect.TypeFor[registry.Duration]():
		return bad(te.Field, fmt.Sprintf("want a duration such as 2s, got %s", te.Value), err)
	case errors.As(err, &te) && te.Field != "":
		return bad(te.Field, "want a "+te.Type.String(), err)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return bad("body", "want one JSON object", err)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return bad(strings.Trim(f, `"`), "unknown field", err)
	}
	// A value's own decoder (a Duration, a time) failed: encoding/json
	// does not say where, so the message carries its text.
	return bad("body", err.Error(), err)
}

// bad is the refusal of field with a problem (and its cause).
func bad(field, problem string, cause error) error {
	return fault.Wrap(fault.Invalid, "bad_request", field+": "+problem, cause).WithField(field)
}

// scanner walks a body's tokens against the type they decode into.
type scanner struct{ dec *json.Decoder }

// scanBody checks raw against t (see Decode); the values themselves are
// left to encoding/json.
func scanBody(raw []byte, t reflect.Type) error {
	s := scanner{dec: json.NewDecoder(bytes.NewReader(raw))}
	s.dec.UseNumber()
	tok, err := s.dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return bad("body", "the body is empty; want a JSON object", err)
	case err != nil:
		return bad("body", "want one JSON object", err)
	case tok != json.Delim('{'):
		return bad("body", "want a JSON object, got "+describe(tok), nil)
	}
	if err := s.object(t, "", 1); err != nil {
		return err
	}
	if tok, err := s.dec.Token(); !errors.Is(err, io.EOF) {
		what := "data"
		if err == nil {
			what = describe(tok)
		}
		return bad("body", "the JSON object is followed by "+what+"; send one object and nothing after it", err)
	}
	return nil
}

// object checks the members of an object whose '{' was read, up to and
// including its '}'. t is what it decodes into (nil: anything).
func (s scanner) object(t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return tooDeep(path)
	}
	t = decodedAs(t)
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for s.dec.More() {
		tok, err := s.dec.Token()
		if err != nil {
			return bad("body", "want one JSON object", err)
		}
		key, _ := tok.(string) // More and Token guarantee a key here
		name := join(path, key)
		if seen[key] {
			return bad(name, "the key appears twice; send each key once", nil)
		}
		seen[key] = true
		var vt reflect.Type
		switch {
		case fields != nil:
			ft, ok := fields[key]
			if !ok {
				return unknownKey(name, key, fields)
			}
			vt = ft
		case t != nil && t.Kind() == reflect.Map:
			vt = t.Elem()
		}
		if err := s.value(vt, name, depth); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil { // the closing '}'
		return bad("body", "want one JSON object", err)
	}
	return nil
}

// value checks the next value, which decodes into t (nil: anything).
func (s scanner) value(t reflect.Type, path string, depth int) error {
	tok, err := s.dec.Token()
	if err != nil {
		return bad("body", "want one JSON object", err)
	}
	switch tok {
	case json.Delim('{'):
		return s.object(t, path, depth+1)
	case json.Delim('['):
		return s.array(t, path, depth+1)
	}
	return nil
}

// array checks the elements of an array whose '[' was read, up to and
// including its ']'.
func (s scanner) array(t reflect.Type, path string, depth int) error {
	if depth > maxDepth {
		return tooDeep(path)
	}
	t = decodedAs(t)
	var et reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		et = t.Elem()
	}
	for i := 0; s.dec.More(); i++ {
		if err := s.value(et, path+"["+strconv.Itoa(i)+"]", depth); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil { // the closing ']'
		return bad("body", "want one JSON object", err)
	}
	return nil
}

// tooDeep refuses a value nested too deeply, naming the top-level key it
// is under (the path itself can be as long as the body).
func tooDeep(path string) error {
	top, _, _ := strings.Cut(path, ".")
	top, _, _ = strings.Cut(top, "[")
	return bad(cmp.Or(top, "body"), fmt.Sprintf("nested deeper than %d levels", maxDepth), nil)
}

// unknownKey refuses key, saying which field it was meant to be when it
// differs from one only in case.
func unknownKey(name, key string, fields map[string]reflect.Type) error {
	for f := range fields {
		if strings.EqualFold(f, key) {
			return bad(name, "unknown field; keys are case-sensitive: did you mean "+strconv.Quote(f)+"?", nil)
		}
	}
	return bad(name, "unknown field", nil)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodedAs is the type whose members a value decoding into t has: t
// without pointers, or nil when the value decodes itself (a Duration, a
// time) or t is nil or an interface.
func decodedAs(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// jsonFields maps the JSON names of struct t's fields (as encoding/json
// names them, embedded structs' fields promoted) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if et := decodedAs(f.Type); et != nil && et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// join is the path of key inside the object at path.
func join(path, key string) string {
	if key == "" {
		key = `""`
	}
	if len(key) > maxKeyShown {
		key = key[:maxKeyShown]
		for !utf8.ValidString(key) {
			key = key[:len(key)-1]
		}
		key += "…"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names a JSON token for an error.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
