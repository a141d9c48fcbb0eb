package mcp

// The tests of this package open real SQLite databases.
import _ "github.com/ncruces/go-sqlite3/driver"
