package mcp

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// sessionOwners binds every MCP session id (Mcp-Session-Id) to the user who
// opened it. mcp-go's default session ids are not checked at all: a leaked
// id let another user's token read the session's live output (its POSTs
// drained the session's notification channel) and end it with DELETE. Here
// an id is known only to its owner: for anyone else, and once it ended, it
// does not exist (404).
//
// With replicas (SharedSessions set), the ids are also kept in the
// database and every request's id is looked up there (one indexed read):
// a session opened on one replica is known on every other, and one ended
// on any is ended on all at once.
type sessionOwners struct {
	shared SharedSessions // nil: this server alone
	// mu protects owner.
	mu    sync.Mutex
	owner map[string]ownerEntry // session id -> its user
}

// ownerEntry is what a replica knows of an MCP session.
type ownerEntry struct {
	user string
	// client is what the client said of itself at initialize, as another
	// replica recorded it (sharedClient JSON); "" for sessions opened here.
	client string
}

// SharedSessions keeps MCP session ids where every replica finds them
// (sessions.MCPSessions, in PostgreSQL): bounded, owner-bound, expiring.
type SharedSessions interface {
	Put(ctx context.Context, id, owner string) error
	// Owner returns the session's owner ("" if unknown or expired) and
	// what SetClient recorded.
	Owner(ctx context.Context, id string) (owner, client string, err error)
	SetClient(ctx context.Context, id, client string) error
	Delete(ctx context.Context, id string) error
}

func newSessionOwners(shared SharedSessions) *sessionOwners {
	return &sessionOwners{shared: shared, owner: map[string]ownerEntry{}}
}

// owns reports whether user opened session id and it has not ended.
func (o *sessionOwners) owns(id, user string) bool {
	if id == "" || user == "" {
		return false
	}
	o.mu.Lock()
	known, ok := o.owner[id]
	o.mu.Unlock()
	if o.shared == nil {
		return ok && known.user == user
	}
	if len(id) > maxSessionIDLen {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owner, client, err := o.shared.Owner(ctx, id)
	if err != nil {
		return ok && known.user == user // the database is away: what this replica knows still holds
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if owner == "" {
		delete(o.owner, id) // ended or expired, here or on another replica
		return false
	}
	o.owner[id] = ownerEntry{user: owner, client: client}
	return owner == user
}

// maxSessionIDLen bounds the Mcp-Session-Id looked up in the database:
// warren's ids are 43 bytes.
const maxSessionIDLen = 128

// ResolveSessionIdManager implements server.SessionIdManagerResolver: the
// manager it returns acts for the request's user. mcp-go calls it with a nil
// request from its idle sweeper and at shutdown: that one may only end
// sessions.
func (o *sessionOwners) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	m := ownerManager{o: o}
	if r != nil {
		m.user = UserFrom(r.Context())
	}
	return m
}

// ownerManager is the server.SessionIdManager of one user.
type ownerManager struct {
	o    *sessionOwners
	user string // "": the server itself (sweeper, shutdown)
}

var errUnknownSession = errors.New("unknown MCP session: it ended, expired or belongs to someone else; initialize a new one")

// Generate opens a session for the user.
func (m ownerManager) Generate() string {
	id := "mcp-session-" + rand.Text() // 130 random bits
	if m.user == "" {
		// Not reached: initialize always comes with a request. An id that
		// nobody owns is refused on its first use.
		return id
	}
	m.o.mu.Lock()
	m.o.owner[id] = ownerEntry{user: m.user}
	m.o.mu.Unlock()
	if m.o.shared != nil {
		// Without the row the session goes on here, and another replica
		// answers 404: the client initializes again there.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.o.shared.Put(ctx, id, m.user)
		cancel()
	}
	return id
}

// Validate accepts only the user's own live sessions; an ended session is
// unknown, which mcp-go answers with 404 as the specification asks.
func (m ownerManager) Validate(id string) (isTerminated bool, err error) {
	if m.user == "" || !m.o.owns(id, m.user) {
		return false, errUnknownSession
	}
	return false, nil
}

// Terminate ends a session. requireOwnSession has already refused ids the
// user does not own; the server (user "") may end any.
// With replicas, the server's own ending (its idle sweep: the client may
// be using another replica) forgets the session here only; the database's
// row expires by itself unless used.
func (m ownerManager) Terminate(id string) (isNotAllowed bool, err error) {
	m.o.mu.Lock()
	if owner, ok := m.o.owner[id]; ok && (m.user == "" || owner.user == m.user) {
		delete(m.o.owner, id)
	}
	m.o.mu.Unlock()
	if m.o.shared == nil || m.user == "" {
		return false, nil
	}
	// A client's DELETE: requireOwnSession made sure the user owns it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return false, m.o.shared.Delete(ctx, id)
}

// requireOwnSession answers 404 to a request that names an MCP session its
// user does not own, before mcp-go sees it: mcp-go does not validate the id
// of a GET or a DELETE, and would end or stream another user's session.
func (o *sessionOwners) requireOwnSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		switch {
		case id != "" && !o.owns(id, UserFrom(r.Context())):
			http.Error(w, "MCP session "+id+" not found: it ended, expired or was opened with another token; "+
				"initialize a new session", http.StatusNotFound)
			return
		case id == "" && r.Method == http.MethodDelete:
			http.Error(w, "DELETE needs the Mcp-Session-Id header of the session to end", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
