package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/warrenhq/warren/sessions/errs"
)

// lostConn wraps one connection unreachable made, so that a connection
// that broke under a call (the server stopped or restarted while it sat
// idle in the pool) fails with the same coded error as a failed connect,
// saying honestly what became of the call. pgx hands such failures out
// bare ("write: broken pipe", "unexpected EOF", "conn closed"), and turns
// them into driver.ErrBadConn only for a plain statement that was never
// sent: a BEGIN, a statement in a transaction or a commit were not
// covered, and pgx skips its reuse ping on a connection used within the
// last second.
//
// Where nothing was done and the call may start over, the error also
// matches driver.ErrBadConn, so database/sql retries it on another
// connection and, with every one broken, on a new one, which fails in
// Connect (or works, if the server is back); on a connection the caller
// holds (sql.Conn) it is the coded error the caller sees.
type lostConn struct {
	driver.Conn
	c    unreachable
	inTx bool // a transaction is open: PostgreSQL rolls it back if the connection breaks
}

var (
	_ driver.ExecerContext      = (*lostConn)(nil)
	_ driver.QueryerContext     = (*lostConn)(nil)
	_ driver.ConnPrepareContext = (*lostConn)(nil)
	_ driver.ConnBeginTx        = (*lostConn)(nil)
	_ driver.NamedValueChecker  = (*lostConn)(nil)
	_ driver.Pinger             = (*lostConn)(nil)
	_ driver.SessionResetter    = (*lostConn)(nil)
	_ driver.Validator          = (*lostConn)(nil)
)

// outcome is what a call that lost its connection did.
type outcome int

const (
	nothingDone outcome = iota // not sent, or undone by PostgreSQL: retry
	maybeDone                  // sent outside a transaction, or COMMIT sent: unknown
)

// broken turns err, the failure of a call on c, into the coded error when
// the connection itself failed. A call the caller cancelled, and errors
// PostgreSQL answered on a connection that lives on, stay as they are.
func (c *lostConn) broken(ctx context.Context, err error, sent outcome, what string) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	// pgx answers driver.ErrBadConn for a statement it did not send.
	retry := pgconn.SafeToRetry(err) || errors.Is(err, driver.ErrBadConn)
	if !c.closed() && !retry {
		return err
	}
	if retry {
		sent = nothingDone
	}
	if sent == maybeDone {
		return errs.Wrap(errs.Unavailable, err, fmt.Sprintf("lost the connection to the %s during %s (%s): "+
			"it may or may not have been kept; check before retrying", c.c.where, what, redactedError(err, c.c.url)))
	}
	cause := err
	if !c.inTx {
		cause = errors.Join(driver.ErrBadConn, err) // database/sql may start over on another connection
	}
	return errs.Wrap(errs.Unavailable, cause, fmt.Sprintf("cannot reach the %s (%s): nothing was changed; retry once it is back",
		c.c.where, redactedError(err, c.c.url)))
}

// closed reports whether pgx closed the connection (it does on every
// failure of the connection itself, and on a FATAL from the server).
func (c *lostConn) closed() bool {
	if pc, ok := c.Conn.(interface{ Conn() *pgx.Conn }); ok {
		return pc.Conn().IsClosed()
	}
	return false
}

func (c *lostConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *lostConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, c.broken(ctx, err, nothingDone, "a prepare")
	}
	return &lostStmt{st, c}, nil
}

// lostStmt runs a prepared statement of a lostConn: pgx runs it on its
// own connection, not through lostConn's ExecContext.
type lostStmt struct {
	driver.Stmt
	c *lostConn
}

func (s *lostStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	return r, s.c.broken(ctx, err, s.c.sent(), "a statement")
}

func (s *lostStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	return r, s.c.broken(ctx, err, s.c.sent(), "a statement")
}

func (c *lostConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, c.broken(ctx, err, c.sent(), "a statement")
}

func (c *lostConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	return r, c.broken(ctx, err, c.sent(), "a statement")
}

// sent is what a statement that was sent did: in a transaction nothing
// (PostgreSQL rolls it back), on its own it may have been kept.
func (c *lostConn) sent() outcome {
	if c.inTx {
		return nothingDone
	}
	return maybeDone
}

func (c *lostConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx: a BEGIN that failed changed nothing, whether sent or not.
func (c *lostConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, c.broken(ctx, err, nothingDone, "BEGIN")
	}
	c.inTx = true
	return &lostTx{tx, c, ctx}, nil
}

func (c *lostConn) CheckNamedValue(v *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *lostConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *lostConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *lostConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// lostTx ends a transaction of a lostConn: a COMMIT that was sent before
// the connection broke may have been applied.
type lostTx struct {
	driver.Tx
	c   *lostConn
	ctx context.Context // BeginTx's, which pgx's commit uses too
}

func (t *lostTx) Commit() error {
	err := t.Tx.Commit()
	t.c.inTx = false
	return t.c.broken(t.ctx, err, maybeDone, "COMMIT")
}

func (t *lostTx) Rollback() error {
	err := t.Tx.Rollback()
	t.c.inTx = false
	return t.c.broken(t.ctx, err, nothingDone, "ROLLBACK")
}
