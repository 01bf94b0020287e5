package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// timing is when one caller's request went and its answer came.
type timing struct {
	sent  time.Time // the request was written whole
	first time.Time // the answer's first byte came
	began time.Time // the answering process began (a demo home's /whoami); zero if unknown
}

// beganOf is when the demo home that wrote body, a /whoami answer, began
// (its began_unix_nano); zero for any other body.
func beganOf(body []byte) time.Time {
	var w struct {
		Began int64 `json:"began_unix_nano"`
	}
	if json.Unmarshal(body, &w) != nil || w.Began <= 0 {
		return time.Time{}
	}
	return time.Unix(0, w.Began)
}

// rawConn is a caller's connection of the raw client and the request it
// sends on it.
type rawConn struct {
	c   net.Conn
	req string
}

// dialRaw makes the connection for a GET of u and the request's bytes.
// The raw client does as little as a browser's network stack: one dial,
// the request written as bytes, the answer read and discarded. (The
// Transport of transportGet starts a reader and a writer goroutine and a
// pool for every caller; on a 2-core machine a thousand of them compete
// with the gateway they measure.)
func dialRaw(u string) (*rawConn, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", pu.Host, time.Minute)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	return &rawConn{c: c, req: "GET " + pu.RequestURI() + " HTTP/1.1\r\nHost: " + pu.Host + "\r\nConnection: close\r\n\r\n"}, nil
}

// exchange writes the request, calls sent, reads the answer (keeping
// only when the process that wrote it began, from a /whoami answer), and
// closes the connection.
func (rc *rawConn) exchange(sent func()) (t timing, err error) {
	defer rc.c.Close()
	if _, err := io.WriteString(rc.c, rc.req); err != nil {
		return t, err
	}
	t.sent = time.Now()
	sent()
	br := bufio.NewReaderSize(rc.c, 4096)
	if _, err := br.Peek(1); err != nil {
		return t, err
	}
	t.first = time.Now()
	r, err := http.ReadResponse(br, nil)
	if err != nil {
		return t, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body.Close()
	if err != nil {
		return t, fmt.Errorf("read body: %w", err)
	}
	t.began = beganOf(body)
	if r.StatusCode != http.StatusOK {
		return t, fmt.Errorf("status %d", r.StatusCode)
	}
	return t, nil
}
