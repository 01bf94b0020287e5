package proxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chunkReader returns its data in the given chunk sizes, then EOF.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[0])
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// refMask is the one-shot masking the streaming reader must reproduce.
func refMask(body, secret string) string {
	return strings.ReplaceAll(body, secret, strings.Repeat("*", len(secret)))
}

// readMasked reads body through a maskReader fed in chunks of the given
// sizes, reading into buffers of readSize bytes.
func readMasked(t *testing.T, body, secret string, sizes []int, readSize int) string {
	t.Helper()
	m := newMaskReader(io.NopCloser(&chunkReader{data: []byte(body), sizes: sizes}), secret)
	var out bytes.Buffer
	buf := make([]byte, readSize)
	for i := 0; ; i++ {
		if i > 10*len(body)+10 {
			t.Fatalf("maskReader made no progress on %q", body)
		}
		n, err := m.Read(buf)
		out.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
	}
	return out.String()
}

func TestMaskReaderTable(t *testing.T) {
	const secret = "s3cr3t-T0KEN"
	cases := []struct{ name, body string }{
		{"empty", ""},
		{"no secret", "hello, world"},
		{"only the secret", secret},
		{"at start", secret + " trailing"},
		{"at end", "leading " + secret},
		{"twice", secret + "|" + secret},
		{"adjacent", secret + secret + secret},
		{"prefix only", "s3cr3t-T0KE"},
		{"prefix then secret", "s3cr3t-" + secret},
		{"near miss", "s3cr3t-T0KEn s3cr3t_T0KEN"},
		{"in JSON", `{"headers":{"X-Wakegate-Relay":["` + secret + `"]}}`},
		{"binary around", "\x00\xff" + secret + "\x00\xfe\x80"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := refMask(c.body, secret)
			// Every split point of the body into two reads.
			for split := 0; split <= len(c.body); split++ {
				got := readMasked(t, c.body, secret, []int{split, len(c.body)}, 64)
				if got != want {
					t.Fatalf("split at %d: got %q; want %q", split, got, want)
				}
			}
			// One byte per read, and tiny caller buffers.
			for _, rs := range []int{1, 2, 3, 1024} {
				got := readMasked(t, c.body, secret, onesOf(len(c.body)), rs)
				if got != want {
					t.Fatalf("byte reads, read size %d: got %q; want %q", rs, got, want)
				}
			}
			if len(want) != len(c.body) {
				t.Fatalf("length changed: %d -> %d", len(c.body), len(want))
			}
			if strings.Contains(want, secret) {
				t.Fatalf("secret survived in %q", want)
			}
		})
	}
}

func onesOf(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func TestMaskReaderPassesThroughUntouched(t *testing.T) {
	body := make([]byte, 200<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.UintN(256))
	}
	body = bytes.ReplaceAll(body, []byte("tok"), []byte("xok")) // the secret must not occur
	m := newMaskReader(io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), "tok-123")
	got, err := io.ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatal("a body without the secret was changed")
	}
	// iotest.TestReader checks the io.Reader contract on a body with the
	// secret in it.
	withSecret := append(append(append([]byte{}, body[:1000]...), "tok-123"...), body[1000:3000]...)
	m = newMaskReader(io.NopCloser(bytes.NewReader(withSecret)), "tok-123")
	if err := iotest.TestReader(m, []byte(refMask(string(withSecret), "tok-123"))); err != nil {
		t.Fatal(err)
	}
}

func TestMaskReaderProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab-")
	for i := 0; i < 2000; i++ {
		secret := randString(r, alphabet, 1+r.IntN(5))
		// Bodies over a tiny alphabet hit overlaps and near misses often.
		body := randString(r, alphabet, r.IntN(60))
		if r.IntN(2) == 0 {
			at := r.IntN(len(body) + 1)
			body = body[:at] + secret + body[at:]
		}
		var sizes []int
		for left := len(body); left > 0; {
			n := 1 + r.IntN(8)
			sizes = append(sizes, n)
			left -= n
		}
		got := readMasked(t, body, secret, sizes, 1+r.IntN(16))
		if want := refMask(body, secret); got != want {
			t.Fatalf("secret %q, body %q, chunks %v: got %q; want %q", secret, body, sizes, got, want)
		}
		if len(got) != len(body) || strings.Contains(got, secret) {
			t.Fatalf("secret %q, body %q: got %q", secret, body, got)
		}
	}
}

func randString(r *rand.Rand, alphabet []byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func TestMaskReaderPassesErrorsAfterData(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("data s3cret"), iotest.ErrReader(boom))
	m := newMaskReader(io.NopCloser(src), "s3cret")
	got, err := io.ReadAll(m)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v; want boom", err)
	}
	if string(got) != "data ******" {
		t.Fatalf("data before the error = %q; want it masked and complete", got)
	}
}

func TestMaskReaderEmptySecret(t *testing.T) {
	m := newMaskReader(io.NopCloser(strings.NewReader("abc")), "")
	got, err := io.ReadAll(m)
	if err != nil || string(got) != "abc" {
		t.Fatalf("got %q, %v; want abc unchanged", got, err)
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestMaskReaderCloses(t *testing.T) {
	src := &closeRecorder{Reader: strings.NewReader("x")}
	m := newMaskReader(src, "y")
	if err := m.Close(); err != nil || !src.closed {
		t.Fatalf("Close = %v, closed %v; want the source closed", err, src.closed)
	}
}

func TestMaskHeaders(t *testing.T) {
	h := map[string][]string{
		"Location":   {"https://x/?t=tok123&u=1"},
		"X-Echo":     {"tok123", "other"},
		"Set-Cookie": {"a=b"},
	}
	maskHeaders(h, "tok123")
	if h["Location"][0] != "https://x/?t=******&u=1" || h["X-Echo"][0] != "******" || h["X-Echo"][1] != "other" || h["Set-Cookie"][0] != "a=b" {
		t.Fatalf("masked headers = %v", h)
	}
}

// A streamed chunk shorter than the secret is passed on at once unless its
// end could start the secret; only that tail waits for the next read.
func TestMaskReaderPassesShortChunksAtOnce(t *testing.T) {
	const secret = "s3cr3t-token-value"
	cases := []struct {
		chunk, want string
	}{
		{"data: 1\n\n", "data: 1\n\n"},
		{"data: s3c", "data: "}, // "s3c" may be the start of the secret
		{"x", "x"},
	}
	for _, tc := range cases {
		pr, pw := io.Pipe()
		m := newMaskReader(pr, secret)
		go func() { _, _ = pw.Write([]byte(tc.chunk)) }()
		got := make(chan string, 1)
		go func() {
			buf := make([]byte, 64)
			n, _ := m.Read(buf)
			got <- string(buf[:n])
		}()
		select {
		case g := <-got:
			if g != tc.want {
				t.Errorf("chunk %q: first read %q, want %q", tc.chunk, g, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("chunk %q: first read still waiting for more input", tc.chunk)
		}
		pw.Close()
	}
}
