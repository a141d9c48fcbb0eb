// Package transcript stores the agent's chats in SQLite: each chat's
// session, model and totals, the messages --resume replays, the events of
// every run (the stream-json schema), and the endpoint profiles that
// `warren chat doctor` measured. It owns its tables and applies its own
// embedded migrations.
package transcript

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/sessions/errs"
)

// ErrNotFound is returned for a chat that does not exist or is another
// user's.
var ErrNotFound = errs.New(errs.NotFound, "chat not found")

// Chat is one stored chat.
type Chat struct {
	ID       string       `json:"chat_id"`
	User     string       `json:"user"`
	Session  string       `json:"session_id"`
	Parent   string       `json:"parent_id,omitempty"`
	Model    string       `json:"model"`
	BaseURL  string       `json:"base_url"`
	Title    string       `json:"title"`
	Created  time.Time    `json:"created_at"`
	Updated  time.Time    `json:"updated_at"`
	Totals   agent.Totals `json:"totals"`
	Ended    string       `json:"ended,omitempty"`
	Messages int          `json:"-"`
}

// Store keeps chats. It is safe for concurrent use.
type Store struct{ db *sql.DB }

// Open applies the migrations and returns the store.
func Open(ctx context.Context, db *sql.DB) (*Store, error) {
	if err := migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate agent transcripts: %w", err)
	}
	return &Store{db: db}, nil
}

// NewID makes a chat id.
func NewID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "c-" + hex.EncodeToString(b)
}

// Create stores a new chat with its first messages.
func (s *Store) Create(ctx context.Context, c *Chat, msgs []provider.Message) error {
	now := time.Now()
	c.Created, c.Updated = now, now
	_, err := s.db.ExecContext(ctx, `INSERT INTO agent_chats (id, user_id, session_id, parent_id, model, base_url, title, created_ms, updated_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.ID, c.User, c.Session, c.Parent, c.Model, c.BaseURL, c.Title, now.UnixMilli(), now.UnixMilli())
	if err != nil {
		return fmt.Errorf("create chat: %w", err)
	}
	return s.Save(ctx, c, msgs, nil)
}

// Save writes the chat's totals and ending, replaces its messages and
// appends events, in one transaction.
func (s *Store) Save(ctx context.Context, c *Chat, msgs []provider.Message, events []agent.Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save chat: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	c.Updated = time.Now()
	t := c.Totals
	est := 0
	if t.Estimated {
		est = 1
	}
	if _, err := tx.ExecContext(ctx, `UPDATE agent_chats SET updated_ms = ?, turns = ?, input_tokens = ?, output_tokens = ?,
		cached_tokens = ?, cost_micros = ?, estimated = ?, ended = ?, title = ? WHERE id = ?`,
		c.Updated.UnixMilli(), t.Turns, t.InputTokens, t.OutputTokens, t.CachedTokens, t.CostMicros, est, c.Ended, c.Title, c.ID); err != nil {
		return fmt.Errorf("save chat: %w", err)
	}
	if msgs != nil {
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_messages WHERE chat_id = ?`, c.ID); err != nil {
			return fmt.Errorf("save messages: %w", err)
		}
		for i, m := range msgs {
			if len(m.Images) > 0 {
				// Pictures are not kept: megabytes each, and the workspace
				// has them. A resumed chat has the note, not the picture.
				m.Content += fmt.Sprintf(" [%d image(s) shown to the model then, not kept in the transcript]", len(m.Images))
				m.Images = nil
			}
			b, _ := json.Marshal(m)
			if _, err := tx.ExecContext(ctx, `INSERT INTO agent_messages (chat_id, seq, body) VALUES (?, ?, ?)`, c.ID, i, string(b)); err != nil {
				return fmt.Errorf("save messages: %w", err)
			}
		}
	}
	if len(events) > 0 {
		var next int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq) + 1, 0) FROM agent_events WHERE chat_id = ?`, c.ID).Scan(&next); err != nil {
			return fmt.Errorf("save events: %w", err)
		}
		for i, e := range events {
			b, _ := json.Marshal(e)
			if _, err := tx.ExecContext(ctx, `INSERT INTO agent_events (chat_id, seq, body) VALUES (?, ?, ?)`, c.ID, next+i, string(b)); err != nil {
				return fmt.Errorf("save events: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save chat: %w", err)
	}
	return nil
}

const chatColumns = `id, user_id, session_id, parent_id, model, base_url, title, created_ms, updated_ms, turns, input_tokens,
	output_tokens, cached_tokens, cost_micros, estimated, ended`

func scanChat(row interface{ Scan(...any) error }) (*Chat, error) {
	var c Chat
	var created, updated int64
	var est int
	err := row.Scan(&c.ID, &c.User, &c.Session, &c.Parent, &c.Model, &c.BaseURL, &c.Title, &created, &updated, &c.Totals.Turns,
		&c.Totals.InputTokens, &c.Totals.OutputTokens, &c.Totals.CachedTokens, &c.Totals.CostMicros, &est, &c.Ended)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read chat: %w", err)
	}
	c.Created, c.Updated, c.Totals.Estimated = time.UnixMilli(created), time.UnixMilli(updated), est != 0
	return &c, nil
}

// Get returns user's chat id; "" means the user's latest chat.
func (s *Store) Get(ctx context.Context, user, id string) (*Chat, error) {
	if id == "" {
		return scanChat(s.db.QueryRowContext(ctx, `SELECT `+chatColumns+` FROM agent_chats WHERE user_id = ? ORDER BY updated_ms DESC, rowid DESC LIMIT 1`, user))
	}
	return scanChat(s.db.QueryRowContext(ctx, `SELECT `+chatColumns+` FROM agent_chats WHERE user_id = ? AND id = ?`, user, id))
}

// List returns user's chats, newest first.
func (s *Store) List(ctx context.Context, user string) ([]*Chat, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+chatColumns+` FROM agent_chats WHERE user_id = ? ORDER BY updated_ms DESC, rowid DESC`, user)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	var out []*Chat
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Messages returns what --resume replays.
func (s *Store) Messages(ctx context.Context, chatID string) ([]provider.Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM agent_messages WHERE chat_id = ? ORDER BY seq`, chatID)
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	defer rows.Close()
	var out []provider.Message
	for rows.Next() {
		var body string
		var m provider.Message
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return nil, fmt.Errorf("read messages: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Events returns a chat's events in order.
func (s *Store) Events(ctx context.Context, chatID string) ([]agent.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM agent_events WHERE chat_id = ? ORDER BY seq`, chatID)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	var out []agent.Event
	for rows.Next() {
		var body string
		var e agent.Event
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// SaveProfile stores what doctor measured.
func (s *Store) SaveProfile(ctx context.Context, p provider.Profile) error {
	b, _ := json.Marshal(p)
	_, err := s.db.ExecContext(ctx, `INSERT INTO agent_profiles (base_url, model, body, probed_ms) VALUES (?, ?, ?, ?)
		ON CONFLICT (base_url, model) DO UPDATE SET body = excluded.body, probed_ms = excluded.probed_ms`,
		p.BaseURL, p.Model, string(b), time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("save profile: %w", err)
	}
	return nil
}

// Profile returns the stored profile of an endpoint and model, or the
// default profile and false.
func (s *Store) Profile(ctx context.Context, baseURL, model string) (provider.Profile, bool, error) {
	var body string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM agent_profiles WHERE base_url = ? AND model = ?`, baseURL, model).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return provider.DefaultProfile(baseURL, model), false, nil
	}
	if err != nil {
		return provider.Profile{}, false, fmt.Errorf("read profile: %w", err)
	}
	var p provider.Profile
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return provider.Profile{}, false, fmt.Errorf("read profile: %w", err)
	}
	return p, true, nil
}
