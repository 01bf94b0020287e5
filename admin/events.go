package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
)

// eventPing is how often an idle event stream gets a comment line, so that
// proxies in between do not close it.
const eventPing = 15 * time.Second

// serveEvents streams the engine's events as Server-Sent Events: first the
// remembered ones after Last-Event-ID (all of them without it), then each
// new event the moment it is published. The stream ends with the request's
// context (the gateway ends it when the admin listener stops).
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	bus := s.b.Events()
	if bus == nil {
		s.fail(w, r, fault.New(fault.NotImplemented, "not_implemented", "the event stream is not available in this build"))
		return
	}
	var after uint64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.fail(w, r, fault.New(fault.Invalid, "invalid", "Last-Event-ID: want an event id").WithField("Last-Event-ID"))
			return
		}
		after = n
	}
	sub := bus.Subscribe(256)
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := &eventStream{w: w, rc: http.NewResponseController(w), after: after}
	for _, ev := range bus.Recent() {
		if err := st.send(ev); err != nil {
			return
		}
	}
	if _, err := fmt.Fprint(w, ": stream open\n\n"); err != nil || st.rc.Flush() != nil {
		return
	}
	st.follow(r, sub)
}

// eventStream writes events to one client, each at most once and in order.
type eventStream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	after uint64 // the last event id sent (or named by Last-Event-ID)
}

// send writes ev unless the client already has it.
func (st *eventStream) send(ev events.Event) error {
	if ev.Seq <= st.after {
		return nil
	}
	st.after = ev.Seq
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if _, err := fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}

// follow writes each new event of sub, and a ping when idle, until the
// request ends or a write fails.
func (st *eventStream) follow(r *http.Request, sub *events.Subscription) {
	ping := time.NewTicker(eventPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := fmt.Fprint(st.w, ": ping\n\n"); err != nil {
				return
			}
		case ev := <-sub.C:
			if err := st.send(ev); err != nil {
				return
			}
		}
		if err := st.rc.Flush(); err != nil {
			return
		}
	}
}
