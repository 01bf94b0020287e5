package kapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Content types of a PATCH.
const (
	MergePatch     = "application/merge-patch+json"
	StrategicPatch = "application/strategic-merge-patch+json"
	jsonType       = "application/json"
)

// Client calls one API server. Safe for concurrent use.
type Client struct {
	server string
	source string
	token  *tokenSource
	http   *http.Client
	// stream is http without an overall timeout, for watches.
	stream *http.Client
}

// New returns a client for c. Calls other than watches time out after
// callTimeout.
func New(c Config) (*Client, error) {
	if !strings.HasPrefix(c.Server, "https://") && !strings.HasPrefix(c.Server, "http://") {
		return nil, fmt.Errorf("%s: the server %q is no http(s) URL", c.Source, c.Server)
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = 32
	return &Client{server: strings.TrimSuffix(c.Server, "/"), source: c.Source,
		token:  &tokenSource{fixed: c.Token, file: c.TokenFile},
		http:   &http.Client{Transport: tr, Timeout: callTimeout},
		stream: &http.Client{Transport: tr}}, nil
}

// callTimeout bounds one call that is not a watch.
const callTimeout = 30 * time.Second

// Server is the API server's base URL.
func (c *Client) Server() string { return c.server }

// StatusError is the API server's answer to a call that failed: its
// Status object (reason, message, details) and the HTTP code.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string // Forbidden, NotFound, Conflict, AlreadyExists, Expired, Gone, Invalid...
	Message      string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, msg)
}

// Code returns the HTTP code of err's StatusError, 0 when it has none.
func Code(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// IsNotFound, IsConflict, IsGone and IsForbidden test err's code.
func IsNotFound(err error) bool  { return Code(err) == http.StatusNotFound }
func IsConflict(err error) bool  { return Code(err) == http.StatusConflict }
func IsGone(err error) bool      { return Code(err) == http.StatusGone }
func IsForbidden(err error) bool { return Code(err) == http.StatusForbidden }

// status is the API's Status object.
type status struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
	Code    int    `json:"code"`
}

// Do sends method path (below the server, with its query) with body as
// JSON (a []byte is sent as is, typed contentType; "" for JSON) and
// decodes a 2xx answer into out when out is not nil. Any other answer is
// a *StatusError.
func (c *Client) Do(ctx context.Context, method, path, contentType string, body, out any) error {
	res, err := c.send(ctx, c.http, method, path, contentType, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode/100 != 2 {
		return statusOf(method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

func (c *Client) send(ctx context.Context, hc *http.Client, method, path, contentType string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", jsonType)
	if body != nil {
		if contentType == "" {
			contentType = jsonType
		}
		req.Header.Set("Content-Type", contentType)
	}
	tok, err := c.token.get()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.source, err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return res, nil
}

func statusOf(method, path string, code int, b []byte) *StatusError {
	e := &StatusError{Method: method, Path: path, Code: code}
	var s status
	if json.Unmarshal(b, &s) == nil && s.Kind == "Status" {
		e.Reason, e.Message = s.Reason, s.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	return e
}
