package faultinject

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/internal/testbin"
)

// A Redis primary, its replica and three sentinels, each a real
// redis-server process on a loopback port (sentinels are redis-server
// --sentinel, so nothing beyond redis-server is needed).

// sentinelMaster is the name the sentinels monitor the primary under.
const sentinelMaster = "wakegate-test"

// redisProc is one redis-server process of the test.
type redisProc struct {
	addr   string
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
	once   sync.Once
}

// kill stops the process with SIGKILL and waits for it.
func (p *redisProc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// startRedisProc runs redis-server with args (a config file first, for a
// sentinel) on a free loopback port, and waits until it answers PING.
func startRedisProc(t *testing.T, args ...string) *redisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not installed: %v", err)
		}
		t.Skip("redis-server is not installed (scripts/test.sh installs it)")
	}
	port := testbin.FreePort(t)
	p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &bytes.Buffer{}, exited: make(chan struct{})}
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "")
	p.cmd = exec.Command(bin, args...)
	// A replica's full sync writes an RDB file in the working directory:
	// keep it out of the source tree.
	p.cmd.Dir = t.TempDir()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start redis-server %v: %v", args, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("redis-server %v:\n%s", args, p.out.String())
		}
	})
	c := redis.NewClient(&redis.Options{Addr: p.addr, DialTimeout: time.Second, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	testbin.Eventually(t, "redis-server "+p.addr+" answers", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
	return p
}

// sentinelSet is a primary, its replica and three sentinels watching them.
type sentinelSet struct {
	primary, replica *redisProc
	sentinels        []*redisProc
}

// startSentinels starts the set and waits until every sentinel knows the
// replica and the other two sentinels: a failover can be agreed then. A
// primary that does not answer for 500ms is down.
func startSentinels(t *testing.T) *sentinelSet {
	t.Helper()
	s := &sentinelSet{primary: startRedisProc(t)}
	host, port, _ := net.SplitHostPort(s.primary.addr)
	s.replica = startRedisProc(t, "--replicaof", host, port)
	for i := range 3 {
		conf := filepath.Join(t.TempDir(), fmt.Sprintf("sentinel-%d.conf", i))
		text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
			"sentinel down-after-milliseconds %[1]s 500\n"+
			"sentinel failover-timeout %[1]s 2000\n"+
			"sentinel parallel-syncs %[1]s 1\n", sentinelMaster, host, port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s.sentinels = append(s.sentinels, startRedisProc(t, conf, "--sentinel"))
	}
	ctx := context.Background()
	for _, sp := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sp.addr})
		testbin.Eventually(t, "sentinel "+sp.addr+" knows the replica and the other sentinels", func() bool {
			reps, err1 := sc.Replicas(ctx, sentinelMaster).Result()
			peers, err2 := sc.Sentinels(ctx, sentinelMaster).Result()
			return err1 == nil && err2 == nil && len(reps) == 1 && len(peers) == 2
		})
		_ = sc.Close()
	}
	return s
}

// masterAddr is the primary's address as the first live sentinel says.
func (s *sentinelSet) masterAddr() string {
	for _, sp := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sp.addr, MaxRetries: -1})
		addr, err := sc.GetMasterAddrByName(context.Background(), sentinelMaster).Result()
		_ = sc.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1])
		}
	}
	return ""
}

// replicaCaughtUp reports whether the replica has every write the primary
// acknowledged (replication is asynchronous: a write the replica has not
// received when the primary dies is lost with it).
func (s *sentinelSet) replicaCaughtUp(t *testing.T) bool {
	c := redis.NewClient(&redis.Options{Addr: s.primary.addr})
	defer func() { _ = c.Close() }()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatalf("primary's replication info: %v", err)
	}
	var master string
	var replica string
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok {
			master = v
		}
		if v, ok := strings.CutPrefix(line, "slave0:"); ok {
			for kv := range strings.SplitSeq(v, ",") {
				if o, ok := strings.CutPrefix(kv, "offset="); ok {
					replica = o
				}
			}
		}
	}
	return master != "" && master == replica
}

// TestFleetSentinelFailover runs a gateway on a Redis managed by three
// sentinels, and kills the primary: the sentinels promote the replica, and
// the gateway follows without a restart. A warm home answers throughout;
// a cold wake asked at the kill answers 200 or 503 (never twice started);
// cold wakes work again after the failover; the records written before it
// are all there.
func TestFleetSentinelFailover(t *testing.T) {
	set := startSentinels(t)
	addrs := make([]string, len(set.sentinels))
	for i, sp := range set.sentinels {
		addrs[i] = sp.addr
	}
	gw := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{
		admin: true,
		extra: map[string]any{
			"homes":    slices.Concat(fleetTwoHomes, []any{map[string]any{"id": "h3", "target": "carol"}}),
			"instance": "gw-sentinel",
			"redis":    map[string]any{"addrs": addrs, "master_name": sentinelMaster, "prefix": "sentinel"},
		},
	}))
	c := fleetClient()
	if res, body, err := gw.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("cold wake through the primary: %v %s", err, body)
	}
	gw.mustAdmin(t, http.MethodPut, "/admin/homes/h9", `{"target":"zed"}`, http.StatusCreated)
	testbin.Eventually(t, "the replica has every write", func() bool { return set.replicaCaughtUp(t) })

	// Warm traffic runs through the failover.
	var warm, warmErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, _, err := gw.get(c, fiWhoami)
			warm.Add(1)
			if err != nil || res.StatusCode != http.StatusOK {
				warmErrs.Add(1)
			}
		}
	})
	killed := time.Now()
	set.primary.kill()
	// A wake asked as the primary dies: it either completes or fails
	// fast; it never starts the home twice.
	res, body, err := gw.get(c, "/node/bob/whoami")
	if err != nil || (res.StatusCode != http.StatusOK && res.StatusCode != http.StatusServiceUnavailable) {
		t.Fatalf("cold wake at the primary's death: %v %v %s, want 200 or 503", err, res, body)
	}
	t.Logf("cold wake at the primary's death: %d", res.StatusCode)
	// Longer than Eventually's bound: a sentinel whose process was held
	// up for two seconds (a busy machine) enters TILT mode and does not
	// act for 30s.
	if !testbin.Poll(3*testbin.WaitLimit, 100*time.Millisecond, func() bool { return set.masterAddr() == set.replica.addr }) {
		t.Fatal("the sentinels did not promote the replica")
	}
	promoted := time.Since(killed)
	testbin.Eventually(t, "a cold wake works after the failover", func() bool {
		res, _, err := gw.get(c, "/node/carol/whoami")
		return err == nil && res.StatusCode == http.StatusOK
	})
	recovered := time.Since(killed)
	testbin.Eventually(t, "the wake asked at the primary's death works too", func() bool {
		res, _, err := gw.get(c, "/node/bob/whoami")
		return err == nil && res.StatusCode == http.StatusOK
	})
	close(stop)
	wg.Wait()
	if warmErrs.Load() != 0 {
		t.Errorf("%d of %d requests to the warm home failed during the failover", warmErrs.Load(), warm.Load())
	}
	for _, id := range []string{"h2", "h3"} {
		if pids := gw.homePIDs(t, id); len(pids) != 1 {
			t.Errorf("processes of %s after the failover: %v, want one", id, pids)
		}
	}
	if code, body := gw.adminSend(t, http.MethodGet, "/admin/homes/h9", ""); code != http.StatusOK {
		t.Errorf("home h9, put before the failover: %d %s", code, body)
	}
	// Readiness follows the store's reach, checked once a second with a
	// one-second bound: it turns ready within a few checks of the
	// promotion.
	if !testbin.Poll(5*time.Second, 100*time.Millisecond, func() bool { return readyz(gw) == "ready" }) {
		t.Errorf("/readyz after the failover: %q 5s after the home served, want ready", readyz(gw))
	}
	t.Logf("failover: replica promoted %s after the kill, cold wakes again %s after; %d warm requests, %d failed",
		promoted.Round(time.Millisecond), recovered.Round(time.Millisecond), warm.Load(), warmErrs.Load())
	noPanic(t, gw.Output())
}
