package h1head

import "strings"

// Block is a response head's field lines as they go on the wire: each
// "Name: value\r\n", the name canonical and the value trimmed, which is
// how net/http writes a header map. The proxy builds one from a plain
// upstream head (Append) and h1serve sends it as it is, so the common
// response is relayed without a header map on either side.
type Block struct {
	// Fields are the lines, without the blank line that ends a head.
	Fields []byte
	// Length is the body's length, which one Content-Length line among
	// Fields states.
	Length int64
	// Type: a Content-Type line is among Fields. Date: a Date line is.
	Type, Date bool
	// Encoded: the first Content-Encoding line among Fields has a value.
	Encoded bool

	encodingSeen bool
}

// Reset empties b, keeping the space of its Fields.
func (b *Block) Reset() {
	*b = Block{Fields: b.Fields[:0]}
}

// Append adds the field lines of s (the part of a head after its first
// line and through the blank line, as Fields takes) to b. check sees each
// field first, its name canonical (valid during the call only): keep
// false leaves it out, ok false refuses the head. As Fields does, a
// Pragma whose first value is no-cache brings Cache-Control: no-cache
// when the head has no Cache-Control (check sees it too). ok false: a
// field is not plain or check refused one; b holds a part then.
func (b *Block) Append(s string, check func(key []byte, value string) (keep, ok bool)) bool {
	pragmaNoCache, pragmaSeen, cacheControl := false, false, false
	for {
		line, rest, found := strings.Cut(s, "\r\n")
		if !found {
			return false
		}
		if line == "" {
			break
		}
		s = rest
		name, v, found := strings.Cut(line, ":")
		if !found || !ValidToken(name) {
			return false // also a folded line, which starts with a space
		}
		v = trimOWS(v)
		if !ValidValue(v) {
			return false
		}
		start := len(b.Fields)
		b.Fields = appendCanonical(b.Fields, name)
		key := b.Fields[start:]
		switch string(key) {
		case "Pragma":
			if !pragmaSeen {
				pragmaSeen, pragmaNoCache = true, v == "no-cache"
			}
		case "Cache-Control":
			cacheControl = true
		}
		if !b.add(start, v, check) {
			return false
		}
	}
	if pragmaNoCache && !cacheControl {
		start := len(b.Fields)
		b.Fields = append(b.Fields, "Cache-Control"...)
		if !b.add(start, "no-cache", check) {
			return false
		}
	}
	return true
}

// add finishes the line whose name b.Fields holds from start: v, when
// check keeps it; the name is taken off again when it does not.
func (b *Block) add(start int, v string, check func(key []byte, value string) (keep, ok bool)) bool {
	key := b.Fields[start:]
	keep, ok := check(key, v)
	if !ok {
		return false
	}
	if !keep {
		b.Fields = b.Fields[:start]
		return true
	}
	switch string(key) {
	case "Content-Type":
		b.Type = true
	case "Date":
		b.Date = true
	case "Content-Encoding":
		if !b.encodingSeen {
			b.encodingSeen, b.Encoded = true, v != ""
		}
	}
	b.Fields = append(b.Fields, ": "...)
	b.Fields = append(b.Fields, v...)
	b.Fields = append(b.Fields, "\r\n"...)
	return true
}

// appendCanonical appends the canonical form of the token name to dst,
// as http.CanonicalHeaderKey makes it: upper case at the start and after
// each hyphen, lower case elsewhere.
func appendCanonical(dst []byte, name string) []byte {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
		upper = c == '-'
	}
	return dst
}
