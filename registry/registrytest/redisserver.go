package registrytest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// RedisServer is a real redis-server process on a loopback port, for
// tests: no RDB snapshots, an append-only file fsynced on every write in
// the test's temporary directory (so a restart keeps what was
// acknowledged), stopped when the test ends.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// volatile servers keep nothing across a restart (StartVolatileRedis).
	volatile bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan error // receives the running server's exit
}

// redisReadyBound bounds the wait for a started redis-server to answer.
const redisReadyBound = 20 * time.Second

// StartRedis starts a redis-server for t, or skips t when the binary is
// not installed and CI is not set (scripts/test.sh installs it).
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	return startRedis(t, false)
}

// StartVolatileRedis is StartRedis for a server with neither snapshots nor
// an append-only file: a Restart comes back empty, as a Redis run without
// persistence does.
func StartVolatileRedis(t testing.TB) *RedisServer {
	t.Helper()
	return startRedis(t, true)
}

func startRedis(t testing.TB, volatile bool) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not installed: %v", err)
		}
		t.Skip("redis-server is not installed (scripts/test.sh installs it)")
	}
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir(), volatile: volatile}
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("start redis-server: %v", err)
		}
	}
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback port that was free a moment ago, from
// outside the kernel's ephemeral range (see testbin.FreePort).
func freePort(t testing.TB) int {
	t.Helper()
	return testbin.FreePort(t)
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// start runs the server on s.port and waits until it answers PING.
func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &bytes.Buffer{}
	aof := "yes"
	if s.volatile {
		aof = "no"
	}
	// The append-only file is written before each reply, so a killed
	// server keeps every answered write; fsync is left to the kernel
	// (appendfsync no), as only a crash of the machine would need it, and
	// an fsync per write stalls the server for seconds on a busy disk.
	cmd := exec.Command(s.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", aof, "--appendfsync", "no",
		"--dir", s.dir, "--logfile", "", "--daemonize", "no",
		"--protected-mode", "yes")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(redisReadyBound)
	for {
		if pingRedis(s.Addr()) == nil {
			s.cmd, s.out, s.exited = cmd, out, exited
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited: %v: %s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			werr := <-exited
			return fmt.Errorf("redis-server did not answer within %s (killed: %v): %s", redisReadyBound, werr, out.String())
		}
	}
}

// pingRedis sends one inline PING and expects +PONG.
func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}

// Kill stops the server with SIGKILL (nothing is flushed beyond what the
// append-only file holds) and waits for it to exit.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	if err := <-s.exited; err == nil {
		// A SIGKILLed server exits with an error; nil means it had
		// already stopped on its own before the kill.
		s.out.WriteString("\n(redis-server had exited before the kill)\n")
	}
	s.cmd = nil
}

// Restart starts the server again on the same port with the same data.
func (s *RedisServer) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("restart redis-server: %v", err)
	}
}

// Signal sends sig to the running server: SIGSTOP pauses it (its clients'
// connections stay open and get no answer), SIGCONT resumes it.
func (s *RedisServer) Signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatal("redis-server does not run")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal redis-server: %v", err)
	}
}
