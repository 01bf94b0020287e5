package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/registry"
)

// LoadFile reads and validates a config file, checking its homes and
// provider sections against ps.
func LoadFile(path string, ps Providers) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Load(path, data, ps)
}

// Load parses, expands, defaults and validates a config, in that order:
// decoding reports unknown fields and badly typed values, defaults fills
// every unset field once (defaults.go), and validate checks each section
// (check.go). name is used in error messages. Errors are ConfigErrors
// naming file, line and field: every unknown field, unset variable, badly
// typed value and invalid setting in the file, in line order. ps are the
// providers a gateway can run (package provider/all has the standard
// ones): the section exec takes the exec provider's defaults, and homes
// and provider sections are checked with their providers' rules.
func Load(name string, data []byte, ps Providers) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, ConfigErrors{yamlSyntaxError(name, data, err)}
	}
	var errs ConfigErrors
	lines := map[string]int{}
	cfg := &Config{file: name, providers: ps, empty: true}
	var u unset
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if doc.Kind != yaml.MappingNode {
			return nil, ConfigErrors{{File: name, Line: doc.Line, Msg: "want a mapping of settings at the top level"}}
		}
		cfg.empty = len(doc.Content) == 0
		expandEnv(name, doc, "", &errs)
		indexLines(doc, "", lines)
		checkKnown(name, doc, reflect.TypeOf(cfg).Elem(), "", &errs)
		if err := doc.Decode(cfg); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				// Not a per-value problem: nothing decoded can be trusted.
				return nil, append(errs, yamlErrors(name, err)...)
			}
			colls := map[collAt]string{}
			indexCollections(doc, "", colls)
			for _, fe := range fieldsByLine(yamlErrors(name, err), lines, colls) {
				fe.Msg = plainTypeError(fe.Msg)
				errs = append(errs, fe)
			}
		}
		// Its errors are those reported above: a field that does not
		// decode is left unset here.
		_ = doc.Decode(&u)
	}
	cfg.defaults(&u)
	errs = append(errs, cfg.validate(lines)...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return cfg, nil
}

// fieldsByLine names the field of each decoding error, which yaml.v3
// locates by line only: the deepest field starting on that line, unless two
// unrelated fields share it (a flow mapping), where the message must do.
func fieldsByLine(es ConfigErrors, lines map[string]int, colls map[collAt]string) ConfigErrors {
	for _, e := range es {
		if e.Field != "" || e.Line == 0 {
			continue
		}
		if m := unmarshalRE.FindStringSubmatch(e.Msg); m != nil {
			// A mapping or a list of the wrong kind: the field that holds
			// it, found by where the collection starts (a block one on
			// the line of its first entry, below its field's name).
			if p, ok := colls[collAt{e.Line, m[1]}]; ok && p != "" {
				e.Field = p
				continue
			}
		}
		var on []string
		for p, l := range lines {
			if l == e.Line {
				on = append(on, p)
			}
		}
		sort.Slice(on, func(i, j int) bool { return len(on[i]) > len(on[j]) })
		if len(on) == 0 {
			continue
		}
		deepest := on[0]
		chain := true
		for _, p := range on[1:] {
			if !strings.HasPrefix(deepest, p+".") && !strings.HasPrefix(deepest, p+"[") {
				chain = false
			}
		}
		if !chain {
			continue
		}
		e.Field = deepest
		if strings.Contains(e.Msg, "!!seq") || strings.Contains(e.Msg, "!!map") {
			// A collection of the wrong kind: the field holding it, not an
			// element of it.
			e.Field = on[len(on)-1]
		}
	}
	return es
}

// checkKnown reports every mapping key that names no field of t, with its
// line: yaml.v3 offers strict decoding only from text, and decoding from
// the node tree is what keeps expanded values on their original lines.
func checkKnown(name string, n *yaml.Node, t reflect.Type, path string, errs *ConfigErrors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType && n.Kind == yaml.ScalarNode {
		// Durations read as registry.Duration does: a bare 0 is zero, any
		// other value needs a unit, and a bad one is reported here, in the
		// same words, rather than by the decoder.
		if _, err := registry.ParseDuration(n.Value); err != nil {
			*errs = append(*errs, &FieldError{File: name, Line: n.Line, Field: path, Msg: err.Error()})
			n.Value = "0"
		}
		if n.Value == "0" {
			n.Value, n.Tag = "0s", "!!str"
		}
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag != "" && tag != "-" {
				fields[tag] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				msg := "unknown field"
				if near := nearestField(k.Value, fields); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else if places := fieldPlaces()[k.Value]; len(places) > 0 {
					msg += "; it is a field of " + strings.Join(places[:min(len(places), 3)], ", ")
				}
				*errs = append(*errs, &FieldError{File: name, Line: k.Line, Field: p, Msg: msg})
				continue
			}
			checkKnown(name, n.Content[i+1], ft, p, errs)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			checkKnown(name, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

// nearestField is the one field name of fields that key is a slip of:
// the same but for case, dashes for underscores, or at most two edits
// (one for a name of four letters or fewer); "" when there is none or
// more than one is as near.
func nearestField(key string, fields map[string]reflect.Type) string {
	norm := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	if _, ok := fields[norm]; ok {
		return norm
	}
	limit := 2
	if len(key) <= 4 {
		limit = 1
	}
	best, bestD, ties := "", limit+1, 0
	for f := range fields {
		switch d := editDistance(norm, f); {
		case d < bestD:
			best, bestD, ties = f, d, 1
		case d == bestD:
			ties++
		}
	}
	if ties != 1 {
		return ""
	}
	return best
}

// fieldPlaces maps each field name of a config file to the mappings
// that have it, as paths with [] for a list's items ("server",
// "homes[]", "wake.probe"; "the top level"), in the order of the Config
// type: for a field written in the wrong mapping.
var fieldPlaces = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				path += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 6 {
			return
		}
		where := path
		if where == "" {
			where = "the top level"
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			out[tag] = append(out[tag], where)
			sub := tag
			if path != "" {
				sub = path + "." + tag
			}
			walk(f.Type, sub, depth+1)
		}
	}
	walk(reflect.TypeOf(Config{}), "", 0)
	return out
})

// editDistance is the Levenshtein distance between a and b, counted in
// bytes (field names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

func yamlError(name string, err error) *FieldError {
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: name, Line: line, Msg: m[2]}
	}
	return &FieldError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// yamlParserProblems are the YAML library's parser errors (as opposed to
// its scanner's): it reports them at the zero-based line of the construct
// they are about, one line early, and in its own terms. Each has the
// sentence a person would say instead.
var yamlParserProblems = map[string]string{
	"did not find expected ',' or ']'": "a list opened with [ on this line is not closed with ]",
	"did not find expected ',' or '}'": "a mapping opened with { on this line is not closed with }",
	"did not find expected key": "a line below the mapping that starts here is indented wrongly " +
		"(each key of one mapping must start in the same column)",
	"did not find expected node content": "a value is missing or starts with a character YAML reserves; quote it",
	"did not find expected '-' indicator": "a list item below the list that starts here is indented wrongly " +
		"(each item's - must start in the same column)",
}

// yamlSyntaxError is the error of a file the YAML library cannot parse at
// all, at the line a person would look at and in words they would use:
// the library's parser errors come one line early, and a tab is named.
func yamlSyntaxError(name string, data []byte, err error) *FieldError {
	fe := yamlError(name, err)
	if fe.Line == 0 {
		return fe
	}
	if say, ok := yamlParserProblems[fe.Msg]; ok {
		fe.Line++
		fe.Msg = say + " (" + fe.Msg + ")"
		return fe
	}
	lines := strings.Split(string(data), "\n")
	if fe.Msg == "found character that cannot start any token" && fe.Line <= len(lines) {
		switch l := lines[fe.Line-1]; {
		case strings.Contains(l, "\t"):
			fe.Msg = "a tab character: YAML indents with spaces only; replace the tab with spaces"
		case strings.ContainsAny(l, "@`"):
			fe.Msg = "a value starts with @ or `, which YAML reserves; put the value in quotes"
		}
	}
	return fe
}

func yamlErrors(name string, err error) ConfigErrors {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var out ConfigErrors
		for _, e := range te.Errors {
			out = append(out, yamlError(name, errors.New(e)))
		}
		return out
	}
	return ConfigErrors{yamlError(name, err)}
}

// unmarshalRE matches the YAML library's type mismatch: the YAML kind
// found, the value when it is a scalar (cut at 10 bytes), the Go type.
var unmarshalRE = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// plainTypeError says a type mismatch of the YAML library in the words of
// the file: what the field takes and what the file gives it (a mapping
// where a list of policies belongs, a list where one value does), not the
// library's tags and Go types.
func plainTypeError(msg string) string {
	m := unmarshalRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return "want " + goTypeWords(m[3]) + ", got " + yamlKindWords(m[1], m[2])
}

func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return `a list (an item per line, each after "- ", or [a, b])`
	case strings.HasPrefix(t, "map["):
		return "a mapping (key: value)"
	case t == "time.Duration":
		return "a duration such as 500ms, 30s or 5m"
	case t == "string":
		return "one value"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping of settings (key: value, indented below it)"
}

func yamlKindWords(kind, value string) string {
	switch kind {
	case "map":
		return "a mapping (key: value)"
	case "seq":
		return "a list"
	case "null":
		return "nothing"
	}
	if value != "" {
		return strconv.Quote(value)
	}
	return "a value"
}

var envRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${VAR} and ${VAR:-default} in every scalar value under
// n, whose dotted path is path. As in the shell, ${VAR:-default} takes the
// default when VAR is unset or empty, and ${VAR} may be set and empty. An
// unset variable without a default is an error at its line and field.
func expandEnv(name string, n *yaml.Node, path string, errs *ConfigErrors) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			expandEnv(name, n.Content[i], path, errs)
			expandEnv(name, n.Content[i+1], p, errs)
		}
		return
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandEnv(name, c, fmt.Sprintf("%s[%d]", path, i), errs)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRE.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRE.FindStringSubmatch(m)
			v, ok := os.LookupEnv(sub[1])
			if ok && (v != "" || sub[2] == "") {
				return v
			}
			if sub[2] != "" {
				return sub[3]
			}
			*errs = append(*errs, &FieldError{File: name, Line: n.Line, Field: path, Msg: fmt.Sprintf("environment variable %s is not set", sub[1])})
			return ""
		})
		if n.Style != 0 {
			// Quoted, block or explicitly tagged: it stays as it is.
			return
		}
		// A plain scalar takes the type of its expanded value: the parser
		// resolved "${N}" to a string before N was known.
		n.Tag = ""
	}
	for _, c := range n.Content {
		expandEnv(name, c, path, errs)
	}
}

// indexLines records the line of every field by its dotted path, e.g.
// "wake.warm_ttl" or "homes[0].id".
// collAt is where a mapping ("map") or a list ("seq") starts: its line,
// and its kind as the YAML library's errors name it.
type collAt struct {
	line int
	kind string
}

// indexCollections maps the start of every mapping and list under n,
// whose dotted path is prefix, to the path of the field that holds it; ""
// where two of one kind start on one line (a block mapping whose first
// value is a flow mapping), which the line alone cannot tell apart.
func indexCollections(n *yaml.Node, prefix string, out map[collAt]string) {
	add := func(at collAt) {
		if _, dup := out[at]; dup {
			out[at] = ""
			return
		}
		out[at] = prefix
	}
	switch n.Kind {
	case yaml.MappingNode:
		add(collAt{n.Line, "map"})
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if prefix != "" {
				p = prefix + "." + p
			}
			indexCollections(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		add(collAt{n.Line, "seq"})
		for i, c := range n.Content {
			indexCollections(c, fmt.Sprintf("%s[%d]", prefix, i), out)
		}
	}
}

func indexLines(n *yaml.Node, prefix string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := key
			if prefix != "" {
				p = prefix + "." + key
			}
			lines[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			lines[p] = c.Line
			indexLines(c, p, lines)
		}
	}
}
