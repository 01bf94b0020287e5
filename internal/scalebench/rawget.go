package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// rawGet fetches u on a new connection with as little client work as a
// browser's network stack: one dial, the request written as bytes, the
// answer read and discarded. The Transport of transportGet starts a
// reader and a writer goroutine and a pool for every caller; on a
// 2-core machine a thousand of them compete with the gateway they measure.
func rawGet(u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", pu.Host, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	req := "GET " + pu.RequestURI() + " HTTP/1.1\r\nHost: " + pu.Host + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	r, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", r.StatusCode)
	}
	return nil
}
