package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"reflect"
	"syscall"

	"github.com/ncruces/go-sqlite3"
	sqlite3driver "github.com/ncruces/go-sqlite3/driver"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/errs"
)

// On a full disk SQLite fails to write, and says "disk I/O error": the
// driver's file layer does not recognise the ENOSPC that Go wraps in an
// *os.PathError, so the code is IOERR_WRITE and the cause is gone. Every
// store shares the one *sql.DB opened here, and its errors pass through
// the driver below on their way to the tools and the CLI: a failure that
// the file system holding the data directory explains becomes one coded
// error (unavailable) that says so, names the directory and says what to
// do, while errors.Is still finds SQLite's codes in it (sessions' state
// saver retries BUSY, for one).

// lowSpace is how little free space makes an I/O error of the database a
// full disk: a write of SQLite pages failed with less than this left.
const lowSpace = 1 << 20

// fullDisk recognises the database's write failures on a full disk, and
// its lock held too long by another writer (db_busy.go).
type fullDisk struct{ dir string }

// check returns err, or a coded error saying that the disk holding the
// data directory is full when that is why err happened.
func (f fullDisk) check(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sqlite3.BUSY) {
		return f.busy(err)
	}
	full := errors.Is(err, sqlite3.FULL) || errors.Is(err, syscall.ENOSPC)
	if !full && !errors.Is(err, sqlite3.IOERR) {
		return err
	}
	var st unix.Statfs_t
	if unix.Statfs(f.dir, &st) != nil {
		return err
	}
	avail := st.Bavail // root may also write into the reserved blocks
	if os.Geteuid() == 0 {
		avail = st.Bfree
	}
	free, size := int64(avail)*st.Bsize, int64(st.Blocks)*st.Bsize
	if !full && free >= lowSpace {
		return err
	}
	return errs.Wrap(errs.Unavailable, err, fmt.Sprintf(
		"the disk holding warren's data directory %s is full (%s free of %s; the database said %q): "+
			"free space on it, then retry; what warren acknowledged before is kept",
		f.dir, sessions.FormatBytes(free), sessions.FormatBytes(size), err.Error()))
}

// The driver's connector, connections, statements, transactions and rows,
// each passing its errors through fullDisk.check and offering the same
// optional interfaces as the ncruces driver's own, which database/sql
// looks for by type assertion.

type fullDiskConnector struct {
	driver.Connector
	disk fullDisk
}

func (c fullDiskConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, c.disk.check(err)
	}
	sc := conn.(sqlite3driver.Conn)
	// Replaces the DSN's busy_timeout (which covers opening) with the same
	// wait, counted (db_busy.go).
	if err := sc.Raw().BusyHandler(busyWait); err != nil {
		sc.Close()
		return nil, err
	}
	return &fullDiskConn{conn: sc, disk: c.disk}, nil
}

type fullDiskConn struct {
	conn sqlite3driver.Conn
	disk fullDisk
}

var (
	_ sqlite3driver.Conn       = (*fullDiskConn)(nil)
	_ driver.ExecerContext     = (*fullDiskConn)(nil)
	_ driver.NamedValueChecker = (*fullDiskConn)(nil)
)

// Raw is the SQLite connection, for sql.Conn.Raw (backups, checkpoints).
func (c *fullDiskConn) Raw() *sqlite3.Conn { return c.conn.Raw() }

func (c *fullDiskConn) Close() error { return c.disk.check(c.conn.Close()) }

func (c *fullDiskConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *fullDiskConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.disk.check(err)
	}
	return &fullDiskStmt{Stmt: s, disk: c.disk}, nil
}

func (c *fullDiskConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fullDiskConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.disk.check(err)
	}
	return fullDiskTx{tx: tx, disk: c.disk}, nil
}

func (c *fullDiskConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, c.disk.check(err)
}

func (c *fullDiskConn) CheckNamedValue(arg *driver.NamedValue) error {
	return c.conn.(driver.NamedValueChecker).CheckNamedValue(arg)
}

type fullDiskTx struct {
	tx   driver.Tx
	disk fullDisk
}

func (t fullDiskTx) Commit() error   { return t.disk.check(t.tx.Commit()) }
func (t fullDiskTx) Rollback() error { return t.disk.check(t.tx.Rollback()) }

type fullDiskStmt struct {
	driver.Stmt
	disk fullDisk
}

var (
	_ driver.StmtExecContext   = (*fullDiskStmt)(nil)
	_ driver.StmtQueryContext  = (*fullDiskStmt)(nil)
	_ driver.NamedValueChecker = (*fullDiskStmt)(nil)
)

func (s *fullDiskStmt) Close() error { return s.disk.check(s.Stmt.Close()) }

// Exec and Query make a driver.Stmt; database/sql calls the context
// variants below.
func (s *fullDiskStmt) Exec(args []driver.Value) (driver.Result, error) {
	r, err := s.Stmt.Exec(args)
	return r, s.disk.check(err)
}

func (s *fullDiskStmt) Query(args []driver.Value) (driver.Rows, error) {
	r, err := s.Stmt.Query(args)
	if err != nil {
		return nil, s.disk.check(err)
	}
	return &fullDiskRows{rows: r, disk: s.disk}, nil
}

func (s *fullDiskStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	return r, s.disk.check(err)
}

func (s *fullDiskStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, s.disk.check(err)
	}
	return &fullDiskRows{rows: r, disk: s.disk}, nil
}

func (s *fullDiskStmt) CheckNamedValue(arg *driver.NamedValue) error {
	return s.Stmt.(driver.NamedValueChecker).CheckNamedValue(arg)
}

type fullDiskRows struct {
	rows driver.Rows
	disk fullDisk
}

var (
	_ driver.RowsColumnTypeDatabaseTypeName = (*fullDiskRows)(nil)
	_ driver.RowsColumnTypeNullable         = (*fullDiskRows)(nil)
	_ driver.RowsColumnTypeScanType         = (*fullDiskRows)(nil)
)

func (r *fullDiskRows) Columns() []string { return r.rows.Columns() }
func (r *fullDiskRows) Close() error      { return r.disk.check(r.rows.Close()) }

// Next passes io.EOF, the end of the rows, as it is: check leaves every
// error but SQLite's I/O failures alone.
func (r *fullDiskRows) Next(dest []driver.Value) error { return r.disk.check(r.rows.Next(dest)) }

func (r *fullDiskRows) ColumnTypeDatabaseTypeName(i int) string {
	return r.rows.(driver.RowsColumnTypeDatabaseTypeName).ColumnTypeDatabaseTypeName(i)
}

func (r *fullDiskRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	return r.rows.(driver.RowsColumnTypeNullable).ColumnTypeNullable(i)
}

func (r *fullDiskRows) ColumnTypeScanType(i int) reflect.Type {
	return r.rows.(driver.RowsColumnTypeScanType).ColumnTypeScanType(i)
}
