package registrytest

import "syscall"

// Pause freezes the server with SIGSTOP: it keeps its connections open and
// reads nothing until Resume, as a server stalled by its host would.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT): it then executes what
// its clients sent meanwhile.
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("signal %v to redis-server: it is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to redis-server: %v", sig, err)
	}
}
