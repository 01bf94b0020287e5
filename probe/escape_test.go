package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A home that closes the probe's WebSocket with a reason full of terminal
// escapes: the probe's failure quotes the reason escaped, never as sent.
func TestProbeQuotesCloseReasonEscaped(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		msg := websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "\x1b]0;owned\a\x1b[2J")
		_ = c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		_, _, _ = c.ReadMessage()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, Spec{Kind: WS, Endpoint: srv.URL, Path: "/node/x", Settle: time.Second}, nil)
	if err == nil {
		t.Fatal("the probe passed a home that closes at once")
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\x1b\a") || !strings.Contains(msg, `\x1b]0;owned\a`) {
		t.Errorf("probe failure %q; want the home's close reason escaped", msg)
	}
}
