package mcp

import (
	"crypto/rand"
	"errors"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// sessionOwners binds every MCP session id (Mcp-Session-Id) to the user who
// opened it. mcp-go's default session ids are not checked at all: a leaked
// id let another user's token read the session's live output (its POSTs
// drained the session's notification channel) and end it with DELETE. Here
// an id is known only to its owner: for anyone else, and once it ended, it
// does not exist (404).
type sessionOwners struct {
	// mu protects owner.
	mu    sync.Mutex
	owner map[string]string // session id -> user
}

func newSessionOwners() *sessionOwners {
	return &sessionOwners{owner: map[string]string{}}
}

// owns reports whether user opened session id and it has not ended.
func (o *sessionOwners) owns(id, user string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.owner[id]
	return ok && owner == user
}

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
	m.o.owner[id] = m.user
	m.o.mu.Unlock()
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
func (m ownerManager) Terminate(id string) (isNotAllowed bool, err error) {
	m.o.mu.Lock()
	defer m.o.mu.Unlock()
	if owner, ok := m.o.owner[id]; ok && (m.user == "" || owner == m.user) {
		delete(m.o.owner, id)
	}
	return false, nil
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
