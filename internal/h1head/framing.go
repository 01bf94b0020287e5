package h1head

import (
	"bytes"
	"errors"
)

// Errors a Framing reports. ErrConflict is a head that carries both
// Content-Length and Transfer-Encoding. The others are framing that cannot
// be followed: the scanner no longer knows where the next head starts, so
// it stops and says why; the connection must not serve another request.
var (
	ErrConflict      = errors.New("a request carries both Content-Length and Transfer-Encoding")
	errFolded        = errors.New("a folded Content-Length or Transfer-Encoding line")
	errLengths       = errors.New("differing Content-Length values")
	errBadLength     = errors.New("a Content-Length that is not a length")
	errCoding        = errors.New("a Transfer-Encoding other than chunked")
	errLongValue     = errors.New("an overlong Content-Length or Transfer-Encoding value")
	errChunk         = errors.New("a malformed chunk")
	errLongChunkLine = errors.New("an overlong chunk line")
)

// Framing follows the requests that a client sends on one connection, as
// they are read, split anywhere: it finds where each head ends, works out
// the body's length from the head (Content-Length, or chunked with its
// trailers) and skips the body, so that only heads are inspected, never a
// body, however much it looks like one. It follows net/http's server:
// empty lines before a request-line are skipped, Transfer-Encoding counts
// only from HTTP/1.1 on, only "chunked" is a coding, chunk lines end in
// CRLF (TestFramingMatchesNetHTTP, FuzzFraming).
//
// The zero value is ready for the first byte of a connection. Framing is
// not safe for concurrent use: the connection's reader alone calls Scan.
type Framing struct {
	st    state
	err   error
	heads int64 // request-lines seen

	// the line being read
	buf  [lineKeep]byte
	n    int  // bytes of the line kept in buf
	over bool // the line is longer than buf

	// the head being read
	field    field // the field of the current line, for a folded line
	http10   bool
	lengths  int // Content-Length lines
	codings  int // Transfer-Encoding lines
	length   [lineKeep]byte
	lengthN  int
	chunked  bool // the one coding is chunked
	longVal  bool
	left     uint64 // body bytes or chunk bytes to skip
	digits   int    // of the chunk size
	chunkLen int    // of the chunk line
}

// lineKeep is how much of a line is kept: enough for a field name that
// matters and a value of Content-Length or Transfer-Encoding.
const lineKeep = 40

// maxChunkLine is the longest chunk line net/http reads.
const maxChunkLine = 4096

type state uint8

const (
	stStart        state = iota // before a request-line: empty lines are skipped
	stRequest                   // in the request-line
	stFieldStart                // at the start of a field line, or the blank line
	stFieldCR                   // a CR began a field line
	stName                      // in a field's name
	stValue                     // in the value of Content-Length or Transfer-Encoding
	stSkipLine                  // in a line that does not matter, up to its LF
	stBody                      // in a body of known length
	stChunkSize                 // at the start of a chunk line
	stChunkDigits               // in a chunk size
	stChunkSpace                // in white space after a chunk size
	stChunkExt                  // in a chunk extension
	stChunkLF                   // after the CR that ends a chunk line
	stChunkData                 // in a chunk's data
	stDataCR                    // after a chunk's data
	stDataLF                    // after the CR after a chunk's data
	stTrailerStart              // at the start of a trailer line or the blank line
	stTrailerCR                 // a CR began a trailer line
	stTrailerLine               // in a trailer line
	stDone                      // stopped: err says why
)

type field uint8

const (
	fieldOther field = iota
	fieldLength
	fieldCoding
)

// Err is what stopped the scan: ErrConflict or a reason the framing could
// not be followed; nil while it goes on.
func (f *Framing) Err() error { return f.err }

// Heads is how many request-lines the scan has seen.
func (f *Framing) Heads() int64 { return f.heads }

// Scan reads b, the next bytes of the connection, and reports Err.
func (f *Framing) Scan(b []byte) error {
	for len(b) > 0 && f.st != stDone {
		switch f.st {
		case stBody, stChunkData:
			// Body bytes are skipped whole, not looked at.
			k := uint64(len(b))
			if k > f.left {
				k = f.left
			}
			b = b[k:]
			f.left -= k
			if f.left == 0 {
				if f.st == stBody {
					f.st = stStart
				} else {
					f.st = stDataCR
				}
			}
		case stSkipLine, stTrailerLine:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				return nil
			}
			b = b[i+1:]
			if f.st == stSkipLine {
				f.field = fieldOther
				f.st = stFieldStart
			} else {
				f.st = stTrailerStart
			}
		default:
			f.step(b[0])
			b = b[1:]
		}
	}
	return f.err
}

func (f *Framing) stop(err error) {
	f.err = err
	f.st = stDone
}

// keep adds c to the line kept in buf.
func (f *Framing) keep(c byte) {
	if f.n < len(f.buf) {
		f.buf[f.n] = c
		f.n++
	} else {
		f.over = true
	}
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func hexDigit(c byte) (uint64, bool) {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0'), true
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// step reads one byte of a head, a chunk line or a trailer.
func (f *Framing) step(c byte) {
	switch f.st {
	case stStart:
		if c == '\r' || c == '\n' {
			return
		}
		f.heads++
		f.http10, f.lengths, f.codings, f.lengthN, f.chunked, f.longVal = false, 0, 0, 0, false, false
		f.field = fieldOther
		f.n, f.over = 0, false
		f.st = stRequest
		f.request(c)
	case stRequest:
		f.request(c)
	case stFieldStart:
		switch c {
		case '\n':
			f.endHead()
		case '\r':
			f.st = stFieldCR
		case ' ', '\t':
			// A folded line continues the field before it (net/http joins
			// them): one that continues Content-Length or
			// Transfer-Encoding is not followed.
			if f.field != fieldOther {
				f.stop(errFolded)
				return
			}
			f.st = stSkipLine
		default:
			f.n, f.over = 0, false
			f.keep(lower(c))
			f.st = stName
		}
	case stFieldCR:
		if c == '\n' {
			f.endHead()
			return
		}
		// A line that starts with CR is no field net/http takes.
		f.field = fieldOther
		f.st = stSkipLine
	case stName:
		switch {
		case c == ':':
			name := string(f.buf[:f.n])
			f.n, f.over = 0, false
			switch {
			case name == "content-length":
				f.field, f.st = fieldLength, stValue
			case name == "transfer-encoding":
				f.field, f.st = fieldCoding, stValue
			default:
				f.field, f.st = fieldOther, stSkipLine
			}
		case c == '\n':
			f.field, f.st = fieldOther, stFieldStart
		case f.n == len(f.buf):
			f.field, f.st = fieldOther, stSkipLine
		default:
			f.keep(lower(c))
		}
	case stValue:
		if c != '\n' {
			if f.n > 0 || (c != ' ' && c != '\t') {
				f.keep(c)
			}
			return
		}
		f.endValue()
		f.st = stFieldStart
	case stChunkSize:
		v, ok := hexDigit(c)
		if !ok {
			f.stop(errChunk)
			return
		}
		f.left, f.digits, f.chunkLen = v, 1, 1
		f.st = stChunkDigits
	case stChunkDigits, stChunkSpace, stChunkExt:
		f.chunkLine(c)
	case stChunkLF:
		if c != '\n' {
			f.stop(errChunk)
			return
		}
		if f.left == 0 {
			f.st = stTrailerStart
		} else {
			f.st = stChunkData
		}
	case stDataCR:
		if c != '\r' {
			f.stop(errChunk)
			return
		}
		f.st = stDataLF
	case stDataLF:
		if c != '\n' {
			f.stop(errChunk)
			return
		}
		f.st = stChunkSize
	case stTrailerStart:
		switch c {
		case '\n':
			f.st = stStart
		case '\r':
			f.st = stTrailerCR
		default:
			f.st = stTrailerLine
		}
	case stTrailerCR:
		if c == '\n' {
			f.st = stStart
			return
		}
		f.st = stTrailerLine
	}
}

// request reads a byte of the request-line, keeping its last bytes: the
// version is what Transfer-Encoding depends on.
func (f *Framing) request(c byte) {
	if c == '\n' {
		line := f.buf[:f.n]
		line = bytes.TrimSuffix(line, []byte("\r"))
		f.http10 = bytes.HasSuffix(line, []byte(" HTTP/1.0"))
		f.n, f.over = 0, false
		f.st = stFieldStart
		return
	}
	if f.n == len(f.buf) {
		copy(f.buf[:], f.buf[1:])
		f.n--
	}
	f.buf[f.n] = c
	f.n++
}

// endValue takes the value of a Content-Length or Transfer-Encoding line,
// trimmed as net/http trims it.
func (f *Framing) endValue() {
	if f.over {
		f.longVal = true
	}
	v := bytes.TrimRight(f.buf[:f.n], " \t\r")
	f.n, f.over = 0, false
	if f.field == fieldCoding {
		f.codings++
		f.chunked = f.codings == 1 && string(bytes.ToLower(v)) == "chunked"
		return
	}
	f.lengths++
	if f.lengths == 1 {
		f.lengthN = copy(f.length[:], v)
	} else if !bytes.Equal(f.length[:f.lengthN], v) {
		// net/http refuses differing values; identical ones are one.
		f.lengthN = -1
	}
}

// endHead decides, at the blank line, how the body is framed.
func (f *Framing) endHead() {
	f.field = fieldOther
	switch {
	case f.lengths > 0 && f.codings > 0:
		f.stop(ErrConflict)
	case f.longVal:
		f.stop(errLongValue)
	case f.codings > 0 && !f.http10:
		// net/http answers any coding but a lone chunked with 501.
		if !f.chunked {
			f.stop(errCoding)
			return
		}
		f.st = stChunkSize
	case f.lengths > 0:
		if f.lengthN < 0 {
			f.stop(errLengths)
			return
		}
		n, ok := Length(string(f.length[:f.lengthN]))
		if !ok {
			f.stop(errBadLength)
			return
		}
		f.left = uint64(n)
		if n == 0 {
			f.st = stStart
		} else {
			f.st = stBody
		}
	default:
		// No body: an HTTP/1.0 request's Transfer-Encoding is ignored,
		// as net/http ignores it.
		f.st = stStart
	}
}

// chunkLine reads a byte of a chunk line after its first digit: more
// digits, white space, an extension, up to the CRLF (net/http's rules:
// no bare LF, no CR but the last, at most 16 digits, no byte but white
// space between the size and the CR).
func (f *Framing) chunkLine(c byte) {
	f.chunkLen++
	if f.chunkLen >= maxChunkLine {
		f.stop(errLongChunkLine)
		return
	}
	if c == '\r' {
		f.st = stChunkLF
		return
	}
	if c == '\n' {
		f.stop(errChunk)
		return
	}
	switch f.st {
	case stChunkDigits:
		if v, ok := hexDigit(c); ok {
			if f.digits++; f.digits > 16 {
				f.stop(errChunk)
				return
			}
			f.left = f.left<<4 | v
			return
		}
		switch c {
		case ';':
			f.st = stChunkExt
		case ' ', '\t':
			f.st = stChunkSpace
		default:
			f.stop(errChunk)
		}
	case stChunkSpace:
		if c != ' ' && c != '\t' {
			f.stop(errChunk)
		}
	}
}
