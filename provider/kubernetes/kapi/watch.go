package kapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Event is one event of a watch. Object is the object as sent; for an
// ERROR event it is a Status, turned into Err.
type Event struct {
	Type   string // ADDED, MODIFIED, DELETED, BOOKMARK
	Object json.RawMessage
	Err    *StatusError
}

// Watch opens a watch of the collection at path (a list path, e.g.
// /api/v1/namespaces/ns/pods) from resourceVersion rv, with bookmarks, and
// calls fn for each event until the server ends the stream, ctx ends or
// fn returns an error. An ERROR event ends the watch with its status as
// the error (410 Gone: rv is too old, list again).
func (c *Client) Watch(ctx context.Context, path, rv string, fn func(Event) error) error {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	full := path + sep + "watch=1&allowWatchBookmarks=true&resourceVersion=" + rv
	res, err := c.send(ctx, c.stream, http.MethodGet, full, "", nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return statusOf(http.MethodGet, path, res.StatusCode, b)
	}
	dec := json.NewDecoder(res.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if err == io.EOF || ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watch %s: %w", path, err)
		}
		out := Event{Type: ev.Type, Object: ev.Object}
		if ev.Type == "ERROR" {
			s := statusOf(http.MethodGet, path, 0, ev.Object)
			var st status
			if json.Unmarshal(ev.Object, &st) == nil {
				s.Code = st.Code
			}
			return s
		}
		if err := fn(out); err != nil {
			return err
		}
	}
}

// Reflect keeps a copy of the collection at path current until ctx ends:
// it lists it (reset gets the items), then watches from the list's
// resourceVersion (event gets each change but bookmarks), and follows
// the stream from the last version seen when the server ends it. It lists
// again when the server says that version is gone (410) and, after a
// backoff (200ms doubling to 10s), when a call fails; failed gets each
// such error.
func (c *Client) Reflect(ctx context.Context, path string, reset func([]json.RawMessage) error,
	event func(Event) error, failed func(error)) {
	wait := 200 * time.Millisecond
	for ctx.Err() == nil {
		var l List
		err := c.Do(ctx, http.MethodGet, path, "", nil, &l)
		if err == nil {
			err = reset(l.Items)
		}
		if err == nil {
			wait = 200 * time.Millisecond
			rv := l.Metadata.ResourceVersion
			for err == nil && ctx.Err() == nil {
				err = c.Watch(ctx, path, rv, func(ev Event) error {
					var m struct {
						Metadata Meta `json:"metadata"`
					}
					if err := json.Unmarshal(ev.Object, &m); err != nil {
						return fmt.Errorf("watch %s: decode an event: %w", path, err)
					}
					rv = m.Metadata.ResourceVersion
					if ev.Type == "BOOKMARK" {
						return nil
					}
					return event(ev)
				})
			}
			if IsGone(err) {
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		failed(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}
