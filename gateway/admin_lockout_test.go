package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestAdminFloodCannotLockOutValidToken runs a client that sends wrong
// tokens as fast as it can from 127.0.0.1 (as any local process, a home
// included, can) while another client on the same address uses the right
// token: every right request must pass, and the flood must be limited.
func TestAdminFloodCannotLockOutValidToken(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 5\n")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	flood := map[int]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000 && ctx.Err() == nil; i++ {
			req, err := http.NewRequestWithContext(ctx, "GET", a.admin+"/admin/status", nil)
			if err != nil {
				return
			}
			req.Header.Set("Authorization", "Bearer wrong-token-0123456789")
			res, err := a.client.Do(req)
			if err != nil {
				continue
			}
			_ = res.Body.Close()
			mu.Lock()
			flood[res.StatusCode]++
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	// Let the flood exhaust its allowance first.
	testbin.Eventually(t, "the flood's first 429", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return flood[http.StatusTooManyRequests] > 0
	})
	for i := range 30 {
		if code, _, body := a.do(t, "GET", "/admin/status", admToken, nil, nil); code != http.StatusOK {
			t.Fatalf("valid request %d during the flood: %d %s, want 200", i+1, code, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("flood answers %v; 30 valid requests meanwhile, all 200", flood)
	if flood[http.StatusTooManyRequests] == 0 || flood[http.StatusOK] != 0 {
		t.Errorf("flood answers %v: want 429s and no 200", flood)
	}
	if flood[http.StatusUnauthorized] > 5 {
		t.Errorf("flood answers %v: more than the 5 allowed failures were let through to 401", flood)
	}
}
