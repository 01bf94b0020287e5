package testbin

import (
	"net"
	"os"
	"testing"
)

// TestListensOn: a listener of this process is found as its own, and the
// same port is not another process's, nor a closed port anyone's.
func TestListensOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if !listensOn(os.Getpid(), port) {
		t.Fatalf("this process's listener on port %d is not found as its own", port)
	}
	if listensOn(os.Getppid(), port) {
		t.Fatalf("the parent process is said to hold this process's listener on port %d", port)
	}
	ln.Close()
	if listensOn(os.Getpid(), port) {
		t.Fatalf("a closed listener on port %d is still found", port)
	}
}
