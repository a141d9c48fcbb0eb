package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// Protocol revision 2026-07-28 over streamable HTTP: every request carries
// the revision in an envelope (_meta io.modelcontextprotocol/protocolVersion)
// and there are no MCP sessions. mcp-go refuses (400) any POST whose
// Mcp-Protocol-Version header names that revision and whose body has no
// envelope. Real clients send two such messages: the official Go SDK
// (v1.8.0) posts notifications/cancelled and logging/setLevel bare, and
// treats the 400 as the end of its connection, so a user's first cancelled
// call cost the whole client session. modernCompat answers these two
// itself, before mcp-go:
//
//   - notifications/cancelled, with or without the envelope: 202 and
//     nothing more. On this revision closing the request's stream is the
//     cancellation (the server treats the disconnect as one, and warren
//     interrupts the command); the notification is a courtesy that, with no
//     session, names a request id that only its user could tell apart from
//     another user's, so it is never used to cancel anything.
//   - logging/setLevel, with or without the envelope: the revision moved the
//     level into each request's _meta (io.modelcontextprotocol/logLevel),
//     and mcp-go answers "method not found". warren keeps the level for the
//     user, and applies it to the user's requests that do not name a level
//     of their own (notify.go).
//
// Other notifications without the envelope are accepted (202) and dropped:
// on a sessionless wire none of them has anything to act on. Requests
// without the envelope still reach mcp-go, which says what is missing.
func (s *Server) modernCompat(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := peekBody(r)
		if err != nil || len(body) > maxCompatBody {
			next.ServeHTTP(w, r)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta  *mcp.Meta        `json:"_meta"`
				Level mcp.LoggingLevel `json:"level"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method == "" {
			next.ServeHTTP(w, r) // a response, or not JSON: mcp-go answers
			return
		}
		enveloped := msg.Params.Meta.ProtocolVersion() != ""
		isNotification := len(msg.ID) == 0 || string(msg.ID) == "null"
		switch {
		case isNotification && (msg.Method == string(mcp.MethodNotificationCancelled) || !enveloped):
			w.WriteHeader(http.StatusAccepted)
		case !isNotification && msg.Method == string(mcp.MethodSetLogLevel):
			s.setUserLevel(w, r, msg.ID, msg.Params.Level)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// maxCompatBody: a notification or a logging/setLevel is small; larger
// bodies (write_file's contents) go to mcp-go without one more parse.
const maxCompatBody = 64 << 10

// setUserLevel answers logging/setLevel on the 2026-07-28 revision: the
// level is kept for the request's user.
func (s *Server) setUserLevel(w http.ResponseWriter, r *http.Request, id json.RawMessage, level mcp.LoggingLevel) {
	w.Header().Set("Content-Type", "application/json")
	reply := map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id}
	if _, known := levelRank[level]; !known {
		w.WriteHeader(http.StatusBadRequest)
		reply["error"] = map[string]any{"code": mcp.INVALID_PARAMS,
			"message": "invalid log level: use debug, info, notice, warning, error, critical, alert or emergency"}
		_ = json.NewEncoder(w).Encode(reply)
		return
	}
	s.deps.clientLevels.setUser(UserFrom(r.Context()), level)
	reply["result"] = map[string]any{"resultType": string(mcp.ResultTypeComplete)}
	_ = json.NewEncoder(w).Encode(reply)
}

// levelRank lists the levels logging/setLevel accepts.
var levelRank = map[mcp.LoggingLevel]int{
	mcp.LoggingLevelDebug: 0, mcp.LoggingLevelInfo: 1, mcp.LoggingLevelNotice: 2, mcp.LoggingLevelWarning: 3,
	mcp.LoggingLevelError: 4, mcp.LoggingLevelCritical: 5, mcp.LoggingLevelAlert: 6, mcp.LoggingLevelEmergency: 7,
}

// peekBody returns the request body, which readBody has already read into
// memory, and leaves it in place for the next handler.
func peekBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return nil, err
	}
	r.Body = readCloser{bytes.NewReader(buf.Bytes())}
	return buf.Bytes(), nil
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
