package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Bounds of the events kept for stream resumption. mcp-go records every
// message of a POST's SSE stream (progress notifications, the response) in
// the event store before writing it; its own store keeps them for the life
// of the MCP session, so a command printing 1 GB with a progress token left
// gigabytes in memory. These bounds keep only a recent window: enough to
// resume a stream that broke a moment ago, never the history.
const (
	eventsPerSession = 1 << 20  // bytes kept per MCP session
	eventsTotal      = 32 << 20 // bytes kept for all sessions together
	eventsMaxAge     = time.Minute
)

// eventStore is a bounded server.EventStore: per MCP session and in total it
// keeps at most a number of bytes, and no event older than maxAge; the
// oldest go first. A client resuming from an event that was dropped gets
// mcp-go's "Unknown Last-Event-ID" (400) and starts over, instead of the
// server keeping everything in case it asks.
type eventStore struct {
	perSession, total int64
	maxAge            time.Duration
	now               func() time.Time

	// mu protects the fields below.
	mu       sync.Mutex
	seq      int64
	bytes    int64
	sessions map[string]*eventLog
	sweeping *time.Timer // set while events are kept: drops them as they age
}

// eventLog is one MCP session's events, oldest first.
type eventLog struct {
	events []keptEvent
	bytes  int64
}

type keptEvent struct {
	id     int64
	stream string
	msg    json.RawMessage
	at     time.Time
}

var _ server.EventStore = (*eventStore)(nil)

func newEventStore(perSession, total int64, maxAge time.Duration) *eventStore {
	return &eventStore{perSession: perSession, total: total, maxAge: maxAge, now: time.Now,
		sessions: map[string]*eventLog{}}
}

// StoreEvent keeps message as the next event of streamID and returns its id.
func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := s.seq
	size := int64(len(message))
	if size > s.perSession || size > s.total {
		// Too big to keep at all: delivered live, not resumable.
		return strconv.FormatInt(id, 10), nil
	}
	log := s.sessions[sessionID]
	if log == nil {
		log = &eventLog{}
		s.sessions[sessionID] = log
	}
	// Copy: mcp-go may reuse the buffer.
	log.events = append(log.events, keptEvent{id: id, stream: streamID, msg: append(json.RawMessage(nil), message...), at: s.now()})
	log.bytes += size
	s.bytes += size
	for log.bytes > s.perSession {
		s.dropOldest(sessionID, log)
	}
	for s.bytes > s.total {
		s.dropGloballyOldest()
	}
	s.expireLocked()
	s.sweepLater()
	return strconv.FormatInt(id, 10), nil
}

// ReplayEventsAfter sends the events kept after lastEventID on its stream.
func (s *eventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	last, err := strconv.ParseInt(lastEventID, 10, 64)
	s.mu.Lock()
	s.expireLocked()
	log := s.sessions[sessionID]
	i := -1
	if err == nil && log != nil {
		for k, ev := range log.events {
			if ev.id == last {
				i = k
				break
			}
		}
	}
	if i < 0 {
		s.mu.Unlock()
		return "", fmt.Errorf("%w: %s (events are kept for %s, at most %d bytes per session)",
			server.ErrUnknownEventID, lastEventID, s.maxAge, s.perSession)
	}
	stream := log.events[i].stream
	var tail []keptEvent
	for _, ev := range log.events[i+1:] {
		if ev.stream == stream {
			tail = append(tail, ev)
		}
	}
	s.mu.Unlock()
	for _, ev := range tail {
		if err := send(strconv.FormatInt(ev.id, 10), ev.msg); err != nil {
			return "", err
		}
	}
	return stream, nil
}

// PurgeSession drops every event of the session: mcp-go calls it when the
// session is deleted, idles out or the server shuts down.
func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if log := s.sessions[sessionID]; log != nil {
		s.bytes -= log.bytes
		delete(s.sessions, sessionID)
	}
	return nil
}

func (s *eventStore) dropOldest(sessionID string, log *eventLog) {
	ev := log.events[0]
	log.events[0] = keptEvent{} // let the message go
	log.events = log.events[1:]
	log.bytes -= int64(len(ev.msg))
	s.bytes -= int64(len(ev.msg))
	if len(log.events) == 0 {
		delete(s.sessions, sessionID)
	}
}

// dropGloballyOldest drops the oldest event of all sessions. The scan is
// over sessions that have events, a few hundred at most.
func (s *eventStore) dropGloballyOldest() {
	var oldest string
	var log *eventLog
	for id, l := range s.sessions {
		if log == nil || l.events[0].id < log.events[0].id {
			oldest, log = id, l
		}
	}
	if log != nil {
		s.dropOldest(oldest, log)
	}
}

// expireLocked drops events older than maxAge.
func (s *eventStore) expireLocked() {
	cutoff := s.now().Add(-s.maxAge)
	for id, log := range s.sessions {
		for len(log.events) > 0 && log.events[0].at.Before(cutoff) {
			s.dropOldest(id, log)
			if s.sessions[id] == nil {
				break
			}
		}
	}
}

// sweepLater makes sure kept events are dropped once they age, even if no
// new event comes to trigger it: a client that leaves without deleting its
// session must not leave its events behind for the session's idle time.
func (s *eventStore) sweepLater() {
	if s.sweeping != nil || s.bytes == 0 {
		return
	}
	s.sweeping = time.AfterFunc(s.maxAge/2, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.sweeping = nil
		s.expireLocked()
		s.sweepLater()
	})
}
